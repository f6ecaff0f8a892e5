//! Workload IAM (issue 19): the roles pods get through EKS Pod Identity
//! (`pod_identity_association`, `eks_addon.pod_identity`, Karpenter's controller) and through
//! IRSA (`iam_role.service_accounts`, `eks_addon.service_account_role`) must be wired so that
//! pods actually receive credentials: the Pod Identity agent runs on the cluster, the role
//! trusts the mechanism that hands it out, an IRSA role names its own cluster's provider, and
//! a known add-on's role is given to the service account the add-on runs as.

use super::{lit, lit_str, referenced, span, target, written};
use crate::stack::expr::ExprKind;
use crate::stack::{Diagnostic, Expr, Resource, Stack};
use crate::value::Value;

/// EKS Pod Identity's service principal (EKS UG `pod-id-role`).
const POD_IDENTITY_PRINCIPAL: &str = "pods.eks.amazonaws.com";

/// Add-ons that call AWS, with the namespace and service accounts they run as, and whether a
/// missing role is worth a warning (vpc-cni usually runs on the node role's
/// AmazonEKS_CNI_Policy, EKS UG `cni-iam-role`). Service account names: EBS CSI
/// `ebs-csi-controller-sa` and EFS CSI `efs-csi-controller-sa` / `efs-csi-node-sa` (the
/// drivers' Helm charts and the EKS UG `ebs-csi`, `efs-csi` IRSA trust examples), Mountpoint
/// for S3 `s3-csi-driver-sa` (EKS UG `s3-csi`), CloudWatch Observability `cloudwatch-agent` in
/// `amazon-cloudwatch` (EKS UG `install-CloudWatch-Observability-EKS-addon`), vpc-cni
/// `aws-node` (EKS UG `cni-iam-role`). The list is not every add-on: others are not checked.
pub const ADDON_ACCOUNTS: &[(&str, &str, &[&str], bool)] = &[
    ("aws-ebs-csi-driver", "kube-system", &["ebs-csi-controller-sa"], true),
    ("aws-efs-csi-driver", "kube-system", &["efs-csi-controller-sa", "efs-csi-node-sa"], true),
    ("aws-mountpoint-s3-csi-driver", "kube-system", &["s3-csi-driver-sa"], true),
    // Its missing-role warning is `gpu_addons::cloudwatch_role`'s, which also counts a node role
    // with CloudWatchAgentServerPolicy (the CloudWatch UG's quick-start option): one warning.
    ("amazon-cloudwatch-observability", "amazon-cloudwatch", &["cloudwatch-agent"], false),
    ("vpc-cni", "kube-system", &["aws-node"], false),
];

pub fn workload_iam(stack: &Stack) -> Vec<Diagnostic> {
    let mut d = vec![];
    for r in of_kind(stack, "pod_identity_association") {
        needs_agent(stack, r, "gives its role through EKS Pod Identity", &mut d);
        if let Some(e) = r.attrs.get("role") {
            trusts_pod_identity(stack, r, e, &mut d);
        }
    }
    for r in of_kind(stack, "eks_addon") {
        addon(stack, r, &mut d);
    }
    for r in of_kind(stack, "iam_role") {
        irsa_providers(stack, r, &mut d);
    }
    one_association_per_account(stack, &mut d);
    d
}

