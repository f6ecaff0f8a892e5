//! `gpu_operator`: NVIDIA's GPU Operator for one EKS cluster, rendered as the Helm values of
//! its chart (`gpu-operator/values.yaml`; never applied to AWS). On EKS NVIDIA AMIs (AL2023
//! and Bottlerocket) the driver and container toolkit are in the AMI, so the operator runs
//! with both off and brings what the AMI lacks: the device plugin, GPU Feature Discovery,
//! the DCGM exporter and, with `mig`, the MIG manager with a mig-parted config made from the
//! stack's AL2023 `gpu_sharing = { strategy = "mig" }` node groups. What the stack around it
//! decides (taints to tolerate, sharing configs, MIG layouts) is filled in by
//! [`Kind::stack_defaults`] as computed inputs, so a plan shows the values change when a
//! node group changes. Facts and sources: docs/aws-facts-gpu-addons.md.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde_json::{Value as Json, json};

use super::{Create, Kind, Manifest, Observed, Recorded, Result, Schema, bool_attr, rendered, str_attr};
use crate::aws::Ctx;
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

pub struct GpuOperator;

/// The chart version the rendered values are written and tested for (NVIDIA/gpu-operator
/// tag v26.7.0, commit 10ee5b3638b89e11e949412aafa5ba99279c3721; vendored key list in
/// tests/k8s/charts/gpu-operator-v26.7.0.values.yaml).
pub const CHART_VERSION: &str = "v26.7.0";

pub const MIG_STRATEGIES: &[&str] = &["single", "mixed"];

const MIG: &[Attr] = &[Attr::opt("strategy", Ty::Enum(MIG_STRATEGIES), Default::Str("mixed"), OnChange::Update)];

static ATTRS: &[Attr] = &[
    Attr::req("cluster", Ty::Str, OnChange::Update),
    Attr::opt("version", Ty::Str, Default::Str(CHART_VERSION), OnChange::Update),
    Attr::opt("namespace", Ty::Str, Default::Str("gpu-operator"), OnChange::Update),
    Attr::opt("driver", Ty::Bool, Default::Bool(false), OnChange::Update),
    Attr::opt("toolkit", Ty::Bool, Default::Bool(false), OnChange::Update),
    Attr::opt("device_plugin", Ty::Bool, Default::Bool(true), OnChange::Update),
    Attr::opt("gfd", Ty::Bool, Default::Bool(true), OnChange::Update),
    Attr::opt("dcgm_exporter", Ty::Bool, Default::Bool(true), OnChange::Update),
    Attr::opt("service_monitor", Ty::Bool, Default::Bool(false), OnChange::Update),
    Attr::opt("mig", Ty::Object(MIG), Default::None, OnChange::Update),
    // From the stack (`stack_defaults`): the GPU nodes' taints `[{ key, effect }]`, the
    // device plugin's sharing configs `{ name = yaml }`.
    Attr::computed("tolerations", Ty::List(&Ty::Any), OnChange::Update),
    Attr::computed("sharing_configs", Ty::Map(&Ty::Str), OnChange::Update),
];

/// The ConfigMap the values ask the chart to create (`devicePlugin.config.name`). No MIG
/// config is written: the MIG manager's own (generated from each node's hardware since v26.x,
/// chart values.yaml `migManager.config` note; the shipped default in
/// `assets/state-mig-manager/0400_configmap.yaml` at v26.7.0) names every `all-<profile>`
/// layout the stack's `nvidia.com/mig.config` labels select, with the slice count of each GPU
/// model (`1g.10gb` is 7 on H100-80GB and A100-80GB, 4 on A100-40GB through `device-filter`).
/// One gpustack config keyed by name alone could not hold both counts.
pub const DEVICE_PLUGIN_CONFIG: &str = "gpustack-device-plugin-config";

impl Schema for GpuOperator {
    fn name(&self) -> &'static str {
        "gpu_operator"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("sha256", Ty::Str)]
    }
}

