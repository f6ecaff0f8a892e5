//! Unit tests of the GPU rules, one stack text per rule. Each stack goes through the real
//! load step (`validate`'s), and the catalog rules through `preflight_offline` (the embedded
//! instance catalog). Every rule is shown refusing a stack and accepting the fixed one.

use std::collections::BTreeMap;

use crate::stack::{Diagnostic, Source, Stack, VarSources};

/// A problem reported for a stack: its message and help, and the line it points at.
#[derive(Clone, Debug)]
struct Found {
    error: bool,
    message: String,
    help: String,
    /// The written line the diagnostic points at (trimmed), "" without a place.
    at: String,
}

fn found(source: &Source, diags: &[Diagnostic]) -> Vec<Found> {
    diags
        .iter()
        .map(|d| Found {
            error: d.is_error(),
            message: d.message.clone(),
            help: d.help.clone().unwrap_or_default(),
            at: d.span.as_ref().map_or(String::new(), |s| {
                let start = source.text[..s.start].rfind('\n').map_or(0, |i| i + 1);
                let end = source.text[s.start..].find('\n').map_or(source.text.len(), |i| s.start + i);
                source.text[start..end].trim().to_string()
            }),
        })
        .collect()
}

/// The load step every command runs (language, kinds' checks, offline rules).
fn load(text: &str) -> Result<Stack, Vec<Found>> {
    let vars = VarSources { cli: &[], env: &|_| None };
    crate::load::check(Source::new("t.toml", text.into()), &vars).map_err(|d| found(&d.source, &d.items))
}

/// Every error and warning the load step reports.
fn offline(text: &str) -> Vec<Found> {
    match load(text) {
        Ok(stack) => found(&stack.source, &stack.warnings),
        Err(found) => found,
    }
}

/// A stack the load step accepts.
fn accepted(text: &str) -> Stack {
    load(text).unwrap_or_else(|found| panic!("the load step refused the stack: {found:#?}\n{text}"))
}

/// What the catalog rules report offline for a stack the load step accepts.
fn catalog(text: &str) -> Vec<Found> {
    let stack = accepted(text);
    found(&stack.source, &crate::rules::preflight_offline(&stack).diags)
}

/// What the catalog made of each resource (the plan's notes), offline.
fn notes(text: &str) -> BTreeMap<String, String> {
    crate::rules::preflight_offline(&accepted(text)).notes
}

/// The one report whose message contains `message`.
fn the(found: &[Found], message: &str) -> Found {
    let hits: Vec<&Found> = found.iter().filter(|f| f.message.contains(message)).collect();
    match hits.as_slice() {
        [one] => (*one).clone(),
        _ => panic!("expected one report containing {message:?}, found {}: {found:#?}", hits.len()),
    }
}

fn absent(found: &[Found], message: &str) {
    assert!(!found.iter().any(|f| f.message.contains(message)), "no {message:?} expected: {found:#?}");
}

fn no_errors(found: &[Found]) {
    assert!(!found.iter().any(|f| f.error), "no error expected: {found:#?}");
}

/// A VPC with a private subnet `a` (us-west-2a, out through a NAT gateway) and a public
/// subnet `b` (us-west-2b), an EKS cluster, and one launch template `t` and node group `n`
/// around `lt` and `ng` lines (`n` runs in `a` unless `ng` sets subnets). `extra` is
/// appended (more resources).
fn stack(lt: &str, ng: &str, extra: &str) -> String {
    let subnets = if ng.contains("subnets") { "" } else { "subnets         = [\"${subnet.a.id}\"]\n" };
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
launch_template = "${{launch_template.t.id}}"
{subnets}{ng}
{extra}"#
    )
}

/// Two p5.48xlarge for 48 hours; `zone` adds an availability_zone line.
fn block(count: u32, instance_type: &str, zone: &str) -> String {
    let zone = if zone.is_empty() { String::new() } else { format!("availability_zone = \"{zone}\"\n") };
    format!(
        r#"
[capacity_block.b]
instance_type   = "{instance_type}"
instance_count  = {count}
duration_hours  = 48
start_after     = "2026-12-01T00:00:00Z"
start_before    = "2026-12-08T00:00:00Z"
max_upfront_usd = 8000
{zone}"#
    )
}

/// A launch template wired to `capacity_block.b`.
const BLOCK_LT: &str = r#"instance_type        = "p5.48xlarge"
capacity_reservation = "${capacity_block.b.id}"
market               = "capacity-block"
data_volume          = { size_gib = 500 }"#;

/// A node group running on `capacity_block.b`.
const BLOCK_NG: &str = r#"capacity_type = "CAPACITY_BLOCK"
scaling       = { min = 0, desired = 2, max = 2 }"#;

/// The base stack with nothing in it that a rule objects to.
#[test]
fn the_base_stack_passes_every_rule() {
    let text = stack("instance_type = \"g6.xlarge\"\ndata_volume = { size_gib = 100 }", "", "");
    assert!(offline(&text).is_empty(), "{:#?}", offline(&text));
    assert!(catalog(&text).is_empty(), "{:#?}", catalog(&text));
}

// ---- offline: Capacity Blocks ----

#[test]
fn a_capacity_block_group_needs_a_capacity_block_template() {
    let message = "`node_group.n` is CAPACITY_BLOCK, but its launch template `launch_template.t` does not set market = \"capacity-block\" and the block's capacity_reservation";
    let no_market = stack("instance_type = \"p5.48xlarge\"", BLOCK_NG, "");
    let f = offline(&no_market);
    let d = the(&f, message);
    assert!(d.error);
    assert_eq!(d.at, "capacity_type = \"CAPACITY_BLOCK\"");
    assert!(
        d.help.contains("in [launch_template.t] set market = \"capacity-block\" and capacity_reservation"),
        "{d:?}"
    );

    // A reservation without the capacity-block market is not enough either.
    let no_market = stack(
        "instance_type = \"p5.48xlarge\"\ncapacity_reservation = \"${capacity_block.b.id}\"",
        BLOCK_NG,
        &block(2, "p5.48xlarge", ""),
    );
    assert!(the(&offline(&no_market), message).error);

    let fixed = stack(BLOCK_LT, BLOCK_NG, &block(2, "p5.48xlarge", ""));
    no_errors(&offline(&fixed));
    absent(&offline(&fixed), "is CAPACITY_BLOCK");
}

#[test]
fn a_capacity_block_template_needs_a_capacity_block_group() {
    let text = stack(BLOCK_LT, "capacity_type = \"ON_DEMAND\"", &block(2, "p5.48xlarge", ""));
    let f = offline(&text);
    let d = the(
        &f,
        "`node_group.n` uses `launch_template.t`, a capacity-block template, but its capacity_type is ON_DEMAND",
    );
    assert!(d.error);
    assert_eq!(d.at, "capacity_type = \"ON_DEMAND\"");
    assert_eq!(d.help, "set capacity_type = \"CAPACITY_BLOCK\" on the node group");

    // Left unset, capacity_type is ON_DEMAND too.
    assert!(the(&offline(&stack(BLOCK_LT, "", &block(2, "p5.48xlarge", ""))), "its capacity_type is ON_DEMAND").error);

    let fixed = stack(BLOCK_LT, BLOCK_NG, &block(2, "p5.48xlarge", ""));
    no_errors(&offline(&fixed));
}

#[test]
fn a_capacity_block_group_stays_in_one_zone() {
    let two_zones = format!("{BLOCK_NG}\nsubnets = [\"${{subnet.a.id}}\", \"${{subnet.b.id}}\"]");
    let f = offline(&stack(BLOCK_LT, &two_zones, &block(2, "p5.48xlarge", "")));
    let d = the(
        &f,
        "`node_group.n` is CAPACITY_BLOCK, but its subnets span 2 zones (us-west-2a, us-west-2b); a Capacity Block lives in one",
    );
    assert!(d.error);
    assert!(d.at.starts_with("subnets = "), "{d:?}");
    assert_eq!(d.help, "list only subnets in the block's availability zone");

    let one_zone = format!("{BLOCK_NG}\nsubnets = [\"${{subnet.a.id}}\"]");
    let f = offline(&stack(BLOCK_LT, &one_zone, &block(2, "p5.48xlarge", "")));
    no_errors(&f);
    absent(&f, "zones");
}

#[test]
fn a_capacity_block_group_cannot_scale_past_the_block() {
    let three = "capacity_type = \"CAPACITY_BLOCK\"\nscaling = { min = 0, desired = 2, max = 3 }";
    let f = offline(&stack(BLOCK_LT, three, &block(2, "p5.48xlarge", "")));
    let d = the(&f, "`node_group.n` may scale to 3 nodes, but `capacity_block.b` holds 2 instances");
    assert!(d.error);
    assert!(d.at.starts_with("scaling = "), "{d:?}");
    assert_eq!(d.help, "set scaling.max ≤ 2, or buy a bigger block");

    // Up to the block's count is fine.
    no_errors(&offline(&stack(BLOCK_LT, BLOCK_NG, &block(2, "p5.48xlarge", ""))));
    no_errors(&offline(&stack(BLOCK_LT, three, &block(3, "p5.48xlarge", ""))));
}

