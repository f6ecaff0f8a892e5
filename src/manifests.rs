//! The Kubernetes side (DESIGN.md "The Kubernetes side"): the YAML of the stack's rendered
//! kinds, with the ids filled in from state, and the Helm values of the device plugins the
//! stack's GPU nodes need (EFA, and NVIDIA's on AL2023), as files in a stable order. No AWS
//! call and no Kubernetes API call: the output is for GitOps, `helm` and `kubectl apply -f`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value as Json, json};

use crate::plan::desired_inputs;
use crate::resources::launch_template::gpu_sharing::nvidia_config;
use crate::resources::{self, karpenter_pool::k8s_effect};
use crate::rules::{al2023_sharing, gpu_addons, lit, lit_str, node_groups, referenced, strings};
use crate::stack::{Resource, Stack};
use crate::state::State;
use crate::value::{Attrs, Value, attrs_from_json};

/// One file `gpustack manifests` writes: its path under `--out`, and its text.
#[derive(Debug, PartialEq)]
pub struct File {
    pub path: String,
    pub text: String,
}

impl File {
    /// Helm values (`…/values.yaml`), not Kubernetes objects: `helm install -f` takes them,
    /// `kubectl apply` would refuse them.
    pub fn is_helm_values(&self) -> bool {
        self.path.ends_with("/values.yaml")
    }
}

