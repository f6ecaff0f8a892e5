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
const BEHAVIORAL: &[&str] = &["weight", "gpu_limit", "limits", "name"];

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
    // Drift runs under the NodePool being applied: the new budgets when they change.
    let disruption = changed.iter().find(|(a, _)| *a == "disruption").and_then(|(_, v)| *v).or(old.get("disruption"));
    let pace_text = pace(disruption);
    let blocked = pace_text.starts_with("none");
    let pace = format!(", {pace_text}");
    let mut text = format!(
        "{address}: changing {} drifts its running nodes: Karpenter replaces every node the new spec no longer matches{pace} (Karpenter docs, concepts/disruption §Drift)",
        drifting.join(", ")
    );
    match table(old.get("disruption"), "termination_grace_period") {
        // Nodes keep the grace period they were launched with: the replacement of those
        // nodes still kills protected pods once it runs out.
        Some(tgp) if blocked => text.push_str(&format!(
            "; its nodes carry terminationGracePeriod {}, but none is drifted while that budget applies, so drift evicts no karpenter.sh/do-not-disrupt pod",
            tgp.interpolate()
        )),
        Some(tgp) => text.push_str(&format!(
            "; its nodes were launched with terminationGracePeriod {}, so pods with karpenter.sh/do-not-disrupt are evicted once it runs out: apply when the pool is idle, or first set budgets = [{{ nodes = \"1\" }}, {{ nodes = \"0\", reasons = [\"Drifted\"] }}] (keep a budget without reasons: Karpenter leaves a reason no budget names unlimited)",
            tgp.interpolate()
        )),
        None => text.push_str("; nodes running pods with karpenter.sh/do-not-disrupt wait for them"),
    }
    if reserved_only(old) {
        text.push_str(&format!("; {RESERVED_ROLL}"));
    }
    Some(text)
}

/// Review r18 m3: what a pool of reserved capacity only adds to "replaces every node". Drift
/// disrupts a node only when its pods can be scheduled elsewhere (kubernetes-sigs/karpenter
/// v1.14.1 `pkg/controllers/disruption/drift.go` `ComputeCommands`: a candidate is skipped,
/// with a "Blocked" event, unless `results.AllNonPendingPodsScheduled()`), and a reservation
/// in use has no free slot for a replacement.
pub const RESERVED_ROLL: &str = "a pool of reserved capacity only rolls only as its nodes empty: Karpenter drifts a node only when its pods fit elsewhere, and a reservation in use has no free slot for a replacement";

/// True when every capacity type the pool allows is "reserved".
pub fn reserved_only(inputs: &Attrs) -> bool {
    let l = inputs.get("capacity_types").and_then(Value::as_list).unwrap_or_default();
    !l.is_empty() && l.iter().all(|c| c.as_str() == Some("reserved"))
}

/// How many nodes Karpenter may drift at once under a pool's `disruption` (normalized or as
/// recorded), as "N at a time": the least `nodes` of the budgets that apply to `Drifted`,
/// those without `reasons` or naming it; none applies → no limit (kubernetes-sigs/karpenter
/// v1.14.1 `pkg/apis/v1/nodepool.go` `GetAllowedDisruptionsByReason`: `allowedNodes :=
/// math.MaxInt32`, lowered by each budget whose `Reasons == nil || lo.Contains(...)`). A
/// scheduled budget counts as if active ("at most"). The `budget` shorthand is one budget;
/// with neither, gpustack renders one of "1".
pub fn pace(disruption: Option<&Value>) -> String {
    let t = disruption.and_then(Value::as_table);
    let Some(budgets) = t.and_then(|t| t.get("budgets")).and_then(Value::as_list) else {
        let one = t.and_then(|t| t.get("budget")).map_or("1".into(), Value::interpolate);
        return at_a_time(&[one]);
    };
    let applies = |b: &&crate::value::Attrs| {
        b.get("reasons").and_then(Value::as_list).is_none_or(|r| r.iter().any(|x| x.as_str() == Some("Drifted")))
    };
    let nodes: Vec<String> = budgets
        .iter()
        .filter_map(Value::as_table)
        .filter(applies)
        .filter_map(|b| b.get("nodes").map(Value::interpolate))
        .collect();
    if nodes.is_empty() {
        return "all at once (no budget applies to Drifted)".into();
    }
    at_a_time(&nodes)
}

