//! `pod_identity_association`: an EKS Pod Identity association that gives an IAM role to a
//! Kubernetes service account (EKS UG `pod-id-association`): `cluster`, `namespace`,
//! `service_account`, `role`. The role must trust `pods.eks.amazonaws.com` with
//! `sts:AssumeRole` and `sts:TagSession` (an `iam_role` with `pod_identity = true`), and the
//! cluster needs the `eks-pod-identity-agent` add-on for pods to get credentials (rules in
//! `rules/workload_iam.rs`). A new role is an update in place (UpdatePodIdentityAssociation);
//! the namespace and service account cannot change ("You can't change the namespace or
//! service account", botocore eks `UpdatePodIdentityAssociationRequest`): a new association.
//!
//! The association mechanics here are shared with `karpenter_controller`, which makes its
//! controller's association itself.

use std::collections::{BTreeMap, HashMap};

use async_trait::async_trait;
use aws_sdk_eks::operation::create_pod_identity_association::CreatePodIdentityAssociationOutput;
use aws_sdk_eks::operation::create_pod_identity_association::builders::CreatePodIdentityAssociationFluentBuilder;
use aws_sdk_eks::types::PodIdentityAssociation;

use super::iam_role::propagation::{retrying, role_not_visible};
use super::{Create, Imported, Kind, Observed, Recorded, Result, Schema, TAGS, str_attr};
use crate::aws::{Absent, AwsError, Ctx, Service, eks, tags};
use crate::stack::schema::{Attr, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

pub struct PodIdentityAssociationKind;

const ATTRS: &[Attr] = &[
    Attr::req("cluster", Ty::Str, OnChange::Replace),
    Attr::req("namespace", Ty::Str, OnChange::Replace),
    Attr::req("service_account", Ty::Str, OnChange::Replace),
    Attr::req("role", Ty::Str, OnChange::Update),
    TAGS,
];

impl Schema for PodIdentityAssociationKind {
    fn name(&self) -> &'static str {
        "pod_identity_association"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("association_id", Ty::Str), ("arn", Ty::Str)]
    }
}

