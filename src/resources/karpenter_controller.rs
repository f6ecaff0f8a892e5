//! `karpenter_controller`: what the Karpenter controller needs on AWS's side, for one cluster
//! (issue 12, aws-facts §8, §9, §11): its IAM role (trusted by EKS Pod Identity) with the
//! controller policy of the given Karpenter version inline, the SQS interruption queue with
//! its policy, the EventBridge rules that feed the queue, and the Pod Identity association
//! that gives the role to the controller's service account. It installs nothing in the
//! cluster: the Helm chart is rendered (`gpustack manifests`) with its outputs.
//!
//! Physical names: the role `<stack>-<name>-karpenter` under `/gpustack/<stack>/karpenter/`,
//! the queue `<stack>-<name>`, the rules `<stack>-<name>-<suffix>` (`interruption::RULES`).
//! A version change rewrites the policy and adds or removes the fifth rule in place; a new
//! namespace or service account makes a new association; a new cluster replaces it all.
//! Refresh finds controllers by their roles and reports a queue, policy, rule or association
//! that is missing or changed as a change of `version`, so the update that follows repairs it.

mod identity;
mod interruption;
pub mod policy;

use std::collections::BTreeSet;

use async_trait::async_trait;
use aws_sdk_eks::types::PodIdentityAssociation;

use super::{Create, Kind, Observed, Recorded, ReplaceOrder, Result, Schema, TAGS, str_attr};
use crate::aws::{AwsError, Ctx, eks, iam, tags};
use crate::stack::schema::{Attr, Default as Dflt, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

pub use interruption::{QUEUE_NAME_MAX, RULE_NAME_MAX};

pub struct KarpenterController;

/// IAM role names are 1 to 64 characters (IAM UG "IAM and AWS STS quotas").
pub const ROLE_NAME_MAX: usize = 64;

const ATTRS: &[Attr] = &[
    Attr::req("cluster", Ty::Str, OnChange::Replace),
    Attr::req("node_role", Ty::Str, OnChange::Update),
    Attr::req("version", Ty::Str, OnChange::Update),
    // Karpenter's getting-started guide installs into kube-system; its chart names the service
    // account after the release, `karpenter` (aws-facts §11).
    Attr::opt("namespace", Ty::Str, Dflt::Str("kube-system"), OnChange::Update),
    Attr::opt("service_account", Ty::Str, Dflt::Str("karpenter"), OnChange::Update),
    TAGS,
];

/// Observed-only attributes (not in the schema): what refresh found of each part, turned
/// into a note on `version` by `current`.
const QUEUE: &str = "found.queue";
const POLICY: &str = "found.policy";
const RULES: &str = "found.rules";
const ASSOCIATION: &str = "found.association";

impl Schema for KarpenterController {
    fn name(&self) -> &'static str {
        "karpenter_controller"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("role_arn", Ty::Str), ("queue_name", Ty::Str), ("queue_arn", Ty::Str), ("association_id", Ty::Str)]
    }
}

/// The physical names of controller `name` (the resource name) of `stack`.
pub struct Names {
    pub role: String,
    pub queue: String,
    /// Rules are `<rules>-<suffix>`.
    pub rules: String,
}

impl Names {
    pub fn of(stack: &str, name: &str) -> Names {
        Names {
            role: format!("{stack}-{name}-karpenter"),
            queue: format!("{stack}-{name}"),
            rules: format!("{stack}-{name}"),
        }
    }

    /// The longest rule name (the longest suffix).
    pub fn longest_rule(&self) -> String {
        format!("{}-{}", self.rules, "x".repeat(interruption::longest_suffix()))
    }

    fn of_address(stack: &str, address: &str) -> Names {
        Names::of(stack, address.split_once('.').map_or(address, |(_, n)| n))
    }
}

/// "1.6.8" → (1, 6): a Karpenter version's major and minor.
pub fn version(v: &str) -> Option<(u32, u32)> {
    eks::minor(v)
}

