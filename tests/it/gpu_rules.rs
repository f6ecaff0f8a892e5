//! Every GPU rule has a failing stack with its message: offline ones through
//! `validate`, catalog ones through `plan` (the emulator serves DescribeInstanceTypes).
//! A refused plan makes no call that changes anything.

use crate::harness::Env;

/// A cluster and one launch template + node group pair around `lt` and `ng` lines.
fn stack(lt: &str, ng: &str) -> String {
    format!(
        r#"[stack]
name   = "rules"
region = "us-west-2"

[vpc.main]
cidr_block       = "10.9.0.0/16"
internet_gateway = true

[subnet.a]
vpc               = "${{vpc.main.id}}"
cidr_block        = "10.9.0.0/20"
availability_zone = "us-west-2a"
nat_gateway       = "${{nat_gateway.out.id}}"

[subnet.b]
vpc               = "${{vpc.main.id}}"
cidr_block        = "10.9.16.0/20"
availability_zone = "us-west-2b"
public            = true

[nat_gateway.out]
subnet = "${{subnet.b.id}}"

[security_group.efa]
vpc = "${{vpc.main.id}}"
efa = true

[eks_cluster.main]
version             = "1.33"
role                = "arn:aws:iam::123456789012:role/cluster"
subnets             = ["${{subnet.a.id}}", "${{subnet.b.id}}"]
public_access_cidrs = ["203.0.113.0/24"]

[launch_template.t]
{lt}

[node_group.n]
cluster         = "${{eks_cluster.main.name}}"
node_role       = "arn:aws:iam::123456789012:role/node"
subnets         = ["${{subnet.a.id}}"]
launch_template = "${{launch_template.t.id}}"
{ng}
"#
    )
}

/// Cases checked offline: (template lines, node group lines, expected message, expected help).
const OFFLINE: &[(&str, &str, &str, &str)] = &[
    (
        r#"instance_type = "g6.xlarge"
gpu_sharing = { strategy = "time-slicing", replicas = 1 }"#,
        "",
        "time-slicing replicas must be at least 2, found 1",
        "use strategy = \"none\"",
    ),
    (
        r#"instance_type = "p5.48xlarge"
gpu_sharing = { strategy = "mps", replicas = 4, mig_profile = { "h100.80gb" = "1g.10gb" } }"#,
        "",
        "`mig_profile` does not go with strategy \"mps\": MIG and mps are exclusive",
        "pick one",
    ),
    (
        r#"instance_type = "p5.48xlarge"
gpu_sharing = { strategy = "mig", mig_profile = { "h100.80gb" = "1g.10gb" }, replicas = 2 }"#,
        "",
        "`replicas` does not apply to MIG",
        "remove replicas",
    ),
    (
        r#"instance_type = "g6.xlarge"
gpu_sharing = { strategy = "mps", replicas = 64 }"#,
        "",
        "MPS replicas must be 2 to 48, found 64",
        "",
    ),
    (
        r#"instance_type = "p5.48xlarge"
gpu_sharing = { strategy = "mps", replicas = 4 }
bottlerocket_settings = { kubelet-device-plugins = { nvidia = { device-sharing-strategy = "time-slicing" } } }"#,
        "",
        "`bottlerocket_settings` sets `settings.kubelet-device-plugins.nvidia.device-sharing-strategy`",
        "dedicated attribute",
    ),
    (
        r#"instance_type = "p5.48xlarge""#,
        r#"capacity_type = "CAPACITY_BLOCK""#,
        "is CAPACITY_BLOCK, but its launch template `launch_template.t` does not set market = \"capacity-block\"",
        "capacity_reservation",
    ),
    (
        r#"instance_type = "p5.48xlarge"
capacity_reservation = "cr-0123456789abcdef0"
market = "capacity-block""#,
        r#"capacity_type = "ON_DEMAND""#,
        "a capacity-block template, but its capacity_type is ON_DEMAND",
        "CAPACITY_BLOCK",
    ),
    (
        r#"capacity_reservation = "cr-0123456789abcdef0"
market = "capacity-block""#,
        r#"capacity_type = "CAPACITY_BLOCK"
instance_types = ["p5.48xlarge"]"#,
        "CAPACITY_BLOCK takes no `instance_types`",
        "remove instance_types",
    ),
    (
        r#"instance_type = "p5.48xlarge"
capacity_reservation = "cr-0123456789abcdef0"
market = "capacity-block""#,
        r#"capacity_type = "CAPACITY_BLOCK"
subnets = ["${subnet.a.id}", "${subnet.b.id}"]"#,
        "its subnets span 2 zones (us-west-2a, us-west-2b); a Capacity Block lives in one",
        "only subnets in the block's availability zone",
    ),
    (
        r#"node_labels = { a = "b" }"#,
        r#"instance_types = ["g6.xlarge"]
ami_type = "AL2023_x86_64_NVIDIA""#,
        "runs AL2023_x86_64_NVIDIA, but `launch_template.t` carries Bottlerocket settings",
        "BOTTLEROCKET_",
    ),
];

