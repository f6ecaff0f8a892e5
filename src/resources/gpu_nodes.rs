//! Which nodes the GPU software of a cluster serves (the GPU Operator, the DCGM exporter, the
//! NVIDIA device plugin's sharing configs): read by the rendered kinds for their values and
//! by the rules that check them.

use std::collections::{BTreeMap, BTreeSet};

use crate::resources::launch_template::gpu_sharing::nvidia_config;
use crate::stack::query::{self, lit, lit_str, node_groups, referenced, same_object, strings};
use crate::stack::{Resource, Stack};
use crate::value::Value;

/// The label that turns every GPU Operator operand off on a node (NVIDIA/gpu-operator
/// v26.7.0 `controllers/state_manager.go`: `commonOperandsLabelKey`, `hasOperandsDisabled`).
pub(crate) const OPERANDS_OFF: (&str, &str) = ("nvidia.com/gpu.deploy.operands", "false");

/// The add-on names (EKS UG `amazon-cloudwatch-observability`; SageMaker DG
/// `sagemaker-hyperpod-eks-operate-console-ui-governance`).
pub(crate) const CLOUDWATCH_ADDON: &str = "amazon-cloudwatch-observability";
pub(crate) const TASK_GOVERNANCE_ADDON: &str = "amazon-sagemaker-hyperpod-taskgovernance";
/// (namespace, name) of the CloudWatch agent's service account (EKS UG
/// `amazon-cloudwatch-observability`: `eksctl create iamserviceaccount --name cloudwatch-agent
/// --namespace amazon-cloudwatch`).
pub(crate) const CLOUDWATCH_SERVICE_ACCOUNT: (&str, &str) = ("amazon-cloudwatch", "cloudwatch-agent");

/// The stack's `gpu_operator`s.
pub(crate) fn operators(stack: &Stack) -> impl Iterator<Item = &Resource> {
    stack.resources.iter().filter(|r| r.kind.name() == "gpu_operator")
}

/// The operator managing the nodes of `r`'s cluster (`cluster`, or `eks_cluster` for HyperPod).
pub(crate) fn operator_of<'a>(stack: &'a Stack, r: &Resource, attr: &str) -> Option<&'a Resource> {
    operators(stack).find(|op| same_cluster(op.attrs.get("cluster"), r.attrs.get(attr)))
}

/// Two `cluster` expressions name one EKS cluster (references to one `eks_cluster`, by any
/// output: a node group names it, HyperPod gives its ARN).
pub(crate) fn same_cluster(a: Option<&crate::stack::Expr>, b: Option<&crate::stack::Expr>) -> bool {
    same_object(a, b)
}

/// The instance types a node group runs: its `instance_types`, or its template's `instance_type`.
pub(crate) fn group_types(stack: &Stack, ng: &Resource) -> Vec<String> {
    let mut types = strings(lit(ng, "instance_types"));
    if let Some(lt) = referenced(stack, ng, "launch_template", "launch_template") {
        types.extend(lit_str(lt, "instance_type"));
    }
    types
}

pub(crate) fn nvidia_type(t: &str) -> bool {
    crate::aws::catalog::embedded().get(t).is_some_and(|i| i.is_nvidia())
}

/// The NVIDIA OS a node group runs: `Some(true)` an EKS NVIDIA AMI whose device plugin is not
/// on the host (AL2023 NVIDIA, and AL2_x86_64_GPU: both ship the driver and container toolkit
/// with NVIDIA's runtime as containerd's default, EKS UG `eks-optimized-ami` accelerated AMIs),
/// `Some(false)` Bottlerocket (ami "auto" picks Bottlerocket NVIDIA for NVIDIA types), None
/// for no NVIDIA AMI (`CUSTOM` is not an `ami_type` gpustack accepts).
pub(crate) fn nvidia_al2023(stack: &Stack, ng: &Resource) -> Option<bool> {
    let ami = lit_str(ng, "ami_type").unwrap_or_else(|| "auto".into());
    match ami.as_str() {
        a if a.contains("NVIDIA") => Some(a.starts_with("AL2023_")),
        a if a.starts_with("AL2_") && a.ends_with("_GPU") => Some(true),
        "auto" if group_types(stack, ng).iter().any(|t| nvidia_type(t)) => Some(false),
        _ => None,
    }
}