/// EKS keeps one Pod Identity association per service account (EKS UG `pod-id-association`;
/// CreatePodIdentityAssociation answers ResourceInUseException "Association already exists"):
/// two writers for the same `namespace/service_account` on one cluster fail at apply, so they
/// are refused here, with where the first one is (review r19-iam m5). An add-on's entries
/// count when its namespace is known (ADDON_ACCOUNTS); one account twice within an add-on is
/// `eks_addon`'s own check.
fn one_association_per_account(stack: &Stack, d: &mut Vec<Diagnostic>) {
    let mut first: std::collections::BTreeMap<(String, String, String), String> = Default::default();
    let mut claim = |cluster: String, ns: String, sa: String, by: String, e: &Expr, d: &mut Vec<Diagnostic>| {
        match first.get(&(cluster.clone(), ns.clone(), sa.clone())) {
            Some(other) => d.push(
                Diagnostic::error(
                    format!("{by} gives {ns}/{sa} a Pod Identity role, but {other} already does; EKS allows one association per service account"),
                    e.span.clone(),
                )
                .help("keep one of them: give that service account its role in one place"),
            ),
            None => {
                first.insert((cluster, ns, sa), by);
            }
        }
    };
    let cluster_of =
        |r: &Resource| target(stack, r, "cluster").map(|c| c.address.clone()).or_else(|| lit_str(r, "cluster"));
    for r in of_kind(stack, "pod_identity_association") {
        let (Some(cluster), Some(ns), Some(sa)) =
            (cluster_of(r), lit_str(r, "namespace"), lit_str(r, "service_account"))
        else {
            continue;
        };
        let Some(e) = r.attrs.get("service_account") else { continue };
        claim(cluster, ns, sa, format!("`{}`", r.address), e, d);
    }
    for r in of_kind(stack, "eks_addon") {
        let name = lit_str(r, "addon").unwrap_or_default();
        if r.attrs.contains_key("service_account_role") && written(r, "pod_identity") {
            // Unverified whether EKS refuses both; which credential a pod's SDK uses then
            // depends on its credential chain (IRSA's web identity comes first in most SDKs).
            d.push(
                Diagnostic::warning(
                    format!("`{}` gives {name} a role both through IRSA (service_account_role) and EKS Pod Identity (pod_identity); which one its pods use depends on their SDK", r.address),
                    span(r, "service_account_role"),
                )
                .help("keep one: pod_identity, or service_account_role with an IRSA role"),
            );
        }
        let (Some(cluster), Some((_, ns, ..))) = (cluster_of(r), ADDON_ACCOUNTS.iter().find(|(a, ..)| *a == name))
        else {
            continue;
        };
        let mut seen = std::collections::BTreeSet::new();
        for entry in table_items(r, "pod_identity") {
            let Some(e) = entry.get("service_account") else { continue };
            let Some(Value::Str(sa)) = e.as_literal() else { continue };
            if seen.insert(sa.clone()) {
                claim(cluster.clone(), ns.to_string(), sa.clone(), format!("`{}` (pod_identity)", r.address), e, d);
            }
        }
    }
}

fn of_kind<'a>(stack: &'a Stack, kind: &'a str) -> impl Iterator<Item = &'a Resource> {
    stack.resources.iter().filter(move |r| r.kind.name() == kind && r.values_ok)
}

/// True when the stack installs the `eks-pod-identity-agent` add-on on `cluster` (an address).
pub(crate) fn has_pod_identity_agent(stack: &Stack, cluster: &str) -> bool {
    of_kind(stack, "eks_addon").any(|a| {
        lit_str(a, "addon").as_deref() == Some("eks-pod-identity-agent")
            && target(stack, a, "cluster").is_some_and(|x| x.address == cluster)
    })
}

/// Pods get Pod Identity credentials only from the agent ("The EKS Pod Identity Agent is
/// required", EKS UG `pod-id-agent-setup`).
fn needs_agent(stack: &Stack, r: &Resource, what: &str, d: &mut Vec<Diagnostic>) {
    let Some(c) = referenced(stack, r, "cluster", "eks_cluster") else { return };
    if !has_pod_identity_agent(stack, &c.address) {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}` {what}, but `{}` has no eks-pod-identity-agent add-on: its pods would get no credentials",
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
}

/// A stack role handed out by Pod Identity must trust `pods.eks.amazonaws.com` (EKS refuses
/// the association otherwise: "Trust policy of the role provided is invalid",
/// hashicorp/terraform-provider-aws#41483).
fn trusts_pod_identity(stack: &Stack, r: &Resource, e: &Expr, d: &mut Vec<Diagnostic>) {
    let Some(role) = e.as_single_ref().and_then(|x| stack.get(&x.address)).filter(|t| t.kind.name() == "iam_role")
    else {
        return;
    };
    let pod = lit(role, "pod_identity") == Some(Value::Bool(true))
        || lit_str(role, "service").as_deref() == Some(POD_IDENTITY_PRINCIPAL);
    if !pod {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}` gives `{}` through EKS Pod Identity, but that role does not trust pods.eks.amazonaws.com",
                    r.address, role.address
                ),
                e.span.clone(),
            )
            .help(format!("set pod_identity = true in [{}]", role.address)),
        );
    }
}

