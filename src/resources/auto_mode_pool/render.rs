//! The two documents of an `auto_mode_pool` and its offline checks. The NodeClass fields are
//! the EKS User Guide's (`create-node-class`; aws-facts-auto-mode §6, vendored as
//! tests/k8s/schemas/eks.amazonaws.com_v1_nodeclass.yaml); the NodePool is Karpenter's v1,
//! built with `karpenter_pool::render`'s disruption, limits, taints and labels, and
//! requirements on Auto Mode's well-known labels (UG `create-node-pool`, "EKS Auto Mode
//! Supported Labels": "Labels related to EC2 managed instances start with eks.amazonaws.com").

use std::collections::BTreeMap;

use serde_json::{Map, Value as Json, json};

use super::{MAX_EXPIRE_HOURS, RESERVED_NAMES};
use crate::resources::karpenter_pool::render::{
    gpu_maker, list, node_labels, node_pool_document, role_name, strs, text,
};
use crate::resources::karpenter_pool::{CAPACITY_TYPES, checks, node_class, requirements, validate};
use crate::resources::node_group::require_stack_cluster;
use crate::resources::priority_class::dns_label;
use crate::resources::{Manifest, rendered, str_attr};
use crate::stack::expr::ExprKind;
use crate::stack::{Diagnostic, Expr, Resource};
use crate::value::{Attrs, Value};

/// Auto Mode's instance labels (UG `create-node-pool`, Supported Labels).
pub const INSTANCE_FAMILY: &str = "eks.amazonaws.com/instance-family";
pub const GPU_NAME: &str = "eks.amazonaws.com/instance-gpu-name";
pub const GPU_MANUFACTURER: &str = "eks.amazonaws.com/instance-gpu-manufacturer";

fn name(inputs: &Attrs) -> String {
    str_attr(inputs, "name").to_string()
}

/// `spec.ephemeralStorage` from `ephemeral_storage` (`size` as a quantity in Gi).
fn ephemeral_storage(inputs: &Attrs) -> Option<Json> {
    let t = inputs.get("ephemeral_storage")?.as_table()?;
    let mut m = Map::new();
    if let Some(size) = t.get("size_gib") {
        m.insert("size".into(), json!(format!("{}Gi", size.interpolate())));
    }
    for (k, f) in [("iops", "iops"), ("throughput", "throughput"), ("kms_key", "kmsKeyID")] {
        if let Some(v) = t.get(k) {
            m.insert(f.into(), node_class::json_of(v));
        }
    }
    (!m.is_empty()).then_some(Json::Object(m))
}

/// The NodeClass.
fn node_class(address: &str, inputs: &Attrs) -> Json {
    let mut spec = Map::new();
    spec.insert("role".into(), inputs.get("node_role").map_or(json!(""), role_name));
    spec.insert(
        "subnetSelectorTerms".into(),
        node_class::selector_terms(list(inputs, "subnets"), inputs.get("subnet_tags")),
    );
    spec.insert(
        "securityGroupSelectorTerms".into(),
        node_class::selector_terms(list(inputs, "security_groups"), inputs.get("security_group_tags")),
    );
    // "Capacity Blocks for ML always require capacityReservationSelectorTerms and are not used
    // automatically"; selected ODCRs are labelled `reserved` and preferred (UG `auto-odcr`).
    let reservations =
        node_class::selector_terms(list(inputs, "capacity_reservations"), inputs.get("capacity_reservation_tags"));
    if reservations.as_array().is_some_and(|a| !a.is_empty()) {
        spec.insert("capacityReservationSelectorTerms".into(), reservations);
    }
    if let Some(e) = ephemeral_storage(inputs) {
        spec.insert("ephemeralStorage".into(), e);
    }
    for (k, f) in [("network_policy", "networkPolicy"), ("snat_policy", "snatPolicy")] {
        if let Some(v) = inputs.get(k) {
            spec.insert(f.into(), text(v));
        }
    }
    json!({
        "apiVersion": "eks.amazonaws.com/v1",
        "kind": "NodeClass",
        "metadata": { "name": name(inputs), "labels": rendered::labels(address) },
        "spec": spec,
    })
}

