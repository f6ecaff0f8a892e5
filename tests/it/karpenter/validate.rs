//! `gpustack validate` on karpenter_pool stacks: each rule refuses one stack (its message,
//! the line it points at, its help) and accepts the fixed one. Offline: AWS_ENDPOINT_URL is
//! a closed port, so no call is made.

use std::process::Command;

use crate::harness::bin;

pub(super) struct Checked {
    pub(super) code: i32,
    pub(super) stderr: String,
}

pub(super) fn validate(text: &str) -> Checked {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), text).unwrap();
    let out = Command::new(bin())
        .args(["validate", "s.toml"])
        .current_dir(dir.path())
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    Checked { code: out.status.code().unwrap_or(-1), stderr: String::from_utf8_lossy(&out.stderr).into() }
}

/// A network with a NAT gateway, a cluster, a node role, an ODCR of g6.12xlarge and a
/// Capacity Block of p5.48xlarge (both in us-west-2a), then `extra`.
pub(super) fn stack(extra: &str) -> String {
    format!(
        r#"[stack]
name   = "v"
region = "us-west-2"

[vpc.main]
cidr_block       = "10.0.0.0/16"
internet_gateway = true

[subnet.pub]
vpc               = "${{vpc.main.id}}"
cidr_block        = "10.0.0.0/20"
availability_zone = "us-west-2a"
public            = true

[nat_gateway.out]
subnet = "${{subnet.pub.id}}"

[subnet.a]
vpc               = "${{vpc.main.id}}"
cidr_block        = "10.0.16.0/20"
availability_zone = "us-west-2a"
nat_gateway       = "${{nat_gateway.out.id}}"

[subnet.b]
vpc               = "${{vpc.main.id}}"
cidr_block        = "10.0.32.0/20"
availability_zone = "us-west-2b"
nat_gateway       = "${{nat_gateway.out.id}}"

[subnet.closed]
vpc               = "${{vpc.main.id}}"
cidr_block        = "10.0.48.0/20"
availability_zone = "us-west-2a"

[iam_role.cluster]
service = "eks.amazonaws.com"

[iam_role.node]
service = "ec2.amazonaws.com"

[eks_addon.pod_identity]
cluster = "${{eks_cluster.main.name}}"
addon   = "eks-pod-identity-agent"

[karpenter_controller.main]
cluster   = "${{eks_cluster.main.name}}"
node_role = "${{iam_role.node.arn}}"
version   = "1.14.1"

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
instance_type     = "g6.12xlarge"
availability_zone = "us-west-2a"
instance_count    = 1
end_date          = "2027-01-01T00:00:00Z"

[capacity_block.blk]
instance_type     = "p5.48xlarge"
instance_count    = 1
duration_hours    = 24
start_after       = "2026-12-01T00:00:00Z"
start_before      = "2026-12-08T00:00:00Z"
availability_zone = "us-west-2a"
max_upfront_usd   = 40000
{extra}"#
    )
}

/// A pool with the wiring every pool needs, then `body` (one attribute a line).
pub(super) fn pool(name: &str, body: &str) -> String {
    format!(
        "\n[karpenter_pool.{name}]\ncluster         = \"${{eks_cluster.main.name}}\"\nnode_role       = \"${{iam_role.node.name}}\"\nsecurity_groups = [\"${{eks_cluster.main.security_group_id}}\"]\ndata_volume     = {{ size_gib = 200 }}\n{body}\n"
    )
}

/// The stack is refused with `message`, pointing at a line containing `at`, with `help`.
pub(super) fn refused(text: &str, message: &str, at: &str, help: &str) {
    let c = validate(text);
    assert_eq!(c.code, 1, "expected a refusal:\n{}", c.stderr);
    let block = c
        .stderr
        .split("\nerror: ")
        .map(|b| b.trim_start_matches("error: "))
        .find(|b| b.contains(message))
        .unwrap_or_else(|| panic!("no error {message:?}:\n{}", c.stderr));
    assert!(block.contains(at), "{message:?} should point at {at:?}:\n{block}");
    assert!(block.contains(&format!("help: {help}")), "{message:?} should help with {help:?}:\n{block}");
}

