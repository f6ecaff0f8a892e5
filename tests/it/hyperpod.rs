//! SageMaker HyperPod on the stack's EKS cluster, with Flexible Training Plans bought as
//! safely as Capacity Blocks: the plan shows the offering and its price, the price guard,
//! `--auto-approve` alone never buys, exactly one purchase after a lost state or a kill -9,
//! retain on destroy and take back; the shipped example applied (the cluster with its EKS
//! orchestrator and the plan's ARN), in sync, a count change in place, manifests that
//! validate, and a destroy that leaves only the retained plan. Read back from the emulator
//! through the Rust SDK; the emulator counts purchases.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{Env, block_on};
use crate::karpenter::{files, in_days, repo, validate_manifests};

fn plan_stack(name: &str, max_usd: u32) -> String {
    format!(
        r#"[stack]
name   = "{name}"
region = "us-west-2"

[training_plan.base]
instance_type   = "ml.p5.48xlarge"
instance_count  = 2
duration_hours  = 48
start_after     = "{}"
start_before    = "{}"
max_upfront_usd = {max_usd}

[output]
plan = "${{training_plan.base.arn}}"
ends = "${{training_plan.base.end_date}}"
"#,
        in_days(1),
        in_days(6)
    )
}

/// Every training plan in the emulator, as (name, status, tags).
fn plans(env: &Env) -> Vec<(String, String, Vec<(String, String)>)> {
    let sm = env.emu.sagemaker();
    block_on(async move {
        let out = sm.list_training_plans().send().await.unwrap();
        let mut all = vec![];
        for p in out.training_plan_summaries() {
            let arn = p.training_plan_arn().unwrap().to_string();
            let tags = sm.list_tags().resource_arn(&arn).send().await.unwrap();
            let tags =
                tags.tags().iter().map(|t| (t.key().unwrap().to_string(), t.value().unwrap().to_string())).collect();
            all.push((p.training_plan_name().unwrap().to_string(), p.status().unwrap().as_str().to_string(), tags));
        }
        all
    })
}