/// "1 at a time", "none while a budget of 0 applies", or the least of counts and percentages.
fn at_a_time(nodes: &[String]) -> String {
    let counts: Vec<i64> = nodes.iter().filter_map(|n| n.parse().ok()).collect();
    let percents: Vec<&String> = nodes.iter().filter(|n| n.parse::<i64>().is_err()).collect();
    let least_count = counts.iter().min();
    if least_count == Some(&0) {
        return "none at a time while a budget of 0 nodes applies to Drifted".into();
    }
    let least_percent = percents.iter().min_by_key(|p| p.trim_end_matches('%').parse::<i64>().unwrap_or(i64::MAX));
    match (least_count, least_percent) {
        (Some(c), None) => format!("{c} at a time"),
        (None, Some(p)) => format!("{p} of its nodes at a time"),
        (Some(c), Some(p)) => format!("at most {c} (and {p} of its nodes) at a time"),
        (None, None) => "1 at a time".into(),
    }
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
        // Review r18 m1: the advice keeps a reason-less budget, or Empty and Underutilized
        // become unlimited (kubernetes-sigs/karpenter v1.14.1 nodepool.go
        // GetAllowedDisruptionsByReason).
        assert!(w.contains(r#"set budgets = [{ nodes = "1" }, { nodes = "0", reasons = ["Drifted"] }]"#), "{w}");
    }

    /// Review r18 m3: a reserved-only pool's drift is blocked while its reservation has no
    /// free slot (core drift.go `AllNonPendingPodsScheduled`): the warning says it rolls only
    /// as nodes empty; other pools do not get that text.
    #[test]
    fn a_reserved_only_pool_rolls_as_nodes_empty() {
        let taints = Value::List(vec![]);
        let mut old = Attrs::from([("capacity_types".to_string(), Value::List(vec![Value::str("reserved")]))]);
        let w = warning("karpenter_pool.r", &old, &[("node_taints", Some(&taints))]).unwrap();
        assert!(w.contains(super::RESERVED_ROLL), "{w}");
        old.insert("capacity_types".into(), Value::List(vec![Value::str("reserved"), Value::str("on-demand")]));
        let w = warning("karpenter_pool.r", &old, &[("node_taints", Some(&taints))]).unwrap();
        assert!(!w.contains("rolls only as its nodes empty"), "{w}");
    }

    /// Review r18 m1: the pace comes from `budgets` when written: the least `nodes` of the
    /// budgets without reasons or naming Drifted (nodepool.go GetAllowedDisruptionsByReason).
    #[test]
    fn the_pace_is_the_least_budget_that_applies_to_drifted() {
        let budget = |nodes: &str, reasons: &[&str]| {
            let mut b = vec![("nodes".to_string(), Value::str(nodes))];
            if !reasons.is_empty() {
                b.push(("reasons".into(), Value::List(reasons.iter().map(|r| Value::str(*r)).collect())));
            }
            Value::Table(b.into_iter().collect())
        };
        let budgets = |l: Vec<Value>| Value::Table([("budgets".to_string(), Value::List(l))].into_iter().collect());
        assert_eq!(super::pace(None), "1 at a time");
        assert_eq!(super::pace(Some(&disruption(&[("budget", "20%")]))), "20% of its nodes at a time");
        let d = budgets(vec![budget("3", &[]), budget("2", &["Drifted"]), budget("0", &["Empty"])]);
        assert_eq!(super::pace(Some(&d)), "2 at a time");
        let d = budgets(vec![budget("1", &[]), budget("0", &["Drifted"])]);
        assert_eq!(super::pace(Some(&d)), "none at a time while a budget of 0 nodes applies to Drifted");
        let d = budgets(vec![budget("5", &["Empty", "Underutilized"])]);
        assert_eq!(super::pace(Some(&d)), "all at once (no budget applies to Drifted)");
        // The new budgets of the same change set the pace of the drift it causes.
        let old = Attrs::from([("disruption".to_string(), disruption(&[("budget", "1")]))]);
        let new = budgets(vec![budget("2", &[]), budget("1", &["Drifted"])]);
        let w = super::warning("karpenter_pool.p", &old, &[("node_taints", None), ("disruption", Some(&new))]).unwrap();
        assert!(w.contains(", 1 at a time"), "{w}");
        let new = budgets(vec![budget("4", &[])]);
        let w = super::warning("karpenter_pool.p", &old, &[("node_taints", None), ("disruption", Some(&new))]).unwrap();
        assert!(w.contains(", 4 at a time"), "{w}");
    }
}
