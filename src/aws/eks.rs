//! EKS mechanics the EKS kinds share: tags (a map, set by ARN), waiting for an update
//! (`DescribeUpdate`) to finish and for a deleted object to be gone.

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use aws_sdk_eks::types::UpdateStatus;

use super::wait::{Status, until_status};
use super::{AwsError, Ctx, Service, tags};
use crate::value::Attrs;

/// How long EKS work may take before gpustack stops waiting (the work goes on in AWS).
pub const CREATE_TIMEOUT: Duration = Duration::from_secs(45 * 60);
pub const UPDATE_TIMEOUT: Duration = Duration::from_secs(90 * 60);
pub const DELETE_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The tags an EKS object of `address` gets.
pub fn tag_map(ctx: &Ctx, address: &str, inputs: &Attrs) -> HashMap<String, String> {
    tags::all_tags(ctx, address, inputs).into_iter().collect()
}

/// True when EKS tags say the object was created by `address` of this stack.
pub fn is_ours(ctx: &Ctx, t: Option<&HashMap<String, String>>, address: &str) -> bool {
    t.is_some_and(|t| {
        t.get(tags::STACK) == Some(&ctx.stack) && t.get(tags::ADDRESS).map(String::as_str) == Some(address)
    })
}

/// Makes the object's user tags equal the `tags` input.
pub async fn sync_tags(ctx: &Ctx, arn: &str, old: &Attrs, new: &Attrs) -> Result<(), AwsError> {
    let tags::TagChanges { removed, set } = tags::changes(old, new);
    let set: HashMap<String, String> = set.into_iter().collect();
    if !removed.is_empty() {
        let request = ctx.eks.untag_resource().resource_arn(arn).set_tag_keys(Some(removed));
        ctx.call(Service::Eks, "UntagResource", request.send()).await?;
    }
    if !set.is_empty() {
        ctx.call(Service::Eks, "TagResource", ctx.eks.tag_resource().resource_arn(arn).set_tags(Some(set)).send())
            .await?;
    }
    Ok(())
}

/// `[import]`: puts the stack's two tags (`gpustack:stack`, `gpustack:address`) on the EKS
/// object `arn` (eks:TagResource), adding to its tags and changing nothing else.
pub async fn tag_owned(ctx: &Ctx, arn: &str, address: &str) -> Result<(), AwsError> {
    let set =
        HashMap::from([(tags::STACK.to_string(), ctx.stack.clone()), (tags::ADDRESS.to_string(), address.to_string())]);
    ctx.call(Service::Eks, "TagResource", ctx.eks.tag_resource().resource_arn(arn).set_tags(Some(set)).send()).await?;
    Ok(())
}

/// Splits an `[import]` id of the form `CLUSTER:REST` (`my-cluster:gpu-ng`); `None` when
/// either side is empty. The rest may hold more colons (an ARN).
pub fn split_import_id(id: &str) -> Option<(&str, &str)> {
    id.split_once(':').filter(|(c, r)| !c.is_empty() && !r.is_empty())
}

/// Where an update runs.
pub struct UpdateOf<'a> {
    pub cluster: &'a str,
    pub nodegroup: Option<&'a str>,
    pub addon: Option<&'a str>,
}

/// Waits for update `id` to succeed; a failed or cancelled update is an error with EKS's reasons.
pub async fn wait_update(ctx: &Ctx, of: &UpdateOf<'_>, id: &str, what: &str) -> Result<(), AwsError> {
    let describe = || async {
        let request = ctx
            .eks
            .describe_update()
            .name(of.cluster)
            .update_id(id)
            .set_nodegroup_name(of.nodegroup.map(str::to_string))
            .set_addon_name(of.addon.map(str::to_string));
        Ok(ctx.call(Service::Eks, "DescribeUpdate", request.send()).await?.update)
    };
    until_status(what, UPDATE_TIMEOUT, describe, |u| match u.as_ref().and_then(|u| u.status()) {
        Some(UpdateStatus::Successful) => Status::Reached(()),
        Some(s @ (UpdateStatus::Failed | UpdateStatus::Cancelled)) => Status::Failed(AwsError {
            operation: "DescribeUpdate",
            code: Some(s.as_str().to_string()),
            detail: format!(
                "{what}: update {id} ended {}: {}",
                s.as_str(),
                u.as_ref()
                    .map(|u| u.errors().iter().filter_map(|e| e.error_message()).collect::<Vec<_>>().join("; "))
                    .unwrap_or_default()
            ),
        }),
        other => Status::Pending(other.map_or("InProgress", |s| s.as_str()).to_string()),
    })
    .await
}

/// Waits until a deleted EKS object (cluster, add-on, node group) is gone: `describe`
/// answers None once EKS no longer knows it; until then the wait shows its status.
pub async fn wait_deleted<T, F, Fut>(
    what: &str,
    describe: F,
    status: impl Fn(&T) -> Option<&str>,
) -> Result<(), AwsError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, AwsError>>,
{
    until_status(what, DELETE_TIMEOUT, describe, |seen| match seen {
        None => Status::Reached(()),
        Some(x) => Status::Pending(status(&x).unwrap_or("DELETING").to_string()),
    })
    .await
}

/// The error of an EKS object that ended in a failed status: `detail` says which and how
/// ("node group gpu is CREATE_FAILED"), followed by EKS's health issues.
pub fn failed<'a>(
    operation: &'static str,
    code: &str,
    detail: String,
    issues: impl IntoIterator<Item = Option<&'a str>>,
) -> AwsError {
    let issues: Vec<&str> = issues.into_iter().flatten().collect();
    AwsError { operation, code: Some(code.to_string()), detail: format!("{detail}: {}", issues.join("; ")) }
}

/// The error of a wait whose object `what` ("cluster NAME") disappeared, as `operation`
/// (the describe) found.
pub fn disappeared(operation: &'static str, what: String) -> AwsError {
    AwsError {
        operation,
        code: Some("ResourceNotFoundException".into()),
        detail: format!("{what} while gpustack waited for it"),
    }
}

/// "1.31" → (1, 31).
pub fn minor(version: &str) -> Option<(u32, u32)> {
    let (a, b) = version.split_once('.')?;
    Some((a.parse().ok()?, b.split('.').next()?.parse().ok()?))
}