/// Requirements on Auto Mode's labels: capacity types, instance types, families, GPU names,
/// and the GPU maker when every type the pool names is one maker's.
fn requirements(inputs: &Attrs) -> Json {
    let capacity: Vec<&str> = CAPACITY_TYPES
        .iter()
        .copied()
        .filter(|c| list(inputs, "capacity_types").iter().any(|v| v.as_str() == Some(*c)))
        .collect();
    let mut req = vec![json!({ "key": requirements::CAPACITY_TYPE, "operator": "In", "values": capacity })];
    let types = strs(inputs, "instance_types");
    if !types.is_empty() {
        req.push(json!({ "key": requirements::INSTANCE_TYPE, "operator": "In", "values": types }));
    }
    let families = strs(inputs, "instance_families");
    if !families.is_empty() {
        req.push(json!({ "key": INSTANCE_FAMILY, "operator": "In", "values": families }));
    }
    let names = strs(inputs, "gpu_names");
    if !names.is_empty() {
        req.push(json!({ "key": GPU_NAME, "operator": "In", "values": names }));
    }
    let named: Vec<&String> = types.iter().chain(&families).collect();
    if !named.is_empty() && named.iter().all(|t| gpu_maker(t) == Some("NVIDIA")) {
        req.push(json!({ "key": GPU_MANUFACTURER, "operator": "In", "values": ["nvidia"] }));
    }
    Json::Array(req)
}

/// The NodePool: Karpenter's, its class in the `eks.amazonaws.com` group.
fn node_pool(address: &str, inputs: &Attrs) -> Json {
    let node_class_ref = json!({ "group": "eks.amazonaws.com", "kind": "NodeClass", "name": name(inputs) });
    node_pool_document(address, inputs, node_class_ref, requirements(inputs), node_labels(inputs))
}

/// `auto-mode/<pool>.yaml`: the NodeClass, then the NodePool that refers to it.
pub fn manifest(address: &str, inputs: &Attrs) -> Manifest {
    let pool = address.rsplit('.').next().unwrap_or(address);
    let docs = [node_class(address, inputs), node_pool(address, inputs)];
    Manifest { file: format!("auto-mode/{pool}.yaml"), yaml: rendered::yaml_documents(&docs) }
}

/// Hours of a Karpenter duration (`336h`, `20h30m`), rounded down; None for `Never` or text
/// that is not one.
pub(super) fn hours(v: &str) -> Option<i64> {
    let mut total = 0i64;
    let mut n = String::new();
    for c in v.chars() {
        if c.is_ascii_digit() {
            n.push(c);
            continue;
        }
        let x: i64 = n.parse().ok()?;
        n.clear();
        total += match c {
            'h' => x * 3600,
            'm' => x * 60,
            's' => x,
            _ => return None,
        };
    }
    n.is_empty().then_some(total / 3600)
}

