//! Cluster options (issue 19): secrets encryption, the service CIDR and IP family, the
//! control-plane log group with its retention, zonal shift, the upgrade policy spelling,
//! the creator's admin entry and deletion protection on `eks_cluster`; Kubernetes groups and
//! a username on `eks_access_entry`. The shipped example applies, reads back, updates in
//! place, refuses what EKS refuses, and destroys with its log group.

use crate::harness::{Env, block_on};

const EXAMPLE: &str = "examples/cluster-options.toml";

fn example() -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(EXAMPLE)).unwrap()
}

fn logs(env: &Env) -> aws_sdk_cloudwatchlogs::Client {
    let conf = aws_sdk_cloudwatchlogs::Config::builder()
        .behavior_version(aws_sdk_cloudwatchlogs::config::BehaviorVersion::latest())
        .region(aws_sdk_cloudwatchlogs::config::Region::new("us-west-2"))
        .endpoint_url(&env.emu.url)
        .credentials_provider(aws_sdk_cloudwatchlogs::config::Credentials::new("test", "test", None, None, "test"))
        .build();
    aws_sdk_cloudwatchlogs::Client::from_conf(conf)
}

/// The control-plane group's retention: None without a group, Some(None) when it never expires.
fn retention(env: &Env, cluster: &str) -> Option<Option<i32>> {
    let logs = logs(env);
    let group = format!("/aws/eks/{cluster}/cluster");
    block_on(async move {
        let out = logs.describe_log_groups().log_group_name_prefix(&group).send().await.unwrap();
        out.log_groups().iter().find(|g| g.log_group_name() == Some(group.as_str())).map(|g| g.retention_in_days())
    })
}

fn cluster(env: &Env, name: &str) -> aws_sdk_eks::types::Cluster {
    let eks = env.emu.eks();
    let name = name.to_string();
    block_on(async move { eks.describe_cluster().name(name).send().await.unwrap().cluster.unwrap() })
}

fn access_entry(env: &Env, cluster: &str, principal: &str) -> aws_sdk_eks::types::AccessEntry {
    let eks = env.emu.eks();
    let (cluster, principal) = (cluster.to_string(), principal.to_string());
    block_on(async move {
        eks.describe_access_entry()
            .cluster_name(cluster)
            .principal_arn(principal)
            .send()
            .await
            .unwrap()
            .access_entry
            .unwrap()
    })
}

/// The operators' role the example's access entry names (made outside the stack).
fn ops_role(env: &Env) -> String {
    let iam = env.emu.iam();
    block_on(async move {
        let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"Action":"sts:AssumeRole"}]}"#;
        let out = iam.create_role().role_name("platform-ops").assume_role_policy_document(trust).send().await.unwrap();
        out.role.unwrap().arn
    })
}

