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
fn node_group_gpu_sharing_is_for_al2023_nvidia_and_not_mig() {
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
    env.write("ok.toml", &al2023_stack("{ strategy = \"mps\", replicas = 8 }", "AL2023_x86_64_NVIDIA"));
    env.ok(&["validate", "ok.toml"]);
}
