//! The controller's interruption queue and the EventBridge rules that feed it (aws-facts §9),
//! as Karpenter's template makes them: an SQS queue keeping messages 300 s with SSE-SQS, a
//! queue policy that lets EventBridge send and refuses plain HTTP, and one rule per event
//! (four; a fifth for Capacity Reservation interruptions from Karpenter v1.10), each with
//! the queue as its one target. The template leaves rule names to CloudFormation; gpustack
//! names them `<stack>-<name>-<suffix>`, so they are found and deleted by name.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use aws_sdk_eventbridge::types::{RuleState, Tag, Target};
use aws_sdk_sqs::types::QueueAttributeName;
use serde_json::json;

use crate::aws::wait::{Poll, until};
use crate::aws::{Absent, AwsError, Ctx, Service};
use crate::resources::Result;

/// The target id Karpenter's template gives the queue on every rule.
pub const TARGET_ID: &str = "KarpenterInterruptionQueueTarget";
/// SQS queue names are 1 to 80 of `[A-Za-z0-9_-]` (botocore `CreateQueueRequest.QueueName`).
pub const QUEUE_NAME_MAX: usize = 80;
/// EventBridge rule names are 1 to 64 of `[.\-_A-Za-z0-9]` (botocore `RuleName`).
pub const RULE_NAME_MAX: usize = 64;
/// SQS frees a deleted queue's name after 60 s (`QueueDeletedRecently`, botocore CreateQueue);
/// gpustack waits for it up to twice that.
const NAME_REUSE_WAIT: Duration = Duration::from_secs(120);
/// CreateQueue's codes for a name deleted less than 60 s ago and for a name taken by a queue
/// with other attributes (the codes `aws-sdk-sqs` reads as `QueueDeletedRecently` and
/// `QueueNameExists`).
const QUEUE_DELETED_RECENTLY: &str = "AWS.SimpleQueueService.QueueDeletedRecently";
const QUEUE_NAME_EXISTS: &str = "QueueAlreadyExists";

/// One EventBridge rule of the template: the event it forwards and the first version with it.
pub struct Rule {
    /// The end of the rule's name: `<stack>-<name>-<suffix>`.
    pub suffix: &'static str,
    source: &'static str,
    detail_type: &'static str,
    since: (u32, u32),
}

/// The template's rules (`ScheduledChangeRule`, `SpotInterruptionRule`, `RebalanceRule`,
/// `InstanceStateChangeRule`, and `CapacityReservationInterruptionRule` from v1.10).
pub const RULES: &[Rule] = &[
    Rule { suffix: "health", source: "aws.health", detail_type: "AWS Health Event", since: (1, 6) },
    Rule { suffix: "spot", source: "aws.ec2", detail_type: "EC2 Spot Instance Interruption Warning", since: (1, 6) },
    Rule {
        suffix: "rebalance",
        source: "aws.ec2",
        detail_type: "EC2 Instance Rebalance Recommendation",
        since: (1, 6),
    },
    Rule { suffix: "state", source: "aws.ec2", detail_type: "EC2 Instance State-change Notification", since: (1, 6) },
    Rule {
        suffix: "reserved",
        source: "aws.ec2",
        detail_type: "EC2 Capacity Reservation Instance Interruption Warning",
        since: (1, 10),
    },
];

/// The longest rule suffix, for the offline name-length check.
pub fn longest_suffix() -> usize {
    RULES.iter().map(|r| r.suffix.len()).max().unwrap_or(0)
}

/// The suffixes of the rules Karpenter `version` needs.
pub fn suffixes_for(version: (u32, u32)) -> BTreeSet<&'static str> {
    RULES.iter().filter(|r| version >= r.since).map(|r| r.suffix).collect()
}

/// The rule of a name `<prefix>-<suffix>`, when the suffix is one of ours.
pub fn suffix_of<'a>(prefix: &str, name: &'a str) -> Option<&'a str> {
    let suffix = name.strip_prefix(prefix)?.strip_prefix('-')?;
    RULES.iter().any(|r| r.suffix == suffix).then_some(suffix)
}

/// The rule's event pattern, exactly as the template writes it.
fn pattern(rule: &Rule) -> String {
    json!({ "source": [rule.source], "detail-type": [rule.detail_type] }).to_string()
}

/// The queue's ARN (SQS ARNs are `arn:<partition>:sqs:<region>:<account>:<name>`).
pub fn queue_arn(partition: &str, region: &str, account: &str, name: &str) -> String {
    format!("arn:{partition}:sqs:{region}:{account}:{name}")
}