/// Every file of the stack's rendered resources, sorted by path, each holding its resources'
/// documents in the stack's order. Errors: one line per resource not applied yet.
pub fn render(stack: &Stack, state: &State) -> Result<Vec<File>, Vec<String>> {
    let outputs_of = |a: &str| state.resources.get(a).map(|e| attrs_from_json(&e.outputs));
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    let mut errors = vec![];
    for (idx, r) in stack.resources.iter().enumerate() {
        let kind = resources::of(r);
        if !kind.rendered() {
            continue;
        }
        let inputs: Attrs = desired_inputs(stack, idx, &outputs_of);
        let unknown: Vec<&str> = inputs.iter().filter(|(_, v)| !v.is_known()).map(|(k, _)| k.as_str()).collect();
        if !state.resources.contains_key(&r.address) || !unknown.is_empty() {
            let why = if unknown.is_empty() {
                "is not applied yet".to_string()
            } else {
                format!("uses values known only after apply ({})", unknown.join(", "))
            };
            errors.push(format!("`{}` {why}: run `gpustack apply` first, so its ids come from state", r.address));
            continue;
        }
        let outputs = outputs_of(&r.address).unwrap_or_default();
        if let Some(m) = kind.render(&r.address, &inputs, &outputs) {
            files.entry(m.file).or_default().push_str(&m.yaml);
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    for f in [efa_device_plugin(stack), nvidia_device_plugin(stack), hyperpod_dependencies(stack)]
        .into_iter()
        .flatten()
        .chain(neuron_device_plugin(stack))
        .chain(karpenter_values(stack, state))
    {
        files.insert(f.path, f.text);
    }
    Ok(files.into_iter().map(|(path, text)| File { path, text }).collect())
}

/// `karpenter-chart/values.yaml` (`karpenter-chart/<name>.values.yaml` with several
/// controllers; not under `karpenter/`, which `kubectl apply -R` takes whole): the
/// Karpenter chart's values for each applied `karpenter_controller`: the cluster, the
/// interruption queue by name, and the service account its Pod Identity association names
/// (chart `charts/karpenter/values.yaml`: `settings.clusterName`, `settings.interruptionQueue`,
/// `serviceAccount.name`; aws-facts §11). The chart version is the controller's `version`.
pub fn karpenter_values(stack: &Stack, state: &State) -> Vec<File> {
    let controllers: Vec<&Resource> =
        stack.resources.iter().filter(|r| r.kind.name() == "karpenter_controller").collect();
    let mut files = vec![];
    for r in &controllers {
        let Some(e) = state.resources.get(&r.address) else { continue };
        let (inputs, outputs) = (attrs_from_json(&e.inputs), attrs_from_json(&e.outputs));
        let get = |a: &Attrs, k: &str| a.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
        let (version, namespace) = (get(&inputs, "version"), get(&inputs, "namespace"));
        let header = format!(
            "# Values for Karpenter {version}, from {}:\n#   helm upgrade --install karpenter oci://public.ecr.aws/karpenter/karpenter --version {version} \\\n#     --namespace {namespace} -f THIS_FILE\n",
            r.address
        );
        let values = json!({
            "settings": { "clusterName": get(&inputs, "cluster"), "interruptionQueue": get(&outputs, "queue_name") },
            "serviceAccount": { "create": true, "name": get(&inputs, "service_account") },
        });
        let path = if controllers.len() == 1 {
            "karpenter-chart/values.yaml".to_string()
        } else {
            format!("karpenter-chart/{}.values.yaml", r.name)
        };
        files.push(File { path, text: helm_values(&header, &values) });
    }
    files
}

/// Helm values: a comment naming the chart, then the values (no `---`: one document).
fn helm_values(header: &str, values: &Json) -> String {
    // serde_yaml_ng cannot fail on a serde_json::Value (string keys, finite numbers).
    format!("{header}{}", serde_yaml_ng::to_string(values).unwrap_or_default())
}

/// Tolerations for the taints `(key, effect)`: the plugin's pods must run on the tainted GPU
/// nodes they serve.
fn tolerations_json(taints: &BTreeSet<(String, String)>) -> Json {
    Json::Array(
        taints.iter().map(|(key, effect)| json!({ "key": key, "operator": "Exists", "effect": effect })).collect(),
    )
}

/// `(key, Kubernetes effect)` of each taint in a `[{ key, value, effect }]` attribute.
fn taints_of(r: &Resource, attr: &str) -> Vec<(String, String)> {
    crate::rules::karpenter::taints(r, attr)
        .into_iter()
        .map(|(key, _, effect)| (key, k8s_effect(&effect).to_string()))
        .collect()
}

/// `efa-device-plugin/values.yaml`, for the `aws-efa-k8s-device-plugin` chart, when a node
/// group or pool has `efa`: without the plugin no pod gets `vpc.amazonaws.com/efa` and NCCL
/// falls back to TCP. The chart has no affinity value; it builds a required node affinity from
/// `supportedInstanceLabels`, and its built-in list of types misses newer ones (aws-do-eks#56,
/// eks-charts#1348), so the list is exactly the stack's EFA types; the GPU taints of those
/// nodes are tolerated (aws-facts §13).
pub fn efa_device_plugin(stack: &Stack) -> Option<File> {
    let mut types = BTreeSet::new();
    let mut taints = BTreeSet::new();
    for ng in node_groups(stack) {
        let Some(lt) =
            referenced(stack, ng, "launch_template", "launch_template").filter(|lt| lt.attrs.contains_key("efa"))
        else {
            continue;
        };
        types.extend(lit_str(lt, "instance_type").into_iter().chain(strings(lit(ng, "instance_types"))));
        taints.extend(taints_of(ng, "taints").into_iter().chain(taints_of(lt, "node_taints")));
    }
    for pool in stack.resources.iter().filter(|r| r.kind.name() == "karpenter_pool" && r.attrs.contains_key("efa")) {
        types.extend(strings(lit(pool, "instance_types")));
        taints.extend(taints_of(pool, "node_taints"));
    }
    if types.is_empty() {
        return None;
    }
    let mut values = json!({
        "supportedInstanceLabels": { "keys": ["node.kubernetes.io/instance-type"], "values": types },
    });
    if !taints.is_empty() {
        values["tolerations"] = tolerations_json(&taints);
    }
    let header = "# Helm values for the EFA device plugin, written by gpustack for the stack's EFA instance types:\n\
                  #   helm install aws-efa-k8s-device-plugin eks/aws-efa-k8s-device-plugin -n kube-system -f efa-device-plugin/values.yaml\n";
    Some(File { path: "efa-device-plugin/values.yaml".into(), text: helm_values(header, &values) })
}

/// `nvidia-device-plugin/values.yaml`, for NVIDIA's `nvidia-device-plugin` chart, when an
/// AL2023 NVIDIA node group shares GPUs: one named config per sharing layout in `config.map`
/// (plus `default`, whole GPUs, for nodes without the label), each picked by the node label
/// `nvidia.com/device-plugin.config=<name>` (the rules say which labels a group lacks).
/// Nothing for Bottlerocket: a second plugin there conflicts with the host's (bottlerocket#4309).
/// Nor for groups whose cluster has a `gpu_operator` with its device plugin: the operator's
/// values carry their configs (one device plugin per node).
pub fn nvidia_device_plugin(stack: &Stack) -> Option<File> {
    let mut configs: BTreeMap<String, Json> = BTreeMap::new();
    let mut taints = BTreeSet::new();
    // The sharing groups of clusters whose gpu_operator runs without its device plugin.
    let mut beside_operator = false;
    let mut served: BTreeSet<String> = BTreeSet::new();
    for (ng, _, sharing) in
        al2023_sharing(stack).into_iter().filter(|(ng, _, _)| !gpu_addons::operator_runs_device_plugin(stack, ng))
    {
        let Some((name, config)) = nvidia_config(&sharing) else { continue };
        configs.insert(name, config);
        served.insert(gpu_addons::physical_name(stack, ng));
        beside_operator |= gpu_addons::operator_in_cluster(stack, ng);
        taints.extend(taints_of(ng, "taints"));
        if let Some(lt) = referenced(stack, ng, "launch_template", "launch_template") {
            taints.extend(taints_of(lt, "node_taints"));
        }
    }
    if configs.is_empty() {
        return None;
    }
    configs.insert("default".into(), json!({ "version": "v1", "flags": { "migStrategy": "none" } }));
    // config.map holds each config file as a string (the chart writes it into a ConfigMap).
    let map: serde_json::Map<String, Json> = configs
        .iter()
        .map(|(k, v)| (k.clone(), Json::String(serde_yaml_ng::to_string(v).unwrap_or_default())))
        .collect();
    let mut values = json!({ "config": { "default": "default", "map": map } });
    // HyperPod nodes (ml.* types) get the HyperPod chart's own plugin: keep this one off them.
    // The chart's default affinity selects NVIDIA nodes by NFD/GFD labels, which HyperPod
    // nodes may carry too; gpustack labels its sharing groups nvidia.com/gpu.present=true.
    let ml = hyperpod_types(stack);
    if !ml.is_empty() {
        values["affinity"] = json!({ "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{ "matchExpressions": [
                { "key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"] },
                { "key": "node.kubernetes.io/instance-type", "operator": "NotIn", "values": ml },
            ] }]
        } } });
    }
    // Next to a gpu_operator (device_plugin = false), the operator's NFD labels every NVIDIA
    // node feature.node.kubernetes.io/pci-10de.present=true, Bottlerocket ones too, and the
    // chart's default affinity selects by that label (k8s-device-plugin v0.20.0 values.yaml
    // `affinity`): pin the plugin to the AL2023 groups it serves by EKS's node group label,
    // so it never lands next to Bottlerocket's host plugin (bottlerocket#4309).
    if beside_operator {
        let groups: Vec<&String> = served.iter().collect();
        values["affinity"] = json!({ "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{ "matchExpressions": [
                { "key": gpu_addons::NODEGROUP_LABEL, "operator": "In", "values": groups },
            ] }]
        } } });
    }
    // The chart tolerates CriticalAddonsOnly and nvidia.com/gpu:NoSchedule by default; a list
    // given in values replaces the default whole, so other GPU taints come with those two.
    let defaults = json!([
        { "key": "CriticalAddonsOnly", "operator": "Exists" },
        { "key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule" },
    ]);
    taints.retain(|(k, e)| !(k == "nvidia.com/gpu" && e == "NoSchedule"));
    if let (false, Json::Array(mut all), Json::Array(more)) = (taints.is_empty(), defaults, tolerations_json(&taints)) {
        all.extend(more.clone());
        values["tolerations"] = Json::Array(all);
        // GPU Feature Discovery stays off (the chart's default; gpu_operator.gfd is gpustack's
        // way to run it), but if it is turned on here, it publishes through NFD workers that
        // tolerate only nvidia.com/gpu=present (chart values.yaml v0.20.0, `nfd.worker`): they
        // get the GPU groups' taints too, so GFD's labels reach the tainted nodes.
        let mut nfd = vec![
            json!({ "key": "node-role.kubernetes.io/master", "operator": "Equal", "value": "", "effect": "NoSchedule" }),
            json!({ "key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule" }),
        ];
        nfd.extend(more);
        values["nfd"] = json!({ "worker": { "tolerations": nfd } });
    }
    let header = "# Helm values for the NVIDIA device plugin on AL2023 node groups, written by gpustack:\n\
                  #   helm install nvdp nvdp/nvidia-device-plugin -n kube-system -f nvidia-device-plugin/values.yaml\n\
                  # A node takes the config its label nvidia.com/device-plugin.config names (default: whole GPUs).\n\
                  # GPU Feature Discovery is off here; a gpu_operator with gfd = true runs it (or --set gfd.enabled=true:\n\
                  # the NFD workers below already tolerate the GPU nodes' taints).\n";
    Some(File { path: "nvidia-device-plugin/values.yaml".into(), text: helm_values(header, &values) })
}

