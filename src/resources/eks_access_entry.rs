//! `eks_access_entry`: which IAM principal may reach a cluster's Kubernetes API, and as what
//! (aws-facts §12). `EC2_LINUX` is for a node role whose nodes are not in a managed node group
//! (Karpenter's): EKS maps it to `system:nodes` and it takes no access policies. `STANDARD` is
//! for people and tools, with access policies scoped to the cluster or to namespaces. Policies
//! change in place; the cluster, the principal and the type replace (EKS cannot change them).
//!
//! A `STANDARD` entry may also name Kubernetes RBAC groups (`kubernetes_groups`) and a
//! `username`; both change in place (`UpdateAccessEntry`). `FARGATE_LINUX`, `HYBRID_LINUX` and
//! `EC2_WINDOWS` are node types like `EC2_LINUX`: no policies, groups or username. It never
//! lists the policies of an entry that is not `STANDARD`: EKS refuses that call
//! (aws-controllers-k8s/community#2144).

use std::collections::BTreeMap;

use async_trait::async_trait;
use aws_sdk_eks::types::{AccessEntry, AccessScope, AccessScopeType, AuthenticationMode};

use super::{Create, Imported, Kind, Observed, Recorded, Result, Schema, TAGS, str_attr, strings_attr};
use crate::aws::{Absent, AwsError, Ctx, Service, eks, tags};
use crate::stack::expr::ExprKind;
use crate::stack::schema::{Attr, Default as Dflt, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

pub struct EksAccessEntry;

/// botocore `CreateAccessEntryRequest.type` lists these and `HYPERPOD_LINUX` (made by
/// SageMaker HyperPod itself). `EC2` is "for EKS Auto Mode" (same doc string): the node entry
/// of an Auto Mode NodeClass role, which takes the `AmazonEKSAutoNodePolicy` access policy
/// (EKS UG `create-node-class`, "Create node class access entry"; `rules::auto_mode`).
pub const TYPES: &[&str] = &["EC2_LINUX", "STANDARD", "EC2_WINDOWS", "FARGATE_LINUX", "HYBRID_LINUX", "EC2"];

/// The types whose entries carry access policies (and may be asked for them).
fn takes_policies(kind: &str) -> bool {
    kind == "STANDARD" || kind == "EC2"
}

/// Prefixes EKS keeps for itself: "The username can't start with system:, eks:, aws:, amazon:,
/// or iam:" (EKS UG `set-custom-username`); a group starting `system:` is refused with "The
/// kubernetes group name system:masters is invalid, it cannot start with system:"
/// (terraform-aws-modules/terraform-aws-eks#2915).
const USERNAME_RESERVED: &[&str] = &["system:", "eks:", "aws:", "amazon:", "iam:"];

const POLICY: &[Attr] = &[
    Attr::req("policy_arn", Ty::Str, OnChange::Update),
    // "cluster", or a list of namespaces (checked by `validate`).
    Attr::req("scope", Ty::Any, OnChange::Update),
];

const ATTRS: &[Attr] = &[
    Attr::req("cluster", Ty::Str, OnChange::Replace),
    Attr::req("principal_arn", Ty::Str, OnChange::Replace),
    // Required, not defaulted: EKS's own default is STANDARD, which gives a node role no
    // node identity (its nodes never join), gpustack's likeliest use is EC2_LINUX, and the
    // type can never change afterwards. A default that differs from the API's would surprise
    // the people who know the API; the one that matches it would fail Karpenter silently.
    Attr::req("type", Ty::Enum(TYPES), OnChange::Replace),
    Attr::opt("policies", Ty::List(&Ty::Object(POLICY)), Dflt::EmptyList, OnChange::Update),
    // `kubernetesGroups`: RBAC group names the principal is put in (STANDARD only; "You can't use
    // the --kubernetes-groups option when you specify a type other than STANDARD", EKS UG
    // `creating-access-entries`). Replaced as a whole by `UpdateAccessEntry`.
    Attr::opt("kubernetes_groups", Ty::List(&Ty::Str), Dflt::EmptyList, OnChange::Update),
    // `username`: unset, EKS makes one from the ARN (the role's session for a role), which
    // gpustack leaves alone (EKS UG `set-custom-username` recommends not setting it).
    Attr::opt("username", Ty::Str, Dflt::None, OnChange::Update),
    TAGS,
];

impl Schema for EksAccessEntry {
    fn name(&self) -> &'static str {
        "eks_access_entry"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("arn", Ty::Str)]
    }
}

