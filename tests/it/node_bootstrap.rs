//! AL2023 node bootstrap (nodeadm user data, root volume, instance stores), Spot managed
//! node groups, and self-managed node groups (Auto Scaling groups that join the cluster
//! themselves): offline diagnostics through `validate`, and the shipped examples applied,
//! re-planned and destroyed against the emulator, read back through the real SDKs.

use std::path::PathBuf;

use crate::harness::{Env, block_on};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn example(name: &str) -> String {
    repo().join("examples").join(name).to_string_lossy().into_owned()
}

/// The stack of examples/al2023-nodeadm.toml with `replace` applied to its text.
fn variant(file: &str, from: &str, to: &str) -> String {
    let text = std::fs::read_to_string(repo().join("examples").join(file)).unwrap();
    assert!(text.contains(from), "{from:?} is in {file}");
    text.replacen(from, to, 1)
}

fn autoscaling(env: &Env) -> aws_sdk_autoscaling::Client {
    let conf = aws_sdk_autoscaling::Config::builder()
        .behavior_version(aws_sdk_autoscaling::config::BehaviorVersion::latest())
        .region(aws_sdk_autoscaling::config::Region::new("us-west-2"))
        .endpoint_url(&env.emu.url)
        .credentials_provider(aws_sdk_autoscaling::config::Credentials::new("test", "test", None, None, "test"))
        .build();
    aws_sdk_autoscaling::Client::from_conf(conf)
}

#[test]
fn the_shipped_bootstrap_examples_validate_offline() {
    let env = Env::new();
    for file in ["al2023-nodeadm.toml", "self-managed.toml"] {
        let out = env.ok(&["validate", &example(file)]);
        assert!(!out.stderr.contains("error"), "{file}: {out:?}");
        let plan = env.ok(&["plan", "--refresh=false", &example(file)]);
        assert!(plan.stdout.contains("to add"), "{file}: {plan:?}");
    }
}