/// A pool renders an AL2023 AMI (`ami = "al2023@…"`), else Bottlerocket.
pub(crate) fn pool_al2023(pool: &Resource) -> bool {
    lit_str(pool, "ami").is_some_and(|a| a.starts_with("al2023"))
}

/// A pool of NVIDIA GPUs: it lists NVIDIA types or families (by the embedded catalog), or,
/// listing neither, limits GPUs.
pub(crate) fn gpu_pool(pool: &Resource) -> bool {
    let types = strings(lit(pool, "instance_types"));
    let families = strings(lit(pool, "instance_families"));
    if types.is_empty() && families.is_empty() {
        return pool.attrs.contains_key("gpu_limit");
    }
    let in_family =
        |i: &&crate::aws::catalog::InstanceInfo| families.iter().any(|f| i.name.split('.').next() == Some(f.as_str()));
    types.iter().any(|t| nvidia_type(t))
        || crate::aws::catalog::embedded().all().filter(in_family).any(|i| i.is_nvidia())
}

pub(crate) fn pools(stack: &Stack) -> impl Iterator<Item = &Resource> {
    stack.resources.iter().filter(|r| r.kind.name() == "karpenter_pool")
}

/// What a `gpu_operator`'s values take from the stack, as its computed inputs.
pub(crate) struct OperatorNodes {
    /// `[{ key, effect }]`: the taints of the AL2023 GPU nodes it serves.
    pub tolerations: Value,
    /// `{ name = yaml }`: the device plugin's sharing configs those groups select.
    pub sharing_configs: Value,
}

/// The AL2023 NVIDIA node groups and pools of the operator's cluster, read for its values.
pub(crate) fn operator_nodes(stack: &Stack, op: &Resource) -> OperatorNodes {
    let mut taints: BTreeSet<(String, String)> = BTreeSet::new();
    let in_cluster = |r: &Resource| same_cluster(op.attrs.get("cluster"), r.attrs.get("cluster"));
    let effect = |e: &str| crate::resources::karpenter_pool::k8s_effect(e).to_string();
    for ng in node_groups(stack).filter(|ng| in_cluster(ng) && nvidia_al2023(stack, ng) == Some(true)) {
        taints.extend(query::taints(ng, "taints").into_iter().map(|(k, _, e)| (k, effect(&e))));
    }
    for pool in pools(stack).filter(|p| in_cluster(p) && pool_al2023(p) && gpu_pool(p)) {
        taints.extend(query::taints(pool, "node_taints").into_iter().map(|(k, _, e)| (k, effect(&e))));
    }
    let mut sharing = BTreeMap::new();
    for (_, name, table) in al2023_sharing(stack).into_iter().filter(|(ng, _, _)| in_cluster(ng)) {
        if let Some((_, config)) = nvidia_config(&table) {
            sharing.insert(name, Value::str(serde_yaml_ng::to_string(&config).unwrap_or_default()));
        }
    }
    let tolerations = taints
        .into_iter()
        .map(|(k, e)| Value::Table(BTreeMap::from([("key".into(), Value::str(k)), ("effect".into(), Value::str(e))])))
        .collect();
    OperatorNodes { tolerations: Value::List(tolerations), sharing_configs: Value::Table(sharing) }
}

/// The node label EKS sets on every node of a managed node group, its value the group's name
/// (EKS UG `managed-node-groups`: "Amazon EKS … adds the … `eks.amazonaws.com/nodegroup` label").
pub(crate) const NODEGROUP_LABEL: &str = "eks.amazonaws.com/nodegroup";
/// The node label Karpenter sets on every node a NodePool launches, its value the pool's name
/// (Karpenter docs `concepts/scheduling`, well-known labels: `karpenter.sh/nodepool`).
pub(crate) const NODEPOOL_LABEL: &str = "karpenter.sh/nodepool";

/// The name EKS / Karpenter know `r` by: its literal `name`, else gpustack's default.
pub(crate) fn physical_name(stack: &Stack, r: &Resource) -> String {
    lit_str(r, "name").unwrap_or_else(|| stack.default_physical_name(r))
}