#[async_trait]
impl Kind for EksAccessEntry {
    fn actions(&self) -> &'static [&'static str] {
        &[
            "eks:CreateAccessEntry",
            "eks:DescribeAccessEntry",
            "eks:ListAccessEntries",
            "eks:DeleteAccessEntry",
            "eks:UpdateAccessEntry",
            "eks:AssociateAccessPolicy",
            "eks:DisassociateAccessPolicy",
            "eks:ListAssociatedAccessPolicies",
            "eks:ListClusters",
            "eks:DescribeCluster",
            "eks:TagResource",
            "eks:UntagResource",
        ]
    }

    fn validate(&self, r: &Resource, diags: &mut Vec<Diagnostic>) {
        super::node_group::require_stack_cluster(r, diags);
        if let Some(e) = r.attrs.get("principal_arn")
            && let Some(arn) = e.as_literal().and_then(Value::as_str)
            && !is_principal_arn(arn)
        {
            diags.push(
                Diagnostic::error(
                    format!("`{}`: principal_arn \"{arn}\" is not the ARN of an IAM role or user", r.address),
                    e.span.clone(),
                )
                .help("write arn:aws:iam::ACCOUNT:role/NAME, or refer to a role: \"${iam_role.NAME.arn}\""),
            );
        }
        groups_and_username(r, diags);
        for (policy_arn, scope) in written_policies(r) {
            if let Some(e) = policy_arn
                && let Some(arn) = e.as_literal().and_then(Value::as_str)
                && !arn.contains(":cluster-access-policy/")
            {
                diags.push(
                    Diagnostic::error(format!("`{}`: \"{arn}\" is not an EKS access policy ARN", r.address), e.span.clone())
                        .help("access policies are named arn:aws:eks::aws:cluster-access-policy/NAME (aws eks list-access-policies)"),
                );
            }
            if let Some(e) = scope
                && let Some(v) = e.as_literal()
                && scope_of(v).is_none()
            {
                diags.push(
                    Diagnostic::error(
                        format!("`{}`: an access policy's scope is \"cluster\" or a list of namespaces", r.address),
                        e.span.clone(),
                    )
                    .help("write scope = \"cluster\", or scope = [\"team-a\", \"team-b\"]"),
                );
            }
        }
    }

    fn normalize(&self, inputs: &mut Attrs) {
        // A set; empty is the default and what a state from before the attribute records.
        if let Some(Value::List(g)) = inputs.get_mut("kubernetes_groups") {
            g.sort_by_key(Value::interpolate);
            g.dedup();
            if g.is_empty() {
                inputs.remove("kubernetes_groups");
            }
        }
        if let Some(Value::List(l)) = inputs.get_mut("policies") {
            for p in l.iter_mut() {
                if let Value::Table(t) = p
                    && let Some(Value::List(ns)) = t.get_mut("scope")
                {
                    ns.sort_by_key(Value::interpolate);
                    ns.dedup();
                }
            }
            l.sort_by_key(|p| p.as_table().and_then(|t| t.get("policy_arn")).map(Value::interpolate));
        }
    }

    /// EKS makes up a username when none is set: the one refresh sees counts only when the
    /// stack chose it.
    fn current(&self, recorded: &Attrs, observed: &Attrs) -> Attrs {
        let mut cur = recorded.clone();
        cur.extend(
            observed
                .iter()
                // Nothing recorded is an import: its username is compared (`settle`).
                .filter(|(k, _)| *k != "username" || recorded.is_empty() || recorded.contains_key("username"))
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        self.normalize(&mut cur);
        cur
    }

    /// An import reads the username EKS shows; unset in the file it is EKS's own (made up
    /// from the ARN, or set by whoever made the entry, which UpdateAccessEntry can keep but
    /// never return to the made-up one): no change either way.
    fn settle(&self, current: &mut Attrs, desired: &Attrs) {
        if !desired.contains_key("username") {
            current.remove("username");
        }
    }

    fn import_id(&self) -> Option<&'static str> {
        Some("CLUSTER:PRINCIPAL_ARN")
    }

    /// DescribeAccessEntry, and a STANDARD entry's policy associations. An entry in a cluster
    /// in CONFIG_MAP mode cannot exist: EKS refuses the call (InvalidRequestException), and
    /// that is said as such, with what to do, not as "no such entry" (review imp-eks m5).
    async fn import(&self, ctx: &Ctx, id: &str) -> Result<Option<Imported>> {
        let Some((cluster, principal)) = eks::split_import_id(id) else { return Ok(None) };
        let found = match describe(ctx, cluster, principal).await {
            Err(e) if e.has_code("InvalidRequestException") => {
                return Err(crate::aws::AwsError {
                    operation: e.operation,
                    code: e.code.clone(),
                    detail: format!(
                        "{} (cluster {cluster}: access entries need authentication_mode API or API_AND_CONFIG_MAP; a CONFIG_MAP cluster grants access in the aws-auth ConfigMap, which gpustack does not import)",
                        e.detail
                    ),
                });
            }
            other => other?,
        };
        let Some(a) = found else { return Ok(None) };
        let all: BTreeMap<String, String> = a.tags().cloned().unwrap_or_default().into_iter().collect();
        let attrs = observe(ctx, cluster, principal, &a, &all).await?;
        let mut unexpressed = vec![];
        // A node entry's groups are EKS's (system:nodes), not an input.
        if a.r#type() != Some("STANDARD") && !a.kubernetes_groups().is_empty() {
            unexpressed.push(("kubernetesGroups".to_string(), a.kubernetes_groups().join(",")));
        }
        let rec = recorded(a.access_entry_arn().unwrap_or_default());
        let observed = Observed { address: None, id: rec.id, attrs, outputs: rec.outputs, retained: false };
        Ok(Some(Imported { observed, unexpressed }))
    }

    async fn tag_imported(&self, ctx: &Ctx, address: &str, id: &str, _outputs: &Attrs) -> Result<()> {
        // The recorded id of an access entry is its ARN.
        eks::tag_owned(ctx, id, address).await
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let i = req.inputs;
        let (cluster, principal) = (str_attr(i, "cluster"), str_attr(i, "principal_arn"));
        let request = ctx
            .eks
            .create_access_entry()
            .cluster_name(cluster)
            .principal_arn(principal)
            .r#type(str_attr(i, "type"))
            .set_kubernetes_groups(Some(strings_attr(i, "kubernetes_groups")).filter(|g| !g.is_empty()))
            .set_username(i.get("username").and_then(Value::as_str).map(str::to_string))
            .set_tags(Some(eks::tag_map(ctx, req.address, i)))
            .client_request_token(req.token);
        let entry = match ctx.call(Service::Eks, "CreateAccessEntry", request.send()).await {
            Ok(out) => out.access_entry,
            // An interrupted earlier run may have made it: take it only if it is ours.
            Err(e) if e.has_code("ResourceInUseException") => match describe(ctx, cluster, principal).await? {
                Some(a) if eks::is_ours(ctx, a.tags(), req.address) => Some(a),
                _ => {
                    return Err(e.taken_by_other(&format!(
                        "{principal} already has an access entry in {cluster}; EKS makes one itself for the node role of a managed node group (and for the cluster's creator), so leave this entry out of the stack or use another role"
                    )));
                }
            },
            Err(e) => return Err(e),
        };
        for (arn, scope) in policies(i) {
            associate(ctx, cluster, principal, &arn, &scope).await?;
        }
        Ok(recorded(entry.as_ref().and_then(AccessEntry::access_entry_arn).unwrap_or_default()))
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        let mut out = vec![];
        for c in ctx.stack_clusters().await? {
            // A cluster in CONFIG_MAP mode has no access entries, and EKS refuses to list them.
            let mode = c.access_config().and_then(|a| a.authentication_mode());
            if !matches!(mode, Some(AuthenticationMode::Api | AuthenticationMode::ApiAndConfigMap)) {
                continue;
            }
            let cluster = c.name().unwrap_or_default().to_string();
            let pages = ctx.eks.list_access_entries().cluster_name(&cluster).into_paginator().send();
            let listed =
                ctx.all_pages(Service::Eks, "ListAccessEntries", pages, |p| p.access_entries.unwrap_or_default());
            let Some(principals) = listed.await.absent_ok()? else { continue };
            // ListAccessEntries names principals only: each is described for its type and tags.
            // Entries EKS made itself (node groups, the creator) carry no gpustack tags.
            for principal in principals {
                let Some(a) = describe(ctx, &cluster, &principal).await? else { continue };
                let all: BTreeMap<String, String> = a.tags().cloned().unwrap_or_default().into_iter().collect();
                if all.get(tags::STACK) != Some(&ctx.stack) {
                    continue;
                }
                let attrs = observe(ctx, &cluster, &principal, &a, &all).await?;
                let rec = recorded(a.access_entry_arn().unwrap_or_default());
                out.push(Observed {
                    address: all.get(tags::ADDRESS).cloned(),
                    id: rec.id,
                    attrs,
                    outputs: rec.outputs,
                    retained: false,
                });
            }
        }
        Ok(out)
    }

    async fn update(
        &self,
        ctx: &Ctx,
        _address: &str,
        id: &str,
        old: &Attrs,
        new: &Attrs,
        changed: &[String],
    ) -> Result<Recorded> {
        let (cluster, principal) = (str_attr(new, "cluster"), str_attr(new, "principal_arn"));
        let has = |k: &str| changed.iter().any(|c| c == k);
        if has("kubernetes_groups") || has("username") {
            // Groups are replaced as a whole (an empty list clears them). A username taken out of
            // the stack is left as it is: EKS has no way back to the one it would make up.
            let mut request = ctx
                .eks
                .update_access_entry()
                .cluster_name(cluster)
                .principal_arn(principal)
                .set_kubernetes_groups(Some(strings_attr(new, "kubernetes_groups")));
            if has("username")
                && let Some(u) = new.get("username").and_then(Value::as_str)
            {
                request = request.username(u);
            }
            ctx.call(Service::Eks, "UpdateAccessEntry", request.send()).await?;
        }
        if changed.iter().any(|c| c == "policies") {
            let (before, after): (BTreeMap<_, _>, BTreeMap<_, _>) =
                (policies(old).into_iter().collect(), policies(new).into_iter().collect());
            for arn in before.keys().filter(|a| !after.contains_key(*a)) {
                let request =
                    ctx.eks.disassociate_access_policy().cluster_name(cluster).principal_arn(principal).policy_arn(arn);
                ctx.call(Service::Eks, "DisassociateAccessPolicy", request.send()).await.absent_ok()?;
            }
            // Associating a policy again replaces its scope (EKS UG `access-policies`).
            for (arn, scope) in after.iter().filter(|(a, sc)| before.get(*a) != Some(sc)) {
                associate(ctx, cluster, principal, arn, scope).await?;
            }
        }
        if changed.iter().any(|c| c == "tags") {
            eks::sync_tags(ctx, id, old, new).await?;
        }
        Ok(recorded(id))
    }

    async fn delete(&self, ctx: &Ctx, _address: &str, _id: &str, inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        // Deleting an entry deletes its policy associations (EKS UG `deleting-access-entries`).
        let request = ctx
            .eks
            .delete_access_entry()
            .cluster_name(str_attr(inputs, "cluster"))
            .principal_arn(str_attr(inputs, "principal_arn"));
        ctx.call(Service::Eks, "DeleteAccessEntry", request.send()).await.absent_ok()?;
        Ok(())
    }
}