#[async_trait]
impl Kind for PodIdentityAssociationKind {
    fn actions(&self) -> &'static [&'static str] {
        &[
            "eks:CreatePodIdentityAssociation",
            "eks:DescribePodIdentityAssociation",
            "eks:ListPodIdentityAssociations",
            "eks:UpdatePodIdentityAssociation",
            "eks:DeletePodIdentityAssociation",
            "eks:ListClusters",
            "eks:DescribeCluster",
            "eks:TagResource",
            "eks:UntagResource",
            // The association passes its role to EKS Pod Identity (EKS UG `pod-id-association`).
            "iam:PassRole",
        ]
    }

    fn validate(&self, r: &Resource, diags: &mut Vec<Diagnostic>) {
        super::node_group::require_stack_cluster(r, diags);
        // Kubernetes object names (EKS refuses others; the emulator checks the same).
        for (key, label) in [("namespace", true), ("service_account", false)] {
            if let Some(e) = r.attrs.get(key)
                && let Some(Value::Str(v)) = e.as_literal()
                && !kubernetes_name(v, label)
            {
                let what = if label { "a DNS-1123 label" } else { "a DNS-1123 subdomain" };
                diags.push(
                    Diagnostic::error(format!("`{}`: {key} \"{v}\" is not {what}", r.address), e.span.clone())
                        .help("Kubernetes names are lowercase letters, digits and '-' (and '.' in a service account name), at most 63 characters per part"),
                );
            }
        }
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let i = req.inputs;
        let at = account(i);
        let request = ctx
            .eks
            .create_pod_identity_association()
            .cluster_name(at.cluster)
            .namespace(at.namespace)
            .service_account(at.service_account)
            .role_arn(str_attr(i, "role"))
            .set_tags(Some(eks::tag_map(ctx, req.address, i)))
            .client_request_token(req.token);
        match create_association(ctx, request).await {
            Ok(o) => Ok(recorded(o.association.as_ref())),
            // One association per service account: ours from an interrupted run is taken back.
            Err(e) if e.has_code("ResourceInUseException") => match find(ctx, &at).await? {
                Some(a) if eks::is_ours(ctx, a.tags(), req.address) => Ok(recorded(Some(&a))),
                _ => Err(e.taken_by_other(&format!(
                    "service account {}/{} already has a Pod Identity association; EKS allows one per service account: delete it (aws eks delete-pod-identity-association) or leave this one out",
                    at.namespace, at.service_account
                ))),
            },
            Err(e) => Err(e),
        }
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        let mut out = vec![];
        for a in stack_associations(ctx).await? {
            let all: BTreeMap<String, String> = a.tags().cloned().unwrap_or_default().into_iter().collect();
            // karpenter_controller's association is tagged with its own address.
            if !all.get(tags::ADDRESS).is_some_and(|x| x.starts_with("pod_identity_association.")) {
                continue;
            }
            let attrs = observe(&a, &all);
            out.push(Observed::tagged(&all, recorded(Some(&a)), attrs));
        }
        Ok(out)
    }

    fn import_id(&self) -> Option<&'static str> {
        Some("CLUSTER:ASSOCIATION_ID")
    }

    /// DescribePodIdentityAssociation. One an add-on made (`ownerArn`) belongs to that
    /// add-on's `pod_identity` and is imported with it: `unexpressed` names the owner, as it
    /// does the fields the language lacks (a target role, session tags off, a session policy).
    async fn import(&self, ctx: &Ctx, id: &str) -> Result<Option<Imported>> {
        let Some((cluster, association)) = eks::split_import_id(id) else { return Ok(None) };
        let Some(a) = describe(ctx, cluster, association).await? else { return Ok(None) };
        let all: BTreeMap<String, String> = a.tags().cloned().unwrap_or_default().into_iter().collect();
        let mut unexpressed = vec![];
        if let Some(owner) = a.owner_arn() {
            unexpressed
                .push(("ownerArn".to_string(), format!("{owner} (made by that add-on; import the add-on instead)")));
        }
        if let Some(target) = a.target_role_arn() {
            unexpressed.push(("targetRoleArn".to_string(), target.to_string()));
        }
        if a.disable_session_tags() == Some(true) {
            unexpressed.push(("disableSessionTags".to_string(), "true".to_string()));
        }
        if let Some(policy) = a.policy() {
            unexpressed.push(("policy".to_string(), policy.to_string()));
        }
        let rec = recorded(Some(&a));
        let observed =
            Observed { address: None, id: rec.id, attrs: observe(&a, &all), outputs: rec.outputs, retained: false };
        Ok(Some(Imported { observed, unexpressed }))
    }

    async fn tag_imported(&self, ctx: &Ctx, address: &str, id: &str, outputs: &Attrs) -> Result<()> {
        let arn = outputs.get("arn").and_then(Value::as_str).unwrap_or_default();
        eks::tag_owned(ctx, arn, address)
            .await
            .map_err(|e| AwsError { detail: format!("association {id}: {}", e.detail), ..e })
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
        let cluster = str_attr(new, "cluster");
        let mut a = describe(ctx, cluster, id).await?;
        if changed.iter().any(|c| c == "role") {
            let request = ctx
                .eks
                .update_pod_identity_association()
                .cluster_name(cluster)
                .association_id(id)
                .role_arn(str_attr(new, "role"));
            // A role made in this apply may not be visible to EKS yet (propagation.rs).
            let updated = retrying(role_not_visible, || {
                ctx.call(Service::Eks, "UpdatePodIdentityAssociation", request.clone().send())
            });
            a = updated.await?.association;
        }
        if changed.iter().any(|c| c == "tags") {
            let arn = a.as_ref().and_then(|a| a.association_arn()).unwrap_or_default().to_string();
            eks::sync_tags(ctx, &arn, old, new).await?;
        }
        Ok(match a {
            Some(a) => recorded(Some(&a)),
            None => Recorded::id_only(id),
        })
    }

    async fn delete(&self, ctx: &Ctx, _address: &str, id: &str, inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        delete_association(ctx, str_attr(inputs, "cluster"), id).await
    }
}