/// The template's `KarpenterInterruptionQueuePolicy`, with a `Version`.
fn queue_policy(arn: &str) -> String {
    json!({
        "Version": "2012-10-17",
        "Id": "EC2InterruptionPolicy",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": { "Service": ["events.amazonaws.com", "sqs.amazonaws.com"] },
                "Action": "sqs:SendMessage",
                "Resource": arn
            },
            {
                "Sid": "DenyHTTP",
                "Effect": "Deny",
                "Action": "sqs:*",
                "Resource": arn,
                "Condition": { "Bool": { "aws:SecureTransport": false } },
                "Principal": "*"
            }
        ]
    })
    .to_string()
}

fn queue_attributes(arn: &str) -> HashMap<QueueAttributeName, String> {
    HashMap::from([
        (QueueAttributeName::MessageRetentionPeriod, "300".to_string()),
        (QueueAttributeName::SqsManagedSseEnabled, "true".to_string()),
        (QueueAttributeName::Policy, queue_policy(arn)),
    ])
}

/// Creates the queue, or makes an existing one of this stack match. A queue of that name
/// deleted less than a minute ago (a destroy, then an apply) blocks the name: wait for SQS
/// to free it, saying so through `report`.
pub async fn ensure_queue(
    ctx: &Ctx,
    name: &str,
    arn: &str,
    tags: &HashMap<String, String>,
    report: &(dyn Fn(&str) + Send + Sync),
) -> Result<()> {
    let (attributes, told) = (&queue_attributes(arn), &AtomicBool::new(false));
    let made = until(&format!("the name of SQS queue {name}"), NAME_REUSE_WAIT, move || async move {
        let request = ctx
            .sqs
            .create_queue()
            .queue_name(name)
            .set_attributes(Some(attributes.clone()))
            .set_tags(Some(tags.clone()));
        match ctx.call(Service::Sqs, "CreateQueue", request.send()).await {
            Ok(_) => Ok(Poll::Done(true)),
            Err(e) if e.has_code(QUEUE_DELETED_RECENTLY) => {
                if !told.swap(true, Ordering::Relaxed) {
                    report(&format!(
                        "waiting for SQS to free the name {name} (a queue of that name was deleted less than 60 s ago)"
                    ));
                }
                Ok(Poll::Pending("taken by a queue deleted less than 60 s ago".into()))
            }
            // The name exists with other attributes: ours is repaired below, anyone else's refused.
            Err(e) if e.has_code(QUEUE_NAME_EXISTS) => Ok(Poll::Done(false)),
            Err(e) => Err(e),
        }
    })
    .await?;
    if made {
        return Ok(());
    }
    let url = queue_url(ctx, name).await?.unwrap_or_default();
    let owner = ctx.call(Service::Sqs, "ListQueueTags", ctx.sqs.list_queue_tags().queue_url(&url).send()).await?;
    if owner.tags().and_then(|t| t.get(crate::aws::tags::STACK)) != Some(&ctx.stack) {
        return Err(AwsError {
            operation: "CreateQueue",
            code: Some("QueueAlreadyExists".into()),
            detail: format!(
                "an SQS queue named {name} already exists and was not made by stack {}; delete it or rename the controller",
                ctx.stack
            ),
        });
    }
    let request = ctx.sqs.set_queue_attributes().queue_url(url).set_attributes(Some(attributes.clone()));
    ctx.call(Service::Sqs, "SetQueueAttributes", request.send()).await?;
    Ok(())
}

/// The queue's URL, or None when there is no such queue.
pub async fn queue_url(ctx: &Ctx, name: &str) -> Result<Option<String>> {
    let request = ctx.sqs.get_queue_url().queue_name(name);
    Ok(ctx.call(Service::Sqs, "GetQueueUrl", request.send()).await.absent_ok()?.and_then(|o| o.queue_url))
}

/// Deletes the queue; a queue already gone is success.
pub async fn delete_queue(ctx: &Ctx, name: &str) -> Result<()> {
    let Some(url) = queue_url(ctx, name).await? else { return Ok(()) };
    ctx.call(Service::Sqs, "DeleteQueue", ctx.sqs.delete_queue().queue_url(url).send()).await.absent_ok()?;
    Ok(())
}

/// The names and URLs of the queues whose names start with `prefix` (one paged call).
pub async fn queues(ctx: &Ctx, prefix: &str) -> Result<BTreeMap<String, String>> {
    let pages = ctx.sqs.list_queues().queue_name_prefix(prefix).into_paginator().send();
    let urls = ctx.all_pages(Service::Sqs, "ListQueues", pages, |p| p.queue_urls.unwrap_or_default()).await?;
    Ok(urls.into_iter().filter_map(|u| Some((u.rsplit('/').next()?.to_string(), u))).collect())
}