/// The inputs as DescribeAccessEntry (and, for a STANDARD entry, its policy associations) show them.
async fn observe(
    ctx: &Ctx,
    cluster: &str,
    principal: &str,
    a: &AccessEntry,
    all: &BTreeMap<String, String>,
) -> Result<Attrs> {
    let kind = a.r#type().unwrap_or_default().to_string();
    let mut attrs = Attrs::from([
        ("cluster".into(), Value::str(cluster)),
        ("principal_arn".into(), Value::str(principal)),
        ("type".into(), Value::str(kind.clone())),
        ("tags".into(), tags::observed(all)),
    ]);
    // Only a STANDARD entry, or an Auto Mode EC2 entry, may be asked for its policies (aws-facts §12).
    let policies = if takes_policies(&kind) { associated(ctx, cluster, principal).await? } else { vec![] };
    attrs.insert("policies".into(), Value::List(policies));
    // EKS puts node entries in system:nodes itself; only a STANDARD entry's groups
    // are the stack's.
    if kind == "STANDARD" {
        let groups = a.kubernetes_groups().iter().map(|g| Value::str(g.clone())).collect();
        attrs.insert("kubernetes_groups".into(), Value::List(groups));
        if let Some(u) = a.username() {
            attrs.insert("username".into(), Value::str(u));
        }
    }
    EksAccessEntry.normalize(&mut attrs);
    Ok(attrs)
}