/// The stack is accepted with no error and no warning mentioning `absent`.
pub(super) fn accepted(text: &str, absent: &str) {
    let c = validate(text);
    assert_eq!(c.code, 0, "expected valid:\n{}", c.stderr);
    assert!(!c.stderr.contains(absent), "no {absent:?} expected:\n{}", c.stderr);
}

const RESERVED_P5: &str = "subnets = [\"${subnet.a.id}\"]\ninstance_types = [\"p5.48xlarge\"]\ngpu_limit = 8";

#[test]
fn reserved_capacity_needs_reservations() {
    let text = stack(&pool("p", &format!("{RESERVED_P5}\ncapacity_types = [\"reserved\", \"on-demand\"]")));
    refused(
        &text,
        "`karpenter_pool.p` allows \"reserved\" capacity but names no `capacity_reservations`",
        "capacity_types = [\"reserved\", \"on-demand\"]",
        "add capacity_reservations = [\"${capacity_block.NAME.id}\"]",
    );
    let fixed = format!(
        "{RESERVED_P5}\ncapacity_types = [\"reserved\", \"on-demand\"]\ncapacity_reservations = [\"${{capacity_block.blk.id}}\"]"
    );
    accepted(&stack(&pool("p", &fixed)), "capacity_reservations");
}

#[test]
fn reservations_need_reserved_capacity() {
    let text = stack(&pool(
        "p",
        &format!(
            "{RESERVED_P5}\ncapacity_types = [\"on-demand\"]\ncapacity_reservations = [\"${{capacity_block.blk.id}}\"]"
        ),
    ));
    refused(
        &text,
        "leave out \"reserved\": the reservations would never be used",
        "capacity_types = [\"on-demand\"]",
        "add \"reserved\" to capacity_types",
    );
    // Without capacity_types, a pool with reservations is reserved.
    accepted(
        &stack(&pool("p", &format!("{RESERVED_P5}\ncapacity_reservations = [\"${{capacity_block.blk.id}}\"]"))),
        "reserved",
    );
}

#[test]
fn a_reservation_must_be_in_the_pools_zones() {
    let body = "subnets = [\"${subnet.b.id}\"]\ninstance_types = [\"p5.48xlarge\"]\ngpu_limit = 8\ncapacity_reservations = [\"${capacity_block.blk.id}\"]";
    refused(
        &stack(&pool("p", body)),
        "`capacity_block.blk` reserves capacity in us-west-2a, but the subnets of `karpenter_pool.p` are in us-west-2b",
        "subnets = [\"${subnet.b.id}\"]",
        "add a subnet in us-west-2a to the pool",
    );
    accepted(
        &stack(&pool("p", &body.replace("${subnet.b.id}\"]", "${subnet.a.id}\", \"${subnet.b.id}\"]"))),
        "reserves capacity",
    );
}

#[test]
fn a_pools_capacity_block_names_its_zone() {
    let text = stack(&pool("p", &format!("{RESERVED_P5}\ncapacity_reservations = [\"${{capacity_block.blk.id}}\"]")))
        .replace("availability_zone = \"us-west-2a\"\nmax_upfront_usd", "max_upfront_usd");
    refused(
        &text,
        "`capacity_block.blk` names no availability_zone, and `karpenter_pool.p` runs on it",
        "[capacity_block.blk]",
        "set availability_zone to the zone of the pool's subnets (\"us-west-2a\")",
    );
    accepted(
        &stack(&pool("p", &format!("{RESERVED_P5}\ncapacity_reservations = [\"${{capacity_block.blk.id}}\"]"))),
        "availability_zone",
    );
}

#[test]
fn a_pool_must_run_the_type_it_reserves() {
    let text =
        stack(&pool("p", &format!("{RESERVED_P5}\ncapacity_reservations = [\"${{capacity_reservation.odcr.id}}\"]")));
    refused(
        &text,
        "`capacity_reservation.odcr` reserves g6.12xlarge, which `karpenter_pool.p` never launches",
        "instance_types = [\"p5.48xlarge\"]",
        "add g6.12xlarge to the pool",
    );
    let families = "subnets = [\"${subnet.a.id}\"]\ninstance_families = [\"g6\"]\ngpu_limit = 8\ncapacity_reservations = [\"${capacity_reservation.odcr.id}\"]";
    accepted(&stack(&pool("p", families)), "never launches");
}