/// The pinned commit of aws-neuron/neuron-helm-charts whose `charts/neuron-helm-chart`
/// (chart version 1.0.0) the Neuron values are written for; its values.yaml is vendored in
/// tests/k8s/charts/ and the keys below are checked against it.
pub const NEURON_CHART_COMMIT: &str = "8172e5e144bd49fec836619d2a41ab8cc10e83a8";
/// That commit's chart version (charts/neuron-helm-chart/Chart.yaml `version: 1.0.0`): the
/// install command pins it, so the chart installed is the one the keys were checked against.
pub const NEURON_CHART_VERSION: &str = "1.0.0";

/// Inferentia and Trainium families (`inf1`, `inf2`, `trn1`, `trn1n`, `trn2`, …).
fn neuron_type(t: &str) -> bool {
    let family = t.split('.').next().unwrap_or_default();
    ["inf", "trn"].iter().any(|p| family.strip_prefix(p).is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit())))
}

/// A cluster's Neuron instance types and its Neuron nodes' taints `(key, effect)`.
type NeuronNodes = (BTreeSet<String>, BTreeSet<(String, String)>);

/// `neuron-device-plugin/values.yaml` (`neuron-device-plugin/<cluster>.values.yaml` with
/// several clusters), for AWS's `neuron-helm-chart`, when a node group or
/// pool runs Inferentia or Trainium types (on AL2023_x86_64_NEURON or Bottlerocket: neither
/// runs the plugin on the host, so without it no pod gets `aws.amazon.com/neuroncore` or
/// `aws.amazon.com/neurondevice`). The chart has no affinity value: it builds a required
/// node affinity from `neuronInstances`, whose default list misses trn2 and newer types, so
/// the list is exactly the stack's Neuron types (families of pools expanded from the
/// embedded catalog); the plugin tolerates those nodes' taints besides its defaults
/// (`devicePlugin.tolerations`: CriticalAddonsOnly, aws.amazon.com/neuron:NoSchedule). The
/// node problem detector is off (its namespace is created by nothing in the chart); the Neuron
/// scheduler extension stays off (the chart's default). HyperPod nodes get the plugin from
/// HyperPod's own chart.
pub fn neuron_device_plugin(stack: &Stack) -> Vec<File> {
    // Per EKS cluster: each cluster installs the chart with its own nodes' types and taints.
    let mut clusters: BTreeMap<String, NeuronNodes> = BTreeMap::new();
    for ng in node_groups(stack) {
        let lt = referenced(stack, ng, "launch_template", "launch_template");
        let ng_types: Vec<String> = strings(lit(ng, "instance_types"))
            .into_iter()
            .chain(lt.and_then(|lt| lit_str(lt, "instance_type")))
            .filter(|t| neuron_type(t))
            .collect();
        if ng_types.is_empty() {
            continue;
        }
        let (types, taints) = clusters.entry(cluster_key(ng)).or_default();
        types.extend(ng_types);
        taints.extend(taints_of(ng, "taints"));
        if let Some(lt) = lt {
            taints.extend(taints_of(lt, "node_taints"));
        }
    }
    for pool in stack.resources.iter().filter(|r| r.kind.name() == "karpenter_pool") {
        let families = strings(lit(pool, "instance_families"));
        let from_families = crate::aws::catalog::embedded()
            .all()
            .map(|i| i.name.clone())
            .filter(|t| families.iter().any(|f| t.split('.').next() == Some(f.as_str())));
        let pool_types: Vec<String> =
            strings(lit(pool, "instance_types")).into_iter().chain(from_families).filter(|t| neuron_type(t)).collect();
        if pool_types.is_empty() {
            continue;
        }
        let (types, taints) = clusters.entry(cluster_key(pool)).or_default();
        types.extend(pool_types);
        taints.extend(taints_of(pool, "node_taints"));
    }
    let several = clusters.len() > 1;
    clusters
        .into_iter()
        .map(|(cluster, (types, mut taints))| {
            let mut tolerations = vec![
                json!({ "key": "CriticalAddonsOnly", "operator": "Exists" }),
                json!({ "key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule" }),
            ];
            taints.retain(|(k, e)| !(k == "aws.amazon.com/neuron" && e == "NoSchedule"));
            if let Json::Array(more) = tolerations_json(&taints) {
                tolerations.extend(more);
            }
            // The node problem detector is off: at the pinned chart it deploys into namespace
            // neuron-healthcheck-system (values.yaml `npd.namespaceOverride`), which no template
            // creates (no `kind: Namespace` in charts/neuron-helm-chart/templates at
            // NEURON_CHART_COMMIT), so the release would fail on a cluster without it.
            let values = json!({
                "neuronInstances": types,
                "devicePlugin": { "tolerations": tolerations },
                "scheduler": { "enabled": false },
                "npd": { "enabled": false },
            });
            let path = if several {
                format!("neuron-device-plugin/{cluster}.values.yaml")
            } else {
                "neuron-device-plugin/values.yaml".to_string()
            };
            let header = format!(
                "# Helm values for the AWS Neuron device plugin, written by gpustack for the Inferentia/Trainium types of cluster {cluster}:\n\
                 #   helm upgrade --install neuron-helm-chart oci://public.ecr.aws/neuron/neuron-helm-chart --version {NEURON_CHART_VERSION} -n kube-system -f {path}\n\
                 # Pods request aws.amazon.com/neuroncore (one NeuronCore) or aws.amazon.com/neurondevice (one device).\n\
                 # Written for aws-neuron/neuron-helm-charts {NEURON_CHART_COMMIT} (chart {NEURON_CHART_VERSION}); the node problem detector is off.\n"
            );
            File { text: helm_values(&header, &values), path }
        })
        .collect()
}

