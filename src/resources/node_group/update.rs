//! Updating a node group in place: one `UpdateNodegroupConfig` for scaling, labels, taints
//! and the update policy, one `UpdateNodegroupVersion` for the launch template version or
//! release (a Capacity Block group drained to 0 around it, since a block has no spare
//! instances for a rolling update), then tags. EKS runs one update at a time per node
//! group, so each is awaited before the next.

use std::collections::HashMap;

use aws_sdk_eks::types::{
    AmiTypes, Nodegroup, NodegroupScalingConfig, NodegroupUpdateConfig, NodegroupUpdateStrategies, Taint,
    UpdateLabelsPayload, UpdateTaintsPayload,
};

use super::auto::{template_facts, update_strategy};
use super::{DESIRED_UNSET, describe, labels, recorded, scaling, taints, template_spec, wait_active};
use crate::aws::eks::{self, UpdateOf};
use crate::aws::{Ctx, Service};
use crate::resources::{Recorded, Result, i32_of, int_attr, str_attr};
use crate::value::{Attrs, Value};

/// Changes the fields in `changed` from `old` to `new`.
pub async fn update(ctx: &Ctx, old: &Attrs, new: &Attrs, changed: &[String]) -> Result<Recorded> {
    let (cluster, name) = (str_attr(new, "cluster"), str_attr(new, "name"));
    let has = |k: &str| changed.iter().any(|c| c == k);
    let of = UpdateOf { cluster, nodegroup: Some(name), addon: None };
    // A custom AMI has no EKS release to move to (botocore `UpdateNodegroupVersionRequest.
    // releaseVersion`: don't specify it "or the node group update will fail"): say so before
    // any call, rather than drop the change.
    if has("release_version") && str_attr(new, "release_version") != "latest" {
        let live = describe(ctx, cluster, name).await?;
        if live.as_ref().and_then(|n| n.ami_type()).is_some_and(|t| *t == AmiTypes::Custom) {
            return Err(crate::aws::AwsError {
                operation: "UpdateNodegroupVersion",
                code: None,
                detail: format!(
                    "node group {name} runs a custom AMI (amiType CUSTOM, named by its launch template): it has no EKS release to move to; set release_version = \"latest\" and change the AMI in the launch template"
                ),
            });
        }
    }
    // EKS runs one update at a time per node group: each is awaited before the next.
    if ["scaling", "labels", "taints", "max_unavailable", "update_strategy"].iter().any(|k| has(k)) {
        let mut call = ctx.eks.update_nodegroup_config().cluster_name(cluster).nodegroup_name(name);
        if has("scaling") {
            let live =
                describe(ctx, cluster, name).await?.and_then(|n| n.scaling_config().and_then(|c| c.desired_size()));
            call = call.scaling_config(kept_scaling(old, new, live));
        }
        if has("labels") {
            let (o, n) = (labels(old), labels(new));
            let removed: Vec<String> = o.keys().filter(|k| !n.contains_key(*k)).cloned().collect();
            let set: HashMap<String, String> = n.into_iter().filter(|(k, v)| o.get(k) != Some(v)).collect();
            call = call.labels(
                UpdateLabelsPayload::builder()
                    .set_add_or_update_labels(Some(set).filter(|m| !m.is_empty()))
                    .set_remove_labels(Some(removed).filter(|r| !r.is_empty()))
                    .build(),
            );
        }
        if has("taints") {
            let (o, n) = (taints(old), taints(new));
            let removed: Vec<Taint> = o.iter().filter(|t| !n.iter().any(|x| x.key() == t.key())).cloned().collect();
            let set: Vec<Taint> = n.iter().filter(|t| !o.contains(t)).cloned().collect();
            call = call.taints(
                UpdateTaintsPayload::builder()
                    .set_add_or_update_taints(Some(set).filter(|v| !v.is_empty()))
                    .set_remove_taints(Some(removed).filter(|v| !v.is_empty()))
                    .build(),
            );
        }
        if has("max_unavailable") || has("update_strategy") {
            // `updateConfig` is one object: what the plan does not change is sent as it runs
            // (review imp-eks M2). "auto" was resolved once at create and pinned; re-resolving
            // it on a `max_unavailable` change would silently switch the strategy of a group
            // (imported ones: eksctl and Terraform leave DEFAULT), and a count would replace a
            // running `maxUnavailablePercentage` the plan never showed.
            let live = describe(ctx, cluster, name).await?;
            let running = live.as_ref().and_then(|n| n.update_config());
            let strategy = match running.and_then(|u| u.update_strategy()).filter(|_| !has("update_strategy")) {
                Some(s) => s.clone(),
                None => {
                    let facts = template_facts(ctx, new).await?;
                    let info = match &facts.instance_type {
                        Some(t) => ctx.catalog.get(ctx, t).await?,
                        None => None,
                    };
                    NodegroupUpdateStrategies::from(update_strategy(new, info.as_ref(), facts.reserved).0)
                }
            };
            let mut config = NodegroupUpdateConfig::builder().update_strategy(strategy);
            config = match running.filter(|_| !has("max_unavailable")) {
                Some(u) if u.max_unavailable_percentage().is_some() => {
                    config.set_max_unavailable_percentage(u.max_unavailable_percentage())
                }
                _ => config.max_unavailable(i32_of(int_attr(new, "max_unavailable").unwrap_or(1))),
            };
            call = call.update_config(config.build());
        }
        let out = ctx.call(Service::Eks, "UpdateNodegroupConfig", call.send()).await?;
        let uid = out.update().and_then(|u| u.id()).unwrap_or_default().to_string();
        eks::wait_update(ctx, &of, &uid, &format!("configuration update of node group {name}")).await?;
    }
    if has("launch_template_version") || has("release_version") {
        // A Capacity Block has no spare instances for a rolling update: EKS wants the desired
        // size at 0 while a CAPACITY_BLOCK group is upgraded (EKS UG `capacity-blocks-mng`).
        // Scale to 0, update, scale back; the plan said so and its approval is the consent.
        let drained = if str_attr(new, "capacity_type") == "CAPACITY_BLOCK" {
            let running = describe(ctx, cluster, name)
                .await?
                .and_then(|n| n.scaling_config().and_then(|c| c.desired_size()))
                .unwrap_or(0);
            if running > 0 {
                let zero = NodegroupScalingConfig::builder()
                    .min_size(0)
                    .desired_size(0)
                    .max_size(scaling(new).max_size().unwrap_or(1))
                    .build();
                config_update(ctx, &of, zero, &format!("scaling node group {name} to 0 for its update")).await?;
            }
            Some(running)
        } else {
            None
        };
        let live = describe(ctx, cluster, name).await?;
        let (version, release) = version_and_release(live.as_ref(), str_attr(new, "release_version"));
        let request = ctx
            .eks
            .update_nodegroup_version()
            .cluster_name(cluster)
            .nodegroup_name(name)
            .set_launch_template(template_spec(new))
            .set_version(version)
            .set_release_version(release);
        let out = ctx.call(Service::Eks, "UpdateNodegroupVersion", request.send()).await?;
        let uid = out.update().and_then(|u| u.id()).unwrap_or_default().to_string();
        eks::wait_update(ctx, &of, &uid, &format!("version update of node group {name}")).await?;
        if let Some(running) = drained.filter(|n| *n > 0) {
            // Back to what ran before (within the new min and max), unless the file changed
            // `desired` itself.
            let back = kept_scaling(old, new, Some(running));
            config_update(ctx, &of, back, &format!("scaling node group {name} back after its update")).await?;
        }
    }
    let n = wait_active(ctx, cluster, name).await?;
    if has("tags") {
        eks::sync_tags(ctx, n.nodegroup_arn().unwrap_or_default(), old, new).await?;
    }
    Ok(recorded(&n))
}