#[test]
fn offline_gpu_rules_fail_validate_with_their_message() {
    let env = Env::new();
    for (i, (lt, ng, msg, help)) in OFFLINE.iter().enumerate() {
        // A node-group `subnets` override replaces the default line.
        let mut text = stack(lt, ng);
        if ng.contains("subnets =") {
            text = text.replacen("subnets         = [\"${subnet.a.id}\"]\n", "", 1);
        }
        let file = format!("offline{i}.toml");
        env.write(&file, &text);
        let r = env.run(&["validate", &file]);
        assert_eq!(r.code, 1, "case {i} must fail: {r:?}");
        assert!(r.stderr.contains(msg), "case {i}: expected {msg:?} in {r:?}");
        assert!(r.stderr.contains(help), "case {i}: expected help {help:?} in {r:?}");
        assert!(r.stderr.contains(&format!("{file}:")), "case {i} names file:line:column: {r:?}");
    }
}

#[test]
fn warnings_do_not_stop_a_plan() {
    let env = Env::new();
    // SPOT with one type; reserved capacity in a placement group; an API open to the world.
    let text = stack(
        r#"instance_type = "p5.48xlarge"
capacity_reservation = "cr-0123456789abcdef0"
placement_group = "somewhere""#,
        r#"capacity_type = "SPOT""#,
    )
    .replace("public_access_cidrs = [\"203.0.113.0/24\"]\n", "");
    env.write("w.toml", &text);
    let r = env.ok(&["validate", "w.toml"]);
    assert!(r.stderr.contains("SPOT with a single instance type (from `launch_template.t`)"), "{r:?}");
    assert!(r.stderr.contains("puts reserved capacity in a placement group"), "{r:?}");
    assert!(r.stderr.contains("open to the whole internet (0.0.0.0/0)"), "{r:?}");
    let plan = env.ok(&["plan", "w.toml"]);
    assert!(plan.stdout.contains("Plan: 8 to add"), "{plan:?}");
}

