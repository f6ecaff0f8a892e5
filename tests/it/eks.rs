//! EKS end to end: vpc → roles → cluster → add-on → launch templates → node groups,
//! read back from the emulator; in-place updates (labels, a new template version the
//! node group moves to), the Kubernetes upgrade rule, kubeconfig, destroy.

use crate::harness::{Env, block_on, network_stack};

/// A GPU cluster on the network stack: a time-sliced g6 pool and an EFA p5 pool.
pub fn eks_stack(name: &str, version: &str, gpu_labels: &str, extra: &str) -> String {
    // Nodes need a way out: the private subnet b routes through a NAT gateway in public a.
    let net = network_stack(
        name,
        &format!(
            r#"
[iam_role.cluster]
service          = "eks.amazonaws.com"
managed_policies = ["arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"]

[eks_cluster.main]
version             = "{version}"
role                = "${{iam_role.cluster.arn}}"
subnets             = ["${{subnet.a.id}}", "${{subnet.b.id}}"]
public_access_cidrs = ["203.0.113.0/24"]

[eks_addon.vpc_cni]
cluster       = "${{eks_cluster.main.name}}"
addon         = "vpc-cni"
configuration = {{ env = {{ ENABLE_PREFIX_DELEGATION = "true" }} }}

[launch_template.gpu]
node_labels = {gpu_labels}
node_taints = [{{ key = "nvidia.com/gpu", value = "true", effect = "NO_SCHEDULE" }}]
gpu_sharing = {{ strategy = "time-slicing", replicas = 4 }}
data_volume = {{ size_gib = 100 }}

[launch_template.p5]
instance_type = "p5.48xlarge"
efa           = {{ security_groups = ["${{security_group.efa.id}}"], interfaces = "max" }}

[node_group.gpu]
cluster         = "${{eks_cluster.main.name}}"
node_role       = "${{iam_role.node.arn}}"
subnets         = ["${{subnet.a.id}}", "${{subnet.b.id}}"]
launch_template = "${{launch_template.gpu.id}}"
instance_types  = ["g6.xlarge", "g5.xlarge"]
capacity_type   = "SPOT"
scaling         = {{ min = 0, desired = 1, max = 4 }}
labels          = {{ pool = "inference" }}
taints          = [{{ key = "nvidia.com/gpu", value = "true", effect = "NO_SCHEDULE" }}]

[node_group.train]
cluster         = "${{eks_cluster.main.name}}"
node_role       = "${{iam_role.node.arn}}"
subnets         = ["${{subnet.b.id}}"]
launch_template = "${{launch_template.p5.id}}"
scaling         = {{ min = 0, desired = 0, max = 2 }}

[nat_gateway.out]
subnet = "${{subnet.a.id}}"
{extra}"#
        ),
    );
    net.replacen(
        "availability_zone = \"us-west-2b\"\n",
        "availability_zone = \"us-west-2b\"\nnat_gateway       = \"${nat_gateway.out.id}\"\n",
        1,
    )
}

const LABELS: &str = r#"{ "gpustack.io/pool" = "inference" }"#;

/// The user data of a template's default version, decoded.
fn user_data(env: &Env, id: &str) -> (i64, String) {
    let ec2 = env.emu.ec2();
    let id = id.to_string();
    block_on(async move {
        let v =
            ec2.describe_launch_template_versions().launch_template_id(id).versions("$Default").send().await.unwrap();
        let v = &v.launch_template_versions()[0];
        let ud = v.launch_template_data().and_then(|d| d.user_data()).unwrap_or_default();
        let text = String::from_utf8(aws_smithy_types::base64::decode(ud).unwrap()).unwrap();
        (v.version_number().unwrap(), text)
    })
}