#[test]
fn a_reservation_is_not_shared_by_a_pool_and_a_node_group() {
    let group = r#"
[launch_template.lt]
instance_type        = "p5.48xlarge"
capacity_reservation = "${capacity_block.blk.id}"
market               = "capacity-block"
data_volume          = { size_gib = 200 }

[iam_role.group]
service = "ec2.amazonaws.com"

[node_group.train]
cluster         = "${eks_cluster.main.name}"
node_role       = "${iam_role.group.arn}"
subnets         = ["${subnet.a.id}"]
launch_template = "${launch_template.lt.id}"
capacity_type   = "CAPACITY_BLOCK"
scaling         = { min = 0, max = 1 }
"#;
    let text = stack(&format!(
        "{group}{}",
        pool("p", &format!("{RESERVED_P5}\ncapacity_reservations = [\"${{capacity_block.blk.id}}\"]"))
    ));
    refused(
        &text,
        "`karpenter_pool.p` and `node_group.train` both run on `capacity_block.blk`",
        "capacity_reservations = [\"${capacity_block.blk.id}\"]",
        "give the reservation to one of them",
    );
    accepted(
        &stack(&format!("{group}{}", pool("p", &format!("{RESERVED_P5}\ncapacity_types = [\"on-demand\"]")))),
        "both run on",
    );
}

#[test]
fn capacity_reservations_are_this_stacks() {
    let text = stack(&pool("p", &format!("{RESERVED_P5}\ncapacity_reservations = [\"${{subnet.a.id}}\"]")));
    refused(
        &text,
        "`karpenter_pool.p`: capacity_reservations takes this stack's reservations",
        "subnet.a.id",
        "refer to one: \"${capacity_reservation.NAME.id}\"",
    );
    let text = stack(&pool("p", &format!("{RESERVED_P5}\ncapacity_reservations = [\"odcr-1\"]")));
    refused(&text, "\"odcr-1\" in capacity_reservations is not an id (cr-…)", "odcr-1", "write an id (\"cr-0abc…\")");
    // Issue 19: a reservation's literal id (outside the stack) is taken; the plan notes what
    // it cannot check about it.
    let text = stack(&pool("p", &format!("{RESERVED_P5}\ncapacity_reservations = [\"cr-0123456789abcdef0\"]")));
    accepted(&text, "capacity_reservations takes this stack's reservations");
}

#[test]
fn gpu_limit_covers_one_instance() {
    let text = stack(&pool(
        "p",
        "subnets = [\"${subnet.a.id}\"]\ninstance_types = [\"g6.xlarge\", \"g6.12xlarge\"]\ngpu_limit = 2",
    ));
    refused(
        &text,
        "gpu_limit = 2 renders limits nvidia.com/gpu: 2, less than the 4 one g6.12xlarge reports: Karpenter could never launch it",
        "gpu_limit = 2",
        "set gpu_limit ≥ 4",
    );
    accepted(
        &stack(&pool(
            "p",
            "subnets = [\"${subnet.a.id}\"]\ninstance_types = [\"g6.xlarge\", \"g6.12xlarge\"]\ngpu_limit = 4",
        )),
        "gpu_limit",
    );
}

/// Issue 18 item 1 / audit B1: Karpenter charges the limit with the node's reported capacity
/// (kubernetes-sigs/karpenter v1.14.1 `pkg/controllers/state/statenode.go`), which sharing
/// multiplies; the check compares the multiplied values, and every reserved instance must fit.
#[test]
fn gpu_limit_counts_physical_gpus_and_admits_every_reserved_instance() {
    // Shared four ways, one physical g6.xlarge GPU: the rendered limit is 4 and one node reports 4.
    accepted(
        &stack(&pool(
            "p",
            "subnets = [\"${subnet.a.id}\"]\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 1\ngpu_sharing = { strategy = \"time-slicing\", replicas = 4 }\nnode_taints = [{ key = \"nvidia.com/gpu.shared\", value = \"true\", effect = \"NO_SCHEDULE\" }]",
        )),
        "gpu_limit",
    );
    // An ODCR of two g6.12xlarge (8 GPUs) under gpu_limit = 4: the second instance idles.
    let two = stack(&pool(
        "p",
        "subnets = [\"${subnet.a.id}\"]\ncapacity_reservations = [\"${capacity_reservation.odcr.id}\"]\ninstance_types = [\"g6.12xlarge\"]\ngpu_limit = 4",
    ))
    .replacen("instance_count    = 1", "instance_count    = 2", 1);
    refused(
        &two,
        "gpu_limit = 4 is less than the 8 GPUs it reserves (2 × g6.12xlarge (4 GPUs) in `capacity_reservation.odcr`): the reservation's other instances could never launch, and bill idle",
        "gpu_limit = 4",
        "set gpu_limit ≥ 8",
    );
    accepted(&two.replace("gpu_limit = 4", "gpu_limit = 8"), "reserves");
}

