//! Karpenter's AWS side end to end: `eks_access_entry` and `karpenter_controller` applied by
//! the binary, read back through the Rust SDK (role, inline policy, queue, rules, association,
//! entries), a version change in place, a part repaired after it was deleted outside
//! gpustack, destroy, and an apply right after it that waits for SQS to free the queue name.
//! Every call is in `gpustack policy`. The offline rules are shown refusing and accepting.

use std::collections::BTreeSet;

use serde_json::Value as Json;

use crate::harness::{Env, bin, block_on, network_stack};

const VIEW: &str = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy";
const ADMIN_VIEW: &str = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSAdminViewPolicy";

/// The network stack with a cluster, a node role for Karpenter no node group uses, the Pod
/// Identity agent, an EC2_LINUX entry for that role, a STANDARD entry and a controller.
fn stack(name: &str, version: &str, ops_policies: &str) -> String {
    network_stack(
        name,
        &format!(
            r#"
[iam_role.cluster]
service          = "eks.amazonaws.com"
managed_policies = ["arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"]

[iam_role.karpenter_node]
service          = "ec2.amazonaws.com"
managed_policies = ["arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"]

[iam_role.ops]
service = "ec2.amazonaws.com"

[eks_cluster.main]
version             = "1.33"
role                = "${{iam_role.cluster.arn}}"
subnets             = ["${{subnet.a.id}}", "${{subnet.b.id}}"]
public_access_cidrs = ["203.0.113.0/24"]
authentication_mode = "API"

[eks_addon.pod_identity]
cluster = "${{eks_cluster.main.name}}"
addon   = "eks-pod-identity-agent"

[eks_access_entry.karpenter_nodes]
cluster       = "${{eks_cluster.main.name}}"
principal_arn = "${{iam_role.karpenter_node.arn}}"
type          = "EC2_LINUX"

[eks_access_entry.ops]
cluster       = "${{eks_cluster.main.name}}"
principal_arn = "${{iam_role.ops.arn}}"
type          = "STANDARD"
policies      = {ops_policies}

[karpenter_controller.main]
cluster   = "${{eks_cluster.main.name}}"
node_role = "${{iam_role.karpenter_node.arn}}"
version   = "{version}"
tags      = {{ owner = "platform" }}
"#
        ),
    )
}

fn ops_policies() -> String {
    format!(
        r#"[{{ policy_arn = "{VIEW}", scope = ["ml", "dev"] }}, {{ policy_arn = "{ADMIN_VIEW}", scope = "cluster" }}]"#
    )
}

/// Runs gpustack and adds the AWS calls it made (and only those) to `calls`.
fn logged(env: &Env, calls: &mut BTreeSet<String>, args: &[&str]) -> crate::harness::Run {
    env.emu.reset_requests();
    let r = env.run(args);
    calls.extend(env.emu.requests().into_iter().map(|(service, action)| format!("{service}:{action}")));
    r
}

fn ok(env: &Env, calls: &mut BTreeSet<String>, args: &[&str]) -> crate::harness::Run {
    let r = logged(env, calls, args);
    assert_eq!(r.code, 0, "gpustack {args:?} failed:\n{r:?}");
    r
}

fn statement<'a>(doc: &'a Json, sid: &str) -> &'a Json {
    doc["Statement"].as_array().unwrap().iter().find(|s| s["Sid"] == sid).unwrap_or_else(|| panic!("no {sid}: {doc}"))
}

/// The controller's inline policy, decoded.
fn controller_policy(env: &Env, role: &str) -> Json {
    let iam = env.emu.iam();
    let role = role.to_string();
    block_on(async move {
        let p = iam.get_role_policy().role_name(role).policy_name("KarpenterControllerPolicy").send().await.unwrap();
        let doc = percent_encoding::percent_decode_str(p.policy_document()).decode_utf8().unwrap().into_owned();
        serde_json::from_str(&doc).unwrap()
    })
}

