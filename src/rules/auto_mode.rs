//! The rules of EKS Auto Mode (issue 21; docs/aws-facts-auto-mode.md): the IAM the mode needs
//! on the cluster role and the node role, the access entry of a NodeClass role, Auto Mode
//! pools on a cluster that runs Auto Mode, the GPU families Auto Mode launches, and Auto Mode
//! beside managed node groups or self-managed Karpenter. The rules a pool shares with
//! `karpenter_pool` (reservations in the pool's zones and of types it runs, Spot breadth) are
//! `rules::karpenter`'s, run here for Auto Mode pools too.

use std::collections::BTreeMap;

use super::{lit, lit_str, node_groups, same_object, span, strings};
use crate::stack::expr::ExprKind;
use crate::stack::{Diagnostic, Expr, Resource, Stack};
use crate::value::Value;

/// The managed policies an Auto Mode cluster role carries (EKS UG `auto-cluster-iam-role`:
/// "attach the suggested AWS IAM managed policies, or create custom policies with equivalent
/// permissions"; aws-facts-auto-mode §4.1).
pub const CLUSTER_POLICIES: &[&str] = &[
    "AmazonEKSClusterPolicy",
    "AmazonEKSComputePolicy",
    "AmazonEKSBlockStoragePolicy",
    "AmazonEKSLoadBalancingPolicy",
    "AmazonEKSNetworkingPolicy",
];

/// The managed policies of an Auto Mode node role (EKS UG `auto-create-node-role`).
pub const NODE_POLICIES: &[&str] = &["AmazonEKSWorkerNodeMinimalPolicy", "AmazonEC2ContainerRegistryPullOnly"];

/// The access policy a NodeClass role's `EC2` entry carries (EKS UG `create-node-class`,
/// "Create node class access entry").
pub const AUTO_NODE_POLICY: &str = "AmazonEKSAutoNodePolicy";

/// The accelerated families Auto Mode launches: the "Accelerated Computing (P/G/Inf/Trn)" row
/// of EKS UG "EKS Auto Mode supported instance reference" (`automode-learn-instances`,
/// awsdocs/amazon-eks-user-guide @06faff14; aws-facts-auto-mode §9). Auto Mode "only creates
/// instances of supported types": g6f, gr6f, p6e-gb200, trn2u, dl1 and others are absent.
pub const GPU_FAMILIES: &[&str] = &[
    "p6-b200", "p6-b300", "p5", "p5e", "p5en", "p4d", "p4de", "p3dn", "g7e", "g6", "gr6", "g6e", "g5g", "g5", "g4dn",
    "g4ad", "inf2", "inf1", "trn1", "trn1n", "trn2",
];

fn family(t: &str) -> &str {
    t.split('.').next().unwrap_or(t)
}

/// An accelerated family (P, G, Inf, Trn, DL, F, VT…) Auto Mode does not launch.
fn unsupported_accelerated(t: &str) -> bool {
    let f = family(t);
    let accelerated = f.starts_with(['p', 'g']) && f.chars().nth(1).is_some_and(|c| c.is_ascii_digit())
        || ["gr", "inf", "trn", "dl", "f1", "f2", "vt"].iter().any(|p| f.starts_with(p));
    accelerated && !GPU_FAMILIES.contains(&f)
}

/// The field of an inline table attribute, as written.
fn field<'a>(r: &'a Resource, attr: &str, k: &str) -> Option<&'a Expr> {
    match &r.attrs.get(attr)?.kind {
        ExprKind::Table(t) => t.get(k),
        _ => None,
    }
}

/// A cluster whose `auto_mode` is on (written, and not `enabled = false`).
pub(crate) fn auto_mode_on(cluster: &Resource) -> bool {
    cluster.kind.name() == "eks_cluster"
        && cluster.attrs.contains_key("auto_mode")
        && field(cluster, "auto_mode", "enabled").and_then(|e| e.as_literal()).and_then(Value::as_bool) != Some(false)
}

/// The built-in node pools the cluster turns on.
fn built_in_pools(cluster: &Resource) -> Vec<String> {
    strings(field(cluster, "auto_mode", "node_pools").map(|e| e.resolve(&|_| Value::Unknown)))
}

fn managed_policies(role: &Resource) -> Vec<String> {
    strings(lit(role, "managed_policies"))
}