#[test]
fn a_capacity_block_template_runs_the_blocks_type() {
    let f = offline(&stack(BLOCK_LT, BLOCK_NG, &block(2, "p4d.24xlarge", "")));
    let d = the(&f, "`launch_template.t` runs p5.48xlarge, but `capacity_block.b` reserves p4d.24xlarge");
    assert!(d.error);
    assert_eq!(d.at, "instance_type        = \"p5.48xlarge\"");
    assert_eq!(d.help, "a Capacity Block only runs the instance type it was bought for");

    no_errors(&offline(&stack(BLOCK_LT, BLOCK_NG, &block(2, "p5.48xlarge", ""))));
}

#[test]
fn a_capacity_block_group_runs_in_the_blocks_zone() {
    let f = offline(&stack(BLOCK_LT, BLOCK_NG, &block(2, "p5.48xlarge", "us-west-2b")));
    let d = the(&f, "`node_group.n` is in us-west-2a, but `capacity_block.b` is bought in us-west-2b");
    assert!(d.error);
    assert!(d.at.starts_with("subnets "), "{d:?}");
    assert_eq!(d.help, "a Capacity Block serves one zone: use subnets in the block's zone");

    no_errors(&offline(&stack(BLOCK_LT, BLOCK_NG, &block(2, "p5.48xlarge", "us-west-2a"))));
}

#[test]
fn the_node_groups_of_one_block_share_its_zone() {
    let other = r#"
[node_group.other]
cluster         = "${eks_cluster.main.name}"
node_role       = "arn:aws:iam::123456789012:role/node"
subnets         = ["${subnet.b.id}"]
launch_template = "${launch_template.t.id}"
capacity_type   = "CAPACITY_BLOCK"
scaling         = { min = 0, desired = 0, max = 2 }
"#;
    let text = stack(BLOCK_LT, BLOCK_NG, &format!("{}{other}", block(2, "p5.48xlarge", "")));
    let f = offline(&text);
    assert!(f.iter().any(|d| d.error && d.message.contains("capacity_block.b")), "{f:#?}");
}

#[test]
fn reserved_capacity_in_a_placement_group_is_warned_about() {
    let lt = "instance_type = \"g6.12xlarge\"\ndata_volume = { size_gib = 100 }\ncapacity_reservation = \"cr-0123456789abcdef0\"";
    let grouped = format!("{lt}\nplacement_group = \"${{placement_group.p.name}}\"");
    let group = "\n[placement_group.p]\nstrategy = \"cluster\"\n";
    let f = offline(&stack(&grouped, "", group));
    let d = the(
        &f,
        "`launch_template.t` puts reserved capacity in a placement group: instances that do not fit the group strand the reservation",
    );
    assert!(!d.error, "a warning: the stack still loads");
    assert!(load(&stack(&grouped, "", group)).is_ok());
    assert!(d.at.starts_with("placement_group = "), "{d:?}");
    assert!(d.help.contains("remove placement_group"), "{d:?}");

    // A placement group without a reservation, or a reservation without a group, is fine.
    absent(&offline(&stack(lt, "", "")), "placement group");
    let unreserved = "instance_type = \"g6.12xlarge\"\ndata_volume = { size_gib = 100 }\nplacement_group = \"${placement_group.p.name}\"";
    absent(&offline(&stack(unreserved, "", group)), "placement group");
}

// ---- offline: where the instance type and the AMI come from ----

#[test]
fn the_instance_type_is_set_in_one_place() {
    let f = offline(&stack("instance_type = \"g6.xlarge\"", "instance_types = [\"g6.xlarge\"]", ""));
    let d = the(
        &f,
        "`node_group.n` sets instance_types, but its launch template `launch_template.t` already sets instance_type",
    );
    assert!(d.error);
    assert_eq!(d.at, "instance_types = [\"g6.xlarge\"]");
    assert!(d.help.contains("remove instance_types, or instance_type from the template"), "{d:?}");

    no_errors(&offline(&stack("data_volume = { size_gib = 100 }", "instance_types = [\"g6.xlarge\"]", "")));
    no_errors(&offline(&stack("instance_type = \"g6.xlarge\"", "", "")));
}

#[test]
fn bottlerocket_settings_need_a_bottlerocket_ami() {
    let lt = "node_labels = { a = \"b\" }";
    let al2023 = "instance_types = [\"g6.xlarge\"]\nami_type = \"AL2023_x86_64_NVIDIA\"";
    let f = offline(&stack(lt, al2023, ""));
    let d = the(
        &f,
        "`node_group.n` runs AL2023_x86_64_NVIDIA, but `launch_template.t` carries Bottlerocket settings (labels, taints, GPU sharing)",
    );
    assert!(d.error);
    assert_eq!(d.at, "ami_type = \"AL2023_x86_64_NVIDIA\"");
    assert!(d.help.contains("use a BOTTLEROCKET_* ami_type (or \"auto\")"), "{d:?}");

    // GPU sharing and non-empty bottlerocket_settings are Bottlerocket settings too.
    let sharing = "gpu_sharing = { strategy = \"time-slicing\", replicas = 2 }";
    the(&offline(&stack(sharing, al2023, "")), "carries Bottlerocket settings");
    let settings = "bottlerocket_settings = { kernel = { lockdown = \"integrity\" } }";
    the(&offline(&stack(settings, al2023, "")), "carries Bottlerocket settings");

    // Bottlerocket (or auto) takes them; AL2023 with a template that carries none is fine.
    let bottlerocket = "instance_types = [\"g6.xlarge\"]\nami_type = \"BOTTLEROCKET_x86_64_NVIDIA\"";
    no_errors(&offline(&stack(lt, bottlerocket, "")));
    no_errors(&offline(&stack(lt, "instance_types = [\"g6.xlarge\"]", "")));
    no_errors(&offline(&stack("imds_hop_limit = 1", al2023, "")));
}

#[test]
fn spot_with_a_single_type_from_the_template_is_warned_about() {
    let text = stack("instance_type = \"g6.xlarge\"", "capacity_type = \"SPOT\"", "");
    let d = the(
        &offline(&text),
        "`node_group.n`: SPOT with a single instance type (from `launch_template.t`) often finds no capacity",
    );
    assert!(!d.error, "a warning: {d:?}");
    assert!(load(&text).is_ok());
    assert_eq!(d.at, "capacity_type = \"SPOT\"");
    assert!(d.help.contains("list several types in the node group's instance_types"), "{d:?}");

    let several = "capacity_type = \"SPOT\"\ninstance_types = [\"g6.xlarge\", \"g5.xlarge\"]";
    let f = offline(&stack("data_volume = { size_gib = 100 }", several, ""));
    assert!(f.is_empty(), "{f:#?}");
    // On-demand with one type is not warned about.
    absent(&offline(&stack("instance_type = \"g6.xlarge\"", "", "")), "SPOT");
}

// ---- offline: the cluster and the data volume ----

#[test]
fn a_cluster_whose_every_node_group_is_tainted_is_warned_about() {
    let taint = "taints = [{ key = \"nvidia.com/gpu\", value = \"true\", effect = \"NO_SCHEDULE\" }]";
    let text = stack("instance_type = \"g6.xlarge\"", taint, "");
    let d = the(
        &offline(&text),
        "every node group of `eks_cluster.main` is tainted (node_group.n): CoreDNS and other add-ons have nowhere to run",
    );
    assert!(!d.error);
    assert_eq!(d.at, "[eks_cluster.main]");
    assert!(d.help.contains("add a small untainted node group"), "{d:?}");

    // The template's node_taints taint the group too.
    let lt_taint = "instance_type = \"g6.xlarge\"\nnode_taints = [{ key = \"gpu\", effect = \"NO_SCHEDULE\" }]";
    the(&offline(&stack(lt_taint, "", "")), "is tainted (node_group.n)");

    // An untainted system group gives CoreDNS a place; an empty taint list taints nothing.
    let system = r#"
[node_group.system]
cluster        = "${eks_cluster.main.name}"
node_role      = "arn:aws:iam::123456789012:role/node"
subnets        = ["${subnet.a.id}"]
instance_types = ["m6i.large"]
"#;
    absent(&offline(&stack("instance_type = \"g6.xlarge\"", taint, system)), "is tainted");
}

#[test]
fn an_empty_taint_list_taints_nothing() {
    absent(&offline(&stack("instance_type = \"g6.xlarge\"", "taints = []", "")), "is tainted");
    absent(&offline(&stack("instance_type = \"g6.xlarge\"\nnode_taints = []", "", "")), "is tainted");
}

