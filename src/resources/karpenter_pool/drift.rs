//! Which changes of a pool make Karpenter replace its running nodes (drift), for the plan's
//! warning. Karpenter hashes the NodePool's `spec.template` and the EC2NodeClass's spec and
//! marks a node drifted when its hash no longer matches; `weight`, `limits` and
//! `spec.disruption.*` are "behavioral fields … not considered for Drift", while a changed
//! `expireAfter` or `terminationGracePeriod` "will induce NodeClaim drift" (Karpenter docs
//! v1.14 `concepts/disruption.md` §Drift, §Expiration, §TerminationGracePeriod;
//! kubernetes-sigs/karpenter v1.14.1 `pkg/apis/v1/nodepool.go` `Hash()`). Pure: no plan types.

use crate::value::{Attrs, Value};

/// Pool inputs that only render behavioral fields (`spec.weight`, `spec.limits`,
/// `spec.disruption`): changing them replaces no node. `name` is a new NodePool, said by
/// the update note.
const BEHAVIORAL: &[&str] = &["weight", "gpu_limit", "name"];

/// The `disruption` entries that land in the template (`spec.template.spec`), and so drift.
const TEMPLATE_DISRUPTION: &[&str] = &["expire_after", "termination_grace_period"];

/// The warning for a pool in state whose inputs change from `old` to `changed` (attribute,
/// new value): None when no drift-hashed field changes.
pub fn warning(address: &str, old: &Attrs, changed: &[(&str, Option<&Value>)]) -> Option<String> {
    let table = |v: Option<&Value>, k: &str| v.and_then(Value::as_table).and_then(|t| t.get(k)).cloned();
    let mut drifting: Vec<String> = vec![];
    for (attr, new) in changed {
        if BEHAVIORAL.contains(attr) {
            continue;
        }
        if *attr == "disruption" {
            let moved = TEMPLATE_DISRUPTION.iter().filter(|k| table(old.get("disruption"), k) != table(*new, k));
            drifting.extend(moved.map(|k| format!("disruption.{k}")));
        } else {
            drifting.push((*attr).to_string());
        }
    }
    if drifting.is_empty() {
        return None;
    }
    let budget = old.get("disruption").and_then(Value::as_table).and_then(|t| t.get("budget"));
    let pace = budget.map_or(String::new(), |b| format!(", {} at a time", b.interpolate()));
    let mut text = format!(
        "{address}: changing {} drifts its running nodes: Karpenter replaces every node the new spec no longer matches{pace} (Karpenter docs, concepts/disruption §Drift)",
        drifting.join(", ")
    );
    match table(old.get("disruption"), "termination_grace_period") {
        // Nodes keep the grace period they were launched with: the replacement of those
        // nodes still kills protected pods once it runs out.
        Some(tgp) => text.push_str(&format!(
            "; its nodes were launched with terminationGracePeriod {}, so pods with karpenter.sh/do-not-disrupt are evicted once it runs out: apply when the pool is idle, or add a budget {{ nodes = 0, reasons = [\"Drifted\"] }} first",
            tgp.interpolate()
        )),
        None => text.push_str("; nodes running pods with karpenter.sh/do-not-disrupt wait for them"),
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::warning;
    use crate::value::{Attrs, Value};

    fn disruption(pairs: &[(&str, &str)]) -> Value {
        Value::Table(pairs.iter().map(|(k, v)| (k.to_string(), Value::str(*v))).collect())
    }

    /// Issue 18 item 3: the plan warns when a change will drift the running nodes of a pool,
    /// and not for behavioral fields (docs: "behavioral fields are not considered for Drift").
    #[test]
    fn template_and_node_class_changes_drift_behavioral_ones_do_not() {
        let old =
            Attrs::from([("disruption".to_string(), disruption(&[("budget", "1"), ("consolidate_after", "1h")]))]);
        let taints = Value::List(vec![]);
        let w = warning("karpenter_pool.train", &old, &[("node_taints", Some(&taints))]).unwrap();
        assert!(w.starts_with("karpenter_pool.train: changing node_taints drifts its running nodes"), "{w}");
        assert!(w.contains(", 1 at a time") && w.contains("do-not-disrupt wait for them"), "{w}");
        let n = Value::Int(32);
        assert_eq!(warning("karpenter_pool.train", &old, &[("gpu_limit", Some(&n)), ("weight", Some(&n))]), None);
        let consolidate = disruption(&[("budget", "1"), ("consolidate_after", "10m")]);
        assert_eq!(warning("karpenter_pool.train", &old, &[("disruption", Some(&consolidate))]), None);
        // Removing the 1h grace period drifts, and the old nodes keep theirs.
        let with_tgp = Attrs::from([("disruption".to_string(), disruption(&[("termination_grace_period", "1h")]))]);
        let w = warning("karpenter_pool.train", &with_tgp, &[("disruption", Some(&disruption(&[])))]).unwrap();
        assert!(w.contains("changing disruption.termination_grace_period drifts"), "{w}");
        assert!(w.contains("launched with terminationGracePeriod 1h"), "{w}");
    }
}