/// Where a `dcgm_exporter` runs: the names of the AL2023 NVIDIA node groups and of the AL2023
/// NVIDIA Karpenter pools (`ami = "al2023@…"`) of its cluster, and their taints `[{ key,
/// effect }]`. AL2023's containerd runs containers with NVIDIA's runtime, so the exporter sees
/// the GPUs; on Bottlerocket a pod sees GPUs only through the device plugin, so it is not
/// pinned there. Pinned by group and pool name, not instance type: one type can run either OS.
pub(crate) struct ExporterNodes {
    pub node_groups: Value,
    pub node_pools: Value,
    pub tolerations: Value,
}

pub(crate) fn exporter_nodes(stack: &Stack, r: &Resource) -> ExporterNodes {
    let mut groups = BTreeSet::new();
    let mut pool_names = BTreeSet::new();
    let mut taints = BTreeSet::new();
    let effect = |e: &str| crate::resources::karpenter_pool::k8s_effect(e).to_string();
    let in_cluster = |x: &Resource| same_cluster(r.attrs.get("cluster"), x.attrs.get("cluster"));
    for ng in node_groups(stack).filter(|ng| in_cluster(ng) && nvidia_al2023(stack, ng) == Some(true)) {
        groups.insert(physical_name(stack, ng));
        taints.extend(query::taints(ng, "taints").into_iter().map(|(k, _, e)| (k, effect(&e))));
        if let Some(lt) = referenced(stack, ng, "launch_template", "launch_template") {
            taints.extend(query::taints(lt, "node_taints").into_iter().map(|(k, _, e)| (k, effect(&e))));
        }
    }
    for pool in pools(stack).filter(|p| in_cluster(p) && pool_al2023(p) && gpu_pool(p)) {
        pool_names.insert(physical_name(stack, pool));
        taints.extend(query::taints(pool, "node_taints").into_iter().map(|(k, _, e)| (k, effect(&e))));
    }
    let list = |s: BTreeSet<String>| Value::List(s.into_iter().map(Value::str).collect());
    let taints = taints
        .into_iter()
        .map(|(k, e)| Value::Table(BTreeMap::from([("key".into(), Value::str(k)), ("effect".into(), Value::str(e))])))
        .collect();
    ExporterNodes { node_groups: list(groups), node_pools: list(pool_names), tolerations: Value::List(taints) }
}

/// True when a `gpu_operator` (with its device plugin or without) serves `ng`'s cluster.
pub(crate) fn operator_in_cluster(stack: &Stack, ng: &Resource) -> bool {
    operator_of(stack, ng, "cluster").is_some()
}

/// True when a `gpu_operator` with its device plugin on serves `ng`'s cluster: the standalone
/// NVIDIA device plugin's values are then not written (one plugin per node).
pub(crate) fn operator_runs_device_plugin(stack: &Stack, ng: &Resource) -> bool {
    operator_of(stack, ng, "cluster")
        .is_some_and(|op| lit(op, "device_plugin").and_then(|v| v.as_bool()) != Some(false))
}

/// The AL2023 NVIDIA node groups whose launch template shares GPUs, each with the name of
/// its device-plugin config. Bottlerocket groups are not here: their plugin runs on the host
/// and takes `gpu_sharing` from user data (aws-facts §4, §14).
pub(crate) fn al2023_sharing(stack: &Stack) -> Vec<(&Resource, String, BTreeMap<String, Value>)> {
    node_groups(stack)
        .filter(|ng| lit_str(ng, "ami_type").is_some_and(|a| a.starts_with("AL2023_") && a.contains("NVIDIA")))
        .filter_map(|ng| {
            // The group's own `gpu_sharing` (the device plugin's config), else its template's.
            let sharing = lit(ng, "gpu_sharing")
                .or_else(|| lit(referenced(stack, ng, "launch_template", "launch_template")?, "gpu_sharing"))?;
            let table = sharing.as_table()?.clone();
            let name = crate::resources::launch_template::gpu_sharing::nvidia_config(&table)?.0;
            Some((ng, name, table))
        })
        .collect()
}
