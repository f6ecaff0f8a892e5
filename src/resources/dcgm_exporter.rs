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
    // From the stack (`stack_defaults`): the AL2023 NVIDIA groups' and pools' names, and their taints.
    Attr::computed("node_groups", Ty::List(&Ty::Str), OnChange::Update),
    Attr::computed("node_pools", Ty::List(&Ty::Str), OnChange::Update),
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
        if let Some(e) = r.attrs.get("version")
            && let Some(v) = e.as_literal().and_then(Value::as_str)
            && !chart_version(v)
        {
            diags.push(
                Diagnostic::error(format!("`{}`: \"{v}\" is not a DCGM exporter chart version", r.address), e.span.clone())
                    .help(format!(
                        "the chart's versions are three numbers, like \"{CHART_VERSION}\" (`helm search repo gpu-helm-charts/dcgm-exporter --versions`)"
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
                .help("use lowercase letters, digits and '-', e.g. namespace = \"monitoring\""),
            );
        }
    }

    fn stack_defaults(&self, stack: &crate::stack::Stack, r: &Resource, inputs: &mut Attrs) {
        let nodes = crate::resources::gpu_nodes::exporter_nodes(stack, r);
        inputs.insert("node_groups".into(), nodes.node_groups);
        inputs.insert("node_pools".into(), nodes.node_pools);
        inputs.insert("tolerations".into(), nodes.tolerations);
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
        // One term per label (terms are ORed): the AL2023 groups by EKS's node group label, the
        // AL2023 pools by Karpenter's. A term with an empty `In` list is invalid, so none is
        // written; with neither, nothing is rendered (the rules refuse that stack).
        let terms: Vec<_> = [
            (crate::resources::gpu_nodes::NODEGROUP_LABEL, strings_attr(inputs, "node_groups")),
            (crate::resources::gpu_nodes::NODEPOOL_LABEL, strings_attr(inputs, "node_pools")),
        ]
        .into_iter()
        .filter(|(_, names)| !names.is_empty())
        .map(|(key, names)| json!({ "matchExpressions": [{ "key": key, "operator": "In", "values": names }] }))
        .collect();
        if terms.is_empty() {
            return None;
        }
        let values = json!({
            "serviceMonitor": { "enabled": bool_attr(inputs, "service_monitor") },
            "tolerations": tolerations,
            "affinity": { "nodeAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": { "nodeSelectorTerms": terms } } },
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

/// `4.8.2`: the chart's versions are three numbers (NVIDIA/dcgm-exporter
/// `deployment/Chart.yaml` at tag 4.5.3-4.8.2: `version: 4.8.2`); it goes into `helm --version`.
fn chart_version(v: &str) -> bool {
    rendered::three_numbers(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value as Json;

    const STACK: &str = r#"[stack]
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

[node_group.br]
cluster        = "${eks_cluster.main.name}"
node_role      = "arn:aws:iam::123456789012:role/node"
subnets        = ["subnet-1"]
ami_type       = "BOTTLEROCKET_x86_64_NVIDIA"
instance_types = ["g6.xlarge"]
taints         = [{ key = "bottlerocket", value = "true", effect = "NO_SCHEDULE" }]

[dcgm_exporter.main]
cluster = "${eks_cluster.main.name}"
"#;

    fn render(text: &str) -> Option<Manifest> {
        let vars = crate::stack::VarSources { cli: &[], env: &|_| None };
        let src = crate::stack::Source::new("t.toml", text.into());
        let (stack, diags) = crate::stack::Stack::parse(src, &vars, &crate::resources::schemas()).unwrap();
        assert!(diags.iter().all(|d| !d.is_error()), "{diags:?}");
        let idx = stack.resources.iter().position(|r| r.kind.name() == "dcgm_exporter").unwrap();
        let inputs = crate::plan::desired_inputs(&stack, idx, &|_| None);
        DcgmExporter.render("dcgm_exporter.main", &inputs, &Attrs::new())
    }

    fn terms(m: &Manifest) -> Json {
        let v: Json = serde_yaml_ng::from_str(&m.yaml).unwrap();
        v["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"].clone()
    }

    /// Pinned by EKS's node group label to the AL2023 group only: the Bottlerocket group runs the
    /// same instance type, so an instance-type affinity would put the exporter there too.
    #[test]
    fn the_exporter_runs_only_on_the_clusters_al2023_nvidia_groups_and_tolerates_them() {
        let m = render(STACK).unwrap();
        assert_eq!(m.file, "dcgm-exporter/values.yaml");
        assert!(m.yaml.contains("--version 4.8.2"), "{}", m.yaml);
        assert_eq!(
            terms(&m),
            json!([{ "matchExpressions": [{ "key": "eks.amazonaws.com/nodegroup", "operator": "In", "values": ["m-l4"] }] }])
        );
        let v: Json = serde_yaml_ng::from_str(&m.yaml).unwrap();
        assert_eq!(v["tolerations"][1]["key"], "nvidia.com/gpu");
        assert!(!m.yaml.contains("bottlerocket"), "the Bottlerocket group's taint is not tolerated: {}", m.yaml);
        assert_eq!(v["serviceMonitor"]["enabled"], false);
        let chart: Json =
            serde_yaml_ng::from_str(include_str!("../../tests/k8s/charts/dcgm-exporter-4.8.2.values.yaml")).unwrap();
        assert_eq!(super::super::gpu_operator::unknown_keys(&v, &chart, ""), Vec::<String>::new());
    }

    const POOL: &str = r#"
[karpenter_pool.gpu]
cluster         = "${eks_cluster.main.name}"
node_role       = "node"
subnets         = ["subnet-1"]
security_groups = ["sg-1"]
instance_types  = ["g6e.xlarge"]
gpu_limit       = 8
node_taints     = [{ key = "pool", value = "gpu", effect = "NO_SCHEDULE" }]
"#;

    /// AL2023 GPU pools (`ami = "al2023@…"`) are pinned by Karpenter's NodePool label; with no
    /// AL2023 group or pool nothing is rendered (never `In` with no values, which the API
    /// server rejects), and the rules say why.
    #[test]
    fn al2023_pools_are_included_and_no_nodes_renders_nothing() {
        // The pool's `ami` attribute lands with r19-pools; until then the exporter sees the pool
        // only through it, so build the stack without it and add the attribute to its inputs.
        let stack_text = format!("{STACK}{POOL}");
        let vars = crate::stack::VarSources { cli: &[], env: &|_| None };
        let src = crate::stack::Source::new("t.toml", stack_text.clone());
        let (stack, _) = crate::stack::Stack::parse(src, &vars, &crate::resources::schemas()).unwrap();
        let mut stack = stack;
        let pool = stack.resources.iter_mut().find(|r| r.kind.name() == "karpenter_pool").unwrap();
        let span = pool.attrs["cluster"].span.clone();
        pool.attrs.insert("ami".into(), crate::stack::Expr::value(Value::str("al2023@latest"), span));
        let ex = stack.resources.iter().find(|r| r.kind.name() == "dcgm_exporter").unwrap();
        let nodes = crate::resources::gpu_nodes::exporter_nodes(&stack, ex);
        assert_eq!(nodes.node_pools, Value::List(vec![Value::str("m-gpu")]));
        let mut inputs = Attrs::new();
        inputs.insert("version".into(), Value::str(CHART_VERSION));
        inputs.insert("node_groups".into(), Value::List(vec![]));
        inputs.insert("node_pools".into(), nodes.node_pools.clone());
        inputs.insert("tolerations".into(), nodes.tolerations.clone());
        let m = DcgmExporter.render("dcgm_exporter.main", &inputs, &Attrs::new()).unwrap();
        assert_eq!(
            terms(&m),
            json!([{ "matchExpressions": [{ "key": "karpenter.sh/nodepool", "operator": "In", "values": ["m-gpu"] }] }])
        );
        assert!(m.yaml.contains("key: pool"), "{}", m.yaml);
        // A Bottlerocket pool (no `ami`) is not a place for the exporter.
        let (stack, _) = crate::stack::Stack::parse(
            crate::stack::Source::new("t.toml", stack_text),
            &vars,
            &crate::resources::schemas(),
        )
        .unwrap();
        let ex = stack.resources.iter().find(|r| r.kind.name() == "dcgm_exporter").unwrap();
        assert_eq!(crate::resources::gpu_nodes::exporter_nodes(&stack, ex).node_pools, Value::List(vec![]));
        // No AL2023 group or pool: no values at all.
        inputs.insert("node_pools".into(), Value::List(vec![]));
        assert!(DcgmExporter.render("dcgm_exporter.main", &inputs, &Attrs::new()).is_none());
    }

    #[test]
    fn versions_are_three_numbers() {
        assert!(chart_version("4.8.2"));
        assert!(!chart_version("v4.8.2") && !chart_version("latest") && !chart_version("4.8") && !chart_version(""));
    }
}