/// Entries of a list of tables written inline (each with its spans); none for anything else.
fn table_items(r: &Resource, k: &str) -> Vec<std::collections::BTreeMap<String, Expr>> {
    match r.attrs.get(k).map(|e| &e.kind) {
        Some(ExprKind::List(items)) => items
            .iter()
            .filter_map(|i| match &i.kind {
                ExprKind::Table(t) => Some(t.clone()),
                _ => None,
            })
            .collect(),
        _ => vec![],
    }
}

fn addon(stack: &Stack, r: &Resource, d: &mut Vec<Diagnostic>) {
    let name = lit_str(r, "addon").unwrap_or_default();
    let known = ADDON_ACCOUNTS.iter().find(|(a, ..)| *a == name);
    let pod = table_items(r, "pod_identity");
    if written(r, "pod_identity") {
        needs_agent(stack, r, "gives roles through EKS Pod Identity (pod_identity)", d);
    }
    for entry in &pod {
        if let Some(e) = entry.get("role") {
            trusts_pod_identity(stack, r, e, d);
        }
        if let (Some((_, _, accounts, _)), Some(e)) = (known, entry.get("service_account"))
            && let Some(Value::Str(sa)) = e.as_literal()
            && !accounts.contains(&sa.as_str())
        {
            d.push(
                Diagnostic::error(
                    format!("`{}`: {name} runs as {}, not \"{sa}\"", r.address, accounts.join(" or ")),
                    e.span.clone(),
                )
                .help(format!("set service_account = \"{}\"", accounts[0])),
            );
        }
    }
    if let Some((_, _, _, true)) = known
        && !r.attrs.contains_key("service_account_role")
        && !written(r, "pod_identity")
    {
        d.push(
            Diagnostic::warning(
                format!("`{}`: {name} calls AWS APIs, but has no role of its own; it falls back to the node role's permissions", r.address),
                r.span.clone(),
            )
            .help("give it a role: pod_identity = [{ service_account = \"...\", role = \"${iam_role.NAME.arn}\" }] (an iam_role with pod_identity = true), or service_account_role = an IRSA role"),
        );
    }
    if let Some(e) = r.attrs.get("service_account_role") {
        irsa_addon_role(stack, r, e, known, d);
    }
}