#[test]
fn a_data_volume_holds_its_image_cache_snapshot() {
    let cache = |size: &str| {
        format!(
            r#"
[image_cache.c]
images                   = ["nvcr.io/nvidia/pytorch:24.12-py3"]
variant                  = "aws-k8s-1.31-nvidia"
subnet                   = "${{subnet.b.id}}"
builder_instance_profile = "builder"
{size}"#
        )
    };
    let lt = |gib: u32| {
        format!(
            "instance_type = \"g6.xlarge\"\ndata_volume = {{ size_gib = {gib}, snapshot = \"${{image_cache.c.snapshot_id}}\" }}"
        )
    };
    let f = offline(&stack(&lt(100), "", &cache("volume_size_gib = 200")));
    let d = the(
        &f,
        "`launch_template.t`: data_volume.size_gib = 100 is smaller than the 200 GiB snapshot of `image_cache.c`",
    );
    assert!(d.error);
    assert!(d.at.starts_with("data_volume = { size_gib = 100"), "{d:?}");
    assert_eq!(d.help, "set size_gib ≥ 200");
    no_errors(&offline(&stack(&lt(200), "", &cache("volume_size_gib = 200"))));

    // Without volume_size_gib the snapshot is 50 GiB.
    the(&offline(&stack(&lt(40), "", &cache(""))), "data_volume.size_gib = 40 is smaller than the 50 GiB snapshot");
    no_errors(&offline(&stack(&lt(50), "", &cache(""))));
}

// ---- offline: the nodes' way out (egress) ----

/// The five VPC endpoints nodes need, in subnet `a`.
fn endpoints(subnet: &str) -> String {
    ["ecr.api", "ecr.dkr", "s3", "ec2", "sts"].iter().map(|s| endpoint(s, subnet)).collect()
}

fn endpoint(service: &str, subnet: &str) -> String {
    let groups = if service == "s3" { "" } else { "security_groups = [\"${security_group.efa.id}\"]\n" };
    let name = service.replace('.', "_");
    format!(
        "\n[vpc_endpoint.{name}]\nvpc = \"${{vpc.main.id}}\"\nservice = \"{service}\"\nsubnets = [\"${{subnet.{subnet}.id}}\"]\n{groups}"
    )
}

/// The base stack with subnet `a` private and without a NAT gateway.
fn no_nat(lt: &str, ng: &str, extra: &str) -> String {
    let text = stack(lt, ng, extra);
    let cut = text.replacen("nat_gateway       = \"${nat_gateway.out.id}\"\n", "", 1);
    assert_ne!(cut, text);
    cut
}

const GPU_LT: &str = "instance_type = \"g6.xlarge\"\ndata_volume = { size_gib = 100 }";

#[test]
fn a_private_subnet_without_a_way_out_is_refused() {
    let f = offline(&no_nat(GPU_LT, "", ""));
    let d = the(
        &f,
        "`node_group.n` runs in `subnet.a`, which is private with no NAT gateway and no VPC endpoints: its nodes could never join the cluster",
    );
    assert!(d.error);
    assert_eq!(d.at, "subnets         = [\"${subnet.a.id}\"]");
    // The help shows the fix, with the stack's public subnet as the NAT gateway's home.
    assert!(d.help.contains("[nat_gateway.main]\n        subnet = \"${subnet.b.id}\""), "{d:?}");
    assert!(d.help.contains("and in [subnet.a]: nat_gateway = \"${nat_gateway.main.id}\""), "{d:?}");
    assert!(d.help.contains("VPC endpoints for ecr.api, ecr.dkr, s3, ec2 and sts"), "{d:?}");

    // With its NAT gateway (the base stack) the subnet has a way out.
    no_errors(&offline(&stack(GPU_LT, "", "")));
}

#[test]
fn the_five_vpc_endpoints_are_a_way_out_for_nodes() {
    let f = offline(&no_nat(GPU_LT, "", &endpoints("a")));
    no_errors(&f);
    absent(&f, "could never join");

    // Some endpoints are not enough: the message names the missing ones.
    let some: String = ["ecr.api", "ecr.dkr", "s3"].iter().map(|s| endpoint(s, "a")).collect();
    let d = the(&offline(&no_nat(GPU_LT, "", &some)), "`node_group.n` runs in `subnet.a`");
    assert!(
        d.message.contains("which is private with no NAT gateway, and VPC endpoints for ec2, sts are missing"),
        "{d:?}"
    );

    // Endpoints in another subnet do not serve this one.
    let elsewhere = no_nat(GPU_LT, "", &endpoints("b"));
    the(&offline(&elsewhere), "which is private with no NAT gateway and no VPC endpoints");
}

/// An image cache building in `subnet`.
fn image_cache(subnet: &str) -> String {
    format!(
        r#"
[image_cache.c]
images                   = ["nvcr.io/nvidia/pytorch:24.12-py3"]
variant                  = "aws-k8s-1.31-nvidia"
subnet                   = "${{subnet.{subnet}.id}}"
builder_instance_profile = "builder"
"#
    )
}

#[test]
fn vpc_endpoints_are_not_a_way_out_for_an_image_cache() {
    let text = no_nat(GPU_LT, "", &format!("{}{}", endpoints("a"), image_cache("a")));
    let f = offline(&text);
    let d = the(
        &f,
        "`image_cache.c` runs in `subnet.a`, which has no route to the internet (the builder pulls from public registries and needs SSM), only a NAT gateway or a public subnet will do",
    );
    assert!(d.error);
    assert_eq!(d.at, "subnet                   = \"${subnet.a.id}\"");
    // The node group beside it is served by the endpoints.
    absent(&f, "`node_group.n` runs in");

    // A NAT gateway or a public subnet with an internet gateway will do.
    no_errors(&offline(&stack(GPU_LT, "", &image_cache("a"))));
    no_errors(&offline(&no_nat(GPU_LT, "", &format!("{}{}", endpoints("a"), image_cache("b")))));
}

#[test]
fn a_public_subnet_needs_an_internet_gateway() {
    let no_igw = |extra: &str| {
        let text = stack(GPU_LT, "subnets = [\"${subnet.b.id}\"]", extra);
        text.replacen("internet_gateway = true\n", "", 1)
    };
    let f = offline(&no_igw(""));
    let d = the(&f, "`node_group.n` runs in `subnet.b`, which is public, but its VPC has no internet gateway");
    assert!(d.error);
    // Public written on the subnet: the help says to turn it off with the NAT gateway.
    assert!(d.help.contains("and in [subnet.b], with public = false: nat_gateway"), "{d:?}");
    let f = offline(&no_igw(&image_cache("b")));
    the(&f, "`image_cache.c` runs in `subnet.b`, which is public, but its VPC has no internet gateway");

    no_errors(&offline(&stack(GPU_LT, "subnets = [\"${subnet.b.id}\"]", &image_cache("b"))));
}

#[test]
fn efa_nodes_in_a_public_subnet_are_refused() {
    let efa = "instance_type = \"p5.48xlarge\"\ndata_volume = { size_gib = 100 }\nefa = { security_groups = [\"${security_group.efa.id}\"] }";
    let public = "subnets = [\"${subnet.b.id}\"]";
    let f = offline(&stack(efa, public, ""));
    let d = the(
        &f,
        "`node_group.n` runs in `subnet.b`, which is public, but EFA's several network interfaces get no public IP (EC2 UG efa-acc-inst-types)",
    );
    assert!(d.error);
    assert_eq!(d.at, "subnets = [\"${subnet.b.id}\"]");

    // One EFA interface keeps the public IP; several need the private subnet and its NAT gateway.
    let one = "instance_type = \"p5.48xlarge\"\ndata_volume = { size_gib = 100 }\nefa = { interfaces = 1 }";
    no_errors(&offline(&stack(one, public, "")));
    no_errors(&offline(&stack(efa, "", "")));
}

// ---- catalog (embedded, offline) ----

#[test]
fn efa_on_a_type_without_efa_is_refused() {
    let f = catalog(&stack("instance_type = \"g6.xlarge\"\ndata_volume = { size_gib = 100 }\nefa = {}", "", ""));
    let d = the(&f, "`launch_template.t`: g6.xlarge does not support EFA");
    assert!(d.error);
    assert_eq!(d.at, "efa = {}");
    assert!(d.help.contains("pick an EFA type"), "{d:?}");

    // g6.12xlarge has one EFA interface.
    let text = stack("instance_type = \"g6.12xlarge\"\ndata_volume = { size_gib = 100 }\nefa = {}", "", "");
    assert!(catalog(&text).is_empty(), "{:#?}", catalog(&text));
    assert!(notes(&text)["launch_template.t"].ends_with("; 1 EFA interface"), "{:?}", notes(&text));
}

#[test]
fn more_efa_interfaces_than_the_type_has_are_refused() {
    let lt = |n: &str| {
        format!("instance_type = \"p5.48xlarge\"\ndata_volume = {{ size_gib = 100 }}\nefa = {{ interfaces = {n} }}")
    };
    let f = catalog(&stack(&lt("64"), "", ""));
    let d = the(&f, "`launch_template.t`: p5.48xlarge has at most 32 EFA interfaces, not 64");
    assert!(d.error);
    assert_eq!(d.at, "efa = { interfaces = 64 }");
    assert_eq!(d.help, "set interfaces = 32 or \"max\"");

    for (asked, note) in [("32", "32 EFA interfaces"), ("\"max\"", "32 EFA interfaces"), ("4", "4 EFA interfaces")] {
        let text = stack(&lt(asked), "", "");
        no_errors(&catalog(&text));
        assert!(notes(&text)["launch_template.t"].contains(note), "{asked}: {:?}", notes(&text));
    }
}