#[test]
fn a_gpu_cluster_applies_reads_back_updates_in_place_and_destroys() {
    let env = Env::new();
    env.write("s.toml", &eks_stack("gpu", "1.33", LABELS, ""));
    let apply = env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert!(apply.stdout.contains("Apply complete"), "{apply:?}");
    let st = env.state("gpu");
    let res = &st["resources"];
    let cluster = res["eks_cluster.main"]["outputs"]["name"].as_str().unwrap().to_string();
    assert_eq!(cluster, "gpu-main");
    for k in ["arn", "endpoint", "certificate_authority", "oidc_issuer", "security_group_id"] {
        assert!(!res["eks_cluster.main"]["outputs"][k].as_str().unwrap().is_empty(), "output {k}: {st}");
    }
    // "latest" is resolved once from SSM and pinned; "auto" picked the NVIDIA Bottlerocket AMI.
    let ng = &res["node_group.gpu"];
    assert_eq!(ng["inputs"]["release_version"], "latest");
    let pinned = ng["outputs"]["release_version"].as_str().unwrap().to_string();
    assert!(pinned.starts_with("1."), "pinned release {pinned}");
    assert_eq!(ng["outputs"]["ami_type"], "BOTTLEROCKET_x86_64_NVIDIA");

    // The user data is plain TOML with the labels, taints and time-slicing.
    let gpu_lt = res["launch_template.gpu"]["id"].as_str().unwrap().to_string();
    let (v1, ud) = user_data(&env, &gpu_lt);
    assert_eq!(v1, 1);
    let doc: toml_edit::DocumentMut = ud.parse().unwrap_or_else(|e| panic!("user data is not TOML: {e}\n{ud}"));
    let nvidia = &doc["settings"]["kubelet-device-plugins"]["nvidia"];
    assert_eq!(nvidia["device-sharing-strategy"].as_str(), Some("time-slicing"));
    assert_eq!(nvidia["time-slicing"]["replicas"].as_integer(), Some(4));
    assert_eq!(doc["settings"]["kubernetes"]["node-labels"]["gpustack.io/pool"].as_str(), Some("inference"));
    assert_eq!(doc["settings"]["kubernetes"]["node-taints"]["nvidia.com/gpu"][0].as_str(), Some("true:NoSchedule"));

    let p5_lt = res["launch_template.p5"]["id"].as_str().unwrap().to_string();
    let efa_sg = res["security_group.efa"]["id"].as_str().unwrap().to_string();
    let (ec2, eks) = (env.emu.ec2(), env.emu.eks());
    let (gpu_lt2, cluster2) = (gpu_lt.clone(), cluster.clone());
    block_on(async move {
        // p5.48xlarge with interfaces = "max": the catalog's 32 EFA interfaces, laid out
        // efa on card 0, efa-only on every further card; groups on each, no subnet.
        let v = ec2
            .describe_launch_template_versions()
            .launch_template_id(&p5_lt)
            .versions("$Default")
            .send()
            .await
            .unwrap();
        let data = v.launch_template_versions()[0].launch_template_data().unwrap();
        let nics = data.network_interfaces();
        assert_eq!(nics.len(), 32);
        assert_eq!(
            (nics[0].network_card_index(), nics[0].device_index(), nics[0].interface_type()),
            (Some(0), Some(0), Some("efa"))
        );
        for (k, n) in nics.iter().enumerate().skip(1) {
            assert_eq!(
                (n.network_card_index(), n.device_index(), n.interface_type()),
                (Some(k as i32), Some(1), Some("efa-only"))
            );
        }
        assert!(nics.iter().all(|n| n.subnet_id().is_none() && n.groups() == [efa_sg.clone()]));
        assert!(data.security_group_ids().is_empty(), "no instance-level groups with EFA interfaces");
        let md = data.metadata_options().unwrap();
        assert_eq!(
            (md.http_tokens().map(|t| t.as_str()), md.http_put_response_hop_limit()),
            (Some("required"), Some(1))
        );

        // The data volume is /dev/xvdb.
        let v = ec2
            .describe_launch_template_versions()
            .launch_template_id(&gpu_lt2)
            .versions("$Default")
            .send()
            .await
            .unwrap();
        let bdm = v.launch_template_versions()[0].launch_template_data().unwrap().block_device_mappings();
        assert_eq!(bdm.len(), 1);
        assert_eq!(bdm[0].device_name(), Some("/dev/xvdb"));
        assert_eq!(bdm[0].ebs().and_then(|e| e.volume_size()), Some(100));

        // The node group: capacity type, labels, taints, scaling, template version.
        let n = eks.describe_nodegroup().cluster_name(&cluster2).nodegroup_name("gpu-gpu").send().await.unwrap();
        let n = n.nodegroup().unwrap();
        assert_eq!(n.capacity_type().map(|c| c.as_str()), Some("SPOT"));
        assert_eq!(n.labels().unwrap().get("pool").map(String::as_str), Some("inference"));
        assert_eq!(n.taints()[0].key(), Some("nvidia.com/gpu"));
        assert_eq!(n.taints()[0].effect().map(|e| e.as_str()), Some("NO_SCHEDULE"));
        assert_eq!(n.launch_template().and_then(|l| l.version()), Some("1"));
        assert_eq!(n.ami_type().map(|a| a.as_str()), Some("BOTTLEROCKET_x86_64_NVIDIA"));
        let t = eks.describe_nodegroup().cluster_name(&cluster2).nodegroup_name("gpu-train").send().await.unwrap();
        assert_eq!(t.nodegroup().unwrap().capacity_type().map(|c| c.as_str()), Some("ON_DEMAND"));

        // The add-on's configuration went as JSON; its version is the cluster's default.
        let a = eks.describe_addon().cluster_name(&cluster2).addon_name("vpc-cni").send().await.unwrap();
        let a = a.addon().unwrap();
        let conf: serde_json::Value = serde_json::from_str(a.configuration_values().unwrap()).unwrap();
        assert_eq!(conf["env"]["ENABLE_PREFIX_DELEGATION"], "true");
        assert!(a.addon_version().unwrap().starts_with('v'), "{a:?}");
    });

    let again = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "a second plan has no changes: {again:?}");

    // A node-group label change is an in-place update, not a replace.
    env.write(
        "s.toml",
        &eks_stack("gpu", "1.33", LABELS, "")
            .replace("labels          = { pool = \"inference\" }", "labels          = { pool = \"serving\" }"),
    );
    let plan = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(plan.code, 2, "{plan:?}");
    assert!(plan.stdout.contains("~ node_group.gpu"), "{plan:?}");
    assert!(plan.stdout.contains("labels.pool: \"inference\" → \"serving\""), "{plan:?}");
    assert!(plan.stdout.contains("Plan: 0 to add, 1 to change, 0 to replace, 0 to delete."), "{plan:?}");
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let eks = env.emu.eks();
    let c = cluster.clone();
    block_on(async move {
        let n = eks.describe_nodegroup().cluster_name(&c).nodegroup_name("gpu-gpu").send().await.unwrap();
        assert_eq!(n.nodegroup().unwrap().labels().unwrap().get("pool").map(String::as_str), Some("serving"));
    });
    assert_eq!(
        env.state("gpu")["resources"]["node_group.gpu"]["outputs"]["release_version"],
        pinned.as_str(),
        "release stays pinned"
    );

    // A user-data change makes template version 2, shown as a TOML diff, and moves the node group to it.
    let relabeled = eks_stack("gpu", "1.33", r#"{ "gpustack.io/pool" = "batch" }"#, "")
        .replace("labels          = { pool = \"inference\" }", "labels          = { pool = \"serving\" }");
    env.write("s.toml", &relabeled);
    let plan = env.run(&["plan", "s.toml"]);
    assert!(plan.stdout.contains("~ launch_template.gpu"), "{plan:?}");
    assert!(plan.stdout.contains("-\"gpustack.io/pool\" = \"inference\""), "unified TOML diff: {plan:?}");
    assert!(plan.stdout.contains("+\"gpustack.io/pool\" = \"batch\""), "unified TOML diff: {plan:?}");
    assert!(plan.stdout.contains("~ node_group.gpu"), "the node group follows the template: {plan:?}");
    assert!(plan.stdout.contains("launch_template_version: 1 → (known after apply)"), "{plan:?}");
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let (v2, ud2) = user_data(&env, &gpu_lt);
    assert_eq!(v2, 2);
    assert!(ud2.contains("\"gpustack.io/pool\" = \"batch\""), "{ud2}");
    let eks = env.emu.eks();
    let c = cluster.clone();
    block_on(async move {
        let n = eks.describe_nodegroup().cluster_name(&c).nodegroup_name("gpu-gpu").send().await.unwrap();
        assert_eq!(n.nodegroup().unwrap().launch_template().and_then(|l| l.version()), Some("2"));
    });
    let again = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "in sync after the template update: {again:?}");

    // kubeconfig from state: the endpoint, the CA and `aws eks get-token`.
    let kc = env.ok(&["kubeconfig", "s.toml", "--kubeconfig", "kube/config"]);
    assert!(kc.stdout.contains("Added eks_cluster.main (gpu-main)"), "{kc:?}");
    let text = std::fs::read_to_string(env.path("kube/config")).unwrap();
    let endpoint =
        env.state("gpu")["resources"]["eks_cluster.main"]["outputs"]["endpoint"].as_str().unwrap().to_string();
    assert!(text.contains(&format!("server: {endpoint}")), "{text}");
    assert!(
        text.contains("get-token") && text.contains("gpu-main") && text.contains("certificate-authority-data"),
        "{text}"
    );

    let destroy = env.ok(&["destroy", "s.toml", "--auto-approve"]);
    assert!(destroy.stdout.contains("Destroy complete"), "{destroy:?}");
    assert_eq!(env.tagged("gpu").total(), 0);
    let (ec2, eks) = (env.emu.ec2(), env.emu.eks());
    block_on(async move {
        assert!(eks.list_clusters().send().await.unwrap().clusters().is_empty());
        assert!(ec2.describe_launch_templates().send().await.unwrap().launch_templates().is_empty());
    });
}