/// The EKS cluster a node group or pool joins, as a file-name-safe key: the `eks_cluster`
/// resource's name for a reference, else the literal name.
fn cluster_key(r: &Resource) -> String {
    match r.attrs.get("cluster") {
        Some(e) => match (e.as_single_ref(), e.as_literal().and_then(Value::as_str)) {
            (Some(x), _) => x.address.split_once('.').map(|(_, n)| n.to_string()).unwrap_or(x.address.clone()),
            (None, Some(name)) => name.to_string(),
            _ => "cluster".into(),
        },
        None => "cluster".into(),
    }
}

/// The ml.* instance types of the stack's HyperPod groups, sorted.
fn hyperpod_types(stack: &Stack) -> Vec<String> {
    let types: BTreeSet<String> = crate::rules::hyperpod::clusters(stack)
        .flat_map(|c| crate::rules::hyperpod::groups(c).into_values())
        .filter_map(|(_, g)| {
            g.get("instance_type").and_then(|e| e.as_literal()).and_then(Value::as_str).map(str::to_string)
        })
        .collect();
    types.into_iter().collect()
}

/// The commit of `aws/sagemaker-hyperpod-cli` whose `helm_chart/HyperPodHelmChart` the
/// values are written for (tag v3.9.0; the chart is published only in git: SageMaker DG
/// `sagemaker-hyperpod-eks-install-packages-using-helm-chart`, docs/aws-facts-hyperpod.md §1).
pub const HYPERPOD_CHART_COMMIT: &str = "011ca927123e02b35a399935bbb3ab1905fe33c7";