#[async_trait]
impl Kind for KarpenterController {
    fn actions(&self) -> &'static [&'static str] {
        &[
            "iam:CreateRole",
            "iam:GetRole",
            "iam:DeleteRole",
            "iam:ListRoles",
            "iam:TagRole",
            "iam:UntagRole",
            "iam:PutRolePolicy",
            "iam:GetRolePolicy",
            "iam:DeleteRolePolicy",
            // CreatePodIdentityAssociation passes the role to EKS Pod Identity.
            "iam:PassRole",
            "sqs:CreateQueue",
            "sqs:GetQueueUrl",
            "sqs:GetQueueAttributes",
            "sqs:SetQueueAttributes",
            "sqs:DeleteQueue",
            "sqs:ListQueues",
            "sqs:ListQueueTags",
            "sqs:TagQueue",
            "sqs:UntagQueue",
            "events:PutRule",
            "events:PutTargets",
            "events:RemoveTargets",
            "events:DeleteRule",
            "events:ListRules",
            "events:ListRuleNamesByTarget",
            "events:TagResource",
            "events:UntagResource",
            "eks:CreatePodIdentityAssociation",
            "eks:DescribePodIdentityAssociation",
            "eks:ListPodIdentityAssociations",
            "eks:DeletePodIdentityAssociation",
            "eks:ListClusters",
            "eks:DescribeCluster",
            "eks:TagResource",
            "eks:UntagResource",
        ]
    }
    fn replace_order(&self) -> ReplaceOrder {
        // Role, queue and rule names are fixed by the address.
        ReplaceOrder::DeleteBeforeCreate
    }
    fn outputs_changed_by_update(&self) -> &'static [&'static str] {
        &["association_id"]
    }

    fn validate(&self, r: &Resource, diags: &mut Vec<Diagnostic>) {
        super::node_group::require_stack_cluster(r, diags);
        // Kubernetes object names, as EKS checks them (DNS-1123 label and subdomain).
        for (k, label) in [("namespace", true), ("service_account", false)] {
            if let Some(e) = r.attrs.get(k)
                && let Some(v) = e.as_literal().and_then(Value::as_str)
                && !dns_name(v, label)
            {
                diags.push(
                    Diagnostic::error(format!("`{}`: {k} \"{v}\" is not a Kubernetes name", r.address), e.span.clone())
                        .help("use lowercase letters, digits and '-' (and '.' in a service account), starting and ending with a letter or digit"),
                );
            }
        }
    }

    fn current(&self, recorded: &Attrs, observed: &Attrs) -> Attrs {
        let mut cur = recorded.clone();
        cur.extend(observed.iter().filter(|(k, _)| !k.starts_with("found.")).map(|(k, v)| (k.clone(), v.clone())));
        if let Some(v) = recorded.get("version").and_then(Value::as_str)
            && let Some(ver) = version(v)
        {
            let out = out_of_shape(ver, observed);
            if !out.is_empty() {
                cur.insert("version".into(), Value::str(format!("{v} ({})", out.join("; "))));
            }
        }
        cur
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let (i, n) = (req.inputs, Names::of_address(&ctx.stack, req.address));
        let ver = version_of(i)?;
        let tag_map = eks::tag_map(ctx, req.address, i);
        (req.report)("creating the controller's IAM role");
        let role_arn = identity::create_role(ctx, &n.role, req.address, &tags::all_tags(ctx, req.address, i)).await?;
        let scope = scope(ctx, &role_arn, &n, i);
        (req.report)("creating the interruption queue");
        interruption::ensure_queue(ctx, &n.queue, &scope.queue_arn, &tag_map, req.report).await?;
        identity::put_policy(ctx, &n.role, &policy::document(ver, &scope)).await?;
        (req.report)("creating the EventBridge rules");
        interruption::sync_rules(ctx, &n.rules, ver, &scope.queue_arn, &tag_map, true).await?;
        (req.report)("creating the Pod Identity association");
        let assoc = identity::ensure_association(ctx, &account(i), &role_arn, &tag_map, req.token).await?;
        Ok(recorded(&n, &role_arn, &scope.queue_arn, Some(&assoc)))
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        // Controllers are found by their roles; the other parts are looked up for those found.
        let roles = identity::roles(ctx).await?;
        if roles.is_empty() {
            return Ok(vec![]);
        }
        let prefix = format!("{}-", ctx.stack);
        let (queues, associations) =
            tokio::try_join!(interruption::queues(ctx, &prefix), identity::stack_associations(ctx))?;
        let mut out = vec![];
        for role in roles {
            let Some(name) =
                role.role_name().strip_prefix(&format!("{}-", ctx.stack)).and_then(|r| r.strip_suffix("-karpenter"))
            else {
                continue;
            };
            let n = Names::of(&ctx.stack, name);
            let (partition, account) = arn_parts(role.arn());
            let queue_arn = interruption::queue_arn(&partition, &region(ctx), &account, &n.queue);
            let doc = identity::policy(ctx, &n.role).await?;
            let queue = match queues.get(&n.queue) {
                None => "missing",
                Some(url) if interruption::queue_in_shape(ctx, url).await? => "ok",
                Some(_) => "changed",
            };
            let targeted: Vec<Value> = interruption::targeting(ctx, &queue_arn)
                .await?
                .iter()
                .filter_map(|r| interruption::suffix_of(&n.rules, r).map(Value::str))
                .collect();
            let assoc = associations.iter().find(|a| a.role_arn() == Some(role.arn()));
            let mut attrs = Attrs::from([
                (QUEUE.into(), Value::str(queue)),
                (RULES.into(), Value::List(targeted)),
                (ASSOCIATION.into(), Value::Bool(assoc.is_some())),
            ]);
            let (cluster, node_role) = doc.as_ref().map(policy::named).unwrap_or_default();
            let found_policy = match (&doc, &cluster, &node_role) {
                (Some(d), Some(c), Some(nr)) => {
                    let scope = policy::Scope {
                        partition,
                        region: region(ctx),
                        account,
                        cluster: c.clone(),
                        node_role: nr.clone(),
                        queue_arn: queue_arn.clone(),
                    };
                    let same = policy::CHANGES.iter().find(|g| policy::document(**g, &scope) == *d);
                    same.map_or("changed".to_string(), |(a, b)| format!("{a}.{b}"))
                }
                (Some(_), _, _) => "changed".into(),
                (None, _, _) => "missing".into(),
            };
            attrs.insert(POLICY.into(), Value::str(found_policy));
            if let Some(nr) = node_role {
                attrs.insert("node_role".into(), Value::str(nr));
            }
            if let Some(c) = cluster.or(assoc.and_then(|a| a.cluster_name().map(str::to_string))) {
                attrs.insert("cluster".into(), Value::str(c));
            }
            if let Some(a) = assoc {
                attrs.insert("namespace".into(), Value::str(a.namespace().unwrap_or_default()));
                attrs.insert("service_account".into(), Value::str(a.service_account().unwrap_or_default()));
                let all = a.tags().cloned().unwrap_or_default().into_iter().collect();
                attrs.insert("tags".into(), tags::observed(&all));
            }
            let rec = recorded(&n, role.arn(), &queue_arn, assoc);
            out.push(Observed {
                address: Some(format!("karpenter_controller.{name}")),
                id: rec.id,
                attrs,
                outputs: rec.outputs,
                retained: false,
            });
        }
        Ok(out)
    }

    async fn update(
        &self,
        ctx: &Ctx,
        address: &str,
        id: &str,
        old: &Attrs,
        new: &Attrs,
        changed: &[String],
    ) -> Result<Recorded> {
        let has = |f: &str| changed.iter().any(|c| c == f);
        let n = Names::of_address(&ctx.stack, address);
        let ver = version_of(new)?;
        let role = identity::get_role(ctx, id).await?.ok_or_else(|| AwsError {
            operation: "GetRole",
            code: Some("NoSuchEntity".into()),
            detail: format!("the controller's role {id} is gone; run `gpustack plan` to create it again"),
        })?;
        let role_arn = role.arn().to_string();
        let scope = scope(ctx, &role_arn, &n, new);
        let tag_map = eks::tag_map(ctx, address, new);
        // `version` also stands for a part refresh found missing or changed: make every part
        // what this version wants.
        if has("version") || has("node_role") {
            interruption::ensure_queue(ctx, &n.queue, &scope.queue_arn, &tag_map, &|_| {}).await?;
            identity::put_policy(ctx, id, &policy::document(ver, &scope)).await?;
            interruption::sync_rules(ctx, &n.rules, ver, &scope.queue_arn, &tag_map, false).await?;
        }
        let token = uuid::Uuid::new_v4().to_string();
        let assoc = identity::ensure_association(ctx, &account(new), &role_arn, &tag_map, &token).await?;
        // The old service account's association goes, if it still gives this role. (A controller
        // adopted without its association has no old service account.)
        let before = account(old);
        if (has("namespace") || has("service_account"))
            && !before.namespace.is_empty()
            && !before.service_account.is_empty()
            && let Some(a) = identity::find(ctx, &before).await?
            && a.role_arn() == Some(role_arn.as_str())
        {
            identity::delete_association(ctx, str_attr(old, "cluster"), a.association_id().unwrap_or_default()).await?;
        }
        if has("tags") {
            let changes = tags::changes(old, new);
            iam::sync_role_tags(ctx, id, &changes).await?;
            interruption::sync_tags(ctx, &n.queue, &n.rules, &changes.removed, &changes.set.into_iter().collect())
                .await?;
            eks::sync_tags(ctx, assoc.association_arn().unwrap_or_default(), old, new).await?;
        }
        Ok(recorded(&n, &role_arn, &scope.queue_arn, Some(&assoc)))
    }

    /// In reverse of creation: the association, the rules (targets first), the queue, the role.
    async fn delete(&self, ctx: &Ctx, address: &str, id: &str, inputs: &Attrs, outputs: &Attrs) -> Result<()> {
        let n = Names::of_address(&ctx.stack, address);
        let assoc = str_attr(outputs, "association_id");
        if !assoc.is_empty() {
            identity::delete_association(ctx, str_attr(inputs, "cluster"), assoc).await?;
        }
        interruption::delete_rules(ctx, &n.rules).await?;
        interruption::delete_queue(ctx, &n.queue).await?;
        identity::delete_role(ctx, id).await
    }
}