/// True when the queue has the template's settings: 300 s retention, SSE-SQS and a policy
/// that lets EventBridge send.
pub async fn queue_in_shape(ctx: &Ctx, url: &str) -> Result<bool> {
    let request = ctx
        .sqs
        .get_queue_attributes()
        .queue_url(url)
        .attribute_names(QueueAttributeName::MessageRetentionPeriod)
        .attribute_names(QueueAttributeName::SqsManagedSseEnabled)
        .attribute_names(QueueAttributeName::Policy);
    let out = ctx.call(Service::Sqs, "GetQueueAttributes", request.send()).await?;
    let a = out.attributes().cloned().unwrap_or_default();
    let get = |k: QueueAttributeName| a.get(&k).map(String::as_str).unwrap_or_default().to_string();
    let policy = get(QueueAttributeName::Policy);
    Ok(get(QueueAttributeName::MessageRetentionPeriod) == "300"
        && get(QueueAttributeName::SqsManagedSseEnabled) == "true"
        && policy.contains("events.amazonaws.com")
        && policy.contains("DenyHTTP"))
}

/// Makes the rules `<prefix>-<suffix>` those `version` needs, each targeting the queue: the
/// missing are put (with their target), the ones a target is missing from get it, and the
/// ones this version does not use are removed. `fresh` (a create) skips the two listings.
pub async fn sync_rules(
    ctx: &Ctx,
    prefix: &str,
    version: (u32, u32),
    queue_arn: &str,
    tags: &HashMap<String, String>,
    fresh: bool,
) -> Result<()> {
    let wanted = suffixes_for(version);
    let (existing, targeted) = if fresh {
        (BTreeSet::new(), BTreeSet::new())
    } else {
        let existing: BTreeSet<String> = rules(ctx, prefix).await?.into_keys().collect();
        let targeted: BTreeSet<String> = targeting(ctx, queue_arn).await?.into_iter().collect();
        (existing, targeted)
    };
    for rule in RULES.iter().filter(|r| wanted.contains(r.suffix)) {
        let name = format!("{prefix}-{}", rule.suffix);
        if !existing.contains(&name) {
            put_rule(ctx, &name, rule, tags).await?;
        }
        if !targeted.contains(&name) {
            put_target(ctx, &name, queue_arn).await?;
        }
    }
    for name in existing.iter().filter(|n| suffix_of(prefix, n).is_some_and(|s| !wanted.contains(s))) {
        delete_rule(ctx, name).await?;
    }
    Ok(())
}

async fn put_rule(ctx: &Ctx, name: &str, rule: &Rule, tags: &HashMap<String, String>) -> Result<()> {
    // PutRule ignores tags on an existing rule (botocore PutRule): they only count here on creation.
    let tags: Vec<Tag> =
        tags.iter().filter_map(|(k, v)| Tag::builder().key(k.clone()).value(v.clone()).build().ok()).collect();
    let request = ctx
        .events
        .put_rule()
        .name(name)
        .event_pattern(pattern(rule))
        .state(RuleState::Enabled)
        .description(format!("{} to Karpenter's interruption queue", rule.detail_type))
        .set_tags(Some(tags));
    ctx.call(Service::Events, "PutRule", request.send()).await?;
    Ok(())
}

async fn put_target(ctx: &Ctx, rule: &str, queue_arn: &str) -> Result<()> {
    let target = Target::builder().id(TARGET_ID).arn(queue_arn).build().map_err(|e| AwsError {
        operation: "PutTargets",
        code: None,
        detail: format!("the target of rule {rule} could not be built: {e}"),
    })?;
    let out =
        ctx.call(Service::Events, "PutTargets", ctx.events.put_targets().rule(rule).targets(target).send()).await?;
    // PutTargets answers 200 with per-target failures.
    match out.failed_entries().first() {
        None => Ok(()),
        Some(f) => Err(AwsError {
            operation: "PutTargets",
            code: f.error_code().map(str::to_string),
            detail: format!("rule {rule}: {}", f.error_message().unwrap_or("the queue was not added as a target")),
        }),
    }
}

/// Removes the rule's target, then the rule (EventBridge refuses to delete a rule with
/// targets); a rule already gone is success.
async fn delete_rule(ctx: &Ctx, name: &str) -> Result<()> {
    let request = ctx.events.remove_targets().rule(name).ids(TARGET_ID);
    if ctx.call(Service::Events, "RemoveTargets", request.send()).await.absent_ok()?.is_none() {
        return Ok(());
    }
    ctx.call(Service::Events, "DeleteRule", ctx.events.delete_rule().name(name).send()).await?;
    Ok(())
}

