//! Correct on real AWS (issue "Correct on real AWS…", audit 2026-11): behaviours the
//! emulator alone could not catch before, each checked through the real binary.

use crate::harness::{Env, block_on, network_stack};

/// RFC 3339, `days` from now.
fn in_days(days: i64) -> String {
    let t = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * days);
    t.round(jiff::Unit::Second).unwrap().to_string()
}

/// #2: Bottlerocket's `mig.profile` values are quoted strings, and a value must be a layout
/// of that GPU (an unknown one silently gives each GPU whole).
#[test]
fn mig_profile_values_are_strings_and_layouts_of_their_gpu() {
    let env = Env::new();
    let lt = |profile: &str| {
        format!(
            "[stack]\nname = \"mig\"\nregion = \"us-west-2\"\n[launch_template.p5]\ninstance_type = \"p5.48xlarge\"\ndata_volume = {{ size_gib = 200 }}\ngpu_sharing = {{ strategy = \"mig\", mig_profile = {{ {profile} }} }}\n"
        )
    };
    env.write("int.toml", &lt(r#""h100.80gb" = 4"#));
    let r = env.run(&["validate", "int.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains(r#"mig_profile "h100.80gb" = 4 is an integer; Bottlerocket takes only strings here"#),
        "{r:?}"
    );
    assert!(r.stderr.contains(r#"quote it: "h100.80gb" = "4""#), "{r:?}");
    assert!(r.stderr.contains("int.toml:"), "names file and line: {r:?}");

    env.write("bad.toml", &lt(r#""h100.80gb" = "1g.18gb""#));
    let r = env.run(&["validate", "bad.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains(r#"mig_profile "h100.80gb" = "1g.18gb" is not a layout of h100.80gb"#), "{r:?}");

    env.write("key.toml", &lt(r#""h100.81gb" = "4""#));
    let r = env.run(&["validate", "key.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("is not a GPU Bottlerocket's MIG manager knows"), "{r:?}");

    env.write("ok.toml", &lt(r#""h100.80gb" = "4""#));
    env.ok(&["validate", "ok.toml"]);
    env.ok(&["plan", "ok.toml"]);
}

/// #10: a block holds 1 to 64 instances, not only powers of two.
#[test]
fn capacity_block_counts_run_from_one_to_sixty_four() {
    let env = Env::new();
    let block = |n: u32| {
        format!(
            "[stack]\nname = \"cb\"\nregion = \"us-west-2\"\n[capacity_block.b]\ninstance_type = \"p5.48xlarge\"\ninstance_count = {n}\nduration_hours = 24\nstart_after = \"{}\"\nstart_before = \"{}\"\nmax_upfront_usd = 40000\n",
            in_days(1),
            in_days(6)
        )
    };
    env.write("three.toml", &block(3));
    env.ok(&["validate", "three.toml"]);
    env.write("many.toml", &block(65));
    let r = env.run(&["validate", "many.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("a Capacity Block holds 1 to 64 instances"), "{r:?}");
}

/// #13: EKS's private endpoint and interface endpoints need DNS support and hostnames; both
/// are turned on, and turning one off outside gpustack is drift that apply repairs.
#[test]
fn vpc_dns_attributes_are_on_and_drift_is_repaired() {
    let env = Env::new();
    env.write("n.toml", &network_stack("dns", ""));
    env.ok(&["apply", "n.toml", "--auto-approve"]);
    let vpc = env.state("dns")["resources"]["vpc.main"]["id"].as_str().unwrap().to_string();
    let ec2 = env.emu.ec2();
    let read = |vpc: String| {
        let ec2 = ec2.clone();
        block_on(async move {
            use aws_sdk_ec2::types::VpcAttributeName as A;
            let get = |a: A| ec2.describe_vpc_attribute().vpc_id(&vpc).attribute(a).send();
            let support = get(A::EnableDnsSupport).await.unwrap().enable_dns_support().and_then(|v| v.value());
            let hostnames = get(A::EnableDnsHostnames).await.unwrap().enable_dns_hostnames().and_then(|v| v.value());
            (support, hostnames)
        })
    };
    assert_eq!(read(vpc.clone()), (Some(true), Some(true)));
    let off = vpc.clone();
    let ec2b = env.emu.ec2();
    block_on(async move {
        let no = aws_sdk_ec2::types::AttributeBooleanValue::builder().value(false).build();
        ec2b.modify_vpc_attribute().vpc_id(&off).enable_dns_hostnames(no).send().await.unwrap();
    });
    let drift = env.run(&["plan", "n.toml", "--detailed-exitcode"]);
    assert_eq!(drift.code, 2, "{drift:?}");
    assert!(drift.stdout.contains("dns: false → true"), "{drift:?}");
    env.ok(&["apply", "n.toml", "--auto-approve"]);
    assert_eq!(read(vpc), (Some(true), Some(true)));
    assert_eq!(env.run(&["plan", "n.toml", "--detailed-exitcode"]).code, 0);
}

/// The NAT gateway a subnet's default route goes through, and how many Elastic IPs the
/// stack `nat` holds.
fn nat_route_and_addresses(env: &Env, subnet: String) -> (Option<String>, usize) {
    let ec2 = env.emu.ec2();
    block_on(async move {
        let f = aws_sdk_ec2::types::Filter::builder().name("association.subnet-id").values(&subnet).build();
        let rts = ec2.describe_route_tables().filters(f).send().await.unwrap();
        let route = rts
            .route_tables()
            .iter()
            .flat_map(|r| r.routes())
            .find(|r| r.destination_cidr_block() == Some("0.0.0.0/0"))
            .and_then(|r| r.nat_gateway_id().map(str::to_string));
        let tag = aws_sdk_ec2::types::Filter::builder().name("tag:gpustack:stack").values("nat").build();
        let ips = ec2.describe_addresses().filters(tag).send().await.unwrap().addresses().len();
        (route, ips)
    })
}

/// §2: a NAT gateway with its own Elastic IP gives a private subnet a way out; destroy
/// leaves neither behind.
#[test]
fn a_nat_gateway_routes_private_subnets_and_destroy_releases_its_ip() {
    let env = Env::new();
    let stack = r#"[stack]
name   = "nat"
region = "us-west-2"

[vpc.main]
cidr_block       = "10.9.0.0/16"
internet_gateway = true

[subnet.public]
vpc               = "${vpc.main.id}"
cidr_block        = "10.9.0.0/20"
availability_zone = "us-west-2a"
public            = true

[nat_gateway.out]
subnet = "${subnet.public.id}"

[subnet.private]
vpc               = "${vpc.main.id}"
cidr_block        = "10.9.64.0/18"
availability_zone = "us-west-2a"
nat_gateway       = "${nat_gateway.out.id}"

[output]
ip = "${nat_gateway.out.public_ip}"
"#;
    env.write("nat.toml", stack);
    env.ok(&["apply", "nat.toml", "--auto-approve"]);
    let st = env.state("nat");
    let nat = st["resources"]["nat_gateway.out"]["id"].as_str().unwrap().to_string();
    let private = st["resources"]["subnet.private"]["id"].as_str().unwrap().to_string();
    assert!(nat.starts_with("nat-"), "{st}");
    assert!(!st["outputs"]["ip"].as_str().unwrap().is_empty(), "{st}");
    let (route, ips) = nat_route_and_addresses(&env, private);
    assert_eq!(route.as_deref(), Some(nat.as_str()));
    assert_eq!(ips, 1, "one tagged Elastic IP");
    assert_eq!(env.run(&["plan", "nat.toml", "--detailed-exitcode"]).code, 0, "in sync");

    // Replacing the gateway (another public subnet) creates the new one with an address of its
    // own before the old one goes, and deleting the old one releases only its own address.
    let moved = stack.replace(
        "[nat_gateway.out]\nsubnet = \"${subnet.public.id}\"",
        "[subnet.public2]\nvpc = \"${vpc.main.id}\"\ncidr_block = \"10.9.16.0/20\"\navailability_zone = \"us-west-2a\"\npublic = true\n\n[nat_gateway.out]\nsubnet = \"${subnet.public2.id}\"",
    );
    assert_ne!(moved, stack);
    env.write("nat.toml", &moved);
    env.ok(&["apply", "nat.toml", "--auto-approve"]);
    let st = env.state("nat");
    let nat2 = st["resources"]["nat_gateway.out"]["id"].as_str().unwrap().to_string();
    let private = st["resources"]["subnet.private"]["id"].as_str().unwrap().to_string();
    assert_ne!(nat2, nat);
    let (route, ips) = nat_route_and_addresses(&env, private);
    assert_eq!(route.as_deref(), Some(nat2.as_str()), "the private subnet follows the new gateway");
    assert_eq!(ips, 1, "the old gateway's address was released, the new one's kept");
    assert_eq!(env.run(&["plan", "nat.toml", "--detailed-exitcode"]).code, 0, "in sync");

    env.ok(&["destroy", "nat.toml", "--auto-approve"]);
    let ec2 = env.emu.ec2();
    let (live, ips) = block_on(async move {
        let tag = || aws_sdk_ec2::types::Filter::builder().name("tag:gpustack:stack").values("nat").build();
        let nats = ec2.describe_nat_gateways().filter(tag()).send().await.unwrap();
        let live = nats
            .nat_gateways()
            .iter()
            .filter(|n| !matches!(n.state(), Some(aws_sdk_ec2::types::NatGatewayState::Deleted)))
            .count();
        (live, ec2.describe_addresses().filters(tag()).send().await.unwrap().addresses().len())
    });
    assert_eq!((live, ips), (0, 0), "no NAT gateway and no Elastic IP left");
}

/// #12: a purchase is irreversible, so it waits for everything it does not depend on: when
/// another part of the stack fails, nothing is bought.
#[test]
fn a_failing_apply_buys_nothing() {
    let env = Env::new();
    let stack = format!(
        r#"[stack]
name   = "nobuy"
region = "us-west-2"

[iam_role.broken]
service          = "ec2.amazonaws.com"
managed_policies = ["arn:aws:iam::aws:policy/NoSuchPolicyAnywhere"]

[capacity_block.train]
instance_type     = "p5.48xlarge"
instance_count    = 1
duration_hours    = 24
start_after       = "{}"
start_before      = "{}"
availability_zone = "us-west-2b"
max_upfront_usd   = 40000
"#,
        in_days(1),
        in_days(6)
    );
    env.write("b.toml", &stack);
    let plan = env.ok(&["plan", "b.toml"]);
    assert!(plan.stdout.contains("bought last, once every change it does not depend on has succeeded"), "{plan:?}");
    let r = env.run(&["apply", "b.toml", "--auto-approve", "--approve-purchases"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(env.emu.purchases(), 0, "the role failed, so the block was not bought: {r:?}");
}

/// #22: node groups wait for their cluster's vpc-cni add-on, and `graph` shows the edge.
#[test]
fn node_groups_wait_for_the_vpc_cni_add_on() {
    let env = Env::new();
    let quickstart = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("stacks/quickstart.toml");
    let r = env.ok(&["graph", quickstart.to_str().unwrap(), "--var", "admin_cidr=198.51.100.7/32"]);
    assert!(r.stdout.contains(r#""node_group.gpu" -> "eks_addon.vpc_cni""#), "{}", r.stdout);
    assert!(r.stdout.contains(r#""node_group.system" -> "eks_addon.vpc_cni""#), "{}", r.stdout);
}

/// #20: the quickstart's API allowlist is the user's, not a documentation range.
#[test]
fn the_quickstart_asks_for_the_admin_cidr() {
    let env = Env::new();
    let quickstart = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("stacks/quickstart.toml");
    let r = env.run(&["validate", quickstart.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("admin_cidr"), "{r:?}");
}

/// #16: a cluster whose every node group is tainted has nowhere to run CoreDNS.
#[test]
fn an_all_tainted_cluster_is_warned_about() {
    let env = Env::new();
    let quickstart =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("stacks/quickstart.toml"))
            .unwrap();
    let start = quickstart.find("[node_group.system]").unwrap();
    let end = start + quickstart[start..].find("[launch_template.gpu]").unwrap();
    let tainted = format!("{}{}", &quickstart[..start], &quickstart[end..]);
    env.write("t.toml", &tainted);
    let r = env.ok(&["validate", "t.toml", "--var", "admin_cidr=198.51.100.7/32"]);
    assert!(r.stderr.contains("every node group of `eks_cluster.main` is tainted"), "{r:?}");
    env.write("q.toml", &quickstart);
    let r = env.ok(&["validate", "q.toml", "--var", "admin_cidr=198.51.100.7/32"]);
    assert!(!r.stderr.contains("is tainted"), "the shipped quickstart has a system pool: {r:?}");
}

/// #3, #17, §3: a Capacity Block group is drained for a version update (a block has no
/// spare instances to roll onto), and the plan says so; GPU and reserved groups update
/// with MINIMAL (no surge), the others with DEFAULT.
#[test]
fn a_capacity_block_group_is_drained_for_its_update_and_gpu_groups_do_not_surge() {
    let env = Env::new();
    let training =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/training.toml"))
            .unwrap();
    let vars = [
        "--var".to_string(),
        format!("block_after={}", in_days(1)),
        "--var".into(),
        format!("block_before={}", in_days(7)),
    ];
    let with =
        |cmd: &[&str]| -> Vec<String> { cmd.iter().map(|s| s.to_string()).chain(vars.iter().cloned()).collect() };
    let run = |args: Vec<String>| env.ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    env.write("t.toml", &training);
    run(with(&["apply", "t.toml", "--auto-approve", "--approve-purchases"]));

    let eks = env.emu.eks();
    let strategies = block_on(async move {
        let mut out = vec![];
        for ng in ["train-dev-train", "train-dev-system"] {
            let n = eks.describe_nodegroup().cluster_name("train-dev-main").nodegroup_name(ng).send().await.unwrap();
            let u = n.nodegroup().unwrap().update_config().unwrap();
            out.push(u.update_strategy().map(|s| s.as_str().to_string()));
        }
        out
    });
    assert_eq!(strategies, vec![Some("MINIMAL".to_string()), Some("DEFAULT".to_string())]);

    // A template change moves the block's group to a new version: drain, update, refill.
    let relabelled = training.replacen(
        r#"node_labels     = { "gpustack.io/pool" = "train" }"#,
        r#"node_labels     = { "gpustack.io/pool" = "train", "gpustack.io/rev" = "2" }"#,
        1,
    );
    assert_ne!(relabelled, training);
    env.write("t.toml", &relabelled);
    let plan = run(with(&["plan", "t.toml"]));
    assert!(
        plan.stdout
            .contains("Capacity Block group: scale to 0, update, scale back to 2 (drains every node of the pool"),
        "{}",
        plan.stdout
    );
    env.emu.reset_requests();
    run(with(&["apply", "t.toml", "--auto-approve"]));
    let updates: Vec<String> =
        env.emu.requests().into_iter().filter(|(_, a)| a.starts_with("UpdateNodegroup")).map(|(_, a)| a).collect();
    assert_eq!(updates, vec!["UpdateNodegroupConfig", "UpdateNodegroupVersion", "UpdateNodegroupConfig"]);
    let eks = env.emu.eks();
    let desired = block_on(async move {
        let n = eks
            .describe_nodegroup()
            .cluster_name("train-dev-main")
            .nodegroup_name("train-dev-train")
            .send()
            .await
            .unwrap();
        n.nodegroup().unwrap().scaling_config().unwrap().desired_size()
    });
    assert_eq!(desired, Some(2), "scaled back after the update");
    assert_eq!(
        env.run(&with(&["plan", "t.toml", "--detailed-exitcode"]).iter().map(String::as_str).collect::<Vec<_>>()).code,
        0
    );
}

/// §2: nodes in a subnet with no way out could never join; the rule names the subnet and
/// shows the NAT fix, offline.
#[test]
fn a_node_group_without_egress_is_refused_before_anything_is_made() {
    let env = Env::new();
    let training =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/training.toml"))
            .unwrap();
    let no_nat = training.replace("nat_gateway       = \"${nat_gateway.main.id}\"\n", "");
    assert_ne!(no_nat, training);
    env.write("t.toml", &no_nat);
    let r = env.run(&["validate", "t.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("`node_group.train` runs in `subnet.private_a`, which is private with no NAT gateway and no VPC endpoints: its nodes could never join the cluster"),
        "{r:?}"
    );
    assert!(r.stderr.contains("[nat_gateway.main]"), "shows the NAT fix: {r:?}");
    assert!(r.stderr.contains("t.toml:"), "{r:?}");
    let r = env.run(&["plan", "t.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(env.emu.requests().is_empty(), "no AWS call: {:?}", env.emu.requests());

    // Endpoints are a way out too.
    let endpoints: String = ["ecr.api", "ecr.dkr", "s3", "ec2", "sts"]
        .iter()
        .map(|s| {
            let name = s.replace('.', "_");
            let groups = if *s == "s3" { String::new() } else { "security_groups = [\"${security_group.nodes.id}\"]\n".into() };
            format!("\n[vpc_endpoint.{name}]\nvpc = \"${{vpc.main.id}}\"\nservice = \"{s}\"\nsubnets = [\"${{subnet.private_a.id}}\", \"${{subnet.private_b.id}}\"]\n{groups}")
        })
        .collect();
    let with_endpoints = no_nat.replace("[output]", &format!("{endpoints}\n[output]"));
    env.write("e.toml", &with_endpoints);
    env.ok(&["validate", "e.toml"]);

    // An interface endpoint without security groups would get the VPC's default group, which
    // nodes cannot reach.
    let open = with_endpoints.replacen("security_groups = [\"${security_group.nodes.id}\"]\n", "", 1);
    env.write("o.toml", &open);
    let r = env.run(&["validate", "o.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("an interface endpoint needs `security_groups`"), "{r:?}");

    // The image-cache builder pulls from public registries: endpoints are not enough for it.
    let cache_private = with_endpoints.replace(
        "subnet                   = \"${subnet.public_a.id}\"",
        "subnet                   = \"${subnet.private_a.id}\"",
    );
    assert_ne!(cache_private, with_endpoints);
    env.write("c.toml", &cache_private);
    let r = env.run(&["validate", "c.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("`image_cache.train` runs in `subnet.private_a`, which has no route to the internet"),
        "{r:?}"
    );
}

/// #5: for a requested length EC2 offers one block slightly shorter (cheaper) and one
/// slightly longer; the plan proposes one at least as long as asked and shows both.
#[test]
fn the_plan_never_proposes_a_block_shorter_than_asked() {
    let env = Env::new();
    let stack = format!(
        "[stack]\nname = \"len\"\nregion = \"us-west-2\"\n[capacity_block.b]\ninstance_type = \"p5.48xlarge\"\ninstance_count = 1\nduration_hours = 48\nstart_after = \"{}\"\nstart_before = \"{}\"\navailability_zone = \"us-west-2b\"\nmax_upfront_usd = 40000\n",
        in_days(1),
        in_days(6)
    );
    env.write("b.toml", &stack);
    let r = env.ok(&["plan", "b.toml", "--json"]);
    let plan: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let p = &plan["changes"][0]["purchase"];
    assert_eq!(p["asked_hours"], 48, "{p}");
    assert!(p["duration_hours"].as_i64().unwrap() >= 48, "a block at least as long as asked: {p}");
    let text = env.ok(&["plan", "b.toml"]);
    assert!(text.stdout.contains("asked 48 h"), "{}", text.stdout);
}

/// #6: on a type whose network card 0 is ENA-only, the primary is an ENA interface and the
/// EFA cards get efa-only interfaces (an efa-only interface cannot be the primary).
#[test]
fn efa_interfaces_follow_the_cards_that_support_efa() {
    let env = Env::new();
    let stack = r#"[stack]
name   = "efa"
region = "us-west-2"

[vpc.main]
cidr_block = "10.7.0.0/16"

[security_group.efa]
vpc = "${vpc.main.id}"
efa = true

[launch_template.b300]
instance_type = "p6-b300.48xlarge"
efa           = { security_groups = ["${security_group.efa.id}"], interfaces = "max" }
data_volume   = { size_gib = 200 }
"#;
    env.write("e.toml", stack);
    env.ok(&["apply", "e.toml", "--auto-approve"]);
    let id = env.state("efa")["resources"]["launch_template.b300"]["id"].as_str().unwrap().to_string();
    let ec2 = env.emu.ec2();
    let nics = block_on(async move {
        let v =
            ec2.describe_launch_template_versions().launch_template_id(id).versions("$Default").send().await.unwrap();
        v.launch_template_versions()[0]
            .launch_template_data()
            .unwrap()
            .network_interfaces()
            .iter()
            .map(|n| {
                (n.network_card_index().unwrap(), n.device_index().unwrap(), n.interface_type().unwrap().to_string())
            })
            .collect::<Vec<_>>()
    });
    assert_eq!(nics[0], (0, 0, "interface".to_string()), "{nics:?}");
    assert_eq!(nics.len(), 17, "an ENA primary and 16 EFA cards: {nics:?}");
    assert!(nics[1..].iter().enumerate().all(|(k, n)| *n == (k as i32 + 1, 0, "efa-only".to_string())), "{nics:?}");
}

/// #7, #11: Capacity Block quotas are vCPUs (instances × vCPUs), and Trn/Inf/DL types are
/// checked against their own documented codes rather than warned about.
#[test]
fn block_quotas_count_vcpus_and_trainium_has_its_own_code() {
    let env = Env::new();
    env.emu.control("POST", "/_gpustack/quotas?code=L-DA6814F2&value=200");
    let stack = format!(
        "[stack]\nname = \"q\"\nregion = \"us-west-2\"\n[capacity_block.b]\ninstance_type = \"p5.48xlarge\"\ninstance_count = 2\nduration_hours = 24\nstart_after = \"{}\"\nstart_before = \"{}\"\navailability_zone = \"us-west-2b\"\nmax_upfront_usd = 40000\n",
        in_days(1),
        in_days(6)
    );
    env.write("b.toml", &stack);
    let r = env.run(&["plan", "b.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("this stack needs 384 vCPUs of quota L-DA6814F2"), "{r:?}");
    assert!(r.stderr.contains("capacity_block.b: 2 × 192 vCPUs in a block (p5.48xlarge)"), "{r:?}");

    let trn = "[stack]\nname = \"trn\"\nregion = \"us-west-2\"\n[capacity_reservation.t]\ninstance_type = \"trn1.32xlarge\"\navailability_zone = \"us-west-2a\"\ninstance_count = 1\n";
    env.write("t.toml", trn);
    let r = env.run(&["plan", "t.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("quota L-2C3B7624 (Running On-Demand Trn instances)"), "{r:?}");
}

/// #8: a count change sends only the count; eligibility (`match`) needs an idle reservation,
/// so sending it along would fail while the pool runs.
#[test]
fn an_odcr_count_change_works_while_instances_run_in_it() {
    let env = Env::new();
    let odcr = |n: u32| {
        format!(
            "[stack]\nname = \"odcr\"\nregion = \"us-west-2\"\n[capacity_reservation.steady]\ninstance_type = \"g6.12xlarge\"\navailability_zone = \"us-west-2a\"\ninstance_count = {n}\n"
        )
    };
    env.write("r.toml", &odcr(2));
    env.ok(&["apply", "r.toml", "--auto-approve"]);
    let id = env.state("odcr")["resources"]["capacity_reservation.steady"]["id"].as_str().unwrap().to_string();
    env.emu.control("POST", &format!("/_gpustack/capacity/used?id={id}&count=2"));
    env.write("r.toml", &odcr(3));
    env.ok(&["apply", "r.toml", "--auto-approve"]);
    assert_eq!(env.run(&["plan", "r.toml", "--detailed-exitcode"]).code, 0);
    // Changing eligibility while in use is refused by EC2, and the error says what to do.
    env.write("r.toml", &format!("{}match = \"open\"\n", odcr(3)));
    let r = env.run(&["apply", "r.toml", "--auto-approve"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stdout.contains("changing `match` needs an idle reservation")
            || r.stderr.contains("changing `match` needs an idle reservation"),
        "{r:?}"
    );
}

/// #15: a just-made instance profile is refused by RunInstances for a while; the builder's
/// launch retries instead of failing the image cache.
#[test]
fn a_fresh_instance_profile_is_waited_for() {
    let env = Env::new();
    // Every profile younger than a minute is refused once (as IAM propagation does).
    env.emu.control("POST", "/_gpustack/iam-propagation?seconds=60");
    let stack = r#"[stack]
name   = "prof"
region = "us-west-2"

[vpc.main]
cidr_block       = "10.8.0.0/16"
internet_gateway = true

[subnet.public]
vpc               = "${vpc.main.id}"
cidr_block        = "10.8.0.0/20"
availability_zone = "us-west-2a"
public            = true

[iam_role.builder]
service          = "ec2.amazonaws.com"
instance_profile = true
managed_policies = ["arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"]

[image_cache.ml]
images                   = ["public.ecr.aws/docker/library/busybox:1.36"]
variant                  = "aws-k8s-1.31-nvidia"
subnet                   = "${subnet.public.id}"
builder_instance_profile = "${iam_role.builder.instance_profile}"
"#;
    env.write("p.toml", stack);
    env.ok(&["apply", "p.toml", "--auto-approve"]);
    let launches = env.emu.requests().iter().filter(|(_, a)| a == "RunInstances").count();
    assert_eq!(launches, 2, "refused once, then launched");
}

/// #18, #21, §3: IMDS hop limit 1 unless opted in; a GPU template without a data volume is
/// warned about; a data volume from a snapshot is hydrated at 200 MiB/s unless set.
#[test]
fn imds_hop_limit_and_data_volume_defaults() {
    let env = Env::new();
    let stack = r#"[stack]
name   = "lt"
region = "us-west-2"

[launch_template.bare]
instance_type = "g6.xlarge"

[launch_template.open]
instance_type  = "g6.xlarge"
imds_hop_limit = 2
data_volume    = { size_gib = 100, snapshot = "snap-0123456789abcdef0" }
"#;
    env.write("l.toml", stack);
    let plan = env.ok(&["plan", "l.toml"]);
    // Catalog warnings are part of the plan (stdout, and `warnings` in --json).
    assert!(plan.stdout.contains("`launch_template.bare` runs g6.xlarge"), "{plan:?}");
    assert!(plan.stdout.contains("with no `data_volume`"), "{plan:?}");
    assert!(!plan.stdout.contains("`launch_template.open` runs"), "{plan:?}");
    env.ok(&["apply", "l.toml", "--auto-approve"]);
    let st = env.state("lt");
    let ids: Vec<String> = ["bare", "open"]
        .iter()
        .map(|n| st["resources"][format!("launch_template.{n}")]["id"].as_str().unwrap().to_string())
        .collect();
    let ec2 = env.emu.ec2();
    let got = block_on(async move {
        let mut out = vec![];
        for id in ids {
            let v = ec2
                .describe_launch_template_versions()
                .launch_template_id(id)
                .versions("$Default")
                .send()
                .await
                .unwrap();
            let d = v.launch_template_versions()[0].launch_template_data().unwrap().clone();
            let hop = d.metadata_options().and_then(|m| m.http_put_response_hop_limit());
            let rate =
                d.block_device_mappings().first().and_then(|b| b.ebs()).and_then(|e| e.volume_initialization_rate());
            out.push((hop, rate));
        }
        out
    });
    assert_eq!(got, vec![(Some(1), None), (Some(2), Some(200))]);
}

/// §2: VPC endpoints: an s3 gateway on the subnets' route tables and an interface endpoint
/// with private DNS and groups; subnets change in place; destroy removes them.
#[test]
fn vpc_endpoints_apply_update_in_place_and_destroy() {
    let env = Env::new();
    let stack = |subnets: &str| {
        format!(
            r#"[stack]
name   = "vpce"
region = "us-west-2"

[vpc.main]
cidr_block = "10.11.0.0/16"

[subnet.a]
vpc               = "${{vpc.main.id}}"
cidr_block        = "10.11.0.0/20"
availability_zone = "us-west-2a"

[subnet.b]
vpc               = "${{vpc.main.id}}"
cidr_block        = "10.11.16.0/20"
availability_zone = "us-west-2b"

[security_group.endpoints]
vpc     = "${{vpc.main.id}}"
ingress = [{{ protocol = "tcp", from_port = 443, to_port = 443, cidr = "10.11.0.0/16" }}]

[vpc_endpoint.s3]
vpc     = "${{vpc.main.id}}"
service = "s3"
subnets = [{subnets}]

[vpc_endpoint.ecr_api]
vpc             = "${{vpc.main.id}}"
service         = "ecr.api"
subnets         = [{subnets}]
security_groups = ["${{security_group.endpoints.id}}"]
"#
        )
    };
    env.write("v.toml", &stack(r#""${subnet.a.id}""#));
    env.ok(&["apply", "v.toml", "--auto-approve"]);
    assert_eq!(env.run(&["plan", "v.toml", "--detailed-exitcode"]).code, 0, "in sync");
    let st = env.state("vpce");
    let id = st["resources"]["vpc_endpoint.ecr_api"]["id"].as_str().unwrap().to_string();
    let read = |id: String| {
        let ec2 = env.emu.ec2();
        block_on(async move {
            let out = ec2.describe_vpc_endpoints().vpc_endpoint_ids(id).send().await.unwrap();
            let e = &out.vpc_endpoints()[0];
            (e.subnet_ids().len(), e.private_dns_enabled(), e.service_name().unwrap().to_string())
        })
    };
    assert_eq!(read(id.clone()), (1, Some(true), "com.amazonaws.us-west-2.ecr.api".to_string()));

    env.write("v.toml", &stack(r#""${subnet.a.id}", "${subnet.b.id}""#));
    let plan = env.ok(&["plan", "v.toml"]);
    assert!(plan.stdout.contains("~ vpc_endpoint.ecr_api"), "{}", plan.stdout);
    env.ok(&["apply", "v.toml", "--auto-approve"]);
    assert_eq!(env.state("vpce")["resources"]["vpc_endpoint.ecr_api"]["id"], id.as_str(), "in place");
    assert_eq!(read(id).0, 2);
    assert_eq!(env.run(&["plan", "v.toml", "--detailed-exitcode"]).code, 0, "in sync");

    env.ok(&["destroy", "v.toml", "--auto-approve"]);
    let ec2 = env.emu.ec2();
    let left = block_on(async move {
        let tag = aws_sdk_ec2::types::Filter::builder().name("tag:gpustack:stack").values("vpce").build();
        let out = ec2.describe_vpc_endpoints().filters(tag).send().await.unwrap();
        out.vpc_endpoints()
            .iter()
            // EC2 answers endpoint states in lower case; the SDK enum is capitalised.
            .filter(|e| !e.state().is_some_and(|s| s.as_str().to_ascii_lowercase().starts_with("delet")))
            .count()
    });
    assert_eq!(left, 0);
}