/// What refresh found that the recorded `version` (major, minor) does not want, in words.
fn out_of_shape(version: (u32, u32), observed: &Attrs) -> Vec<String> {
    let mut out = vec![];
    match observed.get(QUEUE).and_then(Value::as_str) {
        Some("missing") => out.push("interruption queue missing".to_string()),
        Some("changed") => out.push("interruption queue settings changed".to_string()),
        _ => {}
    }
    if let Some(found) = observed.get(POLICY).and_then(Value::as_str) {
        let want = policy::generation(version).map(|(a, b)| format!("{a}.{b}"));
        match found {
            "missing" => out.push("controller policy missing".to_string()),
            f if Some(f) != want.as_deref() => out.push("controller policy changed".to_string()),
            _ => {}
        }
    }
    if let Some(Value::List(found)) = observed.get(RULES) {
        let found: BTreeSet<&str> = found.iter().filter_map(Value::as_str).collect();
        let want = interruption::suffixes_for(version);
        let missing: Vec<&str> = want.iter().filter(|r| !found.contains(*r)).copied().collect();
        let extra: Vec<&str> = found.iter().filter(|r| !want.contains(*r)).copied().collect();
        if !missing.is_empty() {
            out.push(format!("rules missing: {}", missing.join(", ")));
        }
        if !extra.is_empty() {
            out.push(format!("rules this version does not use: {}", extra.join(", ")));
        }
    }
    if observed.get(ASSOCIATION) == Some(&Value::Bool(false)) {
        out.push("Pod Identity association missing".to_string());
    }
    out
}