/// An add-on's IRSA role must trust its service account through its own cluster's provider.
fn irsa_addon_role(
    stack: &Stack,
    r: &Resource,
    e: &Expr,
    known: Option<&(&str, &str, &[&str], bool)>,
    d: &mut Vec<Diagnostic>,
) {
    let Some(role) = e.as_single_ref().and_then(|x| stack.get(&x.address)).filter(|t| t.kind.name() == "iam_role")
    else {
        return;
    };
    let entries = table_items(role, "service_accounts");
    if !written(role, "service_accounts") {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}` gives `{}` through IRSA (service_account_role), but that role trusts no service account",
                    r.address, role.address
                ),
                e.span.clone(),
            )
            .help(format!(
                "add service_accounts = [{{ oidc_provider = \"${{oidc_provider.NAME.arn}}\", namespace = \"kube-system\", name = \"...\" }}] to [{}], or give the role through pod_identity instead",
                role.address
            )),
        );
        return;
    }
    let cluster = target(stack, r, "cluster").map(|c| c.address.clone());
    for entry in &entries {
        let provider = entry.get("oidc_provider").and_then(|p| p.as_single_ref()).and_then(|x| stack.get(&x.address));
        let provider_cluster = provider
            .filter(|p| p.kind.name() == "oidc_provider")
            .and_then(|p| target(stack, p, "url"))
            .map(|c| c.address.clone());
        if let (Some(c), Some(pc)) = (&cluster, &provider_cluster)
            && c != pc
        {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}` runs on `{c}`, but its role `{}` trusts the OIDC provider of `{pc}`: its tokens would be refused",
                        r.address, role.address
                    ),
                    entry.get("oidc_provider").and_then(|p| p.span.clone()),
                )
                .help(format!("use the provider whose url is \"${{{c}.oidc_issuer}}\"")),
            );
        }
    }
    if let Some((name, namespace, accounts, _)) = known {
        let lits = |k: &str, t: &std::collections::BTreeMap<String, Expr>| {
            t.get(k).and_then(|e| e.as_literal()).and_then(|v| v.as_str().map(str::to_string))
        };
        let all_literal = entries.iter().all(|t| lits("namespace", t).is_some() && lits("name", t).is_some());
        let covers = entries.iter().any(|t| {
            let (ns, n) = (lits("namespace", t).unwrap_or_default(), lits("name", t).unwrap_or_default());
            // The trust matches them as StringLike globs when they hold `*` or `?` (trust.rs),
            // as the EKS UG's EFS trust `efs-csi-*` does (`add-ons-aws-efs-csi-driver`).
            string_like(&ns, namespace) && accounts.iter().any(|a| string_like(&n, a))
        });
        if all_literal && !covers {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}` gives `{}` to {name}, which runs as {namespace}/{}, but the role trusts none of its service accounts",
                        r.address,
                        role.address,
                        accounts[0]
                    ),
                    e.span.clone(),
                )
                .help(format!(
                    "add {{ oidc_provider = ..., namespace = \"{namespace}\", name = \"{}\" }} to service_accounts in [{}]",
                    accounts[0], role.address
                )),
            );
        }
    }
}

/// Whether IAM's `StringLike` `pattern` matches `value`: `*` is any run of characters, `?`
/// one character (IAM UG, "IAM JSON policy elements: Condition operators", String condition
/// operators); anything else matches itself.
fn string_like(pattern: &str, value: &str) -> bool {
    let (p, v): (Vec<char>, Vec<char>) = (pattern.chars().collect(), value.chars().collect());
    // Classic wildcard matching with one backtrack point for the last `*`.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < v.len() {
        if i < p.len() && (p[i] == '?' || p[i] == v[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

/// IRSA needs the cluster's IAM OIDC provider: a reference must be to an `oidc_provider`
/// (a literal ARN is a provider made elsewhere, checked for its form by `iam_role`).
fn irsa_providers(stack: &Stack, r: &Resource, d: &mut Vec<Diagnostic>) {
    for (n, entry) in table_items(r, "service_accounts").iter().enumerate() {
        let Some(e) = entry.get("oidc_provider") else { continue };
        let Some(x) = e.as_single_ref() else { continue };
        if stack.get(&x.address).is_some_and(|t| t.kind.name() != "oidc_provider") || x.output != "arn" {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}`: service_accounts[{n}].oidc_provider refers to `{}.{}`, not an OIDC provider's ARN",
                        r.address, x.address, x.output
                    ),
                    e.span.clone(),
                )
                .help("add [oidc_provider.main] with url = \"${eks_cluster.main.oidc_issuer}\" and refer to \"${oidc_provider.main.arn}\""),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::string_like;

    #[test]
    fn string_like_is_iams_glob() {
        // Review r19-iam M1: the EKS UG's EFS trust subject.
        assert!(string_like("efs-csi-*", "efs-csi-controller-sa"));
        assert!(string_like("efs-csi-*", "efs-csi-node-sa"));
        assert!(string_like("*", "aws-node"));
        assert!(string_like("kube-syste?", "kube-system"));
        assert!(string_like("*-sa", "ebs-csi-controller-sa"));
        assert!(string_like("ebs-csi-controller-sa", "ebs-csi-controller-sa"));
        assert!(!string_like("efs-csi-*", "ebs-csi-controller-sa"));
        assert!(!string_like("kube-syste?", "kube-syste"));
        assert!(!string_like("ebs-csi-controller", "ebs-csi-controller-sa"));
        assert!(string_like("a*b*c", "a-x-b-y-c") && !string_like("a*b*c", "a-x-c-y-b"));
    }
}
