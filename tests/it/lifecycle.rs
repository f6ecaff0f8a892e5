//! plan → apply → plan (no changes) → update → replace → destroy, through the
//! real binary, read back from the emulator with the Rust SDK.

use std::os::unix::fs::PermissionsExt;

use aws_sdk_ec2::types::Filter;

use crate::harness::{Env, block_on, network_stack};

#[test]
fn apply_creates_everything_and_a_second_plan_shows_no_changes() {
    let env = Env::new();
    env.write("s.toml", &network_stack("life", ""));

    let plan = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(plan.code, 2, "{plan:?}");
    assert!(plan.stdout.contains("Plan: 6 to add, 0 to change, 0 to replace, 0 to delete."), "{plan:?}");
    assert!(plan.stdout.contains("   + security_group.efa"), "{plan:?}");

    let apply = env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert!(apply.stdout.contains("Apply complete: 6 operation(s)"), "{apply:?}");
    assert!(apply.stdout.contains("vpc_id = \"vpc-"), "{apply:?}");

    let again = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(again.stdout.contains("No changes. 6 resources in sync."), "{again:?}");

    // State: 0600, serial grew, no credentials in it.
    let meta = std::fs::metadata(env.path("state/life.json")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let text = std::fs::read_to_string(env.path("state/life.json")).unwrap();
    assert!(!text.contains("AWS_SECRET") && !text.contains("\"test\""), "credentials leaked into state");
    let st = env.state("life");
    assert_eq!(st["format"], 1);
    assert!(st["serial"].as_u64().unwrap() > 0);
    assert_eq!(st["resources"].as_object().unwrap().len(), 6);
    assert!(st.get("pending").is_none(), "no pending operations after a clean apply: {st}");

    // What the emulator holds.
    let t = env.tagged("life");
    assert_eq!(
        (t.vpcs.len(), t.subnets.len(), t.security_groups.len(), t.gateways.len(), t.route_tables.len()),
        (1, 2, 1, 1, 1)
    );
    assert_eq!(t.placement_groups, vec!["life-train"]);
    assert_eq!(t.roles, vec!["life-node"]);
    assert_eq!(t.instance_profiles, vec!["life-node"]);
    let sg_id = st["resources"]["security_group.efa"]["id"].as_str().unwrap().to_string();
    let subnet_a = st["resources"]["subnet.a"]["id"].as_str().unwrap().to_string();
    let ec2 = env.emu.ec2();
    let iam = env.emu.iam();
    block_on(async move {
        let g = ec2.describe_security_groups().group_ids(&sg_id).send().await.unwrap();
        let g = &g.security_groups()[0];
        let tags: Vec<(String, String)> =
            g.tags().iter().map(|t| (t.key().unwrap().into(), t.value().unwrap().into())).collect();
        assert!(tags.contains(&("gpustack:stack".into(), "life".into())), "{tags:?}");
        assert!(tags.contains(&("gpustack:address".into(), "security_group.efa".into())), "{tags:?}");
        assert!(tags.contains(&("team".into(), "ml".into())), "{tags:?}");
        // EFA: all traffic in from and out to itself; the declared HTTPS rule; AWS's default egress revoked.
        let self_in = g.ip_permissions().iter().any(|p| {
            p.ip_protocol() == Some("-1")
                && p.user_id_group_pairs().iter().any(|u| u.group_id() == Some(sg_id.as_str()))
        });
        let self_out = g.ip_permissions_egress().iter().any(|p| {
            p.ip_protocol() == Some("-1")
                && p.user_id_group_pairs().iter().any(|u| u.group_id() == Some(sg_id.as_str()))
        });
        assert!(self_in && self_out, "EFA self rules missing: {g:?}");
        assert!(
            g.ip_permissions()
                .iter()
                .any(|p| p.ip_protocol() == Some("tcp") && p.from_port() == Some(443) && p.to_port() == Some(443))
        );
        assert!(
            !g.ip_permissions_egress().iter().any(|p| p.ip_ranges().iter().any(|r| r.cidr_ip() == Some("0.0.0.0/0"))),
            "default egress not revoked"
        );
        let s = ec2.describe_subnets().subnet_ids(&subnet_a).send().await.unwrap();
        assert_eq!(s.subnets()[0].map_public_ip_on_launch(), Some(true));
        let rts = ec2
            .describe_route_tables()
            .filters(Filter::builder().name("association.subnet-id").values(&subnet_a).build())
            .send()
            .await
            .unwrap();
        assert_eq!(rts.route_tables().len(), 1, "public subnet is associated with the public route table");
        let pols = iam.list_attached_role_policies().role_name("life-node").send().await.unwrap();
        assert_eq!(pols.attached_policies().len(), 1);
    });

    // Outputs.
    let out = env.ok(&["output", "vpc_id", "--stack", "s.toml"]);
    assert!(out.stdout.trim().starts_with("vpc-"), "{out:?}");
    let list = env.ok(&["state", "list", "--state", "state/life.json"]);
    assert!(list.stdout.contains("security_group.efa"), "{list:?}");
}

#[test]
fn rule_and_tag_changes_update_in_place() {
    let env = Env::new();
    env.write("s.toml", &network_stack("upd", ""));
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let sg_before = env.state("upd")["resources"]["security_group.efa"]["id"].clone();

    let changed = network_stack("upd", "")
        .replace("from_port = 443", "from_port = 8443")
        .replace("tags   = { team = \"ml\" }", "tags   = { team = \"ml\", cost = \"gpu\" }");
    env.write("s.toml", &changed);
    let plan = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(plan.code, 2, "{plan:?}");
    assert!(plan.stdout.contains("   ~ security_group.efa                 update in place"), "{plan:?}");
    assert!(plan.stdout.contains("to_port = 443 }] → [{ cidr = \"10.42.0.0/16\", from_port = 8443"), "{plan:?}");
    assert!(plan.stdout.contains("tags.cost: (none) → \"gpu\""), "{plan:?}");
    assert!(plan.stdout.contains("Plan: 0 to add, 6 to change, 0 to replace, 0 to delete."), "{plan:?}");

    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let st = env.state("upd");
    assert_eq!(st["resources"]["security_group.efa"]["id"], sg_before, "updated in place, not replaced");
    let sg = sg_before.as_str().unwrap().to_string();
    let ec2 = env.emu.ec2();
    block_on(async move {
        let g = ec2.describe_security_groups().group_ids(&sg).send().await.unwrap();
        let g = &g.security_groups()[0];
        let ports: Vec<_> =
            g.ip_permissions().iter().filter(|p| p.ip_protocol() == Some("tcp")).map(|p| p.from_port()).collect();
        assert_eq!(ports, vec![Some(8443)]);
        assert!(g.tags().iter().any(|t| t.key() == Some("cost") && t.value() == Some("gpu")));
    });
    let again = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "{again:?}");
}

