//! Access to the cluster and the Karpenter controller's AWS side (issue 12, aws-facts §8–§12):
//! access entries need a cluster whose authentication mode includes the API and a principal
//! EKS has not already entered (a managed node group's role); the controller needs the
//! `eks-pod-identity-agent` add-on, Karpenter 1.6 or later, an EC2 node role, and names
//! within AWS's limits.

use super::{lit_str, node_groups, referenced, span, target, written};
use crate::resources::karpenter_controller::{self as controller, Names, QUEUE_NAME_MAX, ROLE_NAME_MAX, RULE_NAME_MAX};
use crate::stack::{Diagnostic, Resource, Stack};

pub fn access(stack: &Stack) -> Vec<Diagnostic> {
    let mut d = vec![];
    for r in of_kind(stack, "eks_access_entry") {
        entry(stack, r, &mut d);
    }
    for r in of_kind(stack, "karpenter_controller") {
        karpenter(stack, r, &mut d);
    }
    d
}

fn of_kind<'a>(stack: &'a Stack, kind: &'a str) -> impl Iterator<Item = &'a Resource> {
    stack.resources.iter().filter(move |r| r.kind.name() == kind && r.values_ok)
}

fn entry(stack: &Stack, r: &Resource, d: &mut Vec<Diagnostic>) {
    let cluster = referenced(stack, r, "cluster", "eks_cluster");
    if let Some(c) = cluster {
        let mode = lit_str(c, "authentication_mode").unwrap_or_else(|| "API".into());
        if mode == "CONFIG_MAP" {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}` needs a cluster whose authentication mode includes the API, but `{}` is CONFIG_MAP",
                        r.address, c.address
                    ),
                    span(r, "cluster"),
                )
                .help(format!(
                    "set authentication_mode = \"API\" (or \"API_AND_CONFIG_MAP\") on `{}`; EKS refuses access entries on a CONFIG_MAP cluster, and the mode only moves forward",
                    c.address
                )),
            );
        }
        // EKS enters a managed node group's role itself (EC2_LINUX): a second entry is a 409.
        let principal = r.attrs.get("principal_arn");
        if let Some(ng) = node_groups(stack).find(|ng| {
            target(stack, ng, "cluster").is_some_and(|x| x.address == c.address)
                && super::same_object(ng.attrs.get("node_role"), principal)
        }) {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}` enters the node role of `{}`, a managed node group of `{}`: EKS makes that EC2_LINUX entry itself, so creating it fails (409 ResourceInUseException)",
                        r.address, ng.address, c.address
                    ),
                    span(r, "principal_arn"),
                )
                .help("leave this entry out of the stack, or give Karpenter's nodes a role of their own (an iam_role no node group uses)"),
            );
        }
    }
    // Every node type (EC2_LINUX, EC2_WINDOWS, FARGATE_LINUX, HYBRID_LINUX) refuses policies.
    if let Some(kind) = lit_str(r, "type").filter(|t| t != "STANDARD")
        && written(r, "policies")
    {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}` is {kind}, which takes no access policies (EKS answers only STANDARD entries)",
                    r.address
                ),
                span(r, "policies"),
            )
            .help(format!("remove `policies` ({kind} nodes get system:nodes), or make the entry type = \"STANDARD\"")),
        );
    }
}

fn karpenter(stack: &Stack, r: &Resource, d: &mut Vec<Diagnostic>) {
    if let Some(c) = referenced(stack, r, "cluster", "eks_cluster")
        && !super::workload_iam::has_pod_identity_agent(stack, &c.address)
    {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}` gives the controller its role through EKS Pod Identity, but `{}` has no eks-pod-identity-agent add-on: the controller would get no credentials",
                    r.address, c.address
                ),
                span(r, "cluster"),
            )
            .help(format!(
                "add [eks_addon.pod_identity] with cluster = \"${{{}.name}}\" and addon = \"eks-pod-identity-agent\"",
                c.address
            )),
        );
    }
    if let Some(v) = lit_str(r, "version") {
        match controller::version(&v) {
            None => d.push(
                Diagnostic::error(
                    format!("`{}`: version \"{v}\" is not a Karpenter version", r.address),
                    span(r, "version"),
                )
                .help("write the release as MAJOR.MINOR.PATCH without a leading v, e.g. version = \"1.6.8\""),
            ),
            // Reserved capacity (ODCRs and Capacity Blocks alike) is on by default from 1.6: the
            // ReservedCapacity feature gate went beta in v1.6.x, and Capacity Blocks came in
            // v1.6 (Karpenter docs v1.14 `reference/settings.md`, `tasks/odcrs.md`).
            Some(ver) if ver < (1, 6) => d.push(
                Diagnostic::error(
                    format!("`{}`: Karpenter {v} is older than 1.6, the oldest gpustack supports", r.address),
                    span(r, "version"),
                )
                .help("set version = \"1.6.8\" or later: gpustack writes the controller policies of 1.6 onwards, the first release with reserved capacity (ODCRs and Capacity Blocks) on by default"),
            ),
            Some(ver) if ver > controller::policy::NEWEST_VERIFIED => d.push(
                Diagnostic::warning(
                    format!(
                        "`{}`: Karpenter {v} is newer than {}.{}, the newest gpustack has been checked against: its controller policy is {}.{}'s, and new fields may be missing",
                        r.address,
                        controller::policy::NEWEST_VERIFIED.0,
                        controller::policy::NEWEST_VERIFIED.1,
                        controller::policy::NEWEST_VERIFIED.0,
                        controller::policy::NEWEST_VERIFIED.1,
                    ),
                    span(r, "version"),
                )
                .help("compare the release's CloudFormation reference with `gpustack policy`, or pin a version up to 1.14"),
            ),
            Some(_) => {}
        }
    }
    node_role(stack, r, d);
    names(stack, r, d);
}