fn missing_policies(role: &Resource, wanted: &[&str]) -> Vec<String> {
    let have = managed_policies(role);
    wanted
        .iter()
        .filter(|p| !have.iter().any(|h| h.rsplit('/').next() == Some(**p)))
        .map(|p| format!("arn:aws:iam::aws:policy/{p}"))
        .collect()
}

fn pools(stack: &Stack) -> impl Iterator<Item = &Resource> {
    stack.resources.iter().filter(|r| r.kind.name() == "auto_mode_pool")
}

/// Rules that need only the stack.
pub(super) fn offline(stack: &Stack) -> Vec<Diagnostic> {
    let mut d = vec![];
    for cluster in stack.resources.iter().filter(|r| auto_mode_on(r)) {
        cluster_role(stack, cluster, &mut d);
        node_role(stack, cluster, &mut d);
        beside_karpenter(stack, cluster, &mut d);
    }
    for pool in pools(stack) {
        let cluster = pool.attrs.get("cluster").and_then(|e| e.as_single_ref()).and_then(|x| stack.get(&x.address));
        match cluster {
            Some(c) if auto_mode_on(c) => pool_role_entered(stack, c, pool, &mut d),
            Some(c) if c.kind.name() == "eks_cluster" => d.push(
                Diagnostic::error(
                    format!("`{}` is an Auto Mode pool, but `{}` does not run EKS Auto Mode", pool.address, c.address),
                    span(pool, "cluster"),
                )
                .help(format!(
                    "add auto_mode = {{ node_pools = [\"system\"], node_role = \"${{iam_role.NAME.arn}}\" }} to `{}`, or use a karpenter_pool",
                    c.address
                )),
            ),
            _ => {}
        }
        super::karpenter::reserved_capacity(stack, pool, &mut d);
        super::karpenter::spot_breadth(pool, &mut d);
        super::karpenter::limits_against_catalog(stack, pool, &mut d);
        gpu_families(stack, pool, &mut d);
        block_outlives_nodes(stack, pool, &mut d);
    }
    d
}

/// Review auto M1: a Capacity Block longer than the pool's node lifetime. Expiration is
/// forceful in Karpenter v1 ("Automated Forceful Methods → Expiration": disruption budgets do
/// not stop it, `terminationGracePeriod` caps the drain; karpenter.sh docs v1.x
/// `concepts/disruption`), and Auto Mode replaces a node by 21 days at the latest (EKS best
/// practices guide, Auto Mode; aws-facts-auto-mode §5), so a job on such a block is restarted
/// at least that often.
fn block_outlives_nodes(stack: &Stack, pool: &Resource, d: &mut Vec<Diagnostic>) {
    let Some(ExprKind::List(items)) = pool.attrs.get("capacity_reservations").map(|e| &e.kind) else { return };
    let written = match pool.attrs.get("disruption").map(|e| &e.kind) {
        Some(ExprKind::Table(t)) => t.get("expire_after"),
        _ => None,
    };
    let expire = match written {
        Some(e) => match e.as_literal().and_then(Value::as_str) {
            Some(v) => Some(v.to_string()),
            None => return,
        },
        None => None,
    };
    let Some(life) = crate::resources::auto_mode_pool::lifetime_hours(expire.as_deref()) else { return };
    for block in items
        .iter()
        .filter_map(|e| e.as_single_ref())
        .filter_map(|x| stack.get(&x.address))
        .filter(|r| r.kind.name() == "capacity_block")
    {
        let Some(h) = lit(block, "duration_hours").and_then(|v| v.as_int()) else { continue };
        if h > life {
            d.push(
                Diagnostic::warning(
                    format!(
                        "`{}` lasts {h}h but `{}`'s nodes live at most {life}h: jobs on this block are restarted at least every {} days",
                        block.address,
                        pool.address,
                        life / 24
                    ),
                    written.and_then(|e| e.span.clone()).or(span(pool, "capacity_reservations")),
                )
                .help(format!(
                    "EKS Auto Mode replaces a node by {} days (expiration is forceful); checkpoint the job, or use a karpenter_pool or a node_group for longer uninterrupted runs",
                    crate::resources::auto_mode_pool::MAX_EXPIRE_HOURS / 24
                )),
            );
        }
    }
}