#[test]
fn kubernetes_upgrades_one_minor_version_at_a_time_in_place() {
    let env = Env::new();
    env.write("s.toml", &eks_stack("upg", "1.32", LABELS, ""));
    env.ok(&["apply", "s.toml", "--auto-approve"]);

    env.write("s.toml", &eks_stack("upg", "1.34", LABELS, ""));
    let skip = env.run(&["plan", "s.toml"]);
    assert_eq!(skip.code, 1, "{skip:?}");
    assert!(skip.stderr.contains("EKS upgrades one minor version at a time; 1.32 → 1.34 skips a version"), "{skip:?}");
    assert!(skip.stderr.contains("apply version = \"1.33\" first"), "{skip:?}");
    assert!(skip.stderr.contains("s.toml:"), "names the file and line: {skip:?}");

    env.write("s.toml", &eks_stack("upg", "1.33", LABELS, ""));
    let plan = env.ok(&["plan", "s.toml"]);
    assert!(plan.stdout.contains("~ eks_cluster.main"), "{plan:?}");
    assert!(plan.stdout.contains("version: \"1.32\" → \"1.33\""), "{plan:?}");
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let eks = env.emu.eks();
    block_on(async move {
        let c = eks.describe_cluster().name("upg-main").send().await.unwrap();
        assert_eq!(c.cluster().unwrap().version(), Some("1.33"));
    });
    env.ok(&["destroy", "s.toml", "--auto-approve"]);
}

