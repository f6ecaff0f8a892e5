//! `[import]` (issue 20): objects made outside gpustack (here with the AWS SDK, as a
//! console, eksctl or Terraform would) taken over by a stack. Plan reads them without
//! changing anything, shows `= import` with the tags it adds and what differs from the
//! file; apply tags, records, then updates; a clean import is no change for
//! `--detailed-exitcode`; a purchase imported is never bought.

mod purchases;

use crate::harness::{Env, block_on};

/// EC2/SageMaker/EKS/IAM calls that change something: everything but reads.
pub(crate) fn mutating(requests: &[(String, String)]) -> Vec<String> {
    let reads = ["Describe", "List", "Get", "Search"];
    requests.iter().map(|(_, a)| a.clone()).filter(|a| !reads.iter().any(|r| a.starts_with(r))).collect()
}

fn pg_stack(name: &str, group: &str, tags: &str, import_id: &str) -> String {
    format!(
        r#"[stack]
name   = "{name}"
region = "us-west-2"

[placement_group.train]
strategy = "cluster"
name     = "{group}"
tags     = {{ {tags} }}

[import]
"placement_group.train" = "{import_id}"
"#
    )
}

/// A cluster placement group made with the SDK, tagged `team = ml`: its id.
fn make_group(env: &Env, name: &str) -> String {
    let ec2 = env.emu.ec2();
    let name = name.to_string();
    block_on(async move {
        let tag = aws_sdk_ec2::types::Tag::builder().key("team").value("ml").build();
        let spec = aws_sdk_ec2::types::TagSpecification::builder()
            .resource_type(aws_sdk_ec2::types::ResourceType::PlacementGroup)
            .tags(tag)
            .build();
        let out = ec2
            .create_placement_group()
            .group_name(name)
            .strategy(aws_sdk_ec2::types::PlacementStrategy::Cluster)
            .tag_specifications(spec)
            .send()
            .await
            .unwrap();
        out.placement_group().unwrap().group_id().unwrap().to_string()
    })
}

/// The group's tags as EC2 shows them.
fn group_tags(env: &Env, name: &str) -> Vec<(String, String)> {
    let ec2 = env.emu.ec2();
    let name = name.to_string();
    block_on(async move {
        let out = ec2.describe_placement_groups().group_names(name).send().await.unwrap();
        let mut t: Vec<(String, String)> = out.placement_groups()[0]
            .tags()
            .iter()
            .map(|t| (t.key().unwrap().to_string(), t.value().unwrap().to_string()))
            .collect();
        t.sort();
        t
    })
}