/// Deletes every rule `<prefix>-<suffix>` there is (only those: deleting what does not exist
/// would need permissions on rules that are not the stack's).
pub async fn delete_rules(ctx: &Ctx, prefix: &str) -> Result<()> {
    for name in rules(ctx, prefix).await?.into_keys() {
        delete_rule(ctx, &name).await?;
    }
    Ok(())
}

/// The rules named `<prefix>-<suffix>` for one of our suffixes, name → ARN.
pub async fn rules(ctx: &Ctx, prefix: &str) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let mut token = None;
    // EventBridge's SDK has no paginators (ListRules is not marked paginated in its model), so
    // `Ctx::all_pages` cannot take this listing: each page is one `Ctx::call`.
    loop {
        let request = ctx.events.list_rules().name_prefix(format!("{prefix}-")).set_next_token(token);
        let page = ctx.call(Service::Events, "ListRules", request.send()).await?;
        for r in page.rules() {
            if let (Some(name), Some(arn)) = (r.name(), r.arn())
                && suffix_of(prefix, name).is_some()
            {
                out.insert(name.to_string(), arn.to_string());
            }
        }
        token = page.next_token;
        if token.is_none() {
            return Ok(out);
        }
    }
}

/// The names of the rules that have the queue as a target (one call per queue).
pub async fn targeting(ctx: &Ctx, queue_arn: &str) -> Result<Vec<String>> {
    let mut out = vec![];
    let mut token = None;
    // No paginator here either (see `rules`): each page is one `Ctx::call`.
    loop {
        let request = ctx.events.list_rule_names_by_target().target_arn(queue_arn).set_next_token(token);
        let page = ctx.call(Service::Events, "ListRuleNamesByTarget", request.send()).await?;
        out.extend(page.rule_names().iter().cloned());
        token = page.next_token;
        if token.is_none() {
            return Ok(out);
        }
    }
}

/// Makes the user tags of the queue and of every rule equal `new`'s.
pub async fn sync_tags(
    ctx: &Ctx,
    queue: &str,
    prefix: &str,
    removed: &[String],
    set: &HashMap<String, String>,
) -> Result<()> {
    if let Some(url) = queue_url(ctx, queue).await? {
        if !removed.is_empty() {
            let request = ctx.sqs.untag_queue().queue_url(&url).set_tag_keys(Some(removed.to_vec()));
            ctx.call(Service::Sqs, "UntagQueue", request.send()).await?;
        }
        if !set.is_empty() {
            let request = ctx.sqs.tag_queue().queue_url(&url).set_tags(Some(set.clone()));
            ctx.call(Service::Sqs, "TagQueue", request.send()).await?;
        }
    }
    let tags: Vec<Tag> =
        set.iter().filter_map(|(k, v)| Tag::builder().key(k.clone()).value(v.clone()).build().ok()).collect();
    for arn in rules(ctx, prefix).await?.into_values() {
        if !removed.is_empty() {
            let request = ctx.events.untag_resource().resource_arn(&arn).set_tag_keys(Some(removed.to_vec()));
            ctx.call(Service::Events, "UntagResource", request.send()).await?;
        }
        if !tags.is_empty() {
            let request = ctx.events.tag_resource().resource_arn(&arn).set_tags(Some(tags.clone()));
            ctx.call(Service::Events, "TagResource", request.send()).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fifth_rule_comes_with_v1_10() {
        assert_eq!(suffixes_for((1, 6)).len(), 4);
        assert_eq!(suffixes_for((1, 9)).len(), 4);
        assert!(suffixes_for((1, 10)).contains("reserved"));
        assert_eq!(suffixes_for((1, 14)).len(), 5);
    }

    #[test]
    fn patterns_are_the_templates() {
        assert_eq!(pattern(&RULES[0]), r#"{"source":["aws.health"],"detail-type":["AWS Health Event"]}"#);
    }

    #[test]
    fn rule_names_are_recognised_by_their_suffix() {
        assert_eq!(suffix_of("s-k", "s-k-spot"), Some("spot"));
        assert_eq!(suffix_of("s-k", "s-k-other"), None);
        assert_eq!(suffix_of("s-k", "s-k2-spot"), None);
    }

    #[test]
    fn the_queue_policy_lets_eventbridge_send_and_refuses_http() {
        let p: serde_json::Value = serde_json::from_str(&queue_policy("arn:aws:sqs:r:1:q")).unwrap();
        assert_eq!(p["Statement"][0]["Principal"]["Service"][0], "events.amazonaws.com");
        assert_eq!(p["Statement"][0]["Action"], "sqs:SendMessage");
        assert_eq!(p["Statement"][1]["Sid"], "DenyHTTP");
        assert_eq!(p["Statement"][1]["Condition"]["Bool"]["aws:SecureTransport"], false);
    }
}
