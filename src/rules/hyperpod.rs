//! HyperPod on the stack's EKS cluster, checked before any call (`docs/aws-facts-hyperpod.md`):
//! the orchestrator allows API access entries, each group on a training plan runs the plan's
//! type within its count and window, the plan is sold for HyperPod, the cluster's names are
//! SageMaker's, EFA types get an EFA security group, and the plan says that the HyperPod
//! dependencies chart must be in the cluster first. The subnets' way out is `egress`.

use std::collections::BTreeMap;

use super::{lit, lit_str, referenced, same_object, span, subnet_resources, written};
use crate::resources::hyperpod_cluster::valid_name;
use crate::stack::{Diagnostic, Expr, Resource, Stack};
use crate::value::Value;

pub(crate) fn clusters(stack: &Stack) -> impl Iterator<Item = &Resource> {
    stack.resources.iter().filter(|r| r.kind.name() == "hyperpod_cluster" && r.values_ok)
}

/// A cluster's instance groups, by name, each as its table of expressions.
pub(crate) fn groups(r: &Resource) -> BTreeMap<String, (Expr, BTreeMap<String, Expr>)> {
    r.attrs
        .get("instance_groups")
        .map(Expr::table_entries)
        .unwrap_or_default()
        .into_iter()
        .map(|(name, g)| {
            let fields = g.table_entries();
            (name, (g, fields))
        })
        .collect()
}

/// The HyperPod clusters with a group on the training plan at `plan`.
pub(crate) fn clusters_on_plan<'a>(stack: &'a Stack, plan: &str) -> Vec<&'a Resource> {
    clusters(stack)
        .filter(|c| {
            groups(c)
                .values()
                .any(|(_, g)| g.get("training_plan").and_then(|e| e.as_single_ref()).is_some_and(|x| x.address == plan))
        })
        .collect()
}

fn group_lit(g: &BTreeMap<String, Expr>, k: &str) -> Option<Value> {
    g.get(k).map(|e| e.resolve(&|_| Value::Unknown)).filter(Value::is_known)
}

pub(super) fn offline(stack: &Stack) -> Vec<Diagnostic> {
    let mut d = vec![];
    for c in clusters(stack) {
        orchestrator(stack, c, &mut d);
        default_name(stack, c, &mut d);
        efa_security_group(stack, c, &mut d);
        network(stack, c, &mut d);
        plan_zone(stack, c, &mut d);
        for (name, (g, fields)) in groups(c) {
            on_plan(stack, c, &name, &g, &fields, &mut d);
            health_checks(c, &name, &fields, &mut d);
            execution_role(stack, c, &name, &fields, &mut d);
            lifecycle_bucket(c, &name, &fields, &mut d);
        }
    }
    d
}

