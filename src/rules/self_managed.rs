//! Self-managed node groups (Auto Scaling groups that join a cluster themselves): their
//! template must be written to join the same cluster, their node role needs an `EC2_LINUX`
//! access entry (EKS UG `creating-access-entries`: nodes outside managed node groups need one,
//! as Karpenter's do), and the template's instance profile should hold that role.

use super::{referenced, same_object, span};
use crate::stack::{Diagnostic, Resource, Stack};

pub(crate) fn groups(stack: &Stack) -> impl Iterator<Item = &Resource> {
    stack.resources.iter().filter(|r| r.kind.name() == "self_managed_node_group" && r.values_ok)
}

pub fn offline(stack: &Stack) -> Vec<Diagnostic> {
    let mut d = vec![];
    for g in groups(stack) {
        template(stack, g, &mut d);
        node_role_entered(stack, g, &mut d);
    }
    d
}

fn template(stack: &Stack, g: &Resource, d: &mut Vec<Diagnostic>) {
    let Some(lt) = referenced(stack, g, "launch_template", "launch_template") else { return };
    if !lt.attrs.contains_key("cluster") {
        d.push(
            Diagnostic::error(
                format!("`{}` uses `{}`, which does not join a cluster: self-managed nodes get no bootstrap from EKS", g.address, lt.address),
                span(g, "launch_template"),
            )
            .help(format!(
                "in [{}] set cluster = \"${{eks_cluster.NAME.name}}\", ami_type (e.g. \"AL2023_x86_64_NVIDIA\") and instance_profile = \"${{iam_role.NODE.instance_profile}}\"",
                lt.address
            )),
        );
        return;
    }
    // The EFA interfaces of a template are laid out for its one instance_type (DESIGN.md §2):
    // overrides with other types would launch them with the wrong interface count.
    if lt.attrs.contains_key("efa") && super::written(g, "instance_types") {
        d.push(
            Diagnostic::error(
                format!("`{}` lists instance_types, but its template `{}` lays out EFA interfaces for its own instance_type", g.address, lt.address),
                span(g, "instance_types"),
            )
            .help("remove instance_types (the template's type is used), or use one template per EFA type"),
        );
    }
    // Without overrides the group launches the template's own type: with none there, Auto
    // Scaling has nothing to launch (LaunchTemplateOverrides, botocore autoscaling 2011-01-01:
    // the overrides "override the instance type that is specified in the launch template";
    // without them the template's type is the only one).
    let listed = super::written(g, "instance_types");
    if !listed && !lt.attrs.contains_key("instance_type") {
        d.push(
            Diagnostic::error(
                format!("`{}` lists no instance_types and its template `{}` has no instance_type: Auto Scaling has no type to launch", g.address, lt.address),
                span(g, "launch_template"),
            )
            .help(format!("set instance_types = [\"g6e.2xlarge\", …] on the group, or instance_type in [{}]", lt.address)),
        );
    }
    // A Capacity Block template (InstanceMarketOptions capacity-block) in a mixed instances
    // policy: Auto Scaling refuses launch templates with market options there (a Capacity Block
    // is one reserved type, not Spot/On-Demand diversification). Source: review r19-lt M5; the
    // Auto Scaling UG wording ("Use Capacity Blocks") could not be read here — not verified.
    if super::lit_str(lt, "market").as_deref() == Some("capacity-block")
        && (listed || g.attrs.contains_key("mixed_instances"))
    {
        d.push(
            Diagnostic::error(
                format!("`{}` uses the Capacity Block template `{}` with instance_types or mixed_instances", g.address, lt.address),
                span(g, if listed { "instance_types" } else { "mixed_instances" }),
            )
            .help("a Capacity Block runs its one reserved type On-Demand: remove instance_types and mixed_instances from the group"),
        );
    }
    if !same_object(lt.attrs.get("cluster"), g.attrs.get("cluster")) {
        d.push(
            Diagnostic::error(
                format!("`{}` is in one cluster, but its template `{}` joins another", g.address, lt.address),
                span(g, "cluster"),
            )
            .help("name the same eks_cluster in the group's and the template's `cluster`"),
        );
    }
    if let (Some(p), Some(role)) = (lt.attrs.get("instance_profile"), g.attrs.get("node_role"))
        && p.as_single_ref().is_some()
        && role.as_single_ref().is_some()
        && !same_object(Some(p), Some(role))
    {
        d.push(
            Diagnostic::warning(
                format!("`{}`: node_role is not the role of its template's instance_profile", g.address),
                span(g, "node_role"),
            )
            .help("the nodes run as the instance profile's role; name that role in node_role, which the access entry must enter"),
        );
    }
}

fn node_role_entered(stack: &Stack, g: &Resource, d: &mut Vec<Diagnostic>) {
    let cluster = g.attrs.get("cluster");
    let same_cluster = |r: &Resource| same_object(r.attrs.get("cluster"), cluster);
    let role = g.attrs.get("node_role");
    let entered = stack.resources.iter().any(|r| {
        r.kind.name() == "eks_access_entry"
            && same_cluster(r)
            && same_object(r.attrs.get("principal_arn"), role)
            && super::lit_str(r, "type").as_deref() == Some("EC2_LINUX")
    });
    // A managed node group of the cluster on the same role: EKS entered it already.
    let managed = super::node_groups(stack).any(|ng| same_cluster(ng) && same_object(ng.attrs.get("node_role"), role));
    if !entered && !managed {
        d.push(
            Diagnostic::error(
                format!("`{}`: its node role has no EC2_LINUX access entry, so its nodes could not join the cluster", g.address),
                span(g, "node_role"),
            )
            .help("add [eks_access_entry.NAME] with the same cluster, principal_arn = the role's ARN (\"${iam_role.NAME.arn}\") and type = \"EC2_LINUX\""),
        );
    }
}
