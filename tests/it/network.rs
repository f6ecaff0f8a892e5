//! Networks the stack does not own and security-group rules as objects (issue 19): a stack
//! reads a VPC, subnets and a security group made outside gpustack (`existing`, by id or by
//! tags), applies into them and destroys without touching them; `security_group_rule`
//! breaks the cluster/node group cycle and survives its groups' reconciliation.

use std::path::PathBuf;

use aws_sdk_ec2::types::{AttributeBooleanValue, Filter, ResourceType, Tag, TagSpecification};

use crate::harness::{Env, block_on};

fn example(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples").join(name).to_str().unwrap().to_string()
}

fn named(rt: ResourceType, name: &str) -> TagSpecification {
    TagSpecification::builder().resource_type(rt).tags(Tag::builder().key("Name").value(name).build()).build()
}

/// What another tool made: a VPC with DNS on, an internet gateway routed from both subnets
/// (public IPs on launch), a subnet tagged `Name = gpu-private-b` and a shared group tagged
/// `Name = gpu-shared`. Returns (vpc, subnet a, subnet b, group).
fn outside_vpc(env: &Env, b_name: &str) -> (String, String, String, String) {
    let ec2 = env.emu.ec2();
    let b_name = b_name.to_string();
    block_on(async move {
        let vpc = ec2.create_vpc().cidr_block("10.80.0.0/16").send().await.unwrap();
        let vpc = vpc.vpc().unwrap().vpc_id().unwrap().to_string();
        let on = || AttributeBooleanValue::builder().value(true).build();
        ec2.modify_vpc_attribute().vpc_id(&vpc).enable_dns_support(on()).send().await.unwrap();
        ec2.modify_vpc_attribute().vpc_id(&vpc).enable_dns_hostnames(on()).send().await.unwrap();
        let igw = ec2.create_internet_gateway().send().await.unwrap();
        let igw = igw.internet_gateway().unwrap().internet_gateway_id().unwrap().to_string();
        ec2.attach_internet_gateway().internet_gateway_id(&igw).vpc_id(&vpc).send().await.unwrap();
        let rt = ec2.create_route_table().vpc_id(&vpc).send().await.unwrap();
        let rt = rt.route_table().unwrap().route_table_id().unwrap().to_string();
        ec2.create_route()
            .route_table_id(&rt)
            .destination_cidr_block("0.0.0.0/0")
            .gateway_id(&igw)
            .send()
            .await
            .unwrap();
        let mut subnets = vec![];
        for (cidr, zone, name) in
            [("10.80.0.0/19", "us-west-2a", "gpu-a"), ("10.80.32.0/19", "us-west-2b", b_name.as_str())]
        {
            let sn = ec2
                .create_subnet()
                .vpc_id(&vpc)
                .cidr_block(cidr)
                .availability_zone(zone)
                .tag_specifications(named(ResourceType::Subnet, name))
                .send()
                .await
                .unwrap();
            let id = sn.subnet().unwrap().subnet_id().unwrap().to_string();
            ec2.modify_subnet_attribute().subnet_id(&id).map_public_ip_on_launch(on()).send().await.unwrap();
            ec2.associate_route_table().route_table_id(&rt).subnet_id(&id).send().await.unwrap();
            subnets.push(id);
        }
        let sg = ec2
            .create_security_group()
            .group_name("gpu-shared")
            .description("shared by the platform team")
            .vpc_id(&vpc)
            .tag_specifications(named(ResourceType::SecurityGroup, "gpu-shared"))
            .send()
            .await
            .unwrap();
        (vpc, subnets[0].clone(), subnets[1].clone(), sg.group_id().unwrap().to_string())
    })
}

