//! Karpenter pools end to end (issue 12): a stack with an ODCR, a Capacity Block, an image
//! cache, a reserved EFA pool on both reservations, a Spot burst pool and priority classes
//! applies against the emulator; a second plan shows no changes; `gpustack manifests --out`
//! writes the files byte-identically twice, with the ids state holds, and every document
//! validates against Karpenter's CRDs (tests/k8s/); an update keeps the pinned AMI alias;
//! destroy leaves nothing. `validate.rs` has a refused and an accepted stack per rule.

mod users;
mod validate;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::harness::Env;

/// RFC 3339, `days` from now.
pub(crate) fn in_days(days: i64) -> String {
    let t = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * days);
    t.round(jiff::Unit::Second).unwrap().to_string()
}

/// The reservations' dates, fixed once per test: a bought block cannot change.
struct Dates {
    odcr_end: String,
    after: String,
    before: String,
}

impl Dates {
    fn new() -> Dates {
        Dates { odcr_end: in_days(30), after: in_days(1), before: in_days(6) }
    }
}

/// The stack: private subnets behind a NAT gateway (EFA nodes get no public IP), both
/// reservations of p5.48xlarge in us-west-2a, the image cache's snapshot on the reserved
/// pool's data volume. `gpu_limit` of the reserved pool is the knob the update turns.
fn karpenter_stack(gpu_limit: u32, dates: &Dates) -> String {
    format!(
        r#"[stack]
name   = "karp"
region = "us-west-2"
tags   = {{ team = "ml" }}

[vpc.main]
cidr_block       = "10.50.0.0/16"
internet_gateway = true

[subnet.pub]
vpc               = "${{vpc.main.id}}"
cidr_block        = "10.50.0.0/20"
availability_zone = "us-west-2a"
public            = true

[nat_gateway.out]
subnet = "${{subnet.pub.id}}"

[subnet.a]
vpc               = "${{vpc.main.id}}"
cidr_block        = "10.50.16.0/20"
availability_zone = "us-west-2a"
nat_gateway       = "${{nat_gateway.out.id}}"

[subnet.b]
vpc               = "${{vpc.main.id}}"
cidr_block        = "10.50.32.0/20"
availability_zone = "us-west-2b"
nat_gateway       = "${{nat_gateway.out.id}}"

[security_group.efa]
vpc    = "${{vpc.main.id}}"
efa    = true
egress = [{{ protocol = "-1", cidr = "0.0.0.0/0" }}]

[placement_group.burst]
strategy = "cluster"

[iam_role.cluster]
service          = "eks.amazonaws.com"
managed_policies = ["arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"]

[iam_role.node]
service          = "ec2.amazonaws.com"
managed_policies = ["arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"]

[iam_role.builder]
service          = "ec2.amazonaws.com"
instance_profile = true
managed_policies = ["arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"]

# The pools' nodes join through their role's own entry (rules::karpenter).
[eks_access_entry.nodes]
cluster       = "${{eks_cluster.main.name}}"
principal_arn = "${{iam_role.node.arn}}"
type          = "EC2_LINUX"

[eks_cluster.main]
version             = "1.33"
role                = "${{iam_role.cluster.arn}}"
subnets             = ["${{subnet.a.id}}", "${{subnet.b.id}}"]
public_access_cidrs = ["203.0.113.0/24"]

[capacity_reservation.odcr]
instance_type     = "p5.48xlarge"
availability_zone = "us-west-2a"
instance_count    = 1
end_date          = "{odcr_end}"

[capacity_block.blk]
instance_type     = "p5.48xlarge"
instance_count    = 1
duration_hours    = 24
start_after       = "{after}"
start_before      = "{before}"
availability_zone = "us-west-2a"
max_upfront_usd   = 40000

[image_cache.ml]
images                   = ["public.ecr.aws/docker/library/busybox:1.36"]
variant                  = "aws-k8s-1.31-nvidia"
volume_size_gib          = 60
subnet                   = "${{subnet.pub.id}}"
builder_instance_profile = "${{iam_role.builder.instance_profile}}"

[karpenter_pool.reserved]
cluster               = "${{eks_cluster.main.name}}"
node_role             = "${{iam_role.node.arn}}"
subnets               = ["${{subnet.a.id}}"]
security_groups       = ["${{eks_cluster.main.security_group_id}}"]
capacity_reservations = ["${{capacity_reservation.odcr.id}}", "${{capacity_block.blk.id}}"]
instance_types        = ["p5.48xlarge"]
gpu_limit             = {gpu_limit}
efa                   = {{ security_groups = ["${{security_group.efa.id}}"] }}
data_volume           = {{ size_gib = 100, snapshot = "${{image_cache.ml.snapshot_id}}" }}
gpu_sharing           = {{ strategy = "mig", mig_profile = {{ "h100.80gb" = "1g.10gb" }} }}
node_labels           = {{ "gpustack.io/capacity" = "reserved" }}
node_taints           = [{{ key = "nvidia.com/gpu", value = "true", effect = "NO_SCHEDULE" }}]

[karpenter_pool.burst]
cluster           = "${{eks_cluster.main.name}}"
node_role         = "${{iam_role.node.name}}"
subnets           = ["${{subnet.a.id}}"]
security_groups   = ["${{eks_cluster.main.security_group_id}}"]
capacity_types    = ["spot", "on-demand"]
instance_families = ["g5", "g6", "g6e"]
gpu_limit         = 16
placement_group   = "${{placement_group.burst.name}}"
gpu_sharing       = {{ strategy = "time-slicing", replicas = 4 }}
data_volume       = {{ size_gib = 200 }}
node_taints       = [{{ key = "nvidia.com/gpu", value = "true", effect = "NO_SCHEDULE" }}]
disruption        = {{ policy = "Balanced", budgets = [{{ nodes = "20%" }}, {{ nodes = 0, reasons = ["Drifted", "Underutilized"], schedule = "0 9 * * mon-fri", duration = "8h" }}] }}

[priority_class.training]
value       = 1000000
description = "training on reserved capacity"

[priority_class.batch]
value             = 1000
preemption_policy = "Never"
"#,
        odcr_end = dates.odcr_end,
        after = dates.after,
        before = dates.before,
    )
}