/// HyperPod adds its access entries to the EKS cluster, which needs API authentication
/// (SageMaker DG `sagemaker-hyperpod-eks-prerequisites`).
fn orchestrator(stack: &Stack, c: &Resource, d: &mut Vec<Diagnostic>) {
    let Some(eks) = referenced(stack, c, "eks_cluster", "eks_cluster") else {
        if let Some(e) = c.attrs.get("eks_cluster")
            && e.as_single_ref().is_none()
            && let Some(Value::Str(v)) = e.as_literal()
            && !v.starts_with("arn:")
        {
            d.push(
                Diagnostic::error(
                    format!("`{}`: `eks_cluster` must be the EKS cluster's ARN, not \"{v}\"", c.address),
                    e.span.clone(),
                )
                .help("write eks_cluster = \"${eks_cluster.NAME.arn}\""),
            );
        }
        return;
    };
    if let Some(e) = c.attrs.get("eks_cluster").and_then(|e| e.as_single_ref())
        && e.output != "arn"
    {
        d.push(
            Diagnostic::error(
                format!("`{}`: `eks_cluster` takes the cluster's ARN, not its {}", c.address, e.output),
                span(c, "eks_cluster"),
            )
            .help(format!("write eks_cluster = \"${{{}.arn}}\"", eks.address)),
        );
    }
    kubernetes_version(stack, c, eks, d);
    let mode = lit_str(eks, "authentication_mode").unwrap_or_else(|| "API".into());
    if mode == "CONFIG_MAP" {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}` runs on `{}`, whose authentication_mode is CONFIG_MAP: HyperPod needs EKS access entries",
                    c.address, eks.address
                ),
                span(eks, "authentication_mode"),
            )
            .help("set authentication_mode = \"API\" (or \"API_AND_CONFIG_MAP\") on the EKS cluster"),
        );
    }
}

/// Kubernetes versions HyperPod runs on: "SageMaker HyperPod supports Kubernetes versions
/// 1.30, 1.31, 1.32, 1.33, 1.34, and 1.35" (SageMaker DG `sagemaker-hyperpod-eks-prerequisites`).
const KUBERNETES: &[&str] = &["1.30", "1.31", "1.32", "1.33", "1.34", "1.35"];
/// The oldest VPC CNI add-on HyperPod works with ("version 1.18.3 or later", same page).
const VPC_CNI_MIN: (u32, u32, u32) = (1, 18, 3);

/// The orchestrator's Kubernetes version and VPC CNI add-on are ones HyperPod supports:
/// found before the plan buys a training plan that `CreateCluster` would then refuse to use.
fn kubernetes_version(stack: &Stack, c: &Resource, eks: &Resource, d: &mut Vec<Diagnostic>) {
    if let Some(v) = lit_str(eks, "version")
        && !KUBERNETES.contains(&v.as_str())
    {
        d.push(
            Diagnostic::error(
                format!("`{}` runs on `{}`, Kubernetes {v}, which HyperPod does not support", c.address, eks.address),
                span(eks, "version"),
            )
            .help(format!("HyperPod supports Kubernetes {}", KUBERNETES.join(", "))),
        );
    }
    let cni = stack.resources.iter().filter(|a| a.kind.name() == "eks_addon").find(|a| {
        lit_str(a, "addon").as_deref() == Some("vpc-cni")
            && a.attrs.get("cluster").and_then(|e| e.as_single_ref()).is_some_and(|x| x.address == eks.address)
    });
    let Some((addon, v)) = cni.and_then(|a| Some((a, lit_str(a, "version")?))) else { return };
    let parts: Vec<u32> = v.trim_start_matches('v').split(['.', '-']).take(3).map_while(|p| p.parse().ok()).collect();
    if let [a, b, p] = parts[..]
        && (a, b, p) < VPC_CNI_MIN
    {
        d.push(
            Diagnostic::error(
                format!("`{}` runs on `{}`, whose VPC CNI add-on is {v}; HyperPod needs 1.18.3 or later", c.address, eks.address),
                span(addon, "version"),
            )
            .help("raise the vpc-cni add-on's version to v1.18.3 or later, or leave version out for the cluster's default"),
        );
    }
}

/// HyperPod runs in private subnets of the EKS cluster's VPC ("The subnets must be
/// private"; "deployed within the same VPC as your Amazon EKS cluster": SageMaker DG
/// `sagemaker-hyperpod-eks-operate-console-ui-create-cluster`, `…-prerequisites`).
fn network(stack: &Stack, c: &Resource, d: &mut Vec<Diagnostic>) {
    let subnets = subnet_resources(stack, c);
    for sn in &subnets {
        if lit(sn, "public").and_then(|v| v.as_bool()) == Some(true) {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}` runs in `{}`, a public subnet: HyperPod clusters need private subnets",
                        c.address, sn.address
                    ),
                    span(c, "subnets"),
                )
                .help("use private subnets with a NAT gateway (or an S3 gateway endpoint and the node endpoints)"),
            );
        }
    }
    let Some(eks) = referenced(stack, c, "eks_cluster", "eks_cluster") else { return };
    let vpc_of = |sn: &Resource| sn.attrs.get("vpc").and_then(|e| e.as_single_ref()).map(|x| x.address.clone());
    let eks_vpcs: std::collections::BTreeSet<String> =
        subnet_resources(stack, eks).iter().filter_map(|sn| vpc_of(sn)).collect();
    for sn in &subnets {
        if let Some(v) = vpc_of(sn)
            && !eks_vpcs.is_empty()
            && !eks_vpcs.contains(&v)
        {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}` runs in `{}` of `{v}`, but its EKS cluster `{}` is in {}: HyperPod must be in the EKS cluster's VPC",
                        c.address,
                        sn.address,
                        eks.address,
                        eks_vpcs.iter().cloned().collect::<Vec<_>>().join(", ")
                    ),
                    span(c, "subnets"),
                )
                .help("pick subnets of the EKS cluster's VPC"),
            );
        }
    }
}

/// HyperPod makes the EKS access entries of its execution roles itself, and EKS allows one
/// entry per principal; HyperPod nodes need a role of their own, not an EKS node role
/// (SageMaker DG `sagemaker-hyperpod-eks-prerequisites`: "You must use distinct IAM roles").
fn execution_role(stack: &Stack, c: &Resource, name: &str, fields: &BTreeMap<String, Expr>, d: &mut Vec<Diagnostic>) {
    let Some(role) = fields.get("execution_role") else { return };
    for r in stack.resources.iter().filter(|r| r.values_ok) {
        let (attr, what) = match r.kind.name() {
            "eks_access_entry" => {
                ("principal_arn", "an access entry for it, which HyperPod makes itself (EKS allows one per principal)")
            }
            "node_group" | "karpenter_pool" => ("node_role", "it as its node role; HyperPod needs a role of its own"),
            _ => continue,
        };
        if same_object(Some(role), r.attrs.get(attr)) {
            d.push(
                Diagnostic::error(
                    format!("`{}`: instance group {name}'s execution role is also used by `{}`, which has {what}", c.address, r.address),
                    role.span.clone(),
                )
                .help(if r.kind.name() == "eks_access_entry" {
                    format!("remove `{}`", r.address)
                } else {
                    "give the HyperPod group its own role, trusted by sagemaker.amazonaws.com, with AmazonSageMakerClusterInstanceRolePolicy".to_string()
                }),
            );
        }
    }
}

/// `AmazonSageMakerClusterInstanceRolePolicy` reads lifecycle scripts only from buckets
/// named `sagemaker-*` of the same account (`ClusterLifeCycleConfig.SourceS3Uri`: "Make sure
/// that the S3 bucket path starts with s3://sagemaker-").
fn lifecycle_bucket(c: &Resource, name: &str, fields: &BTreeMap<String, Expr>, d: &mut Vec<Diagnostic>) {
    let Some(lc) = fields.get("lifecycle") else { return };
    let lc = lc.table_entries();
    let Some(e) = lc.get("source_s3_uri") else { return };
    if let Some(Value::Str(u)) = e.as_literal()
        && u.starts_with("s3://")
        && !u.starts_with("s3://sagemaker-")
    {
        d.push(
            Diagnostic::warning(
                format!("`{}`: instance group {name} reads its lifecycle scripts from {u}, a bucket not named sagemaker-*", c.address),
                e.span.clone(),
            )
            .help("AmazonSageMakerClusterInstanceRolePolicy only reads s3://sagemaker-* buckets: rename the bucket, or grant the execution role s3:GetObject and s3:ListBucket on it"),
        );
    }
}

/// The default name (`<stack>-<resource>`) must be a HyperPod name too.
fn default_name(stack: &Stack, c: &Resource, d: &mut Vec<Diagnostic>) {
    if written(c, "name") {
        return;
    }
    let name = stack.default_physical_name(c);
    if !valid_name(&name) {
        d.push(
            Diagnostic::error(
                format!("`{}` would be named \"{name}\", which is not a HyperPod cluster name", c.address),
                c.span.clone(),
            )
            .help("set `name` to 1 to 63 letters, digits and hyphens (no underscores)"),
        );
    }
}

/// EFA between HyperPod instances needs a security group that allows all traffic to and
/// from itself (SageMaker DG `sagemaker-hyperpod-eks-prerequisites`; EC2 UG `efa-start`).
fn efa_security_group(stack: &Stack, c: &Resource, d: &mut Vec<Diagnostic>) {
    let efa_types: Vec<String> = groups(c)
        .values()
        .filter_map(|(_, g)| group_lit(g, "instance_type")?.as_str().map(str::to_string))
        .filter(|t| needs_efa_group(t))
        .collect();
    if efa_types.is_empty() {
        return;
    }
    // Groups from outside the stack cannot be checked offline.
    let Some(stack_groups) = super::stack_security_groups(stack, c) else { return };
    if !stack_groups.iter().any(|g| lit(g, "efa").and_then(|v| v.as_bool()) == Some(true)) {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}` runs {} with EFA, but none of its security groups allows EFA traffic",
                    c.address,
                    efa_types.join(", ")
                ),
                span(c, "security_groups"),
            )
            .help("add a security group with efa = true (all traffic to and from itself) to security_groups"),
        );
    }
}

