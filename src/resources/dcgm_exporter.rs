//! `dcgm_exporter`: NVIDIA's DCGM exporter (GPU metrics for Prometheus) for one EKS cluster
//! without the GPU Operator, rendered as the Helm values of its chart
//! (`dcgm-exporter/values.yaml`; never applied to AWS). The chart runs on every node unless
//! told otherwise (`affinity: {}`, `nodeSelector: {}`), and on a node without a GPU the exporter
//! fails: the values pin it to the instance types of the cluster's NVIDIA node groups and
//! tolerate their taints, both filled in by [`Kind::stack_defaults`] so a plan shows the
//! change when a group changes. With a `gpu_operator` the operator's `dcgm_exporter` is the
//! way (the rules refuse both). Chart: NVIDIA/dcgm-exporter tag 4.5.3-4.8.2 (chart 4.8.2),
//! values vendored in tests/k8s/charts/dcgm-exporter-4.8.2.values.yaml.

use async_trait::async_trait;
use serde_json::json;

use super::{Create, Kind, Manifest, Observed, Recorded, Result, Schema, bool_attr, rendered, str_attr, strings_attr};
use crate::aws::Ctx;
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

pub struct DcgmExporter;

/// The chart version the values are written and tested for.
pub const CHART_VERSION: &str = "4.8.2";

static ATTRS: &[Attr] = &[
    Attr::req("cluster", Ty::Str, OnChange::Update),
    Attr::opt("version", Ty::Str, Default::Str(CHART_VERSION), OnChange::Update),
    Attr::opt("namespace", Ty::Str, Default::Str("kube-system"), OnChange::Update),
    Attr::opt("service_monitor", Ty::Bool, Default::Bool(false), OnChange::Update),
    // From the stack (`stack_defaults`): the NVIDIA groups' instance types and taints.
    Attr::computed("instance_types", Ty::List(&Ty::Str), OnChange::Update),
    Attr::computed("tolerations", Ty::List(&Ty::Any), OnChange::Update),
];

impl Schema for DcgmExporter {
    fn name(&self) -> &'static str {
        "dcgm_exporter"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("sha256", Ty::Str)]
    }
}

#[async_trait]
impl Kind for DcgmExporter {
    fn actions(&self) -> &'static [&'static str] {
        &[]
    }
    fn rendered(&self) -> bool {
        true
    }

    fn validate(&self, r: &Resource, diags: &mut Vec<Diagnostic>) {
        super::node_group::require_stack_cluster(r, diags);
        if let Some(e) = r.attrs.get("namespace")
            && let Some(n) = e.as_literal().and_then(Value::as_str)
            && !super::priority_class::dns_label(n)
        {
            diags.push(
                Diagnostic::error(
                    format!("`{}`: \"{n}\" is not a Kubernetes namespace name", r.address),
                    e.span.clone(),
                )
                .help("use lowercase letters, digits and '-', e.g. namespace = \"monitoring\""),
            );
        }
    }

    fn stack_defaults(&self, stack: &crate::stack::Stack, r: &Resource, inputs: &mut Attrs) {
        let (types, tolerations) = crate::rules::gpu_addons::nvidia_nodes(stack, r);
        inputs.insert("instance_types".into(), types);
        inputs.insert("tolerations".into(), tolerations);
    }

    fn render(&self, _address: &str, inputs: &Attrs, _outputs: &Attrs) -> Option<Manifest> {
        let header = format!(
            "# Helm values for NVIDIA's DCGM exporter {version}, written by gpustack for the stack's NVIDIA node groups:\n\
             #   helm repo add gpu-helm-charts https://nvidia.github.io/dcgm-exporter/helm-charts\n\
             #   helm upgrade --install dcgm-exporter gpu-helm-charts/dcgm-exporter --version {version} \\\n\
             #     --namespace {ns} -f dcgm-exporter/values.yaml\n",
            version = str_attr(inputs, "version"),
            ns = str_attr(inputs, "namespace"),
        );
        let mut tolerations = vec![
            json!({ "key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule" }),
        ];
        tolerations.extend(inputs.get("tolerations").and_then(Value::as_list).unwrap_or_default().iter().map(|t| {
            let t = t.as_table().cloned().unwrap_or_default();
            let s = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
            json!({ "key": s("key"), "operator": "Exists", "effect": s("effect") })
        }));
        let values = json!({
            "serviceMonitor": { "enabled": bool_attr(inputs, "service_monitor") },
            "tolerations": tolerations,
            "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": { "nodeSelectorTerms": [
                { "matchExpressions": [{
                    "key": "node.kubernetes.io/instance-type",
                    "operator": "In",
                    "values": strings_attr(inputs, "instance_types"),
                }] }
            ] } } },
        });
        let yaml = format!("{header}{}", serde_yaml_ng::to_string(&values).unwrap_or_default());
        Some(Manifest { file: "dcgm-exporter/values.yaml".into(), yaml })
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value as Json;

    #[test]
    fn the_exporter_runs_only_on_the_clusters_nvidia_groups_and_tolerates_them() {
        let text = r#"[stack]
name = "m"
region = "us-west-2"

[eks_cluster.main]
version = "1.33"
role    = "arn:aws:iam::123456789012:role/c"
subnets = ["subnet-1", "subnet-2"]

[node_group.cpu]
cluster        = "${eks_cluster.main.name}"
node_role      = "arn:aws:iam::123456789012:role/node"
subnets        = ["subnet-1"]
instance_types = ["m6i.large"]

[node_group.l4]
cluster        = "${eks_cluster.main.name}"
node_role      = "arn:aws:iam::123456789012:role/node"
subnets        = ["subnet-1"]
ami_type       = "AL2023_x86_64_NVIDIA"
instance_types = ["g6.xlarge", "g6.2xlarge"]
taints         = [{ key = "nvidia.com/gpu", value = "true", effect = "NO_SCHEDULE" }]

[dcgm_exporter.main]
cluster = "${eks_cluster.main.name}"
"#;
        let vars = crate::stack::VarSources { cli: &[], env: &|_| None };
        let src = crate::stack::Source::new("t.toml", text.into());
        let (stack, diags) = crate::stack::Stack::parse(src, &vars, &crate::resources::schemas()).unwrap();
        assert!(diags.iter().all(|d| !d.is_error()), "{diags:?}");
        let idx = stack.resources.iter().position(|r| r.kind.name() == "dcgm_exporter").unwrap();
        let inputs = crate::plan::desired_inputs(&stack, idx, &|_| None);
        let m = DcgmExporter.render("dcgm_exporter.main", &inputs, &Attrs::new()).unwrap();
        assert_eq!(m.file, "dcgm-exporter/values.yaml");
        assert!(m.yaml.contains("--version 4.8.2"), "{}", m.yaml);
        let v: Json = serde_yaml_ng::from_str(&m.yaml).unwrap();
        let terms =
            &v["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
        assert_eq!(terms[0]["matchExpressions"][0]["values"], json!(["g6.2xlarge", "g6.xlarge"]));
        assert_eq!(v["tolerations"][1]["key"], "nvidia.com/gpu");
        assert_eq!(v["serviceMonitor"]["enabled"], false);
        let chart: Json =
            serde_yaml_ng::from_str(include_str!("../../tests/k8s/charts/dcgm-exporter-4.8.2.values.yaml")).unwrap();
        assert_eq!(super::super::gpu_operator::unknown_keys(&v, &chart, ""), Vec::<String>::new());
    }
}