#[test]
fn subnet_cidr_change_replaces_the_subnet() {
    let env = Env::new();
    env.write("s.toml", &network_stack("rep", ""));
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let old = env.state("rep")["resources"]["subnet.b"]["id"].as_str().unwrap().to_string();

    env.write("s.toml", &network_stack("rep", "").replace("10.42.16.0/20", "10.42.32.0/20"));
    let plan = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(plan.code, 2, "{plan:?}");
    assert!(
        plan.stdout.contains(" -/+ subnet.b                           replace, delete before create (cidr_block \"10.42.16.0/20\" → \"10.42.32.0/20\")"),
        "{plan:?}"
    );
    assert!(plan.stdout.contains("Plan: 0 to add, 0 to change, 1 to replace, 0 to delete."), "{plan:?}");

    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let new = env.state("rep")["resources"]["subnet.b"]["id"].as_str().unwrap().to_string();
    assert_ne!(old, new);
    let t = env.tagged("rep");
    assert_eq!(t.subnets.len(), 2, "old subnet deleted: {t:?}");
    assert!(!t.subnets.contains(&old));
    assert_eq!(env.run(&["plan", "s.toml", "--detailed-exitcode"]).code, 0);
}

#[test]
fn destroy_leaves_nothing_tagged() {
    let env = Env::new();
    env.write("s.toml", &network_stack("gone", ""));
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert!(env.tagged("gone").total() >= 9);
    let d = env.ok(&["destroy", "s.toml", "--auto-approve"]);
    assert!(d.stdout.contains("Destroy complete: 6 operation(s)"), "{d:?}");
    assert_eq!(env.tagged("gone"), Default::default());
    assert_eq!(env.state("gone")["resources"], serde_json::json!({}));
    // Destroying again has nothing to do.
    let again = env.ok(&["destroy", "s.toml", "--auto-approve"]);
    assert!(again.stdout.contains("No changes."), "{again:?}");
}

