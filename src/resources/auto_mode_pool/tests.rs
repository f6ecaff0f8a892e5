use super::*;
use crate::resources::Kind;

fn pool(pairs: &[(&str, Value)]) -> Attrs {
    let mut a: Attrs = pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    a.entry("name".into()).or_insert(Value::str("train"));
    AutoModePool.normalize(&mut a);
    a
}

fn strs(v: &[&str]) -> Value {
    Value::List(v.iter().map(|s| Value::str(*s)).collect())
}

fn docs(a: &Attrs) -> Vec<serde_json::Value> {
    let m = AutoModePool.render("auto_mode_pool.train", a, &Attrs::new()).unwrap();
    assert_eq!(m.file, "auto-mode/train.yaml");
    m.yaml.split("---\n").filter(|d| !d.trim().is_empty()).map(|d| serde_yaml_ng::from_str(d).unwrap()).collect()
}

#[test]
fn a_reserved_pool_selects_its_block_and_fills_first() {
    let a = pool(&[
        ("node_role", Value::str("arn:aws:iam::111122223333:role/gpustack/s/nodes")),
        ("subnets", strs(&["subnet-0a"])),
        ("security_groups", strs(&["sg-0a"])),
        ("capacity_reservations", strs(&["cr-0123456789abcdef0"])),
        ("instance_types", strs(&["p5.48xlarge"])),
        ("gpu_limit", Value::Int(16)),
    ]);
    let d = docs(&a);
    assert_eq!(d[0]["apiVersion"], "eks.amazonaws.com/v1");
    assert_eq!(d[0]["kind"], "NodeClass");
    assert_eq!(d[0]["spec"]["role"], "nodes", "the role's name");
    assert_eq!(d[0]["spec"]["capacityReservationSelectorTerms"][0]["id"], "cr-0123456789abcdef0");
    assert_eq!(d[1]["kind"], "NodePool");
    let t = &d[1]["spec"]["template"]["spec"];
    assert_eq!(
        t["nodeClassRef"],
        serde_json::json!({"group": "eks.amazonaws.com", "kind": "NodeClass", "name": "train"})
    );
    assert_eq!(t["requirements"][0]["values"], serde_json::json!(["reserved"]));
    assert!(t["requirements"].as_array().unwrap().iter().any(|r| r["key"] == render::GPU_MANUFACTURER));
    // Review auto M1: a reserved pool lives as long as Auto Mode allows (not 336h, not a
    // Never Auto Mode does not keep) and drains within a grace period.
    assert_eq!(t["expireAfter"], "504h", "Auto Mode's ceiling, not Never nor 336h");
    assert_eq!(t["terminationGracePeriod"], DEFAULT_GRACE, "an expiring node must not drain forever");
    assert_eq!(d[1]["spec"]["weight"], 50);
    assert_eq!(d[1]["spec"]["limits"]["nvidia.com/gpu"], 16);
    assert_eq!(d[1]["spec"]["disruption"]["consolidationPolicy"], "WhenEmpty");
}

#[test]
fn a_burst_pool_is_spot_then_on_demand_below_reserved() {
    let a = pool(&[
        ("node_role", Value::str("nodes")),
        ("subnet_tags", Value::Table([("k".to_string(), Value::str("v"))].into())),
        ("security_groups", strs(&["sg-0a"])),
        ("capacity_types", strs(&["on-demand", "spot"])),
        ("instance_families", strs(&["g6e", "g6"])),
        ("gpu_names", strs(&["l40s", "l4"])),
        ("ephemeral_storage", Value::Table([("size_gib".to_string(), Value::Int(200))].into())),
    ]);
    let d = docs(&a);
    assert_eq!(d[0]["spec"]["subnetSelectorTerms"][0]["tags"]["k"], "v");
    assert!(d[0]["spec"].get("capacityReservationSelectorTerms").is_none());
    assert_eq!(d[0]["spec"]["ephemeralStorage"]["size"], "200Gi");
    let req = &d[1]["spec"]["template"]["spec"]["requirements"];
    assert_eq!(req[0]["values"], serde_json::json!(["spot", "on-demand"]));
    assert!(
        req.as_array()
            .unwrap()
            .iter()
            .any(|r| r["key"] == render::INSTANCE_FAMILY && r["values"] == serde_json::json!(["g6", "g6e"]))
    );
    assert!(
        req.as_array()
            .unwrap()
            .iter()
            .any(|r| r["key"] == render::GPU_NAME && r["values"] == serde_json::json!(["l4", "l40s"]))
    );
    assert_eq!(d[1]["spec"]["weight"], 20);
    assert_eq!(d[1]["spec"]["template"]["spec"]["expireAfter"], DEFAULT_EXPIRE_AFTER, "Auto Mode's own default");
}

#[test]
fn written_lifetimes_are_kept() {
    let a = pool(&[
        ("node_role", Value::str("nodes")),
        ("capacity_reservations", strs(&["cr-0123456789abcdef0"])),
        (
            "disruption",
            Value::Table(
                [("expire_after", Value::str("100h")), ("termination_grace_period", Value::str("5m"))]
                    .map(|(k, v)| (k.to_string(), v))
                    .into(),
            ),
        ),
    ]);
    let t = &docs(&a)[1]["spec"]["template"]["spec"];
    assert_eq!(t["expireAfter"], "100h");
    assert_eq!(t["terminationGracePeriod"], "5m");
}

#[test]
fn a_changed_reservation_changes_the_node_class_only() {
    let base = |cr: &str| {
        pool(&[
            ("node_role", Value::str("nodes")),
            ("subnets", strs(&["subnet-0a"])),
            ("security_groups", strs(&["sg-0a"])),
            ("capacity_reservations", strs(&[cr])),
        ])
    };
    let (a, b) = (docs(&base("cr-0aaaaaaaaaaaaaaaa")), docs(&base("cr-0bbbbbbbbbbbbbbbb")));
    assert_ne!(a[0], b[0]);
    assert_eq!(a[1], b[1]);
    let note = AutoModePool.update_note(&base("cr-0a"), &base("cr-0b"), &["capacity_reservations".into()]);
    assert!(note.unwrap().contains("drifts the pool's nodes"));
}
