//! Tags: every object gpustack creates carries `gpustack:stack` and
//! `gpustack:address` (how refresh and crash recovery find it) plus the
//! stack's and the resource's own tags.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};

use super::{AwsError, Ctx, Service};
use crate::value::{Attrs, Value};

pub const STACK: &str = "gpustack:stack";
pub const ADDRESS: &str = "gpustack:address";

/// The user-visible tags among a resource's inputs.
pub fn user_tags(inputs: &Attrs) -> BTreeMap<String, String> {
    match inputs.get("tags") {
        Some(Value::Table(t)) => t.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect(),
        _ => BTreeMap::new(),
    }
}

/// All tags an object of `address` gets.
pub fn all_tags(ctx: &Ctx, address: &str, inputs: &Attrs) -> Vec<(String, String)> {
    let mut t = vec![(STACK.to_string(), ctx.stack.clone()), (ADDRESS.to_string(), address.to_string())];
    t.extend(user_tags(inputs).into_iter().filter(|(k, _)| !k.starts_with("gpustack:")));
    t
}

pub fn ec2_spec(ctx: &Ctx, rt: ResourceType, address: &str, inputs: &Attrs) -> TagSpecification {
    let tags = all_tags(ctx, address, inputs).into_iter().map(|(k, v)| Tag::builder().key(k).value(v).build());
    TagSpecification::builder().resource_type(rt).set_tags(Some(tags.collect())).build()
}

/// The filter that finds every EC2 object of this stack.
pub fn stack_filter(ctx: &Ctx) -> Filter {
    Filter::builder().name(format!("tag:{STACK}")).values(ctx.stack.clone()).build()
}

pub fn ec2_map(tags: &[Tag]) -> BTreeMap<String, String> {
    tags.iter().filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string()))).collect()
}

/// The `tags` input as AWS shows it: every tag except gpustack's own and AWS's.
pub fn observed(all: &BTreeMap<String, String>) -> Value {
    Value::Table(
        all.iter()
            .filter(|(k, _)| !k.starts_with("gpustack:") && !k.starts_with("aws:"))
            .map(|(k, v)| (k.clone(), Value::str(v.clone())))
            .collect(),
    )
}

/// How an object's user tags change from the `old` inputs to the `new`: the keys to remove,
/// and the keys to set (new or changed) with their values. Every kind's tag update is this.
pub struct TagChanges {
    pub removed: Vec<String>,
    pub set: BTreeMap<String, String>,
}

pub fn changes(old: &Attrs, new: &Attrs) -> TagChanges {
    let (old, new) = (user_tags(old), user_tags(new));
    TagChanges {
        removed: old.keys().filter(|k| !new.contains_key(*k)).cloned().collect(),
        set: new.into_iter().filter(|(k, v)| old.get(k) != Some(v)).collect(),
    }
}

/// Makes an EC2 object's user tags equal the `tags` input.
pub async fn sync_ec2(ctx: &Ctx, id: &str, old: &Attrs, new: &Attrs) -> Result<(), AwsError> {
    let changes = changes(old, new);
    let removed: Vec<Tag> = changes.removed.into_iter().map(|k| Tag::builder().key(k).build()).collect();
    let set: Vec<Tag> = changes.set.into_iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect();
    if !removed.is_empty() {
        ctx.call(Service::Ec2, "DeleteTags", ctx.ec2.delete_tags().resources(id).set_tags(Some(removed)).send())
            .await?;
    }
    if !set.is_empty() {
        ctx.call(Service::Ec2, "CreateTags", ctx.ec2.create_tags().resources(id).set_tags(Some(set)).send()).await?;
    }
    Ok(())
}

/// True when EC2 tags say the object was created by `address` of this stack: the test
/// for adopting an object whose create raced with a crash or whose name is taken.
pub fn is_ours(ctx: &Ctx, tags: &[Tag], address: &str) -> bool {
    let m = ec2_map(tags);
    m.get(STACK) == Some(&ctx.stack) && m.get(ADDRESS).map(String::as_str) == Some(address)
}

/// SageMaker's tags of `inputs` for `address` (`CreateCluster`, `CreateTrainingPlan`).
pub fn sagemaker(ctx: &Ctx, address: &str, inputs: &Attrs) -> Vec<aws_sdk_sagemaker::types::Tag> {
    all_tags(ctx, address, inputs)
        .into_iter()
        .map(|(k, v)| aws_sdk_sagemaker::types::Tag::builder().key(k).value(v).build())
        .collect()
}

/// Every tag of a SageMaker object (`ListTags`, paged).
pub async fn sagemaker_map(ctx: &Ctx, arn: &str) -> Result<BTreeMap<String, String>, AwsError> {
    let pages = ctx.sagemaker.list_tags().resource_arn(arn).into_paginator().send();
    let tags = ctx.all_pages(Service::SageMaker, "ListTags", pages, |p| p.tags.unwrap_or_default()).await?;
    Ok(tags.into_iter().filter_map(|t| Some((t.key?, t.value.unwrap_or_default()))).collect())
}

/// Makes a SageMaker object's user tags equal the `tags` input (`AddTags`, `DeleteTags`).
pub async fn sync_sagemaker(ctx: &Ctx, arn: &str, old: &Attrs, new: &Attrs) -> Result<(), AwsError> {
    let changes = changes(old, new);
    if !changes.removed.is_empty() {
        let call = ctx.sagemaker.delete_tags().resource_arn(arn).set_tag_keys(Some(changes.removed));
        ctx.call(Service::SageMaker, "DeleteTags", call.send()).await?;
    }
    if !changes.set.is_empty() {
        let set =
            changes.set.into_iter().map(|(k, v)| aws_sdk_sagemaker::types::Tag::builder().key(k).value(v).build());
        let call = ctx.sagemaker.add_tags().resource_arn(arn).set_tags(Some(set.collect()));
        ctx.call(Service::SageMaker, "AddTags", call.send()).await?;
    }
    Ok(())
}