#[test]
fn prevent_destroy_refuses_destroy_and_replace() {
    let env = Env::new();
    let text = network_stack("keep", "")
        .replace("[placement_group.train]\n", "[placement_group.train]\nprevent_destroy = true\n");
    env.write("s.toml", &text);
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let d = env.run(&["destroy", "s.toml", "--auto-approve"]);
    assert_eq!(d.code, 1, "{d:?}");
    assert!(
        d.stderr.contains("`placement_group.train` has prevent_destroy = true, but this plan would delete it"),
        "{d:?}"
    );
    assert_eq!(env.tagged("keep").placement_groups.len(), 1, "nothing deleted");
    env.write("s.toml", &text.replace("strategy = \"cluster\"", "strategy = \"spread\""));
    let p = env.run(&["plan", "s.toml"]);
    assert_eq!(p.code, 1, "{p:?}");
    assert!(p.stderr.contains("would replace it"), "{p:?}");

    // Lifting the protection is recorded in state by itself; then destroy proceeds.
    env.write("s.toml", &network_stack("keep", ""));
    let lift = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(lift.code, 2, "{lift:?}");
    assert!(lift.stdout.contains("prevent_destroy: true → false (state only)"), "{lift:?}");
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(env.state("keep")["resources"]["placement_group.train"].get("prevent_destroy"), None);
    env.ok(&["destroy", "s.toml", "--auto-approve"]);
    assert_eq!(env.tagged("keep").total(), 0);
}

#[test]
fn saved_plan_applies_exactly_and_a_stale_one_is_refused() {
    let env = Env::new();
    env.write("s.toml", &network_stack("saved", ""));
    let p = env.ok(&["plan", "s.toml", "--out", "p1.json"]);
    assert!(p.stdout.contains("Saved the plan to p1.json"), "{p:?}");
    // Editing the stack file afterwards does not change what the saved plan does.
    env.write("s.toml", &network_stack("saved", "").replace("strategy = \"cluster\"", "strategy = \"spread\""));
    let a = env.ok(&["apply", "p1.json"]);
    assert!(a.stdout.contains("Apply complete: 6 operation(s)"), "{a:?}");
    let st = env.state("saved");
    assert_eq!(st["resources"]["placement_group.train"]["inputs"]["strategy"], "cluster");

    // A plan made against serial N is refused once the state moved on.
    env.ok(&["plan", "s.toml", "--out", "p2.json"]);
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let stale = env.run(&["apply", "p2.json"]);
    assert_eq!(stale.code, 1, "{stale:?}");
    assert!(stale.stderr.contains("the saved plan p2.json is stale"), "{stale:?}");
}

#[test]
fn detailed_exitcode_values() {
    let env = Env::new();
    env.write("s.toml", &network_stack("codes", ""));
    assert_eq!(env.run(&["plan", "s.toml", "--detailed-exitcode"]).code, 2);
    assert_eq!(env.run(&["plan", "s.toml"]).code, 0, "without the flag changes exit 0");
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(env.run(&["plan", "s.toml", "--detailed-exitcode"]).code, 0);
    env.write("bad.toml", "[stack]\nname = 1\n");
    assert_eq!(env.run(&["plan", "bad.toml", "--detailed-exitcode"]).code, 1);
}

#[test]
fn target_plans_only_the_target_and_its_dependencies() {
    let env = Env::new();
    env.write("s.toml", &network_stack("tgt", ""));
    let p = env.ok(&["plan", "s.toml", "--target", "security_group.efa"]);
    assert!(p.stdout.contains("Plan: 2 to add, 0 to change, 0 to replace, 0 to delete."), "{p:?}");
    assert!(p.stdout.contains("+ vpc.main") && p.stdout.contains("+ security_group.efa"), "{p:?}");
    env.ok(&["apply", "s.toml", "--auto-approve", "--target", "security_group.efa"]);
    let t = env.tagged("tgt");
    assert_eq!((t.vpcs.len(), t.security_groups.len(), t.subnets.len(), t.roles.len()), (1, 1, 0, 0), "{t:?}");
    let bad = env.run(&["plan", "s.toml", "--target", "security_group.ef"]);
    assert_eq!(bad.code, 1);
    assert!(bad.stderr.contains("did you mean security_group.efa?"), "{bad:?}");
}

