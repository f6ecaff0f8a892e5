//! The controller's identity: its IAM role (trusted by EKS Pod Identity, under the path
//! `/gpustack/<stack>/karpenter/` so `iam_role`'s refresh leaves it alone) with the controller
//! policy inline, and the Pod Identity association that gives the role to Karpenter's
//! service account (aws-facts §11).

use std::collections::HashMap;

use aws_sdk_eks::types::PodIdentityAssociation;
use aws_sdk_iam::types::{Role, Tag};
use serde_json::Value as Json;

use crate::aws::{Absent, AwsError, Ctx, Service, iam, tags};
use crate::resources::Result;

/// The path of every controller role of `stack`.
pub fn path(stack: &str) -> String {
    format!("/gpustack/{stack}/karpenter/")
}

/// Creates the role; one an interrupted run made (tagged with this address) is taken as is.
/// Returns its ARN.
pub async fn create_role(ctx: &Ctx, name: &str, address: &str, all_tags: &[(String, String)]) -> Result<String> {
    let tags: Vec<Tag> =
        all_tags.iter().filter_map(|(k, v)| Tag::builder().key(k.clone()).value(v.clone()).build().ok()).collect();
    let request = ctx
        .iam
        .create_role()
        .role_name(name)
        .path(path(&ctx.stack))
        .assume_role_policy_document(super::policy::trust().to_string())
        .description("Karpenter controller (EKS Pod Identity), made by gpustack")
        .set_tags(Some(tags));
    match ctx.call(Service::Iam, "CreateRole", request.send()).await {
        Ok(out) => Ok(out.role().map(|r| r.arn().to_string()).unwrap_or_default()),
        Err(e) if e.has_code("EntityAlreadyExists") => {
            iam::adopt_role(ctx, name, address, e, "delete that role, or rename the controller").await
        }
        Err(e) => Err(e),
    }
}

/// The role, or None when there is none of that name.
pub async fn get_role(ctx: &Ctx, name: &str) -> Result<Option<Role>> {
    let request = ctx.iam.get_role().role_name(name);
    Ok(ctx.call(Service::Iam, "GetRole", request.send()).await.absent_ok()?.and_then(|o| o.role))
}

/// Every controller role of the stack (one paged call). PathPrefix lists deeper paths too.
pub async fn roles(ctx: &Ctx) -> Result<Vec<Role>> {
    let want = path(&ctx.stack);
    let pages = ctx.iam.list_roles().path_prefix(&want).into_paginator().send();
    let roles = ctx.all_pages(Service::Iam, "ListRoles", pages, |p| p.roles).await?;
    Ok(roles.into_iter().filter(|r| r.path() == want).collect())
}

pub async fn put_policy(ctx: &Ctx, role: &str, doc: &Json) -> Result<()> {
    let request =
        ctx.iam.put_role_policy().role_name(role).policy_name(super::policy::NAME).policy_document(doc.to_string());
    ctx.call(Service::Iam, "PutRolePolicy", request.send()).await?;
    Ok(())
}

/// The role's controller policy as JSON (IAM answers it URL-encoded), None when absent.
pub async fn policy(ctx: &Ctx, role: &str) -> Result<Option<Json>> {
    let request = ctx.iam.get_role_policy().role_name(role).policy_name(super::policy::NAME);
    let Some(out) = ctx.call(Service::Iam, "GetRolePolicy", request.send()).await.absent_ok()? else {
        return Ok(None);
    };
    let doc = percent_encoding::percent_decode_str(out.policy_document()).decode_utf8_lossy().into_owned();
    Ok(serde_json::from_str(&doc).ok())
}

/// Deletes the inline policy, then the role; what is already gone is success.
pub async fn delete_role(ctx: &Ctx, name: &str) -> Result<()> {
    let request = ctx.iam.delete_role_policy().role_name(name).policy_name(super::policy::NAME);
    ctx.call(Service::Iam, "DeleteRolePolicy", request.send()).await.absent_ok()?;
    let request = ctx.iam.delete_role().role_name(name);
    ctx.call(Service::Iam, "DeleteRole", request.send()).await.absent_ok()?;
    Ok(())
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
    match ctx.call(Service::Eks, "CreatePodIdentityAssociation", request.send()).await {
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