/// Groups and a username only on STANDARD entries, and none of the names EKS keeps for itself.
fn groups_and_username(r: &Resource, diags: &mut Vec<Diagnostic>) {
    let kind = r.attrs.get("type").and_then(|e| e.as_literal()).and_then(Value::as_str).unwrap_or("STANDARD");
    for k in ["kubernetes_groups", "username"] {
        if let Some(e) = r.attrs.get(k)
            && kind != "STANDARD"
        {
            diags.push(
                Diagnostic::error(
                    format!("`{}` is {kind}, which takes no `{k}` (only STANDARD entries do)", r.address),
                    e.span.clone(),
                )
                .help(format!("remove `{k}`: EKS gives node entries their own identity (system:nodes)")),
            );
        }
    }
    if let Some(e) = r.attrs.get("kubernetes_groups")
        && let Value::List(groups) = e.resolve(&|_| Value::Unknown)
    {
        for g in groups.iter().filter_map(Value::as_str).filter(|g| g.starts_with("system:")) {
            diags.push(
                Diagnostic::error(format!("`{}`: EKS refuses the Kubernetes group \"{g}\": group names cannot start with system:", r.address), e.span.clone())
                    .help("bind your own group (e.g. \"platform-admins\") to a ClusterRole, or associate an access policy such as AmazonEKSClusterAdminPolicy"),
            );
        }
    }
    if let Some(e) = r.attrs.get("username")
        && let Some(u) = e.as_literal().and_then(Value::as_str)
        && let Some(p) = USERNAME_RESERVED.iter().find(|p| u.starts_with(**p))
    {
        diags.push(
            Diagnostic::error(
                format!("`{}`: EKS refuses the username \"{u}\": it cannot start with {p}", r.address),
                e.span.clone(),
            )
            .help(
                "pick a name outside system:, eks:, aws:, amazon: and iam:, or leave username out and let EKS make it",
            ),
        );
    }
    if let Some(e) = r.attrs.get("username")
        && let Some(u) = e.as_literal().and_then(Value::as_str)
        && session_name_without_colon(u)
    {
        diags.push(
            Diagnostic::error(
                format!(
                    "`{}`: EKS refuses the username \"{u}\": it needs a colon before {{{{SessionName}}}}",
                    r.address
                ),
                e.span.clone(),
            )
            .help("put a prefix and a colon first, e.g. username = \"ops:{{SessionName}}\""),
        );
    }
}