/// The node role Karpenter passes to EC2: an iam_role of the stack trusted by EC2, or an ARN.
fn node_role(stack: &Stack, r: &Resource, d: &mut Vec<Diagnostic>) {
    let Some(e) = r.attrs.get("node_role") else { return };
    let problem = match (e.as_single_ref(), e.as_literal().and_then(|v| v.as_str())) {
        (Some(x), _) => match stack.get(&x.address) {
            Some(role) if role.kind.name() == "iam_role" && x.output == "arn" => match lit_str(role, "service") {
                Some(svc) if svc != "ec2.amazonaws.com" => {
                    Some(format!("`{}` is trusted by {svc}, not by EC2, so nodes cannot use it", role.address))
                }
                _ => None,
            },
            _ => Some(format!("`{}.{}` is not the ARN of an iam_role", x.address, x.output)),
        },
        (None, Some(arn)) if arn.starts_with("arn:") && arn.contains(":role/") => None,
        (None, Some(other)) => Some(format!("\"{other}\" is not an IAM role ARN")),
        (None, None) => None,
    };
    if let Some(p) = problem {
        d.push(
            Diagnostic::error(format!("`{}`: node_role {p}", r.address), e.span.clone()).help(
                "refer to a node role of the stack, node_role = \"${iam_role.NAME.arn}\" with service = \"ec2.amazonaws.com\", or write its ARN",
            ),
        );
    }
}

/// The role, queue and rule names within IAM's, SQS's and EventBridge's limits, and the role
/// name not taken by an iam_role of the stack.
fn names(stack: &Stack, r: &Resource, d: &mut Vec<Diagnostic>) {
    let n = Names::of(&stack.name, &r.name);
    for (what, name, max) in [
        ("IAM role", n.role.clone(), ROLE_NAME_MAX),
        ("SQS queue", n.queue.clone(), QUEUE_NAME_MAX),
        ("EventBridge rule", n.longest_rule(), RULE_NAME_MAX),
    ] {
        if name.len() > max {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}`: its {what} name would be {} characters ({name}), over the {max} AWS allows",
                        r.address,
                        name.len()
                    ),
                    r.span.clone(),
                )
                .help(format!(
                    "shorten the resource name `{}` (or the stack name) by {}",
                    r.name,
                    name.len() - max
                )),
            );
        }
    }
    for role in of_kind(stack, "iam_role") {
        let physical = lit_str(role, "name").unwrap_or_else(|| format!("{}-{}", stack.name, role.name));
        if physical == n.role {
            d.push(
                Diagnostic::error(
                    format!("`{}` and `{}` would both make the IAM role {physical}", r.address, role.address),
                    r.span.clone(),
                )
                .help("IAM role names are unique in an account: rename one of the two resources"),
            );
        }
    }
}