/// Issue 18 item 21: gpu_limit is required where it binds, refused where it cannot (a CPU
/// pool reports no nvidia.com/gpu), and a Neuron pool's limit counts Neuron devices.
#[test]
fn gpu_limit_is_required_where_it_binds_and_refused_where_it_cannot() {
    refused(
        &stack(&pool("p", "subnets = [\"${subnet.a.id}\"]\ninstance_types = [\"g6.xlarge\"]")),
        "`karpenter_pool.p` launches NVIDIA GPUs but sets no gpu_limit: nothing caps how many it starts",
        "[karpenter_pool.p]",
        "set gpu_limit = the most physical GPUs",
    );
    refused(
        &stack(&pool("p", "subnets = [\"${subnet.a.id}\"]\ninstance_types = [\"c5n.18xlarge\"]\ngpu_limit = 8")),
        "`karpenter_pool.p`: gpu_limit never binds",
        "gpu_limit = 8",
        "remove gpu_limit from this pool",
    );
    accepted(&stack(&pool("p", "subnets = [\"${subnet.a.id}\"]\ninstance_types = [\"c5n.18xlarge\"]")), "gpu_limit");
    accepted(
        &stack(&pool("p", "subnets = [\"${subnet.a.id}\"]\ninstance_types = [\"trn1.32xlarge\"]\ngpu_limit = 32")),
        "gpu_limit",
    );
    // Review r18 m7: g4ad is AMD, reported as amd.com/gpu (karpenter-provider-aws v1.14.1
    // types.go `amdGPUs`): its gpu_limit binds on that resource, not nvidia.com/gpu.
    refused(
        &stack(&pool("p", "subnets = [\"${subnet.a.id}\"]\ninstance_families = [\"g4ad\"]")),
        "`karpenter_pool.p` launches AMD GPUs but sets no gpu_limit",
        "[karpenter_pool.p]",
        "set gpu_limit = the most physical GPUs",
    );
}

/// Issue 18 item 6 / audit M4: aws/karpenter-provider-aws#8368 ("Karpenter will **not**
/// provision these instance types for workloads with `nvidia.com/gpu` resource requests").
#[test]
fn types_karpenter_counts_as_zero_gpus_are_refused() {
    refused(
        &stack(&pool(
            "p",
            "subnets = [\"${subnet.a.id}\"]\ninstance_types = [\"g6.xlarge\", \"p5.4xlarge\"]\ngpu_limit = 4",
        )),
        "Karpenter counts p5.4xlarge as 0 GPUs",
        "instance_types = [\"g6.xlarge\", \"p5.4xlarge\"]",
        "remove them from the pool",
    );
    let families = stack(&pool(
        "p",
        "subnets = [\"${subnet.a.id}\"]\ncapacity_types = [\"spot\"]\ninstance_families = [\"g6\", \"g6f\", \"gr6f\"]\ngpu_limit = 4",
    ));
    refused(&families, "Karpenter counts g6f, gr6f as 0 GPUs", "instance_families", "remove them from the pool");
    assert!(validate(&families).stderr.contains("may overrun gpu_limit (aws/karpenter-provider-aws#8368)"));
}