#[test]
fn the_efa_note_says_when_card_0_is_ena_only() {
    let lt = |t: &str| format!("instance_type = \"{t}\"\ndata_volume = {{ size_gib = 100 }}\nefa = {{}}");
    let b300 = notes(&stack(&lt("p6-b300.48xlarge"), "", ""));
    assert!(
        b300["launch_template.t"].contains("(card 0 is ENA-only: an ENA primary plus efa-only on the EFA cards)"),
        "{b300:?}"
    );
    let p5 = notes(&stack(&lt("p5.48xlarge"), "", ""));
    assert!(!p5["launch_template.t"].contains("ENA-only"), "{p5:?}");
}

#[test]
fn mig_on_a_gpu_without_mig_is_refused() {
    let mig = "gpu_sharing = { strategy = \"mig\", mig_profile = { \"h100.80gb\" = \"1g.10gb\" } }";
    let f =
        catalog(&stack(&format!("instance_type = \"g6.xlarge\"\ndata_volume = {{ size_gib = 100 }}\n{mig}"), "", ""));
    let d = the(&f, "`launch_template.t`: MIG needs an A100, A30, H100, H200 or B200 GPU; g6.xlarge has L4");
    assert!(d.error);
    assert!(d.at.starts_with("gpu_sharing = "), "{d:?}");
    assert!(d.help.contains("use time-slicing or mps"), "{d:?}");

    let h100 = stack(&format!("instance_type = \"p5.48xlarge\"\ndata_volume = {{ size_gib = 100 }}\n{mig}"), "", "");
    assert!(catalog(&h100).is_empty(), "{:#?}", catalog(&h100));
}

#[test]
fn mig_on_a_gpu_bottlerocket_has_no_profiles_for_is_refused() {
    let mig = "gpu_sharing = { strategy = \"mig\", mig_profile = { \"b200.180gb\" = \"7\" } }";
    let lt = |t: &str| format!("instance_type = \"{t}\"\ndata_volume = {{ size_gib = 100 }}\n{mig}");
    let f = catalog(&stack(&lt("p6-b300.48xlarge"), "", ""));
    let d = the(&f, "`launch_template.t`: Bottlerocket's MIG manager has no profile table for B300 (p6-b300.48xlarge)");
    assert!(d.error);
    assert!(d.help.contains("a100.40gb, a100.80gb, h100.80gb, h200.141gb, b200.180gb"), "{d:?}");

    no_errors(&catalog(&stack(&lt("p6-b200.48xlarge"), "", "")));
}

#[test]
fn a_mig_profile_names_the_types_gpu_and_one_of_its_layouts() {
    let lt = |profile: &str| {
        format!(
            "instance_type = \"p5.48xlarge\"\ndata_volume = {{ size_gib = 100 }}\ngpu_sharing = {{ strategy = \"mig\", mig_profile = {{ {profile} }} }}"
        )
    };
    let f = catalog(&stack(&lt("\"a100.40gb\" = \"1g.5gb\""), "", ""));
    let d = the(&f, "`launch_template.t`: mig_profile has no entry for h100.80gb, the GPU of p5.48xlarge");
    assert!(d.error);
    assert!(d.help.starts_with("add \"h100.80gb\" = \"7\"; the choices are \"7\" (1g.10gb), \"4\" (1g.20gb)"), "{d:?}");
    assert!(d.help.ends_with("keys present: a100.40gb"), "{d:?}");

    // A value that is not a layout of the key's GPU is refused by the load step already (the
    // launch template's own check), so the catalog rule's twin of it is not reached offline.
    let f = offline(&stack(&lt("\"h100.80gb\" = \"1g.5gb\""), "", ""));
    let d = the(&f, "mig_profile \"h100.80gb\" = \"1g.5gb\" is not a layout of h100.80gb");
    assert!(d.error);
    assert!(d.at.starts_with("gpu_sharing = "), "{d:?}");
    assert!(d.help.contains("the choices are \"7\" (1g.10gb)"), "{d:?}");

    // A partition count or a profile of the GPU are both layouts.
    for ok in ["\"h100.80gb\" = \"7\"", "\"h100.80gb\" = \"3g.40gb\""] {
        assert!(catalog(&stack(&lt(ok), "", "")).is_empty(), "{ok}");
    }
}

#[test]
fn gpu_sharing_on_a_type_without_an_nvidia_gpu_is_refused() {
    let sharing = "gpu_sharing = { strategy = \"time-slicing\", replicas = 4 }";
    let f = catalog(&stack(&format!("instance_type = \"trn1.32xlarge\"\n{sharing}"), "", ""));
    let d = the(&f, "`launch_template.t`: gpu_sharing \"time-slicing\" on trn1.32xlarge, which has no NVIDIA GPU");
    assert!(d.error);
    assert_eq!(d.at, sharing);
    assert!(d.help.contains("GPU sharing applies to NVIDIA GPU types"), "{d:?}");

    // A template without a type is checked against the types of its node groups.
    let f = catalog(&stack(sharing, "instance_types = [\"g6.xlarge\", \"inf2.xlarge\"]", ""));
    let d = the(&f, "gpu_sharing \"time-slicing\" on inf2.xlarge, which has no NVIDIA GPU");
    assert_eq!(d.at, sharing);
    absent(&f, "on g6.xlarge");

    let nvidia =
        stack(&format!("instance_type = \"g6.xlarge\"\ndata_volume = {{ size_gib = 100 }}\n{sharing}"), "", "");
    assert!(catalog(&nvidia).is_empty(), "{:#?}", catalog(&nvidia));
}

#[test]
fn an_ami_without_the_nvidia_driver_is_refused_on_an_nvidia_gpu() {
    let f = catalog(&stack(GPU_LT_P5, "ami_type = \"BOTTLEROCKET_x86_64\"", ""));
    let d = the(
        &f,
        "`node_group.n`: BOTTLEROCKET_x86_64 has no NVIDIA driver, but p5.48xlarge has 8× H100 80 GiB, 192 vCPUs, 32 EFA",
    );
    assert!(d.error);
    assert_eq!(d.at, "ami_type = \"BOTTLEROCKET_x86_64\"");
    assert_eq!(d.help, "use ami_type = \"BOTTLEROCKET_x86_64_NVIDIA\" or \"auto\"");

    for ok in ["BOTTLEROCKET_x86_64_NVIDIA", "auto"] {
        let f = catalog(&stack(GPU_LT_P5, &format!("ami_type = \"{ok}\""), ""));
        assert!(f.is_empty(), "{ok}: {f:#?}");
    }
}

const GPU_LT_P5: &str = "instance_type = \"p5.48xlarge\"\ndata_volume = { size_gib = 100 }";

#[test]
fn an_nvidia_ami_is_refused_on_a_type_without_an_nvidia_gpu() {
    let trn = "instance_type = \"trn1.32xlarge\"";
    for ami in ["BOTTLEROCKET_x86_64_NVIDIA", "AL2_x86_64_GPU"] {
        let f = catalog(&stack(trn, &format!("ami_type = \"{ami}\""), ""));
        let d = the(&f, &format!("`node_group.n`: {ami} is an NVIDIA AMI, but trn1.32xlarge has no NVIDIA GPU"));
        assert!(d.error);
        assert_eq!(d.at, format!("ami_type = \"{ami}\""));
        assert_eq!(d.help, "use ami_type = \"BOTTLEROCKET_x86_64\" or \"auto\"");
    }
    let f = catalog(&stack(trn, "ami_type = \"AL2023_x86_64_NEURON\"", ""));
    assert!(f.is_empty(), "{f:#?}");
}

#[test]
fn an_ami_for_the_other_architecture_is_refused() {
    let arm = "instance_type = \"g5g.xlarge\"\ndata_volume = { size_gib = 100 }";
    let f = catalog(&stack(arm, "ami_type = \"BOTTLEROCKET_x86_64_NVIDIA\"", ""));
    let d = the(&f, "`node_group.n`: BOTTLEROCKET_x86_64_NVIDIA does not run on g5g.xlarge (arm64)");
    assert!(d.error);
    assert_eq!(d.help, "use ami_type = \"BOTTLEROCKET_ARM_64_NVIDIA\" or \"auto\"");
    let f = catalog(&stack(GPU_LT_P5, "ami_type = \"BOTTLEROCKET_ARM_64_NVIDIA\"", ""));
    the(&f, "BOTTLEROCKET_ARM_64_NVIDIA does not run on p5.48xlarge (x86_64)");

    assert!(catalog(&stack(arm, "ami_type = \"BOTTLEROCKET_ARM_64_NVIDIA\"", "")).is_empty());
    // auto picks the type's architecture and driver, and the plan says so.
    let text = stack(arm, "", "");
    assert!(catalog(&text).is_empty());
    assert!(
        notes(&text)["node_group.n"]
            .starts_with("ami_type auto → BOTTLEROCKET_ARM_64_NVIDIA (g5g.xlarge: 1× T4g 16 GiB"),
        "{:?}",
        notes(&text)
    );
}

