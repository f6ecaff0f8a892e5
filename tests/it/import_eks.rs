//! `[import]` of the EKS kinds (issue 20): an eksctl-like cluster built with the Rust SDK
//! directly (not with gpustack) — a cluster, a GPU node group on a launch template whose
//! AL2023 user data gpustack did not write (eksctl's NodeConfig and a shell part), a second
//! group on a Bottlerocket template in the very text gpustack writes, add-ons, an access
//! entry and a Pod Identity association — imported by a stack file that says the same
//! things: the plan shows imports and no update; a file that differs in one field shows
//! exactly that field; apply only tags.

use aws_sdk_ec2::types::{
    LaunchTemplateBlockDeviceMappingRequest, LaunchTemplateEbsBlockDeviceRequest, LaunchTemplateHttpTokensState,
    LaunchTemplateInstanceMetadataOptionsRequest, RequestLaunchTemplateData, VolumeType,
};
use aws_sdk_eks::types::{
    AccessScope, AccessScopeType, AmiTypes, AuthenticationMode, CreateAccessConfigRequest, LaunchTemplateSpecification,
    LogSetup, LogType, Logging, NodegroupScalingConfig, SupportType, Taint, TaintEffect, UpgradePolicyRequest,
    VpcConfigRequest,
};

use crate::harness::{Env, block_on};

/// eksctl's AL2023 user data for a managed group (eksctl docs `node-bootstrapping`: a minimal
/// NodeConfig, empty sections and all) with a script part added by the team.
const EKSCTL_USER_DATA: &str = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=//\n\n--//\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nmetadata:\n  creationTimestamp: null\nspec:\n  cluster: {}\n  containerd: {}\n  instance:\n    localStorage: {}\n  kubelet:\n    config:\n      maxPods: 110\n    flags:\n    - --node-labels=alpha.eksctl.io/cluster-name=brown,alpha.eksctl.io/nodegroup-name=gpu\n\n--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho ready\n--//--\n";

/// Bottlerocket user data exactly as `launch_template` renders it.
const GPUSTACK_USER_DATA: &str = "[settings.kubelet-device-plugins.nvidia]\ndevice-sharing-strategy = \"time-slicing\"\n\n[settings.kubelet-device-plugins.nvidia.time-slicing]\nreplicas = 4\n\n[settings.kubernetes.node-labels]\n\"gpustack.io/pool\" = \"inference\"\n";

struct Brown {
    subnets: [String; 2],
    sg: String,
    cluster_role: String,
    node_role: String,
    pod_role: String,
    ops_role: String,
    lt_eksctl: String,
    lt_gpustack: String,
    cni_version: String,
    agent_version: String,
    association: String,
}

