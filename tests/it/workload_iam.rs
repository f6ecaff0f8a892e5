//! Workload IAM (issue 19): IRSA through an `oidc_provider` and `iam_role.service_accounts`,
//! EKS Pod Identity through `pod_identity_association` and `eks_addon.pod_identity`, applied,
//! refreshed, changed in place and destroyed against the emulator, and the offline rules that
//! keep pods from getting no credentials.

use crate::harness::{Env, block_on};

fn example() -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/workload-iam.toml"))
        .unwrap()
}

/// (trust policy document, decoded) of role `name`.
fn trust(env: &Env, name: &str) -> serde_json::Value {
    let iam = env.emu.iam();
    let name = name.to_string();
    let doc = block_on(async move { iam.get_role().role_name(name).send().await.unwrap() })
        .role()
        .and_then(|r| r.assume_role_policy_document().map(str::to_string))
        .unwrap();
    let doc = percent_encoding::percent_decode_str(&doc).decode_utf8_lossy().into_owned();
    serde_json::from_str(&doc).unwrap()
}

fn providers(env: &Env) -> Vec<String> {
    let iam = env.emu.iam();
    block_on(async move { iam.list_open_id_connect_providers().send().await.unwrap() })
        .open_id_connect_provider_list()
        .iter()
        .filter_map(|p| p.arn().map(str::to_string))
        .collect()
}

/// (namespace, service account, role ARN) of every Pod Identity association of `cluster`.
fn associations(env: &Env, cluster: &str) -> Vec<(String, String, String)> {
    let eks = env.emu.eks();
    let cluster = cluster.to_string();
    block_on(async move {
        let listed = eks.list_pod_identity_associations().cluster_name(&cluster).send().await.unwrap();
        let mut out = vec![];
        for a in listed.associations() {
            let d = eks
                .describe_pod_identity_association()
                .cluster_name(&cluster)
                .association_id(a.association_id().unwrap())
                .send()
                .await
                .unwrap();
            let d = d.association().unwrap();
            out.push((
                d.namespace().unwrap().to_string(),
                d.service_account().unwrap().to_string(),
                d.role_arn().unwrap().to_string(),
            ));
        }
        out.sort();
        out
    })
}

fn efs_version(env: &Env) -> String {
    let eks = env.emu.eks();
    let efs = block_on(async move {
        eks.describe_addon().cluster_name("wliam-dev-main").addon_name("aws-efs-csi-driver").send().await.unwrap()
    });
    efs.addon().unwrap().addon_version().unwrap().to_string()
}