#[test]
fn update_strategy_auto_is_minimal_for_gpu_and_reserved_groups() {
    let strategy = |lt: &str, ng: &str| {
        let n = notes(&stack(lt, ng, ""));
        n["node_group.n"].split("; ").find(|p| p.starts_with("update strategy")).unwrap_or_default().to_string()
    };
    assert_eq!(strategy(GPU_LT, ""), "update strategy MINIMAL (GPU type: no surge where there are no spare GPUs)");
    assert_eq!(strategy("instance_type = \"c5n.18xlarge\"", ""), "update strategy DEFAULT (surge new nodes first)");
    let reserved = "instance_type = \"c5n.18xlarge\"\ncapacity_reservation = \"cr-0123456789abcdef0\"";
    assert_eq!(
        strategy(reserved, ""),
        "update strategy MINIMAL (the group runs on a reservation with no spare instances to surge into)"
    );
    let n = notes(&stack(BLOCK_LT, BLOCK_NG, &block(2, "p5.48xlarge", "")));
    assert!(n["node_group.n"].contains("update strategy MINIMAL (the group runs on a reservation"), "{n:?}");
    // Written out, the strategy is kept.
    assert_eq!(strategy(GPU_LT, "update_strategy = \"DEFAULT\""), "update strategy DEFAULT (as set)");
}

#[test]
fn a_gpu_template_without_a_data_volume_is_warned_about() {
    let f = catalog(&stack("instance_type = \"g6.xlarge\"", "", ""));
    let d = the(
        &f,
        "`launch_template.t` runs g6.xlarge (1× L4 22 GiB, 4 vCPUs) with no `data_volume`: container images share the AMI's small default data volume",
    );
    assert!(!d.error);
    assert_eq!(d.at, "[launch_template.t]");
    assert!(d.help.contains("add data_volume = { size_gib = 200 }"), "{d:?}");

    assert!(catalog(&stack(GPU_LT, "", "")).is_empty());
    // A type without a GPU needs no warning.
    absent(&catalog(&stack("instance_type = \"c5n.18xlarge\"", "", "")), "data_volume");
}

#[test]
fn a_type_the_embedded_catalog_lacks_is_left_to_a_refreshing_plan() {
    // Offline there is no way to tell a misspelt type from one newer than the catalog.
    let f = catalog(&stack("instance_type = \"p5.49xlarge\"\nefa = {}", "", ""));
    assert!(f.is_empty(), "{f:#?}");
    let n = notes(&stack("instance_type = \"p5.49xlarge\"", "", ""));
    assert!(!n.contains_key("launch_template.t"), "{n:?}");
}

// ---- offline: what the stack's features need from the way out (issue 18 items 16, 18) ----

const POD_IDENTITY: &str =
    "\n[eks_addon.pod_identity]\ncluster = \"${eks_cluster.main.name}\"\naddon = \"eks-pod-identity-agent\"\n";

#[test]
fn pod_identity_needs_the_eks_auth_endpoint() {
    let f = offline(&no_nat(GPU_LT, "", &format!("{}{POD_IDENTITY}", endpoints("a"))));
    let d = the(&f, "`node_group.n` runs in `subnet.a`");
    assert!(
        d.message.contains("which is private with no NAT gateway, and VPC endpoints for eks-auth are missing"),
        "{d:?}"
    );
    assert!(d.help.contains("VPC endpoints for ecr.api, ecr.dkr, s3, ec2, sts and eks-auth"), "{d:?}");
    no_errors(&offline(&no_nat(GPU_LT, "", &format!("{}{}{POD_IDENTITY}", endpoints("a"), endpoint("eks-auth", "a")))));
}

#[test]
fn sqs_is_a_vpc_endpoint_service() {
    no_errors(&offline(&stack(GPU_LT, "", &endpoint("sqs", "a"))));
}

#[test]
fn nodes_hosting_the_karpenter_controller_need_the_internet() {
    let controller = "\n[karpenter_controller.k]\ncluster = \"${eks_cluster.main.name}\"\nnode_role = \"arn:aws:iam::123456789012:role/node\"\nversion = \"1.6.0\"\n";
    let every: String = ["eks-auth", "sqs", "ssm", "eks"].iter().map(|s| endpoint(s, "a")).collect();
    let f = offline(&no_nat(GPU_LT, "", &format!("{}{every}{POD_IDENTITY}{controller}", endpoints("a"))));
    let d = the(
        &f,
        "`node_group.n` runs in `subnet.a`, which has no route to the internet (its nodes host `karpenter_controller.k`, which calls IAM and pulls from public.ecr.aws, and neither has a VPC endpoint here), only a NAT gateway or a public subnet will do",
    );
    assert!(d.error);
    assert!(!d.help.contains("VPC endpoints for"), "no endpoint will do: {d:?}");
    // Through the NAT gateway of the base stack it has one.
    absent(&offline(&stack(GPU_LT, "", &format!("{POD_IDENTITY}{controller}"))), "could never join");
}

#[test]
fn a_nat_gateway_counts_only_in_a_public_subnet_with_an_internet_gateway() {
    let text = stack(GPU_LT, "", "");
    let private_home = text.replacen("public            = true\n", "", 1);
    let d = the(&offline(&private_home), "`node_group.n` runs in `subnet.a`");
    assert_eq!(
        d.message,
        "`node_group.n` runs in `subnet.a`, which is routed through `nat_gateway.out`, whose subnet `subnet.b` is not public: a NAT gateway reaches the internet only from a public subnet of a VPC with an internet gateway (VPC UG vpc-nat-gateway): its nodes could never join the cluster"
    );
    let no_igw = text.replacen("internet_gateway = true\n", "", 1);
    the(&offline(&no_igw), "whose subnet `subnet.b` is public, but its VPC has no internet gateway");
    no_errors(&offline(&text));
}

#[test]
fn one_interface_endpoint_serves_every_subnet_of_its_zone() {
    // subnet.c: a second private subnet in subnet.a's zone, where AWS takes no second
    // subnet for the same interface endpoint (PrivateLink guide, create-interface-endpoint).
    let c =
        "\n[subnet.c]\nvpc = \"${vpc.main.id}\"\ncidr_block = \"10.9.32.0/20\"\navailability_zone = \"us-west-2a\"\n";
    let both = "subnets = [\"${subnet.a.id}\", \"${subnet.c.id}\"]";
    let interfaces: String = ["ecr.api", "ecr.dkr", "ec2", "sts"].iter().map(|s| endpoint(s, "a")).collect();
    let s3 = "\n[vpc_endpoint.s3]\nvpc = \"${vpc.main.id}\"\nservice = \"s3\"\nsubnets = [\"${subnet.a.id}\", \"${subnet.c.id}\"]\n";
    no_errors(&offline(&no_nat(GPU_LT, both, &format!("{c}{interfaces}{s3}"))));
    // The s3 gateway endpoint is a route: it serves only the subnets whose tables it is on.
    let s3_a_only = format!("{c}{interfaces}{}", endpoint("s3", "a"));
    the(
        &offline(&no_nat(GPU_LT, both, &s3_a_only)),
        "runs in `subnet.c`, which is private with no NAT gateway, and VPC endpoints for s3 are missing",
    );
    // An endpoint in another zone does not count.
    let elsewhere: String = ["ecr.api", "ecr.dkr", "ec2", "sts"].iter().map(|s| endpoint(s, "b")).collect();
    the(&offline(&no_nat(GPU_LT, both, &format!("{c}{elsewhere}{s3}"))), "runs in `subnet.c`");
}

#[test]
fn private_endpoint_access_off_is_refused_where_nodes_could_not_register() {
    let off = |ng: &str, extra: &str, cidrs: &str| {
        let text = no_nat(GPU_LT, ng, extra);
        text.replacen(
            "public_access_cidrs = [\"203.0.113.0/24\"]",
            &format!("public_access_cidrs = [{cidrs}]\nendpoint_private_access = false"),
            1,
        )
    };
    let limited = off("subnets = [\"${subnet.b.id}\"]", "", "\"203.0.113.0/24\"");
    let d = the(&offline(&limited), "`eks_cluster.main` has endpoint_private_access = false");
    assert_eq!(
        d.message,
        "`eks_cluster.main` has endpoint_private_access = false, and public_access_cidrs admits only 203.0.113.0/24, not the addresses nodes come from: nodes could not register"
    );
    assert!(d.error);
    assert_eq!(d.at, "endpoint_private_access = false");
    let endpoint_only = off("", &endpoints("a"), "\"0.0.0.0/0\"");
    the(
        &offline(&endpoint_only),
        "`eks_cluster.main` has endpoint_private_access = false, and its nodes in `subnet.a` reach AWS through VPC endpoints only",
    );
    // Open to the internet, with nodes that have a way to it: they register publicly.
    let open = off("subnets = [\"${subnet.b.id}\"]", "", "\"0.0.0.0/0\"");
    absent(&offline(&open), "endpoint_private_access = false");
}

#[test]
fn the_nvidia_device_plugin_from_nvcr_io_warns_on_endpoint_only_subnets() {
    let al2023 = "ami_type = \"AL2023_x86_64_NVIDIA\"\ngpu_sharing = { strategy = \"time-slicing\", replicas = 4 }";
    let lt = "data_volume = { size_gib = 100 }";
    let f = offline(&no_nat(lt, al2023, &endpoints("a")));
    let d = the(
        &f,
        "`subnet.a` reaches AWS through VPC endpoints only, but the NVIDIA device plugin's image comes from nvcr.io",
    );
    assert!(!d.error);
    absent(&offline(&stack(lt, al2023, "")), "nvcr.io");
}

