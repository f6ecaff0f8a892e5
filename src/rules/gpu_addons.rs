//! Rules for what runs on the GPU nodes besides the nodes themselves: NVIDIA's GPU Operator
//! (`gpu_operator`: MIG on AL2023, one device plugin per node, drivers the AMI already has),
//! the add-ons that need something of the stack (`amazon-cloudwatch-observability` a role,
//! `amazon-sagemaker-hyperpod-taskgovernance` a HyperPod cluster), and what the operator's
//! values take from the stack ([`operator_nodes`]). Facts and sources:
//! docs/aws-facts-gpu-addons.md.

use std::collections::{BTreeMap, BTreeSet};

use super::{lit, lit_str, node_groups, referenced, span, strings};
use crate::resources::launch_template::gpu_sharing::mig_layout;
use crate::stack::{Diagnostic, Resource, Stack};
use crate::value::Value;

pub(crate) use crate::resources::gpu_nodes::*;

/// Rules that need only the stack.
pub(crate) fn offline(stack: &Stack) -> Vec<Diagnostic> {
    let mut d = vec![];
    al2023_mig(stack, &mut d);
    one_operator_per_cluster(stack, &mut d);
    one_dcgm_exporter(stack, &mut d);
    dcgm_exporter_has_nodes(stack, &mut d);
    one_device_plugin_per_node(stack, &mut d);
    drivers_in_the_ami(stack, &mut d);
    cloudwatch_role(stack, &mut d);
    one_gpu_metrics_exporter(stack, &mut d);
    task_governance(stack, &mut d);
    d
}

