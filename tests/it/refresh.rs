//! Refresh: batched by tag (calls grow with kinds, not resources), drift shown
//! and repaired, objects deleted outside recreated, and a lost state file
//! repaired by adopting what the tags find.

use crate::harness::{Env, block_on, network_stack};

fn many_groups(name: &str, n: usize) -> String {
    let mut s =
        format!("[stack]\nname = \"{name}\"\nregion = \"us-west-2\"\n\n[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n");
    for i in 0..n {
        s.push_str(&format!("\n[security_group.g{i}]\nvpc = \"${{vpc.main.id}}\"\ningress = [{{ protocol = \"tcp\", from_port = {}, cidr = \"10.0.0.0/8\" }}]\n", 1000 + i));
    }
    s
}

fn refresh_calls(env: &Env) -> Vec<(String, String)> {
    env.emu.reset_requests();
    env.ok(&["plan", "s.toml"]);
    env.emu.requests()
}

#[test]
fn refresh_calls_grow_with_kinds_not_resources() {
    let env = Env::new();
    env.write("s.toml", &many_groups("few", 2));
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let few = refresh_calls(&env);
    env.write("s.toml", &many_groups("few", 20));
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let many = refresh_calls(&env);
    assert_eq!(few.len(), many.len(), "2 groups: {few:?}\n20 groups: {many:?}");
    assert_eq!(many.iter().filter(|(_, a)| a == "DescribeSecurityGroups").count(), 1, "{many:?}");
    // Two kinds: VPCs (with their gateways, public route tables and, per VPC, its two DNS
    // attributes, which DescribeVpcs does not carry) and security groups (with one
    // DescribeSecurityGroupRules for all of them: the rules `security_group_rule`s own).
    assert_eq!(many.len(), 7, "{many:?}");
    // No refresh at all: no AWS call.
    env.emu.reset_requests();
    env.ok(&["plan", "s.toml", "--refresh=false"]);
    assert_eq!(env.emu.requests(), vec![]);
}

#[test]
fn drift_is_shown_and_repaired() {
    let env = Env::new();
    env.write("s.toml", &network_stack("drift", ""));
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let st = env.state("drift");
    let sg = st["resources"]["security_group.efa"]["id"].as_str().unwrap().to_string();
    let pg = st["resources"]["placement_group.train"]["inputs"]["name"].as_str().unwrap().to_string();
    let ec2 = env.emu.ec2();
    let sg2 = sg.clone();
    block_on(async move {
        // Someone opens SSH to the world and deletes the placement group by hand.
        ec2.authorize_security_group_ingress()
            .group_id(&sg2)
            .ip_permissions(
                aws_sdk_ec2::types::IpPermission::builder()
                    .ip_protocol("tcp")
                    .from_port(22)
                    .to_port(22)
                    .ip_ranges(aws_sdk_ec2::types::IpRange::builder().cidr_ip("0.0.0.0/0").build())
                    .build(),
            )
            .send()
            .await
            .unwrap();
        ec2.delete_placement_group().group_name(pg).send().await.unwrap();
    });
    let plan = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(plan.code, 2, "{plan:?}");
    assert!(plan.stdout.contains("   ~ security_group.efa"), "{plan:?}");
    assert!(plan.stdout.contains("from_port = 22"), "{plan:?}");
    assert!(plan.stdout.contains("   + placement_group.train"), "{plan:?}");
    assert!(plan.stdout.contains("was deleted outside gpustack"), "{plan:?}");
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(env.run(&["plan", "s.toml", "--detailed-exitcode"]).code, 0);
    let ec2 = env.emu.ec2();
    block_on(async move {
        let g = ec2.describe_security_groups().group_ids(&sg).send().await.unwrap();
        assert!(!g.security_groups()[0].ip_permissions().iter().any(|p| p.from_port() == Some(22)), "SSH rule revoked");
    });
}

#[test]
fn a_lost_state_file_is_repaired_by_adoption() {
    let env = Env::new();
    env.write("s.toml", &network_stack("lost", ""));
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let before = env.tagged("lost");
    std::fs::remove_file(env.path("state/lost.json")).unwrap();

    let plan = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(plan.code, 2, "{plan:?}");
    assert!(plan.stdout.contains("adopting vpc-"), "{plan:?}");
    assert!(!plan.stdout.contains("   + "), "nothing is created again: {plan:?}");
    let apply = env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert!(!apply.stderr.contains("creating"), "{apply:?}");
    assert_eq!(env.tagged("lost"), before, "no duplicates");
    assert_eq!(env.state("lost")["resources"].as_object().unwrap().len(), 6);
    assert_eq!(env.run(&["plan", "s.toml", "--detailed-exitcode"]).code, 0);
    // And destroy still finds everything.
    env.ok(&["destroy", "s.toml", "--auto-approve"]);
    assert_eq!(env.tagged("lost").total(), 0);
}