/// The inputs as EKS shows them (refresh and import).
fn observe(a: &PodIdentityAssociation, all: &BTreeMap<String, String>) -> Attrs {
    Attrs::from([
        ("cluster".into(), Value::str(a.cluster_name().unwrap_or_default())),
        ("namespace".into(), Value::str(a.namespace().unwrap_or_default())),
        ("service_account".into(), Value::str(a.service_account().unwrap_or_default())),
        ("role".into(), Value::str(a.role_arn().unwrap_or_default())),
        ("tags".into(), tags::observed(all)),
    ])
}

fn account(i: &Attrs) -> Account<'_> {
    Account {
        cluster: str_attr(i, "cluster"),
        namespace: str_attr(i, "namespace"),
        service_account: str_attr(i, "service_account"),
    }
}

fn recorded(a: Option<&PodIdentityAssociation>) -> Recorded {
    let id = a.and_then(|a| a.association_id()).unwrap_or_default();
    Recorded {
        id: id.to_string(),
        outputs: Attrs::from([
            ("association_id".into(), Value::str(id)),
            ("arn".into(), Value::str(a.and_then(|a| a.association_arn()).unwrap_or_default())),
        ]),
    }
}

/// A Kubernetes DNS-1123 label (`label`: a namespace) or subdomain (a service account).
pub fn kubernetes_name(v: &str, label: bool) -> bool {
    let part = |p: &str| {
        !p.is_empty()
            && p.len() <= 63
            && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !p.starts_with('-')
            && !p.ends_with('-')
    };
    if label { part(v) } else { v.len() <= 253 && v.split('.').all(part) }
}

/// Where an association goes: the cluster, the service account's namespace and name.
pub struct Account<'a> {
    pub cluster: &'a str,
    pub namespace: &'a str,
    pub service_account: &'a str,
}

/// The association of the service account, with the role it gives; None when there is none.
pub async fn find(ctx: &Ctx, at: &Account<'_>) -> Result<Option<PodIdentityAssociation>> {
    let pages = ctx
        .eks
        .list_pod_identity_associations()
        .cluster_name(at.cluster)
        .namespace(at.namespace)
        .service_account(at.service_account)
        .into_paginator()
        .send();
    let listed =
        ctx.all_pages(Service::Eks, "ListPodIdentityAssociations", pages, |p| p.associations.unwrap_or_default());
    let Some(found) = listed.await.absent_ok()? else { return Ok(None) };
    // One association per service account (EKS UG "EKS Pod Identity considerations").
    match found.first().and_then(|a| a.association_id()) {
        Some(id) => describe(ctx, at.cluster, id).await,
        None => Ok(None),
    }
}