pub(crate) fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every file under `dir`, relative path → bytes.
pub(crate) fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// The YAML documents of a file, as JSON.
pub(crate) fn documents(text: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(text).unwrap();
    text.split("---\n").filter(|d| !d.trim().is_empty()).map(|d| serde_yaml_ng::from_str(d).unwrap()).collect()
}

/// tests/k8s/validate.py on `dir`, with the emulator's venv (jsonschema, PyYAML).
pub(crate) fn validate_manifests(dir: &Path) -> (bool, String) {
    let out = Command::new(repo().join("tests/emulator/.venv/bin/python"))
        .arg(repo().join("tests/k8s/validate.py"))
        .arg(dir)
        .output()
        .expect("run tests/k8s/validate.py");
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

fn out_str<'a>(st: &'a Value, address: &str, output: &str) -> &'a str {
    st["resources"][address]["outputs"][output].as_str().unwrap_or_else(|| panic!("{address}.{output}: {st}"))
}

#[test]
fn pools_apply_render_the_ids_from_state_validate_against_the_crds_and_destroy() {
    let env = Env::new();
    let dates = Dates::new();
    env.write("k.toml", &karpenter_stack(16, &dates));
    // Nothing applied yet: manifests says what to do.
    let early = env.run(&["manifests", "k.toml"]);
    assert_eq!(early.code, 1, "{early:?}");
    assert!(early.stderr.contains("run `gpustack apply` first"), "{early:?}");

    let apply = env.ok(&["apply", "k.toml", "--auto-approve", "--approve-purchases"]);
    assert!(apply.stdout.contains("Apply complete"), "{apply:?}");
    assert!(apply.stderr.contains("recorded (write it with gpustack manifests)"), "{apply:?}");
    let st = env.state("karp");
    // The alias is pinned once, from Bottlerocket's SSM parameter for the cluster's version.
    let alias = out_str(&st, "karpenter_pool.reserved", "ami_alias").to_string();
    assert!(alias.starts_with("bottlerocket@v1.") && !alias.contains('-'), "pinned alias {alias}");
    assert_eq!(st["resources"]["karpenter_pool.reserved"]["inputs"]["ami"], "bottlerocket@latest");
    assert_eq!(out_str(&st, "karpenter_pool.reserved", "node_pool"), "karp-reserved");
    assert_eq!(out_str(&st, "karpenter_pool.burst", "node_class"), "karp-burst");

    // In sync: the second plan has nothing to do.
    let again = env.ok(&["plan", "k.toml"]);
    assert!(again.stdout.contains("No changes."), "{again:?}");

    // The files, twice, byte for byte.
    env.ok(&["manifests", "k.toml", "--out", "one"]);
    env.ok(&["manifests", "k.toml", "--out", "two"]);
    let (one, two) = (files(&env.path("one")), files(&env.path("two")));
    assert_eq!(
        one.keys().collect::<Vec<_>>(),
        ["efa-device-plugin/values.yaml", "karpenter/burst.yaml", "karpenter/reserved.yaml", "priority-classes.yaml"]
    );
    assert_eq!(one, two, "manifests must be byte-identical between runs");

    // The ids in the YAML are the ones in state.
    let id = |a: &str| st["resources"][a]["id"].as_str().unwrap().to_string();
    let reserved = documents(&one["karpenter/reserved.yaml"]);
    let class = &reserved[0]["spec"];
    assert_eq!(class["role"], out_str(&st, "iam_role.node", "name"));
    assert_eq!(class["amiSelectorTerms"][0]["alias"], alias.as_str());
    assert_eq!(class["subnetSelectorTerms"][0]["id"], id("subnet.a").as_str());
    let mut groups = vec![out_str(&st, "eks_cluster.main", "security_group_id").to_string(), id("security_group.efa")];
    groups.sort();
    let rendered: Vec<&str> =
        class["securityGroupSelectorTerms"].as_array().unwrap().iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(rendered, groups);
    let mut reservations = vec![
        out_str(&st, "capacity_reservation.odcr", "id").to_string(),
        out_str(&st, "capacity_block.blk", "id").to_string(),
    ];
    reservations.sort();
    let rendered: Vec<&str> = class["capacityReservationSelectorTerms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(rendered, reservations);
    let data = &class["blockDeviceMappings"][1];
    assert_eq!(
        (data["deviceName"].as_str(), class["blockDeviceMappings"][0]["deviceName"].as_str()),
        (Some("/dev/xvdb"), Some("/dev/xvda"))
    );
    assert_eq!(data["ebs"]["snapshotID"], out_str(&st, "image_cache.ml", "snapshot_id"));
    assert_eq!(class["networkInterfaces"].as_array().unwrap().len(), 33, "p5: an ENA primary and 32 efa-only");
    let burst = documents(&one["karpenter/burst.yaml"]);
    assert_eq!(burst[0]["spec"]["placementGroupSelector"]["name"], out_str(&st, "placement_group.burst", "name"));
    assert_eq!(burst[1]["spec"]["template"]["spec"]["nodeClassRef"]["name"], "karp-burst");
    // Policy and budgets as written, validated below against the v1.14.1 CRD (issue 18 item 4).
    assert_eq!(burst[1]["spec"]["disruption"]["consolidationPolicy"], "Balanced");
    assert_eq!(
        burst[1]["spec"]["disruption"]["budgets"][1]["reasons"],
        serde_json::json!(["Drifted", "Underutilized"])
    );
    assert_eq!(burst[1]["spec"]["disruption"]["budgets"][1]["schedule"], "0 9 * * mon-fri");
    // Apply recorded the hash of exactly what manifests writes.
    for pool in ["reserved", "burst"] {
        let hash = format!("{:x}", Sha256::digest(&one[&format!("karpenter/{pool}.yaml")]));
        assert_eq!(out_str(&st, &format!("karpenter_pool.{pool}"), "sha256"), hash, "{pool}");
    }
    let efa = String::from_utf8(one["efa-device-plugin/values.yaml"].clone()).unwrap();
    assert!(efa.contains("  values:\n  - p5.48xlarge\n"), "{efa}");

    // Every document against the schema the cluster checks it with.
    let (valid, report) = validate_manifests(&env.path("one"));
    assert!(valid, "{report}");
    assert!(report.contains("6 of 6 document(s) valid"), "{report}");
    assert!(report.contains("skip efa-device-plugin/values.yaml"), "{report}");

    // The stream is for kubectl: Helm values stay out of it.
    let stream = env.ok(&["manifests", "k.toml"]);
    assert!(stream.stdout.contains("# gpustack manifests: karpenter/reserved.yaml"), "{stream:?}");
    assert!(!stream.stdout.contains("supportedInstanceLabels"), "{stream:?}");
    assert!(stream.stderr.contains("efa-device-plugin/values.yaml; write them with --out DIR"), "{stream:?}");

    // An update renders the new YAML and keeps the pinned alias.
    env.write("k.toml", &karpenter_stack(24, &dates));
    let plan = env.ok(&["plan", "k.toml"]);
    assert!(plan.stdout.contains("» karpenter_pool.reserved"), "{plan:?}");
    // MIG 1g.10gb: 7 slices a GPU, each reported as nvidia.com/gpu (issue 18 item 1).
    assert!(
        plan.stdout.contains("-    nvidia.com/gpu: 112") && plan.stdout.contains("+    nvidia.com/gpu: 168"),
        "{plan:?}"
    );
    // A limit is a behavioral field: no drift (Karpenter docs v1.14 concepts/disruption.md
    // §Behavioral Fields). A taint is in the hashed template: the plan warns (issue 18 item 3).
    assert!(!plan.stderr.contains("drifts its running nodes") && !plan.stdout.contains("drifts"), "{plan:?}");
    env.write(
        "k.toml",
        &karpenter_stack(16, &dates).replace(
            "node_labels           = { \"gpustack.io/capacity\" = \"reserved\" }",
            "node_labels           = { \"gpustack.io/capacity\" = \"reserved\", \"gpustack.io/workload\" = \"training\" }",
        ),
    );
    let drift = env.ok(&["plan", "k.toml"]);
    let warned = format!("{}{}", drift.stdout, drift.stderr);
    assert!(
        warned.contains("karpenter_pool.reserved: changing node_labels.gpustack.io/workload drifts its running nodes"),
        "{drift:?}"
    );
    // On a Capacity Block: a 10m grace period, and a budget of 0 keeps drift off its nodes
    // (review r18 m2).
    assert!(warned.contains("none at a time while a budget of 0 nodes applies to Drifted"), "{drift:?}");
    assert!(warned.contains("carry terminationGracePeriod 10m, but none is drifted"), "{drift:?}");
    env.write("k.toml", &karpenter_stack(24, &dates));
    assert!(plan.stdout.contains("Plan: 0 to add, 0 to change, 0 to replace, 0 to delete, 1 to render"), "{plan:?}");
    env.ok(&["apply", "k.toml", "--auto-approve"]);
    let st = env.state("karp");
    assert_eq!(out_str(&st, "karpenter_pool.reserved", "ami_alias"), alias, "the pin survives an update");
    env.ok(&["manifests", "k.toml", "--out", "three"]);
    let three = files(&env.path("three"));
    let pool = documents(&three["karpenter/reserved.yaml"]);
    assert_eq!(pool[1]["spec"]["limits"]["nvidia.com/gpu"], 24 * 7);
    assert_eq!(pool[0]["spec"]["amiSelectorTerms"][0]["alias"], alias.as_str());
    assert!(env.ok(&["plan", "k.toml"]).stdout.contains("No changes."));

    // Destroy: the rendered resources are forgotten, everything else deleted (the bought
    // block is retained until its end: not cancellable).
    let destroy = env.ok(&["destroy", "k.toml", "--auto-approve"]);
    assert!(destroy.stderr.contains("forgotten"), "{destroy:?}");
    let st = env.state("karp");
    assert!(st["resources"].as_object().unwrap().is_empty(), "{st}");
    assert_eq!(env.tagged("karp").total(), 0, "{:?}", env.tagged("karp"));
}

/// examples/karpenter.toml as shipped: applies (buying its block), is in sync, renders
/// manifests that validate, destroys, and every call it made is in its `gpustack policy`.
#[test]
fn the_shipped_example_applies_renders_valid_manifests_and_destroys() {
    let env = Env::new();
    let example = repo().join("examples/karpenter.toml");
    let file = example.to_str().unwrap();
    let (after, before) = (format!("block_after={}", in_days(1)), format!("block_before={}", in_days(7)));
    let vars = ["--var", after.as_str(), "--var", before.as_str()];
    let run = |cmd: &[&str]| env.ok(&[cmd, &[file][..], &vars[..]].concat());
    env.emu.reset_requests();
    let apply = run(&["apply", "--auto-approve", "--approve-purchases"]);
    assert!(apply.stdout.contains("Apply complete"), "{apply:?}");
    let again = env.run(&[&["plan", "--detailed-exitcode", file][..], &vars[..]].concat());
    assert_eq!(again.code, 0, "in sync after apply: {again:?}");
    run(&["manifests", "--out", "k8s"]);
    let written = files(&env.path("k8s"));
    for pool in ["train", "inference", "burst", "fallback"] {
        assert!(written.contains_key(&format!("karpenter/{pool}.yaml")), "{:?}", written.keys());
    }
    // Review r18 M1: a pod for shared GPUs tolerates nvidia.com/gpu by itself
    // (ExtendedResourceToleration) and nvidia.com/gpu.shared by its spec; a pool it can reach
    // with those alone must share GPUs, or a cold scale-up spills shared pods onto whole GPUs.
    for pool in ["train", "inference", "burst", "fallback"] {
        let docs = documents(&written[&format!("karpenter/{pool}.yaml")]);
        let taints = docs[1]["spec"]["template"]["spec"]["taints"].as_array().cloned().unwrap_or_default();
        let reachable =
            taints.iter().all(|t| matches!(t["key"].as_str(), Some("nvidia.com/gpu" | "nvidia.com/gpu.shared")));
        let shares =
            docs[0]["spec"]["userData"].as_str().is_some_and(|u| u.contains("time-slicing") || u.contains("mps"));
        assert_eq!(reachable, shares, "{pool}: reachable by shared pods {reachable}, shares GPUs {shares}: {taints:?}");
    }
    // Review r18 B1: the burst pool's types have 4 vCPUs per GPU: cpu bounds 32 physical GPUs.
    let burst = documents(&written["karpenter/burst.yaml"]);
    assert_eq!(burst[1]["spec"]["limits"], serde_json::json!({ "cpu": 128, "nvidia.com/gpu": 64 }));
    let (valid, report) = validate_manifests(&env.path("k8s"));
    assert!(valid, "{report}");
    assert!(report.contains("11 of 11 document(s) valid"), "{report}");
    run(&["destroy", "--auto-approve"]);
    assert_eq!(env.tagged("karp-dev").total(), 0);
    let policy: Value = serde_json::from_str(&run(&["policy"]).stdout).unwrap();
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
    assert!(made.contains("ssm:GetParameter") && made.contains("eks:DescribeCluster"), "the alias was pinned");
}

/// Review r18 m6: the quickstart's pool has a workload taint that stock GPU pods do not
/// tolerate by themselves; its header comment and the README quick start give the exact
/// toleration for every pool taint other than nvidia.com/gpu (tolerated through EKS's
/// ExtendedResourceToleration).
#[test]
fn the_quickstart_says_which_toleration_its_gpu_pods_need() {
    let text = std::fs::read_to_string(repo().join("stacks/quickstart-karpenter.toml")).unwrap();
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let doc: toml_edit::DocumentMut = text.parse().unwrap();
    let header: String = text.lines().take_while(|l| l.starts_with('#') || l.is_empty()).collect::<Vec<_>>().join("\n");
    let pools = doc["karpenter_pool"].as_table().unwrap();
    for (name, pool) in pools {
        for t in pool["node_taints"].as_array().into_iter().flatten().filter_map(|t| t.as_inline_table()) {
            let field = |k: &str| t.get(k).and_then(|v| v.as_str()).unwrap_or_default().to_string();
            let (key, value) = (field("key"), field("value"));
            if key == "nvidia.com/gpu" {
                continue;
            }
            let toleration =
                format!("- key: {key}\n#     operator: Equal\n#     value: {value}\n#     effect: NoSchedule");
            assert!(header.contains(&toleration), "{name}: the header should give\n{toleration}\n{header}");
            let yaml = format!("- key: {key}\n  operator: Equal\n  value: {value}\n  effect: NoSchedule");
            assert!(readme.contains(&yaml), "{name}: the README quick start should give\n{yaml}");
        }
    }
}
