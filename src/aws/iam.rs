//! IAM role mechanics shared by the kinds that make roles (`iam_role`, `karpenter_controller`):
//! taking back a role an interrupted run made, and keeping a role's tags equal to its input.

use aws_sdk_iam::types::Tag;

use super::tags::{self, TagChanges};
use super::{AwsError, Ctx, Service};

/// The ARN of role `name` when it already exists (`EntityAlreadyExists`, the error `taken`
/// from CreateRole) and is tagged as `address` of this stack: an earlier run made it and died
/// before recording it. Any other role of that name is someone else's: `taken` says so and
/// `what_to_do`.
pub async fn adopt_role(
    ctx: &Ctx,
    name: &str,
    address: &str,
    taken: AwsError,
    what_to_do: &str,
) -> Result<String, AwsError> {
    let out = ctx.call(Service::Iam, "GetRole", ctx.iam.get_role().role_name(name).send()).await?;
    let role = out.role();
    let tagged = |k: &str, v: &str| role.is_some_and(|r| r.tags().iter().any(|t| t.key() == k && t.value() == v));
    match role {
        Some(r) if tagged(tags::STACK, &ctx.stack) && tagged(tags::ADDRESS, address) => Ok(r.arn().to_string()),
        _ => Err(taken.taken_by_other(what_to_do)),
    }
}

/// Applies tag `changes` to role `role` (UntagRole, then TagRole).
pub async fn sync_role_tags(ctx: &Ctx, role: &str, changes: &TagChanges) -> Result<(), AwsError> {
    if !changes.removed.is_empty() {
        let request = ctx.iam.untag_role().role_name(role).set_tag_keys(Some(changes.removed.clone()));
        ctx.call(Service::Iam, "UntagRole", request.send()).await?;
    }
    let set: Vec<Tag> = changes.set.iter().filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok()).collect();
    if !set.is_empty() {
        ctx.call(Service::Iam, "TagRole", ctx.iam.tag_role().role_name(role).set_tags(Some(set)).send()).await?;
    }
    Ok(())
}
