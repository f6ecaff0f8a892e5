//! The YAML a pool renders, read back as data: what Karpenter will see. The CEL rules of the
//! EC2NodeClass CRD (which a JSON-schema check cannot run) are checked here on the EFA
//! layouts; tests/k8s/validate.py checks the rest of the schema in the integration tests.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use super::validate::{
    ami_version, budget_duration, budget_ok, cron_schedule, duration, label_value, restricted_label,
};
use super::*;
use crate::value::{Attrs, Value};

fn table(pairs: Vec<(&str, Value)>) -> Value {
    Value::Table(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
}

fn strs(items: &[&str]) -> Value {
    Value::List(items.iter().map(|s| Value::str(*s)).collect())
}

/// A reserved p5 pool on a Capacity Block, as the engine hands it over (normalized).
fn reserved() -> Attrs {
    let mut i: Attrs = [
        ("cluster", Value::str("k-main")),
        ("node_role", Value::str("arn:aws:iam::123456789012:role/gpustack/k/k-node")),
        ("subnets", strs(&["subnet-0b", "subnet-0a"])),
        ("security_groups", strs(&["sg-node"])),
        ("capacity_reservations", strs(&["cr-0123456789abcdef0"])),
        ("instance_types", strs(&["p5.48xlarge"])),
        ("gpu_limit", Value::Int(16)),
        ("ami", Value::str("bottlerocket@latest")),
        ("placement_group", Value::str("k-train")),
        ("efa", table(vec![("security_groups", strs(&["sg-efa"]))])),
        ("data_volume", table(vec![("size_gib", Value::Int(500)), ("snapshot", Value::str("snap-0abc"))])),
        (
            "gpu_sharing",
            table(vec![
                ("strategy", Value::str("mig")),
                ("mig_profile", table(vec![("h100.80gb", Value::str("1g.10gb"))])),
            ]),
        ),
        ("node_labels", table(vec![("gpustack.io/capacity", Value::str("reserved"))])),
        (
            "node_taints",
            Value::List(vec![table(vec![
                ("key", Value::str("nvidia.com/gpu")),
                ("value", Value::str("true")),
                ("effect", Value::str("NO_SCHEDULE")),
            ])]),
        ),
        ("name", Value::str("k-reserved")),
        ("tags", table(vec![("team", Value::str("ml"))])),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    KarpenterPool.normalize(&mut i);
    i
}

/// A Spot burst pool over families, with nothing but the required attributes.
fn burst() -> Attrs {
    let mut i: Attrs = [
        ("cluster", Value::str("k-main")),
        ("node_role", Value::str("k-node")),
        ("subnets", strs(&["subnet-0a"])),
        ("security_groups", strs(&["sg-node"])),
        ("capacity_types", strs(&["on-demand", "spot"])),
        ("instance_families", strs(&["g6", "g5", "g6e"])),
        ("gpu_limit", Value::Int(8)),
        ("ami", Value::str("bottlerocket@latest")),
        ("name", Value::str("k-burst")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    KarpenterPool.normalize(&mut i);
    i
}

fn pinned() -> Attrs {
    Attrs::from([("ami_alias".to_string(), Value::str("bottlerocket@v1.57.0"))])
}

/// The two documents, parsed.
fn docs(address: &str, inputs: &Attrs, outputs: &Attrs) -> (String, Json, Json) {
    let m = KarpenterPool.render(address, inputs, outputs).unwrap();
    let parsed: Vec<Json> = m
        .yaml
        .split("---\n")
        .filter(|d| !d.trim().is_empty())
        .map(|d| serde_yaml_ng::from_str(d).unwrap_or_else(|e| panic!("{e}\n{}", m.yaml)))
        .collect();
    assert_eq!(parsed.len(), 2, "{}", m.yaml);
    (m.file, parsed[0].clone(), parsed[1].clone())
}

#[test]
fn a_reserved_pool_renders_a_node_class_and_a_node_pool_with_the_ids_filled_in() {
    let (file, class, pool) = docs("karpenter_pool.reserved", &reserved(), &pinned());
    assert_eq!(file, "karpenter/reserved.yaml");
    assert_eq!(
        (class["apiVersion"].as_str(), class["kind"].as_str()),
        (Some("karpenter.k8s.aws/v1"), Some("EC2NodeClass"))
    );
    assert_eq!((pool["apiVersion"].as_str(), pool["kind"].as_str()), (Some("karpenter.sh/v1"), Some("NodePool")));
    let spec = &class["spec"];
    // The role by name, out of the ARN (path included); the alias as pinned at create.
    assert_eq!(spec["role"], "k-node");
    assert_eq!(spec["amiSelectorTerms"], serde_json::json!([{ "alias": "bottlerocket@v1.57.0" }]));
    assert_eq!(spec["subnetSelectorTerms"], serde_json::json!([{ "id": "subnet-0a" }, { "id": "subnet-0b" }]));
    // The EFA groups join the pool's: Karpenter puts the selected groups on every interface.
    assert_eq!(spec["securityGroupSelectorTerms"], serde_json::json!([{ "id": "sg-efa" }, { "id": "sg-node" }]));
    assert_eq!(spec["capacityReservationSelectorTerms"], serde_json::json!([{ "id": "cr-0123456789abcdef0" }]));
    assert_eq!(spec["placementGroupSelector"], serde_json::json!({ "name": "k-train" }));
    assert_eq!(spec["tags"], serde_json::json!({ "team": "ml" }));
    // The root is always there (karpenter#8747); the data volume starts from the snapshot,
    // hydrated at the launch template's default rate.
    let bdm = spec["blockDeviceMappings"].as_array().unwrap();
    assert_eq!(bdm[0]["deviceName"], "/dev/xvda");
    assert_eq!(bdm[0]["ebs"]["volumeSize"], "4Gi");
    assert_eq!(bdm[1]["deviceName"], "/dev/xvdb");
    assert_eq!(bdm[1]["ebs"]["volumeSize"], "500Gi");
    assert_eq!(bdm[1]["ebs"]["snapshotID"], "snap-0abc");
    assert_eq!(bdm[1]["ebs"]["volumeInitializationRate"], 200);
    // GPU sharing is Bottlerocket user data, from the launch template's renderer.
    let sharing = Attrs::from([("gpu_sharing".to_string(), reserved()["gpu_sharing"].clone())]);
    assert_eq!(
        spec["userData"].as_str(),
        crate::resources::launch_template::userdata::render(&sharing).unwrap().as_deref()
    );
    assert!(spec["userData"].as_str().unwrap().contains("device-partitioning-strategy = \"mig\""));
    // p5.48xlarge: 32 EFA cards → an ENA primary plus 32 efa-only interfaces.
    let nics = spec["networkInterfaces"].as_array().unwrap();
    assert_eq!(nics.len(), 33);
    assert_eq!(nics.iter().filter(|n| n["interfaceType"] == "efa-only").count(), 32);
    cel_network_interfaces(nics);

    let spec = &pool["spec"];
    // A training pool on reserved capacity: after the other reserved pools (see the weights test).
    assert_eq!(spec["weight"], 40);
    // MIG 1g.10gb on H100: 7 slices a GPU, each advertised as nvidia.com/gpu.
    assert_eq!(spec["limits"]["nvidia.com/gpu"], 16 * 7);
    assert_eq!(
        spec["disruption"],
        serde_json::json!({ "consolidationPolicy": "WhenEmpty", "consolidateAfter": "1h", "budgets": [{ "nodes": "1" }] })
    );
    let t = &spec["template"];
    assert_eq!(t["metadata"]["labels"]["gpustack.io/capacity"], "reserved");
    assert_eq!(
        t["spec"]["nodeClassRef"],
        serde_json::json!({ "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "k-reserved" })
    );
    assert_eq!(
        t["spec"]["requirements"],
        serde_json::json!([
            { "key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"] },
            { "key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p5.48xlarge"] },
        ])
    );
    assert_eq!(
        t["spec"]["taints"],
        serde_json::json!([{ "key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule" }])
    );
    // No terminationGracePeriod: do-not-disrupt keeps protecting jobs from drift.
    assert_eq!((t["spec"]["expireAfter"].as_str(), t["spec"].get("terminationGracePeriod")), (Some("Never"), None));
    for d in [&class, &pool] {
        assert_eq!(d["metadata"]["name"], "k-reserved");
        assert_eq!(d["metadata"]["labels"]["gpustack.io/address"], "karpenter_pool.reserved");
    }
}

#[test]
fn a_spot_burst_pool_consolidates_underused_nodes_and_selects_families() {
    let (_, class, pool) = docs("karpenter_pool.burst", &burst(), &pinned());
    let spec = &class["spec"];
    assert!(spec.get("capacityReservationSelectorTerms").is_none() && spec.get("networkInterfaces").is_none());
    assert!(spec.get("userData").is_none() && spec.get("placementGroupSelector").is_none());
    // No data_volume: Karpenter's own sizes, but both devices written down.
    let bdm = spec["blockDeviceMappings"].as_array().unwrap();
    assert_eq!(
        (bdm[0]["ebs"]["volumeSize"].as_str(), bdm[1]["ebs"]["volumeSize"].as_str()),
        (Some("4Gi"), Some("20Gi"))
    );
    assert!(bdm[1]["ebs"].get("snapshotID").is_none() && bdm[1]["ebs"].get("volumeInitializationRate").is_none());
    let spec = &pool["spec"];
    assert_eq!(spec["weight"], 20);
    assert_eq!(spec["disruption"]["consolidationPolicy"], "WhenEmptyOrUnderutilized");
    assert_eq!(spec["disruption"]["consolidateAfter"], "10m");
    assert_eq!(spec["template"]["spec"]["expireAfter"], "720h");
    assert!(spec["template"].get("metadata").is_none() && spec["template"]["spec"].get("taints").is_none());
    assert_eq!(
        spec["template"]["spec"]["requirements"],
        serde_json::json!([
            { "key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"] },
            { "key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g5", "g6", "g6e"] },
        ])
    );
}

#[test]
fn rendering_is_byte_identical_and_unknown_ids_read_as_known_after_apply() {
    let a = KarpenterPool.render("karpenter_pool.reserved", &reserved(), &pinned()).unwrap();
    let b = KarpenterPool.render("karpenter_pool.reserved", &reserved(), &pinned()).unwrap();
    assert_eq!(a, b);
    // Before the first apply: no pin yet, ids unknown.
    let mut i = burst();
    i.insert("subnets".into(), Value::List(vec![Value::Unknown]));
    i.insert("node_role".into(), Value::Unknown);
    let m = KarpenterPool.render("karpenter_pool.burst", &i, &Attrs::new()).unwrap();
    assert!(m.yaml.contains("- alias: bottlerocket@latest"), "{}", m.yaml);
    assert!(m.yaml.contains("- id: (known after apply)") && m.yaml.contains("role: (known after apply)"), "{}", m.yaml);
}

#[test]
fn defaults_follow_the_capacity_types() {
    let r = reserved();
    assert_eq!(r["capacity_types"], strs(&["reserved"]));
    let d = r["disruption"].as_table().unwrap();
    assert_eq!(d["budget"], Value::str("1"));
    assert_eq!(r["efa"].as_table().unwrap()["interfaces"], Value::str("max"));
    let b = burst();
    // Sorted in Karpenter's order of preference.
    assert_eq!(b["capacity_types"], strs(&["spot", "on-demand"]));
    assert_eq!(b["weight"], Value::Int(20));
    let mut od = Attrs::from([("capacity_types".to_string(), strs(&["on-demand"]))]);
    KarpenterPool.normalize(&mut od);
    assert_eq!(od["weight"], Value::Int(10));
    assert_eq!(od["disruption"].as_table().unwrap()["termination_grace_period"], Value::str("1h"));
    assert!(!r["disruption"].as_table().unwrap().contains_key("termination_grace_period"));
    // A budget written as a count becomes Karpenter's string.
    let mut n = Attrs::from([("disruption".to_string(), table(vec![("budget", Value::Int(2))]))]);
    KarpenterPool.normalize(&mut n);
    assert_eq!(n["disruption"].as_table().unwrap()["budget"], Value::str("2"));
    assert_eq!(n["capacity_types"], strs(&["on-demand"]));
}

/// The CEL rules of `spec.networkInterfaces` (karpenter.k8s.aws_ec2nodeclasses.yaml, v1.14.1):
/// a primary `interface` on card 0 / device 0; no two entries on one (card, device); at most
/// one `efa-only` per card. Plus the schema's enum and minimums.
fn cel_network_interfaces(nics: &[Json]) {
    let key = |n: &Json| (n["networkCardIndex"].as_u64().unwrap(), n["deviceIndex"].as_u64().unwrap());
    assert!(
        nics.is_empty() || nics.iter().any(|n| key(n) == (0, 0) && n["interfaceType"] == "interface"),
        "networkInterfaces must include a primary interface with interfaceType='interface': {nics:?}"
    );
    let mut seen = BTreeMap::new();
    for n in nics {
        assert!(matches!(n["interfaceType"].as_str(), Some("interface" | "efa-only")), "{n}");
        assert!(seen.insert(key(n), ()).is_none(), "duplicate networkCardIndex/deviceIndex {:?}", key(n));
    }
    let mut efa_per_card: BTreeMap<u64, usize> = BTreeMap::new();
    for n in nics.iter().filter(|n| n["interfaceType"] == "efa-only") {
        *efa_per_card.entry(key(n).0).or_default() += 1;
    }
    assert!(efa_per_card.values().all(|c| *c == 1), "at most one efa device per network card: {efa_per_card:?}");
    assert!(nics.len() <= 150, "maxItems 150");
}

#[test]
fn efa_layouts_pass_karpenters_cel_rules_for_every_embedded_efa_type() {
    let embedded = crate::aws::catalog::embedded();
    for t in ["p5.48xlarge", "p4d.24xlarge", "g6.12xlarge", "p5en.48xlarge", "trn1.32xlarge", "g6e.48xlarge"] {
        let Some(i) = embedded.get(t) else { continue };
        for wanted in [None, Some(1), Some(2)] {
            let cards = i.efa_interfaces(wanted.map(i64::from)).map(|l| l.efa_cards()).unwrap_or_default();
            let nics = network_interfaces(&cards);
            cel_network_interfaces(&nics);
            assert_eq!(nics.iter().filter(|n| n["interfaceType"] == "efa-only").count(), cards.len(), "{t} {wanted:?}");
        }
    }
    // Card 0 ENA-only (newer types): efa-only at device 0 of each EFA card.
    let nics = network_interfaces(&(1..=16).collect::<Vec<u32>>());
    cel_network_interfaces(&nics);
    assert_eq!(nics[1], serde_json::json!({ "networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only" }));
    // Card 0 with EFA: Karpenter's docs' layout.
    assert_eq!(
        network_interfaces(&[0]),
        vec![
            serde_json::json!({ "networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface" }),
            serde_json::json!({ "networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "efa-only" }),
        ]
    );
    // A duplicate breaks the rule the check enforces.
    let bad = vec![nics[0].clone(), nics[1].clone(), nics[1].clone()];
    assert!(std::panic::catch_unwind(|| cel_network_interfaces(&bad)).is_err());
}

#[test]
fn the_pool_takes_the_launch_templates_data_volume_efa_and_gpu_sharing() {
    for shared in SHARED_WITH_LAUNCH_TEMPLATE {
        let pool = KarpenterPool.attrs().iter().find(|a| a.name == *shared);
        let lt = LaunchTemplateKind.attrs().iter().find(|a| a.name == *shared);
        assert!(pool.is_some() && lt.is_some(), "{shared}");
        assert_eq!(format!("{:?}", pool.unwrap().ty), format!("{:?}", lt.unwrap().ty));
    }
    assert_eq!(KarpenterPool.attrs().iter().filter(|a| a.name == "data_volume").count(), 1);
}

#[test]
fn aliases_durations_budgets_and_labels_follow_karpenters_patterns() {
    assert_eq!(ami_version("bottlerocket@latest"), Some("latest"));
    assert_eq!(ami_version("bottlerocket@v1.57.0"), Some("v1.57.0"));
    assert_eq!(ami_version("bottlerocket@1.57.0"), Some("1.57.0"));
    for bad in ["al2023@latest", "bottlerocket@", "bottlerocket@v1.57", "bottlerocket@v1.57.x", "bottlerocket"] {
        assert_eq!(ami_version(bad), None, "{bad}");
    }
    for ok in ["10m", "1h30m", "720h", "0s"] {
        assert!(duration(ok, false), "{ok}");
    }
    assert!(duration("Never", true) && !duration("Never", false));
    for bad in ["", "10", "m", "1d", "10 m", "h1"] {
        assert!(!duration(bad, true), "{bad}");
    }
    for ok in ["0", "1", "10%", "100%", "5%"] {
        assert!(budget_ok(ok), "{ok}");
    }
    for bad in ["", "%", "101%", "1000%", "-1", "1.5"] {
        assert!(!budget_ok(bad), "{bad}");
    }
    // Budgets' `duration` and `schedule` (NodePool CRD v1.14.1 patterns).
    for ok in ["8h", "30m", "1h30m", "10h0s", "5m0s"] {
        assert!(budget_duration(ok), "{ok}");
    }
    for bad in ["", "1s", "1h30", "h", "1d", "90s", "1m30m"] {
        assert!(!budget_duration(bad), "{bad}");
    }
    assert!(cron_schedule("@daily") && cron_schedule("0 9 * * mon-fri"));
    assert!(!cron_schedule("@often") && !cron_schedule("0 9 * *"));
    assert!(restricted_label("karpenter.sh/capacity-type") && restricted_label("node.karpenter.k8s.aws/x"));
    assert!(restricted_label("kubernetes.io/hostname") && !restricted_label("gpustack.io/pool"));
    assert!(label_value("reserved") && label_value("") && label_value("a.b_c-d"));
    assert!(!label_value("-x") && !label_value("a b") && !label_value(&"x".repeat(64)));
}

/// The NodePool's `limits` of a pool rendered with `gpu_limit` and `sharing`.
fn limits_of(types: &[&str], sharing: Option<Value>, gpu_limit: Option<i64>) -> Json {
    let mut i = burst();
    i.remove("instance_families");
    i.insert("instance_types".into(), strs(types));
    i.remove("gpu_limit");
    if let Some(n) = gpu_limit {
        i.insert("gpu_limit".into(), Value::Int(n));
    }
    if let Some(s) = sharing {
        i.insert("gpu_sharing".into(), s);
    }
    let (_, _, pool) = docs("karpenter_pool.p", &i, &pinned());
    pool["spec"].get("limits").cloned().unwrap_or(Json::Null)
}

/// Issue 18 item 1 / audit B1: Karpenter charges a NodePool's limits with the capacity its
/// registered nodes report (kubernetes-sigs/karpenter v1.14.1 `pkg/controllers/state/statenode.go`:
/// `return lo.Assign(in.Node.Status.Capacity, …)`), and a shared GPU is reported replicas (or
/// slices) times. `gpu_limit` counts physical GPUs, so the rendered limit is multiplied.
#[test]
fn limits_count_what_the_nodes_report() {
    let sliced = |strategy: &str, replicas: i64| {
        table(vec![("strategy", Value::str(strategy)), ("replicas", Value::Int(replicas))])
    };
    let g6 = ["g6.12xlarge"];
    assert_eq!(limits_of(&g6, None, Some(8)), serde_json::json!({ "nvidia.com/gpu": 8 }));
    assert_eq!(
        limits_of(&g6, Some(sliced("time-slicing", 4)), Some(8)),
        serde_json::json!({ "cpu": 96, "nvidia.com/gpu": 32 })
    );
    assert_eq!(limits_of(&g6, Some(sliced("mps", 3)), Some(8)), serde_json::json!({ "cpu": 96, "nvidia.com/gpu": 24 }));
    let mig = |v: &str| {
        table(vec![("strategy", Value::str("mig")), ("mig_profile", table(vec![("h100.80gb", Value::str(v))]))])
    };
    assert_eq!(
        limits_of(&["p5.48xlarge"], Some(mig("7")), Some(16)),
        serde_json::json!({ "cpu": 384, "nvidia.com/gpu": 112 })
    );
    assert_eq!(
        limits_of(&["p5.48xlarge"], Some(mig("3g.40gb")), Some(8)),
        serde_json::json!({ "cpu": 192, "nvidia.com/gpu": 16 })
    );
    // Issue 18 item 21: a Neuron pool's limit counts what its nodes report, Neuron devices
    // (karpenter-provider-aws v1.14.1 types.go: `v1.ResourceAWSNeuron: *awsNeuronDevices(info)`);
    // a CPU pool renders no limit (the rules refuse gpu_limit there).
    assert_eq!(limits_of(&["trn1.32xlarge"], None, Some(32)), serde_json::json!({ "aws.amazon.com/neuron": 32 }));
    assert_eq!(limits_of(&["m6i.large"], None, None), Json::Null);
}

/// Review r18 m7: g4ad carries AMD GPUs, which Karpenter reports as `amd.com/gpu`
/// (karpenter-provider-aws v1.14.1 `pkg/providers/instancetype/types.go` `amdGPUs`), so an
/// `nvidia.com/gpu` limit would never bind; NVIDIA families keep theirs, and the GPU maker of
/// a family the embedded catalog knows comes from it.
#[test]
fn amd_families_are_not_limited_as_nvidia() {
    assert_eq!(limits_of(&["g4ad.8xlarge"], None, Some(4)), serde_json::json!({ "amd.com/gpu": 4 }));
    let mut i = burst();
    i.insert("instance_families".into(), strs(&["g4ad"]));
    let (_, _, pool) = docs("karpenter_pool.p", &i, &pinned());
    assert_eq!(pool["spec"]["limits"], serde_json::json!({ "amd.com/gpu": 8 }));
    assert_eq!(super::render::arch_and_gpu(&i), ("x86_64", false));
    assert_eq!(super::gpu_maker("g4ad"), Some("AMD"));
    assert_eq!(super::gpu_maker("g4dn"), Some("NVIDIA"));
    assert_eq!(super::gpu_maker("g6.xlarge"), Some("NVIDIA"));
    assert_eq!(super::gpu_maker("c5n"), None);
    assert_eq!(limits_of(&["g6.xlarge"], None, Some(4)), serde_json::json!({ "nvidia.com/gpu": 4 }));
}

/// Review r18 B1: until a node initializes, Karpenter charges it its NodeClaim's capacity,
/// the type's physical GPUs (kubernetes-sigs/karpenter v1.14.1 `pkg/controllers/state/statenode.go`
/// l.359-368), so the multiplied `nvidia.com/gpu` limit admits replicas× the physical GPUs in
/// one burst. vCPUs are charged the same before and after and subtracted per NodeClaim
/// within a pass (`scheduling/scheduler.go` `subtractMax`): a pool with one vCPU:GPU ratio
/// also gets `cpu` = gpu_limit × vCPUs per GPU; mixed ratios, unknown sizes, or a pool that
/// does not multiply get none.
#[test]
fn multiplied_limits_bound_physical_gpus_with_a_cpu_limit() {
    let ts =
        |replicas: i64| Some(table(vec![("strategy", Value::str("time-slicing")), ("replicas", Value::Int(replicas))]));
    // g5.xlarge, g6.xlarge, g6e.xlarge: 4 vCPUs and 1 GPU each.
    let one_ratio = ["g5.xlarge", "g6.xlarge", "g6e.xlarge"];
    assert_eq!(limits_of(&one_ratio, ts(2), Some(32)), serde_json::json!({ "cpu": 128, "nvidia.com/gpu": 64 }));
    // 4 and 8 vCPUs per GPU: no cpu limit is exact.
    assert_eq!(limits_of(&["g6.xlarge", "g6.2xlarge"], ts(2), Some(32)), serde_json::json!({ "nvidia.com/gpu": 64 }));
    assert_eq!(limits_of(&["g6.xlarge", "x9.nonesuch"], ts(2), Some(32)), serde_json::json!({ "nvidia.com/gpu": 64 }));
    // Whole GPUs: the GPU limit is already physical.
    assert_eq!(limits_of(&one_ratio, None, Some(32)), serde_json::json!({ "nvidia.com/gpu": 32 }));
    // Families expand through the embedded catalog: g6 holds 1-, 4- and 8-GPU sizes.
    assert_eq!(super::vcpus_per_gpu(&[], &["g6".to_string()]), None);
    // Types and families together: the types of those families.
    let p5 = super::vcpus_per_gpu(&["p5.48xlarge".to_string()], &["p5".to_string()]);
    assert_eq!(p5.map(|(v, g)| v / g), Some(24));
}

/// Issue 18 item 3 / audit M1: "configuring `terminationGracePeriod` changes the eligibility
/// criteria for disruption via `Drift`. When configured, a node may be disrupted via drift even
/// if there are pods with blocking PDBs or the `karpenter.sh/do-not-disrupt` annotation"
/// (Karpenter docs v1.14 concepts/disruption.md). Reserved and training pools render none.
#[test]
fn reserved_and_training_pools_render_no_termination_grace_period() {
    let tgp = |i: &Attrs| {
        let (_, _, pool) = docs("karpenter_pool.p", i, &pinned());
        pool["spec"]["template"]["spec"].get("terminationGracePeriod").cloned()
    };
    assert_eq!(tgp(&reserved()), None);
    let mut training = burst();
    training.insert("capacity_types".into(), strs(&["on-demand"]));
    training.insert("placement_group".into(), Value::str("k-train"));
    training.remove("disruption");
    KarpenterPool.normalize(&mut training);
    assert_eq!(tgp(&training), None);
    assert_eq!(tgp(&burst()), Some(Json::from("1h")));
    // Written, it is rendered even on a reserved pool.
    let mut set = reserved();
    set.insert("disruption".into(), table(vec![("termination_grace_period", Value::str("48h"))]));
    KarpenterPool.normalize(&mut set);
    assert_eq!(tgp(&set), Some(Json::from("48h")));
}

/// Issue 18 item 4 / audit M2: the policy (`WhenEmpty | WhenEmptyOrUnderutilized | Balanced`,
/// NodePool CRD v1.14.1) and budgets with reasons and schedules are settable; the default
/// policy is `WhenEmpty` only for a pool of reserved capacity alone (Karpenter's ODCR guide
/// recommends one `['reserved', 'on-demand']` pool that consolidates overflow back).
#[test]
fn disruption_policy_and_budgets_are_settable_and_the_default_follows_only_reserved() {
    let disruption = |capacity: &[&str], d: Option<Value>| {
        let mut i = burst();
        i.insert("capacity_types".into(), strs(capacity));
        i.remove("disruption");
        if let Some(d) = d {
            i.insert("disruption".into(), d);
        }
        KarpenterPool.normalize(&mut i);
        let (_, _, pool) = docs("karpenter_pool.p", &i, &pinned());
        pool["spec"]["disruption"].clone()
    };
    assert_eq!(disruption(&["reserved"], None)["consolidationPolicy"], "WhenEmpty");
    let mixed = disruption(&["reserved", "on-demand"], None);
    assert_eq!(
        (mixed["consolidationPolicy"].as_str(), mixed["consolidateAfter"].as_str()),
        (Some("WhenEmptyOrUnderutilized"), Some("10m"))
    );
    let budgets = Value::List(vec![
        table(vec![("nodes", Value::Int(0)), ("reasons", strs(&["Drifted"]))]),
        table(vec![
            ("nodes", Value::str("20%")),
            ("reasons", strs(&["Empty", "Underutilized"])),
            ("schedule", Value::str("0 9 * * mon-fri")),
            ("duration", Value::str("8h")),
        ]),
    ]);
    let written =
        disruption(&["on-demand"], Some(table(vec![("policy", Value::str("Balanced")), ("budgets", budgets)])));
    assert_eq!(
        written,
        serde_json::json!({
            "consolidationPolicy": "Balanced",
            "consolidateAfter": "10m",
            "budgets": [
                { "nodes": "0", "reasons": ["Drifted"] },
                { "nodes": "20%", "reasons": ["Empty", "Underutilized"], "schedule": "0 9 * * mon-fri", "duration": "8h" },
            ],
        })
    );
}

/// Issue 18 item 7 / audit M5: Karpenter tries pools by weight, ties by name
/// (kubernetes-sigs/karpenter v1.14.1 `pkg/utils/nodepool/nodepool.go`), so two reserved
/// pools with one default weight send an unselected pod to whichever sorts first. A training
/// pool on reserved capacity defaults below the other reserved pools.
#[test]
fn reserved_pools_have_distinct_default_weights() {
    assert_eq!(reserved()["weight"], Value::Int(40));
    let mut inference = burst();
    inference.insert("capacity_types".into(), strs(&["reserved"]));
    inference.remove("weight");
    KarpenterPool.normalize(&mut inference);
    assert_eq!(inference["weight"], Value::Int(50));
}

#[test]
fn a_cpu_pool_pins_the_plain_bottlerocket_variant() {
    // m6i is in no accelerated family (the embedded catalog carries all of them): its pool
    // needs no NVIDIA variant. An unknown size of a GPU family still gets it.
    let pool = |types: &[&str]| Attrs::from([("instance_types".to_string(), strs(types))]);
    assert_eq!(render::arch_and_gpu(&pool(&["m6i.large", "m6i.xlarge"])), ("x86_64", false));
    assert_eq!(render::arch_and_gpu(&pool(&["p5.49xlarge"])), ("x86_64", true));
    assert_eq!(render::arch_and_gpu(&pool(&["g6.xlarge"])), ("x86_64", true));
    assert_eq!(render::arch_and_gpu(&Attrs::new()), ("x86_64", true));
}

/// Review r18 m1: the `ami` note's pace comes from `budgets` when written (the least budget
/// that applies to Drifted: kubernetes-sigs/karpenter v1.14.1 `pkg/apis/v1/nodepool.go`
/// `GetAllowedDisruptionsByReason`), not only from the `budget` shorthand.
#[test]
fn the_ami_note_paces_drift_by_the_budgets() {
    let old = burst();
    let mut new = burst();
    new.insert("ami".into(), Value::str("bottlerocket@v1.57.0"));
    let budgets = Value::List(vec![
        table(vec![("nodes", Value::str("3"))]),
        table(vec![("nodes", Value::str("2")), ("reasons", strs(&["Drifted"]))]),
    ]);
    new.insert("disruption".into(), table(vec![("budgets", budgets)]));
    KarpenterPool.normalize(&mut new);
    let note = KarpenterPool.update_note(&old, &new, &["ami".to_string()]).unwrap();
    assert!(note.contains("(drift), 2 at a time"), "{note}");
    assert!(!note.contains("rolls only as its nodes empty"), "{note}");
    // Review r18 m3: a reserved-only pool rolls as nodes empty (core drift.go
    // `AllNonPendingPodsScheduled`: no free slot, no replacement, drift blocked).
    let (old, mut new) = (reserved(), reserved());
    new.insert("ami".into(), Value::str("bottlerocket@v1.57.0"));
    let note = KarpenterPool.update_note(&old, &new, &["ami".to_string()]).unwrap();
    assert!(note.contains(super::drift::RESERVED_ROLL), "{note}");
}

/// Review r18 m4: a pool that protects jobs renders no terminationGracePeriod, and the
/// disruption docs (v1.14 §Expiration) advise against `expireAfter` without one when pods
/// carry do-not-disrupt: mixed reserved pools and training pools never expire. Review r18 m5:
/// a training pool (efa or placement_group) consolidates only empty nodes, even On-Demand.
#[test]
fn pools_that_protect_jobs_never_expire_and_training_pools_consolidate_only_when_empty() {
    let normalized = |capacity: &[&str], extra: Option<(&str, Value)>| {
        let mut i = Attrs::from([("capacity_types".to_string(), strs(capacity))]);
        if let Some((k, v)) = extra {
            i.insert(k.to_string(), v);
        }
        KarpenterPool.normalize(&mut i);
        let (_, _, pool) = docs("karpenter_pool.p", &i, &pinned());
        (
            pool["spec"]["disruption"]["consolidationPolicy"].clone(),
            pool["spec"]["template"]["spec"]["expireAfter"].clone(),
            pool["spec"]["template"]["spec"].get("terminationGracePeriod").cloned(),
        )
    };
    let mixed = normalized(&["reserved", "on-demand"], None);
    assert_eq!(mixed, (Json::from("WhenEmptyOrUnderutilized"), Json::from("Never"), None));
    let train = normalized(&["on-demand"], Some(("placement_group", Value::str("k-train"))));
    assert_eq!(train, (Json::from("WhenEmpty"), Json::from("Never"), None));
    let efa = normalized(&["spot"], Some(("efa", table(vec![]))));
    assert_eq!(efa.0, Json::from("WhenEmpty"));
    // A pool that protects nothing keeps Karpenter's 30 days beside its 1h grace period.
    let od = normalized(&["on-demand"], None);
    assert_eq!(od, (Json::from("WhenEmptyOrUnderutilized"), Json::from("720h"), Some(Json::from("1h"))));
}

/// Review r19 M1: an AL2023 pool that may launch NVIDIA types carries
/// `nvidia.com/gpu.present=true`, the label the nvidia-device-plugin chart's default affinity
/// selects (nodeadm adds it only from 1.35); Bottlerocket (plugin on the host) and AL2023 CPU
/// pools do not, and a label written wins.
#[test]
fn al2023_nvidia_pools_carry_the_device_plugins_node_label() {
    let label = |ami: &str, families: &[&str], extra: Option<(&str, &str)>| {
        let mut i = burst();
        i.insert("ami".into(), Value::str(ami));
        i.insert("instance_families".into(), strs(families));
        if let Some((k, v)) = extra {
            i.insert("node_labels".into(), table(vec![(k, Value::str(v))]));
        }
        let outputs = Attrs::from([("ami_alias".to_string(), Value::str(ami.replace("latest", "v20251029")))]);
        let (_, _, pool) = docs("karpenter_pool.p", &i, &outputs);
        pool["spec"]["template"]["metadata"]["labels"]["nvidia.com/gpu.present"].clone()
    };
    assert_eq!(label("al2023@latest", &["g6", "g5"], None), serde_json::json!("true"));
    assert_eq!(label("al2023@latest", &["m7i"], None), Json::Null);
    assert_eq!(label("bottlerocket@latest", &["g6"], None), Json::Null);
    assert_eq!(label("al2023@latest", &["g6"], Some(("nvidia.com/gpu.present", "false"))), serde_json::json!("false"));
}