/// Builds the cluster with the SDK, as eksctl or a console user would.
fn build(env: &Env) -> Brown {
    env.emu.control(
        "POST",
        "/_gpustack/eks?cluster_create_ms=0&nodegroup_create_ms=0&addon_create_ms=0&delete_ms=0&update_ms=0",
    );
    let (ec2, iam, eks) = (env.emu.ec2(), env.emu.iam(), env.emu.eks());
    block_on(async move {
        let vpc = ec2.create_vpc().cidr_block("10.9.0.0/16").send().await.unwrap().vpc.unwrap().vpc_id.unwrap();
        let igw =
            ec2.create_internet_gateway().send().await.unwrap().internet_gateway.unwrap().internet_gateway_id.unwrap();
        ec2.attach_internet_gateway().vpc_id(&vpc).internet_gateway_id(&igw).send().await.unwrap();
        let rt =
            ec2.create_route_table().vpc_id(&vpc).send().await.unwrap().route_table.unwrap().route_table_id.unwrap();
        ec2.create_route()
            .route_table_id(&rt)
            .destination_cidr_block("0.0.0.0/0")
            .gateway_id(&igw)
            .send()
            .await
            .unwrap();
        let mut subnets = vec![];
        for (cidr, zone) in [("10.9.0.0/20", "us-west-2a"), ("10.9.16.0/20", "us-west-2b")] {
            let s = ec2.create_subnet().vpc_id(&vpc).cidr_block(cidr).availability_zone(zone).send().await.unwrap();
            let id = s.subnet.unwrap().subnet_id.unwrap();
            ec2.associate_route_table().route_table_id(&rt).subnet_id(&id).send().await.unwrap();
            // eksctl's public subnets: nodes get public IPs to reach the cluster and ECR.
            let on = aws_sdk_ec2::types::AttributeBooleanValue::builder().value(true).build();
            ec2.modify_subnet_attribute().subnet_id(&id).map_public_ip_on_launch(on).send().await.unwrap();
            subnets.push(id);
        }
        let sg = ec2
            .create_security_group()
            .group_name("brown-nodes")
            .description("nodes")
            .vpc_id(&vpc)
            .send()
            .await
            .unwrap()
            .group_id
            .unwrap();
        let role = |name: &'static str, principal: &'static str| {
            let iam = iam.clone();
            async move {
                let trust = format!(
                    r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":{{"Service":"{principal}"}},"Action":["sts:AssumeRole","sts:TagSession"]}}]}}"#
                );
                iam.create_role()
                    .role_name(name)
                    .assume_role_policy_document(trust)
                    .send()
                    .await
                    .unwrap()
                    .role
                    .unwrap()
                    .arn
            }
        };
        let cluster_role = role("brown-cluster", "eks.amazonaws.com").await;
        let node_role = role("brown-node", "ec2.amazonaws.com").await;
        let pod_role = role("brown-trainer", "pods.eks.amazonaws.com").await;
        let ops_role = role("brown-ops", "ec2.amazonaws.com").await;
        eks.create_cluster()
            .name("brown")
            .version("1.33")
            .role_arn(&cluster_role)
            .resources_vpc_config(VpcConfigRequest::builder().set_subnet_ids(Some(subnets.clone())).build())
            .access_config(
                CreateAccessConfigRequest::builder().authentication_mode(AuthenticationMode::ApiAndConfigMap).build(),
            )
            .upgrade_policy(UpgradePolicyRequest::builder().support_type(SupportType::Standard).build())
            .logging(
                Logging::builder()
                    .cluster_logging(
                        LogSetup::builder().types(LogType::Api).types(LogType::Audit).enabled(true).build(),
                    )
                    .build(),
            )
            .tags("team", "ml")
            .send()
            .await
            .unwrap();
        let template = |name: &'static str, user_data: &'static str, hop: i32| {
            let ec2 = ec2.clone();
            let sg = sg.clone();
            async move {
                let data = RequestLaunchTemplateData::builder()
                    .instance_type("g6.xlarge".into())
                    .security_group_ids(sg)
                    .metadata_options(
                        LaunchTemplateInstanceMetadataOptionsRequest::builder()
                            .http_tokens(LaunchTemplateHttpTokensState::Required)
                            .http_put_response_hop_limit(hop)
                            .build(),
                    )
                    .block_device_mappings(
                        LaunchTemplateBlockDeviceMappingRequest::builder()
                            .device_name("/dev/xvda")
                            .ebs(
                                LaunchTemplateEbsBlockDeviceRequest::builder()
                                    .volume_size(200)
                                    .volume_type(VolumeType::Gp3)
                                    .encrypted(true)
                                    .delete_on_termination(true)
                                    .build(),
                            )
                            .build(),
                    )
                    .user_data(aws_smithy_types::base64::encode(user_data))
                    .build();
                let out = ec2.create_launch_template().launch_template_name(name).launch_template_data(data);
                out.send().await.unwrap().launch_template.unwrap().launch_template_id.unwrap()
            }
        };
        let lt_eksctl = template("eksctl-brown-nodegroup-gpu", EKSCTL_USER_DATA, 2).await;
        let lt_gpustack = template("brown-infer", GPUSTACK_USER_DATA, 1).await;
        for (name, lt, ami) in [
            ("gpu", &lt_eksctl, AmiTypes::Al2023X8664Nvidia),
            ("infer", &lt_gpustack, AmiTypes::BottlerocketX8664Nvidia),
        ] {
            eks.create_nodegroup()
                .cluster_name("brown")
                .nodegroup_name(name)
                .node_role(&node_role)
                .set_subnets(Some(subnets.clone()))
                .ami_type(ami)
                .launch_template(LaunchTemplateSpecification::builder().id(lt).version("1").build())
                .scaling_config(NodegroupScalingConfig::builder().min_size(0).desired_size(2).max_size(4).build())
                .labels("role", "gpu")
                .taints(Taint::builder().key("nvidia.com/gpu").value("true").effect(TaintEffect::NoSchedule).build())
                .send()
                .await
                .unwrap();
        }
        let mut versions = vec![];
        for (addon, config) in
            [("vpc-cni", Some(r#"{"env":{"ENABLE_PREFIX_DELEGATION":"true"}}"#)), ("eks-pod-identity-agent", None)]
        {
            let out = eks
                .create_addon()
                .cluster_name("brown")
                .addon_name(addon)
                .set_configuration_values(config.map(str::to_string))
                .send()
                .await
                .unwrap();
            versions.push(out.addon.unwrap().addon_version.unwrap());
        }
        eks.create_access_entry()
            .cluster_name("brown")
            .principal_arn(&ops_role)
            .r#type("STANDARD")
            .kubernetes_groups("ml-admins")
            .send()
            .await
            .unwrap();
        eks.associate_access_policy()
            .cluster_name("brown")
            .principal_arn(&ops_role)
            .policy_arn("arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy")
            .access_scope(AccessScope::builder().r#type(AccessScopeType::Cluster).build())
            .send()
            .await
            .unwrap();
        let association = eks
            .create_pod_identity_association()
            .cluster_name("brown")
            .namespace("ml")
            .service_account("trainer")
            .role_arn(&pod_role)
            .send()
            .await
            .unwrap()
            .association
            .unwrap()
            .association_id
            .unwrap();
        Brown {
            subnets: [subnets[0].clone(), subnets[1].clone()],
            sg,
            cluster_role,
            node_role,
            pod_role,
            ops_role,
            lt_eksctl,
            lt_gpustack,
            cni_version: versions[0].clone(),
            agent_version: versions[1].clone(),
            association,
        }
    })
}

/// The stack file that says what the SDK built; `edit` rewrites it for the differing cases.
fn stack(b: &Brown) -> String {
    let subnets = format!("[\"{}\", \"{}\"]", b.subnets[0], b.subnets[1]);
    format!(
        r#"[stack]
name   = "brown"
region = "us-west-2"

[import]
"eks_cluster.main"                 = "brown"
"launch_template.gpu"              = "{lt_eksctl}"
"launch_template.infer"            = "{lt_gpustack}"
"node_group.gpu"                   = "brown:gpu"
"node_group.infer"                 = "brown:infer"
"eks_addon.cni"                    = "brown:vpc-cni"
"eks_addon.pod_identity"           = "brown:eks-pod-identity-agent"
"eks_access_entry.ops"             = "brown:{ops_role}"
"pod_identity_association.trainer" = "brown:{association}"

[eks_cluster.main]
name                    = "brown"
version                 = "1.33"
role                    = "{cluster_role}"
subnets                 = {subnets}
endpoint_private_access = false
public_access_cidrs     = ["0.0.0.0/0"]
authentication_mode     = "API_AND_CONFIG_MAP"
logging                 = ["api", "audit"]
tags                    = {{ team = "ml" }}
prevent_destroy         = true

[launch_template.gpu]
name            = "eksctl-brown-nodegroup-gpu"
instance_type   = "g6.xlarge"
security_groups = ["{sg}"]
imds_hop_limit  = 2
root_volume     = {{ size_gib = 200 }}
nodeadm         = {{ kubelet = {{ config = {{ maxPods = 110 }} }} }}
node_labels     = {{ "alpha.eksctl.io/cluster-name" = "brown", "alpha.eksctl.io/nodegroup-name" = "gpu" }}

[launch_template.infer]
name            = "brown-infer"
instance_type   = "g6.xlarge"
security_groups = ["{sg}"]
root_volume     = {{ size_gib = 200 }}
gpu_sharing     = {{ strategy = "time-slicing", replicas = 4 }}
node_labels     = {{ "gpustack.io/pool" = "inference" }}

[node_group.gpu]
cluster         = "${{eks_cluster.main.name}}"
name            = "gpu"
node_role       = "{node_role}"
subnets         = {subnets}
launch_template = "${{launch_template.gpu.id}}"
ami_type        = "AL2023_x86_64_NVIDIA"
scaling         = {{ min = 0, max = 4 }}
labels          = {{ role = "gpu" }}
taints          = [{{ key = "nvidia.com/gpu", value = "true", effect = "NO_SCHEDULE" }}]

[node_group.infer]
cluster         = "${{eks_cluster.main.name}}"
name            = "infer"
node_role       = "{node_role}"
subnets         = {subnets}
launch_template = "${{launch_template.infer.id}}"
ami_type        = "BOTTLEROCKET_x86_64_NVIDIA"
scaling         = {{ min = 0, max = 4 }}
labels          = {{ role = "gpu" }}
taints          = [{{ key = "nvidia.com/gpu", value = "true", effect = "NO_SCHEDULE" }}]

[eks_addon.cni]
cluster       = "${{eks_cluster.main.name}}"
addon         = "vpc-cni"
version       = "{cni_version}"
configuration = {{ env = {{ ENABLE_PREFIX_DELEGATION = "true" }} }}

[eks_addon.pod_identity]
cluster = "${{eks_cluster.main.name}}"
addon   = "eks-pod-identity-agent"
version = "{agent_version}"

[eks_access_entry.ops]
cluster           = "${{eks_cluster.main.name}}"
principal_arn     = "{ops_role}"
type              = "STANDARD"
kubernetes_groups = ["ml-admins"]
policies          = [{{ policy_arn = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy", scope = "cluster" }}]

[pod_identity_association.trainer]
cluster         = "${{eks_cluster.main.name}}"
namespace       = "ml"
service_account = "trainer"
role            = "{pod_role}"
"#,
        lt_eksctl = b.lt_eksctl,
        lt_gpustack = b.lt_gpustack,
        ops_role = b.ops_role,
        association = b.association,
        cluster_role = b.cluster_role,
        sg = b.sg,
        node_role = b.node_role,
        pod_role = b.pod_role,
        cni_version = b.cni_version,
        agent_version = b.agent_version,
    )
}

fn plan_json(env: &Env, file: &str) -> (i32, serde_json::Value, String) {
    let r = env.run(&["plan", file, "--json", "--detailed-exitcode"]);
    let v = serde_json::from_str(&r.stdout).unwrap_or(serde_json::Value::Null);
    (r.code, v, format!("{r:?}"))
}

/// (address, action, changed field paths) of every change of a JSON plan.
fn changes(plan: &serde_json::Value) -> Vec<(String, String, Vec<String>)> {
    plan["changes"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let fields = c["fields"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .filter_map(|f| f["path"].as_str().map(str::to_string))
                .collect();
            (
                c["address"].as_str().unwrap_or_default().to_string(),
                c["action"].as_str().unwrap_or_default().to_string(),
                fields,
            )
        })
        .collect()
}

#[test]
fn an_eksctl_like_cluster_imports_with_no_update_and_apply_only_tags() {
    let env = Env::new();
    let b = build(&env);
    let text = stack(&b);
    env.write("brown.toml", &text);
    env.emu.reset_requests();
    let (code, plan, raw) = plan_json(&env, "brown.toml");
    let all = changes(&plan);
    assert_eq!(all.len(), 9, "{raw}");
    for (address, action, fields) in &all {
        assert_eq!(action, "import", "{address}: {raw}");
        assert!(fields.is_empty(), "{address} would change {fields:?}: {raw}");
    }
    // The plan itself changes nothing: only reads.
    let writes: Vec<_> = env
        .emu
        .requests()
        .into_iter()
        .filter(|(_, a)| !(a.starts_with("Describe") || a.starts_with("List") || a.starts_with("Get")))
        .collect();
    assert!(writes.is_empty(), "the plan wrote {writes:?}");
    assert_eq!(code, 0, "a clean import plans no change: {raw}");
    // What the eksctl template holds and the language cannot say is shown, not dropped.
    assert!(raw.contains("echo ready") && raw.contains("text/x-shellscript"), "{raw}");

    env.emu.reset_requests();
    env.ok(&["apply", "brown.toml", "--auto-approve"]);
    let writes: Vec<(String, String)> = env
        .emu
        .requests()
        .into_iter()
        .filter(|(_, a)| !(a.starts_with("Describe") || a.starts_with("List") || a.starts_with("Get")))
        .collect();
    assert!(
        writes.iter().all(|(_, a)| a == "TagResource" || a == "CreateTags"),
        "apply of a clean import only tags: {writes:?}"
    );
    assert_eq!(writes.len(), 9, "one tag call per imported object: {writes:?}");
    let tags = block_on(env.emu.eks().describe_nodegroup().cluster_name("brown").nodegroup_name("gpu").send())
        .unwrap()
        .nodegroup
        .unwrap()
        .tags
        .unwrap();
    assert_eq!(tags.get("gpustack:address").map(String::as_str), Some("node_group.gpu"));
    assert_eq!(tags.get("gpustack:stack").map(String::as_str), Some("brown"));
    // Recorded and tagged: the next plan, refreshed like any stack's, is clean.
    let r = env.run(&["plan", "brown.toml", "--detailed-exitcode"]);
    assert_eq!(r.code, 0, "after the import the stack plans no change: {r:?}");
}

#[test]
fn a_field_that_differs_from_aws_is_exactly_the_update() {
    let env = Env::new();
    let b = build(&env);
    let text = stack(&b);
    // (what, the edited file, the address that changes, its fields, and the address whose
    // fields follow from it: a template's new version is the node group's next version).
    let scaling = "scaling         = { min = 0, max = 4 }";
    type Case<'a> = (&'a str, String, &'a str, Vec<&'a str>, Option<&'a str>);
    let cases: Vec<Case> = vec![
        (
            "node group scaling",
            text.replacen(scaling, "scaling         = { min = 0, max = 6 }", 1),
            "node_group.gpu",
            vec!["scaling"],
            None,
        ),
        (
            "cluster logging",
            text.replace("logging                 = [\"api\", \"audit\"]", "logging                 = [\"api\"]"),
            "eks_cluster.main",
            vec!["logging"],
            None,
        ),
        (
            "add-on configuration",
            text.replace("ENABLE_PREFIX_DELEGATION = \"true\"", "ENABLE_PREFIX_DELEGATION = \"false\""),
            "eks_addon.cni",
            vec!["configuration"],
            None,
        ),
        (
            "access entry groups",
            text.replace("[\"ml-admins\"]", "[\"ml-admins\", \"viewers\"]"),
            "eks_access_entry.ops",
            vec!["kubernetes_groups"],
            None,
        ),
        (
            "pod identity role",
            text.replace(
                &format!("role            = \"{}\"", b.pod_role),
                &format!("role            = \"{}\"", b.node_role),
            ),
            "pod_identity_association.trainer",
            vec!["role"],
            None,
        ),
        (
            "template labels",
            text.replace("\"gpustack.io/pool\" = \"inference\"", "\"gpustack.io/pool\" = \"batch\""),
            "launch_template.infer",
            vec!["node_labels", "user_data"],
            Some("node_group.infer"),
        ),
        (
            "template gpu sharing",
            text.replace("replicas = 4", "replicas = 8"),
            "launch_template.infer",
            vec!["gpu_sharing", "user_data"],
            Some("node_group.infer"),
        ),
    ];
    for (what, file_text, address, want, follows) in cases {
        assert_ne!(file_text, text, "{what}: the edit applied");
        env.write("brown.toml", &file_text);
        let (code, plan, raw) = plan_json(&env, "brown.toml");
        assert_eq!(code, 2, "{what}: {raw}");
        for (a, action, fields) in changes(&plan) {
            assert_eq!(action, "import", "{what}: {a}");
            if a == address {
                let mut got: Vec<String> = fields.iter().map(|f| f.split('.').next().unwrap().to_string()).collect();
                got.dedup();
                assert_eq!(got, want, "{what}: {raw}");
            } else if Some(a.as_str()) == follows {
                assert_eq!(fields, ["launch_template_version"], "{what}: {raw}");
            } else {
                assert!(fields.is_empty(), "{what}: {a} changes {fields:?}: {raw}");
            }
        }
    }
}

#[test]
fn a_change_to_a_template_gpustack_cannot_rewrite_is_refused() {
    let env = Env::new();
    let b = build(&env);
    let text = stack(&b).replace("imds_hop_limit  = 2", "imds_hop_limit  = 1");
    env.write("brown.toml", &text);
    let r = env.run(&["plan", "brown.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("cannot write") && r.stderr.contains("text/x-shellscript"), "{r:?}");
}

#[test]
fn an_import_id_that_names_nothing_is_a_plan_error() {
    let env = Env::new();
    let b = build(&env);
    let text = stack(&b).replace("\"brown:gpu\"", "\"brown:nope\"");
    env.write("brown.toml", &text);
    let r = env.run(&["plan", "brown.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("brown:nope"), "{r:?}");
}

/// Review imp-eks B1/M1/M4 (B2 through the emulator): changes applied to imported objects.
/// A `max` change keeps the running desired size (2, not `min` 0); an add-on configuration
/// change reaches EKS; a template label change makes a new template version that the
/// Bottlerocket group moves to on its own Kubernetes version and pinned release; a file
/// that leaves an add-on's version "default" imports it with no change.
#[test]
fn changes_to_imported_objects_apply_and_keep_what_runs() {
    let env = Env::new();
    let b = build(&env);
    let text = stack(&b).replace(&format!("version = \"{}\"\n", b.agent_version), "\n");
    env.write("brown.toml", &text);
    let (code, _, raw) = plan_json(&env, "brown.toml");
    assert_eq!(code, 0, "an add-on version left to \"default\" is no change on import: {raw}");
    env.ok(&["apply", "brown.toml", "--auto-approve"]);
    let changed = text
        .replacen("scaling         = { min = 0, max = 4 }", "scaling         = { min = 0, max = 6 }", 1)
        .replace("ENABLE_PREFIX_DELEGATION = \"true\"", "ENABLE_PREFIX_DELEGATION = \"false\"")
        .replace("\"gpustack.io/pool\" = \"inference\"", "\"gpustack.io/pool\" = \"batch\"");
    env.write("brown.toml", &changed);
    let before = block_on(env.emu.eks().describe_nodegroup().cluster_name("brown").nodegroup_name("infer").send())
        .unwrap()
        .nodegroup
        .unwrap();
    env.ok(&["apply", "brown.toml", "--auto-approve"]);
    let eks = env.emu.eks();
    let gpu = block_on(eks.describe_nodegroup().cluster_name("brown").nodegroup_name("gpu").send())
        .unwrap()
        .nodegroup
        .unwrap();
    let sc = gpu.scaling_config.unwrap();
    assert_eq!((sc.min_size, sc.desired_size, sc.max_size), (Some(0), Some(2), Some(6)), "the running 2 stay");
    let addon =
        block_on(eks.describe_addon().cluster_name("brown").addon_name("vpc-cni").send()).unwrap().addon.unwrap();
    assert!(addon.configuration_values.unwrap_or_default().contains("\"false\""));
    let agent = block_on(eks.describe_addon().cluster_name("brown").addon_name("eks-pod-identity-agent").send())
        .unwrap()
        .addon
        .unwrap();
    assert_eq!(agent.addon_version.as_deref(), Some(b.agent_version.as_str()), "the installed version stays");
    let infer = block_on(eks.describe_nodegroup().cluster_name("brown").nodegroup_name("infer").send())
        .unwrap()
        .nodegroup
        .unwrap();
    assert_eq!(infer.launch_template.unwrap().version.as_deref(), Some("2"));
    assert_eq!((infer.version, infer.release_version), (before.version, before.release_version));
    let r = env.run(&["plan", "brown.toml", "--detailed-exitcode"]);
    assert_eq!(r.code, 0, "applied: {r:?}");
}

/// Issue 21 × 20: an Auto Mode cluster made with the SDK imports as `auto_mode` with no
/// update; a launch template without metadata options imports with no `imds_hop_limit` diff.
#[test]
fn an_auto_mode_cluster_and_a_bare_template_import_with_no_update() {
    use aws_sdk_eks::types::{
        BlockStorage, ComputeConfigRequest, ElasticLoadBalancing, KubernetesNetworkConfigRequest, StorageConfigRequest,
    };
    let env = Env::new();
    let b = build(&env);
    let (ec2, eks) = (env.emu.ec2(), env.emu.eks());
    let (subnets, role, node_role, sg) = (b.subnets.clone(), b.cluster_role.clone(), b.node_role.clone(), b.sg.clone());
    let lt = block_on(async move {
        eks.create_cluster()
            .name("auto")
            .version("1.33")
            .role_arn(&role)
            .resources_vpc_config(VpcConfigRequest::builder().set_subnet_ids(Some(subnets.to_vec())).build())
            .access_config(CreateAccessConfigRequest::builder().authentication_mode(AuthenticationMode::Api).build())
            .upgrade_policy(UpgradePolicyRequest::builder().support_type(SupportType::Standard).build())
            .bootstrap_self_managed_addons(false)
            .compute_config(
                ComputeConfigRequest::builder()
                    .enabled(true)
                    .node_pools("general-purpose")
                    .node_pools("system")
                    .node_role_arn(&node_role)
                    .build(),
            )
            .storage_config(
                StorageConfigRequest::builder().block_storage(BlockStorage::builder().enabled(true).build()).build(),
            )
            .kubernetes_network_config(
                KubernetesNetworkConfigRequest::builder()
                    .elastic_load_balancing(ElasticLoadBalancing::builder().enabled(true).build())
                    .build(),
            )
            .send()
            .await
            .unwrap();
        let data =
            RequestLaunchTemplateData::builder().instance_type("g6.xlarge".into()).security_group_ids(sg).build();
        let out = ec2.create_launch_template().launch_template_name("bare").launch_template_data(data);
        out.send().await.unwrap().launch_template.unwrap().launch_template_id.unwrap()
    });
    let subnets = format!("[\"{}\", \"{}\"]", b.subnets[0], b.subnets[1]);
    let text = format!(
        r#"[stack]
name   = "auto"
region = "us-west-2"

[import]
"eks_cluster.auto"     = "auto"
"launch_template.bare" = "{lt}"

[eks_cluster.auto]
name                    = "auto"
version                 = "1.33"
role                    = "{role}"
subnets                 = {subnets}
endpoint_private_access = false
public_access_cidrs     = ["0.0.0.0/0"]
auto_mode               = {{ enabled = true, node_pools = ["general-purpose", "system"], node_role = "{node_role}" }}
prevent_destroy         = true

[launch_template.bare]
name            = "bare"
instance_type   = "g6.xlarge"
security_groups = ["{sg}"]
"#,
        role = b.cluster_role,
        node_role = b.node_role,
        sg = b.sg,
    );
    env.write("auto.toml", &text);
    let (code, plan, raw) = plan_json(&env, "auto.toml");
    for (address, action, fields) in changes(&plan) {
        assert_eq!(action, "import", "{address}: {raw}");
        assert!(fields.is_empty(), "{address} would change {fields:?}: {raw}");
    }
    assert_eq!(code, 0, "{raw}");
    assert!(!raw.contains("computeConfig"), "Auto Mode is expressed, not a note: {raw}");
    assert!(raw.contains("MetadataOptions"), "the unset IMDS options are said: {raw}");
}