/// Why EKS refuses a `{{SessionName}}` username: "the username must include a colon before
/// {{SessionName}}" (EKS UG `creating-access-entries`; the emulator's `eks_access.py` checks the
/// same). `{{SessionNameRaw}}` starts with the same text, so it is covered.
fn session_name_without_colon(u: &str) -> bool {
    u.find("{{SessionName").is_some_and(|at| !u[..at].contains(':'))
}

/// `arn:<partition>:iam::<account>:role/…` or `…:user/…` (a path is allowed).
pub fn is_principal_arn(arn: &str) -> bool {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    matches!(parts.as_slice(), ["arn", p, "iam", "", account, rest]
        if p.starts_with("aws") && account.len() == 12 && account.bytes().all(|b| b.is_ascii_digit())
            && (rest.starts_with("role/") || rest.starts_with("user/")))
}

/// The scope a `scope` value stands for: None for a cluster-wide scope, the namespaces
/// otherwise; `None` outside when the value is neither.
fn scope_of(v: &Value) -> Option<Option<Vec<String>>> {
    match v {
        Value::Str(s) if s == "cluster" => Some(None),
        Value::List(l) if !l.is_empty() => l
            .iter()
            .map(|n| n.as_str().filter(|n| !n.is_empty()).map(str::to_string))
            .collect::<Option<Vec<_>>>()
            .map(Some),
        _ => None,
    }
}