/// MIG on AL2023 needs NVIDIA's MIG manager, which the EKS AL2023 NVIDIA AMI does not run
/// (it ships the driver, toolkit and fabric manager only: aws-facts-gpu-addons §1): the
/// stack's `gpu_operator` for the cluster must run it (`mig`), and a group's layout must
/// be one profile, as the node label that selects it is one value.
fn al2023_mig(stack: &Stack, d: &mut Vec<Diagnostic>) {
    for ng in node_groups(stack) {
        let Some(sharing) = lit(ng, "gpu_sharing").and_then(|v| v.as_table().cloned()) else { continue };
        if sharing.get("strategy").and_then(Value::as_str) != Some("mig") {
            continue;
        }
        if !lit_str(ng, "ami_type").is_some_and(|a| a.starts_with("AL2023_") && a.contains("NVIDIA")) {
            continue; // the node group's own check says gpu_sharing is for AL2023
        }
        let op = operator_of(stack, ng, "cluster");
        let with_mig = op.filter(|op| op.attrs.contains_key("mig"));
        if with_mig.is_none() {
            let help = match op {
                Some(op) => format!("add mig = {{ strategy = \"mixed\" }} to [{}], so its MIG manager partitions these GPUs", op.address),
                None => "add [gpu_operator.main] with cluster = \"${eks_cluster.NAME.name}\" and mig = { strategy = \"mixed\" } (NVIDIA's MIG manager partitions the GPUs), use strategy = \"time-slicing\" or \"mps\", or MIG on a Bottlerocket launch template".into(),
            };
            d.push(
                Diagnostic::error(
                    format!("`{}`: MIG on AL2023 needs NVIDIA's MIG manager, which the AMI does not run and no gpu_operator with `mig` in this stack runs for its cluster", ng.address),
                    span(ng, "gpu_sharing"),
                )
                .help(help),
            );
        } else if let Some(op) = with_mig
            && lit(op, "gfd").and_then(|v| v.as_bool()) == Some(false)
        {
            // The MIG manager's DaemonSet selects `nvidia.com/gpu.deploy.mig-manager=true`
            // (v26.7.0 `assets/state-mig-manager/0600_daemonset.yaml`), a label the operator
            // sets only on nodes GFD labelled `nvidia.com/mig.capable=true`
            // (`controllers/state_manager.go`, `hasMIGCapableGPU`): without GFD, no MIG manager.
            d.push(
                Diagnostic::error(
                    format!("`{}`: MIG needs the operator's MIG manager, which runs only on nodes GPU Feature Discovery labels MIG-capable, but `{}` sets gfd = false", ng.address, op.address),
                    span(op, "gfd"),
                )
                .help("remove gfd = false: GFD's nvidia.com/mig.capable label is what schedules the MIG manager on these nodes"),
            );
        }
        if let Some(op) = with_mig
            && lit(op, "device_plugin").and_then(|v| v.as_bool()) == Some(false)
        {
            d.push(
                Diagnostic::error(
                    format!("`{}`: MIG slices need a device plugin, but `{}` sets device_plugin = false", ng.address, op.address),
                    span(op, "device_plugin"),
                )
                .help("remove device_plugin = false: the operator's device plugin advertises the MIG slices its MIG manager makes"),
            );
        }
        let profile = sharing.get("mig_profile").and_then(Value::as_table).cloned().unwrap_or_default();
        let layouts: BTreeSet<String> = profile
            .iter()
            .filter_map(|(k, v)| {
                let one = BTreeMap::from([
                    ("strategy".to_string(), Value::str("mig")),
                    ("mig_profile".to_string(), Value::Table(BTreeMap::from([(k.clone(), v.clone())]))),
                ]);
                mig_layout(&one).map(|(name, _, _)| name)
            })
            .collect();
        if layouts.len() > 1 {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}`: mig_profile asks for {} layouts ({}); on AL2023 one node label (nvidia.com/mig.config) selects one",
                        ng.address,
                        layouts.len(),
                        layouts.into_iter().collect::<Vec<_>>().join(", ")
                    ),
                    span(ng, "gpu_sharing"),
                )
                .help("keep one entry in mig_profile, for the GPU of the group's instance type"),
            );
        }
    }
}

/// One DCGM exporter per GPU: a `dcgm_exporter` next to a `gpu_operator` that runs its own
/// (`dcgm_exporter`, default true) would export every GPU twice.
fn one_dcgm_exporter(stack: &Stack, d: &mut Vec<Diagnostic>) {
    for ex in stack.resources.iter().filter(|r| r.kind.name() == "dcgm_exporter") {
        let Some(op) = operator_of(stack, ex, "cluster") else { continue };
        if lit(op, "dcgm_exporter").and_then(|v| v.as_bool()) != Some(false) {
            d.push(
                Diagnostic::error(
                    format!("`{}` and `{}` both run NVIDIA's DCGM exporter in one cluster", ex.address, op.address),
                    ex.span.clone(),
                )
                .help(format!(
                    "remove `{}` (the operator exports GPU metrics), or set dcgm_exporter = false in [{}]",
                    ex.address, op.address
                )),
            );
        }
    }
}

/// A `dcgm_exporter` is pinned to its cluster's AL2023 NVIDIA groups and pools
/// ([`exporter_nodes`]); with none, its node affinity would be `In` with no values, which the
/// API server rejects ("values: Required value" for operator In: kubernetes
/// `pkg/apis/core/validation/validation.go`, node selector requirement validation).
fn dcgm_exporter_has_nodes(stack: &Stack, d: &mut Vec<Diagnostic>) {
    for ex in stack.resources.iter().filter(|r| r.kind.name() == "dcgm_exporter") {
        let nodes = exporter_nodes(stack, ex);
        let none = |v: &Value| v.as_list().is_none_or(|l| l.is_empty());
        if none(&nodes.node_groups) && none(&nodes.node_pools) {
            d.push(
                Diagnostic::error(
                    format!("`{}`: its cluster has no AL2023 NVIDIA node group or pool for the DCGM exporter to run on", ex.address),
                    span(ex, "cluster"),
                )
                .help("add a node group with ami_type = \"AL2023_x86_64_NVIDIA\" (or a karpenter_pool with ami = \"al2023@latest\" and NVIDIA types) to this cluster, or remove the exporter (Bottlerocket exposes GPUs to pods only through its device plugin)"),
            );
        }
    }
}

fn one_operator_per_cluster(stack: &Stack, d: &mut Vec<Diagnostic>) {
    let ops: Vec<&Resource> = operators(stack).collect();
    for (i, op) in ops.iter().enumerate() {
        if let Some(first) = ops[..i].iter().find(|o| same_cluster(o.attrs.get("cluster"), op.attrs.get("cluster"))) {
            d.push(
                Diagnostic::error(
                    format!("`{}` and `{}` install the GPU Operator in one cluster", first.address, op.address),
                    span(op, "cluster"),
                )
                .help("keep one gpu_operator per cluster: two would deploy every operand twice on each GPU node"),
            );
        }
    }
}

/// One device plugin per node: on Bottlerocket NVIDIA nodes the plugin runs on the host
/// (bottlerocket#4309) and HyperPod's dependencies chart runs its own on ml.* nodes, so the
/// operator must leave those nodes alone. The node label `nvidia.com/gpu.deploy.operands=false`
/// makes it remove all its operands from a node ([`OPERANDS_OFF`]).
fn one_device_plugin_per_node(stack: &Stack, d: &mut Vec<Diagnostic>) {
    let labelled = |labels: Option<Value>| {
        labels.as_ref().and_then(Value::as_table).and_then(|t| t.get(OPERANDS_OFF.0)).and_then(Value::as_str)
            == Some(OPERANDS_OFF.1)
    };
    let help = |attr: &str| {
        format!(
            "add {attr} = {{ \"{}\" = \"{}\" }}: the GPU Operator then deploys nothing on these nodes",
            OPERANDS_OFF.0, OPERANDS_OFF.1
        )
    };
    for ng in node_groups(stack) {
        let Some(op) = operator_of(stack, ng, "cluster") else { continue };
        let template_labels =
            referenced(stack, ng, "launch_template", "launch_template").and_then(|lt| lit(lt, "node_labels"));
        if nvidia_al2023(stack, ng) == Some(false) && !labelled(lit(ng, "labels")) && !labelled(template_labels) {
            d.push(
                Diagnostic::error(
                    format!("`{}` runs Bottlerocket, whose NVIDIA device plugin runs on the host, and `{}` would deploy a second one on its nodes", ng.address, op.address),
                    span(ng, "labels"),
                )
                .help(help("labels")),
            );
        }
    }
    for pool in pools(stack).filter(|p| !pool_al2023(p) && gpu_pool(p)) {
        let Some(op) = operator_of(stack, pool, "cluster") else { continue };
        if !labelled(lit(pool, "node_labels")) {
            d.push(
                Diagnostic::error(
                    format!("`{}` launches Bottlerocket GPU nodes, whose NVIDIA device plugin runs on the host, and `{}` would deploy a second one on them", pool.address, op.address),
                    span(pool, "node_labels"),
                )
                .help(help("node_labels")),
            );
        }
    }
    for hp in super::hyperpod::clusters(stack) {
        let Some(op) = operator_of(stack, hp, "eks_cluster") else { continue };
        for (name, (g, fields)) in super::hyperpod::groups(hp) {
            let t =
                fields.get("instance_type").and_then(|e| e.as_literal()).and_then(Value::as_str).unwrap_or_default();
            let ec2 = t.strip_prefix("ml.").unwrap_or(t);
            if !(ec2.starts_with('p') || ec2.starts_with('g')) {
                continue;
            }
            let labels = fields.get("labels").map(|e| e.resolve(&|_| Value::Unknown));
            if !labelled(labels) {
                d.push(
                    Diagnostic::error(
                        format!("`{}` group `{name}` ({t}) gets NVIDIA's device plugin from HyperPod's dependencies chart, and `{}` would deploy a second one", hp.address, op.address),
                        g.span.clone(),
                    )
                    .help(format!("add to instance_groups.{name}: labels = {{ \"{}\" = \"{}\" }}", OPERANDS_OFF.0, OPERANDS_OFF.1)),
                );
            }
        }
    }
}

/// EKS NVIDIA AMIs ship the driver and the container toolkit (aws-facts-gpu-addons §1): the
/// operator's would fight them for the GPU.
fn drivers_in_the_ami(stack: &Stack, d: &mut Vec<Diagnostic>) {
    for op in operators(stack) {
        let groups: Vec<&Resource> = node_groups(stack)
            .filter(|ng| same_cluster(op.attrs.get("cluster"), ng.attrs.get("cluster")))
            .filter(|ng| nvidia_al2023(stack, ng).is_some())
            .collect();
        let Some(first) = groups.first() else { continue };
        for attr in ["driver", "toolkit"] {
            if lit(op, attr).and_then(|v| v.as_bool()) == Some(true) {
                d.push(
                    Diagnostic::error(
                        format!(
                            "`{}` sets {attr} = true, but `{}` runs an EKS NVIDIA AMI, which ships the NVIDIA driver and container toolkit",
                            op.address, first.address
                        ),
                        span(op, attr),
                    )
                    .help(format!("remove {attr} = true: a second {attr} on these nodes cannot load while the AMI's holds the GPU")),
                );
            }
        }
    }
}

fn addons<'a>(stack: &'a Stack, name: &'a str) -> impl Iterator<Item = &'a Resource> + 'a {
    stack.resources.iter().filter(move |r| r.kind.name() == "eks_addon" && lit_str(r, "addon").as_deref() == Some(name))
}

/// A role for service account amazon-cloudwatch/cloudwatch-agent through EKS Pod Identity:
/// an entry `{ service_account = "cloudwatch-agent", role }` of the add-on's `pod_identity`
/// (CreateAddon `podIdentityAssociations`, where the add-on's namespace is implied).
fn pod_identity_names_agent(v: &Value) -> bool {
    v.as_list().unwrap_or_default().iter().any(|e| {
        e.as_table().and_then(|t| t.get("service_account")).and_then(Value::as_str)
            == Some(CLOUDWATCH_SERVICE_ACCOUNT.1)
    })
}

/// The CloudWatch agent writes metrics and logs with `CloudWatchAgentServerPolicy` (EKS UG
/// `amazon-cloudwatch-observability`: IRSA for service account `cloudwatch-agent` in
/// namespace `amazon-cloudwatch`, or EKS Pod Identity from add-on v3.1.0, or the node role).
/// Without one of them it runs and sends nothing. A Pod Identity role counts as the add-on's
/// `pod_identity` entry for the agent, or a `pod_identity_association` for the agent's
/// namespace and service account in the add-on's cluster.
fn cloudwatch_role(stack: &Stack, d: &mut Vec<Diagnostic>) {
    const POLICY: &str = "CloudWatchAgentServerPolicy";
    for a in addons(stack, CLOUDWATCH_ADDON) {
        let in_cluster = |r: &Resource| same_cluster(a.attrs.get("cluster"), r.attrs.get("cluster"));
        let node_role_has_it = node_groups(stack).filter(|ng| in_cluster(ng)).any(|ng| {
            super::target(stack, ng, "node_role")
                .filter(|r| r.kind.name() == "iam_role")
                .is_some_and(|r| strings(lit(r, "managed_policies")).iter().any(|p| p.ends_with(&format!("/{POLICY}"))))
        });
        let associated = stack.resources.iter().filter(|r| r.kind.name() == "pod_identity_association").any(|r| {
            in_cluster(r)
                && lit_str(r, "namespace").as_deref() == Some(CLOUDWATCH_SERVICE_ACCOUNT.0)
                && lit_str(r, "service_account").as_deref() == Some(CLOUDWATCH_SERVICE_ACCOUNT.1)
        });
        if a.attrs.contains_key("service_account_role")
            || lit(a, "pod_identity").is_some_and(|v| pod_identity_names_agent(&v))
            || node_role_has_it
            || associated
        {
            continue;
        }
        d.push(
            Diagnostic::warning(
                format!("`{}`: the CloudWatch agent has no role to write metrics with (no add-on role, and no node role in its cluster with {POLICY})", a.address),
                span(a, "addon"),
            )
            .help(format!(
                "give the add-on a role (service_account_role, or an EKS Pod Identity association for cloudwatch-agent): an iam_role with managed_policies = [\"arn:aws:iam::aws:policy/{POLICY}\", \"arn:aws:iam::aws:policy/AWSXrayWriteOnlyAccess\"] for service account {}/{}, or add {POLICY} to the cluster's node role", CLOUDWATCH_SERVICE_ACCOUNT.0, CLOUDWATCH_SERVICE_ACCOUNT.1
            )),
        );
    }
}

/// `amazon-cloudwatch-observability` collects NVIDIA GPU metrics with a DCGM exporter of its
/// own on GPU nodes (CloudWatch UG `Container-Insights-metrics-enhanced-EKS`, NVIDIA GPU
/// metrics): a `dcgm_exporter`, or a `gpu_operator` with its exporter on, in the same cluster
/// runs a second one on each GPU, and each starts its own nv-hostengine (NVIDIA DCGM exporter
/// docs, `dcgm-exporter.html`).
fn one_gpu_metrics_exporter(stack: &Stack, d: &mut Vec<Diagnostic>) {
    for a in addons(stack, CLOUDWATCH_ADDON) {
        let in_cluster = |r: &&Resource| same_cluster(a.attrs.get("cluster"), r.attrs.get("cluster"));
        let exporters = stack.resources.iter().filter(in_cluster).filter(|r| match r.kind.name() {
            "dcgm_exporter" => true,
            "gpu_operator" => lit(r, "dcgm_exporter").and_then(|v| v.as_bool()) != Some(false),
            _ => false,
        });
        for ex in exporters {
            let fix = if ex.kind.name() == "gpu_operator" {
                format!("set dcgm_exporter = false in [{}]", ex.address)
            } else {
                format!("remove `{}`", ex.address)
            };
            d.push(
                Diagnostic::warning(
                    format!("`{}` and `{}` both run NVIDIA's DCGM exporter on the cluster's GPU nodes", a.address, ex.address),
                    span(ex, "dcgm_exporter"),
                )
                .help(format!("{fix}: the CloudWatch add-on already exports GPU metrics (or drop the add-on and keep this exporter for Prometheus)")),
            );
        }
    }
}

/// Task governance runs on a HyperPod cluster's EKS orchestrator: it needs a
/// `hyperpod_cluster` on that EKS cluster (SageMaker DG
/// `sagemaker-hyperpod-eks-operate-console-ui-governance-setup`).
fn task_governance(stack: &Stack, d: &mut Vec<Diagnostic>) {
    for a in addons(stack, TASK_GOVERNANCE_ADDON) {
        let on_cluster = super::hyperpod::clusters(stack)
            .any(|hp| same_cluster(hp.attrs.get("eks_cluster"), a.attrs.get("cluster")));
        if !on_cluster {
            d.push(
                Diagnostic::error(
                    format!("`{}`: HyperPod task governance needs a HyperPod cluster orchestrated by this EKS cluster, and the stack has none", a.address),
                    span(a, "cluster"),
                )
                .help("add a hyperpod_cluster with eks_cluster = \"${eks_cluster.NAME.arn}\" of this add-on's cluster, or remove the add-on"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::stack::{Source, VarSources};

    /// (error?, message, help) of everything the load step reports for `text`.
    fn reports(text: &str) -> Vec<(bool, String, String)> {
        let vars = VarSources { cli: &[], env: &|_| None };
        let diags = match crate::load::check(Source::new("t.toml", text.into()), &vars) {
            Ok(stack) => stack.warnings,
            Err(d) => d.items,
        };
        diags.iter().map(|d| (d.is_error(), d.message.clone(), d.help.clone().unwrap_or_default())).collect()
    }

    fn the(text: &str, message: &str) -> (bool, String, String) {
        let all = reports(text);
        let hits: Vec<_> = all.iter().filter(|r| r.1.contains(message)).cloned().collect();
        assert_eq!(hits.len(), 1, "one report with {message:?}: {all:#?}");
        hits[0].clone()
    }

    fn none(text: &str, message: &str) {
        let all = reports(text);
        assert!(!all.iter().any(|r| r.1.contains(message)), "no {message:?}: {all:#?}");
    }

    const BASE: &str = r#"[stack]
name = "g"
region = "us-west-2"

[iam_role.node]
service          = "ec2.amazonaws.com"
managed_policies = ["arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"]

[eks_cluster.main]
version = "1.33"
role    = "arn:aws:iam::123456789012:role/c"
subnets = ["subnet-1", "subnet-2"]
endpoint_public_access = false
endpoint_private_access = true

[node_group.system]
cluster        = "${eks_cluster.main.name}"
node_role      = "${iam_role.node.arn}"
subnets        = ["subnet-1"]
instance_types = ["m6i.large"]

[node_group.h100]
cluster        = "${eks_cluster.main.name}"
node_role      = "${iam_role.node.arn}"
subnets        = ["subnet-1"]
ami_type       = "AL2023_x86_64_NVIDIA"
instance_types = ["p5.48xlarge"]
gpu_sharing    = { strategy = "mig", mig_profile = { "h100.80gb" = "1g.10gb" } }
"#;

    const OPERATOR: &str =
        "\n[gpu_operator.main]\ncluster = \"${eks_cluster.main.name}\"\nmig = { strategy = \"mixed\" }\n";

    #[test]
    fn mig_on_al2023_needs_a_gpu_operator_with_mig() {
        let (error, _, help) = the(BASE, "MIG on AL2023 needs NVIDIA's MIG manager");
        assert!(error);
        assert!(help.contains("add [gpu_operator.main]"), "{help}");
        let no_mig = format!("{BASE}\n[gpu_operator.main]\ncluster = \"${{eks_cluster.main.name}}\"\n");
        let (_, _, help) = the(&no_mig, "MIG on AL2023 needs NVIDIA's MIG manager");
        assert!(help.contains("add mig = { strategy = \"mixed\" } to [gpu_operator.main]"), "{help}");
        none(&format!("{BASE}{OPERATOR}"), "MIG on AL2023");
        let off = format!("{BASE}{OPERATOR}device_plugin = false\n");
        assert!(the(&off, "MIG slices need a device plugin").0);
        let (error, _, help) = the(&format!("{BASE}{OPERATOR}gfd = false\n"), "sets gfd = false");
        assert!(error && help.contains("remove gfd = false"), "{help}");
        none(&format!("{BASE}{OPERATOR}gfd = true\n"), "sets gfd = false");
    }

    #[test]
    fn a_group_selects_one_mig_layout() {
        let two = BASE
            .replace("{ \"h100.80gb\" = \"1g.10gb\" }", "{ \"h100.80gb\" = \"1g.10gb\", \"a100.80gb\" = \"3g.40gb\" }");
        let (error, message, _) = the(&format!("{two}{OPERATOR}"), "mig_profile asks for 2 layouts");
        assert!(error && message.contains("all-1g.10gb, all-3g.40gb"), "{message}");
    }

    #[test]
    fn the_operator_stays_off_nodes_that_have_a_device_plugin() {
        let br = format!(
            "{BASE}{OPERATOR}\n[node_group.br]\ncluster = \"${{eks_cluster.main.name}}\"\nnode_role = \"${{iam_role.node.arn}}\"\nsubnets = [\"subnet-1\"]\ninstance_types = [\"g6.xlarge\"]\n"
        );
        let (error, _, help) = the(&br, "`node_group.br` runs Bottlerocket");
        assert!(error && help.contains("\"nvidia.com/gpu.deploy.operands\" = \"false\""), "{help}");
        none(&format!("{br}labels = {{ \"nvidia.com/gpu.deploy.operands\" = \"false\" }}\n"), "runs Bottlerocket");
        // Without an operator, Bottlerocket groups need nothing.
        none(&br.replace(OPERATOR, ""), "runs Bottlerocket");
        // Bottlerocket GPU pools too; a Trainium pool has no NVIDIA plugin to collide with.
        let pool = |types: &str| {
            format!(
                "{BASE}{OPERATOR}\n[karpenter_pool.p]\ncluster = \"${{eks_cluster.main.name}}\"\nnode_role = \"node\"\nsubnets = [\"subnet-1\"]\nsecurity_groups = [\"sg-1\"]\ngpu_limit = 16\ninstance_types = [{types}]\n"
            )
        };
        assert!(the(&pool("\"g6.xlarge\""), "`karpenter_pool.p` launches Bottlerocket GPU nodes").0);
        none(&pool("\"trn1.2xlarge\""), "launches Bottlerocket GPU nodes");
    }

    #[test]
    fn the_amis_driver_and_toolkit_are_not_installed_twice() {
        let text = format!("{BASE}{OPERATOR}driver = true\ntoolkit = true\n");
        assert!(the(&text, "sets driver = true").0);
        assert!(the(&text, "sets toolkit = true").0);
        none(&format!("{BASE}{OPERATOR}"), "sets driver");
    }

    #[test]
    fn one_dcgm_exporter_per_cluster() {
        let ex = "\n[dcgm_exporter.main]\ncluster = \"${eks_cluster.main.name}\"\n";
        assert!(the(&format!("{BASE}{OPERATOR}{ex}"), "both run NVIDIA's DCGM exporter").0);
        none(&format!("{BASE}{OPERATOR}dcgm_exporter = false\n{ex}"), "DCGM exporter");
    }

    #[test]
    fn two_operators_in_one_cluster_are_refused() {
        let text = format!("{BASE}{OPERATOR}\n[gpu_operator.again]\ncluster = \"${{eks_cluster.main.name}}\"\n");
        assert!(the(&text, "install the GPU Operator in one cluster").0);
    }

    #[test]
    fn the_cloudwatch_agent_needs_a_role() {
        let addon =
            "\n[eks_addon.cw]\ncluster = \"${eks_cluster.main.name}\"\naddon = \"amazon-cloudwatch-observability\"\n";
        let text = format!("{BASE}{OPERATOR}{addon}");
        let (error, _, help) = the(&text, "the CloudWatch agent has no role");
        assert!(!error && help.contains("amazon-cloudwatch/cloudwatch-agent"), "{help}");
        none(&format!("{text}service_account_role = \"arn:aws:iam::123456789012:role/cw\"\n"), "no role");
        let node = text.replace(
            "AmazonEKSWorkerNodePolicy\"]",
            "AmazonEKSWorkerNodePolicy\", \"arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy\"]",
        );
        none(&node, "no role");
        // The node role counts only in the add-on's cluster.
        let other = format!(
            "{text}\n[iam_role.other]\nservice = \"ec2.amazonaws.com\"\nmanaged_policies = [\"arn:aws:iam::aws:policy/CloudWatchAgentServerPolicy\"]\n\n[eks_cluster.other]\nversion = \"1.33\"\nrole = \"arn:aws:iam::123456789012:role/c\"\nsubnets = [\"subnet-1\", \"subnet-2\"]\nendpoint_public_access = false\nendpoint_private_access = true\n\n[node_group.other]\ncluster = \"${{eks_cluster.other.name}}\"\nnode_role = \"${{iam_role.other.arn}}\"\nsubnets = [\"subnet-1\"]\ninstance_types = [\"m6i.large\"]\n"
        );
        let (_, _, help) = the(&other, "the CloudWatch agent has no role");
        assert!(
            help.starts_with(
                "give the add-on a role (service_account_role, or an EKS Pod Identity association for cloudwatch-agent)"
            ),
            "{help}"
        );
    }

    #[test]
    fn a_pod_identity_entry_for_the_agent_is_its_role() {
        use crate::value::Value;
        let entry = |sa: &str| {
            Value::List(vec![Value::Table(std::collections::BTreeMap::from([
                ("service_account".to_string(), Value::str(sa)),
                ("role".to_string(), Value::str("arn:aws:iam::123456789012:role/cw")),
            ]))])
        };
        assert!(super::pod_identity_names_agent(&entry("cloudwatch-agent")));
        assert!(!super::pod_identity_names_agent(&entry("fluent-bit")));
        assert!(!super::pod_identity_names_agent(&Value::List(vec![])));
    }

    #[test]
    fn the_cloudwatch_addon_and_a_second_dcgm_exporter_are_reported() {
        let addon = "\n[eks_addon.cw]\ncluster = \"${eks_cluster.main.name}\"\naddon = \"amazon-cloudwatch-observability\"\nservice_account_role = \"arn:aws:iam::123456789012:role/cw\"\n";
        let (error, _, help) =
            the(&format!("{BASE}{addon}{OPERATOR}"), "both run NVIDIA's DCGM exporter on the cluster's GPU nodes");
        assert!(!error && help.starts_with("set dcgm_exporter = false in [gpu_operator.main]"), "{help}");
        none(&format!("{BASE}{addon}{OPERATOR}dcgm_exporter = false\n"), "DCGM exporter");
        // The shipped example keeps one exporter (the add-on's).
        none(include_str!("../../examples/gpu-operator.toml"), "DCGM exporter");
    }

    #[test]
    fn a_dcgm_exporter_needs_al2023_nvidia_nodes() {
        let ex = "\n[dcgm_exporter.main]\ncluster = \"${eks_cluster.main.name}\"\n";
        none(&format!("{BASE}{OPERATOR}dcgm_exporter = false\n{ex}"), "no AL2023 NVIDIA node group or pool");
        let bottlerocket = BASE
            .replace("ami_type       = \"AL2023_x86_64_NVIDIA\"", "ami_type       = \"BOTTLEROCKET_x86_64_NVIDIA\"")
            .replace("gpu_sharing    = { strategy = \"mig\", mig_profile = { \"h100.80gb\" = \"1g.10gb\" } }\n", "");
        let (error, _, help) = the(&format!("{bottlerocket}{ex}"), "no AL2023 NVIDIA node group or pool");
        assert!(error && help.contains("AL2023_x86_64_NVIDIA"), "{help}");
    }

    #[test]
    fn al2_gpu_groups_are_eks_nvidia_amis_next_to_an_operator() {
        let al2 = BASE
            .replace("ami_type       = \"AL2023_x86_64_NVIDIA\"", "ami_type       = \"AL2_x86_64_GPU\"")
            .replace("gpu_sharing    = { strategy = \"mig\", mig_profile = { \"h100.80gb\" = \"1g.10gb\" } }\n", "");
        let op = "\n[gpu_operator.main]\ncluster = \"${eks_cluster.main.name}\"\n";
        // AL2's GPU AMI ships the driver and toolkit too.
        assert!(the(&format!("{al2}{op}driver = true\n"), "sets driver = true").0);
        none(&format!("{al2}{op}"), "runs Bottlerocket");
    }

    #[test]
    fn task_governance_needs_a_hyperpod_cluster_on_its_eks_cluster() {
        let addon = "\n[eks_addon.tg]\ncluster = \"${eks_cluster.main.name}\"\naddon = \"amazon-sagemaker-hyperpod-taskgovernance\"\n";
        let (error, _, help) =
            the(&format!("{BASE}{OPERATOR}{addon}"), "HyperPod task governance needs a HyperPod cluster");
        assert!(error && help.contains("hyperpod_cluster"), "{help}");
    }

    #[test]
    fn hyperpod_nvidia_groups_keep_their_own_device_plugin() {
        let example = include_str!("../../examples/hybrid-hyperpod.toml");
        let with_operator = format!("{example}\n[gpu_operator.main]\ncluster = \"${{eks_cluster.main.name}}\"\n");
        let (error, message, help) = the(&with_operator, "group `train` (ml.p5.48xlarge)");
        assert!(error && message.contains("HyperPod's dependencies chart"), "{message}");
        assert!(
            help.contains("instance_groups.train: labels = { \"nvidia.com/gpu.deploy.operands\" = \"false\" }"),
            "{help}"
        );
        let labelled = with_operator.replace(
            "labels             = { \"gpustack.io/capacity\" = \"baseline\",",
            "labels             = { \"nvidia.com/gpu.deploy.operands\" = \"false\", \"gpustack.io/capacity\" = \"baseline\",",
        );
        assert_ne!(labelled, with_operator);
        none(&labelled, "group `train`");
        // The shipped example (task governance on its HyperPod cluster) has no such report.
        none(example, "HyperPod task governance needs");
    }
}