/// The names of the stack's rules that target `queue_arn`, each checked for its one target.
fn rules(env: &Env, prefix: &str, queue_arn: &str) -> Vec<String> {
    let events = env.emu.events();
    let (prefix, queue_arn) = (prefix.to_string(), queue_arn.to_string());
    block_on(async move {
        let listed = events.list_rules().name_prefix(&prefix).send().await.unwrap();
        let mut names = vec![];
        for r in listed.rules() {
            let name = r.name().unwrap().to_string();
            let pattern: Json = serde_json::from_str(r.event_pattern().unwrap()).unwrap();
            assert_eq!(pattern.as_object().unwrap().len(), 2, "{name}: {pattern}");
            assert_eq!(pattern["source"].as_array().unwrap().len(), 1);
            let targets = events.list_targets_by_rule().rule(&name).send().await.unwrap();
            let t = targets.targets();
            assert_eq!(t.len(), 1, "{name}");
            assert_eq!((t[0].id(), t[0].arn()), ("KarpenterInterruptionQueueTarget", queue_arn.as_str()));
            names.push(name.strip_prefix(&prefix).unwrap_or(&name).to_string());
        }
        names.sort();
        names
    })
}

#[test]
fn karpenter_controller_and_access_entries_apply_update_repair_and_destroy() {
    let env = Env::new();
    let mut calls = BTreeSet::new();
    env.write("s.toml", &stack("kap", "1.6.8", &ops_policies()));
    let apply = ok(&env, &mut calls, &["apply", "s.toml", "--auto-approve"]);
    assert!(apply.stdout.contains("Apply complete"), "{apply:?}");

    let st = env.state("kap");
    let res = &st["resources"];
    let out = &res["karpenter_controller.main"]["outputs"];
    let node_role = res["iam_role.karpenter_node"]["outputs"]["arn"].as_str().unwrap().to_string();
    let role_arn = out["role_arn"].as_str().unwrap().to_string();
    let queue_arn = "arn:aws:sqs:us-west-2:123456789012:kap-main";
    assert_eq!(role_arn, "arn:aws:iam::123456789012:role/gpustack/kap/karpenter/kap-main-karpenter");
    assert_eq!((out["queue_name"].as_str(), out["queue_arn"].as_str()), (Some("kap-main"), Some(queue_arn)));
    let association = out["association_id"].as_str().unwrap().to_string();
    assert!(association.starts_with("a-"), "{out}");

    // The role: Pod Identity may assume it and tag the session; the policy is v1.6's.
    let iam = env.emu.iam();
    let trust = block_on(async move { iam.get_role().role_name("kap-main-karpenter").send().await.unwrap() });
    let role = trust.role().unwrap();
    assert_eq!(role.path(), "/gpustack/kap/karpenter/");
    let trust =
        percent_encoding::percent_decode_str(role.assume_role_policy_document().unwrap()).decode_utf8().unwrap();
    let trust: Json = serde_json::from_str(&trust).unwrap();
    assert_eq!(trust["Statement"][0]["Principal"]["Service"], "pods.eks.amazonaws.com");
    assert_eq!(trust["Statement"][0]["Action"], serde_json::json!(["sts:AssumeRole", "sts:TagSession"]));
    let doc = controller_policy(&env, "kap-main-karpenter");
    assert_eq!(doc["Statement"].as_array().unwrap().len(), 16, "{doc}");
    let pass = statement(&doc, "AllowPassingInstanceRole");
    assert_eq!((pass["Action"].as_str(), pass["Resource"].as_str()), (Some("iam:PassRole"), Some(node_role.as_str())));
    assert_eq!(statement(&doc, "AllowInterruptionQueueActions")["Resource"], queue_arn);
    assert_eq!(
        statement(&doc, "AllowAPIServerEndpointDiscovery")["Resource"],
        "arn:aws:eks:us-west-2:123456789012:cluster/kap-main"
    );
    assert_eq!(
        statement(&doc, "AllowScopedDeletion")["Condition"]["StringEquals"]["aws:ResourceTag/kubernetes.io/cluster/kap-main"],
        "owned"
    );
    assert!(
        statement(&doc, "AllowScopedEC2InstanceActionsWithTags")["Resource"]
            .to_string()
            .contains("capacity-reservation")
    );

    // The queue: 300 s, SSE-SQS, the template's policy, the stack's and the controller's tags.
    let sqs = env.emu.sqs();
    block_on(async move {
        let url = sqs.get_queue_url().queue_name("kap-main").send().await.unwrap().queue_url.unwrap();
        let a = sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(aws_sdk_sqs::types::QueueAttributeName::All)
            .send()
            .await
            .unwrap();
        let a = a.attributes().unwrap();
        let get = |k: &str| a.get(&aws_sdk_sqs::types::QueueAttributeName::from(k)).cloned().unwrap_or_default();
        assert_eq!((get("MessageRetentionPeriod").as_str(), get("SqsManagedSseEnabled").as_str()), ("300", "true"));
        assert_eq!(get("QueueArn"), queue_arn);
        let policy: Json = serde_json::from_str(&get("Policy")).unwrap();
        assert_eq!(policy["Id"], "EC2InterruptionPolicy");
        assert_eq!(
            policy["Statement"][0]["Principal"]["Service"],
            serde_json::json!(["events.amazonaws.com", "sqs.amazonaws.com"])
        );
        assert_eq!(
            (policy["Statement"][0]["Action"].as_str(), policy["Statement"][0]["Resource"].as_str()),
            (Some("sqs:SendMessage"), Some(queue_arn))
        );
        assert_eq!(policy["Statement"][1]["Sid"], "DenyHTTP");
        let tags = sqs.list_queue_tags().queue_url(&url).send().await.unwrap();
        let tags = tags.tags().unwrap();
        assert_eq!(tags.get("gpustack:stack").map(String::as_str), Some("kap"));
        assert_eq!(tags.get("owner").map(String::as_str), Some("platform"));
    });
    assert_eq!(rules(&env, "kap-main-", queue_arn), ["health", "rebalance", "spot", "state"]);

    // The association and the access entries.
    let eks = env.emu.eks();
    let (ra, assoc, nr) = (role_arn.clone(), association.clone(), node_role.clone());
    let ops_role = res["iam_role.ops"]["outputs"]["arn"].as_str().unwrap().to_string();
    let entry_arn = res["eks_access_entry.karpenter_nodes"]["outputs"]["arn"].as_str().unwrap().to_string();
    let ops = ops_role.clone();
    block_on(async move {
        let listed = eks.list_pod_identity_associations().cluster_name("kap-main").send().await.unwrap();
        assert_eq!(listed.associations().len(), 1);
        let a = eks
            .describe_pod_identity_association()
            .cluster_name("kap-main")
            .association_id(&assoc)
            .send()
            .await
            .unwrap();
        let a = a.association().unwrap();
        assert_eq!(
            (a.namespace(), a.service_account(), a.role_arn()),
            (Some("kube-system"), Some("karpenter"), Some(ra.as_str()))
        );
        let e = eks.describe_access_entry().cluster_name("kap-main").principal_arn(&nr).send().await.unwrap();
        let e = e.access_entry().unwrap();
        assert_eq!((e.r#type(), e.access_entry_arn()), (Some("EC2_LINUX"), Some(entry_arn.as_str())));
        assert_eq!(
            e.tags().unwrap().get("gpustack:address").map(String::as_str),
            Some("eks_access_entry.karpenter_nodes")
        );
        let p =
            eks.list_associated_access_policies().cluster_name("kap-main").principal_arn(&ops).send().await.unwrap();
        let mut got: Vec<(String, Vec<String>)> = p
            .associated_access_policies()
            .iter()
            .map(|p| {
                let s = p.access_scope().unwrap();
                (p.policy_arn().unwrap().to_string(), s.namespaces().to_vec())
            })
            .collect();
        got.sort();
        assert_eq!(
            got,
            [(ADMIN_VIEW.to_string(), vec![]), (VIEW.to_string(), vec!["dev".to_string(), "ml".to_string()])]
        );
    });

    let again = logged(&env, &mut calls, &["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(
        again.code, 0,
        "a second plan has no changes (and iam_role leaves the controller's role alone): {again:?}"
    );

    // Karpenter 1.6 → 1.10, and one policy fewer on the STANDARD entry: both in place.
    env.write("s.toml", &stack("kap", "1.10.2", &format!(r#"[{{ policy_arn = "{VIEW}", scope = ["ml"] }}]"#)));
    let plan = logged(&env, &mut calls, &["plan", "s.toml"]);
    assert!(plan.stdout.contains("~ karpenter_controller.main"), "{plan:?}");
    assert!(plan.stdout.contains("version: \"1.6.8\" → \"1.10.2\""), "{plan:?}");
    assert!(plan.stdout.contains("~ eks_access_entry.ops"), "{plan:?}");
    assert!(plan.stdout.contains("Plan: 0 to add, 2 to change, 0 to replace, 0 to delete."), "{plan:?}");
    ok(&env, &mut calls, &["apply", "s.toml", "--auto-approve"]);
    let doc = controller_policy(&env, "kap-main-karpenter");
    assert_eq!(doc["Statement"].as_array().unwrap().len(), 17, "v1.7 added ListInstanceProfiles: {doc}");
    assert!(
        !statement(&doc, "AllowScopedEC2InstanceActionsWithTags")["Resource"]
            .to_string()
            .contains("capacity-reservation")
    );
    assert_eq!(rules(&env, "kap-main-", queue_arn), ["health", "rebalance", "reserved", "spot", "state"]);
    assert_eq!(
        env.state("kap")["resources"]["karpenter_controller.main"]["outputs"]["association_id"],
        association.as_str()
    );
    let eks = env.emu.eks();
    let ops = ops_role.clone();
    block_on(async move {
        let p =
            eks.list_associated_access_policies().cluster_name("kap-main").principal_arn(&ops).send().await.unwrap();
        let p = p.associated_access_policies();
        assert_eq!(p.len(), 1);
        assert_eq!(
            (p[0].policy_arn(), p[0].access_scope().unwrap().namespaces()),
            (Some(VIEW), &["ml".to_string()][..])
        );
    });
    let again = logged(&env, &mut calls, &["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "in sync after the version change: {again:?}");

    // A rule deleted outside gpustack shows as a change of `version` that apply repairs.
    let events = env.emu.events();
    block_on(async move {
        events.remove_targets().rule("kap-main-spot").ids("KarpenterInterruptionQueueTarget").send().await.unwrap();
        events.delete_rule().name("kap-main-spot").send().await.unwrap();
    });
    let plan = logged(&env, &mut calls, &["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(plan.code, 2, "{plan:?}");
    assert!(plan.stdout.contains("version: \"1.10.2 (rules missing: spot)\" → \"1.10.2\""), "{plan:?}");
    ok(&env, &mut calls, &["apply", "s.toml", "--auto-approve"]);
    assert_eq!(rules(&env, "kap-main-", queue_arn), ["health", "rebalance", "reserved", "spot", "state"]);
    let again = logged(&env, &mut calls, &["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "repaired: {again:?}");

    // Another service account gets a new association and the old one goes; tags follow on
    // every part.
    let view_ml = format!(r#"[{{ policy_arn = "{VIEW}", scope = ["ml"] }}]"#);
    env.write(
        "s.toml",
        &stack("kap", "1.10.2", &view_ml).replace(
            "tags      = { owner = \"platform\" }",
            "service_account = \"karpenter-ctl\"\ntags      = { owner = \"ml-platform\", cost = \"gpu\" }",
        ),
    );
    let plan = logged(&env, &mut calls, &["plan", "s.toml"]);
    assert!(plan.stdout.contains("service_account: \"karpenter\" → \"karpenter-ctl\""), "{plan:?}");
    assert!(plan.stdout.contains("Plan: 0 to add, 1 to change, 0 to replace, 0 to delete."), "{plan:?}");
    ok(&env, &mut calls, &["apply", "s.toml", "--auto-approve"]);
    let moved = env.state("kap")["resources"]["karpenter_controller.main"]["outputs"]["association_id"].clone();
    assert_ne!(moved, association.as_str(), "a new association");
    let (eks, sqs, events, iam) = (env.emu.eks(), env.emu.sqs(), env.emu.events(), env.emu.iam());
    block_on(async move {
        let listed = eks.list_pod_identity_associations().cluster_name("kap-main").send().await.unwrap();
        let listed = listed.associations();
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!((listed[0].service_account(), listed[0].association_id()), (Some("karpenter-ctl"), moved.as_str()));
        let url = sqs.get_queue_url().queue_name("kap-main").send().await.unwrap().queue_url.unwrap();
        let q = sqs.list_queue_tags().queue_url(url).send().await.unwrap();
        let q = q.tags().unwrap();
        assert_eq!(
            (q.get("owner").map(String::as_str), q.get("cost").map(String::as_str)),
            (Some("ml-platform"), Some("gpu"))
        );
        let rule = events.describe_rule().name("kap-main-reserved").send().await.unwrap();
        let t = events.list_tags_for_resource().resource_arn(rule.arn().unwrap()).send().await.unwrap();
        assert!(t.tags().iter().any(|t| t.key() == "owner" && t.value() == "ml-platform"), "{t:?}");
        let r = iam.list_role_tags().role_name("kap-main-karpenter").send().await.unwrap();
        assert!(r.tags().iter().any(|t| t.key() == "cost" && t.value() == "gpu"), "{r:?}");
    });
    let again = logged(&env, &mut calls, &["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "in sync after the move: {again:?}");

    // Destroy leaves nothing; the queue name then stays blocked for a while (SQS: 60 s; here 20 s).
    env.emu.control("POST", "/_gpustack/sqs?deleted_recently_seconds=20");
    ok(&env, &mut calls, &["destroy", "s.toml", "--auto-approve"]);
    for call in ["eks:DeletePodIdentityAssociation", "eks:DeleteAccessEntry", "events:DeleteRule", "sqs:DeleteQueue"] {
        assert!(calls.contains(call), "{call} in {calls:?}");
    }
    gone(&env, "kap");

    let again = ok(&env, &mut calls, &["apply", "s.toml", "--auto-approve"]);
    assert!(again.stderr.contains("waiting for SQS to free the name kap-main"), "{again:?}");
    assert_eq!(rules(&env, "kap-main-", queue_arn), ["health", "rebalance", "reserved", "spot", "state"]);
    ok(&env, &mut calls, &["destroy", "s.toml", "--auto-approve"]);
    gone(&env, "kap");

    // Every call made is allowed by `gpustack policy`, which lets roles go to Pod Identity.
    let policy: Json = serde_json::from_str(&env.ok(&["policy", "s.toml"]).stdout).unwrap();
    let allowed: BTreeSet<String> = policy["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["Action"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()))
        .collect();
    let missing: Vec<&String> = calls.iter().filter(|c| !allowed.contains(*c)).collect();
    assert!(missing.is_empty(), "calls not in `gpustack policy`: {missing:?}");
    let text = policy.to_string();
    assert!(text.contains("pods.eks.amazonaws.com"), "{policy}");
    assert!(
        text.contains("arn:aws:sqs:us-west-2:*:kap-*") && text.contains("arn:aws:events:us-west-2:*:rule/kap-*"),
        "{policy}"
    );
}

/// Nothing of the stack is left: roles, queue, rules, cluster (and with it any association or entry).
fn gone(env: &Env, stack: &str) {
    assert_eq!(env.tagged(stack).total(), 0);
    let (iam, sqs, events, eks) = (env.emu.iam(), env.emu.sqs(), env.emu.events(), env.emu.eks());
    let stack = stack.to_string();
    block_on(async move {
        let roles = iam.list_roles().path_prefix(format!("/gpustack/{stack}/")).send().await.unwrap();
        assert!(roles.roles().is_empty(), "{:?}", roles.roles());
        let queues = sqs.list_queues().queue_name_prefix(&stack).send().await.unwrap();
        assert!(queues.queue_urls().is_empty(), "{:?}", queues.queue_urls());
        let rules = events.list_rules().name_prefix(&stack).send().await.unwrap();
        assert!(rules.rules().is_empty(), "{:?}", rules.rules());
        assert!(eks.list_clusters().send().await.unwrap().clusters().is_empty());
    });
}

/// `gpustack validate` of a stack text, offline: (exit code, stderr).
fn validate(text: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), text).unwrap();
    let out = std::process::Command::new(bin())
        .args(["validate", "s.toml"])
        .current_dir(dir.path())
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn refused(text: &str, message: &str, help: &str) {
    let (code, err) = validate(text);
    assert_eq!(code, 1, "expected a refusal:\n{err}\n{text}");
    assert!(err.contains(message), "expected {message:?} in:\n{err}");
    assert!(err.contains(help), "expected help {help:?} in:\n{err}");
}

fn accepted(text: &str) {
    let (code, err) = validate(text);
    assert_eq!(code, 0, "expected the stack to validate:\n{err}\n{text}");
}

fn valid() -> String {
    stack("v", "1.6.8", &ops_policies())
}

#[test]
fn validate_access_entries_need_an_api_authentication_mode() {
    let text = valid().replace("authentication_mode = \"API\"", "authentication_mode = \"CONFIG_MAP\"");
    refused(&text, "but `eks_cluster.main` is CONFIG_MAP", "set authentication_mode = \"API\"");
    accepted(&valid().replace("authentication_mode = \"API\"", "authentication_mode = \"API_AND_CONFIG_MAP\""));
}

#[test]
fn validate_no_access_entry_for_a_managed_node_groups_role() {
    let group = r#"
[node_group.system]
cluster        = "${eks_cluster.main.name}"
node_role      = "${iam_role.karpenter_node.arn}"
subnets        = ["${subnet.a.id}"]
instance_types = ["m6i.large"]
scaling        = { min = 1, desired = 1, max = 2 }
"#;
    refused(
        &format!("{}{group}", valid()),
        "enters the node role of `node_group.system`",
        "give Karpenter's nodes a role of their own",
    );
    accepted(&format!("{}{}", valid(), group.replace("iam_role.karpenter_node.arn", "iam_role.node.arn")));
}

#[test]
fn validate_ec2_linux_entries_take_no_policies() {
    let text = valid().replace(
        "type          = \"EC2_LINUX\"",
        &format!("type          = \"EC2_LINUX\"\npolicies      = [{{ policy_arn = \"{VIEW}\", scope = \"cluster\" }}]"),
    );
    refused(&text, "is EC2_LINUX, which takes no access policies", "remove `policies`");
    accepted(&valid());
    refused(
        &valid().replace("scope = \"cluster\"", "scope = \"everything\""),
        "an access policy's scope is \"cluster\" or a list of namespaces",
        "scope = [\"team-a\", \"team-b\"]",
    );
}

#[test]
fn validate_the_controller_needs_the_pod_identity_agent() {
    let without = valid().replace("addon   = \"eks-pod-identity-agent\"", "addon   = \"vpc-cni\"");
    refused(
        &without,
        "has no eks-pod-identity-agent add-on",
        "add [eks_addon.pod_identity] with cluster = \"${eks_cluster.main.name}\" and addon = \"eks-pod-identity-agent\"",
    );
    accepted(&valid());
}

#[test]
fn validate_the_controller_needs_karpenter_1_6() {
    // Issue 18 item 23: 1.6 is the floor for reserved capacity of both kinds, not a Capacity
    // Block requirement ("In v1.6, this support was expanded to include EC2 Capacity Blocks";
    // ReservedCapacity beta, on by default, from v1.6.x: Karpenter docs v1.14 tasks/odcrs.md,
    // reference/settings.md).
    refused(
        &valid().replace("\"1.6.8\"", "\"1.5.3\""),
        "Karpenter 1.5.3 is older than 1.6, the oldest gpustack supports",
        "the first release with reserved capacity (ODCRs and Capacity Blocks) on by default",
    );
    assert!(!validate(&valid().replace("\"1.6.8\"", "\"1.5.3\"")).1.contains("the first to use Capacity Blocks"));
    refused(
        &valid().replace("\"1.6.8\"", "\"v1.6.8\""),
        "version \"v1.6.8\" is not a Karpenter version",
        "without a leading v",
    );
    accepted(&valid().replace("\"1.6.8\"", "\"1.6.0\""));
    accepted(&valid().replace("\"1.6.8\"", "\"1.14.1\""));
}

/// Issue 18 item 8 / audit m3: a release newer than the newest gpustack has checked gets the
/// 1.12–1.14 policy silently; it is now a warning (the stack still validates).
#[test]
fn validate_a_controller_newer_than_verified_is_a_warning() {
    let (code, err) = validate(&valid().replace("\"1.6.8\"", "\"1.15.0\""));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("Karpenter 1.15.0 is newer than 1.14, the newest gpustack has been checked against"), "{err}");
    assert!(!validate(&valid().replace("\"1.6.8\"", "\"1.14.1\"")).1.contains("is newer than"));
}

#[test]
fn validate_the_controller_needs_an_ec2_node_role() {
    let text =
        valid().replace("node_role = \"${iam_role.karpenter_node.arn}\"", "node_role = \"${iam_role.cluster.arn}\"");
    refused(&text, "`iam_role.cluster` is trusted by eks.amazonaws.com, not by EC2", "service = \"ec2.amazonaws.com\"");
    let literal = valid().replace(
        "node_role = \"${iam_role.karpenter_node.arn}\"",
        "node_role = \"arn:aws:iam::123456789012:role/KarpenterNodeRole-main\"",
    );
    accepted(&literal);
    refused(
        &valid().replace("node_role = \"${iam_role.karpenter_node.arn}\"", "node_role = \"KarpenterNodeRole\""),
        "\"KarpenterNodeRole\" is not an IAM role ARN",
        "or write its ARN",
    );
}

#[test]
fn validate_the_controllers_names_fit_aws_limits() {
    // Stack "v": the role v-<name>-karpenter and the rule v-<name>-rebalance are 12 longer
    // than the name, the queue v-<name> 2 longer.
    let named =
        |n: usize| valid().replace("[karpenter_controller.main]", &format!("[karpenter_controller.{}]", "k".repeat(n)));
    refused(&named(55), "its IAM role name would be 67 characters", "by 3");
    refused(&named(55), "its EventBridge rule name would be 67 characters", "by 3");
    refused(&named(79), "its SQS queue name would be 81 characters", "by 1");
    accepted(&named(52));
    let taken = format!("{}\n[iam_role.main-karpenter]\nservice = \"ec2.amazonaws.com\"\n", valid());
    refused(&taken, "would both make the IAM role v-main-karpenter", "rename one of the two resources");
}