#[test]
fn a_training_plan_is_priced_approved_bought_once_retained_and_taken_back() {
    let env = Env::new();
    env.write("t.toml", &plan_stack("tp", 40000));

    // The plan shows the purchase: offering, zone, dates, price, non-refundable.
    let plan = env.ok(&["plan", "t.toml"]);
    assert!(plan.stdout.contains("+ training_plan.base                 purchase (non-refundable)"), "{plan:?}");
    assert!(plan.stdout.contains("$ 2× ml.p5.48xlarge in us-west-2"), "{plan:?}");
    assert!(plan.stdout.contains("USD up front (max 40000), offering tpo-"), "{plan:?}");
    assert!(plan.stdout.contains("Purchases: 1 training plan, $"), "{plan:?}");
    let json: Value = serde_json::from_str(&env.ok(&["plan", "t.toml", "--json"]).stdout).unwrap();
    let price = json["changes"][0]["purchase"]["upfront_usd"].as_f64().unwrap();
    assert!(price > 0.0 && json["purchases_usd"].as_f64() == Some(price), "{json}");

    // The price guard refuses at plan time, naming the file.
    env.write("cheap.toml", &plan_stack("tp", 10));
    let guard = env.run(&["plan", "cheap.toml"]);
    assert_eq!(guard.code, 1, "{guard:?}");
    assert!(guard.stderr.contains("up front, more than max_upfront_usd = 10"), "{guard:?}");
    assert!(guard.stderr.contains("cheap.toml:"), "{guard:?}");

    // --auto-approve alone does not buy.
    let refused = env.run(&["apply", "t.toml", "--auto-approve"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(refused.stderr.contains("this plan buys 1 training plan for $"), "{refused:?}");
    assert!(refused.stderr.contains("--auto-approve alone does not buy"), "{refused:?}");
    assert_eq!(env.emu.training_plan_purchases(), 0);

    let bought = env.ok(&["apply", "t.toml", "--auto-approve", "--approve-purchases"]);
    assert!(bought.stderr.contains("training_plan.base: bought arn:aws:sagemaker:us-west-2:"), "{bought:?}");
    assert_eq!(env.emu.training_plan_purchases(), 1);
    let st = env.state("tp");
    let arn = st["resources"]["training_plan.base"]["id"].as_str().unwrap().to_string();
    let out = &st["resources"]["training_plan.base"]["outputs"];
    assert!((out["upfront_usd"].as_f64().unwrap() - price).abs() < 0.01, "{out}");
    assert_eq!(out["state"], "Scheduled", "{out}");
    let name = out["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("tp-base-"), "{name}");
    let (_, _, tags) = plans(&env).into_iter().find(|p| p.0 == name).unwrap();
    assert!(tags.contains(&("gpustack:address".into(), "training_plan.base".into())), "{tags:?}");
    assert_eq!(env.run(&["plan", "t.toml", "--detailed-exitcode"]).code, 0, "in sync after the purchase");

    // The state file is lost: the plan is found by its tags and adopted, not bought again.
    std::fs::remove_file(env.path("state/tp.json")).unwrap();
    let plan = env.ok(&["plan", "t.toml"]);
    assert!(plan.stdout.contains("= training_plan.base"), "{plan:?}");
    assert!(!plan.stdout.contains("Purchases:"), "{plan:?}");
    env.ok(&["apply", "t.toml", "--auto-approve", "--approve-purchases"]);
    assert_eq!(env.emu.training_plan_purchases(), 1, "never twice");
    assert_eq!(env.state("tp")["resources"]["training_plan.base"]["id"], arn.as_str());

    // A bought plan cannot change.
    env.write("more.toml", &plan_stack("tp", 40000).replace("instance_count  = 2", "instance_count  = 4"));
    let change = env.run(&["plan", "more.toml"]);
    assert_eq!(change.code, 1, "{change:?}");
    assert!(change.stderr.contains("was bought and cannot change: instance_count"), "{change:?}");
    assert!(change.stderr.contains("a training plan cannot be modified or cancelled"), "{change:?}");

    // Destroy retains it: shown with its end date, dropped from state, still scheduled.
    let plan = env.ok(&["plan", "t.toml", "--destroy"]);
    assert!(plan.stdout.contains(&format!("retain {arn} (cannot be cancelled: runs until ")), "{plan:?}");
    assert!(plan.stdout.contains("Retained: 1 training plan cannot be cancelled"), "{plan:?}");
    env.ok(&["destroy", "t.toml", "--auto-approve"]);
    assert!(env.state("tp")["resources"].as_object().unwrap().is_empty());
    let (_, status, tags) = plans(&env).into_iter().find(|p| p.0 == name).unwrap();
    assert_eq!(status, "Scheduled", "not cancelled");
    assert!(tags.contains(&("gpustack:retained-from".into(), "tp training_plan.base".into())), "{tags:?}");
    assert!(!tags.iter().any(|(k, _)| k == "gpustack:stack"), "{tags:?}");
    env.write("empty.toml", "[stack]\nname = \"tp\"\nregion = \"us-west-2\"\n");
    let empty = env.run(&["plan", "empty.toml", "--detailed-exitcode"]);
    assert_eq!(empty.code, 0, "a retained plan is no stray: {empty:?}");

    // Declaring it again takes the retained plan back instead of buying.
    let again = env.ok(&["plan", "t.toml"]);
    assert!(!again.stdout.contains("Purchases:"), "{again:?}");
    env.ok(&["apply", "t.toml", "--auto-approve", "--approve-purchases"]);
    assert_eq!(env.emu.training_plan_purchases(), 1);
    assert_eq!(env.state("tp")["resources"]["training_plan.base"]["id"], arn.as_str());
}

/// Runs `apply t.toml` and kills it (-9) right after `CreateTrainingPlan` went through,
/// before gpustack recorded the plan: the state has only the journal's pending entry.
fn killed_right_after_the_purchase(env: &Env, stack: &str) {
    // Answers come 400 ms after the emulator acted: the kill lands between the purchase and
    // gpustack recording it.
    env.emu.control("POST", "/_gpustack/latency?ms=400&after=1");
    let mut child = env
        .command(&["apply", "t.toml", "--auto-approve", "--approve-purchases"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while env.emu.training_plan_purchases() == 0 {
        assert!(child.try_wait().unwrap().is_none(), "the apply ended before buying");
        assert!(Instant::now() < deadline, "no purchase happened");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    env.emu.control("POST", "/_gpustack/latency?ms=0&after=1");
    let st = env.state(stack);
    assert!(st["resources"].get("training_plan.base").is_none(), "killed before recording: {st}");
    assert_eq!(st["pending"].as_array().map(Vec::len), Some(1), "the purchase is journaled: {st}");
}

#[test]
fn kill_9_right_after_create_training_plan_never_buys_twice() {
    let env = Env::new();
    env.write("t.toml", &plan_stack("k9tp", 40000));
    killed_right_after_the_purchase(&env, "k9tp");

    let again = env.ok(&["apply", "t.toml", "--auto-approve", "--approve-purchases"]);
    assert_eq!(env.emu.training_plan_purchases(), 1, "never twice: {again:?}");
    let st = env.state("k9tp");
    assert!(st["resources"]["training_plan.base"]["id"].as_str().unwrap().contains(":training-plan/k9tp-base-"));
    assert!(st.get("pending").is_none(), "{st}");
    assert_eq!(env.run(&["plan", "t.toml", "--detailed-exitcode"]).code, 0);
}

/// examples/hybrid-hyperpod.toml as shipped, in the two steps the README describes: a plan
/// of the whole stack is refused (HyperPod's chart must be installed between the EKS cluster
/// and the HyperPod cluster, review r18 MAJOR-2) and buys nothing; `apply --target
/// eks_cluster.main` creates the EKS cluster; then apply buys the training plan once and
/// creates the HyperPod cluster on the EKS cluster with the plan's ARN, a second plan shows no changes, a count change updates in
/// place, the manifests validate, destroy leaves only the retained plan, and every call made
/// is in `gpustack policy`.
#[test]
fn the_shipped_hybrid_example_applies_updates_in_place_renders_and_destroys() {
    let env = Env::new();
    let example = repo().join("examples/hybrid-hyperpod.toml");
    let text = std::fs::read_to_string(&example).unwrap();
    env.write("h.toml", &text);
    let (after, before) = (format!("plan_after={}", in_days(1)), format!("plan_before={}", in_days(7)));
    let vars = ["--var", after.as_str(), "--var", before.as_str()];
    let run = |cmd: &[&str]| env.ok(&[cmd, &["h.toml"][..], &vars[..]].concat());
    env.emu.reset_requests();

    // One apply for everything: refused at plan and at apply, nothing bought or created.
    for cmd in [&["plan"][..], &["apply", "--auto-approve", "--approve-purchases"][..]] {
        let refused = env.run(&[cmd, &["h.toml"][..], &vars[..]].concat());
        assert_eq!(refused.code, 1, "{refused:?}");
        assert!(
            refused.stderr.contains("`hyperpod_cluster.baseline` would be created and `training_plan.baseline` bought by the same apply that creates its EKS cluster `eks_cluster.main`"),
            "{refused:?}"
        );
        assert!(refused.stderr.contains("apply with --target eks_cluster.main first"), "{refused:?}");
    }
    assert_eq!(env.emu.training_plan_purchases(), 0);
    assert!(!env.emu.requests().iter().any(|(_, a)| a == "CreateCluster"));

    // Step 1: the EKS cluster (and what it needs); the chart would be installed now.
    run(&["apply", "--target", "eks_cluster.main", "--auto-approve"]);
    assert_eq!(env.emu.training_plan_purchases(), 0);
    // Step 2: the rest.
    let plan = run(&["plan"]);
    assert!(plan.stdout.contains("+ training_plan.baseline             purchase (non-refundable)"), "{plan:?}");
    assert!(plan.stdout.contains("(searched in us-west-2a, the zone of hyperpod_cluster.baseline)"), "{plan:?}");
    assert!(plan.stdout.contains("HyperPod needs its dependencies Helm chart"), "{plan:?}");

    let apply = run(&["apply", "--auto-approve", "--approve-purchases"]);
    assert!(apply.stdout.contains("Apply complete"), "{apply:?}");
    assert!(apply.stderr.contains("hyperpod_cluster.baseline: Creating: train"), "progress: {apply:?}");
    assert_eq!(env.emu.training_plan_purchases(), 1);
    let st = env.state("hybrid-dev");
    let out = |a: &str, o: &str| st["resources"][a]["outputs"][o].as_str().unwrap().to_string();
    let (eks_arn, plan_arn, hp_arn) =
        (out("eks_cluster.main", "arn"), out("training_plan.baseline", "arn"), out("hyperpod_cluster.baseline", "arn"));
    assert_eq!(out("training_plan.baseline", "availability_zone"), "us-west-2a");

    // The cluster as SageMaker has it: the EKS orchestrator, the plan, labels, checks.
    let sm = env.emu.sagemaker();
    let name = out("hyperpod_cluster.baseline", "name");
    let c = block_on(async { sm.describe_cluster().cluster_name(&name).send().await.unwrap() });
    assert_eq!(c.cluster_arn(), Some(hp_arn.as_str()));
    assert_eq!(c.orchestrator().and_then(|o| o.eks()).and_then(|e| e.cluster_arn()), Some(eks_arn.as_str()));
    assert_eq!(c.node_recovery().map(|r| r.as_str()), Some("Automatic"));
    let g = &c.instance_groups()[0];
    assert_eq!(g.instance_group_name(), Some("train"));
    assert_eq!(g.training_plan_arn(), Some(plan_arn.as_str()));
    assert_eq!(g.target_count(), Some(2));
    assert_eq!(g.threads_per_core(), Some(1));
    assert_eq!(g.on_start_deep_health_checks().len(), 2);
    let labels =
        g.kubernetes_config().and_then(|k| k.current_labels().or(k.desired_labels())).cloned().unwrap_or_default();
    assert_eq!(labels.get("gpustack.io/capacity").map(String::as_str), Some("baseline"), "{g:?}");

    let again = env.run(&[&["plan", "--detailed-exitcode", "h.toml"][..], &vars[..]].concat());
    assert_eq!(again.code, 0, "in sync after apply: {again:?}");

    // One instance fewer: UpdateCluster in place, nothing created or deleted.
    env.write("h.toml", &text.replace("instance_count     = 2", "instance_count     = 1"));
    let plan = run(&["plan"]);
    assert!(plan.stdout.contains("~ hyperpod_cluster.baseline          update in place"), "{plan:?}");
    assert!(plan.stdout.contains("instance_groups.train.instance_count: 2 → 1"), "{plan:?}");
    assert!(plan.stdout.contains("Plan: 0 to add, 1 to change, 0 to replace, 0 to delete."), "{plan:?}");
    env.emu.reset_requests();
    run(&["apply", "--auto-approve"]);
    let calls = env.emu.requests();
    assert!(calls.iter().any(|(s, a)| s == "sagemaker" && a == "UpdateCluster"), "{calls:?}");
    assert!(!calls.iter().any(|(_, a)| a == "CreateCluster" || a == "DeleteCluster"), "{calls:?}");
    let c = block_on(async { sm.describe_cluster().cluster_name(&name).send().await.unwrap() });
    assert_eq!(c.cluster_arn(), Some(hp_arn.as_str()), "the same cluster");
    assert_eq!(c.instance_groups()[0].target_count(), Some(1));
    assert_eq!(env.run(&[&["plan", "--detailed-exitcode", "h.toml"][..], &vars[..]].concat()).code, 0);

    // The Kubernetes side: Karpenter pools, priority classes, the HyperPod chart's values.
    run(&["manifests", "--out", "k8s"]);
    let written = files(&env.path("k8s"));
    for f in
        ["karpenter/spot.yaml", "karpenter/ondemand.yaml", "priority-classes.yaml", "hyperpod-dependencies/values.yaml"]
    {
        assert!(written.contains_key(f), "{f}: {:?}", written.keys());
    }
    let deps = String::from_utf8(written["hyperpod-dependencies/values.yaml"].clone()).unwrap();
    assert!(deps.contains("helm install hyperpod-dependencies") && deps.contains("checkout 011ca927"), "{deps}");
    let values: Value = serde_yaml_ng::from_str(&deps).unwrap();
    assert_eq!(values["nvidia-device-plugin"]["devicePlugin"]["enabled"], true);
    assert_eq!(values["aws-efa-k8s-device-plugin"]["devicePlugin"]["enabled"], true);
    assert_eq!(values["neuron-device-plugin"]["devicePlugin"]["enabled"], false);
    let (valid, report) = validate_manifests(&env.path("k8s"));
    assert!(valid, "{report}");

    // Destroy: everything goes but the training plan, which is retained until it ends.
    run(&["destroy", "--auto-approve"]);
    assert_eq!(env.tagged("hybrid-dev").total(), 0, "{:?}", env.tagged("hybrid-dev"));
    let clusters = block_on(async { sm.list_clusters().send().await.unwrap() });
    assert!(clusters.cluster_summaries().is_empty(), "{clusters:?}");
    let left = plans(&env);
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(left[0].2.contains(&("gpustack:retained-from".into(), "hybrid-dev training_plan.baseline".into())));
    assert_eq!(env.emu.training_plan_purchases(), 1);

    // Every call made is in the stack's `gpustack policy`.
    let policy: Value = serde_json::from_str(&run(&["policy"]).stdout).unwrap();
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
    // Audit m6: HyperPod's service-linked role only, not SageMaker's others.
    let linked = policy["Statement"].as_array().unwrap().iter().find(|s| s["Sid"] == "EksServiceLinkedRoles").unwrap();
    let names = &linked["Condition"]["StringEquals"]["iam:AWSServiceName"];
    assert!(names.as_array().unwrap().contains(&Value::from("hyperpod.sagemaker.amazonaws.com")), "{names}");
    assert!(!names.as_array().unwrap().contains(&Value::from("sagemaker.amazonaws.com")), "{names}");
}

/// The HyperPod rules, before any call, each on the shipped example with one thing wrong.
#[test]
fn hyperpod_mistakes_are_refused_before_any_call() {
    let env = Env::new();
    let text = std::fs::read_to_string(repo().join("examples/hybrid-hyperpod.toml")).unwrap();
    let cases: &[(&str, &str, &str)] = &[
        (
            "authentication_mode = \"API\"",
            "authentication_mode = \"CONFIG_MAP\"",
            "whose authentication_mode is CONFIG_MAP: HyperPod needs EKS access entries",
        ),
        (
            "instance_type      = \"ml.p5.48xlarge\"",
            "instance_type      = \"ml.p4d.24xlarge\"",
            "instance group train runs ml.p4d.24xlarge, but `training_plan.baseline` reserves ml.p5.48xlarge",
        ),
        (
            "instance_count     = 2",
            "instance_count     = 4",
            "instance group train asks for 4 instances on `training_plan.baseline`, which reserves 2",
        ),
        (
            "subnets         = [\"${subnet.private_a.id}\"]\nsecurity_groups = [\"${security_group.efa.id}\"",
            "subnets         = [\"${subnet.public_a.id}\"]\nsecurity_groups = [\"${security_group.efa.id}\"",
            "a public subnet: HyperPod clusters need private subnets",
        ),
        (
            "labels             = { \"gpustack.io/capacity\"",
            "labels             = { \"sagemaker.amazonaws.com/capacity\"",
            "uses a prefix HyperPod reserves",
        ),
        (
            "target          = \"hyperpod-cluster\"",
            "target          = \"training-job\"",
            "which is bought for training-job, not HyperPod",
        ),
        (
            "[eks_access_entry.karpenter_nodes]",
            "[eks_access_entry.hyperpod]\ncluster       = \"${eks_cluster.main.name}\"\nprincipal_arn = \"${iam_role.hyperpod.arn}\"\ntype          = \"STANDARD\"\n\n[eks_access_entry.karpenter_nodes]",
            "which has an access entry for it, which HyperPod makes itself",
        ),
        ("duration_hours  = 336", "duration_hours  = 100", "`duration_hours` = 100 is not a training plan length"),
        // Audit m3: HyperPod's Kubernetes versions and VPC CNI, refused before any purchase.
        ("k8s_version    = \"1.33\"", "k8s_version    = \"1.29\"", "Kubernetes 1.29, which HyperPod does not support"),
        (
            "addon   = \"vpc-cni\"",
            "addon   = \"vpc-cni\"\nversion = \"v1.18.1-eksbuild.1\"",
            "whose VPC CNI add-on is v1.18.1-eksbuild.1; HyperPod needs 1.18.3 or later",
        ),
        // Item 10 (issue 18): a cluster on a plan runs in one zone, the plan's.
        (
            "subnets         = [\"${subnet.private_a.id}\"]\nsecurity_groups = [\"${security_group.efa.id}\"",
            "subnets         = [\"${subnet.private_a.id}\", \"${subnet.private_b.id}\"]\nsecurity_groups = [\"${security_group.efa.id}\"",
            "but its subnets are in us-west-2a and us-west-2b: HyperPod picks one of them",
        ),
        (
            "target          = \"hyperpod-cluster\"",
            "target          = \"hyperpod-cluster\"\navailability_zone = \"us-west-2b\"",
            "`hyperpod_cluster.baseline` runs on `training_plan.baseline`, pinned to us-west-2b, but its subnets are in us-west-2a",
        ),
        (
            "instance_count  = 2\nduration_hours",
            "instance_count  = 3\nduration_hours",
            "`instance_count` = 3 is not offered for training plans",
        ),
        (
            "\"ml.p5.48xlarge\"\ninstance_count  = 2",
            "\"p5.48xlarge\"\ninstance_count  = 2",
            "instance_type = \"ml.p5.48xlarge\"",
        ),
    ];
    for (from, to, expected) in cases {
        assert!(text.contains(from), "the example has {from:?}");
        env.write("bad.toml", &text.replacen(from, to, 1));
        let r = env.run(&["validate", "bad.toml"]);
        assert_eq!(r.code, 1, "{to}: {r:?}");
        assert!(r.stderr.contains(expected), "{to}: expected {expected:?} in {r:?}");
        assert!(r.stderr.contains("bad.toml:"), "{r:?}");
    }
    // p5 groups need an EFA security group among the cluster's.
    let no_efa = text.replace("efa         = true", "efa         = false").replace(
        "\"${security_group.efa.id}\", \"${eks_cluster.main.security_group_id}\"",
        "\"${security_group.efa.id}\"",
    );
    env.write("noefa.toml", &no_efa);
    let r = env.run(&["validate", "noefa.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("runs ml.p5.48xlarge with EFA, but none of its security groups allows EFA traffic"),
        "{r:?}"
    );

    // Audit m9: a training-job plan is allowed, but gpustack says nothing here can use it.
    env.write(
        "job.toml",
        &plan_stack("job", 40000).replace("max_upfront_usd", "target          = \"training-job\"\nmax_upfront_usd"),
    );
    let r = env.run(&["validate", "job.toml"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("nothing gpustack runs can use this plan"), "{r:?}");

    // A bucket not named sagemaker-* is a warning, not an error.
    env.write("warn.toml", &text.replace("s3://sagemaker-hybrid-lifecycle/", "s3://team-lifecycle/"));
    let r = env.run(&["validate", "warn.toml"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("a bucket not named sagemaker-*"), "{r:?}");
}

/// Item 9 (issue 18): a HyperPod cluster changes in place for what `UpdateCluster` does in
/// place, and is read back whole. Adding a group is a new name in `InstanceGroups` ("To add
/// a new instance group, specify a new name not existing in your cluster", SageMaker DG
/// `sagemaker-hyperpod-eks-operate-cli-command-update-cluster`); removing one is
/// `InstanceGroupsToDelete` (DG `smcluster-scale-down`); the EBS size is "available when
/// creating or updating instance groups" (DG `sagemaker-hyperpod-eks-prerequisites`). A
/// group `DescribeCluster` reports without `TargetCount` (optional in botocore's
/// `ClusterInstanceGroupDetails`) is still that group, a cluster adopted after a lost state
/// plans no change, and a replacement is refused unless `prevent_destroy = false` is written.
#[test]
fn a_hyperpod_cluster_adds_and_removes_groups_in_place_and_is_never_replaced_silently() {
    let env = Env::new();
    let text = std::fs::read_to_string(repo().join("examples/hybrid-hyperpod.toml")).unwrap();
    env.write("h.toml", &text);
    let (after, before) = (format!("plan_after={}", in_days(1)), format!("plan_before={}", in_days(7)));
    let vars = ["--var", after.as_str(), "--var", before.as_str()];
    let run = |cmd: &[&str]| env.ok(&[cmd, &["h.toml"][..], &vars[..]].concat());
    let code = |cmd: &[&str]| env.run(&[cmd, &["h.toml"][..], &vars[..]].concat());
    // The opt-out: one apply for the EKS cluster, the plan and the HyperPod cluster.
    run(&["apply", "--auto-approve", "--approve-purchases", "--hyperpod-chart-installed"]);
    let st = env.state("hybrid-dev");
    let name = st["resources"]["hyperpod_cluster.baseline"]["outputs"]["name"].as_str().unwrap().to_string();
    let arn = st["resources"]["hyperpod_cluster.baseline"]["id"].as_str().unwrap().to_string();
    let sm = env.emu.sagemaker();
    let groups = || {
        let c = block_on(async { sm.describe_cluster().cluster_name(&name).send().await.unwrap() });
        assert_eq!(c.cluster_arn(), Some(arn.as_str()), "the same cluster");
        c.instance_groups().to_vec()
    };
    let only_updates = |what: &str| {
        let calls = env.emu.requests();
        assert!(calls.iter().any(|(_, a)| a == "UpdateCluster"), "{what}: {calls:?}");
        assert!(!calls.iter().any(|(_, a)| a == "CreateCluster" || a == "DeleteCluster"), "{what}: {calls:?}");
    };

    // A group without TargetCount in DescribeCluster: still that group, no change.
    env.emu.control("POST", "/_gpustack/sagemaker?omit_target_count=1");
    assert_eq!(code(&["plan", "--detailed-exitcode"]).code, 0, "a group without TargetCount is still that group");
    env.emu.control("POST", "/_gpustack/sagemaker?omit_target_count=0");

    // The state is lost: the cluster is adopted by its tags and read back whole (other
    // kinds' adoption is not this test's business: the state comes back afterwards).
    let kept = std::fs::read(env.path("state/hybrid-dev.json")).unwrap();
    std::fs::remove_file(env.path("state/hybrid-dev.json")).unwrap();
    let plan = run(&["plan"]);
    assert!(plan.stdout.contains("= hyperpod_cluster.baseline          record in state"), "adopted: {plan:?}");
    assert!(!plan.stdout.contains("~ hyperpod_cluster.baseline"), "{plan:?}");
    std::fs::write(env.path("state/hybrid-dev.json"), kept).unwrap();

    // A group added: UpdateCluster, nothing deleted.
    let infer = "\n[hyperpod_cluster.baseline.instance_groups.infer]\ninstance_type  = \"ml.m5.xlarge\"\ninstance_count = 1\nexecution_role = \"${iam_role.hyperpod.arn}\"\nlifecycle      = { source_s3_uri = \"${var.lifecycle_s3}\", on_create = \"on_create.sh\" }\n";
    let with_infer = text.replace("\n# --- Burst: Karpenter", &format!("{infer}\n# --- Burst: Karpenter"));
    env.write("h.toml", &with_infer);
    let plan = run(&["plan"]);
    assert!(plan.stdout.contains("~ hyperpod_cluster.baseline          update in place"), "{plan:?}");
    assert!(plan.stdout.contains("Plan: 0 to add, 1 to change, 0 to replace, 0 to delete."), "{plan:?}");
    env.emu.reset_requests();
    run(&["apply", "--auto-approve"]);
    only_updates("adding a group");
    assert_eq!(groups().len(), 2);
    assert_eq!(code(&["plan", "--detailed-exitcode"]).code, 0);

    // The EBS volume grows in place.
    env.write("h.toml", &with_infer.replace("volume_size_gb     = 500", "volume_size_gb     = 800"));
    let plan = run(&["plan"]);
    assert!(plan.stdout.contains("instance_groups.train.volume_size_gb: 500 → 800"), "{plan:?}");
    env.emu.reset_requests();
    run(&["apply", "--auto-approve"]);
    only_updates("a larger volume");

    // The group removed again: InstanceGroupsToDelete.
    env.write("h.toml", &text.replace("volume_size_gb     = 500", "volume_size_gb     = 800"));
    env.emu.reset_requests();
    run(&["apply", "--auto-approve"]);
    only_updates("removing a group");
    let left: Vec<_> = groups().iter().map(|g| g.instance_group_name().unwrap().to_string()).collect();
    assert_eq!(left, ["train"]);

    // A change HyperPod cannot make in place is refused unless the file consents.
    let other_role = text
        .replace("volume_size_gb     = 500", "volume_size_gb     = 800")
        .replace("threads_per_core   = 1", "threads_per_core   = 2");
    env.write("h.toml", &other_role);
    let refused = code(&["plan"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains("`hyperpod_cluster.baseline` would be deleted and created again (its instances and their jobs stop) because instance_groups.train.threads_per_core cannot change in place"),
        "{refused:?}"
    );
    assert!(refused.stderr.contains("write prevent_destroy = false under [hyperpod_cluster.baseline]"), "{refused:?}");
    // Review r18 minor-7: the in-place route for a group's immutable field.
    assert!(
        refused.stderr.contains("revert instance group train and add a group under a new name with the new value (added in place), then remove train in a later apply (deleted in place with InstanceGroupsToDelete)"),
        "{refused:?}"
    );
    env.write(
        "h.toml",
        &other_role.replace("[hyperpod_cluster.baseline]\n", "[hyperpod_cluster.baseline]\nprevent_destroy = false\n"),
    );
    let consented = run(&["plan"]);
    assert!(consented.stdout.contains("hyperpod_cluster.baseline"), "{consented:?}");
    assert!(consented.stdout.contains("1 to replace"), "{consented:?}");
}

/// A HyperPod cluster in an existing VPC (literal subnet ids) on a training plan.
fn existing_vpc_stack(subnet: &str, zone_line: &str, (after, before): &(String, String)) -> String {
    format!(
        r#"[stack]
name   = "lit"
region = "us-west-2"

[training_plan.base]
instance_type   = "ml.p5.48xlarge"
instance_count  = 2
duration_hours  = 48
start_after     = "{after}"
start_before    = "{before}"
max_upfront_usd = 40000
{zone_line}
[hyperpod_cluster.main]
eks_cluster     = "arn:aws:eks:us-west-2:123456789012:cluster/existing"
subnets         = ["{subnet}"]
security_groups = ["sg-0123456789abcdef0"]

[hyperpod_cluster.main.instance_groups.train]
instance_type  = "ml.p5.48xlarge"
instance_count = 2
execution_role = "arn:aws:iam::123456789012:role/hyperpod"
lifecycle      = {{ source_s3_uri = "s3://sagemaker-lc/", on_create = "on_create.sh" }}
training_plan  = "${{training_plan.base.arn}}"
"#
    )
}

/// Item 10 (issue 18): a training plan is bought in the zone its HyperPod cluster will use,
/// because "Make sure your cluster's configuration matches the Availability Zone (AZ)
/// specified in the training plan" (SageMaker DG `training-plan-utilization-for-hyperpod`).
/// A literal subnet id is resolved to its zone (DescribeSubnets) before pricing, and once the
/// plan is bought, a cluster subnet in another zone is refused.
#[test]
fn a_training_plan_is_bought_in_the_zone_of_its_clusters_literal_subnets() {
    let env = Env::new();
    let ec2 = env.emu.ec2();
    let (c, a) = block_on(async {
        let vpc = ec2.create_vpc().cidr_block("10.77.0.0/16").send().await.unwrap();
        let vpc = vpc.vpc().unwrap().vpc_id().unwrap().to_string();
        let mut ids = vec![];
        for (cidr, zone) in [("10.77.1.0/24", "us-west-2c"), ("10.77.2.0/24", "us-west-2a")] {
            let s = ec2.create_subnet().vpc_id(&vpc).cidr_block(cidr).availability_zone(zone).send().await.unwrap();
            ids.push(s.subnet().unwrap().subnet_id().unwrap().to_string());
        }
        // A way out for the private subnets (the egress rule reads their route table at plan
        // time): a NAT gateway in a public subnet, routed from the VPC's main table.
        let igw = ec2.create_internet_gateway().send().await.unwrap();
        let igw = igw.internet_gateway().unwrap().internet_gateway_id().unwrap().to_string();
        ec2.attach_internet_gateway().internet_gateway_id(&igw).vpc_id(&vpc).send().await.unwrap();
        let public = ec2.create_subnet().vpc_id(&vpc).cidr_block("10.77.9.0/24").send().await.unwrap();
        let public = public.subnet().unwrap().subnet_id().unwrap().to_string();
        let rt = ec2.create_route_table().vpc_id(&vpc).send().await.unwrap();
        let rt = rt.route_table().unwrap().route_table_id().unwrap().to_string();
        ec2.create_route()
            .route_table_id(&rt)
            .destination_cidr_block("0.0.0.0/0")
            .gateway_id(&igw)
            .send()
            .await
            .unwrap();
        ec2.associate_route_table().route_table_id(&rt).subnet_id(&public).send().await.unwrap();
        let eip = ec2.allocate_address().domain(aws_sdk_ec2::types::DomainType::Vpc).send().await.unwrap();
        let nat = ec2
            .create_nat_gateway()
            .subnet_id(&public)
            .allocation_id(eip.allocation_id().unwrap())
            .send()
            .await
            .unwrap();
        let nat = nat.nat_gateway().unwrap().nat_gateway_id().unwrap().to_string();
        let main = ec2
            .describe_route_tables()
            .filters(aws_sdk_ec2::types::Filter::builder().name("vpc-id").values(&vpc).build())
            .filters(aws_sdk_ec2::types::Filter::builder().name("association.main").values("true").build())
            .send()
            .await
            .unwrap();
        let main = main.route_tables()[0].route_table_id().unwrap().to_string();
        ec2.create_route()
            .route_table_id(&main)
            .destination_cidr_block("0.0.0.0/0")
            .nat_gateway_id(&nat)
            .send()
            .await
            .unwrap();
        (ids[0].clone(), ids[1].clone())
    });
    let window = (in_days(1), in_days(6));
    env.write("l.toml", &existing_vpc_stack(&c, "", &window));
    let plan = env.ok(&["plan", "l.toml"]);
    assert!(plan.stdout.contains("$ 2× ml.p5.48xlarge in us-west-2c"), "the subnet's zone, not the cheapest: {plan:?}");
    assert!(plan.stdout.contains("(searched in us-west-2c, the zone of hyperpod_cluster.main)"), "{plan:?}");

    // Pinned: the plan searches only there (and the rules keep the cluster with it).
    env.write("pinned.toml", &existing_vpc_stack(&c, "availability_zone = \"us-west-2c\"\n", &window));
    let plan = env.ok(&["plan", "pinned.toml", "--target", "training_plan.base"]);
    assert!(plan.stdout.contains("$ 2× ml.p5.48xlarge in us-west-2c"), "{plan:?}");

    // Literal subnets in two zones: HyperPod picks one, so no zone is safe to buy in.
    env.write("two.toml", &existing_vpc_stack(&format!("{c}\", \"{a}"), "", &window));
    let refused = env.run(&["plan", "two.toml"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains("`training_plan.base`: not bought, its cluster `hyperpod_cluster.main` has subnets in us-west-2a and us-west-2c"),
        "{refused:?}"
    );
    // A pin that disagrees with the literal subnet's zone is refused before pricing.
    env.write("wrong.toml", &existing_vpc_stack(&c, "availability_zone = \"us-west-2a\"\n", &window));
    let refused = env.run(&["plan", "wrong.toml"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains("`training_plan.base`: not bought, it is pinned to us-west-2a but its cluster `hyperpod_cluster.main` has its subnets in us-west-2c"),
        "{refused:?}"
    );
    assert_eq!(env.emu.training_plan_purchases(), 0);

    // Bought in 2c: a cluster moved to a subnet of 2a is refused before anything changes.
    env.ok(&["apply", "l.toml", "--target", "training_plan.base", "--auto-approve", "--approve-purchases"]);
    assert_eq!(env.state("lit")["resources"]["training_plan.base"]["outputs"]["availability_zone"], "us-west-2c");
    env.write("moved.toml", &existing_vpc_stack(&a, "", &window));
    let refused = env.run(&["plan", "moved.toml"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains(&format!(
            "`hyperpod_cluster.main` runs on `training_plan.base`, bought in us-west-2c, but its subnet {a} is in us-west-2a"
        )),
        "{refused:?}"
    );
}

/// Item 12 (issue 18): the journal names the plan before `CreateTrainingPlan` (which has no
/// client token: botocore `CreateTrainingPlanRequest` has only the name, the offering id, the
/// spare count and tags), and the next run describes exactly that name. Here the list lags a
/// minute behind the purchase (`ListTrainingPlans`' consistency is undocumented), longer
/// than the refresh's settle: the plan is still found, and never bought twice.
#[test]
fn a_purchase_journaled_by_name_is_found_even_while_the_list_lags() {
    let env = Env::new();
    env.write("t.toml", &plan_stack("lag", 40000));
    env.emu.control("POST", "/_gpustack/sagemaker/consistency?list_lag_ms=600000");
    killed_right_after_the_purchase(&env, "lag");
    let st = env.state("lag");
    let token = st["pending"][0]["token"].as_str().unwrap().to_string();
    assert!(token.starts_with("lag-base-"), "the pending entry names the plan: {st}");

    let again = env.ok(&["apply", "t.toml", "--auto-approve", "--approve-purchases"]);
    assert_eq!(env.emu.training_plan_purchases(), 1, "never twice: {again:?}");
    let st = env.state("lag");
    assert_eq!(st["resources"]["training_plan.base"]["outputs"]["name"], token.as_str(), "{st}");
    assert!(st.get("pending").is_none(), "{st}");
}

/// Item 14 (issue 18): a plan found by its journaled name (or its tags) while `Pending` is
/// not recorded until SageMaker has taken the payment ("When created, the plan initially
/// enters a `Pending` state", SageMaker DG `choose-best-training-plan-using-api-cli-sdk`): the
/// plan says so and apply waits for `Scheduled`.
#[test]
fn a_pending_plan_found_after_a_crash_is_recorded_only_once_paid() {
    let env = Env::new();
    env.write("t.toml", &plan_stack("pend", 40000));
    killed_right_after_the_purchase(&env, "pend");
    let name = plans(&env)[0].0.clone();
    env.emu.control("POST", &format!("/_gpustack/sagemaker/plans?name={name}&status=Pending"));

    let plan = env.ok(&["plan", "t.toml"]);
    assert!(plan.stdout.contains("the plan is Pending: apply waits until SageMaker has taken the payment"), "{plan:?}");
    let started = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_secs(3));
            env.emu.control("POST", &format!("/_gpustack/sagemaker/plans?name={name}&status=auto"));
        });
        env.ok(&["apply", "t.toml", "--auto-approve", "--approve-purchases"]);
    });
    assert!(started.elapsed() >= Duration::from_secs(3), "apply waited for the payment");
    assert_eq!(env.emu.training_plan_purchases(), 1);
    assert_eq!(env.state("pend")["resources"]["training_plan.base"]["outputs"]["state"], "Scheduled");
    assert_eq!(env.run(&["plan", "t.toml", "--detailed-exitcode"]).code, 0);
}

/// Item 11 (issue 18): when no continuous capacity exists, SageMaker answers with two-block
/// offerings ("it automatically attempts to fulfill the request using two separate Reserved
/// Capacity blocks", SageMaker DG `reserve-capacity-with-training-plans`). They are refused
/// unless `allow_split = true`, and then the plan shows every block.
#[test]
fn split_offerings_are_refused_unless_allowed_and_then_every_block_is_shown() {
    let env = Env::new();
    env.emu.control("POST", "/_gpustack/sagemaker/offerings?split=1");
    let text = plan_stack("split", 40000);
    env.write("t.toml", &text);
    let refused = env.run(&["plan", "t.toml"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains("`training_plan.base`: no training plan offering for 2× ml.p5.48xlarge"),
        "{refused:?}"
    );
    assert!(
        refused.stderr.contains("two-block (split) offerings are left out unless allow_split = true"),
        "{refused:?}"
    );

    env.write("t.toml", &text.replace("max_upfront_usd = 40000", "max_upfront_usd = 40000\nallow_split     = true"));
    let plan = env.ok(&["plan", "t.toml"]);
    assert!(plan.stdout.contains("block 1 of 2: "), "{plan:?}");
    assert!(plan.stdout.contains("block 2 of 2: "), "{plan:?}");
    let json: Value = serde_json::from_str(&env.ok(&["plan", "t.toml", "--json"]).stdout).unwrap();
    let blocks = json["changes"][0]["purchase"]["blocks"].as_array().cloned().unwrap_or_default();
    assert_eq!(blocks.len(), 2, "{json}");
    assert!(blocks[0]["end"].as_str() < blocks[1]["start"].as_str(), "a gap between the blocks: {json}");
    env.ok(&["apply", "t.toml", "--auto-approve", "--approve-purchases"]);
    assert_eq!(env.emu.training_plan_purchases(), 1);
    assert_eq!(env.run(&["plan", "t.toml", "--detailed-exitcode"]).code, 0);
}

/// Review r18 minor-6: a split offering spans its hours plus the gap between its blocks, so
/// with `allow_split = true` the search's `EndTimeBefore` is not `start_before +
/// duration_hours` (which leaves out every split offering of a one-day window here) but the
/// furthest end SageMaker sells (56 days ahead plus the hours).
#[test]
fn allow_split_searches_past_the_window_end_so_split_offerings_are_found() {
    let env = Env::new();
    env.emu.control("POST", "/_gpustack/sagemaker/offerings?split=1");
    // A one-day window: start_after in 1 day, start_before in 2.
    let text: String = plan_stack("wide", 40000)
        .lines()
        .map(|l| {
            if l.starts_with("start_before") {
                format!("start_before    = \"{}\"\n", in_days(2))
            } else {
                format!("{l}\n")
            }
        })
        .collect::<String>()
        .replace("max_upfront_usd = 40000", "max_upfront_usd = 40000\nallow_split     = true");
    env.write("t.toml", &text);
    let plan = env.ok(&["plan", "t.toml"]);
    assert!(plan.stdout.contains("block 1 of 2: ") && plan.stdout.contains("block 2 of 2: "), "{plan:?}");
}

/// Item 13 (issue 18): whether an offering id survives between two searches is not
/// documented (SageMaker DG `search-training-plan-offerings-api-cli-sdk` shows only
/// `tpo-SHA-256-hash-value`). With ids made afresh by every search, apply still buys the
/// offering the plan showed, matched by its content (type, count, zone, times, fee not higher),
/// and only once.
#[test]
fn a_purchase_does_not_depend_on_offering_ids_being_stable() {
    let env = Env::new();
    env.emu.control("POST", "/_gpustack/sagemaker/offerings?per_search_ids=1");
    env.write("t.toml", &plan_stack("ids", 40000));
    let bought = env.ok(&["apply", "t.toml", "--auto-approve", "--approve-purchases"]);
    assert!(bought.stderr.contains("training_plan.base: bought arn:aws:sagemaker:us-west-2:"), "{bought:?}");
    assert_eq!(env.emu.training_plan_purchases(), 1);
    assert_eq!(env.run(&["plan", "t.toml", "--detailed-exitcode"]).code, 0);
}

/// Item 14 (issue 18), the purchase itself: a plan stays `Pending` until SageMaker has taken
/// the payment and apply records it only then; a payment that fails ("If the plan purchase
/// fails, the status is set to `Failed`", SageMaker DG `training-plan-details-using-api-cli-sdk`)
/// is an error, nothing is recorded, and a later run with the same offering says so again
/// instead of recording the failed plan.
#[test]
fn a_plan_is_recorded_once_paid_and_a_failed_payment_is_an_error() {
    let env = Env::new();
    env.emu.control("POST", "/_gpustack/sagemaker/consistency?payment_ms=3000");
    env.write("t.toml", &plan_stack("pay", 40000));
    let started = Instant::now();
    env.ok(&["apply", "t.toml", "--auto-approve", "--approve-purchases"]);
    assert!(started.elapsed() >= Duration::from_secs(3), "apply waited for the payment");
    assert_eq!(env.state("pay")["resources"]["training_plan.base"]["outputs"]["state"], "Scheduled");

    env.emu.control("POST", "/_gpustack/sagemaker/consistency?payment_ms=0&fail_payment=1");
    env.write("f.toml", &plan_stack("fail", 40000));
    for attempt in 0..2 {
        let failed = env.run(&["apply", "f.toml", "--auto-approve", "--approve-purchases"]);
        assert_eq!(failed.code, 1, "attempt {attempt}: {failed:?}");
        assert!(
            failed.stderr.contains("failed: ") && failed.stderr.contains("a failed plan keeps its name"),
            "{failed:?}"
        );
        let st = env.state("fail");
        assert!(st["resources"].get("training_plan.base").is_none(), "a failed plan is not recorded: {st}");
    }
    assert!(
        env.run(&["apply", "f.toml", "--auto-approve", "--approve-purchases"])
            .stderr
            .contains("set purchase_attempt on the resource to a number not used before")
    );
    // Review r18 minor-3: the same offering again, under a new name (purchase_attempt).
    env.emu.control("POST", "/_gpustack/sagemaker/consistency?fail_payment=0");
    let bought = env.emu.training_plan_purchases();
    env.write(
        "f.toml",
        &plan_stack("fail", 40000).replace("max_upfront_usd = 40000", "max_upfront_usd = 40000\npurchase_attempt = 1"),
    );
    env.ok(&["apply", "f.toml", "--auto-approve", "--approve-purchases"]);
    let st = env.state("fail");
    assert_eq!(st["resources"]["training_plan.base"]["outputs"]["state"], "Scheduled", "{st}");
    assert_eq!(env.emu.training_plan_purchases(), bought + 1);
    assert_eq!(env.run(&["plan", "f.toml", "--detailed-exitcode"]).code, 0);
}