/// Every call made since the last reset is in `gpustack policy`'s document for the stack.
fn calls_are_in_the_policy(env: &Env, args: &[&str]) {
    let mut cmd = vec!["policy"];
    cmd.extend_from_slice(args);
    let policy: serde_json::Value = serde_json::from_str(&env.ok(&cmd).stdout).unwrap();
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
    // An Authorize call tags the new rule: AWS then also authorizes ec2:CreateTags, which
    // the policy allows only for the create actions it lists (review r19-net B2).
    let tag_on_create: Vec<String> = policy["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["Action"].as_array().unwrap().iter().any(|a| a == "ec2:CreateTags"))
        .flat_map(|s| s["Condition"]["StringEquals"]["ec2:CreateAction"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| a.as_str().map(|a| format!("ec2:{a}")))
        .collect();
    let untagged: Vec<&String> =
        made.iter().filter(|a| a.starts_with("ec2:Authorize") && !tag_on_create.contains(a)).collect();
    assert!(untagged.is_empty(), "CreateTags is refused for {untagged:?}");
}

/// True when the VPC and its subnets are all still there.
fn still_there(env: &Env, vpc: &str, subnets: &[&str]) -> bool {
    let ec2 = env.emu.ec2();
    let (vpc, subnets): (String, Vec<String>) = (vpc.into(), subnets.iter().map(|s| s.to_string()).collect());
    block_on(async move {
        let v =
            ec2.describe_vpcs().filters(Filter::builder().name("vpc-id").values(&vpc).build()).send().await.unwrap();
        let s = ec2
            .describe_subnets()
            .filters(Filter::builder().name("subnet-id").set_values(Some(subnets.clone())).build())
            .send()
            .await
            .unwrap();
        v.vpcs().len() == 1 && s.subnets().len() == subnets.len()
    })
}

#[test]
fn the_existing_vpc_example_applies_into_a_vpc_it_does_not_own_and_leaves_it() {
    let env = Env::new();
    let (vpc, a, b, sg) = outside_vpc(&env, "gpu-private-b");
    let file = example("existing-vpc.toml");
    let vars = ["--var".to_string(), format!("vpc_id={vpc}"), "--var".into(), format!("subnet_a={a}")];
    let with = |cmd: &[&str]| -> Vec<String> {
        cmd.iter().map(|s| s.to_string()).chain([file.clone()]).chain(vars.iter().cloned()).collect()
    };
    let run = |cmd: &[&str]| env.run(&with(cmd).iter().map(String::as_str).collect::<Vec<_>>());

    env.emu.reset_requests();
    let plan = run(&["plan"]);
    assert_eq!(plan.code, 0, "{plan:?}");
    // Reads, with what AWS says of each: the tag lookup found subnet b in its zone.
    assert!(plan.stdout.contains(&format!("<= subnet.b                           read {b}")), "{plan:?}");
    assert!(plan.stdout.contains("availability_zone: (none) → \"us-west-2b\""), "{plan:?}");
    assert!(plan.stdout.contains(&format!("<= security_group.shared              read {sg}")), "{plan:?}");
    assert!(plan.stdout.contains("4 to read"), "{plan:?}");
    // The subnets were read for the rules: routes and endpoints checked, nothing left as a note
    // (offline, `validate` names what it could not check).
    assert!(!plan.stderr.contains("did not check"), "{plan:?}");
    assert!(env.emu.requests().iter().any(|(_, a)| a == "DescribeVpcEndpoints"), "endpoints read");
    let offline = run(&["validate"]);
    assert!(offline.stderr.contains("the egress rule did not check 2 subnets"), "{offline:?}");

    let apply = run(&["apply", "--auto-approve"]);
    assert_eq!(apply.code, 0, "{apply:?}");
    let st = env.state("shared-dev");
    assert_eq!(st["resources"]["subnet.b"]["id"], b.as_str());
    assert_eq!(st["resources"]["subnet.b"]["outputs"]["availability_zone"], "us-west-2b");
    let ng_subnets = st["resources"]["node_group.gpu"]["inputs"]["subnets"].to_string();
    assert!(ng_subnets.contains(&a) && ng_subnets.contains(&b), "{ng_subnets}");
    assert_eq!(
        env.ok(&["output", "--state", "state/shared-dev.json", "subnet_zones"]).stdout.trim(),
        "us-west-2a us-west-2b"
    );

    let again = run(&["plan", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "in sync after apply: {again:?}");
    // Offline, the recorded reads stand: still no change.
    let offline = run(&["plan", "--refresh=false", "--detailed-exitcode"]);
    assert_eq!(offline.code, 0, "{offline:?}");

    let destroy = run(&["destroy", "--auto-approve"]);
    assert_eq!(destroy.code, 0, "{destroy:?}");
    assert!(destroy.stdout.contains("Destroy complete"), "{destroy:?}");
    assert!(still_there(&env, &vpc, &[&a, &b]), "destroy must not touch what the stack does not own");
    let policy_args: Vec<String> = [file.clone()].into_iter().chain(vars.iter().cloned()).collect();
    calls_are_in_the_policy(&env, &policy_args.iter().map(String::as_str).collect::<Vec<_>>());
    let st = env.state("shared-dev");
    assert_eq!(st["resources"].as_object().map_or(0, |r| r.len()), 0, "{st}");
    assert_eq!(env.tagged("shared-dev").total(), 0);
    // Nothing the stack read was tagged or changed by it.
    let ec2 = env.emu.ec2();
    let tags = block_on(async move {
        let s = ec2
            .describe_subnets()
            .filters(Filter::builder().name("subnet-id").values(&a).build())
            .send()
            .await
            .unwrap();
        s.subnets()[0].tags().iter().map(|t| t.key().unwrap_or_default().to_string()).collect::<Vec<_>>()
    });
    assert_eq!(tags, ["Name"]);
}

#[test]
fn a_tag_lookup_that_matches_two_subnets_is_a_plan_error_naming_both() {
    let env = Env::new();
    let (vpc, a, _, _) = outside_vpc(&env, "gpu-a");
    let text = format!(
        "[stack]\nname = \"twice\"\nregion = \"us-west-2\"\n\n[subnet.x]\nexisting = {{ tags = {{ Name = \"gpu-a\" }}, vpc = \"{vpc}\" }}\n\n[subnet.y]\nexisting = \"subnet-0000000000000dead\"\n"
    );
    env.write("s.toml", &text);
    let plan = env.run(&["plan", "s.toml"]);
    assert_eq!(plan.code, 1, "{plan:?}");
    assert!(plan.stderr.contains("2 subnets have tags Name=gpu-a in"), "{plan:?}");
    assert!(plan.stderr.contains(&a), "{plan:?}");
    assert!(plan.stderr.contains("s.toml:6:"), "points at the lookup: {plan:?}");
    // Both problems in one pass.
    assert!(plan.stderr.contains("no subnet subnet-0000000000000dead"), "{plan:?}");
}

#[test]
fn existing_refuses_attributes_that_would_create_the_object() {
    let env = Env::new();
    env.write(
        "s.toml",
        "[stack]\nname = \"x\"\nregion = \"us-west-2\"\n\n[subnet.a]\nexisting = \"subnet-0abc\"\ncidr_block = \"10.0.0.0/24\"\n\n[vpc.v]\nexisting = \"subnet-0abc\"\n\n[security_group.g]\nexisting = { tag = { Name = \"x\" } }\n",
    );
    let v = env.run(&["validate", "s.toml"]);
    assert_eq!(v.code, 1, "{v:?}");
    assert!(v.stderr.contains("`subnet.a` reads an existing subnet, so `cidr_block` has nothing to set"), "{v:?}");
    assert!(v.stderr.contains("s.toml:7:1"), "{v:?}");
    assert!(v.stderr.contains("\"subnet-0abc\" is not a vpc id (they start with `vpc-`)"), "{v:?}");
    assert!(v.stderr.contains("unknown key `tag` in `security_group.g.existing`"), "{v:?}");
    assert!(v.stderr.contains("has 4 errors"), "one pass: {v:?}");
}

#[test]
fn the_security_group_pair_example_applies_and_its_rules_survive_the_groups() {
    let env = Env::new();
    let file = example("security-group-pair.toml");
    env.emu.reset_requests();
    let apply = env.run(&["apply", "--auto-approve", &file]);
    assert_eq!(apply.code, 0, "{apply:?}");
    let st = env.state("sgpair-dev");
    let node = st["resources"]["security_group.node"]["id"].as_str().unwrap().to_string();
    let cluster = st["resources"]["security_group.cluster"]["id"].as_str().unwrap().to_string();
    let rule = st["resources"]["security_group_rule.nodes_from_cluster_kubelet"]["id"].as_str().unwrap().to_string();
    assert!(rule.starts_with("sgr-"), "{rule}");
    // AWS has the rule, tagged as the stack's, admitting the cluster group on 10250.
    let (ec2, id) = (env.emu.ec2(), rule.clone());
    let found = block_on(async move {
        let r = ec2.describe_security_group_rules().security_group_rule_ids(&id).send().await.unwrap();
        r.security_group_rules()[0].clone()
    });
    assert_eq!(found.group_id(), Some(node.as_str()));
    assert_eq!(found.from_port(), Some(10250));
    assert_eq!(found.referenced_group_info().and_then(|g| g.group_id()), Some(cluster.as_str()));
    assert!(
        found.tags().iter().any(|t| t.key() == Some("gpustack:address")
            && t.value() == Some("security_group_rule.nodes_from_cluster_kubelet"))
    );
    // The groups' inline sets (egress only) do not claim the rules: nothing to revoke.
    let again = env.run(&["plan", "--detailed-exitcode", &file]);
    assert_eq!(again.code, 0, "in sync after apply: {again:?}");
    // A new description updates in place; the rule keeps its id.
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("Cluster API to node kubelets", "kubelet from the control plane");
    env.write("pair.toml", &text);
    let plan = env.run(&["plan", "pair.toml"]);
    assert!(plan.stdout.contains("~ security_group_rule.nodes_from_cluster_kubelet update in place"), "{plan:?}");
    env.ok(&["apply", "--auto-approve", "pair.toml"]);
    assert_eq!(env.run(&["plan", "--detailed-exitcode", "pair.toml"]).code, 0);
    // A new port also changes in place (ModifySecurityGroupRules): no revoke, so no window
    // without control-plane access to the kubelets (review r19-net M4).
    let text = text.replace("from_port             = 10250", "from_port             = 10255");
    env.write("pair.toml", &text);
    let plan = env.run(&["plan", "pair.toml"]);
    assert!(plan.stdout.contains("~ security_group_rule.nodes_from_cluster_kubelet update in place"), "{plan:?}");
    env.emu.reset_requests();
    env.ok(&["apply", "--auto-approve", "pair.toml"]);
    let made: Vec<String> = env.emu.requests().into_iter().map(|(_, a)| a).collect();
    assert!(made.iter().any(|a| a == "ModifySecurityGroupRules"), "{made:?}");
    assert!(!made.iter().any(|a| a.starts_with("RevokeSecurityGroup")), "{made:?}");
    let st = env.state("sgpair-dev");
    assert_eq!(st["resources"]["security_group_rule.nodes_from_cluster_kubelet"]["id"], rule.as_str());
    let (ec2, id) = (env.emu.ec2(), rule.clone());
    let port = block_on(async move {
        let r = ec2.describe_security_group_rules().security_group_rule_ids(&id).send().await.unwrap();
        r.security_group_rules()[0].from_port()
    });
    assert_eq!(port, Some(10255));
    assert_eq!(env.run(&["plan", "--detailed-exitcode", "pair.toml"]).code, 0);
    // A source of another type (group → CIDR) cannot be modified: a replacement, created first.
    let text = text.replace(
        "source_security_group = \"${security_group.cluster.id}\"\ndescription           = \"kubelet",
        "cidr = \"10.0.0.0/16\"\ndescription           = \"kubelet",
    );
    env.write("pair.toml", &text);
    let plan = env.run(&["plan", "pair.toml"]);
    assert!(plan.stdout.contains("create before destroy"), "{plan:?}");
    env.ok(&["apply", "--auto-approve", "pair.toml"]);
    assert_eq!(env.run(&["plan", "--detailed-exitcode", "pair.toml"]).code, 0);
    env.ok(&["destroy", "--auto-approve", "pair.toml"]);
    assert_eq!(env.tagged("sgpair-dev").total(), 0);
    calls_are_in_the_policy(&env, &["pair.toml"]);
}

#[test]
fn secondary_cidr_blocks_are_added_and_removed_in_place_and_hold_subnets() {
    let env = Env::new();
    let base = "[stack]\nname = \"sec\"\nregion = \"us-west-2\"\n\n[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n";
    let pods = "\n[subnet.pods_a]\nvpc = \"${vpc.main.id}\"\ncidr_block = \"100.64.0.0/19\"\navailability_zone = \"us-west-2a\"\n";
    env.write("a.toml", &format!("{base}secondary_cidr_blocks = [\"100.64.0.0/16\"]\n{pods}"));
    env.ok(&["apply", "--auto-approve", "a.toml"]);
    let vpc = env.state("sec")["resources"]["vpc.main"]["id"].as_str().unwrap().to_string();
    let blocks = |env: &Env| {
        let (ec2, vpc) = (env.emu.ec2(), vpc.clone());
        block_on(async move {
            let v = ec2.describe_vpcs().vpc_ids(&vpc).send().await.unwrap();
            let mut b: Vec<String> = v.vpcs()[0]
                .cidr_block_association_set()
                .iter()
                .filter(|a| a.cidr_block_state().and_then(|s| s.state()).map(|s| s.as_str()) == Some("associated"))
                .filter_map(|a| a.cidr_block().map(String::from))
                .collect();
            b.sort();
            b
        })
    };
    assert_eq!(blocks(&env), ["10.0.0.0/16", "100.64.0.0/16"]);
    assert_eq!(env.run(&["plan", "--detailed-exitcode", "a.toml"]).code, 0);
    // Another block: an update in place, the VPC keeps its id.
    env.write("b.toml", &format!("{base}secondary_cidr_blocks = [\"100.64.0.0/16\", \"10.1.0.0/16\"]\n{pods}"));
    let plan = env.ok(&["plan", "b.toml"]);
    assert!(plan.stdout.contains("~ vpc.main                           update in place"), "{plan:?}");
    env.ok(&["apply", "--auto-approve", "b.toml"]);
    assert_eq!(blocks(&env), ["10.0.0.0/16", "10.1.0.0/16", "100.64.0.0/16"]);
    assert_eq!(env.state("sec")["resources"]["vpc.main"]["id"], vpc.as_str());
    env.ok(&["apply", "--auto-approve", "a.toml"]);
    assert_eq!(blocks(&env), ["10.0.0.0/16", "100.64.0.0/16"]);
    // A block the primary's range excludes is refused offline, where it is written.
    env.write("c.toml", &format!("{base}secondary_cidr_blocks = [\"192.168.0.0/16\"]\n"));
    let v = env.run(&["validate", "c.toml"]);
    assert_eq!(v.code, 1, "{v:?}");
    assert!(v.stderr.contains("secondary block 192.168.0.0/16 is in 192.168.0.0/16, which AWS refuses"), "{v:?}");
    // The block and its subnet leave in one apply: the subnet is deleted before the block is
    // disassociated (the emulator refuses a block that holds a subnet, as AWS does).
    env.write("d.toml", base);
    env.ok(&["apply", "--auto-approve", "d.toml"]);
    assert_eq!(blocks(&env), ["10.0.0.0/16"]);
    env.ok(&["destroy", "--auto-approve", "a.toml"]);
    assert_eq!(env.tagged("sec").total(), 0);
}

#[test]
fn an_existing_capacity_reservation_is_read_for_its_zone_and_never_cancelled() {
    let env = Env::new();
    let ec2 = env.emu.ec2();
    let cr = block_on(async move {
        let out = ec2
            .create_capacity_reservation()
            .instance_type("g6.xlarge")
            .instance_platform(aws_sdk_ec2::types::CapacityReservationInstancePlatform::LinuxUnix)
            .availability_zone("us-west-2b")
            .instance_count(1)
            .instance_match_criteria(aws_sdk_ec2::types::InstanceMatchCriteria::Targeted)
            .end_date_type(aws_sdk_ec2::types::EndDateType::Unlimited)
            .send()
            .await
            .unwrap();
        out.capacity_reservation().unwrap().capacity_reservation_id().unwrap().to_string()
    });
    env.write(
        "s.toml",
        &format!(
            "[stack]\nname = \"odcr\"\nregion = \"us-west-2\"\n\n[capacity_reservation.team]\nexisting = \"{cr}\"\n\n[launch_template.gpu]\ninstance_type = \"g6.xlarge\"\ncapacity_reservation = \"${{capacity_reservation.team.id}}\"\nmarket = \"on-demand\"\ndata_volume = {{ size_gib = 200 }}\n\n[output]\nzone = \"${{capacity_reservation.team.availability_zone}}\"\n"
        ),
    );
    let plan = env.ok(&["plan", "s.toml"]);
    assert!(plan.stdout.contains("<= capacity_reservation.team"), "{plan:?}");
    assert!(plan.stdout.contains(&format!("read {cr} (existing, not managed")), "{plan:?}");
    assert!(plan.stdout.contains("availability_zone: (none) → \"us-west-2b\""), "{plan:?}");
    env.ok(&["apply", "--auto-approve", "s.toml"]);
    assert_eq!(env.ok(&["output", "--state", "state/odcr.json", "zone"]).stdout.trim(), "us-west-2b");
    let destroy = env.ok(&["destroy", "--auto-approve", "s.toml"]);
    assert!(!destroy.stdout.contains("CancelCapacityReservation"), "{destroy:?}");
    assert!(
        !env.emu.requests().iter().any(|(_, action)| action == "CancelCapacityReservation"),
        "a reservation the stack does not own is never cancelled"
    );
    // Cancelled (by its owner), it holds no capacity: reading it by id is a plan error.
    let (ec2, id) = (env.emu.ec2(), cr.clone());
    block_on(async move { ec2.cancel_capacity_reservation().capacity_reservation_id(&id).send().await.unwrap() });
    let plan = env.run(&["plan", "s.toml"]);
    assert_eq!(plan.code, 1, "{plan:?}");
    assert!(plan.stderr.contains(&format!("capacity reservation {cr} is cancelled")), "{plan:?}");
}

#[test]
fn dropping_existing_from_a_read_object_is_refused_and_deletes_nothing() {
    let env = Env::new();
    let (vpc, a, _b, sg) = outside_vpc(&env, "gpu-private-b");
    let head = "[stack]\nname = \"takeover\"\nregion = \"us-west-2\"\n";
    env.write(
        "read.toml",
        &format!(
            "{head}\n[vpc.shared]\nexisting = \"{vpc}\"\n\n[subnet.a]\nexisting = \"{a}\"\n\n[security_group.shared]\nexisting = \"{sg}\"\n"
        ),
    );
    env.ok(&["apply", "--auto-approve", "read.toml"]);
    // The same addresses, now written as objects the stack would create.
    env.write(
        "own.toml",
        &format!(
            "{head}\n[vpc.shared]\ncidr_block = \"10.81.0.0/16\"\n\n[subnet.a]\nvpc = \"${{vpc.shared.id}}\"\ncidr_block = \"10.81.0.0/19\"\navailability_zone = \"us-west-2a\"\n\n[security_group.shared]\nvpc = \"${{vpc.shared.id}}\"\ndescription = \"own\"\n"
        ),
    );
    env.emu.reset_requests();
    let plan = env.run(&["plan", "own.toml"]);
    assert_eq!(plan.code, 1, "{plan:?}");
    for (address, id) in [("vpc.shared", &vpc), ("subnet.a", &a), ("security_group.shared", &sg)] {
        assert!(
            plan.stderr
                .contains(&format!("`{address}` is recorded as a read of {id}, an object this stack does not own")),
            "{plan:?}"
        );
    }
    assert!(plan.stderr.contains("first remove `[vpc.shared]` from the stack and apply"), "{plan:?}");
    let apply = env.run(&["apply", "--auto-approve", "own.toml"]);
    assert_eq!(apply.code, 1, "{apply:?}");
    let destructive: Vec<_> = env
        .emu
        .requests()
        .into_iter()
        .filter(|(_, action)| {
            action.starts_with("Delete") || action.starts_with("Cancel") || action.starts_with("Create")
        })
        .collect();
    assert!(destructive.is_empty(), "no object is touched: {destructive:?}");
    assert!(still_there(&env, &vpc, &[&a]));
    // The way out the help names: forget (nothing deleted), then the stack creates its own.
    env.write("none.toml", &format!("{head}\n[output]\nx = \"y\"\n"));
    env.ok(&["apply", "--auto-approve", "none.toml"]);
    assert!(still_there(&env, &vpc, &[&a]));
    assert!(env.state("takeover")["resources"].get("vpc.shared").is_none());
}

/// A VPC another tool made, with two private subnets (us-west-2a, us-west-2b) on the VPC's
/// main route table (local route only), and a public subnet with an internet gateway route.
/// Returns (vpc, private a, private b, public subnet, main route table).
fn private_vpc(env: &Env) -> (String, String, String, String, String) {
    let ec2 = env.emu.ec2();
    block_on(async move {
        let vpc = ec2.create_vpc().cidr_block("10.90.0.0/16").send().await.unwrap();
        let vpc = vpc.vpc().unwrap().vpc_id().unwrap().to_string();
        let mut ids = vec![];
        for (cidr, zone) in
            [("10.90.0.0/20", "us-west-2a"), ("10.90.16.0/20", "us-west-2b"), ("10.90.32.0/24", "us-west-2a")]
        {
            let sn = ec2.create_subnet().vpc_id(&vpc).cidr_block(cidr).availability_zone(zone).send().await.unwrap();
            ids.push(sn.subnet().unwrap().subnet_id().unwrap().to_string());
        }
        let igw = ec2.create_internet_gateway().send().await.unwrap();
        let igw = igw.internet_gateway().unwrap().internet_gateway_id().unwrap().to_string();
        ec2.attach_internet_gateway().internet_gateway_id(&igw).vpc_id(&vpc).send().await.unwrap();
        let rt = ec2.create_route_table().vpc_id(&vpc).send().await.unwrap();
        let rt = rt.route_table().unwrap().route_table_id().unwrap().to_string();
        ec2.create_route()
            .route_table_id(&rt)
            .destination_cidr_block("0.0.0.0/0")
            .gateway_id(&igw)
            .send()
            .await
            .unwrap();
        ec2.associate_route_table().route_table_id(&rt).subnet_id(&ids[2]).send().await.unwrap();
        let main = ec2
            .describe_route_tables()
            .filters(Filter::builder().name("vpc-id").values(&vpc).build())
            .filters(Filter::builder().name("association.main").values("true").build())
            .send()
            .await
            .unwrap();
        let main = main.route_tables()[0].route_table_id().unwrap().to_string();
        (vpc, ids[0].clone(), ids[1].clone(), ids[2].clone(), main)
    })
}

/// A cluster and a GPU node group on literal subnet ids, optionally on a literal reservation.
fn literal_stack(a: &str, b: &str, reservation: Option<&str>) -> String {
    let cr =
        reservation.map_or(String::new(), |cr| format!("capacity_reservation = \"{cr}\"\nmarket = \"on-demand\"\n"));
    format!(
        r#"[stack]
name = "lit"
region = "us-west-2"

[iam_role.cluster]
service = "eks.amazonaws.com"
managed_policies = ["arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"]

[iam_role.node]
service = "ec2.amazonaws.com"
managed_policies = ["arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy", "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly", "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy"]

[eks_cluster.main]
version = "1.33"
role = "${{iam_role.cluster.arn}}"
subnets = ["{a}", "{b}"]

[launch_template.gpu]
instance_type = "g6.xlarge"
data_volume = {{ size_gib = 200 }}
{cr}
[node_group.gpu]
cluster = "${{eks_cluster.main.name}}"
node_role = "${{iam_role.node.arn}}"
subnets = ["{a}"]
launch_template = "${{launch_template.gpu.id}}"
ami_type = "BOTTLEROCKET_x86_64_NVIDIA"
scaling = {{ min = 0, desired = 1, max = 1 }}
"#
    )
}

#[test]
fn an_outside_private_subnet_without_nat_or_endpoints_fails_the_egress_rule_and_a_nat_route_passes() {
    let env = Env::new();
    let (_vpc, a, b, public, main) = private_vpc(&env);
    env.write("s.toml", &literal_stack(&a, &b, None));
    // Offline: one note, nothing checked.
    let v = env.run(&["validate", "s.toml"]);
    assert_eq!(v.code, 0, "{v:?}");
    assert!(v.stderr.contains("the egress rule did not check") && v.stderr.contains(&a), "{v:?}");
    // At plan time the subnet is read: private, no NAT, no endpoints.
    let plan = env.run(&["plan", "s.toml"]);
    assert_eq!(plan.code, 1, "{plan:?}");
    assert!(
        plan.stderr.contains(&format!("`node_group.gpu` runs in {a} (us-west-2a, 10.90.0.0/20"))
            && plan.stderr.contains("no 0.0.0.0/0 route to a NAT or internet gateway) and no VPC endpoints"),
        "{plan:?}"
    );
    assert!(env.emu.requests().iter().any(|(_, a)| a == "DescribeRouteTables"), "routes read");
    // A NAT gateway route on the main table is a way out.
    let ec2 = env.emu.ec2();
    block_on(async move {
        let eip = ec2.allocate_address().domain(aws_sdk_ec2::types::DomainType::Vpc).send().await.unwrap();
        let nat = ec2
            .create_nat_gateway()
            .subnet_id(&public)
            .allocation_id(eip.allocation_id().unwrap())
            .send()
            .await
            .unwrap();
        let nat = nat.nat_gateway().unwrap().nat_gateway_id().unwrap().to_string();
        ec2.create_route()
            .route_table_id(&main)
            .destination_cidr_block("0.0.0.0/0")
            .nat_gateway_id(&nat)
            .send()
            .await
            .unwrap();
    });
    let plan = env.run(&["plan", "s.toml"]);
    assert_eq!(plan.code, 0, "{plan:?}");
    assert!(!plan.stderr.contains("could never join"), "{plan:?}");
}

#[test]
fn a_node_group_on_a_literal_subnet_in_another_zone_than_its_reservation_fails_at_plan_time() {
    let env = Env::new();
    let (_vpc, a, b, _public, _main) = private_vpc(&env);
    let ec2 = env.emu.ec2();
    let cr = block_on(async move {
        let out = ec2
            .create_capacity_reservation()
            .instance_type("g6.xlarge")
            .instance_platform(aws_sdk_ec2::types::CapacityReservationInstancePlatform::LinuxUnix)
            .availability_zone("us-west-2b")
            .instance_count(1)
            .instance_match_criteria(aws_sdk_ec2::types::InstanceMatchCriteria::Targeted)
            .end_date_type(aws_sdk_ec2::types::EndDateType::Unlimited)
            .send()
            .await
            .unwrap();
        out.capacity_reservation().unwrap().capacity_reservation_id().unwrap().to_string()
    });
    env.write("s.toml", &literal_stack(&a, &b, Some(&cr)));
    let v = env.run(&["validate", "s.toml"]);
    assert!(v.stderr.contains("the reservation-zone check did not check"), "{v:?}");
    let plan = env.run(&["plan", "s.toml"]);
    assert_eq!(plan.code, 1, "{plan:?}");
    assert!(
        plan.stderr.contains(&format!(
            "`node_group.gpu` reserves capacity in us-west-2b through `launch_template.gpu` ({cr}), but its subnet {a} (us-west-2a) is in another zone"
        )),
        "{plan:?}"
    );
    // An id EC2 does not know is named once, not a failure of the read.
    env.write("s.toml", &literal_stack(&a, &b, Some("cr-0000000000000dead")));
    let plan = env.run(&["plan", "s.toml"]);
    assert!(plan.stderr.contains("EC2 shows no cr-0000000000000dead in this region and account"), "{plan:?}");
}