#[test]
fn an_al2023_template_is_not_told_to_add_a_data_volume() {
    // AL2023 keeps images on its root volume and never mounts /dev/xvdb: the warning for a GPU
    // template without a data volume offers only what that AMI family can use.
    let al2023 = "instance_types = [\"g6.xlarge\"]\nami_type = \"AL2023_x86_64_NVIDIA\"";
    let f = catalog(&stack("imds_hop_limit = 1", al2023, ""));
    let d = the(
        &f,
        "`launch_template.t` runs g6.xlarge (1× L4 22 GiB, 4 vCPUs) on AL2023, which keeps container images on the root volume",
    );
    assert!(!d.error);
    assert!(!d.help.starts_with("add data_volume"), "{d:?}");
    assert!(d.help.starts_with("set root_volume = { size_gib = 200 }"), "{d:?}");
    // With a root volume there is nothing to say.
    let f = catalog(&stack("root_volume = { size_gib = 200 }", al2023, ""));
    absent(&f, "keeps container images on the root volume");
    // The data volume itself is an error there.
    let f = offline(&stack("data_volume = { size_gib = 100 }", al2023, ""));
    let d = the(&f, "sets data_volume: AL2023 keeps container images on its root volume and never mounts /dev/xvdb");
    assert!(d.error);
    assert_eq!(d.at, "data_volume = { size_gib = 100 }");
    // Bottlerocket (auto) is still told to add one.
    let f = catalog(&stack("imds_hop_limit = 1", "instance_types = [\"g6.xlarge\"]", ""));
    assert!(the(&f, "with no `data_volume`").help.starts_with("add data_volume = { size_gib = 200 }"));
}

#[test]
fn a_root_volume_does_not_silence_the_bottlerocket_data_volume_warning() {
    // Bottlerocket's /dev/xvda is the OS volume; images go on /dev/xvdb, so root_volume does
    // not make room for them (review r19-lt m2).
    let bottlerocket = "instance_types = [\"g6.xlarge\"]\nami_type = \"BOTTLEROCKET_x86_64_NVIDIA\"";
    let f = catalog(&stack("root_volume = { size_gib = 200 }", bottlerocket, ""));
    assert!(the(&f, "with no `data_volume`").help.starts_with("add data_volume = { size_gib = 200 }"));
}

#[test]
fn al2023_taints_go_on_the_node_group_or_the_template_not_both() {
    // kubelet keeps only the last --register-with-taints; EKS's NodeConfig comes after the
    // template's, so one set would be lost (review r19-lt M4).
    let al2023 =
        "ami_type = \"AL2023_x86_64_NVIDIA\"\ntaints = [{ key = \"a\", value = \"b\", effect = \"NO_SCHEDULE\" }]";
    let lt = "instance_type = \"g6.xlarge\"\nroot_volume = { size_gib = 200 }\nnode_taints = [{ key = \"c\", value = \"d\", effect = \"NO_SCHEDULE\" }]";
    let f = offline(&stack(lt, al2023, ""));
    let d = the(&f, "kubelet keeps only one --register-with-taints");
    assert!(d.error);
    assert!(d.help.starts_with("put every taint on the node group"), "{d:?}");
    // Either alone is fine.
    absent(&offline(&stack(lt, "ami_type = \"AL2023_x86_64_NVIDIA\"", "")), "--register-with-taints");
}

#[test]
fn spot_diversification_across_shapes_is_a_warning_and_a_bottlerocket_group_refuses_nodeadm() {
    let spot = "capacity_type = \"SPOT\"\ninstance_types = [\"g6.xlarge\", \"g6.12xlarge\"]";
    let f = catalog(&stack("imds_hop_limit = 1", spot, ""));
    let d = the(&f, "`node_group.n` mixes GPU counts: g6.xlarge (4 vCPU, 1 GPU), g6.12xlarge (48 vCPU, 4 GPU)");
    assert!(!d.error);
    let same = "capacity_type = \"SPOT\"\ninstance_types = [\"g6.2xlarge\", \"g5.2xlarge\", \"g6e.2xlarge\"]";
    absent(&catalog(&stack("imds_hop_limit = 1", same, "")), "mixes GPU counts");
    let vcpus = "capacity_type = \"SPOT\"\ninstance_types = [\"g6.xlarge\", \"g6.2xlarge\"]";
    absent(&catalog(&stack("imds_hop_limit = 1", vcpus, "")), "mixes GPU counts");
    // A nodeadm template on a Bottlerocket group, and on an AL2023 one (fine).
    let lt = "nodeadm = { kubelet = { config = { maxPods = 110 } } }";
    let f = offline(&stack(lt, "ami_type = \"BOTTLEROCKET_x86_64_NVIDIA\"\ninstance_types = [\"g6.xlarge\"]", ""));
    assert!(the(&f, "is written for AL2023 (nodeadm user data)").error);
    let f = offline(&stack(lt, "ami_type = \"AL2023_x86_64_NVIDIA\"\ninstance_types = [\"g6.xlarge\"]", ""));
    absent(&f, "is written for AL2023");
    // Labels on an AL2023 template become kubelet flags: no longer "Bottlerocket settings".
    let lt = "nodeadm = { kubelet = { flags = [\"--v=2\"] } }\nnode_labels = { a = \"b\" }";
    absent(
        &offline(&stack(lt, "ami_type = \"AL2023_x86_64_NVIDIA\"\ninstance_types = [\"g6.xlarge\"]", "")),
        "carries Bottlerocket settings",
    );
}

#[test]
fn a_standard_type_is_not_offered_a_gpu_ami_offline() {
    // m6i.large is in no accelerated family: offline, an NVIDIA AMI on it is refused as a
    // refreshing plan refuses it, and the help keeps the AMI family, without the driver.
    for (ami, plain) in [
        ("AL2023_x86_64_NVIDIA", "AL2023_x86_64_STANDARD"),
        ("BOTTLEROCKET_ARM_64_NVIDIA", "BOTTLEROCKET_ARM_64"),
        ("AL2_x86_64_GPU", "AL2023_x86_64_STANDARD"),
    ] {
        let ng = format!("instance_types = [\"m6i.large\"]\nami_type = \"{ami}\"");
        let f = catalog(&stack("imds_hop_limit = 1", &ng, ""));
        let d = the(&f, &format!("`node_group.n`: {ami} is an NVIDIA AMI, but m6i.large has no NVIDIA GPU"));
        assert!(d.error);
        assert_eq!(d.help, format!("use ami_type = \"{plain}\" or \"auto\""));
    }
    for ok in ["auto", "AL2023_x86_64_STANDARD", "BOTTLEROCKET_x86_64"] {
        let ng = format!("instance_types = [\"m6i.large\"]\nami_type = \"{ok}\"");
        let f = catalog(&stack("imds_hop_limit = 1", &ng, ""));
        assert!(f.iter().all(|x| !x.error), "{ok}: {f:#?}");
    }
}

/// Review r18 m5: an interface endpoint whose (stack) security groups admit no HTTPS from the
/// node subnets is a warning; a rule that admits them, a source security group, or a group
/// named by id is not.
#[test]
fn interface_endpoint_groups_must_admit_https_from_the_node_subnets() {
    let with = |ingress: &str| {
        let eps = endpoints("a").replace("security_group.efa", "security_group.vpce");
        let sg = format!("\n[security_group.vpce]\nvpc = \"${{vpc.main.id}}\"\n{ingress}\n");
        offline(&no_nat(GPU_LT, "", &format!("{sg}{eps}")))
    };
    let message = "the security groups of `vpc_endpoint.ecr_api` admit no HTTPS (TCP 443) from `subnet.a`";
    let f = with("");
    let d = the(&f, message);
    assert!(!d.error, "a warning: {d:?}");
    assert_eq!(
        d.message,
        format!("{message}: nodes there resolve the service to the endpoint, time out, and never join")
    );
    assert_eq!(d.at, "security_groups = [\"${security_group.vpce.id}\"]");
    let all = f.iter().filter(|x| x.message.starts_with("the security groups of `vpc_endpoint.")).count();
    assert_eq!(all, 4, "one per interface endpoint, none for the s3 gateway: {f:#?}");
    no_errors(&f);
    // Wrong port, or a block that does not hold the node subnet: still shut.
    the(&with("ingress = [{ protocol = \"tcp\", from_port = 22, to_port = 22, cidr = \"10.9.0.0/16\" }]"), message);
    the(&with("ingress = [{ protocol = \"tcp\", from_port = 443, to_port = 443, cidr = \"10.8.0.0/16\" }]"), message);
    // The VPC's block, all traffic, a port range, or a source security group: admitted.
    for ok in [
        "ingress = [{ protocol = \"tcp\", from_port = 443, to_port = 443, cidr = \"10.9.0.0/16\" }]",
        "ingress = [{ protocol = \"-1\", cidr = \"10.9.0.0/20\" }]",
        "ingress = [{ protocol = \"tcp\", from_port = 0, to_port = 65535, cidr = \"0.0.0.0/0\" }]",
        "ingress = [{ protocol = \"tcp\", from_port = 443, to_port = 443, security_group = \"sg-0123456789abcdef0\" }]",
    ] {
        absent(&with(ok), "admit no HTTPS");
    }
    // A group named by id cannot be judged offline.
    let by_id = no_nat(GPU_LT, "", &endpoints("a").replace("${security_group.efa.id}", "sg-0123456789abcdef0"));
    absent(&offline(&by_id), "admit no HTTPS");
}

