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
//! `delete` removes it after the cluster. A group that already exists (EKS made it when
//! logging was turned on earlier, or an interrupted create made it) is taken as it is and
//! given the retention; its events are never deleted by a retention change.

use std::collections::HashMap;

use crate::aws::{Absent, Ctx, Service};

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

/// Creates the group (tagged) if it does not exist yet, then sets its retention.
pub async fn ensure(ctx: &Ctx, cluster: &str, days: i32, tags: HashMap<String, String>) -> Result<()> {
    let group = name(cluster);
    let create = ctx.logs.create_log_group().log_group_name(&group).set_tags(Some(tags).filter(|t| !t.is_empty()));
    match ctx.call(Service::Logs, "CreateLogGroup", create.send()).await {
        Ok(_) => {}
        // EKS (logging turned on earlier) or an interrupted run made it: give it the retention.
        Err(e) if e.has_code("ResourceAlreadyExistsException") => {}
        Err(e) => return Err(e),
    }
    let put = ctx.logs.put_retention_policy().log_group_name(&group).retention_in_days(days);
    ctx.call(Service::Logs, "PutRetentionPolicy", put.send()).await?;
    Ok(())
}

/// Back to CloudWatch's default (events never expire), when `log_retention_days` is removed:
/// the group and its events stay, as EKS keeps writing to it while logging is on.
pub async fn clear_retention(ctx: &Ctx, cluster: &str) -> Result<()> {
    let call = ctx.logs.delete_retention_policy().log_group_name(name(cluster));
    ctx.call(Service::Logs, "DeleteRetentionPolicy", call.send()).await.absent_ok()?;
    Ok(())
}

/// The group's retention: `None` when there is no group, `Some(None)` when it never expires.
pub async fn retention(ctx: &Ctx, cluster: &str) -> Result<Option<Option<i32>>> {
    let group = name(cluster);
    // A prefix lists every group under it; the exact name is picked from the first page,
    // which holds it (the name sorts before any longer one that shares it).
    let call = ctx.logs.describe_log_groups().log_group_name_prefix(&group);
    let out = ctx.call(Service::Logs, "DescribeLogGroups", call.send()).await?;
    Ok(out.log_groups().iter().find(|g| g.log_group_name() == Some(group.as_str())).map(|g| g.retention_in_days()))
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