/// The ml types whose HyperPod instances use EFA: P and Trn (EC2 UG `efa-acc-inst-types`).
pub(crate) fn is_efa_type(t: &str) -> bool {
    HYPERPOD_EFA_TYPES.contains(&t) || HYPERPOD_EFA_TYPES.contains(&format!("ml.{t}").as_str())
}

/// An accelerated EFA type (GPU or Trainium): its group needs EFA traffic allowed between
/// its instances, or collective communication and HyperPod's connectivity checks fail. The
/// chart's list also names CPU types (m7i, r7i, i3en, c5n) whose EFA is optional.
pub(crate) fn needs_efa_group(t: &str) -> bool {
    let ec2 = t.strip_prefix("ml.").unwrap_or(t);
    is_efa_type(t) && (ec2.starts_with('p') || ec2.starts_with('g') || ec2.starts_with("trn"))
}

/// The types HyperPod's dependencies chart runs its EFA device plugin on: aws/sagemaker-hyperpod-cli
/// `helm_chart/HyperPodHelmChart/values.yaml`, `aws-efa-k8s-device-plugin.supportedInstanceLabels`
/// at the pinned commit (`manifests::HYPERPOD_CHART_COMMIT`; `docs/aws-facts-hyperpod.md` §9).
pub(crate) const HYPERPOD_EFA_TYPES: &[&str] = &[
    "ml.c5n.9xlarge",
    "ml.c5n.18xlarge",
    "ml.g5.8xlarge",
    "ml.g5.12xlarge",
    "ml.g5.16xlarge",
    "ml.g5.24xlarge",
    "ml.g5.48xlarge",
    "ml.g6.8xlarge",
    "ml.g6.12xlarge",
    "ml.g6.16xlarge",
    "ml.g6.24xlarge",
    "ml.g6.48xlarge",
    "ml.g6e.8xlarge",
    "ml.g6e.12xlarge",
    "ml.g6e.16xlarge",
    "ml.g6e.24xlarge",
    "ml.g6e.48xlarge",
    "ml.g7e.8xlarge",
    "ml.g7e.12xlarge",
    "ml.g7e.24xlarge",
    "ml.g7e.48xlarge",
    "ml.gr6.8xlarge",
    "ml.i3en.12xlarge",
    "ml.i3en.24xlarge",
    "ml.m7i.48xlarge",
    "ml.p4d.24xlarge",
    "ml.p4de.24xlarge",
    "ml.p5.4xlarge",
    "ml.p5.48xlarge",
    "ml.p5e.48xlarge",
    "ml.p5en.48xlarge",
    "ml.p6-b200.48xlarge",
    "ml.p6-b300.48xlarge",
    "ml.p6e-gb200.36xlarge",
    "ml.r7i.48xlarge",
    "ml.trn1.32xlarge",
    "ml.trn1n.32xlarge",
    "ml.trn2.3xlarge",
    "ml.trn2.48xlarge",
];

