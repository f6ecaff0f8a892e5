//! Rendered kinds through the binary: a priority class is planned as `render` with its YAML,
//! recorded by apply without any AWS call, written by `gpustack manifests` from state, and
//! forgotten by destroy.

use crate::harness::Env;

const STACK: &str = r#"
[stack]
name = "pc"
region = "us-west-2"

[priority_class.training]
value = 1000000
description = "Critical training on reserved capacity"

[priority_class.research]
name = "research-spot"
value = 1000
preemption_policy = "Never"
"#;

#[test]
fn priority_classes_render_record_write_and_forget_without_aws() {
    let env = Env::new();
    env.write("pc.toml", STACK);
    let plan = env.ok(&["plan", "pc.toml"]);
    assert!(plan.stdout.contains("   » priority_class.training"), "{plan:?}");
    assert!(plan.stdout.contains("         +preemptionPolicy: Never"), "{plan:?}");
    assert!(plan.stdout.contains("2 to render (gpustack manifests)."), "{plan:?}");

    env.emu.reset_requests();
    env.ok(&["apply", "pc.toml", "--auto-approve"]);
    let calls: Vec<_> = env.emu.requests();
    assert!(calls.is_empty(), "a rendered kind makes no AWS call: {calls:?}");
    assert_eq!(env.state("pc")["resources"]["priority_class.research"]["outputs"]["name"], "research-spot");
    assert!(env.ok(&["plan", "pc.toml"]).stdout.contains("No changes. 2 resources in sync."));

    env.ok(&["manifests", "pc.toml", "--out", "k8s"]);
    let first = std::fs::read_to_string(env.path("k8s/priority-classes.yaml")).unwrap();
    env.ok(&["manifests", "pc.toml", "--out", "k8s"]);
    assert_eq!(first, std::fs::read_to_string(env.path("k8s/priority-classes.yaml")).unwrap(), "byte-identical");
    assert!(
        first.starts_with(
            "---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: pc-training\n"
        )
    );
    assert!(first.contains("  name: research-spot\n") && first.contains("value: 1000\n"), "{first}");
    let stream = env.ok(&["manifests", "pc.toml"]).stdout;
    assert_eq!(stream, format!("# gpustack manifests: priority-classes.yaml\n{first}"));

    // Kubernetes cannot change a PriorityClass's value: the plan says what to do.
    env.write("pc.toml", &STACK.replace("value = 1000\n", "value = 2000\n"));
    let plan = env.ok(&["plan", "pc.toml"]);
    assert!(plan.stdout.contains("-value: 1000\n") && plan.stdout.contains("+value: 2000\n"), "{plan:?}");
    assert!(plan.stdout.contains("kubectl delete priorityclass research-spot"), "{plan:?}");

    let gone = env.ok(&["destroy", "pc.toml", "--auto-approve"]);
    assert!(gone.stderr.contains("forgotten (remove it from the cluster yourself"), "{gone:?}");
    assert!(env.state("pc")["resources"].as_object().unwrap().is_empty());
}