/// The cluster role carries the five Auto Mode policies and trusts EKS with sts:TagSession
/// ("The Cluster IAM Role must have an updated trust policy including the sts:TagSession
/// action", EKS UG `auto-enable-existing`).
fn cluster_role(stack: &Stack, cluster: &Resource, d: &mut Vec<Diagnostic>) {
    let Some(role) = super::referenced(stack, cluster, "role", "iam_role") else { return };
    let missing = missing_policies(role, CLUSTER_POLICIES);
    if !missing.is_empty() {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}` runs EKS Auto Mode, but its role `{}` lacks {}",
                    cluster.address,
                    role.address,
                    missing.iter().map(|m| m.rsplit('/').next().unwrap_or(m)).collect::<Vec<_>>().join(", ")
                ),
                span(role, "managed_policies"),
            )
            .help(format!(
                "add to managed_policies of `{}`: {} (EKS UG auto-cluster-iam-role)",
                role.address,
                missing.iter().map(|m| format!("\"{m}\"")).collect::<Vec<_>>().join(", ")
            )),
        );
    }
    if lit(role, "tag_session").and_then(|v| v.as_bool()) != Some(true) {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}` runs EKS Auto Mode, but its role `{}` does not let EKS tag sessions (sts:TagSession)",
                    cluster.address, role.address
                ),
                span(role, "service"),
            )
            .help(format!(
                "add tag_session = true to `{}` (EKS UG auto-enable-existing: the trust needs sts:TagSession)",
                role.address
            )),
        );
    }
}

/// The node role: EC2 trust and the two node policies (EKS UG `auto-create-node-role`), and
/// not the cluster's own role ("You can't use the same role that is used to create any
/// clusters", same page).
fn node_role(stack: &Stack, cluster: &Resource, d: &mut Vec<Diagnostic>) {
    let Some(expr) = field(cluster, "auto_mode", "node_role") else { return };
    let Some(role) = expr.as_single_ref().and_then(|x| stack.get(&x.address)).filter(|r| r.kind.name() == "iam_role")
    else {
        return;
    };
    let at = expr.span.clone().or(span(cluster, "auto_mode"));
    if same_object(Some(expr), cluster.attrs.get("role")) {
        d.push(
            Diagnostic::error(format!("`{}`: auto_mode.node_role is the cluster's own role", cluster.address), at.clone())
                .help("give Auto Mode's nodes their own iam_role with service = \"ec2.amazonaws.com\" (EKS UG auto-create-node-role)"),
        );
        return;
    }
    let missing = missing_policies(role, NODE_POLICIES);
    if !missing.is_empty() {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}` is Auto Mode's node role but lacks {}",
                    role.address,
                    missing.iter().map(|m| m.rsplit('/').next().unwrap_or(m)).collect::<Vec<_>>().join(", ")
                ),
                span(role, "managed_policies"),
            )
            .help(format!(
                "add to managed_policies: {} (EKS UG auto-create-node-role)",
                missing.iter().map(|m| format!("\"{m}\"")).collect::<Vec<_>>().join(", ")
            )),
        );
    }
    if lit_str(role, "service").as_deref() != Some("ec2.amazonaws.com") {
        d.push(
            Diagnostic::error(
                format!("`{}` is Auto Mode's node role but EC2 cannot assume it", role.address),
                span(role, "service"),
            )
            .help("set service = \"ec2.amazonaws.com\""),
        );
    }
    // EKS enters the built-in pools' role itself; a second entry fails (ResourceInUseException,
    // terraform-aws-modules/terraform-aws-eks#3241; aws-facts-auto-mode §4.3).
    if !built_in_pools(cluster).is_empty() {
        for e in entries(stack, cluster, expr) {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}` enters Auto Mode's node role, which EKS enters itself with the built-in pools",
                        e.address
                    ),
                    e.span.clone(),
                )
                .help(format!(
                    "remove `{}`: EKS makes the EC2 entry with AmazonEKSAutoNodePolicy for auto_mode.node_role",
                    e.address
                )),
            );
        }
    }
}

/// The stack's access entries of `cluster` for the role `role`.
fn entries<'a>(stack: &'a Stack, cluster: &Resource, role: &Expr) -> Vec<&'a Resource> {
    stack
        .resources
        .iter()
        .filter(|r| r.kind.name() == "eks_access_entry")
        .filter(|r| {
            r.attrs.get("cluster").and_then(|e| e.as_single_ref()).is_some_and(|x| x.address == cluster.address)
        })
        .filter(|r| same_object(r.attrs.get("principal_arn"), Some(role)))
        .collect()
}