#[test]
fn apply_without_a_terminal_needs_auto_approve() {
    let env = Env::new();
    env.write("s.toml", &network_stack("ask", ""));
    let r = env.run(&["apply", "s.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("apply needs approval and there is no terminal to ask on"), "{r:?}");
    assert_eq!(env.tagged("ask").total(), 0, "nothing was created");
}

#[test]
fn global_flags_go_before_or_after_the_command() {
    let env = Env::new();
    env.write("s.toml", &network_stack("flags", ""));
    env.ok(&["--state", "custom.json", "apply", "s.toml", "--auto-approve"]);
    assert!(env.path("custom.json").exists());
    let a = env.run(&["plan", "s.toml", "--state", "custom.json", "--detailed-exitcode"]);
    assert_eq!(a.code, 0, "{a:?}");
}

#[test]
fn a_failure_skips_dependents_and_independent_work_finishes() {
    let env = Env::new();
    // AWS refuses the VPC: the subnets and the security group depend on it. The block comes
    // from another resource's output (the placement group's name, not a CIDR), because
    // validate refuses a literal one that AWS would (a /8, for one) before anything starts.
    let bad = network_stack("fail", "")
        .replace("cidr_block       = \"10.42.0.0/16\"", "cidr_block       = \"${placement_group.train.name}\"");
    env.write("s.toml", &bad);
    let r = env.run(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.contains("Apply incomplete: 2 done, 1 failed, 3 skipped"), "{r:?}");
    assert!(r.stdout.contains("failed   vpc.main: CreateVpc failed: InvalidParameterValue"), "{r:?}");
    assert!(r.stdout.contains("skipped  security_group.efa (a resource it depends on failed)"), "{r:?}");
    let t = env.tagged("fail");
    assert_eq!((t.placement_groups.len(), t.roles.len(), t.vpcs.len()), (1, 1, 0), "independent work finished: {t:?}");

    env.write("s.toml", &network_stack("fail", ""));
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(env.run(&["plan", "s.toml", "--detailed-exitcode"]).code, 0);
    let plan = env.ok(&["plan", "s.toml", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&plan.stdout).unwrap();
    assert_eq!(v["summary"]["unchanged"], 6, "{v}");
}

#[test]
fn json_mode_emits_one_event_per_line_for_pipelines() {
    let env = Env::new();
    env.write("s.toml", &network_stack("jsonl", ""));
    let r = env.ok(&["apply", "s.toml", "--auto-approve", "--json"]);
    let events: Vec<serde_json::Value> =
        r.stdout.lines().map(|l| serde_json::from_str(l).expect("each stdout line is JSON")).collect();
    assert_eq!(events.first().unwrap()["event"], "plan");
    assert_eq!(events.first().unwrap()["plan"]["summary"]["create"], 6);
    assert_eq!(events.iter().filter(|e| e["event"] == "done").count(), 6, "{events:?}");
    let summary = events.last().unwrap();
    assert_eq!(summary["event"], "summary");
    assert_eq!(summary["ok"], true);
    assert!(summary["outputs"]["vpc_id"].as_str().unwrap().starts_with("vpc-"));
}

#[test]
fn security_group_replace_creates_first_and_moves_dependents_before_deleting() {
    let env = Env::new();
    let extra = "\n[security_group.nodes]\nvpc = \"${vpc.main.id}\"\ningress = [{ security_group = \"${security_group.efa.id}\" }]\n";
    env.write("s.toml", &network_stack("cbd", extra));
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let old = env.state("cbd")["resources"]["security_group.efa"]["id"].as_str().unwrap().to_string();

    // A new description replaces the group; `nodes` refers to it and must follow.
    let changed = network_stack("cbd", extra)
        .replace("[security_group.efa]\n", "[security_group.efa]\ndescription = \"EFA group\"\n");
    env.write("s.toml", &changed);
    let plan = env.ok(&["plan", "s.toml"]);
    assert!(plan.stdout.contains(" +/- security_group.efa                 replace, create before destroy"), "{plan:?}");
    assert!(plan.stdout.contains("   ~ security_group.nodes"), "{plan:?}");
    let apply = env.ok(&["apply", "s.toml", "--auto-approve"]);
    // Order: the new group exists, nodes moves to it, then the old group goes.
    let pos = |s: &str| apply.stderr.find(s).unwrap_or_else(|| panic!("{s} missing:\n{apply:?}"));
    assert!(pos("security_group.efa: created") < pos("security_group.nodes: updated"), "{apply:?}");
    assert!(pos("security_group.nodes: updated") < pos(&format!("security_group.efa: deleted {old}")), "{apply:?}");

    let st = env.state("cbd");
    let new = st["resources"]["security_group.efa"]["id"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    assert!(st.get("deposed").is_none(), "old copy deleted: {st}");
    assert!(
        st["resources"]["security_group.efa"]["outputs"]["name"].as_str().unwrap().starts_with("cbd-efa-"),
        "the new group got a fresh name"
    );
    let t = env.tagged("cbd");
    assert_eq!(t.security_groups.len(), 2, "{t:?}");
    assert!(!t.security_groups.contains(&old));
    let nodes = st["resources"]["security_group.nodes"]["id"].as_str().unwrap().to_string();
    let ec2 = env.emu.ec2();
    block_on(async move {
        let g = ec2.describe_security_groups().group_ids(&nodes).send().await.unwrap();
        let refs: Vec<_> = g.security_groups()[0]
            .ip_permissions()
            .iter()
            .flat_map(|p| p.user_id_group_pairs())
            .filter_map(|u| u.group_id())
            .map(String::from)
            .collect();
        assert_eq!(refs, vec![new], "nodes refers to the new group");
    });
    assert_eq!(env.run(&["plan", "s.toml", "--detailed-exitcode"]).code, 0);
}