#[test]
fn manifests_before_apply_say_to_apply_first() {
    let env = Env::new();
    env.write("pc.toml", STACK);
    let r = env.run(&["manifests", "pc.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("no state at state/pc.json: run `gpustack apply` first"), "{r:?}");
}

/// An AL2023 NVIDIA node group shares GPUs through NVIDIA's device plugin: the group's own
/// `gpu_sharing` becomes the plugin's named config in `nvidia-device-plugin/values.yaml`, and
/// the group carries the labels that select it.
fn al2023_stack(sharing: &str, ami: &str) -> String {
    crate::harness::network_stack(
        "al",
        &format!(
            r#"
[iam_role.cluster]
service          = "eks.amazonaws.com"
managed_policies = ["arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"]

[eks_cluster.main]
version             = "1.33"
role                = "${{iam_role.cluster.arn}}"
subnets             = ["${{subnet.a.id}}", "${{subnet.b.id}}"]
public_access_cidrs = ["203.0.113.0/24"]

[node_group.system]
cluster        = "${{eks_cluster.main.name}}"
node_role      = "${{iam_role.node.arn}}"
subnets        = ["${{subnet.a.id}}"]
instance_types = ["m6i.large"]
scaling        = {{ min = 1, desired = 1, max = 2 }}

[node_group.gpu]
cluster        = "${{eks_cluster.main.name}}"
node_role      = "${{iam_role.node.arn}}"
subnets        = ["${{subnet.a.id}}"]
instance_types = ["g6.xlarge"]
ami_type       = "{ami}"
scaling        = {{ min = 0, desired = 1, max = 2 }}
labels         = {{ pool = "inference" }}
taints         = [{{ key = "nvidia.com/gpu", value = "true", effect = "NO_SCHEDULE" }}]
gpu_sharing    = {sharing}
"#
        ),
    )
}

#[test]
fn al2023_gpu_sharing_renders_the_device_plugin_config_and_labels_the_group() {
    let env = Env::new();
    env.write("al.toml", &al2023_stack("{ strategy = \"time-slicing\", replicas = 4 }", "AL2023_x86_64_NVIDIA"));
    env.ok(&["apply", "al.toml", "--auto-approve"]);
    let group = crate::harness::block_on(async {
        let eks = env.emu.eks();
        let st = env.state("al");
        let cluster = st["resources"]["eks_cluster.main"]["outputs"]["name"].as_str().unwrap().to_string();
        let name = st["resources"]["node_group.gpu"]["outputs"]["name"].as_str().unwrap().to_string();
        eks.describe_nodegroup().cluster_name(cluster).nodegroup_name(name).send().await.unwrap()
    });
    let labels = group.nodegroup().and_then(|n| n.labels()).cloned().unwrap_or_default();
    assert_eq!(labels.get("nvidia.com/device-plugin.config").map(String::as_str), Some("time-slicing-4"), "{labels:?}");
    assert_eq!(labels.get("nvidia.com/gpu.present").map(String::as_str), Some("true"));
    assert_eq!(labels.get("pool").map(String::as_str), Some("inference"));
    assert!(env.ok(&["plan", "al.toml"]).stdout.contains("No changes."), "the labels gpustack adds are in sync");

    env.ok(&["manifests", "al.toml", "--out", "k8s"]);
    let values = std::fs::read_to_string(env.path("k8s/nvidia-device-plugin/values.yaml")).unwrap();
    assert!(values.contains("default: default"), "{values}");
    assert!(values.contains("time-slicing-4: |"), "{values}");
    assert!(values.contains("replicas: 4"), "{values}");
    assert!(values.contains("renameByDefault: true"), "{values}");
    env.ok(&["destroy", "al.toml", "--auto-approve"]);
}

/// Issue 18 item 2 / audit B2: the chart runs the MPS control daemon only on nodes labelled
/// `nvidia.com/mps.capable: "true"` ("We only deploy this pod if the following sharing label
/// is applied": NVIDIA/k8s-device-plugin v0.20.0
/// `deployments/helm/nvidia-device-plugin/templates/daemonset-mps-control-daemon.yml`), and the
/// plugin waits for that daemon ("error waiting for MPS daemon", `internal/plugin/server.go`).
/// GPU Feature Discovery, which would write the label, is off in the chart; an MPS group gets
/// the label from gpustack.
#[test]
fn al2023_mps_labels_the_group_for_the_mps_control_daemon() {
    let env = Env::new();
    env.write("al.toml", &al2023_stack("{ strategy = \"mps\", replicas = 4 }", "AL2023_x86_64_NVIDIA"));
    let plan = env.ok(&["plan", "al.toml"]);
    let group = plan.stdout.split("node_group.gpu").nth(1).unwrap_or_default();
    assert!(group.contains("nvidia.com/mps.capable = \"true\""), "{plan:?}");
    assert!(group.contains("nvidia.com/device-plugin.config = \"mps-4\""), "{plan:?}");
    // Time-slicing needs no MPS daemon, and gets no such label.
    env.write("al.toml", &al2023_stack("{ strategy = \"time-slicing\", replicas = 4 }", "AL2023_x86_64_NVIDIA"));
    assert!(!env.ok(&["plan", "al.toml"]).stdout.contains("mps.capable"));
}

#[test]
fn node_group_gpu_sharing_is_for_al2023_nvidia_and_mig_needs_the_gpu_operator() {
    let env = Env::new();
    env.write("b.toml", &al2023_stack("{ strategy = \"time-slicing\", replicas = 4 }", "BOTTLEROCKET_x86_64_NVIDIA"));
    let r = env.run(&["validate", "b.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("gpu_sharing on a node group configures AL2023's NVIDIA device plugin, but ami_type is \"BOTTLEROCKET_x86_64_NVIDIA\""), "{r:?}");
    assert!(r.stderr.contains("for Bottlerocket put gpu_sharing in the launch template"), "{r:?}");
    env.write(
        "m.toml",
        &al2023_stack("{ strategy = \"mig\", mig_profile = { \"h100.80gb\" = \"7\" } }", "AL2023_x86_64_NVIDIA"),
    );
    let r = env.run(&["validate", "m.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("MIG on AL2023 needs NVIDIA's MIG manager"), "{r:?}");
    assert!(r.stderr.contains("add [gpu_operator.main]"), "the help names the fix: {r:?}");
    // With a GPU Operator running the MIG manager for the cluster, MIG on AL2023 validates.
    let with_operator = format!(
        "{}\n[gpu_operator.main]\ncluster = \"${{eks_cluster.main.name}}\"\nmig = {{ strategy = \"mixed\" }}\n",
        al2023_stack("{ strategy = \"mig\", mig_profile = { \"h100.80gb\" = \"7\" } }", "AL2023_x86_64_NVIDIA")
    );
    env.write("mo.toml", &with_operator);
    env.ok(&["validate", "mo.toml"]);
    env.write("ok.toml", &al2023_stack("{ strategy = \"mps\", replicas = 8 }", "AL2023_x86_64_NVIDIA"));
    env.ok(&["validate", "ok.toml"]);
}

fn example(name: &str) -> String {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join(name).to_string_lossy().into_owned()
}

/// Every call `args` made since the last reset is in `gpustack policy`'s document.
fn policy_covers(env: &Env, file: &str) {
    let policy: serde_json::Value = serde_json::from_str(&env.ok(&["policy", file]).stdout).unwrap();
    let allowed: std::collections::BTreeSet<String> = policy["Statement"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["Action"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()))
        .collect();
    let made: Vec<String> = env.emu.requests().into_iter().map(|(s, a)| format!("{s}:{a}")).collect();
    let missing: Vec<&String> = made.iter().filter(|a| !allowed.contains(*a)).collect();
    assert!(missing.is_empty(), "{file}: calls not in `gpustack policy`: {missing:?}");
}

/// examples/gpu-operator.toml as shipped: MIG on an AL2023 H100 group through the GPU
/// Operator. Apply creates the AWS side (the group labelled for its MIG layout, the
/// CloudWatch add-on) and records the operator; `manifests` writes the operator's values
/// with the MIG manager's config and the tolerations, byte-identical between runs; a new
/// GPU group shows in the next plan as a change of the operator's values; destroy forgets it.
#[test]
fn gpu_operator_example_applies_labels_the_mig_group_and_renders_the_operator() {
    let env = Env::new();
    let file = example("gpu-operator.toml");
    let plan = env.ok(&["plan", &file]);
    assert!(plan.stdout.contains("   » gpu_operator.main"), "{plan:?}");
    assert!(plan.stdout.contains("+  mig:\n") || plan.stdout.contains("+mig:"), "{}", plan.stdout);
    env.emu.reset_requests();
    env.ok(&["apply", &file, "--auto-approve"]);
    policy_covers(&env, &file);
    let st = env.state("mig-dev");
    let (cluster, group) = (
        st["resources"]["eks_cluster.main"]["outputs"]["name"].as_str().unwrap().to_string(),
        st["resources"]["node_group.h100"]["outputs"]["name"].as_str().unwrap().to_string(),
    );
    let (labels, addon) = crate::harness::block_on(async {
        let eks = env.emu.eks();
        let ng = eks.describe_nodegroup().cluster_name(&cluster).nodegroup_name(&group).send().await.unwrap();
        let addon = eks
            .describe_addon()
            .cluster_name(&cluster)
            .addon_name("amazon-cloudwatch-observability")
            .send()
            .await
            .unwrap();
        (ng.nodegroup().and_then(|n| n.labels()).cloned().unwrap_or_default(), addon)
    });
    assert_eq!(labels.get("nvidia.com/mig.config").map(String::as_str), Some("all-1g.10gb"), "{labels:?}");
    assert_eq!(labels.get("nvidia.com/device-plugin.config").map(String::as_str), Some("mig"), "{labels:?}");
    assert!(addon.addon().is_some());
    assert!(env.ok(&["plan", &file]).stdout.contains("No changes."));

    env.ok(&["manifests", &file, "--out", "k8s"]);
    let values = std::fs::read_to_string(env.path("k8s/gpu-operator/values.yaml")).unwrap();
    env.ok(&["manifests", &file, "--out", "k8s"]);
    assert_eq!(values, std::fs::read_to_string(env.path("k8s/gpu-operator/values.yaml")).unwrap(), "byte-identical");
    assert!(values.contains("helm upgrade --install gpu-operator nvidia/gpu-operator --version v26.7.0"), "{values}");
    let v: serde_json::Value = serde_yaml_ng::from_str(&values).unwrap();
    assert_eq!(v["driver"]["enabled"], false);
    assert_eq!(v["toolkit"]["enabled"], false);
    assert_eq!(v["migManager"]["enabled"], true);
    assert_eq!(v["mig"]["strategy"], "mixed");
    // The MIG manager's built-in per-model config holds all-1g.10gb: no custom one.
    assert_eq!(v["migManager"], serde_json::json!({ "enabled": true }), "{values}");
    // GPU metrics come from the CloudWatch add-on: one DCGM exporter per GPU.
    assert_eq!(v["dcgmExporter"]["enabled"], false);
    // One device plugin per node: the operator's, so no standalone chart values.
    assert!(!env.path("k8s/nvidia-device-plugin/values.yaml").exists());
    let stream = env.ok(&["manifests", &file]);
    assert!(stream.stderr.contains("gpu-operator/values.yaml"), "Helm values only with --out: {stream:?}");

    // A new tainted GPU group: the plan shows the operator's values gaining its toleration.
    let text = std::fs::read_to_string(&file).unwrap().replace(
        "[gpu_operator.main]",
        "[node_group.l4]\ncluster        = \"${eks_cluster.main.name}\"\nnode_role      = \"${iam_role.node.arn}\"\nsubnets        = [\"${subnet.a.id}\"]\nami_type       = \"AL2023_x86_64_NVIDIA\"\ninstance_types = [\"g6.xlarge\"]\ntaints         = [{ key = \"inference\", value = \"true\", effect = \"NO_SCHEDULE\" }]\n\n[gpu_operator.main]",
    );
    env.write("more.toml", &text);
    let plan = env.ok(&["plan", "more.toml"]);
    let operator = plan.stdout.split("gpu_operator.main").nth(1).unwrap_or_default();
    assert!(operator.contains("+  - key: inference"), "{}", plan.stdout);

    let gone = env.ok(&["destroy", &file, "--auto-approve"]);
    assert!(gone.stdout.contains("Destroy complete"), "{gone:?}");
    assert_eq!(env.tagged("mig-dev").total(), 0);
}

/// examples/neuron.toml as shipped: Inferentia2 and Trainium groups on the AL2023 Neuron
/// AMI; `manifests` writes the Neuron chart's values naming exactly those types and
/// tolerating their taints.
#[test]
fn neuron_example_applies_and_renders_the_neuron_device_plugin() {
    let env = Env::new();
    let file = example("neuron.toml");
    // A fresh account has no Inf or Trn quota (the plan names it); this one asked for it.
    let refused = env.run(&["plan", &file]);
    assert!(refused.stderr.contains("quota L-1945791B (Running On-Demand Inf instances)"), "{refused:?}");
    env.emu.control("POST", "/_gpustack/quotas?code=L-1945791B&value=128");
    env.emu.control("POST", "/_gpustack/quotas?code=L-2C3B7624&value=16");
    env.emu.reset_requests();
    env.ok(&["apply", &file, "--auto-approve"]);
    policy_covers(&env, &file);
    env.ok(&["manifests", &file, "--out", "k8s"]);
    let values = std::fs::read_to_string(env.path("k8s/neuron-device-plugin/values.yaml")).unwrap();
    let v: serde_json::Value = serde_yaml_ng::from_str(&values).unwrap();
    assert_eq!(v["neuronInstances"], serde_json::json!(["inf2.8xlarge", "inf2.xlarge", "trn1.2xlarge"]), "{values}");
    let keys: Vec<&str> =
        v["devicePlugin"]["tolerations"].as_array().unwrap().iter().map(|t| t["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["CriticalAddonsOnly", "aws.amazon.com/neuron", "training"], "{values}");
    assert!(values.contains("aws.amazon.com/neuroncore"), "{values}");
    assert!(values.contains("neuron-helm-chart --version 1.0.0"), "{values}");
    assert_eq!(v["npd"]["enabled"], false, "{values}");
    assert!(!env.path("k8s/nvidia-device-plugin/values.yaml").exists());
    env.ok(&["destroy", &file, "--auto-approve"]);
    assert_eq!(env.tagged("neuron-dev").total(), 0);
}

/// A `dcgm_exporter` without a GPU Operator: recorded by apply, written by `manifests` pinned
/// to the AL2023 GPU group by EKS's node group label and tolerating its taint (the chart would otherwise
/// run on every node, and fail where there is no GPU).
#[test]
fn dcgm_exporter_renders_for_the_clusters_nvidia_groups() {
    let env = Env::new();
    let stack = format!(
        "{}\n[dcgm_exporter.main]\ncluster = \"${{eks_cluster.main.name}}\"\n",
        al2023_stack("{ strategy = \"time-slicing\", replicas = 4 }", "AL2023_x86_64_NVIDIA")
    );
    env.write("al.toml", &stack);
    let plan = env.ok(&["plan", "al.toml"]);
    assert!(plan.stdout.contains("   » dcgm_exporter.main"), "{plan:?}");
    env.ok(&["apply", "al.toml", "--auto-approve"]);
    env.ok(&["manifests", "al.toml", "--out", "k8s"]);
    let values = std::fs::read_to_string(env.path("k8s/dcgm-exporter/values.yaml")).unwrap();
    let v: serde_json::Value = serde_yaml_ng::from_str(&values).unwrap();
    let terms = &v["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
    assert_eq!(terms[0]["matchExpressions"][0]["key"], "eks.amazonaws.com/nodegroup", "{values}");
    assert_eq!(terms[0]["matchExpressions"][0]["values"].as_array().map(Vec::len), Some(1), "{values}");
    assert_eq!(v["tolerations"][1]["key"], "nvidia.com/gpu", "{values}");
    // The standalone device plugin still serves the group (no operator).
    assert!(env.path("k8s/nvidia-device-plugin/values.yaml").exists());
    env.ok(&["destroy", "al.toml", "--auto-approve"]);
}