#[test]
fn a_clean_import_plans_no_change_reads_only_and_applies_only_tags() {
    let env = Env::new();
    let id = make_group(&env, "brown-pg");
    env.write("s.toml", &pg_stack("imp", "brown-pg", r#"team = "ml""#, "brown-pg"));
    env.emu.reset_requests();
    let plan = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "a clean import is no change:\n{plan:?}");
    let line = plan.stdout.lines().find(|l| l.contains("placement_group.train")).unwrap_or_default();
    assert!(line.trim_start().starts_with("= placement_group.train"), "{plan:?}");
    assert!(
        line.ends_with(&format!(
            "import {id} (record in state, add tags gpustack:stack = \"imp\", gpustack:address = \"placement_group.train\")"
        )),
        "{plan:?}"
    );
    assert!(plan.stdout.contains("1 to import"), "{plan:?}");
    let during_plan = mutating(&env.emu.requests());
    assert!(during_plan.is_empty(), "plan changed something: {during_plan:?}");

    let json = env.ok(&["plan", "s.toml", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(v["changes"][0]["action"], "import", "{v:#}");
    assert_eq!(v["changes"][0]["import"]["adds_tags"]["gpustack:address"], "placement_group.train", "{v:#}");
    assert_eq!(v["summary"]["changes_anything"], false, "{v:#}");

    env.emu.reset_requests();
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(mutating(&env.emu.requests()), vec!["CreateTags".to_string()], "only the tags are added");
    assert_eq!(
        group_tags(&env, "brown-pg"),
        vec![
            ("gpustack:address".into(), "placement_group.train".into()),
            ("gpustack:stack".into(), "imp".into()),
            ("team".into(), "ml".into())
        ]
    );
    let st = env.state("imp");
    assert_eq!(st["resources"]["placement_group.train"]["id"], id.as_str(), "{st:#}");
    assert!(st["pending"].as_array().is_none_or(|p| p.is_empty()), "{st:#}");

    // Imported: the entry is now a no-op, the object is the stack's like any other.
    let again = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(again.stdout.contains("No changes."), "{again:?}");
    env.ok(&["destroy", "s.toml", "--auto-approve"]);
    let ec2 = env.emu.ec2();
    let left = block_on(async move { ec2.describe_placement_groups().send().await.unwrap() });
    assert!(
        left.placement_groups().iter().all(|g| g.state().map(|s| s.as_str()) == Some("deleted")),
        "destroy deletes an imported object like any other: {left:?}"
    );
}

#[test]
fn a_differing_field_is_the_update_and_applies() {
    let env = Env::new();
    make_group(&env, "brown-pg");
    env.write("s.toml", &pg_stack("imp", "brown-pg", r#"team = "infra""#, "brown-pg"));
    let plan = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(plan.code, 2, "a difference is a change:\n{plan:?}");
    assert!(plan.stdout.contains("then update in place"), "{plan:?}");
    assert!(plan.stdout.contains("tags.team: \"ml\" → \"infra\""), "{plan:?}");
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert!(group_tags(&env, "brown-pg").contains(&("team".into(), "infra".into())));
    let again = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "{again:?}");
}

#[test]
fn an_import_id_that_does_not_exist_fails_the_plan_naming_it() {
    let env = Env::new();
    env.write("s.toml", &pg_stack("imp", "nope-pg", "", "nope-pg"));
    let plan = env.run(&["plan", "s.toml"]);
    assert_eq!(plan.code, 1, "{plan:?}");
    assert!(
        plan.stderr.contains("`[import]` `placement_group.train`: no placement_group \"nope-pg\" exists in us-west-2"),
        "{plan:?}"
    );
    assert!(plan.stderr.contains("s.toml:11:"), "located at the id: {plan:?}");
}

#[test]
fn an_offline_plan_says_the_import_was_not_read_and_apply_refuses_it() {
    let env = Env::new();
    make_group(&env, "brown-pg");
    env.write("s.toml", &pg_stack("imp", "brown-pg", r#"team = "ml""#, "brown-pg"));
    let plan = env.run(&["plan", "s.toml", "--refresh=false", "--detailed-exitcode"]);
    assert_eq!(plan.code, 2, "an unread import may differ: {plan:?}");
    assert!(plan.stdout.contains("brown-pg not read (--refresh=false)"), "{plan:?}");
    let apply = env.run(&["apply", "s.toml", "--refresh=false", "--auto-approve"]);
    assert_eq!(apply.code, 1, "{apply:?}");
    assert!(apply.stderr.contains("this plan did not read it (--refresh=false)"), "{apply:?}");
    assert!(mutating(&env.emu.requests()).iter().all(|a| a == "CreatePlacementGroup"), "nothing changed");
}

/// A crash after the tags landed and before the state record: the next run finds the group
/// by its tags and adopts it, no second import needed, nothing duplicated.
/// Review imp-core M2: a consented replace of an import tags the object for the stack before
/// deleting it (`gpustack policy` allows the delete only on an object tagged for the stack).
#[test]
fn a_consented_replace_of_an_import_tags_the_object_before_deleting_it() {
    let env = Env::new();
    make_group(&env, "brown-pg");
    let text = pg_stack("imp", "brown-pg", r#"team = "ml""#, "brown-pg")
        .replace("strategy = \"cluster\"", "strategy = \"spread\"\nprevent_destroy = false");
    env.write("s.toml", &text);
    env.emu.reset_requests();
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let calls = mutating(&env.emu.requests());
    let at = |a: &str| calls.iter().position(|c| c == a).unwrap_or_else(|| panic!("no {a}: {calls:?}"));
    assert!(at("CreateTags") < at("DeletePlacementGroup"), "{calls:?}");
    assert!(at("DeletePlacementGroup") < at("CreatePlacementGroup"), "{calls:?}");
    let again = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "{again:?}");
}

#[test]
fn a_crash_between_tagging_and_recording_is_adopted_by_tag() {
    let env = Env::new();
    let id = make_group(&env, "brown-pg");
    env.write("s.toml", &pg_stack("imp", "brown-pg", r#"team = "ml""#, "brown-pg"));
    env.emu.set_latency(0);
    // Hold the answer to CreateTags, so the kill lands after EC2 tagged and before the record.
    env.emu.control("POST", "/_gpustack/latency?ms=400&after=1");
    crate::crash::kill_after(&env, &["apply", "s.toml", "--auto-approve"], "CreateTags");
    env.emu.control("POST", "/_gpustack/latency?ms=0&after=1");
    let st = env.state("imp");
    assert!(st["resources"].get("placement_group.train").is_none(), "killed before the record: {st:#}");
    let plan = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert!(plan.stdout.contains(&format!("adopting {id} found by its gpustack:address tag")), "{plan:?}");
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(env.state("imp")["resources"]["placement_group.train"]["id"], id.as_str());
    let again = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "{again:?}");
}

/// Review imp-core M1: a crash between the import's tags and its record, after which the user
/// drops the import from the file: the object is the user's, never the stack's. The plan
/// releases it (removes the two gpustack tags), and nothing deletes it.
#[test]
fn an_interrupted_import_dropped_from_the_file_is_untagged_never_deleted() {
    let env = Env::new();
    let id = make_group(&env, "brown-pg");
    env.write("s.toml", &pg_stack("imp", "brown-pg", r#"team = "ml""#, "brown-pg"));
    env.emu.set_latency(0);
    env.emu.control("POST", "/_gpustack/latency?ms=400&after=1");
    crate::crash::kill_after(&env, &["apply", "s.toml", "--auto-approve"], "CreateTags");
    env.emu.control("POST", "/_gpustack/latency?ms=0&after=1");
    assert!(group_tags(&env, "brown-pg").contains(&("gpustack:stack".into(), "imp".into())), "tagged before the kill");
    let other = "[stack]\nname   = \"imp\"\nregion = \"us-west-2\"\n\n[placement_group.other]\nstrategy = \"spread\"\nname     = \"other-pg\"\n";
    env.write("s.toml", other);
    let plan = env.run(&["plan", "s.toml"]);
    assert_eq!(plan.code, 0, "{plan:?}");
    let line = plan.stdout.lines().find(|l| l.contains("placement_group.train")).unwrap_or_default();
    assert!(line.contains(&format!("forget {id} (tagged by an interrupted import")), "{plan:?}");
    assert!(!line.contains("delete"), "{plan:?}");
    env.emu.reset_requests();
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let calls = mutating(&env.emu.requests());
    assert!(!calls.iter().any(|a| a == "DeletePlacementGroup"), "{calls:?}");
    assert!(calls.iter().any(|a| a == "DeleteTags"), "{calls:?}");
    assert_eq!(
        group_tags(&env, "brown-pg"),
        vec![("team".to_string(), "ml".to_string())],
        "only the user's tag is left"
    );
    let again = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "released once: {again:?}");
    assert!(env.state("imp")["pending"].as_array().is_none_or(|p| p.is_empty()), "{:#}", env.state("imp"));
}