fn version_of(i: &Attrs) -> Result<(u32, u32)> {
    let v = str_attr(i, "version");
    version(v).ok_or_else(|| AwsError {
        operation: "karpenter_controller",
        code: None,
        detail: format!("version \"{v}\" is not a Karpenter version like \"1.6.8\""),
    })
}

fn account(i: &Attrs) -> identity::Account<'_> {
    identity::Account {
        cluster: str_attr(i, "cluster"),
        namespace: str_attr(i, "namespace"),
        service_account: str_attr(i, "service_account"),
    }
}

/// The stack's region, as the SDK clients were built for it.
fn region(ctx: &Ctx) -> String {
    ctx.eks.config().region().map(|r| r.to_string()).unwrap_or_default()
}

/// (partition, account) of an ARN; the controller's role is in the account everything else
/// is made in, so no STS call is needed.
fn arn_parts(arn: &str) -> (String, String) {
    let parts: Vec<&str> = arn.splitn(6, ':').collect();
    (parts.get(1).unwrap_or(&"aws").to_string(), parts.get(4).unwrap_or(&"").to_string())
}

fn scope(ctx: &Ctx, role_arn: &str, n: &Names, i: &Attrs) -> policy::Scope {
    let (partition, account) = arn_parts(role_arn);
    let region = region(ctx);
    policy::Scope {
        queue_arn: interruption::queue_arn(&partition, &region, &account, &n.queue),
        partition,
        region,
        account,
        cluster: str_attr(i, "cluster").to_string(),
        node_role: str_attr(i, "node_role").to_string(),
    }
}