#[test]
fn a_type_the_catalog_lacks_is_not_a_standard_type_offline() {
    // p6e-gb200/gb300 are not embedded (no DescribeInstanceTypes record to ship), and EKS UG
    // `ml-eks-optimized-ami` runs them on AL2023_ARM_64_NVIDIA only: offline that is a
    // warning that the AMI is unchecked, never "no NVIDIA GPU".
    for t in ["p6e-gb200.36xlarge", "p6e-gb300.36xlarge", "p9.48xlarge"] {
        let ng = format!("instance_types = [\"{t}\"]\nami_type = \"AL2023_ARM_64_NVIDIA\"");
        let f = catalog(&stack("imds_hop_limit = 1", &ng, ""));
        no_errors(&f);
        absent(&f, "has no NVIDIA GPU");
        let d = the(&f, &format!("{t} is not in gpustack's embedded instance catalog"));
        assert!(d.help.contains("refreshing plan"), "{d:?}");
    }
    // Known CPU-only families stay refused, embedded (c5n, EFA) or not (t3, hpc7g, u7i).
    for t in ["c5n.18xlarge", "t3.large", "hpc7g.16xlarge", "u7i-12tb.224xlarge", "r8g.large"] {
        let ng = format!("instance_types = [\"{t}\"]\nami_type = \"AL2023_x86_64_NVIDIA\"");
        let f = catalog(&stack("imds_hop_limit = 1", &ng, ""));
        assert!(the(&f, &format!("AL2023_x86_64_NVIDIA is an NVIDIA AMI, but {t} has no NVIDIA GPU")).error, "{t}");
    }
}

#[test]
fn an_al2_ami_on_a_cluster_past_1_32_is_refused_where_the_group_is_made() {
    // awslabs/amazon-eks-ami#2545: no AL2 AMIs after 1.32, so CreateNodegroup would fail
    // after the cluster is built.
    let text = stack("imds_hop_limit = 1", "instance_types = [\"g6.xlarge\"]\nami_type = \"AL2_x86_64_GPU\"", "");
    let s = accepted(&text);
    let all = |_: &str| true;
    let f = found(&s.source, &crate::rules::cluster_versions(&s, &all, &all));
    let d =
        the(&f, "`node_group.n`: AL2_x86_64_GPU is an Amazon Linux 2 AMI, and EKS publishes none for Kubernetes 1.33");
    assert!(d.error);
    assert_eq!(d.at, "ami_type = \"AL2_x86_64_GPU\"");
    assert!(d.help.contains("AL2023_x86_64_NVIDIA"), "{d:?}");
    // Not where the plan leaves the group alone (destroy, an untouched group), nor on 1.32.
    let none = |_: &str| false;
    assert!(crate::rules::cluster_versions(&s, &none, &none).is_empty());
    let s = accepted(&text.replace("\"1.33\"", "\"1.32\""));
    assert!(crate::rules::cluster_versions(&s, &all, &all).is_empty());
}

#[test]
fn an_accelerator_no_eks_ami_drives_is_warned_about() {
    // EKS UG ml-eks-optimized-ami: accelerated AMIs for NVIDIA and Neuron only.
    for (t, what) in [
        ("g4ad.xlarge", "1× Radeon Pro V520"),
        ("dl1.24xlarge", "8× Gaudi HL-205"),
        ("dl2q.24xlarge", "its accelerators"),
    ] {
        let ng = format!("instance_types = [\"{t}\"]\nami_type = \"auto\"");
        let f = catalog(&stack("imds_hop_limit = 1", &ng, ""));
        let d = the(
            &f,
            &format!("no EKS AMI drives {t}'s accelerators ({what}): its nodes join the cluster without them exposed"),
        );
        assert!(!d.error, "{t}");
        assert!(d.help.contains("NVIDIA GPUs and AWS Neuron"), "{d:?}");
    }
    for t in ["g6.xlarge", "inf2.xlarge", "trn1.32xlarge", "m6i.large"] {
        let ng = format!("instance_types = [\"{t}\"]\nami_type = \"auto\"");
        absent(&catalog(&stack("imds_hop_limit = 1", &ng, "")), "no EKS AMI drives");
    }
}

#[test]
fn a_self_managed_group_keeps_an_efa_template_to_its_one_type() {
    let example = include_str!("../../examples/self-managed.toml");
    let efa = example.replacen(
        "root_volume      = { size_gib = 200 }",
        "root_volume      = { size_gib = 200 }\ninstance_type = \"p5.48xlarge\"\nefa = { interfaces = \"max\" }",
        1,
    );
    let d = the(
        &offline(&efa),
        "`self_managed_node_group.gpu` lists instance_types, but its template `launch_template.gpu` lays out EFA interfaces",
    );
    assert!(d.error);
    absent(&offline(example), "lays out EFA interfaces");
    absent(&offline(example), "has no EC2_LINUX access entry");
}

// ---- plan time: subnets and reservations outside the stack (`outside::Net`) ----

fn outside_subnet(
    id: &str,
    zone: &str,
    route: crate::rules::outside::DefaultRoute,
    services: &[&str],
) -> crate::rules::outside::SubnetFacts {
    crate::rules::outside::SubnetFacts {
        id: id.into(),
        zone: zone.into(),
        cidr: "10.1.0.0/20".into(),
        vpc: "vpc-0ther".into(),
        map_public: false,
        default_route: route,
        services: services.iter().map(|s| s.to_string()).collect(),
    }
}

/// What the plan-time network pass reports for `text` with `facts` read.
fn online(text: &str, facts: crate::rules::outside::Outside) -> Vec<Found> {
    let stack = accepted(text);
    found(&stack.source, &crate::rules::network_online(&stack, &facts))
}

fn with_subnets(facts: Vec<crate::rules::outside::SubnetFacts>) -> crate::rules::outside::Outside {
    crate::rules::outside::Outside {
        subnets: facts.into_iter().map(|f| (f.id.clone(), f)).collect(),
        read: true,
        ..Default::default()
    }
}

#[test]
fn literal_subnets_are_noted_offline_and_judged_from_what_plan_read() {
    use crate::rules::outside::DefaultRoute;
    let ng = "subnets         = [\"subnet-0priv\"]\n";
    let text = stack(GPU_LT, ng, "");
    // Offline: one note naming the subnet, no error.
    let f = offline(&text);
    let d = the(&f, "the egress rule did not check 1 subnet the stack does not define (subnet-0priv) offline");
    assert!(!d.error);
    // At plan time: private, no route, no endpoints → the same refusal as a stack subnet.
    let f = online(&text, with_subnets(vec![outside_subnet("subnet-0priv", "us-west-2a", DefaultRoute::None, &[])]));
    let d = the(
        &f,
        "`node_group.n` runs in subnet-0priv (us-west-2a, 10.1.0.0/20 in vpc-0ther), which has no route to the internet",
    );
    assert!(d.error && d.at.starts_with("subnets"), "{d:?}");
    // A NAT route, or the five endpoints, are a way out; some endpoints are not.
    absent(
        &online(&text, with_subnets(vec![outside_subnet("subnet-0priv", "us-west-2a", DefaultRoute::Nat, &[])])),
        "could never join",
    );
    let all = ["ecr.api", "ecr.dkr", "s3", "ec2", "sts"];
    absent(
        &online(&text, with_subnets(vec![outside_subnet("subnet-0priv", "us-west-2a", DefaultRoute::None, &all)])),
        "could never join",
    );
    let f =
        online(&text, with_subnets(vec![outside_subnet("subnet-0priv", "us-west-2a", DefaultRoute::None, &all[..3])]));
    the(&f, "VPC endpoints for ec2, sts are missing");
    // An IGW route without public IPs on launch is no way out.
    let f = online(
        &text,
        with_subnets(vec![outside_subnet("subnet-0priv", "us-west-2a", DefaultRoute::InternetGateway, &[])]),
    );
    the(&f, "MapPublicIpOnLaunch is false");
}

