//! The CloudWatch Logs group of an `eks_cluster`'s control-plane logs, managed by the cluster
//! when `log_retention_days` is set. EKS writes the logs it exports to the group
//! `/aws/eks/<cluster-name>/cluster` and creates that group itself, without a retention
//! ("never expire"), when it is missing (EKS UG `control-plane-logs`: "log group name
//! format is /aws/eks/my-cluster/cluster"; "By default, your cluster control plane logs
//! aren't exported"; CloudWatch Logs keeps a group's events forever unless it has a retention
//! policy: `PutRetentionPolicy` API reference). terraform-aws-eks creates the group first, with
//! `cloudwatch_log_group_retention_in_days`, so that EKS finds it and the retention holds
//! from the first line; this does the same.
//!
//! The group's name follows from the cluster's, so state never loses track of it: the
//! cluster's recorded inputs say whether gpustack manages it (`log_retention_days`), and
//! `delete` removes it after the cluster.
//!
//! Creating a cluster never changes a group that is not yet the stack's (review r19 M2). The
//! order in `eks_cluster::create`: (1) DescribeCluster: a cluster of that name not made by this
//! resource fails the create before CloudWatch Logs is touched; (2) `prepare`: CreateLogGroup
//! tagged for this resource; if the name exists, its tags decide: tagged for this resource (an
//! interrupted run made it) it is ours, tagged for another stack or resource the create fails,
//! untagged (left by an earlier cluster of that name) it is left alone for now; (3) the retention
//! goes on a group made or found ours; (4) CreateCluster; if it fails, a group made in (2) is
//! deleted again (nothing untracked stays; a crash right there leaves a group tagged for this
//! resource, which the next create takes as ours); (5) once CreateCluster succeeded the name is
//! the stack's, and an untagged group, which EKS now writes this cluster's logs to, gets the
//! retention. Adding `log_retention_days` to a running cluster of the stack takes its group as
//! it is (EKS made it when logging was turned on): the cluster is already the stack's.

use std::collections::HashMap;

use crate::aws::{Absent, AwsError, Ctx, Service};

use super::Result;

/// The retention values CloudWatch Logs accepts ("Possible values are: 1, 3, 5, 7, 14, 30, 60,
/// 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, and 3653": botocore
/// `logs` 2014-03-28 shape `Days`, the `PutRetentionPolicy` API reference). The model types it as
/// a plain integer; the service refuses any other value with `InvalidParameterException`.
pub const RETENTION_DAYS: &[i64] =
    &[1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653];

/// Where EKS writes a cluster's control-plane logs.
pub fn name(cluster: &str) -> String {
    format!("/aws/eks/{cluster}/cluster")
}

/// Who holds the group's name before CreateCluster (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// Made by this call, tagged for the resource.
    Made,
    /// Already there, tagged for this resource (an interrupted run made it).
    Ours,
    /// Already there without the stack's tags: left alone until the cluster is the stack's.
    Untagged,
}

/// Step (2) of the create order: makes the group tagged for the resource, or says who holds it;
/// a group tagged for another stack or resource is refused before anything changes.
pub async fn prepare(ctx: &Ctx, cluster: &str, address: &str, tags: HashMap<String, String>) -> Result<Found> {
    let group = name(cluster);
    let create = ctx.logs.create_log_group().log_group_name(&group).set_tags(Some(tags).filter(|t| !t.is_empty()));
    let err = match ctx.call(Service::Logs, "CreateLogGroup", create.send()).await {
        Ok(_) => return Ok(Found::Made),
        Err(e) if e.has_code("ResourceAlreadyExistsException") => e,
        Err(e) => return Err(e),
    };
    // The group's ARN (`logGroupArn`, without the `:*` of `arn`) names it to ListTagsForResource.
    let call = ctx.logs.describe_log_groups().log_group_name_prefix(&group);
    let out = ctx.call(Service::Logs, "DescribeLogGroups", call.send()).await?;
    let Some(arn) = out
        .log_groups()
        .iter()
        .find(|g| g.log_group_name() == Some(group.as_str()))
        .and_then(|g| g.log_group_arn().map(str::to_string))
    else {
        return Err(err); // deleted in between: the next run creates it
    };
    let call = ctx.logs.list_tags_for_resource().resource_arn(&arn);
    let out = ctx.call(Service::Logs, "ListTagsForResource", call.send()).await?;
    let tags = out.tags();
    if crate::aws::eks::is_ours(ctx, tags, address) {
        return Ok(Found::Ours);
    }
    match tags.and_then(|t| t.get(crate::aws::tags::STACK).map(|s| (s.clone(), t.get(crate::aws::tags::ADDRESS)))) {
        None => Ok(Found::Untagged),
        Some((stack, owner)) => Err(AwsError {
            detail: format!(
                "log group {group} belongs to {} of stack {stack}",
                owner.map_or("another resource", String::as_str)
            ),
            ..err
        }
        .taken_by_other("set `name` to another cluster name, or remove log_retention_days")),
    }
}