#[test]
fn the_workload_iam_example_applies_refreshes_changes_and_destroys() {
    let env = Env::new();
    env.write("s.toml", &example());
    env.emu.reset_requests();
    // IAM propagation (review r19-iam B1): every role and provider this apply makes is refused
    // once by the first EKS call naming it ("Role provided in the request does not exist") and
    // by the first trust naming it ("Invalid principal in policy"); apply waits that out.
    env.emu.control("POST", "/_gpustack/iam-propagation?roles=600");
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let sent = |action: &str| env.emu.requests().iter().filter(|(_, a)| a == action).count();
    // Each refused once, then sent again: the association, the two add-ons with a role
    // (efs_csi: IRSA, ebs_csi: pod_identity), the IRSA role trusting the new provider.
    assert_eq!(sent("CreatePodIdentityAssociation"), 2);
    assert_eq!(sent("CreateAddon"), 3 + 2);
    assert_eq!(sent("CreateRole"), 5 + 1);
    let again = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "in sync after apply: {again:?}");
    // Review r19-iam m4: nodes run the agent and the pods; their role carries
    // eks-auth:AssumeRoleForPodIdentity through AmazonEKSWorkerNodePolicy.
    let state = env.state("wliam-dev");
    assert!(state["resources"]["node_group.system"]["id"].is_string(), "a node group");
    assert!(
        state["resources"]["iam_role.node"]["inputs"]["managed_policies"]
            .to_string()
            .contains("arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy")
    );

    // IRSA: the provider for the cluster's issuer, and the EKS UG's trust on the role.
    let arns = providers(&env);
    assert_eq!(arns.len(), 1, "{arns:?}");
    let issuer = arns[0].split_once(":oidc-provider/").unwrap().1.to_string();
    assert!(issuer.starts_with("oidc.eks.us-west-2.amazonaws.com/id/"), "{issuer}");
    let t = trust(&env, "wliam-dev-efs_csi");
    let s = &t["Statement"][0];
    assert_eq!(s["Principal"]["Federated"], arns[0].as_str());
    assert_eq!(s["Action"], "sts:AssumeRoleWithWebIdentity");
    assert_eq!(s["Condition"]["StringEquals"][format!("{issuer}:aud")], "sts.amazonaws.com");
    assert_eq!(
        s["Condition"]["StringEquals"][format!("{issuer}:sub")],
        serde_json::json!([
            "system:serviceaccount:kube-system:efs-csi-controller-sa",
            "system:serviceaccount:kube-system:efs-csi-node-sa"
        ])
    );
    // Pod Identity: the trust EKS wants, the plain association, and the add-on's own.
    let t = trust(&env, "wliam-dev-training_job");
    assert_eq!(t["Statement"][0]["Principal"]["Service"], "pods.eks.amazonaws.com");
    assert_eq!(t["Statement"][0]["Action"], serde_json::json!(["sts:AssumeRole", "sts:TagSession"]));
    let found = associations(&env, "wliam-dev-main");
    let role = |n: &str| format!("arn:aws:iam::123456789012:role/gpustack/wliam-dev/wliam-dev-{n}");
    assert_eq!(
        found,
        [
            ("kube-system".to_string(), "ebs-csi-controller-sa".to_string(), role("ebs_csi")),
            ("training".to_string(), "trainer".to_string(), role("training_job")),
        ]
    );
    // `version = "latest"` is the newest release the emulator's catalog has for 1.33.
    assert_eq!(efs_version(&env), "v2.1.4-eksbuild.1");

    // Drift: someone narrows the job role's trust; refresh sees it, apply puts it back.
    let iam = env.emu.iam();
    let ec2_only = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    block_on(async move {
        iam.update_assume_role_policy()
            .role_name("wliam-dev-training_job")
            .policy_document(ec2_only)
            .send()
            .await
            .unwrap()
    });
    let drift = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(drift.code, 2, "{drift:?}");
    assert!(drift.stdout.contains("iam_role.training_job") && drift.stdout.contains("pod_identity"), "{drift:?}");
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(trust(&env, "wliam-dev-training_job")["Statement"][0]["Principal"]["Service"], "pods.eks.amazonaws.com");

    // In-place changes: another audience, a wildcard service account, the roles swapped.
    let changed = example()
        .replace(
            "url = \"${eks_cluster.main.oidc_issuer}\"",
            "url = \"${eks_cluster.main.oidc_issuer}\"\nclient_ids = [\"sts.amazonaws.com\", \"other\"]",
        )
        .replace(
            "name = \"efs-csi-node-sa\" },",
            "name = \"efs-csi-node-sa\" },\n  { oidc_provider = \"${oidc_provider.main.arn}\", namespace = \"kube-system\", name = \"efs-*\" },",
        )
        .replace(
            "role            = \"${iam_role.training_job.arn}\"",
            "role            = \"${iam_role.ebs_csi.arn}\"",
        )
        .replace("version              = \"latest\"", "version              = \"v2.0.9-eksbuild.1\"");
    env.write("s.toml", &changed);
    let plan = env.ok(&["plan", "s.toml"]);
    assert!(plan.stdout.contains("0 to replace"), "all in place: {plan:?}");
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let again = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "in sync after the change: {again:?}");
    let t = trust(&env, "wliam-dev-efs_csi");
    let like: Vec<&serde_json::Value> = t["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["Condition"]["StringLike"].get(format!("{issuer}:sub")))
        .collect();
    assert_eq!(like, [&serde_json::json!("system:serviceaccount:kube-system:efs-*")], "a wildcard is StringLike");
    assert!(associations(&env, "wliam-dev-main").contains(&("training".into(), "trainer".into(), role("ebs_csi"))));
    assert_eq!(efs_version(&env), "v2.0.9-eksbuild.1");

    // Back: the audience removed, and `version = "latest"` written again resolves again.
    env.write("s.toml", &example());
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(efs_version(&env), "v2.1.4-eksbuild.1");
    let again = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "in sync after changing back: {again:?}");

    env.ok(&["destroy", "s.toml", "--auto-approve"]);
    assert_eq!(env.tagged("wliam-dev").total(), 0);
    assert!(providers(&env).is_empty(), "the provider is deleted");

    // Every call plan, apply and destroy made is in `gpustack policy`'s document.
    let policy: serde_json::Value = serde_json::from_str(&env.ok(&["policy", "s.toml"]).stdout).unwrap();
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
}