/// Cases that need the instance catalog: (template lines, node group lines, message, help).
const CATALOG: &[(&str, &str, &str, &str)] = &[
    (
        r#"instance_type = "m6i.xlarge"
efa = { security_groups = ["${security_group.efa.id}"] }"#,
        "",
        "`launch_template.t`: m6i.xlarge does not support EFA",
        "pick an EFA type",
    ),
    (
        r#"instance_type = "p5.48xlarge"
efa = { interfaces = 64 }"#,
        "",
        "p5.48xlarge has at most 32 EFA interfaces, not 64",
        "interfaces = 32",
    ),
    (
        r#"instance_type = "g6.xlarge"
gpu_sharing = { strategy = "mig", mig_profile = { "h100.80gb" = "1g.10gb" } }"#,
        "",
        "MIG needs an A100, A30, H100, H200 or B200 GPU; g6.xlarge has L4",
        "time-slicing or mps",
    ),
    (
        r#"instance_type = "p5.48xlarge"
gpu_sharing = { strategy = "mig", mig_profile = { "a100.40gb" = "1g.5gb" } }"#,
        "",
        "mig_profile has no entry for h100.80gb, the GPU of p5.48xlarge",
        "\"h100.80gb\"",
    ),
    (
        r#"instance_type = "m6i.large"
gpu_sharing = { strategy = "time-slicing", replicas = 4 }"#,
        "",
        "gpu_sharing \"time-slicing\" on m6i.large, which has no NVIDIA GPU",
        "NVIDIA GPU types",
    ),
    (
        r#"instance_type = "p5.48xlarge""#,
        r#"ami_type = "BOTTLEROCKET_x86_64""#,
        "BOTTLEROCKET_x86_64 has no NVIDIA driver, but p5.48xlarge has 8× H100 80 GiB",
        "BOTTLEROCKET_x86_64_NVIDIA",
    ),
    (
        r#"instance_type = "m6i.large""#,
        r#"ami_type = "BOTTLEROCKET_x86_64_NVIDIA""#,
        "BOTTLEROCKET_x86_64_NVIDIA is an NVIDIA AMI, but m6i.large has no NVIDIA GPU",
        "",
    ),
    (
        r#"instance_type = "p5.49xlarge""#,
        "",
        "EC2 does not know instance type \"p5.49xlarge\" in us-west-2",
        "check the spelling",
    ),
];

#[test]
fn catalog_gpu_rules_stop_the_plan_before_any_change() {
    let env = Env::new();
    for (i, (lt, ng, msg, help)) in CATALOG.iter().enumerate() {
        let file = format!("catalog{i}.toml");
        env.write(&file, &stack(lt, ng));
        // validate runs the same rules from the embedded instance catalog: a type it carries
        // (p5, g6) fails there already, and so does an NVIDIA AMI on a type of a family it
        // does not carry (m6i: no accelerated family is missing from it); the rest (GPU
        // sharing on m6i, a misspelt type) is left to plan.
        let v = env.run(&["validate", &file]);
        let offline = ["p5.48xlarge", "g6.xlarge"].iter().any(|t| lt.contains(&format!("\"{t}\"")))
            || (lt.contains("m6i.large") && ng.contains("NVIDIA"));
        if offline {
            assert_eq!(v.code, 1, "case {i}: validate finds it offline: {v:?}");
            assert!(v.stderr.contains(msg), "case {i}: expected {msg:?} in {v:?}");
        } else {
            assert_eq!(v.code, 0, "case {i}: {v:?}");
        }
        env.emu.reset_requests();
        let r = env.run(&["plan", &file]);
        assert_eq!(r.code, 1, "case {i} must fail: {r:?}");
        assert!(r.stderr.contains(msg), "case {i}: expected {msg:?} in {r:?}");
        assert!(r.stderr.contains(help), "case {i}: expected help {help:?} in {r:?}");
        assert!(r.stderr.contains(&format!("{file}:")), "case {i} names file:line:column: {r:?}");
        let apply = env.run(&["apply", &file, "--auto-approve"]);
        assert_eq!(apply.code, 1, "apply refuses too: {apply:?}");
        let changing: Vec<_> = env
            .emu
            .requests()
            .into_iter()
            .filter(|(_, a)| {
                !(a.starts_with("Describe") || a.starts_with("List") || a.starts_with("Get") || a.starts_with("GET"))
            })
            .collect();
        assert!(changing.is_empty(), "case {i}: no change may be made: {changing:?}");
    }
}

#[test]
fn gpu_counts_come_from_logical_gpu_count_when_count_is_zero() {
    // g6f.large reports Count 0 and LogicalGpuCount 1 (karpenter-provider-aws#8368).
    let env = Env::new();
    env.write("g6f.toml", &stack(r#"instance_type = "g6f.large""#, ""));
    let plan = env.ok(&["plan", "g6f.toml"]);
    assert!(plan.stdout.contains("g6f.large: 1× L4"), "{plan:?}");
    assert!(plan.stdout.contains("ami_type auto → BOTTLEROCKET_x86_64_NVIDIA"), "{plan:?}");
}