#[async_trait]
impl Kind for GpuOperator {
    fn actions(&self) -> &'static [&'static str] {
        &[]
    }
    fn rendered(&self) -> bool {
        true
    }

    fn validate(&self, r: &Resource, diags: &mut Vec<Diagnostic>) {
        super::node_group::require_stack_cluster(r, diags);
        if let Some(e) = r.attrs.get("version")
            && let Some(v) = e.as_literal().and_then(Value::as_str)
            && !chart_version(v)
        {
            diags.push(
                Diagnostic::error(
                    format!("`{}`: \"{v}\" is not a GPU Operator chart version", r.address),
                    e.span.clone(),
                )
                .help(format!(
                    "NVIDIA's chart versions look like \"{CHART_VERSION}\" (`helm search repo nvidia/gpu-operator --versions`)"
                )),
            );
        }
        if let Some(e) = r.attrs.get("namespace")
            && let Some(n) = e.as_literal().and_then(Value::as_str)
            && !super::priority_class::dns_label(n)
        {
            diags.push(
                Diagnostic::error(
                    format!("`{}`: \"{n}\" is not a Kubernetes namespace name", r.address),
                    e.span.clone(),
                )
                .help("use lowercase letters, digits and '-', e.g. namespace = \"gpu-operator\""),
            );
        }
    }

    fn stack_defaults(&self, stack: &crate::stack::Stack, r: &Resource, inputs: &mut Attrs) {
        let nodes = crate::resources::gpu_nodes::operator_nodes(stack, r);
        inputs.insert("tolerations".into(), nodes.tolerations);
        inputs.insert("sharing_configs".into(), nodes.sharing_configs);
    }

    fn render(&self, _address: &str, inputs: &Attrs, _outputs: &Attrs) -> Option<Manifest> {
        let cluster = match str_attr(inputs, "cluster") {
            "" => String::new(),
            name => format!(" in cluster {name}"),
        };
        let header = format!(
            "# Helm values for NVIDIA's GPU Operator {version}{cluster}, written by gpustack:\n\
             #   helm repo add nvidia https://helm.ngc.nvidia.com/nvidia\n\
             #   helm upgrade --install gpu-operator nvidia/gpu-operator --version {version} \\\n\
             #     --namespace {ns} --create-namespace -f gpu-operator/values.yaml\n",
            version = str_attr(inputs, "version"),
            ns = str_attr(inputs, "namespace"),
        );
        let values = values(inputs);
        // serde_yaml_ng cannot fail on a serde_json::Value (string keys, finite numbers).
        let yaml = format!("{header}{}", serde_yaml_ng::to_string(&values).unwrap_or_default());
        Some(Manifest { file: "gpu-operator/values.yaml".into(), yaml })
    }

    async fn create(&self, _ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        Ok(rendered::record(self, req.address, req.inputs, Attrs::new()))
    }
    async fn read_all(&self, _ctx: &Ctx) -> Result<Vec<Observed>> {
        Ok(vec![])
    }
    async fn update(
        &self,
        ctx: &Ctx,
        address: &str,
        _id: &str,
        _old: &Attrs,
        new: &Attrs,
        _changed: &[String],
    ) -> Result<Recorded> {
        let req = Create { address, inputs: new, token: "", replacing: false, purchase: None, report: &|_| {} };
        self.create(ctx, &req).await
    }
    async fn delete(&self, _ctx: &Ctx, _a: &str, _id: &str, _inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        Ok(())
    }
}

/// `v26.7.0`: NVIDIA's chart versions carry a `v` and three numbers; `26.7.0` names the same
/// chart (Helm reads versions as semver, which takes the `v` as optional).
fn chart_version(v: &str) -> bool {
    rendered::three_numbers(v.strip_prefix('v').unwrap_or(v))
}

/// The chart's defaults that a list given in values would replace whole (values.yaml at
/// v26.7.0): `daemonsets.tolerations` and `node-feature-discovery.worker.tolerations`.
fn daemonset_defaults() -> Vec<Json> {
    vec![json!({ "key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule" })]
}
fn nfd_worker_defaults() -> Vec<Json> {
    vec![
        json!({ "key": "node-role.kubernetes.io/control-plane", "operator": "Equal", "value": "", "effect": "NoSchedule" }),
        json!({ "key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule" }),
    ]
}