fn allowed_actions(env: &Env, file: &str) -> std::collections::BTreeSet<String> {
    let policy: serde_json::Value = serde_json::from_str(&env.ok(&["policy", file]).stdout).unwrap();
    policy["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["Action"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn the_cluster_options_example_applies_updates_in_place_and_destroys_its_log_group() {
    let env = Env::new();
    let role = ops_role(&env);
    assert_eq!(role, "arn:aws:iam::123456789012:role/platform-ops", "the example's default ops_role");
    let text = example();
    env.write("s.toml", &text);
    env.emu.reset_requests();
    let apply = env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert!(apply.stdout.contains("Apply complete"), "{apply:?}");

    let c = cluster(&env, "options-dev-main");
    let net = c.kubernetes_network_config().unwrap();
    assert_eq!(net.service_ipv4_cidr(), Some("172.20.0.0/16"));
    assert_eq!(net.ip_family().map(|f| f.as_str()), Some("ipv4"));
    let key = c.encryption_config()[0].provider().unwrap().key_arn();
    assert_eq!(key, Some("arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"));
    assert_eq!(c.zonal_shift_config().and_then(|z| z.enabled()), Some(true));
    assert_eq!(c.deletion_protection(), Some(false));
    assert_eq!(c.upgrade_policy().and_then(|u| u.support_type()).map(|s| s.as_str()), Some("STANDARD"));
    assert_eq!(c.access_config().and_then(|a| a.bootstrap_cluster_creator_admin_permissions()), Some(false));
    assert_eq!(retention(&env, "options-dev-main"), Some(Some(90)), "the group was made with its retention");
    let entry = access_entry(&env, "options-dev-main", &role);
    assert_eq!(entry.kubernetes_groups(), ["platform-ops"]);
    assert_eq!(entry.username(), Some("platform-ops:{{SessionName}}"));

    let again = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "in sync after apply (refresh reads every option back): {again:?}");

    // In place: the retention, zonal shift, deletion protection and the entry's groups.
    let changed = text
        .replace("log_retention_days  = 90", "log_retention_days  = 30")
        .replace("zonal_shift         = true", "zonal_shift         = false")
        .replace("deletion_protection = false", "deletion_protection = true")
        .replace(
            r#"upgrade_policy      = { support_type = "STANDARD" }"#,
            r#"upgrade_policy      = { support_type = "EXTENDED" }"#,
        )
        .replace(r#"kubernetes_groups = ["platform-ops"]"#, r#"kubernetes_groups = ["platform-ops", "auditors"]"#);
    env.write("s.toml", &changed);
    let plan = env.ok(&["plan", "s.toml"]);
    assert!(plan.stdout.contains("~ eks_cluster.main"), "{plan:?}");
    assert!(plan.stdout.contains("log_retention_days: 90 → 30"), "{plan:?}");
    assert!(plan.stdout.contains("support_type: \"STANDARD\" → \"EXTENDED\""), "{plan:?}");
    assert!(plan.stdout.contains("~ eks_access_entry.ops"), "{plan:?}");
    assert!(plan.stdout.contains("0 to replace") && !plan.stdout.contains("-/+"), "nothing replaces: {plan:?}");
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let c = cluster(&env, "options-dev-main");
    assert_eq!(c.zonal_shift_config().and_then(|z| z.enabled()), Some(false));
    assert_eq!(c.deletion_protection(), Some(true));
    assert_eq!(c.upgrade_policy().and_then(|u| u.support_type()).map(|s| s.as_str()), Some("EXTENDED"));
    assert_eq!(retention(&env, "options-dev-main"), Some(Some(30)));
    let entry = access_entry(&env, "options-dev-main", &role);
    assert_eq!(entry.kubernetes_groups(), ["auditors", "platform-ops"]);
    let again = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "in sync after the update: {again:?}");

    // EKS cannot take encryption away or change the key: a plan error with the reason.
    env.write("s.toml", &changed.replace("encryption          = { kms_key = \"${var.kms_key}\" }\n", ""));
    let off = env.run(&["plan", "s.toml"]);
    assert_eq!(off.code, 1, "{off:?}");
    assert!(off.stderr.contains("EKS cannot turn secrets encryption off"), "{off:?}");
    assert!(off.stderr.contains("s.toml:"), "{off:?}");
    env.write("s.toml", &changed);
    let rekey = env.run(&["plan", "s.toml", "--var", "kms_key=arn:aws:kms:us-west-2:123456789012:key/other"]);
    assert_eq!(rekey.code, 1, "{rekey:?}");
    assert!(rekey.stderr.contains("cannot change a cluster's secrets encryption key"), "{rekey:?}");

    // Deletion protection holds: the plan refuses destroy before anything is deleted, so the
    // access entry (deleted first by a destroy) is still there (review r19 M1).
    env.emu.reset_requests();
    let refused = env.run(&["destroy", "s.toml", "--auto-approve"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(refused.stderr.contains("`eks_cluster.main` has deletion_protection = true"), "{refused:?}");
    assert!(refused.stderr.contains("apply deletion_protection = false"), "{refused:?}");
    let deletes: Vec<_> = env.emu.requests().into_iter().filter(|(_, a)| a.starts_with("Delete")).collect();
    assert!(deletes.is_empty(), "nothing deleted: {deletes:?}");
    assert_eq!(access_entry(&env, "options-dev-main", &role).kubernetes_groups(), ["auditors", "platform-ops"]);
    // A replace of the protected cluster is refused too, even with the protection turned off in
    // the same apply (the replace's delete would run first, with the old setting).
    let moved = changed
        .replace("172.20.0.0/16", "172.21.0.0/16")
        .replace("deletion_protection = true", "deletion_protection = false");
    env.write("s.toml", &moved);
    let replace = env.run(&["plan", "s.toml"]);
    assert_eq!(replace.code, 1, "{replace:?}");
    assert!(replace.stderr.contains("but this plan would replace it"), "{replace:?}");
    env.write("s.toml", &text);
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let destroy = env.ok(&["destroy", "s.toml", "--auto-approve"]);
    assert!(destroy.stdout.contains("Destroy complete"), "{destroy:?}");
    assert_eq!(retention(&env, "options-dev-main"), None, "the log group went with the cluster");
    assert_eq!(env.tagged("options-dev").total(), 0);

    let allowed = allowed_actions(&env, "s.toml");
    let made: std::collections::BTreeSet<String> =
        env.emu.requests().into_iter().map(|(service, action)| format!("{service}:{action}")).collect();
    let missing: Vec<&String> = made.iter().filter(|a| !allowed.contains(*a)).collect();
    assert!(missing.is_empty(), "calls not in `gpustack policy`: {missing:?}");
}

#[test]
fn a_log_group_eks_already_made_is_taken_and_retention_added_to_a_running_cluster() {
    let env = Env::new();
    ops_role(&env);
    // First without retention: logging on, so EKS makes the group, never expiring.
    let text = example().replace("log_retention_days  = 90\n", "");
    env.write("s.toml", &text);
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(retention(&env, "options-dev-main"), Some(None), "EKS's own group never expires");
    // Then with it: the group EKS made is taken and given the retention, in place.
    env.write("s.toml", &example());
    let plan = env.ok(&["plan", "s.toml"]);
    assert!(
        plan.stdout.contains("log_retention_days: (none) → 90") || plan.stdout.contains("+ log_retention_days"),
        "{plan:?}"
    );
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(retention(&env, "options-dev-main"), Some(Some(90)));
    // Retention changed by hand shows as drift and is put back.
    let logs = logs(&env);
    block_on(async move {
        logs.put_retention_policy()
            .log_group_name("/aws/eks/options-dev-main/cluster")
            .retention_in_days(7)
            .send()
            .await
            .unwrap();
    });
    let drift = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(drift.code, 2, "{drift:?}");
    assert!(drift.stdout.contains("log_retention_days: 7 → 90"), "{drift:?}");
    env.ok(&["destroy", "s.toml", "--auto-approve"]);
    assert_eq!(retention(&env, "options-dev-main"), None);
}

#[test]
fn an_unencrypted_cluster_gets_encryption_in_place() {
    let env = Env::new();
    ops_role(&env);
    let plain = example().replace("encryption          = { kms_key = \"${var.kms_key}\" }\n", "");
    env.write("s.toml", &plain);
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert!(cluster(&env, "options-dev-main").encryption_config().is_empty());
    env.write("s.toml", &example());
    let plan = env.ok(&["plan", "s.toml"]);
    assert!(plan.stdout.contains("~ eks_cluster.main"), "{plan:?}");
    assert!(plan.stdout.contains("0 to replace") && !plan.stdout.contains("-/+"), "{plan:?}");
    env.emu.reset_requests();
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert!(env.emu.requests().iter().any(|(s, a)| s == "eks" && a == "AssociateEncryptionConfig"));
    assert_eq!(cluster(&env, "options-dev-main").encryption_config().len(), 1);
    env.ok(&["destroy", "s.toml", "--auto-approve"]);
}

#[test]
fn cluster_and_access_entry_mistakes_are_reported_offline_in_one_pass() {
    let env = Env::new();
    let bad = example()
        .replace("service_cidr        = \"172.20.0.0/16\"", "service_cidr        = \"10.60.128.0/20\"")
        .replace("log_retention_days  = 90", "log_retention_days  = 10")
        .replace(r#"kubernetes_groups = ["platform-ops"]"#, r#"kubernetes_groups = ["system:masters"]"#)
        .replace("username          = \"platform-ops:{{SessionName}}\"", "username          = \"eks:ops\"")
        .replace(
            "upgrade_policy      = { support_type = \"STANDARD\" }",
            "upgrade_policy      = { support_type = \"STANDARD\" }\nsupport_type        = \"EXTENDED\"",
        )
        .replace("kms_key  = \"arn:aws:kms:", "kms_key  = \"arn:aws:kmz:");
    env.write("s.toml", &bad);
    let out = env.run(&["validate", "s.toml"]);
    assert_eq!(out.code, 1, "{out:?}");
    for want in [
        "service_cidr 10.60.128.0/20 overlaps 10.60.0.0/16",
        "log_retention_days = 10 is not a retention CloudWatch Logs offers",
        "group names cannot start with system:",
        "it cannot start with eks:",
        "support_type and upgrade_policy.support_type are the same setting",
        "is not the ARN of a KMS key or alias",
    ] {
        assert!(out.stderr.contains(want), "missing {want:?}: {}", out.stderr);
    }
    assert!(out.stderr.contains("s.toml:"), "file:line:column: {}", out.stderr);

    // Review r19 m1, m2: a key of another region and a session-name username without a colon.
    let elsewhere = example()
        .replace("arn:aws:kms:us-west-2:", "arn:aws:kms:us-east-1:")
        .replace("\"platform-ops:{{SessionName}}\"", "\"{{SessionName}}\"");
    env.write("k.toml", &elsewhere);
    let out = env.run(&["validate", "k.toml"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("encryption.kms_key is in us-east-1, but the cluster is in us-west-2"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("it needs a colon before {{SessionName}}"), "{}", out.stderr);

    let ipv6 = example().replace("ip_family           = \"ipv4\"", "ip_family           = \"ipv6\"");
    env.write("v6.toml", &ipv6);
    let out = env.run(&["validate", "v6.toml"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("service_cidr cannot be set on an ipv6 cluster"), "{}", out.stderr);

    let ipv6 = ipv6
        .replace("service_cidr        = \"172.20.0.0/16\"\n", "")
        .replace("type              = \"STANDARD\"", "type              = \"EC2_LINUX\"");
    env.write("v6.toml", &ipv6);
    let out = env.run(&["validate", "v6.toml"]);
    assert_eq!(out.code, 1, "{out:?}");
    for want in [
        "subnet.a, subnet.b have no IPv6 block",
        "list subnets made outside the stack that have IPv4 and IPv6 blocks",
        "is EC2_LINUX, which takes no `kubernetes_groups`",
        "is EC2_LINUX, which takes no `username`",
        "is EC2_LINUX, which takes no access policies",
    ] {
        assert!(out.stderr.contains(want), "missing {want:?}: {}", out.stderr);
    }
}

/// Review r19 M4: a cluster made without the create-only options (as before they existed) is
/// not replaced when the file adds `bootstrap_cluster_creator_admin` (state only, with a note)
/// or the `service_cidr` EKS already uses; another service CIDR still replaces.
#[test]
fn create_only_options_that_change_nothing_do_not_replace_a_running_cluster() {
    let env = Env::new();
    ops_role(&env);
    let before = example()
        .replace("service_cidr        = \"172.20.0.0/16\"\n", "")
        .replace("bootstrap_cluster_creator_admin = false\n", "");
    env.write("s.toml", &before);
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let c = cluster(&env, "options-dev-main");
    assert_eq!(c.kubernetes_network_config().and_then(|n| n.service_ipv4_cidr()), Some("172.20.0.0/16"));
    assert_eq!(c.access_config().and_then(|a| a.bootstrap_cluster_creator_admin_permissions()), Some(true));

    env.write("s.toml", &example());
    let plan = env.ok(&["plan", "s.toml"]);
    assert!(plan.stdout.contains("0 to replace") && !plan.stdout.contains("-/+"), "{plan:?}");
    assert!(!plan.stdout.contains("service_cidr"), "EKS's block is no change: {plan:?}");
    assert!(plan.stdout.contains("bootstrap_cluster_creator_admin"), "{plan:?}");
    assert!(plan.stdout.contains("acts only when EKS creates the cluster"), "{plan:?}");
    env.emu.reset_requests();
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let calls: Vec<_> = env
        .emu
        .requests()
        .into_iter()
        .filter(|(s, a)| s == "eks" && !a.starts_with("Describe") && !a.starts_with("List"))
        .collect();
    assert!(calls.is_empty(), "no EKS change for a create-only setting: {calls:?}");
    let again = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "recorded: {again:?}");

    env.write("s.toml", &example().replace("172.20.0.0/16", "172.21.0.0/16"));
    let plan = env.ok(&["plan", "s.toml"]);
    assert!(plan.stdout.contains("-/+ eks_cluster.main"), "another block replaces: {plan:?}");
    env.write("s.toml", &example());
    env.ok(&["destroy", "s.toml", "--auto-approve"]);
}

/// Review r19 M2: creating a cluster never changes a log group that is not the stack's, and a
/// failed CreateCluster leaves no group behind.
#[test]
fn a_log_group_that_is_not_the_stacks_is_left_alone_and_a_failed_create_leaves_none() {
    let env = Env::new();
    ops_role(&env);
    let group = "/aws/eks/options-dev-main/cluster";
    let make = |tags: Option<(&str, &str)>| {
        let logs = logs(&env);
        block_on(async move {
            let mut call = logs.create_log_group().log_group_name(group);
            if let Some((stack, address)) = tags {
                call = call.tags("gpustack:stack", stack).tags("gpustack:address", address);
            }
            call.send().await.unwrap();
            logs.put_retention_policy().log_group_name(group).retention_in_days(7).send().await.unwrap();
        })
    };
    // Another stack's group of that name: refused before CreateCluster, its retention untouched.
    make(Some(("other", "eks_cluster.main")));
    env.write("s.toml", &example());
    env.emu.reset_requests();
    let out = env.run(&["apply", "s.toml", "--auto-approve"]);
    assert_ne!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("belongs to eks_cluster.main of stack other"), "{out:?}");
    assert_eq!(retention(&env, "options-dev-main"), Some(Some(7)), "the other stack's retention stands");
    assert!(!env.emu.requests().iter().any(|(s, a)| s == "eks" && a == "CreateCluster"), "no cluster attempted");

    // An untagged group (an earlier cluster of that name): the retention goes on only once
    // the cluster exists.
    let logs_client = logs(&env);
    block_on(async move { logs_client.delete_log_group().log_group_name(group).send().await.unwrap() });
    make(None);
    env.emu.reset_requests();
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(retention(&env, "options-dev-main"), Some(Some(90)));
    let order: Vec<String> = env
        .emu
        .requests()
        .into_iter()
        .filter(|(_, a)| a == "CreateCluster" || a == "PutRetentionPolicy")
        .map(|(_, a)| a)
        .collect();
    assert_eq!(order, ["CreateCluster", "PutRetentionPolicy"], "retention after the create");
    env.ok(&["destroy", "s.toml", "--auto-approve"]);

    // CreateCluster refused (its subnets do not exist): the group made for it goes again.
    let bad = "[stack]\nname = \"lg\"\nregion = \"us-west-2\"\n[eks_cluster.main]\nversion = \"1.33\"\nrole = \"arn:aws:iam::123456789012:role/r\"\nsubnets = [\"subnet-0aaaaaaaaaaaaaaaa\", \"subnet-0bbbbbbbbbbbbbbbb\"]\nendpoint_public_access = false\nlogging = [\"api\"]\nlog_retention_days = 30\n";
    env.write("bad.toml", bad);
    let out = env.run(&["apply", "bad.toml", "--auto-approve"]);
    assert_ne!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("does not exist"), "{out:?}");
    assert_eq!(retention(&env, "lg-main"), None, "no untracked group left");
}

/// Review r19 M3: a stack whose clusters do not set `log_retention_days` refreshes without
/// one CloudWatch Logs call, so its deploy role needs no Logs permission.
#[test]
fn refresh_reads_no_log_group_for_a_cluster_without_log_retention_days() {
    let env = Env::new();
    ops_role(&env);
    env.write("s.toml", &example().replace("log_retention_days  = 90\n", ""));
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    env.emu.reset_requests();
    let again = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "{again:?}");
    let logs_calls: Vec<_> = env.emu.requests().into_iter().filter(|(s, _)| s == "logs").collect();
    assert!(logs_calls.is_empty(), "{logs_calls:?}");
    env.ok(&["destroy", "s.toml", "--auto-approve"]);
}