/// Issue 18 item 5 / audit M3: a shared pool warns about multi-GPU sizes (a pod asking for
/// several GPUs fails admission: Bottlerocket's `failRequestsGreaterThanOne` defaults to true)
/// and about taints every GPU pod tolerates (EKS's ExtendedResourceToleration).
#[test]
fn shared_pools_warn_about_multi_gpu_sizes_and_whole_gpu_taints() {
    let c = validate(&stack(&pool(
        "p",
        "subnets = [\"${subnet.a.id}\"]\ninstance_types = [\"g6.xlarge\", \"g6.12xlarge\"]\ngpu_limit = 8\ngpu_sharing = { strategy = \"mps\", replicas = 2 }\nnode_taints = [{ key = \"nvidia.com/gpu\", value = \"true\", effect = \"NO_SCHEDULE\" }]",
    )));
    assert_eq!(c.code, 0, "warnings, not errors:\n{}", c.stderr);
    assert!(
        c.stderr.contains("warning: `karpenter_pool.p` shares GPUs (mps) on multi-GPU sizes: g6.12xlarge (4 GPUs)"),
        "{}",
        c.stderr
    );
    assert!(c.stderr.contains("fails admission (UnexpectedAdmissionError)"), "{}", c.stderr);
    assert!(c.stderr.contains("every pod that requests nvidia.com/gpu tolerates its taints"), "{}", c.stderr);
    assert!(c.stderr.contains("help: add node_taints = [{ key = \"nvidia.com/gpu.shared\""), "{}", c.stderr);
    accepted(
        &stack(&pool(
            "p",
            "subnets = [\"${subnet.a.id}\"]\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 8\ngpu_sharing = { strategy = \"mps\", replicas = 2 }\nnode_taints = [{ key = \"nvidia.com/gpu.shared\", value = \"true\", effect = \"NO_SCHEDULE\" }]",
        )),
        "shares GPUs",
    );
}

/// Review r18 B1: a shared Spot/On-Demand pool whose types differ in vCPUs per GPU renders no
/// cpu limit, so one burst may start replicas× the physical GPUs gpu_limit names (in-flight
/// nodes are charged their physical GPUs: kubernetes-sigs/karpenter v1.14.1 statenode.go
/// `Capacity()`): a warning with the way out. One ratio (or reserved capacity only) is quiet.
#[test]
fn a_shared_pool_with_mixed_vcpu_gpu_ratios_warns_that_a_burst_overruns_gpu_limit() {
    let body = |types: &str, capacity: &str| {
        format!(
            "subnets = [\"${{subnet.a.id}}\"]\ncapacity_types = [{capacity}]\ninstance_types = [{types}]\ngpu_limit = 8\ngpu_sharing = {{ strategy = \"time-slicing\", replicas = 4 }}\nnode_taints = [{{ key = \"nvidia.com/gpu.shared\", value = \"true\", effect = \"NO_SCHEDULE\" }}]"
        )
    };
    let c = validate(&stack(&pool("p", &body("\"g6.xlarge\", \"g6.2xlarge\", \"g5.xlarge\"", "\"spot\""))));
    assert_eq!(c.code, 0, "a warning, not an error:\n{}", c.stderr);
    assert!(
        c.stderr.contains("warning: `karpenter_pool.p`: gpu_limit = 8 bounds physical GPUs only once nodes initialize"),
        "{}",
        c.stderr
    );
    assert!(c.stderr.contains("one burst may start up to 32 physical GPUs (4× gpu_limit)"), "{}", c.stderr);
    assert!(c.stderr.contains("help: list instance types with one vCPU:GPU ratio"), "{}", c.stderr);
    accepted(&stack(&pool("p", &body("\"g6.xlarge\", \"g6e.xlarge\", \"g5.xlarge\"", "\"spot\""))), "burst");
}

/// Issue 18 item 7 / audit M5: equal weights and equal taints let an unselected pod land on
/// either pool, chosen by name (kubernetes-sigs/karpenter v1.14.1 `pkg/utils/nodepool/nodepool.go`).
#[test]
fn pools_tied_on_weight_and_taints_are_a_warning() {
    let taint = "node_taints = [{ key = \"nvidia.com/gpu\", value = \"true\", effect = \"NO_SCHEDULE\" }]";
    let a = pool(
        "a",
        &format!(
            "subnets = [\"${{subnet.a.id}}\"]\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 4\nweight = 30\n{taint}"
        ),
    );
    let b = pool(
        "b",
        &format!(
            "subnets = [\"${{subnet.a.id}}\"]\ninstance_types = [\"g5.xlarge\"]\ngpu_limit = 4\nweight = 30\n{taint}"
        ),
    );
    let c = validate(&stack(&format!("{a}{b}")));
    assert_eq!(c.code, 0, "{}", c.stderr);
    assert!(
        c.stderr.contains(
            "warning: `karpenter_pool.a` and `karpenter_pool.b` have the same weight (30) and the same taints"
        ),
        "{}",
        c.stderr
    );
    assert!(c.stderr.contains("help: give the pools different weights"), "{}", c.stderr);
    accepted(&stack(&format!("{a}{}", b.replace("weight = 30", "weight = 31"))), "same weight");
}