/// Each written policy's `policy_arn` and `scope` expressions, for the offline checks.
fn written_policies(r: &Resource) -> Vec<(Option<&crate::stack::Expr>, Option<&crate::stack::Expr>)> {
    match r.attrs.get("policies").map(|e| &e.kind) {
        Some(ExprKind::List(items)) => items
            .iter()
            .filter_map(|p| match &p.kind {
                ExprKind::Table(t) => Some((t.get("policy_arn"), t.get("scope"))),
                _ => None,
            })
            .collect(),
        _ => vec![],
    }
}

/// The `policies` input as (policy ARN, scope).
fn policies(a: &Attrs) -> Vec<(String, Value)> {
    a.get("policies")
        .and_then(Value::as_list)
        .unwrap_or_default()
        .iter()
        .filter_map(|p| {
            let t = p.as_table()?;
            Some((t.get("policy_arn")?.as_str()?.to_string(), t.get("scope")?.clone()))
        })
        .collect()
}

async fn associate(ctx: &Ctx, cluster: &str, principal: &str, policy: &str, scope: &Value) -> Result<()> {
    let scope = match scope_of(scope) {
        Some(None) => AccessScope::builder().r#type(AccessScopeType::Cluster).build(),
        Some(Some(ns)) => AccessScope::builder().r#type(AccessScopeType::Namespace).set_namespaces(Some(ns)).build(),
        None => {
            return Err(AwsError {
                operation: "AssociateAccessPolicy",
                code: None,
                detail: format!("the scope of {policy} is neither \"cluster\" nor a list of namespaces"),
            });
        }
    };
    let request = ctx
        .eks
        .associate_access_policy()
        .cluster_name(cluster)
        .principal_arn(principal)
        .policy_arn(policy)
        .access_scope(scope);
    ctx.call(Service::Eks, "AssociateAccessPolicy", request.send()).await?;
    Ok(())
}