#[test]
fn al2023_templates_refuse_bottlerocket_settings_and_snake_case_kubelet_keys() {
    let env = Env::new();
    let text = variant(
        "al2023-nodeadm.toml",
        "local_storage = \"raid0\"",
        "local_storage = \"raid0\"\ndata_volume = { size_gib = 100 }\nbottlerocket_settings = { kernel = { lockdown = \"integrity\" } }",
    )
    .replacen("maxPods = 58", "max_pods = 58", 1)
    .replacen("flags = [\"--v=2\"]", "flags = [\"--v=2\", \"--register-with-taints=a=b:NoSchedule\"] }, feature_gates = { KubeletInUserNamespace = true ", 1);
    let path = env.write("s.toml", &text);
    let out = env.run(&["validate", path.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{out:?}");
    // Every problem in one pass, each at its place with the fix.
    assert!(out.stderr.contains("but `data_volume` is Bottlerocket's"), "{out:?}");
    assert!(out.stderr.contains("root_volume = { size_gib = 200 }"), "{out:?}");
    assert!(out.stderr.contains("but `bottlerocket_settings` is Bottlerocket's"), "{out:?}");
    assert!(out.stderr.contains("`nodeadm.kubelet.config.max_pods` is not a KubeletConfiguration field"), "{out:?}");
    assert!(out.stderr.contains("did you mean `maxPods`?"), "{out:?}");
    // kubelet keeps only the last --register-with-taints: taints go in node_taints.
    assert!(out.stderr.contains("`nodeadm.kubelet.flags` sets --register-with-taints"), "{out:?}");
    // nodeadm ignores feature gates it does not know: kubelet gates belong in kubelet.config.
    assert!(out.stderr.contains("`nodeadm.feature_gates.KubeletInUserNamespace` is not a nodeadm feature"), "{out:?}");
    assert!(out.stderr.contains("s.toml:"), "{out:?}");
}

#[test]
fn a_bottlerocket_group_cannot_read_a_nodeadm_template_and_disk_size_needs_no_template() {
    let env = Env::new();
    let text = variant(
        "al2023-nodeadm.toml",
        "ami_type        = \"AL2023_x86_64_NVIDIA\"\nscaling         = { min = 0, desired = 1, max = 4 }",
        "ami_type        = \"BOTTLEROCKET_x86_64_NVIDIA\"\ndisk_size       = 100\nscaling         = { min = 0, desired = 1, max = 4 }",
    );
    let path = env.write("s.toml", &text);
    let out = env.run(&["validate", path.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("is written for AL2023 (nodeadm user data)"), "{out:?}");
    assert!(out.stderr.contains("EKS refuses disk_size together with a launch template"), "{out:?}");
}

#[test]
fn a_self_managed_group_needs_an_access_entry_and_a_joining_template() {
    let env = Env::new();
    let text = variant(
        "self-managed.toml",
        "[eks_access_entry.nodes]\ncluster       = \"${eks_cluster.main.name}\"\nprincipal_arn = \"${iam_role.node.arn}\"\ntype          = \"EC2_LINUX\"\n",
        "",
    )
    .replacen("cluster          = \"${eks_cluster.main.name}\"\n", "", 1);
    let path = env.write("s.toml", &text);
    let out = env.run(&["validate", path.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("its node role has no EC2_LINUX access entry"), "{out:?}");
    assert!(out.stderr.contains("`instance_profile` is only for a self-managed group's template"), "{out:?}");
    assert!(out.stderr.contains("which does not join a cluster"), "{out:?}");
    let text = variant(
        "self-managed.toml",
        "spot_allocation_strategy = \"price-capacity-optimized\"",
        "spot_allocation_strategy = \"cheapest\"",
    );
    let path = env.write("t.toml", &text);
    let out = env.run(&["validate", path.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("found \"cheapest\""), "an unknown allocation strategy is named: {out:?}");
    let text = variant(
        "self-managed.toml",
        "spot_allocation_strategy = \"price-capacity-optimized\"",
        "spot_allocation_strategy = \"price-capacity-optimized\", spot_instance_pools = 4",
    );
    let path = env.write("u.toml", &text);
    let out = env.run(&["validate", path.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("spot_instance_pools = 4 needs spot_allocation_strategy = \"lowest-price\""),
        "{out:?}"
    );
    // Review r19-lt m3, in one pass: no type to launch (no instance_types, none in the
    // template); a Capacity Block template under mixed_instances; reservations-only with Spot.
    let text = variant("self-managed.toml", "instance_types  = [\"g6.2xlarge\", \"g5.2xlarge\", \"g6e.2xlarge\"]\n", "")
        .replacen(
            "spot_allocation_strategy = \"price-capacity-optimized\" }",
            "spot_allocation_strategy = \"price-capacity-optimized\" }\ncapacity_reservation = { preference = \"capacity-reservations-only\" }",
            1,
        )
        .replacen("root_volume      = { size_gib = 200 }", "root_volume      = { size_gib = 200 }\nmarket           = \"capacity-block\"", 1);
    let path = env.write("v.toml", &text);
    let out = env.run(&["validate", path.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("lists no instance_types and its template `launch_template.gpu` has no instance_type"),
        "{out:?}"
    );
    assert!(
        out.stderr
            .contains("uses the Capacity Block template `launch_template.gpu` with instance_types or mixed_instances"),
        "{out:?}"
    );
    assert!(out.stderr.contains("\"capacity-reservations-only\" launches On-Demand reservations only"), "{out:?}");
}

#[test]
fn the_al2023_example_applies_with_nodeadm_user_data_and_a_root_volume() {
    let env = Env::new();
    let file = example("al2023-nodeadm.toml");
    let apply = env.ok(&["apply", "--auto-approve", &file]);
    assert!(apply.stdout.contains("Apply complete"), "{apply:?}");
    let ec2 = env.emu.ec2();
    let (user_data, root) = block_on(async move {
        let t = ec2.describe_launch_templates().launch_template_names("al2023-dev-gpu").send().await.unwrap();
        let id = t.launch_template_ids_or_first();
        let v =
            ec2.describe_launch_template_versions().launch_template_id(id).versions("$Default").send().await.unwrap();
        let data = v.launch_template_versions()[0].launch_template_data().unwrap().clone();
        let ud = aws_smithy_types::base64::decode(data.user_data().unwrap()).unwrap();
        let root = data
            .block_device_mappings()
            .iter()
            .find(|m| m.device_name() == Some("/dev/xvda"))
            .and_then(|m| m.ebs().cloned())
            .unwrap();
        (String::from_utf8(ud).unwrap(), root)
    });
    assert!(user_data.starts_with("MIME-Version: 1.0\nContent-Type: multipart/mixed;"), "{user_data}");
    assert!(user_data.contains("Content-Type: application/node.eks.aws"), "{user_data}");
    assert!(user_data.contains("kind: NodeConfig"), "{user_data}");
    assert!(user_data.contains("maxPods: 58"), "{user_data}");
    assert!(user_data.contains("strategy: RAID0"), "{user_data}");
    assert!(user_data.contains("--node-labels=gpustack.io/pool=gpu"), "{user_data}");
    assert!(!user_data.contains("apiServerEndpoint"), "EKS fills a managed group's cluster: {user_data}");
    assert_eq!(root.volume_size(), Some(200));
    assert_eq!(root.volume_type().map(|t| t.as_str()), Some("gp3"));
    assert_eq!(root.encrypted(), Some(true));
    assert_eq!(root.iops(), None, "the OS-only root keeps gp3's baseline");
    let again = env.run(&["plan", "--detailed-exitcode", &file]);
    assert_eq!(again.code, 0, "in sync after apply: {again:?}");
    let eks = env.emu.eks();
    let spot = block_on(async move {
        let clusters = eks.list_clusters().send().await.unwrap();
        let cluster = clusters.clusters()[0].clone();
        eks.describe_nodegroup().cluster_name(cluster).nodegroup_name("al2023-dev-spot").send().await.unwrap()
    });
    let spot = spot.nodegroup().unwrap();
    assert_eq!(spot.capacity_type().map(|c| c.as_str()), Some("SPOT"));
    assert_eq!(spot.instance_types().len(), 3);
    env.ok(&["destroy", "--auto-approve", &file]);
    assert_eq!(env.tagged("al2023-dev").total(), 0);
}

#[test]
fn the_self_managed_example_applies_an_asg_that_joins_and_destroys_cleanly() {
    let env = Env::new();
    let file = example("self-managed.toml");
    env.emu.reset_requests();
    // Every instance profile is "not yet propagated" for its first Auto Scaling call: the
    // create is refused once and must be retried (the emulator's iam_propagation switch).
    env.emu.control("POST", "/_gpustack/iam-propagation?seconds=3600");
    let apply = env.ok(&["apply", "--auto-approve", &file]);
    assert!(apply.stdout.contains("Apply complete"), "{apply:?}");
    // The nodes carry the cluster security group, so they reach the API server and join.
    let nodes = env.emu.control("GET", "/_gpustack/autoscaling/nodes?name=selfmng-dev-gpu");
    assert_eq!(nodes["joined"], serde_json::json!(true), "{nodes}");
    let asg = autoscaling(&env);
    let g = block_on(async move {
        let out = asg.describe_auto_scaling_groups().auto_scaling_group_names("selfmng-dev-gpu").send().await.unwrap();
        out.auto_scaling_groups()[0].clone()
    });
    let mixed = g.mixed_instances_policy().expect("a mixed instances policy");
    let dist = mixed.instances_distribution().unwrap();
    assert_eq!(dist.on_demand_base_capacity(), Some(1));
    assert_eq!(dist.on_demand_percentage_above_base_capacity(), Some(0));
    assert_eq!(dist.spot_allocation_strategy(), Some("price-capacity-optimized"));
    assert_eq!(mixed.launch_template().unwrap().overrides().len(), 3);
    assert_eq!(g.capacity_rebalance(), Some(true));
    let tags: Vec<(String, String)> =
        g.tags().iter().map(|t| (t.key().unwrap().to_string(), t.value().unwrap_or_default().to_string())).collect();
    assert!(tags.iter().any(|(k, v)| k.starts_with("kubernetes.io/cluster/") && v == "owned"), "{tags:?}");
    assert!(tags.iter().any(|(k, v)| k == "k8s.io/cluster-autoscaler/enabled" && v == "true"), "{tags:?}");
    assert!(tags.iter().any(|(k, v)| k == "gpustack:address" && v == "self_managed_node_group.gpu"), "{tags:?}");
    // The template boots EKS's AL2023 NVIDIA AMI and joins the cluster with its endpoint.
    let ec2 = env.emu.ec2();
    let data = block_on(async move {
        let t = ec2.describe_launch_templates().launch_template_names("selfmng-dev-gpu").send().await.unwrap();
        let id = t.launch_template_ids_or_first();
        let v =
            ec2.describe_launch_template_versions().launch_template_id(id).versions("$Default").send().await.unwrap();
        v.launch_template_versions()[0].launch_template_data().unwrap().clone()
    });
    assert!(data.image_id().is_some_and(|i| i.starts_with("ami-")), "{data:?}");
    assert!(data.iam_instance_profile().and_then(|p| p.name()).is_some(), "{data:?}");
    let ud = String::from_utf8(aws_smithy_types::base64::decode(data.user_data().unwrap()).unwrap()).unwrap();
    assert!(ud.contains("apiServerEndpoint: https://"), "{ud}");
    assert!(ud.contains("certificateAuthority:"), "{ud}");
    assert!(ud.contains("cidr: "), "{ud}");
    let again = env.run(&["plan", "--detailed-exitcode", &file]);
    assert_eq!(again.code, 0, "in sync after apply: {again:?}");
    // A changed size and kubelet setting update the group and the template in place; the plan
    // says running instances keep the old template until refreshed.
    let bigger = variant("self-managed.toml", "max = 6 }", "max = 8 }").replacen("maxPods = 58", "maxPods = 60", 1);
    let path = env.write("bigger.toml", &bigger);
    // An autoscaler scaled the group out: a template change must not scale it back in.
    let asg = autoscaling(&env);
    block_on(async move {
        asg.set_desired_capacity().auto_scaling_group_name("selfmng-dev-gpu").desired_capacity(3).send().await.unwrap()
    });
    let plan = env.ok(&["plan", path.to_str().unwrap()]);
    assert!(plan.stdout.contains("self_managed_node_group.gpu") && plan.stdout.contains("update in place"), "{plan:?}");
    assert!(plan.stdout.contains("+                  maxPods: 60") || plan.stdout.contains("maxPods: 60"), "{plan:?}");
    assert!(plan.stdout.contains("start-instance-refresh"), "{plan:?}");
    // ... and that the template's new version re-reads the recommended AMI (review r19-lt m5).
    assert!(plan.stdout.contains("re-reads EKS's recommended AMI"), "{plan:?}");
    env.ok(&["apply", "--auto-approve", path.to_str().unwrap()]);
    let asg = autoscaling(&env);
    let sizes = block_on(async move {
        let out = asg.describe_auto_scaling_groups().auto_scaling_group_names("selfmng-dev-gpu").send().await.unwrap();
        let g = &out.auto_scaling_groups()[0];
        (g.max_size(), g.desired_capacity())
    });
    assert_eq!(sizes, (Some(8), Some(3)), "max raised, the autoscaler's desired capacity kept");
    env.ok(&["destroy", "--auto-approve", path.to_str().unwrap()]);
    let asg = autoscaling(&env);
    let left =
        block_on(async move { asg.describe_auto_scaling_groups().send().await.unwrap().auto_scaling_groups().len() });
    assert_eq!(left, 0, "the group is gone");
    assert_eq!(env.tagged("selfmng-dev").total(), 0);
    // Every call the apply and destroy made is in `gpustack policy`.
    let policy: serde_json::Value = serde_json::from_str(&env.ok(&["policy", &file]).stdout).unwrap();
    let allowed: std::collections::BTreeSet<String> = policy["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["Action"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()))
        .collect();
    let made: std::collections::BTreeSet<String> =
        env.emu.requests().into_iter().map(|(service, action)| format!("{service}:{action}")).collect();
    // (SetDesiredCapacity is this test's stand-in for the Cluster Autoscaler, not gpustack's.)
    let missing: Vec<&String> =
        made.iter().filter(|a| !allowed.contains(*a) && *a != "autoscaling:SetDesiredCapacity").collect();
    assert!(missing.is_empty(), "calls not in `gpustack policy`: {missing:?}");
}

trait FirstTemplate {
    fn launch_template_ids_or_first(&self) -> String;
}

impl FirstTemplate for aws_sdk_ec2::operation::describe_launch_templates::DescribeLaunchTemplatesOutput {
    fn launch_template_ids_or_first(&self) -> String {
        self.launch_templates()[0].launch_template_id().unwrap().to_string()
    }
}

/// Auto Scaling takes no client token: an apply killed right after CreateAutoScalingGroup
/// answered leaves a group the state does not record. The next apply adopts it by its name and
/// `gpustack:address` tag (one group, converged), and destroy removes it.
#[test]
fn an_apply_killed_after_create_auto_scaling_group_adopts_the_group() {
    let env = Env::new();
    let file = example("self-managed.toml");
    env.emu.set_latency(40);
    crate::crash::kill_after(&env, &["apply", "--auto-approve", &file], "CreateAutoScalingGroup");
    env.emu.set_latency(0);
    env.ok(&["apply", "--auto-approve", &file]);
    let asg = autoscaling(&env);
    let names: Vec<String> = block_on(async move {
        let out = asg.describe_auto_scaling_groups().send().await.unwrap();
        out.auto_scaling_groups().iter().filter_map(|g| g.auto_scaling_group_name().map(String::from)).collect()
    });
    assert_eq!(names, vec!["selfmng-dev-gpu".to_string()], "one group, adopted");
    assert_eq!(env.run(&["plan", "--detailed-exitcode", &file]).code, 0, "converged");
    env.ok(&["destroy", "--auto-approve", &file]);
    let asg = autoscaling(&env);
    let left =
        block_on(async move { asg.describe_auto_scaling_groups().send().await.unwrap().auto_scaling_groups().len() });
    assert_eq!(left, 0);
}
