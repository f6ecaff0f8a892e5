//! EKS Auto Mode end to end (issue 21): examples/auto-mode.toml applies against the emulator
//! (buying its Capacity Block), DescribeCluster reads the compute, storage and load-balancing
//! config back, `manifests` renders the NodeClass/NodePool pairs and the priority classes and
//! every document validates (tests/k8s/); a pool's reservation changes in place (state's new
//! id in the rendered NodeClass, the cluster untouched); Auto Mode turns on and off in place on
//! an existing cluster, and a node role change is refused.

use serde_json::Value;

use crate::harness::{Env, block_on};
use crate::karpenter::{documents, files, in_days, repo, validate_manifests};

fn cluster(env: &Env, name: &str) -> aws_sdk_eks::types::Cluster {
    let eks = env.emu.eks();
    let name = name.to_string();
    block_on(async move { eks.describe_cluster().name(name).send().await.unwrap().cluster.unwrap() })
}

fn out_str(st: &Value, address: &str, output: &str) -> String {
    st["resources"][address]["outputs"][output]
        .as_str()
        .unwrap_or_else(|| panic!("{address}.{output}: {st}"))
        .to_string()
}

/// (compute on, node pools, node role, block storage on, load balancing on) as EKS reports them.
fn auto_mode_of(c: &aws_sdk_eks::types::Cluster) -> (bool, Vec<String>, String, bool, bool) {
    let cc = c.compute_config().expect("computeConfig");
    (
        cc.enabled() == Some(true),
        cc.node_pools().to_vec(),
        cc.node_role_arn().unwrap_or_default().to_string(),
        c.storage_config().and_then(|s| s.block_storage()).and_then(|b| b.enabled()) == Some(true),
        c.kubernetes_network_config().and_then(|n| n.elastic_load_balancing()).and_then(|e| e.enabled()) == Some(true),
    )
}