/// A STANDARD entry's policies, as the `policies` input writes them.
async fn associated(ctx: &Ctx, cluster: &str, principal: &str) -> Result<Vec<Value>> {
    let pages = ctx
        .eks
        .list_associated_access_policies()
        .cluster_name(cluster)
        .principal_arn(principal)
        .into_paginator()
        .send();
    let found = ctx
        .all_pages(Service::Eks, "ListAssociatedAccessPolicies", pages, |p| {
            p.associated_access_policies.unwrap_or_default()
        })
        .await?;
    Ok(found
        .iter()
        .map(|p| {
            let scope = match p.access_scope() {
                Some(sc) if sc.r#type() == Some(&AccessScopeType::Namespace) => {
                    Value::List(sc.namespaces().iter().map(|n| Value::str(n.clone())).collect())
                }
                _ => Value::str("cluster"),
            };
            Value::Table(BTreeMap::from([
                ("policy_arn".into(), Value::str(p.policy_arn().unwrap_or_default())),
                ("scope".into(), scope),
            ]))
        })
        .collect())
}

async fn describe(ctx: &Ctx, cluster: &str, principal: &str) -> Result<Option<AccessEntry>> {
    let request = ctx.eks.describe_access_entry().cluster_name(cluster).principal_arn(principal);
    Ok(ctx.call(Service::Eks, "DescribeAccessEntry", request.send()).await.absent_ok()?.and_then(|o| o.access_entry))
}

fn recorded(arn: &str) -> Recorded {
    Recorded { id: arn.to_string(), outputs: Attrs::from([("arn".into(), Value::str(arn))]) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_session_name_username_needs_a_colon_before_it() {
        assert!(super::session_name_without_colon("{{SessionName}}"));
        assert!(super::session_name_without_colon("ops-{{SessionNameRaw}}"));
        assert!(!super::session_name_without_colon("platform-ops:{{SessionName}}"));
        assert!(!super::session_name_without_colon("ops:{{SessionNameRaw}}"));
        assert!(!super::session_name_without_colon("ops"));
    }

    use super::*;

    #[test]
    fn principals_are_iam_roles_or_users() {
        assert!(is_principal_arn("arn:aws:iam::123456789012:role/gpustack/k/k-node"));
        assert!(is_principal_arn("arn:aws-cn:iam::123456789012:user/alice"));
        assert!(!is_principal_arn("arn:aws:sts::123456789012:assumed-role/x/y"));
        assert!(!is_principal_arn("arn:aws:iam::1234:role/x"));
        assert!(!is_principal_arn("role/x"));
    }

    #[test]
    fn a_scope_is_the_cluster_or_namespaces() {
        assert_eq!(scope_of(&Value::str("cluster")), Some(None));
        assert_eq!(scope_of(&Value::List(vec![Value::str("a")])), Some(Some(vec!["a".to_string()])));
        assert_eq!(scope_of(&Value::str("namespace")), None);
        assert_eq!(scope_of(&Value::List(vec![])), None);
        assert_eq!(scope_of(&Value::List(vec![Value::Int(1)])), None);
    }

    /// The username EKS made up is no change while the file leaves it out; one the file sets
    /// is compared (an import reads it, a refresh only when the stack chose it).
    #[test]
    fn an_imported_username_counts_only_when_the_file_sets_one() {
        let observed =
            Attrs::from([("username".into(), Value::str("arn:aws:sts::1:assumed-role/ops/{{SessionName}}"))]);
        let mut cur = EksAccessEntry.current(&Attrs::new(), &observed);
        EksAccessEntry.settle(&mut cur, &Attrs::new());
        assert!(!cur.contains_key("username"));
        let wants = Attrs::from([("username".into(), Value::str("ops"))]);
        let mut cur = EksAccessEntry.current(&Attrs::new(), &observed);
        EksAccessEntry.settle(&mut cur, &wants);
        assert_ne!(cur.get("username"), wants.get("username"), "a different username is the update");
    }
}