/// Issue 18 item 4 / audit M2: budgets with reasons and schedules, checked as the NodePool
/// CRD does (v1.14.1: "'schedule' must be set with 'duration'"); Balanced needs 1.14.
#[test]
fn disruption_budgets_and_policy_follow_the_crd_and_the_controller_version() {
    let body = |d: &str| {
        format!("subnets = [\"${{subnet.a.id}}\"]\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 4\ndisruption = {d}")
    };
    let ok = stack(&pool(
        "p",
        &body(
            "{ policy = \"Balanced\", budgets = [{ nodes = 0, reasons = [\"Drifted\"] }, { nodes = \"20%\", schedule = \"0 9 * * mon-fri\", duration = \"8h\" }] }",
        ),
    ));
    accepted(&ok, "karpenter_pool");
    refused(
        &ok.replace("version   = \"1.14.1\"", "version   = \"1.13.0\""),
        "disruption.policy \"Balanced\" is new in Karpenter 1.14, but the controller runs 1.13.0",
        "disruption = {",
        "set the karpenter_controller's version to \"1.14.0\" or later",
    );
    let bad = stack(&pool(
        "p",
        &body(
            "{ budget = 1, budgets = [{ nodes = 1, schedule = \"@daily\" }, { nodes = 1, schedule = \"0 9 * *\", duration = \"1d\" }] }",
        ),
    ));
    refused(&bad, "`disruption` sets both `budget` and `budgets`", "budget = 1", "keep `budgets`");
    refused(
        &bad,
        "a disruption budget sets one of `schedule` and `duration` without the other",
        "schedule = \"@daily\"",
        "a scheduled budget needs both",
    );
    refused(&bad, "budget duration \"1d\" is not hours and minutes", "duration = \"1d\"", "write it like \"8h\"");
    refused(&bad, "budget schedule \"0 9 * *\" is not a cron schedule", "schedule = \"0 9 * *\"", "five fields");
    let expired = validate(&stack(&pool("p", &body("{ budgets = [{ nodes = 1, reasons = [\"Expired\"] }] }"))));
    assert_eq!(expired.code, 1, "{}", expired.stderr);
    assert!(
        expired.stderr.contains("must be one of \"Empty\", \"Drifted\", \"Underutilized\", found \"Expired\""),
        "{}",
        expired.stderr
    );
}

/// Audit m2 (issue 18 item 8): a pinned Bottlerocket release older than its sharing settings.
#[test]
fn a_pinned_bottlerocket_release_must_have_the_sharing_settings() {
    let body = |ami: &str| {
        format!(
            "subnets = [\"${{subnet.a.id}}\"]\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 1\nami = \"{ami}\"\ngpu_sharing = {{ strategy = \"mps\", replicas = 2 }}\nnode_taints = [{{ key = \"nvidia.com/gpu.shared\", value = \"true\", effect = \"NO_SCHEDULE\" }}]"
        )
    };
    refused(
        &stack(&pool("p", &body("bottlerocket@v1.50.0"))),
        "Bottlerocket v1.50.0 has no mps settings (they came in 1.54)",
        "ami = \"bottlerocket@v1.50.0\"",
        "pin ami = \"bottlerocket@v1.54.0\" or later",
    );
    accepted(&stack(&pool("p", &body("bottlerocket@v1.54.1"))), "Bottlerocket");
}

/// A pool's MIG layout must give every GPU model the same slices, or one gpu_limit could not
/// count physical GPUs.
#[test]
fn a_pools_mig_layout_slices_every_model_alike() {
    refused(
        &stack(&pool(
            "p",
            "subnets = [\"${subnet.a.id}\"]\ninstance_types = [\"p5.48xlarge\"]\ngpu_limit = 8\ngpu_sharing = { strategy = \"mig\", mig_profile = { \"h100.80gb\" = \"7\", \"a100.80gb\" = \"3\" } }",
        )),
        "mig_profile slices GPUs differently by model (a100.80gb → 3; h100.80gb → 7)",
        "gpu_sharing",
        "give every model the same number of slices",
    );
}