/// Sets the group's retention (the group exists and is the stack's).
pub async fn put_retention(ctx: &Ctx, cluster: &str, days: i32) -> Result<()> {
    let put = ctx.logs.put_retention_policy().log_group_name(name(cluster)).retention_in_days(days);
    ctx.call(Service::Logs, "PutRetentionPolicy", put.send()).await?;
    Ok(())
}

/// For a running cluster of the stack: creates the group (tagged) if it does not exist yet
/// (EKS made it when logging was turned on; the cluster is the stack's, so the group is the
/// one its logs go to), then sets its retention.
pub async fn ensure(ctx: &Ctx, cluster: &str, days: i32, tags: HashMap<String, String>) -> Result<()> {
    let group = name(cluster);
    let create = ctx.logs.create_log_group().log_group_name(&group).set_tags(Some(tags).filter(|t| !t.is_empty()));
    match ctx.call(Service::Logs, "CreateLogGroup", create.send()).await {
        Ok(_) => {}
        Err(e) if e.has_code("ResourceAlreadyExistsException") => {}
        Err(e) => return Err(e),
    }
    put_retention(ctx, cluster, days).await
}

/// Back to CloudWatch's default (events never expire), when `log_retention_days` is removed:
/// the group and its events stay, as EKS keeps writing to it while logging is on.
pub async fn clear_retention(ctx: &Ctx, cluster: &str) -> Result<()> {
    let call = ctx.logs.delete_retention_policy().log_group_name(name(cluster));
    ctx.call(Service::Logs, "DeleteRetentionPolicy", call.send()).await.absent_ok()?;
    Ok(())
}

/// What DescribeLogGroups says of the group's retention.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retention {
    /// No group of that name.
    NoGroup,
    /// The group's own retention (`None`: it never expires).
    Days(Option<i32>),
    /// An account-level retention policy applies: "When it is returned, retentionInDays shows
    /// the retention period from that policy instead of the retention period set on the log
    /// group" (logs `LogGroup.retentionPolicyName`), so the group's own setting cannot be read.
    AccountPolicy,
}

/// The group's retention, as [`Retention`] says.
pub async fn retention(ctx: &Ctx, cluster: &str) -> Result<Retention> {
    let group = name(cluster);
    // A prefix lists every group under it; the exact name is picked from the first page,
    // which holds it (the name sorts before any longer one that shares it).
    let call = ctx.logs.describe_log_groups().log_group_name_prefix(&group);
    let out = ctx.call(Service::Logs, "DescribeLogGroups", call.send()).await?;
    Ok(match out.log_groups().iter().find(|g| g.log_group_name() == Some(group.as_str())) {
        None => Retention::NoGroup,
        Some(g) if g.retention_policy_name().is_some() => Retention::AccountPolicy,
        Some(g) => Retention::Days(g.retention_in_days()),
    })
}

/// Deletes the group and its events; a group already gone is success.
pub async fn delete(ctx: &Ctx, cluster: &str) -> Result<()> {
    let call = ctx.logs.delete_log_group().log_group_name(name(cluster));
    ctx.call(Service::Logs, "DeleteLogGroup", call.send()).await.absent_ok()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_group_is_where_eks_writes() {
        assert_eq!(super::name("llm-dev-main"), "/aws/eks/llm-dev-main/cluster");
    }
}