/// Gives `role_arn` to the service account: the association there is kept when it already
/// gives this role, made when there is none, and refused when it gives another role.
pub async fn ensure_association(
    ctx: &Ctx,
    at: &Account<'_>,
    role_arn: &str,
    tags: &HashMap<String, String>,
    token: &str,
) -> Result<PodIdentityAssociation> {
    if let Some(a) = find(ctx, at).await? {
        return ours(a, at, role_arn);
    }
    let request = ctx
        .eks
        .create_pod_identity_association()
        .cluster_name(at.cluster)
        .namespace(at.namespace)
        .service_account(at.service_account)
        .role_arn(role_arn)
        .set_tags(Some(tags.clone()))
        .client_request_token(token);
    match create_association(ctx, request).await {
        Ok(o) => o.association.ok_or_else(|| AwsError {
            operation: "CreatePodIdentityAssociation",
            code: None,
            detail: "EKS answered without the association".into(),
        }),
        // Made meanwhile (an earlier attempt that landed): ours only if it gives our role.
        Err(e) if e.has_code("ResourceInUseException") => match find(ctx, at).await? {
            Some(a) => ours(a, at, role_arn),
            None => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// CreatePodIdentityAssociation, sent again while EKS does not see a role made moments before
/// (propagation.rs; the client request token is the same, and the refused call made nothing).
async fn create_association(
    ctx: &Ctx,
    request: CreatePodIdentityAssociationFluentBuilder,
) -> Result<CreatePodIdentityAssociationOutput> {
    retrying(role_not_visible, || ctx.call(Service::Eks, "CreatePodIdentityAssociation", request.clone().send())).await
}

fn ours(a: PodIdentityAssociation, at: &Account<'_>, role_arn: &str) -> Result<PodIdentityAssociation> {
    if a.role_arn() == Some(role_arn) {
        return Ok(a);
    }
    Err(AwsError {
        operation: "CreatePodIdentityAssociation",
        code: Some("ResourceInUseException".into()),
        detail: format!(
            "service account {}/{} of cluster {} already has a Pod Identity association ({}) giving {}; EKS allows one per service account: delete it, or set `namespace`/`service_account` to another",
            at.namespace,
            at.service_account,
            at.cluster,
            a.association_id().unwrap_or_default(),
            a.role_arn().unwrap_or_default()
        ),
    })
}

pub async fn describe(ctx: &Ctx, cluster: &str, id: &str) -> Result<Option<PodIdentityAssociation>> {
    let request = ctx.eks.describe_pod_identity_association().cluster_name(cluster).association_id(id);
    let described = ctx.call(Service::Eks, "DescribePodIdentityAssociation", request.send()).await;
    Ok(described.absent_ok()?.and_then(|o| o.association))
}

pub async fn delete_association(ctx: &Ctx, cluster: &str, id: &str) -> Result<()> {
    let request = ctx.eks.delete_pod_identity_association().cluster_name(cluster).association_id(id);
    ctx.call(Service::Eks, "DeletePodIdentityAssociation", request.send()).await.absent_ok()?;
    Ok(())
}

/// The associations tagged for this stack in the stack's clusters: one paged list per
/// cluster, and a describe of each association listed (the list has no roles or tags).
pub async fn stack_associations(ctx: &Ctx) -> Result<Vec<PodIdentityAssociation>> {
    let mut out = vec![];
    for c in ctx.stack_clusters().await? {
        let cluster = c.name().unwrap_or_default().to_string();
        let pages = ctx.eks.list_pod_identity_associations().cluster_name(&cluster).into_paginator().send();
        let listed =
            ctx.all_pages(Service::Eks, "ListPodIdentityAssociations", pages, |p| p.associations.unwrap_or_default());
        let Some(listed) = listed.await.absent_ok()? else { continue };
        for id in listed.iter().filter_map(|a| a.association_id()) {
            if let Some(a) = describe(ctx, &cluster, id).await?
                && a.tags().and_then(|t| t.get(tags::STACK)) == Some(&ctx.stack)
            {
                out.push(a);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Least privilege (review r19-iam m8): every action listed is one this kind calls; those
    /// made elsewhere on its behalf are named with where.
    #[test]
    fn actions_are_the_calls_it_makes() {
        let source = include_str!("pod_identity_association.rs");
        let elsewhere = [
            "eks:ListClusters",    // Ctx::stack_clusters (read_all)
            "eks:DescribeCluster", // Ctx::stack_clusters
            "eks:TagResource",     // aws::eks::sync_tags
            "eks:UntagResource",   // aws::eks::sync_tags
            "iam:PassRole",        // checked by EKS on Create/Update with roleArn
        ];
        for action in PodIdentityAssociationKind.actions() {
            let op = action.split_once(':').unwrap().1;
            assert!(
                elsewhere.contains(action) || source.contains(&format!("Service::Eks, \"{op}\"")),
                "{action} is listed but never called"
            );
        }
    }
}