/// The chart's values from the resolved inputs. Keys are those of the chart's values.yaml
/// at [`CHART_VERSION`] (a unit test checks them against the vendored file).
fn values(inputs: &Attrs) -> Json {
    let on = |k: &str| bool_attr(inputs, k);
    let extra: Vec<Json> = inputs
        .get("tolerations")
        .and_then(Value::as_list)
        .unwrap_or_default()
        .iter()
        .map(|t| {
            let t = t.as_table().cloned().unwrap_or_default();
            let s = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            json!({ "key": s("key"), "operator": "Exists", "effect": s("effect") })
        })
        .filter(|t| t["key"] != "nvidia.com/gpu" || t["effect"] != "NoSchedule")
        .collect();
    let with = |mut base: Vec<Json>| {
        base.extend(extra.iter().cloned());
        Json::Array(base)
    };
    let mut v = json!({
        "driver": { "enabled": on("driver") },
        "toolkit": { "enabled": on("toolkit") },
        "devicePlugin": { "enabled": on("device_plugin") },
        "gfd": { "enabled": on("gfd") },
        "dcgmExporter": { "enabled": on("dcgm_exporter"), "serviceMonitor": { "enabled": on("service_monitor") } },
        "migManager": { "enabled": false },
        "daemonsets": { "tolerations": with(daemonset_defaults()) },
        // NFD labels the GPU nodes the operator deploys to (feature.node.kubernetes.io/pci-10de.present):
        // its workers must run on the tainted GPU nodes too.
        "node-feature-discovery": { "worker": { "tolerations": with(nfd_worker_defaults()) } },
    });
    let mig = inputs.get("mig").and_then(Value::as_table);
    let strategy = mig.and_then(|m| m.get("strategy")).and_then(Value::as_str).unwrap_or("mixed");
    let sharing: BTreeMap<String, Value> =
        inputs.get("sharing_configs").and_then(Value::as_table).cloned().unwrap_or_default();
    if on("device_plugin") && !sharing.is_empty() {
        let mut data = serde_json::Map::new();
        // Nodes without the label get whole GPUs (or MIG slices under the operator's strategy).
        data.insert("default".into(), json!("version: v1\n"));
        for (name, yaml) in &sharing {
            let text = yaml.as_str().unwrap_or_default();
            // A MIG group's config takes the operator's strategy.
            let text = if name == "mig" {
                format!("version: v1\nflags:\n  migStrategy: {strategy}\n")
            } else {
                text.to_string()
            };
            data.insert(name.clone(), json!(text));
        }
        v["devicePlugin"]["config"] =
            json!({ "create": true, "name": DEVICE_PLUGIN_CONFIG, "default": "default", "data": data });
    }
    if mig.is_some() {
        v["mig"] = json!({ "strategy": strategy });
        v["migManager"] = json!({ "enabled": true });
    }
    v
}