/// A group on a training plan of the stack runs the plan's type, within its count, on a
/// plan sold for HyperPod whose window has not passed.
fn on_plan(
    stack: &Stack,
    c: &Resource,
    name: &str,
    g: &Expr,
    fields: &BTreeMap<String, Expr>,
    d: &mut Vec<Diagnostic>,
) {
    let Some(plan_ref) = fields.get("training_plan") else { return };
    let at = |k: &str| fields.get(k).and_then(|e| e.span.clone()).or(g.span.clone());
    let Some(x) = plan_ref.as_single_ref() else { return };
    let Some(plan) = stack.get(&x.address).filter(|p| p.kind.name() == "training_plan") else {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}`: instance group {name}'s training_plan refers to `{}`, which is not a training_plan",
                    c.address, x.address
                ),
                plan_ref.span.clone(),
            )
            .help("write training_plan = \"${training_plan.NAME.arn}\""),
        );
        return;
    };
    if x.output != "arn" {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}`: instance group {name}'s training_plan takes the plan's ARN, not its {}",
                    c.address, x.output
                ),
                plan_ref.span.clone(),
            )
            .help(format!("write training_plan = \"${{{}.arn}}\"", plan.address)),
        );
    }
    let group_type = group_lit(fields, "instance_type").and_then(|v| v.as_str().map(str::to_string));
    let plan_type = lit_str(plan, "instance_type");
    if let (Some(gt), Some(pt)) = (&group_type, &plan_type)
        && gt != pt
    {
        d.push(
            Diagnostic::error(
                format!("`{}`: instance group {name} runs {gt}, but `{}` reserves {pt}", c.address, plan.address),
                at("instance_type"),
            )
            .help(format!("a group runs on a plan of its own type: instance_type = \"{pt}\"")),
        );
    }
    let count = group_lit(fields, "instance_count").and_then(|v| v.as_int());
    let reserved = lit(plan, "instance_count").and_then(|v| v.as_int());
    // Every group of the stack on this plan shares its instances.
    let on_this: i64 = clusters(stack)
        .flat_map(|k| groups(k).into_values())
        .filter(|(_, f)| {
            f.get("training_plan").and_then(|e| e.as_single_ref()).is_some_and(|y| y.address == plan.address)
        })
        .filter_map(|(_, f)| group_lit(&f, "instance_count").and_then(|v| v.as_int()))
        .sum();
    if let (Some(n), Some(r)) = (count, reserved)
        && on_this > r
    {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}`: instance group {name} asks for {n} instance{} on `{}`, which reserves {r}{}",
                    c.address,
                    crate::stack::diag::plural(n as usize),
                    plan.address,
                    if on_this > n { format!(" (its groups ask for {on_this} in all)") } else { String::new() }
                ),
                at("instance_count"),
            )
            .help(format!("lower instance_count to at most {r}, or reserve more with a larger training plan")),
        );
    }
    if let Some(t) = lit_str(plan, "target")
        && t != "hyperpod-cluster"
    {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}`: instance group {name} runs on `{}`, which is bought for {t}, not HyperPod",
                    c.address, plan.address
                ),
                span(plan, "target"),
            )
            .help("set target = \"hyperpod-cluster\" on the training plan"),
        );
    }
    // The plan's window: it must still be able to start (or be running) now.
    let time = |k: &str| lit_str(plan, k).and_then(|v| v.parse::<jiff::Timestamp>().ok());
    if let (Some(before), Some(hours)) = (time("start_before"), lit(plan, "duration_hours").and_then(|v| v.as_int()))
        && before + jiff::SignedDuration::from_hours(hours) < jiff::Timestamp::now()
    {
        // A warning: an ended plan must not stop a destroy.
        d.push(
            Diagnostic::warning(
                format!(
                    "`{}`: instance group {name} runs on `{}`, whose window ended (it starts by {} and lasts {hours} h)",
                    c.address,
                    plan.address,
                    before
                ),
                span(plan, "start_before"),
            )
            // A bought plan cannot move (it is immutable): the way forward is on the group.
            .help(format!(
                "a bought plan cannot change: scale instance group {name} to instance_count = 0, or remove its training_plan to run On-Demand (billed per hour), and add a new training_plan for more reserved capacity"
            )),
        );
    }
}