/// A NodeClass role needs an `EC2` access entry with AmazonEKSAutoNodePolicy, unless it is
/// the role EKS entered for the built-in pools (EKS UG `create-node-class`: "If you create a
/// custom node class, you need to create an EKS Access Entry to permit the nodes to join the
/// cluster"; "EKS automatically creates access entries when you use the built-in node class
/// and node pools").
fn pool_role_entered(stack: &Stack, cluster: &Resource, pool: &Resource, d: &mut Vec<Diagnostic>) {
    let Some(role) = pool.attrs.get("node_role") else { return };
    if !built_in_pools(cluster).is_empty() && same_object(Some(role), field(cluster, "auto_mode", "node_role")) {
        return;
    }
    let ok = entries(stack, cluster, role).iter().any(|e| {
        lit_str(e, "type").as_deref() == Some("EC2")
            && lit(e, "policies").and_then(|p| p.as_list().map(<[Value]>::to_vec)).unwrap_or_default().iter().any(|p| {
                p.as_table()
                    .and_then(|t| t.get("policy_arn"))
                    .and_then(Value::as_str)
                    .is_some_and(|a| a.ends_with(&format!("/{AUTO_NODE_POLICY}")))
            })
    });
    if !ok {
        d.push(
            Diagnostic::error(
                format!("`{}`: its node role has no EC2 access entry with {AUTO_NODE_POLICY}, so Auto Mode's nodes could not join", pool.address),
                span(pool, "node_role"),
            )
            .help(format!(
                "add [eks_access_entry.NAME] with cluster = \"${{{}.name}}\", principal_arn = the role's ARN, type = \"EC2\" and policies = [{{ policy_arn = \"arn:aws:eks::aws:cluster-access-policy/{AUTO_NODE_POLICY}\", scope = \"cluster\" }}]; or use the cluster's auto_mode.node_role with built-in node_pools",
                cluster.address
            )),
        );
    }
}