#[test]
fn efa_needs_efa_types_with_one_layout() {
    let text = stack(&pool(
        "p",
        "subnets = [\"${subnet.a.id}\"]\ninstance_types = [\"p5.48xlarge\", \"p4d.24xlarge\"]\ngpu_limit = 8\nefa = {}",
    ));
    refused(
        &text,
        "one EC2NodeClass has one EFA layout, but its types differ: p4d.24xlarge (4 EFA) vs p5.48xlarge (32 EFA)",
        "instance_types = [\"p5.48xlarge\", \"p4d.24xlarge\"]",
        "split the pool by layout",
    );
    refused(
        &stack(&pool("p", "subnets = [\"${subnet.a.id}\"]\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 8\nefa = {}")),
        "`karpenter_pool.p`: g6.xlarge does not support EFA",
        "efa = {}",
        "remove `efa`, or list only EFA types",
    );
    refused(
        &stack(&pool("p", "subnets = [\"${subnet.a.id}\"]\ninstance_families = [\"p5\"]\ngpu_limit = 8\nefa = {}")),
        "`efa` needs instance_types, not instance_families",
        "efa = {}",
        "the EFA interfaces are laid out per instance type",
    );
    accepted(
        &stack(&pool(
            "p",
            "subnets = [\"${subnet.a.id}\"]\ninstance_types = [\"p5.48xlarge\"]\ngpu_limit = 8\nefa = {}",
        )),
        "EFA",
    );
}

#[test]
fn a_pool_needs_a_way_out() {
    refused(
        &stack(&pool("p", "subnets = [\"${subnet.closed.id}\"]\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 1")),
        "`karpenter_pool.p` runs in `subnet.closed`, which is private with no NAT gateway and no VPC endpoints",
        "subnets = [\"${subnet.closed.id}\"]",
        "give it a way out through a NAT gateway",
    );
    // EFA's many interfaces get no public IP: a public subnet is no way out for them.
    refused(
        &stack(&pool(
            "p",
            "subnets = [\"${subnet.pub.id}\"]\ninstance_types = [\"p5.48xlarge\"]\ngpu_limit = 8\nefa = {}",
        )),
        "which is public, but EFA's several network interfaces get no public IP",
        "subnets = [\"${subnet.pub.id}\"]",
        "give it a way out through a NAT gateway",
    );
    accepted(
        &stack(&pool("p", "subnets = [\"${subnet.pub.id}\"]\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 1")),
        "way out",
    );
}

#[test]
fn spot_over_fewer_than_three_types_is_a_warning() {
    let c = validate(&stack(&pool(
        "p",
        "subnets = [\"${subnet.a.id}\"]\ncapacity_types = [\"spot\"]\ninstance_types = [\"g6.xlarge\", \"g5.xlarge\"]\ngpu_limit = 4",
    )));
    assert_eq!(c.code, 0, "a warning, not an error:\n{}", c.stderr);
    assert!(
        c.stderr.contains("warning: `karpenter_pool.p`: Spot over 2 instance type(s) often finds no capacity"),
        "{}",
        c.stderr
    );
    assert!(c.stderr.contains("help: list at least three interchangeable ones"), "{}", c.stderr);
    accepted(
        &stack(&pool(
            "p",
            "subnets = [\"${subnet.a.id}\"]\ncapacity_types = [\"spot\"]\ninstance_families = [\"g5\", \"g6\", \"g6e\"]\ngpu_limit = 4",
        )),
        "Spot over",
    );
}