#[test]
fn a_reservation_outside_the_stack_or_on_outside_subnets_is_checked_for_its_zone() {
    use crate::rules::outside::DefaultRoute;
    let lt = "instance_type = \"g6.xlarge\"\ndata_volume = { size_gib = 100 }\ncapacity_reservation = \"cr-0abc\"\nmarket = \"on-demand\"";
    let text = stack(lt, "", "");
    // Offline: the reservation's zone is unknown: one note.
    let f = offline(&text);
    let d = the(&f, "the reservation-zone check did not check cr-0abc offline");
    assert!(!d.error);
    // At plan time, cr-0abc is in us-west-2b and subnet.a in us-west-2a.
    let mut facts = crate::rules::outside::Outside { read: true, ..Default::default() };
    facts.reservation_zones.insert("cr-0abc".into(), "us-west-2b".into());
    let d = the(
        &online(&text, facts.clone()),
        "`node_group.n` reserves capacity in us-west-2b through `launch_template.t` (cr-0abc), but its subnet subnet.a (us-west-2a) is in another zone",
    );
    assert!(d.error);
    facts.reservation_zones.insert("cr-0abc".into(), "us-west-2a".into());
    no_errors(&online(&text, facts));
    // A literal subnet against a stack Capacity Block's zone.
    let block = "\n[capacity_block.cb]\ninstance_type = \"p5.48xlarge\"\ninstance_count = 1\navailability_zone = \"us-west-2a\"\nduration_hours = 48\nstart_after = \"2026-12-01T00:00:00Z\"\nstart_before = \"2026-12-08T00:00:00Z\"\nmax_upfront_usd = 8000\n";
    let lt = "instance_type = \"p5.48xlarge\"\ncapacity_reservation = \"${capacity_block.cb.id}\"\nmarket = \"capacity-block\"\ndata_volume = { size_gib = 100 }";
    let ng = "subnets         = [\"subnet-0b\"]\ncapacity_type = \"CAPACITY_BLOCK\"\n";
    let text = stack(lt, ng, block);
    let facts = with_subnets(vec![outside_subnet("subnet-0b", "us-west-2b", DefaultRoute::Nat, &[])]);
    the(&online(&text, facts), "its subnet subnet-0b (us-west-2b) is in another zone");
}

#[test]
fn a_pool_on_outside_subnets_is_checked_against_its_reservation_zone() {
    use crate::rules::outside::DefaultRoute;
    let text = r#"[stack]
name = "m"
region = "us-west-2"

[capacity_block.train]
instance_type     = "p5.48xlarge"
instance_count    = 1
duration_hours    = 24
start_after       = "2026-12-01T00:00:00Z"
start_before      = "2026-12-08T00:00:00Z"
availability_zone = "us-west-2a"
max_upfront_usd   = 40000

[karpenter_pool.train]
cluster               = "main"
node_role             = "node"
subnets               = ["subnet-0b"]
security_groups       = ["sg-1"]
capacity_reservations = ["${capacity_block.train.id}"]
capacity_types        = ["reserved"]
instance_types        = ["p5.48xlarge"]
gpu_limit             = 8
"#;
    let vars = VarSources { cli: &[], env: &|_| None };
    let (stack, _) = Stack::parse(Source::new("t.toml", text.into()), &vars, &crate::resources::schemas()).unwrap();
    let check = |facts: &crate::rules::outside::Outside| {
        crate::rules::outside::reservation_zones(&crate::rules::outside::Net { stack: &stack, outside: facts })
    };
    // Offline the subnet's zone is unknown: named for the note.
    let (d, unchecked) = check(&Default::default());
    assert!(d.is_empty(), "{d:?}");
    assert_eq!(unchecked.into_iter().collect::<Vec<_>>(), ["subnet-0b"]);
    // Read in us-west-2b: the block in us-west-2a would never be used.
    let (d, _) = check(&with_subnets(vec![outside_subnet("subnet-0b", "us-west-2b", DefaultRoute::Nat, &[])]));
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(
        d[0].message.contains("`karpenter_pool.train` names capacity_block.train, which reserves capacity in us-west-2a, but its subnets are in us-west-2b"),
        "{d:?}"
    );
    let (d, _) = check(&with_subnets(vec![outside_subnet("subnet-0b", "us-west-2a", DefaultRoute::Nat, &[])]));
    assert!(d.is_empty(), "{d:?}");
}

#[test]
fn nodes_on_an_outside_subnet_of_another_vpc_than_their_cluster_are_refused_at_plan_time() {
    use crate::rules::outside::DefaultRoute;
    // The cluster is in the stack's VPC; the node group on a subnet of another VPC.
    let text = stack(GPU_LT, "subnets         = [\"subnet-0priv\"]\n", "");
    let facts = with_subnets(vec![outside_subnet("subnet-0priv", "us-west-2a", DefaultRoute::Nat, &[])]);
    let d = the(
        &online(&text, facts),
        "`node_group.n` runs in subnet-0priv of vpc-0ther, but its cluster `eks_cluster.main` is in vpc.main",
    );
    assert!(d.error, "{d:?}");
    // A cluster over two VPCs.
    let two = text.replace(
        "subnets             = [\"${subnet.a.id}\", \"${subnet.b.id}\"]",
        "subnets             = [\"${subnet.a.id}\", \"subnet-0priv\"]",
    );
    assert_ne!(two, text);
    let facts = with_subnets(vec![outside_subnet("subnet-0priv", "us-west-2b", DefaultRoute::Nat, &[])]);
    the(&online(&two, facts), "`eks_cluster.main` names subnets in 2 VPCs");
}

#[test]
fn the_plan_says_what_local_storage_needs_of_the_instance_stores() {
    // RAID10 on fewer than 4 NVMe disks stops nodeadm's setup-local-disks and the node never
    // joins (review r19-lt M2); the catalog has no disk counts, so the plan says it.
    let al2023 = "ami_type = \"AL2023_x86_64_NVIDIA\"";
    let n = notes(&stack("instance_type = \"g6e.2xlarge\"\nlocal_storage = \"raid10\"", al2023, ""));
    assert!(
        n["launch_template.t"].contains("local_storage RAID10 needs at least 4 NVMe instance-store disks"),
        "{n:?}"
    );
    let n = notes(&stack(
        "instance_type = \"g6e.2xlarge\"\nnodeadm = { instance = { local_storage = { strategy = \"RAID0\" } } }",
        al2023,
        "",
    ));
    assert!(
        n["launch_template.t"].contains("local_storage RAID0 needs NVMe instance-store disks (none: it does nothing)"),
        "{n:?}"
    );
    // maxPods past the ENI limit leaves pods without an IP (review r19-lt M1): the plan says
    // what it must fit.
    let n = notes(&stack(
        "instance_type = \"g6e.2xlarge\"\nnodeadm = { kubelet = { config = { maxPods = 110 } } }",
        al2023,
        "",
    ));
    assert!(
        n["launch_template.t"]
            .contains("maxPods 110 fits only if each type has (ENIs x (IPv4 per ENI - 1)) + 2 >= 110"),
        "{n:?}"
    );
}

#[test]
fn auto_on_a_template_that_names_its_ami_type_is_refused() {
    // auto resolves from the template's user data at apply; a template whose family is only
    // its ami_type would get Bottlerocket there (review r19-lt m10).
    let lt = "instance_type = \"g6.xlarge\"\nami_type = \"AL2023_x86_64_NVIDIA\"\nroot_volume = { size_gib = 200 }";
    let d =
        the(&offline(&stack(lt, "", "")), "has ami_type \"auto\", but its template `launch_template.t` says ami_type");
    assert!(d.error);
    assert!(d.help.starts_with("set ami_type = \"AL2023_x86_64_NVIDIA\" on the node group too"), "{d:?}");
    absent(&offline(&stack(lt, "ami_type = \"AL2023_x86_64_NVIDIA\"", "")), "has ami_type \"auto\"");
}

/// Review imp-gen B1: an imported subnet is judged by the live routes a refreshing plan reads,
/// not by its file's `public`/`nat_gateway` (terraform-aws-modules/vpc shares one private
/// route table among its private subnets, which `subnet` cannot say, and leaves
/// MapPublicIpOnLaunch off on its public subnets, where the NAT gateways live).
#[test]
fn an_imported_subnet_is_judged_by_its_live_routes() {
    use crate::rules::outside::DefaultRoute;
    // subnet.a private, no NAT in the file; subnet.b (the NAT's home) not public in the file.
    let imports = "\n[import]\n\"subnet.a\" = \"subnet-0a\"\n\"subnet.b\" = \"subnet-0b\"\n";
    let text = no_nat(GPU_LT, "", imports).replace("public            = true\n", "");
    // Without the import the file's words decide: refused offline.
    the(&offline(&no_nat(GPU_LT, "", "")), "is private with no NAT gateway and no VPC endpoints");
    // Imported: offline only a note (nothing was read), no refusal.
    let f = offline(&text);
    no_errors(&f);
    the(&f, "the egress rule did not check 1 subnet the stack does not define (subnet.a) offline");
    // At plan time: a shared NAT route is a way out; no route at all is refused as for any read subnet.
    no_errors(&online(&text, with_subnets(vec![outside_subnet("subnet-0a", "us-west-2a", DefaultRoute::Nat, &[])])));
    let d = the(
        &online(&text, with_subnets(vec![outside_subnet("subnet-0a", "us-west-2a", DefaultRoute::None, &[])])),
        "`node_group.n` runs in subnet-0a (us-west-2a, 10.1.0.0/20 in vpc-0ther), which has no route to the internet",
    );
    assert!(d.error);
    // A stack subnet routed through a NAT gateway whose imported home says nothing of `public`.
    let through =
        stack(GPU_LT, "", "\n[import]\n\"subnet.b\" = \"subnet-0b\"\n").replace("public            = true\n", "");
    absent(&offline(&through), "is not public");
    the(&offline(&stack(GPU_LT, "", "").replace("public            = true\n", "")), "is not public");
}
