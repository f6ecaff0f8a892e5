//! The controller's identity: its IAM role (trusted by EKS Pod Identity, under the path
//! `/gpustack/<stack>/karpenter/` so `iam_role`'s refresh leaves it alone) with the controller
//! policy inline, and the Pod Identity association that gives the role to Karpenter's
//! service account (aws-facts §11).

use aws_sdk_iam::types::{Role, Tag};
use serde_json::Value as Json;

use crate::aws::{Absent, Ctx, Service, iam};
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

pub use crate::resources::pod_identity_association::{
    Account, delete_association, ensure_association, find, stack_associations,
};