#[test]
fn a_pools_own_attributes_follow_karpenters_rules() {
    let text = stack(&pool(
        "p",
        r#"subnets = ["${subnet.a.id}"]
instance_types = ["g6.xlarge"]
instance_families = ["g6"]
gpu_limit = 4
weight = 101
ami = "ubuntu@latest"
disruption = { consolidate_after = "1d", budget = "110%" }
node_labels = { "karpenter.sh/capacity-type" = "spot" }"#,
    ));
    refused(&text, "sets both instance_types and instance_families", "instance_families = [\"g6\"]", "keep one");
    refused(
        &text,
        "weight = 101 is outside Karpenter's 1–100",
        "weight = 101",
        "pools with a higher weight fill first",
    );
    refused(
        &text,
        "ami = \"ubuntu@latest\" is not an AMI alias gpustack renders",
        "ami = \"ubuntu@latest\"",
        "use \"bottlerocket@latest\" or \"al2023@latest\"",
    );
    refused(
        &text,
        "`disruption.consolidate_after` = \"1d\" is not a Karpenter duration",
        "consolidate_after = \"1d\"",
        "write hours, minutes and seconds",
    );
    refused(
        &text,
        "`disruption.budget` must be a node count or a percentage",
        "budget = \"110%\"",
        "e.g. 1 (one node at a time)",
    );
    refused(
        &text,
        "Karpenter refuses the node label \"karpenter.sh/capacity-type\"",
        "karpenter.sh/capacity-type",
        "karpenter.sh, karpenter.k8s.aws and kubernetes.io/hostname labels are set by Karpenter",
    );
    accepted(
        &stack(&pool(
            "p",
            r#"subnets = ["${subnet.a.id}"]
instance_types = ["g6.xlarge"]
gpu_limit = 4
weight = 100
ami = "bottlerocket@v1.57.0"
disruption = { consolidate_after = "1h30m", budget = 2, expire_after = "Never", termination_grace_period = "48h" }
node_labels = { "gpustack.io/pool" = "p" }"#,
        )),
        "karpenter_pool",
    );
    // The launch template's own checks of gpu_sharing and data_volume apply to pools.
    refused(
        &stack(&pool(
            "p",
            "subnets = [\"${subnet.a.id}\"]\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 4\ngpu_sharing = { strategy = \"time-slicing\", replicas = 1 }",
        )),
        "time-slicing replicas must be at least 2, found 1",
        "replicas = 1",
        "with 1 replica nothing is shared",
    );
}

#[test]
fn a_pools_nodes_need_an_access_entry_and_the_controllers_role() {
    let ok = stack(&pool("p", "subnets = [\"${subnet.a.id}\"]\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 1"));
    accepted(&ok, "access entry");
    // Without its EC2_LINUX entry, nodes cannot join.
    let no_entry = ok.replace("type          = \"EC2_LINUX\"", "type          = \"STANDARD\"");
    refused(
        &no_entry,
        "`karpenter_pool.p`: its node role has no EC2_LINUX access entry, so its nodes could not join the cluster",
        "node_role       = \"${iam_role.node.name}\"",
        "add [eks_access_entry.NAME] with the same cluster, principal_arn = the role's ARN",
    );
    // The controller may pass only its own node role to EC2.
    let other = format!(
        "{}\n[iam_role.other]\nservice = \"ec2.amazonaws.com\"\n\n[eks_access_entry.other]\ncluster = \"${{eks_cluster.main.name}}\"\nprincipal_arn = \"${{iam_role.other.arn}}\"\ntype = \"EC2_LINUX\"\n",
        ok.replace("node_role       = \"${iam_role.node.name}\"", "node_role       = \"${iam_role.other.name}\"")
    );
    refused(
        &other,
        "`karpenter_pool.p` launches with another node role than `karpenter_controller.main`, which may pass only its own",
        "node_role       = \"${iam_role.other.name}\"",
        "use the node_role of `karpenter_controller.main`",
    );
}

#[test]
fn efa_and_placement_groups_need_karpenter_1_11() {
    let efa = stack(&pool(
        "p",
        "subnets = [\"${subnet.a.id}\"]\ninstance_types = [\"p5.48xlarge\"]\ngpu_limit = 8\nefa = {}",
    ));
    accepted(&efa, "1.11 or later");
    // Audit m1: 1.11 is for the rendered networkInterfaces; older Karpenter adds EFA
    // interfaces for pods that request vpc.amazonaws.com/efa (resolver.go `EFACount`).
    refused(
        &efa.replace("version   = \"1.14.1\"", "version   = \"1.10.2\""),
        "`karpenter_pool.p`: efa is rendered as EC2NodeClass networkInterfaces, which Karpenter 1.10.2 does not have (1.11 or later)",
        "efa = {}",
        "set the karpenter_controller's version to \"1.11.0\" or later, or remove `efa`: Karpenter before 1.11 adds EFA interfaces",
    );
}