const BASE: &str = r#"
[stack]
name   = "wl"
region = "us-west-2"

[vpc.main]
cidr_block = "10.0.0.0/16"

[subnet.a]
vpc               = "${vpc.main.id}"
cidr_block        = "10.0.0.0/20"
availability_zone = "us-west-2a"

[iam_role.cluster]
service = "eks.amazonaws.com"

[eks_cluster.main]
version             = "1.33"
role                = "${iam_role.cluster.arn}"
subnets             = ["${subnet.a.id}"]
public_access_cidrs = ["203.0.113.0/24"]
"#;

#[test]
fn workload_iam_mistakes_are_reported_in_one_pass() {
    let env = Env::new();
    let stack = format!(
        "{BASE}{}",
        r#"
[oidc_provider.main]
url = "http://oidc.example.com"

[iam_role.nobody]
managed_policies = []

[iam_role.ec2]
service = "ec2.amazonaws.com"

[iam_role.irsa]
service_accounts = [{ oidc_provider = "${eks_cluster.main.arn}", namespace = "kube-system", name = "ebs-csi-controller-sa" }]

[pod_identity_association.job]
cluster         = "${eks_cluster.main.name}"
namespace       = "Training"
service_account = "trainer"
role            = "${iam_role.ec2.arn}"

[eks_addon.ebs]
cluster      = "${eks_cluster.main.name}"
addon        = "aws-ebs-csi-driver"
pod_identity = [{ service_account = "ebs-csi-sa", role = "${iam_role.ec2.arn}" }]

[eks_addon.efs]
cluster              = "${eks_cluster.main.name}"
addon                = "aws-efs-csi-driver"
service_account_role = "${iam_role.ec2.arn}"
"#
    );
    env.write("s.toml", &stack);
    let r = env.run(&["validate", "s.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    for want in [
        "url \"http://oidc.example.com\" must begin with https://",
        "`iam_role.nobody` says no one may assume it",
        "service_accounts[0].oidc_provider refers to `eks_cluster.main.arn`, not an OIDC provider's ARN",
        "namespace \"Training\" is not a DNS-1123 label",
        "`pod_identity_association.job` gives its role through EKS Pod Identity, but `eks_cluster.main` has no eks-pod-identity-agent add-on",
        "`pod_identity_association.job` gives `iam_role.ec2` through EKS Pod Identity, but that role does not trust pods.eks.amazonaws.com",
        "aws-ebs-csi-driver runs as ebs-csi-controller-sa, not \"ebs-csi-sa\"",
        "`eks_addon.ebs` gives `iam_role.ec2` through EKS Pod Identity",
        "`eks_addon.efs` gives `iam_role.ec2` through IRSA (service_account_role), but that role trusts no service account",
    ] {
        assert!(r.stderr.contains(want), "missing {want:?} in:\n{}", r.stderr);
    }
    assert!(r.stderr.contains("s.toml:"), "file:line:column: {}", r.stderr);
}

#[test]
fn an_irsa_role_for_another_clusters_provider_and_a_roleless_driver_are_flagged() {
    let env = Env::new();
    let stack = format!(
        "{BASE}{}",
        r#"
[eks_cluster.other]
version             = "1.33"
role                = "${iam_role.cluster.arn}"
subnets             = ["${subnet.a.id}"]
public_access_cidrs = ["203.0.113.0/24"]

[oidc_provider.other]
url = "${eks_cluster.other.oidc_issuer}"

[iam_role.efs]
service_accounts = [{ oidc_provider = "${oidc_provider.other.arn}", namespace = "kube-system", name = "some-sa" }]

[eks_addon.efs]
cluster              = "${eks_cluster.main.name}"
addon                = "aws-efs-csi-driver"
service_account_role = "${iam_role.efs.arn}"

[eks_addon.ebs]
cluster = "${eks_cluster.main.name}"
addon   = "aws-ebs-csi-driver"
"#
    );
    env.write("s.toml", &stack);
    let r = env.run(&["validate", "s.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    for want in [
        "`eks_addon.efs` runs on `eks_cluster.main`, but its role `iam_role.efs` trusts the OIDC provider of `eks_cluster.other`",
        "aws-efs-csi-driver, which runs as kube-system/efs-csi-controller-sa, but the role trusts none of its service accounts",
        "`eks_addon.ebs`: aws-ebs-csi-driver calls AWS APIs, but has no role of its own",
    ] {
        assert!(r.stderr.contains(want), "missing {want:?} in:\n{}", r.stderr);
    }
}

/// Review r19-iam M1: the EKS UG's EFS trust (`efs-csi-*`, StringLike) covers the driver's
/// service accounts, so the example written that way validates and writes a StringLike trust.
#[test]
fn an_irsa_role_trusting_the_eks_ug_efs_wildcard_is_accepted() {
    let env = Env::new();
    let stack = example().replace(
        r#"  { oidc_provider = "${oidc_provider.main.arn}", namespace = "kube-system", name = "efs-csi-controller-sa" },
  { oidc_provider = "${oidc_provider.main.arn}", namespace = "kube-system", name = "efs-csi-node-sa" },"#,
        r#"  { oidc_provider = "${oidc_provider.main.arn}", namespace = "kube-system", name = "efs-csi-*" },"#,
    );
    assert!(stack.contains("efs-csi-*"));
    env.write("s.toml", &stack);
    let r = env.run(&["validate", "s.toml"]);
    assert_eq!(r.code, 0, "{r:?}");
    let wrong = stack.replace("efs-csi-*", "ebs-csi-*");
    env.write("s.toml", &wrong);
    let r = env.run(&["validate", "s.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("but the role trusts none of its service accounts"), "{}", r.stderr);
}

/// Review r19-iam m1: state written before `pod_identity`, `service_accounts` (iam_role) and
/// `pod_identity`, `preserve` (eks_addon) existed lacks them; a plan that does not refresh takes
/// their defaults instead of showing `null -> default` and sending UpdateAddon /
/// UpdateAssumeRolePolicy for every role and add-on.
#[test]
fn state_from_before_the_new_attributes_plans_no_change_without_refresh() {
    let env = Env::new();
    let stack = example().replace(
        "[iam_role.efs_csi]",
        "[iam_role.plain]\nservice = \"ec2.amazonaws.com\"\n\n[eks_addon.coredns]\ncluster = \"${eks_cluster.main.name}\"\naddon = \"coredns\"\n\n[iam_role.efs_csi]",
    );
    env.write("s.toml", &stack);
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let path = env.path("state/wliam-dev.json");
    let mut state = env.state("wliam-dev");
    for (address, keys) in [
        ("iam_role.plain", &["pod_identity", "service_accounts"][..]),
        ("iam_role.cluster", &["pod_identity", "service_accounts"][..]),
        ("eks_addon.coredns", &["pod_identity", "preserve"][..]),
        ("eks_addon.pod_identity_agent", &["pod_identity", "preserve"][..]),
    ] {
        let inputs = state["resources"][address]["inputs"].as_object_mut().unwrap();
        for k in keys {
            assert!(inputs.remove(*k).is_some(), "{address}.{k} in {inputs:?}");
        }
    }
    std::fs::write(&path, serde_json::to_string_pretty(&state).unwrap()).unwrap();
    let r = env.run(&["plan", "s.toml", "--refresh=false", "--detailed-exitcode"]);
    assert_eq!(r.code, 0, "{r:?}");
}

/// Review r19-iam m5 / m6: two writers of one service account's Pod Identity association (two
/// associations, an association and an add-on, one add-on twice) are refused offline, in one
/// pass with file spans; a bad service account name of any add-on too; IRSA and Pod Identity
/// on one add-on is a warning.
#[test]
fn conflicting_pod_identity_writes_are_reported_offline() {
    let env = Env::new();
    let stack = format!(
        "{BASE}{}",
        r#"
[eks_addon.agent]
cluster = "${eks_cluster.main.name}"
addon   = "eks-pod-identity-agent"

[iam_role.pod]
pod_identity = true

[pod_identity_association.a]
cluster         = "${eks_cluster.main.name}"
namespace       = "training"
service_account = "trainer"
role            = "${iam_role.pod.arn}"

[pod_identity_association.b]
cluster         = "${eks_cluster.main.name}"
namespace       = "training"
service_account = "trainer"
role            = "${iam_role.pod.arn}"

[pod_identity_association.ebs]
cluster         = "${eks_cluster.main.name}"
namespace       = "kube-system"
service_account = "ebs-csi-controller-sa"
role            = "${iam_role.pod.arn}"

[eks_addon.ebs]
cluster              = "${eks_cluster.main.name}"
addon                = "aws-ebs-csi-driver"
service_account_role = "${iam_role.pod.arn}"
pod_identity         = [
  { service_account = "ebs-csi-controller-sa", role = "${iam_role.pod.arn}" },
  { service_account = "ebs-csi-controller-sa", role = "${iam_role.pod.arn}" },
]

[eks_addon.other]
cluster      = "${eks_cluster.main.name}"
addon        = "some-partner-addon"
pod_identity = [{ service_account = "Bad_Name", role = "${iam_role.pod.arn}" }]

[eks_addon.coredns]
cluster           = "${eks_cluster.main.name}"
addon             = "coredns"
resolve_conflicts = "PRESERVE"
"#
    );
    env.write("s.toml", &stack);
    let r = env.run(&["validate", "s.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    for want in [
        "`pod_identity_association.b` gives training/trainer a Pod Identity role, but `pod_identity_association.a` already does",
        "`eks_addon.ebs` (pod_identity) gives kube-system/ebs-csi-controller-sa a Pod Identity role, but `pod_identity_association.ebs` already does",
        "`eks_addon.ebs`: pod_identity names service account \"ebs-csi-controller-sa\" twice",
        "`eks_addon.other`: pod_identity service_account \"Bad_Name\" is not a DNS-1123 subdomain",
        "`eks_addon.ebs` gives aws-ebs-csi-driver a role both through IRSA (service_account_role) and EKS Pod Identity",
        // Review r19-iam m9.
        "`eks_addon.coredns`: resolve_conflicts = \"PRESERVE\" is sent as NONE when coredns is created",
    ] {
        assert!(r.stderr.contains(want), "missing {want:?} in:\n{}", r.stderr);
    }
    assert!(r.stderr.contains("s.toml:"), "file:line:column: {}", r.stderr);
}

/// Review r19-iam m7: thumbprints written and then removed send no
/// UpdateOpenIDConnectProviderThumbprint with an empty (required) list, and the plan settles.
#[test]
fn removing_written_thumbprints_sends_no_empty_thumbprint_list() {
    let env = Env::new();
    let issuer = "url = \"${eks_cluster.main.oidc_issuer}\"\n";
    let with = example().replace(issuer, &format!("{issuer}thumbprints = [\"{}\"]\n", "a".repeat(40)));
    assert!(with.contains("thumbprints"));
    env.write("s.toml", &with);
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    env.write("s.toml", &example());
    env.emu.reset_requests();
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let sent: Vec<String> = env.emu.requests().into_iter().map(|(_, a)| a).collect();
    assert!(!sent.iter().any(|a| a == "UpdateOpenIDConnectProviderThumbprint"), "{sent:?}");
    let again = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "in sync: {again:?}");
}