/// GPU and accelerator types Auto Mode does not launch: the pool's types and families, and
/// the types its reservations hold (a Capacity Block Auto Mode cannot use is paid for idle).
fn gpu_families(stack: &Stack, pool: &Resource, d: &mut Vec<Diagnostic>) {
    let help = format!(
        "Auto Mode launches these accelerated families: {}; use a karpenter_pool or a node_group for others",
        GPU_FAMILIES.join(", ")
    );
    for attr in ["instance_types", "instance_families"] {
        for t in strings(lit(pool, attr)).iter().filter(|t| unsupported_accelerated(t)) {
            d.push(
                Diagnostic::error(format!("`{}`: EKS Auto Mode does not launch {t}", pool.address), span(pool, attr))
                    .help(help.clone()),
            );
        }
    }
    let Some(ExprKind::List(items)) = pool.attrs.get("capacity_reservations").map(|e| &e.kind) else { return };
    for res in items.iter().filter_map(|e| e.as_single_ref()).filter_map(|x| stack.get(&x.address)) {
        if let Some(t) = lit_str(res, "instance_type").filter(|t| unsupported_accelerated(t)) {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}` holds {t}, which EKS Auto Mode does not launch: `{}` would never use it",
                        res.address, pool.address
                    ),
                    span(res, "instance_type"),
                )
                .help(help.clone()),
            );
        }
    }
}

/// "AWS suggests running either EKS Auto Mode or self-managed Karpenter" (EKS UG
/// managed-instances): both on one cluster may fight over the same pods.
fn beside_karpenter(stack: &Stack, cluster: &Resource, d: &mut Vec<Diagnostic>) {
    let same = |r: &Resource| {
        r.attrs.get("cluster").and_then(|e| e.as_single_ref()).is_some_and(|x| x.address == cluster.address)
    };
    if let Some(k) = stack.resources.iter().find(|r| r.kind.name() == "karpenter_controller" && same(r)) {
        d.push(
            Diagnostic::warning(
                format!("`{}` runs EKS Auto Mode and `{}` installs self-managed Karpenter beside it", cluster.address, k.address),
                k.span.clone(),
            )
            .help("AWS suggests one of them (EKS UG managed-instances); if both, keep each pool's pods apart with the eks.amazonaws.com/compute-type label"),
        );
    }
}

/// Review auto m6: the plan's note on an Auto Mode cluster whose pools select reservations.
/// "If you configure capacityReservationSelectorTerms on a NodeClass in a cluster, EKS Auto
/// Mode will no longer automatically use open ODCRs for any NodeClass in the cluster" (EKS UG
/// `auto-odcr`, its warning in the 2025 text); the current text says only that open ODCRs are
/// open-matched as `on-demand`, not prioritized. Either way an open ODCR meant for a pool has
/// to be selected by it.
fn odcr_notes(stack: &Stack, notes: &mut BTreeMap<String, String>) {
    for cluster in stack.resources.iter().filter(|r| auto_mode_on(r)) {
        let selecting: Vec<&str> = pools(stack)
            .filter(|p| p.attrs.get("cluster").and_then(|e| e.as_single_ref()).is_some_and(|x| x.address == cluster.address))
            .filter(|p| {
                p.attrs.contains_key("capacity_reservation_tags")
                    || matches!(p.attrs.get("capacity_reservations").map(|e| &e.kind), Some(ExprKind::List(l)) if !l.is_empty())
            })
            .map(|p| p.address.as_str())
            .collect();
        if selecting.is_empty() {
            continue;
        }
        let text = format!(
            "{} {} capacity reservations: Auto Mode may then use no open ODCR for any other NodeClass of the cluster (EKS UG auto-odcr); list every ODCR a pool should use in its capacity_reservations",
            selecting.join(", "),
            if selecting.len() == 1 { "selects" } else { "select" }
        );
        notes.entry(cluster.address.clone()).and_modify(|n| n.push_str(&format!("; {text}"))).or_insert(text);
    }
}

/// The plan's note on an Auto Mode cluster that also has managed node groups: allowed ("Node
/// Pools in EKS Auto Mode differ from Amazon EKS Managed Node Groups but can coexist in the
/// same cluster", EKS UG `automode-get-started-cli`), with how to steer pods.
pub(crate) fn notes(stack: &Stack, notes: &mut BTreeMap<String, String>) {
    odcr_notes(stack, notes);
    for cluster in stack.resources.iter().filter(|r| auto_mode_on(r)) {
        let groups: Vec<&str> = node_groups(stack)
            .filter(|ng| {
                ng.attrs.get("cluster").and_then(|e| e.as_single_ref()).is_some_and(|x| x.address == cluster.address)
            })
            .map(|ng| ng.address.as_str())
            .collect();
        if groups.is_empty() {
            continue;
        }
        // An Auto Mode cluster is created with bootstrapSelfManagedAddons = false, so EKS
        // installs no vpc-cni, kube-proxy or CoreDNS for nodes outside Auto Mode (botocore
        // `CreateClusterRequest.bootstrapSelfManagedAddons`: "the default networking add-ons will
        // not be installed").
        let same = |r: &Resource| {
            r.attrs.get("cluster").and_then(|e| e.as_single_ref()).is_some_and(|x| x.address == cluster.address)
        };
        let present: Vec<String> = stack
            .resources
            .iter()
            .filter(|r| r.kind.name() == "eks_addon" && same(r))
            .filter_map(|r| lit_str(r, "addon"))
            .collect();
        let missing: Vec<&str> =
            ["vpc-cni", "kube-proxy", "coredns"].into_iter().filter(|a| !present.iter().any(|p| p == a)).collect();
        let addons = if missing.is_empty() {
            String::new()
        } else {
            format!(
                "; the groups' nodes need the {} add-on(s) as eks_addon: Auto Mode clusters are created without them",
                missing.join(", ")
            )
        };
        let text = format!(
            "EKS Auto Mode and managed node groups ({}) on one cluster: allowed; Auto Mode does not touch the groups. Steer pods with nodeSelector eks.amazonaws.com/compute-type: auto (EKS UG associate-workload){addons}",
            groups.join(", ")
        );
        notes.entry(cluster.address.clone()).and_modify(|n| n.push_str(&format!("; {text}"))).or_insert(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accelerated_families_auto_mode_lacks_are_flagged() {
        for ok in
            ["p5.48xlarge", "g6e.12xlarge", "p6-b200.48xlarge", "trn2.48xlarge", "inf2", "m7i.large", "c7g.xlarge"]
        {
            assert!(!unsupported_accelerated(ok), "{ok}");
        }
        // p3 left the row (awsdocs/amazon-eks-user-guide @06faff14; review auto m7).
        for bad in ["g6f.large", "p6e-gb200.36xlarge", "trn2u.48xlarge", "dl1.24xlarge", "gr6f.4xlarge", "p3.2xlarge"] {
            assert!(unsupported_accelerated(bad), "{bad}");
        }
    }
}