/// The scaling an update sends: min and max from the file; `desiredSize` from the file only
/// when the file sets `desired` itself and changed it, else the running desired size (`live`)
/// moved into the new [min, max]. botocore `NodegroupScalingConfig.desiredSize`: "If this
/// parameter is given a value that is smaller than the current number of running worker
/// nodes, the necessary number of worker nodes are terminated" — a `max` change must never
/// shrink a running GPU pool, and the autoscaler owns `desired` (review imp-eks B1).
pub(super) fn kept_scaling(old: &Attrs, new: &Attrs, live: Option<i32>) -> NodegroupScalingConfig {
    let sc = scaling(new);
    let (min, max) = (sc.min_size().unwrap_or(0), sc.max_size().unwrap_or(1));
    let desired = |a: &Attrs| a.get("scaling").and_then(Value::as_table).and_then(|t| t.get("desired")).cloned();
    let explicit = !new.contains_key(DESIRED_UNSET) && desired(old) != desired(new);
    let d = match live {
        Some(running) if !explicit => running.clamp(min, max),
        _ => sc.desired_size().unwrap_or(min),
    };
    NodegroupScalingConfig::builder().min_size(min).desired_size(d).max_size(max).build()
}

/// The `version` and `releaseVersion` of an `UpdateNodegroupVersion` (review imp-eks B2).
/// - A custom AMI (amiType CUSTOM): neither. botocore `UpdateNodegroupVersionRequest`
///   `version`/`releaseVersion`: "If you specify launchTemplate, and your launch template uses
///   a custom AMI, then don't specify [them], or the node group update will fail"; and
///   `Nodegroup.releaseVersion` is then the AMI id, not a release.
/// - `release_version = "latest"` (resolved once and pinned): the group's running release
///   *and* its running Kubernetes version. Without `version` EKS "will update the node group
///   to match the cluster's current Kubernetes version" (botocore `version`): a group that lags
///   the cluster would get the cluster's minor with the old minor's release (refused), or a
///   kubelet upgrade nobody planned.
/// - A release the file names: that release, the version left to EKS (the cluster's).
pub(super) fn version_and_release(live: Option<&Nodegroup>, wanted: &str) -> (Option<String>, Option<String>) {
    if live.and_then(|n| n.ami_type()).is_some_and(|t| *t == AmiTypes::Custom) {
        return (None, None);
    }
    match wanted {
        "latest" => (
            live.and_then(|n| n.version().map(str::to_string)),
            live.and_then(|n| n.release_version().map(str::to_string)),
        ),
        v => (None, Some(v.to_string())),
    }
}

/// One `UpdateNodegroupConfig` of the scaling, awaited.
async fn config_update(ctx: &Ctx, of: &UpdateOf<'_>, sc: NodegroupScalingConfig, what: &str) -> Result<()> {
    let request = ctx
        .eks
        .update_nodegroup_config()
        .cluster_name(of.cluster)
        .nodegroup_name(of.nodegroup.unwrap_or_default())
        .scaling_config(sc);
    let out = ctx.call(Service::Eks, "UpdateNodegroupConfig", request.send()).await?;
    let uid = out.update().and_then(|u| u.id()).unwrap_or_default().to_string();
    eks::wait_update(ctx, of, &uid, what).await
}