#[test]
fn a_cluster_on_a_version_eks_no_longer_creates_is_still_planned_and_destroyed() {
    // EKS UG kubernetes-versions: past its end of extended support a version can no longer be
    // *created*; an existing control plane keeps running (EKS upgrades it). 1.31's ended on
    // 2026-11-26, 1.29's on 2026-03-23. The cluster exists (made on 1.33, standing in for one
    // created back then); the file still names the old version.
    let env = Env::new();
    env.write("s.toml", &eks_stack("old", "1.33", LABELS, ""));
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    env.write("s.toml", &eks_stack("old", "1.29", LABELS, ""));
    let plan = env.run(&["plan", "s.toml", "--destroy"]);
    assert_eq!(plan.code, 0, "{plan:?}");
    let destroy = env.ok(&["destroy", "s.toml", "--auto-approve"]);
    assert!(destroy.stdout.contains("Destroy complete"), "{destroy:?}");
    assert!(!destroy.stderr.contains("Kubernetes 1.29"), "no version diagnostic on destroy: {destroy:?}");
    // With the cluster gone, planning it again is a create, and that is refused.
    let create = env.run(&["plan", "s.toml"]);
    assert_eq!(create.code, 1, "{create:?}");
    assert!(create.stderr.contains("EKS no longer offers Kubernetes 1.29"), "{create:?}");
    assert!(create.stderr.contains("s.toml:"), "{create:?}");
}

#[test]
fn the_shipped_examples_apply_and_destroy() {
    let env = Env::new();
    let day = |d: i64| {
        let t = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * d);
        t.round(jiff::Unit::Second).unwrap().to_string()
    };
    let window = [format!("block_after={}", day(1)), format!("block_before={}", day(7))];
    for (file, stack) in [
        ("examples/inference.toml", "infer-dev"),
        ("examples/training.toml", "train-dev"),
        ("examples/hybrid.toml", "hybrid-dev"),
    ] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let p = path.to_str().unwrap();
        let mut args = vec![p];
        if file.ends_with("training.toml") {
            args.extend(["--var", &window[0], "--var", &window[1]]);
        }
        let with = |cmd: &[&str]| -> Vec<String> { cmd.iter().chain(args.iter()).map(|s| s.to_string()).collect() };
        env.emu.reset_requests();
        let apply = with(&["apply", "--auto-approve", "--approve-purchases"]);
        let apply = env.ok(&apply.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(apply.stdout.contains("Apply complete"), "{file}: {apply:?}");
        let again = with(&["plan", "--detailed-exitcode"]);
        let again = env.run(&again.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(again.code, 0, "{file} is in sync after apply: {again:?}");
        let destroy = with(&["destroy", "--auto-approve"]);
        env.ok(&destroy.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(env.tagged(stack).total(), 0, "{file}");
        // Every call this stack's plan, apply and destroy made is in `gpustack policy`'s
        // document for it, so a deploy role built from it is enough.
        let policy = with(&["policy"]);
        let policy: serde_json::Value =
            serde_json::from_str(&env.ok(&policy.iter().map(String::as_str).collect::<Vec<_>>()).stdout).unwrap();
        let allowed: std::collections::BTreeSet<String> = policy["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|s| s["Action"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()))
            .collect();
        let made: std::collections::BTreeSet<String> =
            env.emu.requests().into_iter().map(|(service, action)| format!("{service}:{action}")).collect();
        let missing: Vec<&String> = made.iter().filter(|a| !allowed.contains(*a)).collect();
        assert!(missing.is_empty(), "{file}: calls not in `gpustack policy`: {missing:?}");
        assert!(policy.to_string().contains(&format!("role/gpustack/{stack}/*")), "PassRole scoped to the stack");
    }
    assert_eq!(env.emu.purchases(), 1, "training.toml bought its block once");
}