fn recorded(n: &Names, role_arn: &str, queue_arn: &str, assoc: Option<&PodIdentityAssociation>) -> Recorded {
    let mut outputs = Attrs::from([
        ("role_arn".into(), Value::str(role_arn)),
        ("queue_name".into(), Value::str(n.queue.clone())),
        ("queue_arn".into(), Value::str(queue_arn)),
    ]);
    if let Some(id) = assoc.and_then(|a| a.association_id()) {
        outputs.insert("association_id".into(), Value::str(id));
    }
    Recorded { id: n.role.clone(), outputs }
}

/// A Kubernetes DNS-1123 label (`label`) or subdomain.
fn dns_name(v: &str, label: bool) -> bool {
    super::pod_identity_association::kubernetes_name(v, label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_stack_and_the_resource() {
        let n = Names::of("ml", "main");
        assert_eq!((n.role.as_str(), n.queue.as_str(), n.rules.as_str()), ("ml-main-karpenter", "ml-main", "ml-main"));
        assert_eq!(n.longest_rule().len(), "ml-main-rebalance".len());
        assert_eq!(Names::of_address("ml", "karpenter_controller.main").role, "ml-main-karpenter");
    }

    #[test]
    fn drift_is_said_against_the_recorded_version() {
        let found = |queue: &str, policy: &str, rules: &[&str], assoc: bool| {
            Attrs::from([
                (QUEUE.into(), Value::str(queue)),
                (POLICY.into(), Value::str(policy)),
                (RULES.into(), Value::List(rules.iter().map(|r| Value::str(*r)).collect())),
                (ASSOCIATION.into(), Value::Bool(assoc)),
            ])
        };
        let four = ["health", "spot", "rebalance", "state"];
        assert!(out_of_shape((1, 6), &found("ok", "1.6", &four, true)).is_empty());
        assert!(out_of_shape((1, 8), &found("ok", "1.7", &four, true)).is_empty());
        assert_eq!(out_of_shape((1, 10), &found("ok", "1.9", &four, true)), ["rules missing: reserved"]);
        assert_eq!(
            out_of_shape((1, 6), &found("missing", "1.7", &four[..3], false)),
            [
                "interruption queue missing",
                "controller policy changed",
                "rules missing: state",
                "Pod Identity association missing"
            ]
        );
        let recorded = Attrs::from([("version".into(), Value::str("1.10.1"))]);
        let cur = KarpenterController.current(&recorded, &found("ok", "1.9", &four, true));
        assert_eq!(cur["version"], Value::str("1.10.1 (rules missing: reserved)"));
        assert!(!cur.contains_key(QUEUE), "observed-only attributes stay out of the inputs");
    }

    #[test]
    fn kubernetes_names() {
        assert!(dns_name("kube-system", true));
        assert!(!dns_name("Kube", true));
        assert!(!dns_name("a.b", true));
        assert!(dns_name("a.b", false));
        assert!(!dns_name("-a", false));
    }

    #[test]
    fn arns_give_partition_and_account() {
        assert_eq!(
            arn_parts("arn:aws-cn:iam::123456789012:role/gpustack/s/karpenter/s-k-karpenter"),
            ("aws-cn".to_string(), "123456789012".to_string())
        );
    }
}
