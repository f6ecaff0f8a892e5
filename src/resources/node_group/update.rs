//! Updating a node group in place: one `UpdateNodegroupConfig` for scaling, labels, taints
//! and the update policy, one `UpdateNodegroupVersion` for the launch template version or
//! release (a Capacity Block group drained to 0 around it, since a block has no spare
//! instances for a rolling update), then tags. EKS runs one update at a time per node
//! group, so each is awaited before the next.

use std::collections::HashMap;

use aws_sdk_eks::types::{
    NodegroupScalingConfig, NodegroupUpdateConfig, NodegroupUpdateStrategies, Taint, UpdateLabelsPayload,
    UpdateTaintsPayload,
};

use super::auto::{template_facts, update_strategy};
use super::{describe, labels, recorded, scaling, taints, template_spec, wait_active};
use crate::aws::eks::{self, UpdateOf};
use crate::aws::{Ctx, Service};
use crate::resources::{Recorded, Result, i32_of, int_attr, str_attr};
use crate::value::Attrs;

/// Changes the fields in `changed` from `old` to `new`.
pub async fn update(ctx: &Ctx, old: &Attrs, new: &Attrs, changed: &[String]) -> Result<Recorded> {
    let (cluster, name) = (str_attr(new, "cluster"), str_attr(new, "name"));
    let has = |k: &str| changed.iter().any(|c| c == k);
    let of = UpdateOf { cluster, nodegroup: Some(name), addon: None };
    // EKS runs one update at a time per node group: each is awaited before the next.
    if ["scaling", "labels", "taints", "max_unavailable", "update_strategy"].iter().any(|k| has(k)) {
        let mut call = ctx.eks.update_nodegroup_config().cluster_name(cluster).nodegroup_name(name);
        if has("scaling") {
            call = call.scaling_config(scaling(new));
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
            let facts = template_facts(ctx, new).await?;
            let info = match &facts.instance_type {
                Some(t) => ctx.catalog.get(ctx, t).await?,
                None => None,
            };
            call = call.update_config(
                NodegroupUpdateConfig::builder()
                    .max_unavailable(i32_of(int_attr(new, "max_unavailable").unwrap_or(1)))
                    .update_strategy(NodegroupUpdateStrategies::from(
                        update_strategy(new, info.as_ref(), facts.reserved).0,
                    ))
                    .build(),
            );
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
        // Without a release EKS would move to the newest AMI: keep the pinned one.
        let release = match str_attr(new, "release_version") {
            "latest" => describe(ctx, cluster, name).await?.and_then(|n| n.release_version().map(str::to_string)),
            v => Some(v.to_string()),
        };
        let request = ctx
            .eks
            .update_nodegroup_version()
            .cluster_name(cluster)
            .nodegroup_name(name)
            .set_launch_template(template_spec(new))
            .set_release_version(release);
        let out = ctx.call(Service::Eks, "UpdateNodegroupVersion", request.send()).await?;
        let uid = out.update().and_then(|u| u.id()).unwrap_or_default().to_string();
        eks::wait_update(ctx, &of, &uid, &format!("version update of node group {name}")).await?;
        if let Some(running) = drained.filter(|n| *n > 0) {
            // Back to what ran before, unless this plan changed the scaling itself.
            let mut back = scaling(new);
            if !has("scaling") {
                back = NodegroupScalingConfig::builder()
                    .set_min_size(back.min_size())
                    .desired_size(running)
                    .set_max_size(back.max_size())
                    .build();
            }
            config_update(ctx, &of, back, &format!("scaling node group {name} back after its update")).await?;
        }
    }
    let n = wait_active(ctx, cluster, name).await?;
    if has("tags") {
        eks::sync_tags(ctx, n.nodegroup_arn().unwrap_or_default(), old, new).await?;
    }
    Ok(recorded(&n))
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