/// The training plans a cluster's groups run on (stack resources, each once).
pub(crate) fn plans_of<'a>(stack: &'a Stack, c: &Resource) -> Vec<&'a Resource> {
    let mut out: Vec<&Resource> = vec![];
    for (_, g) in groups(c).into_values() {
        let plan = g.get("training_plan").and_then(|e| e.as_single_ref()).and_then(|x| stack.get(&x.address));
        if let Some(p) = plan.filter(|p| p.kind.name() == "training_plan")
            && !out.iter().any(|o| o.address == p.address)
        {
            out.push(p);
        }
    }
    out
}

/// A cluster on a training plan runs in the plan's zone: "when `VpcConfig` is provided,
/// HyperPod selects a subnet from the provided `VpcConfig`'s subnet list. All instance groups
/// inherit the subnet's AZ" (SageMaker DG `sagemaker-hyperpod-prerequisites`, multiple AZs),
/// and "Make sure your cluster's configuration matches the Availability Zone (AZ) specified
/// in the training plan" (DG `training-plan-utilization-for-hyperpod`). So its subnets are in
/// one zone, and every plan it uses is pinned (if at all) to that zone.
fn plan_zone(stack: &Stack, c: &Resource, d: &mut Vec<Diagnostic>) {
    let plans = plans_of(stack, c);
    let Some(first) = plans.first() else { return };
    let zones = super::subnet_zones(stack, c);
    if zones.len() > 1 {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}` runs on `{}`, but its subnets are in {}: HyperPod picks one of them and every group inherits its zone, which may not be the plan's",
                    c.address,
                    first.address,
                    zones.join(" and ")
                ),
                span(c, "subnets"),
            )
            .help("list subnets of one zone only, the zone the training plan is bought in"),
        );
    }
    let pinned: Vec<(&Resource, String)> =
        plans.iter().filter_map(|p| Some((*p, lit_str(p, "availability_zone")?))).collect();
    for (p, z) in &pinned {
        if zones.len() == 1 && zones[0] != *z {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}` runs on `{}`, pinned to {z}, but its subnets are in {}",
                        c.address, p.address, zones[0]
                    ),
                    span(p, "availability_zone"),
                )
                .help(format!("set availability_zone = \"{}\" on the plan, or use subnets in {z}", zones[0])),
            );
        }
    }
    if let Some((p, z)) = pinned.iter().find(|(_, z)| *z != pinned[0].1) {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}` runs on `{}` in {} and on `{}` in {z}: all of a cluster's groups run in one zone",
                    c.address, pinned[0].0.address, pinned[0].1, p.address
                ),
                span(p, "availability_zone"),
            )
            .help("pin every training plan of the cluster to the same availability_zone"),
        );
    }
}

/// Deep health checks stress GPUs and Trainium chips and their EFA links: only accelerated
/// types run them (SageMaker DG `sagemaker-hyperpod-eks-resiliency-deep-health-checks`).
fn health_checks(c: &Resource, name: &str, fields: &BTreeMap<String, Expr>, d: &mut Vec<Diagnostic>) {
    let checks = group_lit(fields, "deep_health_checks");
    if checks.as_ref().and_then(Value::as_list).is_none_or(|l| l.is_empty()) {
        return;
    }
    let Some(t) = group_lit(fields, "instance_type").and_then(|v| v.as_str().map(str::to_string)) else { return };
    let ec2 = t.strip_prefix("ml.").unwrap_or(&t);
    if !(ec2.starts_with('p') || ec2.starts_with('g') || ec2.starts_with("trn")) {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}`: instance group {name} runs {t}, which has no GPU or Trainium chip for deep health checks",
                    c.address
                ),
                fields.get("deep_health_checks").and_then(|e| e.span.clone()).or(c.span.clone()),
            )
            .help("remove deep_health_checks from this group; they run on P, G and Trn types"),
        );
    }
}

/// The note a plan shows beside a HyperPod cluster: the dependencies chart goes first.
pub(crate) fn chart_note(_c: &Resource) -> String {
    "HyperPod needs its dependencies Helm chart in the EKS cluster before the cluster is created: `gpustack manifests STACK --out DIR`, then install it with DIR/hyperpod-dependencies/values.yaml (the file says how)".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn efa_types_are_the_hyperpod_charts() {
        for t in
            ["ml.p5.48xlarge", "ml.p5.4xlarge", "ml.g5.8xlarge", "ml.g6e.12xlarge", "ml.gr6.8xlarge", "p5.48xlarge"]
        {
            assert!(is_efa_type(t) && needs_efa_group(t), "{t}");
        }
        assert!(is_efa_type("ml.m7i.48xlarge") && !needs_efa_group("ml.m7i.48xlarge"), "EFA optional on CPU types");
        for t in ["ml.g5.4xlarge", "ml.m5.xlarge", "ml.p3.16xlarge"] {
            assert!(!is_efa_type(t), "{t}");
        }
    }
}