/// Every offline check of one pool: Karpenter's NodePool checks it shares with
/// `karpenter_pool`, and Auto Mode's own.
pub(super) fn validate(r: &Resource, d: &mut Vec<Diagnostic>) {
    require_stack_cluster(r, d);
    validate::check_numbers(r, d);
    validate::check_disruption(r, d);
    validate::check_labels(r, d);
    checks::check_limits(r, d);
    checks::check_selectors(r, d);
    let (pool_name, span) = match r.attrs.get("name") {
        Some(e) => (e.as_literal().and_then(Value::as_str).map(str::to_string), e.span.clone()),
        None => (Some(r.name.clone()), r.span.clone()),
    };
    if let Some(n) = &pool_name {
        if !dns_label(n) {
            d.push(
                Diagnostic::error(
                    format!("`{}`: \"{n}\" is not a valid Kubernetes object name", r.address),
                    span.clone(),
                )
                .help("use lowercase letters, digits and '-' (set name = \"...\" if the resource name has '_')"),
            );
        } else if r.attrs.contains_key("name") && RESERVED_NAMES.contains(&n.as_str()) {
            d.push(
                Diagnostic::error(format!("`{}`: \"{n}\" is the name of an Auto Mode built-in NodePool or NodeClass", r.address), span)
                    .help("name the pool otherwise (set name = \"gpu-...\"); built-in pools are chosen with eks_cluster.auto_mode.node_pools"),
            );
        }
    }
    let disruption = match r.attrs.get("disruption").map(|e| &e.kind) {
        Some(ExprKind::Table(t)) => Some(t),
        _ => None,
    };
    if let Some(e) = disruption.and_then(|t| t.get("expire_after"))
        && let Some(v) = e.as_literal().and_then(Value::as_str)
        && hours(v).is_none_or(|h| h > MAX_EXPIRE_HOURS)
        && validate::duration(v, true)
    {
        d.push(
            Diagnostic::warning(
                format!("`{}`: expire_after = \"{v}\" is longer than Auto Mode keeps a node (21 days)", r.address),
                e.span.clone(),
            )
            .help(format!("leave it out for Auto Mode's {} or write at most \"{MAX_EXPIRE_HOURS}h\": Auto Mode replaces its nodes by then regardless", super::DEFAULT_EXPIRE_AFTER)),
        );
    }
    if let Some(ExprKind::Table(t)) = r.attrs.get("ephemeral_storage").map(|e| &e.kind) {
        for (k, lo, hi, unit) in
            [("size_gib", 1, 59000, "GiB"), ("iops", 3000, 16000, ""), ("throughput", 125, 1000, "MiB/s")]
        {
            if let Some(e) = t.get(k)
                && let Some(n) = e.as_literal().and_then(Value::as_int)
                && !(lo..=hi).contains(&n)
            {
                d.push(
                    Diagnostic::error(
                        format!("`{}`: ephemeral_storage.{k} = {n} is outside {lo}–{hi}", r.address),
                        e.span.clone(),
                    )
                    .help(format!(
                        "the NodeClass takes {lo} to {hi}{} (EKS UG create-node-class)",
                        if unit.is_empty() { String::new() } else { format!(" {unit}") }
                    )),
                );
            }
        }
        gp3_ratios(r, t, d);
    }
}

/// Review auto m4: the volume is gp3, whose "maximum ratio of provisioned IOPS to provisioned
/// volume size is 500 IOPS per GiB" and "of provisioned throughput to provisioned IOPS is .25
/// MiB/s per IOPS" (EC2/EBS UG "General Purpose SSD volumes", gp3), beyond the 3000 IOPS and
/// 125 MiB/s every gp3 volume has; unwritten fields are the NodeClass defaults (80Gi, 3000,
/// 125: EKS UG create-node-class). Otherwise the NodeClaim fails only at launch.
fn gp3_ratios(r: &Resource, t: &BTreeMap<String, Expr>, d: &mut Vec<Diagnostic>) {
    let int = |k: &str| t.get(k).and_then(|e| e.as_literal()).and_then(Value::as_int);
    let written = |k: &str| t.get(k).is_some_and(|e| e.as_literal().is_some());
    if t.values().any(|e| e.as_literal().is_none()) {
        return;
    }
    let (size, iops, throughput) =
        (int("size_gib").unwrap_or(80), int("iops").unwrap_or(3000), int("throughput").unwrap_or(125));
    if written("iops") && iops > 3000 && iops > 500 * size {
        d.push(
            Diagnostic::error(
                format!("`{}`: ephemeral_storage.iops = {iops} is more than 500 per GiB of its {size} GiB", r.address),
                t.get("iops").and_then(|e| e.span.clone()),
            )
            .help(format!(
                "raise size_gib to at least {} or lower iops to {} (gp3: 500 IOPS per GiB)",
                (iops + 499) / 500,
                (500 * size).max(3000)
            )),
        );
    }
    if written("throughput") && throughput > 125 && throughput * 4 > iops {
        d.push(
            Diagnostic::error(
                format!("`{}`: ephemeral_storage.throughput = {throughput} MiB/s is more than 0.25 MiB/s per IOPS of its {iops} IOPS", r.address),
                t.get("throughput").and_then(|e| e.span.clone()),
            )
            .help(format!("raise iops to at least {} or lower throughput to {} (gp3: 0.25 MiB/s per IOPS)", throughput * 4, (iops / 4).max(125))),
        );
    }
}

#[cfg(test)]
mod unit {
    use super::hours;

    #[test]
    fn durations_read_as_hours() {
        assert_eq!(hours("336h"), Some(336));
        assert_eq!(hours("20h30m"), Some(20));
        assert_eq!(hours("Never"), None);
    }
}