/// `hyperpod-dependencies/values.yaml`, for HyperPod's dependencies chart, which must be in
/// the EKS cluster before a HyperPod cluster is created. Its device plugins run only on
/// HyperPod (ml.*) nodes and its health agents expect them, so they stay on for the
/// accelerators the stack's groups have (NVIDIA for P and G, Neuron for Trn, EFA for the EFA
/// types); the Neuron plugin, whose affinity also takes EC2 Trainium nodes, is off without
/// Trn groups. Health monitoring, deep health checks and job auto-restart stay on: they are
/// HyperPod's resilience.
pub fn hyperpod_dependencies(stack: &Stack) -> Option<File> {
    let types = hyperpod_types(stack);
    let clusters: Vec<String> = crate::rules::hyperpod::clusters(stack).map(|c| c.address.clone()).collect();
    if clusters.is_empty() {
        return None;
    }
    let ec2 = |t: &String| t.strip_prefix("ml.").unwrap_or(t).to_string();
    let nvidia = types.iter().map(ec2).any(|t| t.starts_with('p') || t.starts_with('g'));
    let neuron = types.iter().map(ec2).any(|t| t.starts_with("trn") || t.starts_with("inf"));
    let efa = types.iter().any(|t| crate::rules::hyperpod::is_efa_type(t));
    let values = json!({
        "nvidia-device-plugin": { "devicePlugin": { "enabled": nvidia } },
        "neuron-device-plugin": { "devicePlugin": { "enabled": neuron } },
        "aws-efa-k8s-device-plugin": { "devicePlugin": { "enabled": efa } },
        "health-monitoring-agent": { "enabled": true },
        "deep-health-check": { "enabled": true },
        "job-auto-restart": { "enabled": true },
    });
    let header = format!(
        "# Helm values for SageMaker HyperPod's dependencies chart, written by gpustack for {}.\n\
         # Install it BEFORE `gpustack apply` creates the HyperPod cluster (HyperPod may fail to create without it):\n\
         #   git clone https://github.com/aws/sagemaker-hyperpod-cli && git -C sagemaker-hyperpod-cli checkout {HYPERPOD_CHART_COMMIT}\n\
         #   helm dependencies update sagemaker-hyperpod-cli/helm_chart/HyperPodHelmChart\n\
         #   helm install hyperpod-dependencies sagemaker-hyperpod-cli/helm_chart/HyperPodHelmChart -n kube-system -f hyperpod-dependencies/values.yaml\n\
         # HyperPod instance types: {}.\n",
        clusters.join(", "),
        if types.is_empty() { "none written".to_string() } else { types.join(", ") }
    );
    Some(File { path: "hyperpod-dependencies/values.yaml".into(), text: helm_values(&header, &values) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::{Source, VarSources};

    /// The stack as the language reads it: the device plugins' values need no state, and
    /// the AL2023 case is refused by a rule today (its template's user data is Bottlerocket's).
    fn parsed(text: &str) -> Stack {
        let vars = VarSources { cli: &[], env: &|_| None };
        let (stack, diags) = Stack::parse(Source::new("t.toml", text.into()), &vars, &resources::schemas()).unwrap();
        assert!(diags.iter().all(|d| !d.is_error()), "{diags:?}");
        stack
    }

    /// The values of a Helm values file, without its header comment.
    fn without_comments(f: &File) -> String {
        f.text.lines().filter(|l| !l.starts_with('#')).map(|l| format!("{l}\n")).collect()
    }

    const HEAD: &str = r#"[stack]
name = "m"
region = "us-west-2"

[launch_template.p5]
instance_type = "p5.48xlarge"
efa           = { interfaces = "max" }
node_taints   = [{ key = "nvidia.com/gpu", value = "true", effect = "NO_SCHEDULE" }]

[node_group.train]
cluster         = "main"
node_role       = "arn:aws:iam::123456789012:role/node"
subnets         = ["subnet-1"]
launch_template = "${launch_template.p5.id}"
taints          = [{ key = "training", effect = "NO_EXECUTE" }]

[karpenter_pool.burst]
cluster         = "main"
node_role       = "node"
subnets         = ["subnet-1"]
security_groups = ["sg-1"]
instance_types  = ["p4d.24xlarge", "p5.48xlarge"]
gpu_limit       = 16
efa             = {}
node_taints     = [{ key = "nvidia.com/gpu", value = "true", effect = "NO_SCHEDULE" }]

[karpenter_pool.plain]
cluster         = "main"
node_role       = "node"
subnets         = ["subnet-1"]
security_groups = ["sg-1"]
instance_types  = ["g6.xlarge"]
gpu_limit       = 4
"#;

    #[test]
    fn efa_values_name_exactly_the_stacks_efa_types_and_tolerate_their_taints() {
        let stack = parsed(HEAD);
        let f = efa_device_plugin(&stack).unwrap();
        assert_eq!(f.path, "efa-device-plugin/values.yaml");
        assert!(f.is_helm_values());
        let body = without_comments(&f);
        assert_eq!(
            body,
            "supportedInstanceLabels:\n  keys:\n  - node.kubernetes.io/instance-type\n  values:\n  - p4d.24xlarge\n  - p5.48xlarge\n\
             tolerations:\n- key: nvidia.com/gpu\n  operator: Exists\n  effect: NoSchedule\n\
             - key: training\n  operator: Exists\n  effect: NoExecute\n"
        );
        assert!(f.text.starts_with("# Helm values for the EFA device plugin"), "{}", f.text);
        assert_eq!(efa_device_plugin(&stack), Some(f), "byte-identical");
        // Bottlerocket node groups and pools: no NVIDIA plugin values at all.
        assert_eq!(nvidia_device_plugin(&stack), None);
        assert!(al2023_sharing(&stack).is_empty());
        assert_eq!(efa_device_plugin(&parsed("[stack]\nname = \"m\"\nregion = \"us-west-2\"\n")), None);
    }

    #[test]
    fn al2023_sharing_gets_a_named_config_per_layout_and_a_whole_gpu_default() {
        let stack = parsed(
            r#"[stack]
name = "m"
region = "us-west-2"

[launch_template.shared]
gpu_sharing = { strategy = "time-slicing", replicas = 4 }

[node_group.inference]
cluster         = "main"
node_role       = "arn:aws:iam::123456789012:role/node"
subnets         = ["subnet-1"]
launch_template = "${launch_template.shared.id}"
ami_type        = "AL2023_x86_64_NVIDIA"
instance_types  = ["g6.xlarge"]
taints          = [{ key = "inference", value = "true", effect = "NO_SCHEDULE" }]

[node_group.bottlerocket]
cluster         = "main"
node_role       = "arn:aws:iam::123456789012:role/node"
subnets         = ["subnet-1"]
launch_template = "${launch_template.shared.id}"
instance_types  = ["g6.xlarge"]
"#,
        );
        let groups: Vec<(String, String)> =
            al2023_sharing(&stack).into_iter().map(|(ng, c, _)| (ng.address.clone(), c)).collect();
        assert_eq!(groups, vec![("node_group.inference".to_string(), "time-slicing-4".to_string())]);
        let f = nvidia_device_plugin(&stack).unwrap();
        assert_eq!(f.path, "nvidia-device-plugin/values.yaml");
        let body = without_comments(&f);
        let values: Json = serde_yaml_ng::from_str(&body).unwrap();
        assert_eq!(values["config"]["default"], "default");
        let ts: Json = serde_yaml_ng::from_str(values["config"]["map"]["time-slicing-4"].as_str().unwrap()).unwrap();
        assert_eq!(ts["sharing"]["timeSlicing"]["resources"], json!([{ "name": "nvidia.com/gpu", "replicas": 4 }]));
        assert_eq!(ts["version"], "v1");
        let default: Json = serde_yaml_ng::from_str(values["config"]["map"]["default"].as_str().unwrap()).unwrap();
        assert!(default.get("sharing").is_none(), "{default}");
        // The chart's own tolerations kept, the group's taint added.
        let keys: Vec<&str> =
            values["tolerations"].as_array().unwrap().iter().map(|t| t["key"].as_str().unwrap()).collect();
        assert_eq!(keys, vec!["CriticalAddonsOnly", "nvidia.com/gpu", "inference"]);
        let nfd: Vec<&str> = values["nfd"]["worker"]["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["key"].as_str().unwrap())
            .collect();
        assert_eq!(nfd, vec!["node-role.kubernetes.io/master", "nvidia.com/gpu", "inference"]);
        let chart: Json =
            serde_yaml_ng::from_str(include_str!("../tests/k8s/charts/nvidia-device-plugin-0.20.0.values.yaml"))
                .unwrap();
        assert_eq!(crate::resources::gpu_operator::unknown_keys(&values, &chart, ""), Vec::<String>::new());
        assert_eq!(nvidia_device_plugin(&stack), Some(f), "byte-identical");
    }

    /// Next to a gpu_operator with device_plugin = false, the standalone plugin is pinned to the
    /// AL2023 sharing groups by name: the operator's NFD labels Bottlerocket GPU nodes with the
    /// PCI label the chart's default affinity selects.
    #[test]
    fn beside_an_operator_without_its_plugin_the_standalone_plugin_is_pinned_to_its_groups() {
        let text = r#"[stack]
name = "m"
region = "us-west-2"

[eks_cluster.main]
version = "1.33"
role    = "arn:aws:iam::123456789012:role/c"
subnets = ["subnet-1", "subnet-2"]

[node_group.l4]
cluster        = "${eks_cluster.main.name}"
node_role      = "arn:aws:iam::123456789012:role/node"
subnets        = ["subnet-1"]
ami_type       = "AL2023_x86_64_NVIDIA"
instance_types = ["g6.xlarge"]
gpu_sharing    = { strategy = "time-slicing", replicas = 4 }

[node_group.br]
cluster        = "${eks_cluster.main.name}"
node_role      = "arn:aws:iam::123456789012:role/node"
subnets        = ["subnet-1"]
ami_type       = "BOTTLEROCKET_x86_64_NVIDIA"
instance_types = ["g6.xlarge"]
labels         = { "nvidia.com/gpu.deploy.operands" = "false" }

[gpu_operator.main]
cluster       = "${eks_cluster.main.name}"
device_plugin = false
"#;
        let f = nvidia_device_plugin(&parsed(text)).unwrap();
        let v: Json = serde_yaml_ng::from_str(&without_comments(&f)).unwrap();
        assert_eq!(
            v["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"],
            json!([{ "matchExpressions": [{ "key": "eks.amazonaws.com/nodegroup", "operator": "In", "values": ["m-l4"] }] }])
        );
        // Without an operator the chart's default affinity stays (no NFD labels Bottlerocket nodes).
        let alone = text.split("[gpu_operator.main]").next().unwrap();
        let f = nvidia_device_plugin(&parsed(alone)).unwrap();
        assert!(!f.text.contains("eks.amazonaws.com/nodegroup"), "{}", f.text);
    }

    #[test]
    fn each_sharing_strategy_has_its_config() {
        let t = |pairs: &[(&str, Value)]| pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        let mps = nvidia_config(&t(&[("strategy", Value::str("mps")), ("replicas", Value::Int(8))])).unwrap();
        assert_eq!(mps.0, "mps-8");
        assert_eq!(mps.1["sharing"]["mps"]["resources"][0]["replicas"], 8);
        assert_eq!(nvidia_config(&t(&[("strategy", Value::str("mig"))])).unwrap().1["flags"]["migStrategy"], "mixed");
        assert_eq!(nvidia_config(&t(&[("strategy", Value::str("time-slicing"))])).unwrap().0, "time-slicing-2");
        assert!(nvidia_config(&t(&[("strategy", Value::str("none"))])).is_none());
    }

    #[test]
    fn neuron_values_name_the_stacks_neuron_types_and_keys_of_the_pinned_chart() {
        let stack = parsed(
            r#"[stack]
name = "m"
region = "us-west-2"

[node_group.inf]
cluster        = "main"
node_role      = "arn:aws:iam::123456789012:role/node"
subnets        = ["subnet-1"]
ami_type       = "AL2023_x86_64_NEURON"
instance_types = ["inf2.xlarge"]
taints         = [{ key = "aws.amazon.com/neuron", value = "true", effect = "NO_SCHEDULE" }, { key = "serve", effect = "NO_EXECUTE" }]

[node_group.cpu]
cluster        = "main"
node_role      = "arn:aws:iam::123456789012:role/node"
subnets        = ["subnet-1"]
instance_types = ["m6i.large"]

[karpenter_pool.trn]
cluster         = "main"
node_role       = "node"
subnets         = ["subnet-1"]
security_groups = ["sg-1"]
instance_families = ["trn1"]
"#,
        );
        let f = neuron_device_plugin(&stack).pop().unwrap();
        assert_eq!(f.path, "neuron-device-plugin/values.yaml");
        // Pinned to the chart the keys are checked against; its node problem detector, whose
        // namespace the chart does not create, is off.
        assert!(f.text.contains("neuron-helm-chart --version 1.0.0 -n kube-system"), "{}", f.text);
        let v: Json = serde_yaml_ng::from_str(&without_comments(&f)).unwrap();
        let types: Vec<&str> = v["neuronInstances"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
        assert!(types.contains(&"inf2.xlarge") && types.contains(&"trn1.32xlarge"), "{types:?}");
        assert!(!types.iter().any(|t| t.starts_with("m6i")), "{types:?}");
        let keys: Vec<&str> =
            v["devicePlugin"]["tolerations"].as_array().unwrap().iter().map(|t| t["key"].as_str().unwrap()).collect();
        assert_eq!(keys, ["CriticalAddonsOnly", "aws.amazon.com/neuron", "serve"]);
        let chart: Json =
            serde_yaml_ng::from_str(include_str!("../tests/k8s/charts/neuron-helm-chart-1.0.0.values.yaml")).unwrap();
        assert_eq!(crate::resources::gpu_operator::unknown_keys(&v, &chart, ""), Vec::<String>::new());
        assert_eq!(v["npd"], json!({ "enabled": false }));
        assert_eq!(neuron_device_plugin(&stack), vec![f], "byte-identical");
        assert_eq!(neuron_device_plugin(&parsed(HEAD)), vec![], "no Neuron types, no values");
        assert!(neuron_type("trn2.48xlarge") && neuron_type("inf1.xlarge") && !neuron_type("inference.x"));
    }

    /// Two clusters: one values file each, with that cluster's Neuron types only.
    #[test]
    fn neuron_values_are_per_cluster() {
        let stack = parsed(
            r#"[stack]
name = "m"
region = "us-west-2"

[node_group.inf]
cluster        = "a"
node_role      = "arn:aws:iam::123456789012:role/node"
subnets        = ["subnet-1"]
ami_type       = "AL2023_x86_64_NEURON"
instance_types = ["inf2.xlarge"]

[node_group.trn]
cluster        = "b"
node_role      = "arn:aws:iam::123456789012:role/node"
subnets        = ["subnet-1"]
ami_type       = "AL2023_x86_64_NEURON"
instance_types = ["trn1.2xlarge"]
"#,
        );
        let files = neuron_device_plugin(&stack);
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["neuron-device-plugin/a.values.yaml", "neuron-device-plugin/b.values.yaml"]);
        let v: Json = serde_yaml_ng::from_str(&without_comments(&files[0])).unwrap();
        assert_eq!(v["neuronInstances"], json!(["inf2.xlarge"]));
        assert!(files[1].text.contains("-f neuron-device-plugin/b.values.yaml"), "{}", files[1].text);
    }
}