/// Keys of `values` that the chart's values.yaml (`chart`) does not have: every mapping key
/// gpustack writes must exist at the same path, except under a map the chart leaves empty
/// (`data: {}`, free-form). Shared by the values tests of the rendered charts.
#[cfg(test)]
pub(crate) fn unknown_keys(values: &Json, chart: &Json, path: &str) -> Vec<String> {
    let (Json::Object(v), Json::Object(c)) = (values, chart) else { return vec![] };
    if c.is_empty() {
        return vec![];
    }
    let mut out = vec![];
    for (k, sub) in v {
        let here = format!("{path}{k}");
        match c.get(k) {
            None => out.push(here),
            Some(cs) => out.extend(unknown_keys(sub, cs, &format!("{here}."))),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_versions_have_a_v_and_three_numbers() {
        assert!(chart_version("v26.7.0"));
        assert!(chart_version("v25.10.1"));
        assert!(chart_version("26.7.0"));
        assert!(!chart_version("v26.7.0-rc.1"));
        assert!(!chart_version("v26.7"));
        assert!(!chart_version("latest"));
    }

    const STACK: &str = r#"[stack]
name = "m"
region = "us-west-2"

[eks_cluster.main]
version = "1.33"
role    = "arn:aws:iam::123456789012:role/c"
subnets = ["subnet-1", "subnet-2"]

[node_group.h100]
cluster        = "${eks_cluster.main.name}"
node_role      = "arn:aws:iam::123456789012:role/node"
subnets        = ["subnet-1"]
ami_type       = "AL2023_x86_64_NVIDIA"
instance_types = ["p5.48xlarge"]
taints         = [{ key = "nvidia.com/gpu", value = "true", effect = "NO_SCHEDULE" }, { key = "team", value = "a", effect = "NO_EXECUTE" }]
gpu_sharing    = { strategy = "mig", mig_profile = { "h100.80gb" = "7" } }

[node_group.l4]
cluster        = "${eks_cluster.main.name}"
node_role      = "arn:aws:iam::123456789012:role/node"
subnets        = ["subnet-1"]
ami_type       = "AL2023_x86_64_NVIDIA"
instance_types = ["g6.xlarge"]
gpu_sharing    = { strategy = "time-slicing", replicas = 4 }

[gpu_operator.main]
cluster = "${eks_cluster.main.name}"
mig     = { strategy = "single" }
"#;

    fn rendered(text: &str) -> (crate::stack::Stack, String) {
        let vars = crate::stack::VarSources { cli: &[], env: &|_| None };
        let src = crate::stack::Source::new("t.toml", text.into());
        let (stack, diags) = crate::stack::Stack::parse(src, &vars, &crate::resources::schemas()).unwrap();
        assert!(diags.iter().all(|d| !d.is_error()), "{diags:?}");
        let idx = stack.resources.iter().position(|r| r.kind.name() == "gpu_operator").unwrap();
        let inputs = crate::plan::desired_inputs(&stack, idx, &|_| None);
        let m = GpuOperator.render("gpu_operator.main", &inputs, &Attrs::new()).unwrap();
        assert_eq!(m.file, "gpu-operator/values.yaml");
        (stack, m.yaml)
    }

    fn body(yaml: &str) -> Json {
        serde_yaml_ng::from_str(&yaml.lines().filter(|l| !l.starts_with('#')).collect::<Vec<_>>().join("\n")).unwrap()
    }

    #[test]
    fn values_turn_off_what_the_ami_has_and_run_the_mig_manager_for_the_stacks_layouts() {
        // That the rules allow MIG on AL2023 with this operator is the rules' test
        // (`rules::gpu_addons::tests::mig_on_al2023_needs_a_gpu_operator_with_mig`): kinds never
        // import the rules.
        let (_stack, yaml) = rendered(STACK);
        assert!(yaml.contains("--version v26.7.0"), "{yaml}");
        let v = body(&yaml);
        assert_eq!(v["driver"]["enabled"], false);
        assert_eq!(v["toolkit"]["enabled"], false);
        assert_eq!(v["devicePlugin"]["enabled"], true);
        assert_eq!(v["gfd"]["enabled"], true);
        assert_eq!(v["dcgmExporter"]["enabled"], true);
        assert_eq!(v["dcgmExporter"]["serviceMonitor"]["enabled"], false);
        assert_eq!(v["mig"]["strategy"], "single");
        // The MIG manager's own per-model config: no custom one that could give one layout name
        // one slice count for every GPU model.
        assert_eq!(v["migManager"], json!({ "enabled": true }));
        // The sharing configs the groups' labels select, the MIG one with the operator's strategy.
        let data = &v["devicePlugin"]["config"]["data"];
        assert_eq!(v["devicePlugin"]["config"]["default"], "default");
        assert!(data["time-slicing-4"].as_str().unwrap().contains("replicas: 4"), "{data}");
        assert_eq!(data["mig"], "version: v1\nflags:\n  migStrategy: single\n");
        // Operands and NFD workers tolerate the GPU groups' taints, the chart's defaults kept.
        let keys =
            |t: &Json| t.as_array().unwrap().iter().map(|x| x["key"].as_str().unwrap().to_string()).collect::<Vec<_>>();
        assert_eq!(keys(&v["daemonsets"]["tolerations"]), ["nvidia.com/gpu", "team"]);
        assert_eq!(
            keys(&v["node-feature-discovery"]["worker"]["tolerations"]),
            ["node-role.kubernetes.io/control-plane", "nvidia.com/gpu", "team"]
        );
        assert_eq!(v["daemonsets"]["tolerations"][1]["effect"], "NoExecute");
        assert_eq!(rendered(STACK).1, yaml, "byte-identical");
    }

    #[test]
    fn every_key_written_is_a_key_of_the_pinned_chart() {
        let chart: Json =
            serde_yaml_ng::from_str(include_str!("../../tests/k8s/charts/gpu-operator-v26.7.0.values.yaml")).unwrap();
        let v = body(&rendered(STACK).1);
        assert_eq!(unknown_keys(&v, &chart, ""), Vec::<String>::new());
        // The check can fail: a key the chart does not have is named.
        assert_eq!(unknown_keys(&json!({ "gfd": { "enable": true } }), &chart, ""), ["gfd.enable"]);
    }

    /// A p4d (A100-40GB: `1g.10gb` ×4) and a p5 (H100: ×7) group on one layout name: the values
    /// leave the MIG manager its built-in per-model config rather than one `all-1g.10gb`.
    #[test]
    fn two_gpu_models_on_one_layout_name_keep_their_own_slice_counts() {
        let text = STACK
            .replace("mig_profile = { \"h100.80gb\" = \"7\" }", "mig_profile = { \"h100.80gb\" = \"1g.10gb\" }")
            + r#"
[node_group.a100]
cluster        = "${eks_cluster.main.name}"
node_role      = "arn:aws:iam::123456789012:role/node"
subnets        = ["subnet-1"]
ami_type       = "AL2023_x86_64_NVIDIA"
instance_types = ["p4d.24xlarge"]
gpu_sharing    = { strategy = "mig", mig_profile = { "a100.40gb" = "1g.10gb" } }
"#;
        let v = body(&rendered(&text).1);
        assert_eq!(v["migManager"], json!({ "enabled": true }), "{v}");
        assert!(!rendered(&text).1.contains("mig-configs"));
    }

    #[test]
    fn without_mig_the_mig_manager_stays_off() {
        let text = STACK
            .replace("mig     = { strategy = \"single\" }\n", "gfd = false\n")
            .replace("gpu_sharing    = { strategy = \"mig\", mig_profile = { \"h100.80gb\" = \"7\" } }\n", "");
        let v = body(&rendered(&text).1);
        assert_eq!(v["migManager"], json!({ "enabled": false }));
        assert!(v.get("mig").is_none());
        assert_eq!(v["gfd"]["enabled"], false);
    }
}