/// examples/auto-mode.toml as shipped, then with its training pool moved from the Capacity
/// Block to an ODCR: the pool re-renders with the ODCR's id, the cluster is not called.
#[test]
fn the_example_applies_reads_compute_back_renders_valid_pools_and_moves_a_reservation_in_place() {
    let env = Env::new();
    let example = repo().join("examples/auto-mode.toml");
    let file = example.to_str().unwrap();
    let (after, before) = (format!("block_after={}", in_days(1)), format!("block_before={}", in_days(7)));
    let vars = ["--var", after.as_str(), "--var", before.as_str()];
    let run = |cmd: &[&str], f: &str| env.ok(&[cmd, &[f][..], &vars[..]].concat());
    // Review auto m6: selecting reservations changes how Auto Mode treats open ODCRs.
    let first = run(&["plan"], file);
    assert!(first.stdout.contains("auto_mode_pool.train selects capacity reservations"), "{first:?}");
    env.emu.reset_requests();
    let apply = run(&["apply", "--auto-approve", "--approve-purchases"], file);
    assert!(apply.stdout.contains("Apply complete"), "{apply:?}");
    let again = env.run(&[&["plan", "--detailed-exitcode", file][..], &vars[..]].concat());
    assert_eq!(again.code, 0, "in sync after apply: {again:?}");

    let st = env.state("auto-dev");
    let name = out_str(&st, "eks_cluster.main", "name");
    let node_role = out_str(&st, "iam_role.auto_nodes", "arn");
    let c = cluster(&env, &name);
    assert_eq!(
        auto_mode_of(&c),
        (true, vec!["general-purpose".to_string(), "system".to_string()], node_role.clone(), true, true),
        "DescribeCluster: {c:?}"
    );
    // EKS entered the built-in pools' role itself (type EC2); the stack wrote no entry.
    let eks = env.emu.eks();
    let (n, r) = (name.clone(), node_role.clone());
    let entry = block_on(async move {
        eks.describe_access_entry().cluster_name(n).principal_arn(r).send().await.unwrap().access_entry.unwrap()
    });
    assert_eq!(entry.r#type(), Some("EC2"));

    run(&["manifests", "--out", "k8s"], file);
    let written = files(&env.path("k8s"));
    for f in ["auto-mode/train.yaml", "auto-mode/inference.yaml", "priority-classes.yaml"] {
        assert!(written.contains_key(f), "{f}: {:?}", written.keys());
    }
    let block = out_str(&st, "capacity_block.train", "id");
    let train = documents(&written["auto-mode/train.yaml"]);
    assert_eq!(train[0]["kind"], "NodeClass");
    assert_eq!(train[0]["spec"]["capacityReservationSelectorTerms"], serde_json::json!([{ "id": block }]));
    assert_eq!(train[0]["spec"]["role"], out_str(&st, "iam_role.auto_nodes", "name"));
    assert_eq!(train[0]["spec"]["subnetSelectorTerms"][0]["id"], out_str(&st, "subnet.private_a", "id"));
    assert_eq!(
        train[1]["spec"]["template"]["spec"]["nodeClassRef"],
        serde_json::json!({ "group": "eks.amazonaws.com", "kind": "NodeClass", "name": "auto-dev-train" })
    );
    let inference = documents(&written["auto-mode/inference.yaml"]);
    let req = &inference[1]["spec"]["template"]["spec"]["requirements"];
    assert_eq!(
        req[0],
        serde_json::json!({ "key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"] })
    );
    assert!(train[1]["spec"]["weight"].as_i64() > inference[1]["spec"]["weight"].as_i64(), "reserved fills first");
    // Review auto M2: the taints route. The tolerations of the pod specs the example's header
    // gives (nvidia.com/gpu is tolerated by any pod asking for a GPU: EKS's
    // ExtendedResourceToleration, docs/karpenter-pools.md): training lands only on the block,
    // inference on both.
    let taints = |docs: &[Value]| -> Vec<(String, String)> {
        docs[1]["spec"]["template"]["spec"]["taints"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["key"] != "nvidia.com/gpu")
            .map(|t| (t["key"].as_str().unwrap().to_string(), t["value"].as_str().unwrap().to_string()))
            .collect()
    };
    let fits = |pod: &[(&str, &str)], docs: &[Value]| {
        taints(docs).iter().all(|(k, v)| pod.iter().any(|(pk, pv)| pk == k && pv == v))
    };
    let training_pod = [("gpustack.io/capacity", "reserved")];
    let inference_pod = [("gpustack.io/capacity", "reserved"), ("gpustack.io/workload", "inference")];
    assert!(fits(&training_pod, &train) && !fits(&training_pod, &inference), "training never spills onto burst");
    assert!(
        fits(&inference_pod, &train) && fits(&inference_pod, &inference),
        "inference borrows the block, then bursts"
    );
    assert_eq!(
        train[1]["spec"]["template"]["metadata"]["labels"]["gpustack.io/capacity"], "reserved",
        "the training nodeSelector"
    );
    let example_text = std::fs::read_to_string(&example).unwrap();
    for line in [
        "nodeSelector: { gpustack.io/capacity: reserved }",
        "key: gpustack.io/workload, operator: Equal, value: inference",
    ] {
        assert!(example_text.contains(line), "the example documents the pod spec: {line}");
    }
    // Review auto M1: the block pool lives as long as Auto Mode allows and drains in 10 minutes.
    assert_eq!(train[1]["spec"]["template"]["spec"]["expireAfter"], "504h");
    assert_eq!(train[1]["spec"]["template"]["spec"]["terminationGracePeriod"], "10m");
    let (valid, report) = validate_manifests(&env.path("k8s"));
    assert!(valid, "{report}");
    assert!(report.contains("6 of 6 document(s) valid"), "{report}");

    // Every call the apply made is in `gpustack policy`.
    let policy: Value = serde_json::from_str(&run(&["policy"], file).stdout).unwrap();
    let allowed: std::collections::BTreeSet<String> = policy["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["Action"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()))
        .collect();
    let made: std::collections::BTreeSet<String> =
        env.emu.requests().into_iter().map(|(service, action)| format!("{service}:{action}")).collect();
    let missing: Vec<&String> = made.iter().filter(|a| !allowed.contains(*a)).collect();
    assert!(missing.is_empty(), "calls not in `gpustack policy`: {missing:?}");

    // The training pool moves to an ODCR in the same zone: only its YAML changes.
    let text = std::fs::read_to_string(&example).unwrap().replace(
        "capacity_reservations = [\"${capacity_block.train.id}\"]",
        "capacity_reservations = [\"${capacity_reservation.spare.id}\"]",
    ) + "\n[capacity_reservation.spare]\ninstance_type     = \"p5.48xlarge\"\navailability_zone = \"us-west-2a\"\ninstance_count    = 1\nend_date          = \""
        + &in_days(30)
        + "\"\n";
    let moved = env.write("moved.toml", &text);
    let moved = moved.to_str().unwrap();
    let plan = env.run(&[&["plan", moved][..], &vars[..]].concat());
    assert!(plan.stdout.contains("auto_mode_pool.train"), "{plan:?}");
    assert!(!plan.stdout.contains("eks_cluster.main"), "the cluster is not touched: {plan:?}");
    env.emu.reset_requests();
    run(&["apply", "--auto-approve", "--approve-purchases"], moved);
    let made: Vec<(String, String)> = env.emu.requests();
    assert!(
        !made.iter().any(|(s, a)| s == "eks" && (a.starts_with("Update") || a.starts_with("Create"))),
        "no EKS change: {made:?}"
    );
    let st = env.state("auto-dev");
    let spare = out_str(&st, "capacity_reservation.spare", "id");
    assert_ne!(spare, block);
    run(&["manifests", "--out", "k8s2"], moved);
    let train = documents(&files(&env.path("k8s2"))["auto-mode/train.yaml"]);
    assert_eq!(train[0]["spec"]["capacityReservationSelectorTerms"], serde_json::json!([{ "id": spare }]));
    assert!(auto_mode_of(&cluster(&env, &name)).0, "compute config unchanged");
    let (valid, report) = validate_manifests(&env.path("k8s2"));
    assert!(valid, "{report}");

    run(&["destroy", "--auto-approve"], moved);
    assert_eq!(env.tagged("auto-dev").total(), 0);
}

const ROLES: &str = r#"
[iam_role.cluster]
service          = "eks.amazonaws.com"
tag_session      = true
managed_policies = [
  "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy",
  "arn:aws:iam::aws:policy/AmazonEKSComputePolicy",
  "arn:aws:iam::aws:policy/AmazonEKSBlockStoragePolicy",
  "arn:aws:iam::aws:policy/AmazonEKSLoadBalancingPolicy",
  "arn:aws:iam::aws:policy/AmazonEKSNetworkingPolicy",
]

[iam_role.auto_nodes]
service          = "ec2.amazonaws.com"
managed_policies = [
  "arn:aws:iam::aws:policy/AmazonEKSWorkerNodeMinimalPolicy",
  "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
]

[iam_role.other_nodes]
service          = "ec2.amazonaws.com"
managed_policies = [
  "arn:aws:iam::aws:policy/AmazonEKSWorkerNodeMinimalPolicy",
  "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly",
]
"#;

fn stack(auto_mode: &str) -> String {
    crate::harness::network_stack(
        "automode",
        &format!(
            "{ROLES}\n[eks_cluster.main]\nversion             = \"1.33\"\nrole                = \"${{iam_role.cluster.arn}}\"\nsubnets             = [\"${{subnet.a.id}}\", \"${{subnet.b.id}}\"]\npublic_access_cidrs = [\"203.0.113.0/24\"]\n{auto_mode}\n"
        ),
    )
}

/// Auto Mode on an existing cluster is an in-place update (one AutoModeUpdate), its node role
/// cannot change, and removing it turns it off in place, with the plan saying what that does.
#[test]
fn auto_mode_turns_on_and_off_in_place_and_its_node_role_is_fixed() {
    let env = Env::new();
    env.write("a.toml", &stack(""));
    env.ok(&["apply", "a.toml", "--auto-approve"]);
    let name = out_str(&env.state("automode"), "eks_cluster.main", "name");
    assert!(cluster(&env, &name).compute_config().is_none_or(|c| c.enabled() != Some(true)));

    env.write(
        "a.toml",
        &stack("auto_mode = { node_pools = [\"system\"], node_role = \"${iam_role.auto_nodes.arn}\" }"),
    );
    let plan = env.ok(&["plan", "a.toml"]);
    assert!(plan.stdout.contains("~ eks_cluster.main"), "in place: {plan:?}");
    assert!(!plan.stdout.contains("-/+ eks_cluster.main"), "not a replace: {plan:?}");
    assert!(plan.stdout.contains("auto-enable-existing"), "the add-on note: {plan:?}");
    env.emu.reset_requests();
    env.ok(&["apply", "a.toml", "--auto-approve"]);
    let updates = env.emu.requests().into_iter().filter(|(_, a)| a == "UpdateClusterConfig").count();
    assert_eq!(updates, 1, "one request for all three capabilities");
    let role = out_str(&env.state("automode"), "iam_role.auto_nodes", "arn");
    assert_eq!(auto_mode_of(&cluster(&env, &name)), (true, vec!["system".into()], role, true, true));
    let again = env.run(&["plan", "--detailed-exitcode", "a.toml"]);
    assert_eq!(again.code, 0, "in sync: {again:?}");

    env.write(
        "a.toml",
        &stack("auto_mode = { node_pools = [\"system\"], node_role = \"${iam_role.other_nodes.arn}\" }"),
    );
    let refused = env.run(&["plan", "a.toml"]);
    assert_ne!(refused.code, 0, "{refused:?}");
    assert!(refused.stderr.contains("cannot change an Auto Mode cluster's node role"), "{refused:?}");

    // Review auto M3: destroying an Auto Mode cluster says what EKS leaves behind.
    env.write(
        "a.toml",
        &stack("auto_mode = { node_pools = [\"system\"], node_role = \"${iam_role.auto_nodes.arn}\" }"),
    );
    let gone = env.ok(&["plan", "--destroy", "a.toml"]);
    assert!(gone.stdout.contains("does not delete the EBS volumes"), "{gone:?}");
    assert!(gone.stdout.contains(&format!("Values={name}")), "the UG's query for leaked groups: {gone:?}");

    env.write("a.toml", &stack(""));
    let plan = env.ok(&["plan", "a.toml"]);
    assert!(plan.stdout.contains("terminates every EC2 instance"), "{plan:?}");
    // Review auto m1: the networking add-ons the cluster was created without.
    assert!(plan.stdout.contains("vpc-cni, kube-proxy and coredns"), "{plan:?}");
    env.ok(&["apply", "a.toml", "--auto-approve"]);
    let c = cluster(&env, &name);
    assert_eq!(c.compute_config().and_then(|c| c.enabled()), Some(false));
    assert_eq!(c.storage_config().and_then(|s| s.block_storage()).and_then(|b| b.enabled()), Some(false));
    env.ok(&["destroy", "a.toml", "--auto-approve"]);
}

/// The rules before any money: the cluster role, a pool on a cluster without Auto Mode, a
/// NodeClass role without its EC2 entry, a Capacity Block of a family Auto Mode does not
/// launch, and a reservation outside the pool's zones — all in one pass, with help lines.
#[test]
fn auto_mode_rules_refuse_what_could_not_work_in_one_pass() {
    let env = Env::new();
    let text = crate::harness::network_stack(
        "automode-bad",
        r#"
[iam_role.cluster]
service          = "eks.amazonaws.com"
managed_policies = ["arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"]

[iam_role.auto_nodes]
service          = "ec2.amazonaws.com"
managed_policies = ["arn:aws:iam::aws:policy/AmazonEKSWorkerNodeMinimalPolicy", "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryPullOnly"]

[eks_cluster.main]
version             = "1.33"
role                = "${iam_role.cluster.arn}"
subnets             = ["${subnet.a.id}", "${subnet.b.id}"]
public_access_cidrs = ["203.0.113.0/24"]
auto_mode           = { node_pools = [], node_role = "${iam_role.auto_nodes.arn}" }

[eks_cluster.plain]
version             = "1.33"
role                = "${iam_role.cluster.arn}"
subnets             = ["${subnet.a.id}", "${subnet.b.id}"]
public_access_cidrs = ["203.0.113.0/24"]

[eks_cluster.old]
version             = "1.28"
role                = "${iam_role.cluster.arn}"
subnets             = ["${subnet.a.id}", "${subnet.b.id}"]
public_access_cidrs = ["203.0.113.0/24"]
authentication_mode = "CONFIG_MAP"
auto_mode           = { node_pools = ["system"] }

[capacity_block.gb200]
instance_type     = "p6e-gb200.36xlarge"
instance_count    = 1
duration_hours    = 672
start_after       = "2030-01-01T00:00:00Z"
start_before      = "2030-01-05T00:00:00Z"
availability_zone = "us-west-2b"
max_upfront_usd   = 1000

[auto_mode_pool.train]
cluster               = "${eks_cluster.main.name}"
node_role             = "${iam_role.auto_nodes.name}"
subnets               = ["${subnet.a.id}"]
security_groups       = ["${eks_cluster.main.security_group_id}"]
capacity_reservations = ["${capacity_block.gb200.id}"]

[capacity_reservation.h100]
instance_type     = "p5.48xlarge"
availability_zone = "us-west-2a"
instance_count    = 2
end_date          = "2030-02-01T00:00:00Z"

[auto_mode_pool.h100]
cluster               = "${eks_cluster.main.name}"
node_role             = "${iam_role.auto_nodes.arn}"
subnets               = ["${subnet.a.id}"]
security_groups       = ["${eks_cluster.main.security_group_id}"]
capacity_reservations = ["${capacity_reservation.h100.id}"]
instance_types        = ["p5.48xlarge"]
gpu_limit             = 8
ephemeral_storage     = { size_gib = 20, iops = 16000 }

[auto_mode_pool.plain]
cluster         = "${eks_cluster.plain.name}"
node_role       = "${iam_role.auto_nodes.name}"
subnets         = ["${subnet.a.id}"]
security_groups = ["${eks_cluster.plain.security_group_id}"]
instance_types  = ["g6f.large"]
ephemeral_storage = { throughput = 1000 }
"#,
    );
    env.write("bad.toml", &text);
    let r = env.run(&["validate", "bad.toml"]);
    assert_ne!(r.code, 0, "{r:?}");
    for want in [
        "lacks AmazonEKSComputePolicy",
        "add tag_session = true",
        "does not run EKS Auto Mode",
        "no EC2 access entry with AmazonEKSAutoNodePolicy",
        "p6e-gb200.36xlarge, which EKS Auto Mode does not launch",
        "EKS Auto Mode does not launch g6f.large",
        "reserves capacity in us-west-2b, but the subnets of `auto_mode_pool.train` are in us-west-2a",
        "gpu_limit = 8 is less than the 16 GPUs it reserves",
        "auto_mode.node_pools needs auto_mode.node_role",
        "Auto Mode needs access entries; authentication_mode CONFIG_MAP has none",
        "EKS Auto Mode requires Kubernetes 1.29 or later",
        // Review auto m4: gp3's ratios, not only its ranges.
        "ephemeral_storage.iops = 16000 is more than 500 per GiB of its 20 GiB",
        "ephemeral_storage.throughput = 1000 MiB/s is more than 0.25 MiB/s per IOPS of its 3000 IOPS",
        // Review auto M1: a 4-week block outlives Auto Mode's 21-day nodes.
        "`capacity_block.gb200` lasts 672h but `auto_mode_pool.train`'s nodes live at most 504h",
    ] {
        assert!(r.stderr.contains(want), "missing {want:?}:\n{}", r.stderr);
    }
    assert!(r.stderr.contains("bad.toml:"), "file:line:column: {}", r.stderr);
}

/// Managed node groups beside Auto Mode are allowed, and the plan says so on the cluster.
#[test]
fn a_node_group_beside_auto_mode_is_noted_in_the_plan() {
    let env = Env::new();
    let text = stack("auto_mode = { node_pools = [\"system\"], node_role = \"${iam_role.auto_nodes.arn}\" }")
        + r#"
[node_group.system]
cluster        = "${eks_cluster.main.name}"
node_role      = "${iam_role.node.arn}"
subnets        = ["${subnet.a.id}"]
instance_types = ["m6i.large"]
scaling        = { min = 1, desired = 1, max = 2 }
"#;
    env.write("mixed.toml", &text);
    let plan = env.ok(&["plan", "mixed.toml", "--refresh=false"]);
    assert!(plan.stdout.contains("EKS Auto Mode and managed node groups (node_group.system)"), "{plan:?}");
    assert!(plan.stdout.contains("eks.amazonaws.com/compute-type"), "{plan:?}");
    assert!(plan.stdout.contains("need the vpc-cni, kube-proxy, coredns add-on(s)"), "{plan:?}");
}
