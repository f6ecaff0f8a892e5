//! `gpustack policy STACK`: the least-privilege IAM policy a deploy role needs to plan,
//! apply and destroy one stack. The actions come from the kinds the stack uses
//! (`Kind::actions`); the resources are scoped as tightly as each API allows:
//! - `Describe*`/`List*` and EKS reads take `"Resource": "*"` (EC2 Describe* support no
//!   resource-level permissions: EC2 UG `ec2-supported-iam-actions-resources`), limited to
//!   the stack's region with `aws:RequestedRegion`;
//! - EC2 creates are limited to the region; tags on create only through `ec2:CreateAction`
//!   (EC2 UG `supported-iam-actions-tagging`);
//! - every other EC2 and EKS change needs the resource's `gpustack:stack` tag
//!   (`aws:ResourceTag`), so the role cannot touch what another stack or a person made;
//! - IAM changes and `iam:PassRole` are limited to the stack's role path
//!   `/gpustack/<stack>/` (IAM ARNs carry the path: Service Authorization Reference, IAM);
//! - SSM parameters to AWS's public `/aws/service/` tree; Run Command to the
//!   `AWS-RunShellScript` document and instances tagged for the stack;
//! - SQS queues and EventBridge rules to the stack's names (`<stack>-*`, as the kinds name
//!   them), created only with the `gpustack:stack` tag and changed only when they carry it
//!   (a name prefix alone would also match a stack whose name extends this one's).
//!
//! It reads the stack file only: no AWS call.

use std::collections::BTreeSet;

use serde_json::{Value as Json, json};

use crate::aws::tags;
use crate::stack::Stack;
use crate::value::Value;

/// The ARNs of the roles the stack imports (`[import]` ids of `iam_role`), with and without a
/// path, and of the instance profiles of their names.
fn imported_roles(stack: &Stack) -> Vec<String> {
    let mut out = vec![];
    for i in stack.imports.iter().filter(|i| stack.get(&i.address).is_some_and(|r| r.kind.name() == "iam_role")) {
        for t in ["role", "instance-profile"] {
            out.push(format!("arn:aws:iam::*:{t}/{}", i.id));
            out.push(format!("arn:aws:iam::*:{t}/*/{}", i.id));
        }
    }
    out
}

/// The ARNs of the training plans the stack imports (`[import]` ids of `training_plan`, a
/// plan name): they keep their own names, outside the stack's `<stack>-*` (review imp-core
/// M3). Each is listed as written and lower-cased: `TrainingPlanName` allows upper case
/// (botocore sagemaker `TrainingPlanName` pattern `[a-zA-Z0-9](-*[a-zA-Z0-9]){0,63}`) but the
/// published training-plan ARNs are lower case, and the real ARN cannot be read offline (m8).
fn imported_plans(stack: &Stack) -> Vec<String> {
    let region = stack.region.as_str();
    let mut out: Vec<String> = vec![];
    for i in stack.imports.iter().filter(|i| stack.get(&i.address).is_some_and(|r| r.kind.name() == "training_plan")) {
        for name in [i.id.clone(), i.id.to_lowercase()] {
            let arn = format!("arn:aws:sagemaker:{region}:*:training-plan/{name}");
            if !out.contains(&arn) {
                out.push(arn);
            }
        }
    }
    out
}

/// The EC2 resource types an import tags beside the imported object: a VPC's internet gateway
/// and public route table, a subnet's own route table. Never a NAT gateway's Elastic IPs:
/// they stay the account's (review imp-net M3/M4).
fn imported_network_parts(stack: &Stack) -> Vec<&'static str> {
    let kinds: BTreeSet<&str> =
        stack.imports.iter().filter_map(|i| stack.get(&i.address)).map(|r| r.kind.name()).collect();
    let mut parts = vec![];
    if kinds.contains("vpc") {
        parts.push("internet-gateway");
    }
    if kinds.contains("vpc") || kinds.contains("subnet") {
        parts.push("route-table");
    }
    parts
}

/// EC2 actions that create something (tagged on creation, so `ec2:CreateTags` must be
/// allowed for them through `ec2:CreateAction`).
fn is_create(action: &str) -> bool {
    let op = action.split(':').nth(1).unwrap_or_default();
    // CreateRoute and CreateLaunchTemplateVersion change an existing (tagged) route table or
    // template: they are managed like any other change, under the stack's tag.
    (op.starts_with("Create") && !matches!(op, "CreateTags" | "CreateRoute" | "CreateLaunchTemplateVersion"))
        || matches!(op, "RunInstances" | "AllocateAddress" | "PurchaseCapacityBlock")
}

fn is_read(action: &str) -> bool {
    let op = action.split(':').nth(1).unwrap_or_default();
    op.starts_with("Describe")
        || op.starts_with("List")
        || op.starts_with("Search")
        || (op.starts_with("Get") && !action.starts_with("ssm:GetParameter"))
}

/// Adds one statement: (sid, actions, resource, condition).
type Push<'a> = dyn FnMut(&str, Vec<&str>, Json, Option<Json>) + 'a;

/// What some `eks_cluster` options add, only for the stacks that use them (issue 19):
/// - `encryption`: `eks:AssociateEncryptionConfig` on the stack's clusters, and on the keys
///   `kms:DescribeKey` and `kms:CreateGrant`, unconditioned: "make sure that the kms:DescribeKey
///   and kms:CreateGrant actions are permitted on the policy for the principal that calls the
///   create-cluster API", and `kms:GrantIsForAWSResource` "is not supported for the CreateCluster
///   action" (EKS UG `enable-kms`). An alias ARN is authorised on the key it names, so it allows
///   the region's keys.
/// - any cluster (its group may be recorded as owned) and `log_retention_days` (the cluster owns
///   the group): CloudWatch Logs actions on `/aws/eks/<cluster>/cluster` only (log-group ARNs, Service
///   Authorization Reference "Actions defined by Amazon CloudWatch Logs"); tags on
///   `CreateLogGroup` need `logs:TagResource` too (CloudWatch Logs API reference, CreateLogGroup).
fn cluster_options(stack: &Stack, push: &mut Push) {
    let region = stack.region.as_str();
    let clusters: Vec<&crate::stack::Resource> =
        stack.resources.iter().filter(|r| r.kind.name() == "eks_cluster").collect();
    let lit =
        |r: &crate::stack::Resource, k: &str| r.attrs.get(k).map(|e| e.resolve(&|_| crate::value::Value::Unknown));
    let name = |r: &crate::stack::Resource| match lit(r, "name") {
        Some(crate::value::Value::Str(n)) => n,
        Some(_) => "*".to_string(),
        None => stack.default_physical_name(r),
    };
    let mut keys: BTreeSet<String> = BTreeSet::new();
    for r in clusters.iter().filter(|r| r.attrs.contains_key("encryption")) {
        let key = lit(r, "encryption")
            .and_then(|v| v.as_table().and_then(|t| t.get("kms_key")).and_then(|k| k.as_str().map(str::to_string)));
        match key.filter(|k| k.contains(":key/")) {
            Some(k) => keys.insert(k),
            None => keys.insert(format!("arn:aws:kms:{region}:*:key/*")),
        };
    }
    if !keys.is_empty() {
        push(
            "EksEncryptStackClusters",
            vec!["eks:AssociateEncryptionConfig"],
            json!(format!("arn:aws:eks:{region}:*:cluster/*")),
            Some(json!({ "StringEquals": { format!("aws:ResourceTag/{}", tags::STACK): stack.name } })),
        );
        push("KmsDescribeClusterKeys", vec!["kms:DescribeKey"], json!(keys), None);
        // No `kms:GrantIsForAWSResource` condition: "The condition kms:GrantIsForAWSResource is
        // not supported for the CreateCluster action, and should not be used in KMS policies to
        // control kms:CreateGrant permissions for users performing CreateCluster" (EKS UG
        // `enable-kms`, last note), so with it every encrypted CreateCluster is refused.
        push("KmsGrantClusterKeys", vec!["kms:CreateGrant"], json!(keys), None);
    }
    let groups = |f: &dyn Fn(&crate::stack::Resource) -> bool| -> Vec<String> {
        clusters
            .iter()
            .filter(|r| f(r))
            .flat_map(|r| {
                let g = format!("arn:aws:logs:{region}:*:log-group:/aws/eks/{}/cluster", name(r));
                [g.clone(), format!("{g}:*")]
            })
            .collect()
    };
    // Every cluster of the stack may own its group (state can record `log_retention_days` the
    // file no longer has): reading it, and the removals an apply of this file runs (taking the
    // retention off, deleting the group with the cluster), are granted on every cluster's group,
    // so a policy made from the new file can still apply it (review r19 M5). Refresh reads the
    // group only for clusters that set the retention, in the file or in state (review r19 M3).
    if !clusters.is_empty() {
        push(
            "LogsReadClusterLogGroups",
            vec!["logs:DescribeLogGroups"],
            json!(format!("arn:aws:logs:{region}:*:log-group:*")),
            None,
        );
        push(
            "LogsRemoveClusterLogGroups",
            vec!["logs:DeleteRetentionPolicy", "logs:DeleteLogGroup"],
            json!(groups(&|_| true)),
            None,
        );
    }
    let owned = groups(&|r| r.attrs.contains_key("log_retention_days"));
    if !owned.is_empty() {
        push(
            "LogsManageClusterLogGroups",
            // ListTagsForResource: whether an existing group is this stack's (`cluster_log_group::ensure`).
            vec!["logs:CreateLogGroup", "logs:TagResource", "logs:ListTagsForResource", "logs:PutRetentionPolicy"],
            json!(owned),
            None,
        );
    }
}

/// SageMaker (HyperPod clusters, training plans): creates carry the `gpustack:stack` tag,
/// changes need it; plans are named `<stack>-…`. HyperPod's `CreateCluster` with an EKS
/// orchestrator also needs the caller to hold the access-entry actions HyperPod uses on the
/// EKS cluster (SageMaker DG `sagemaker-hyperpod-prerequisites-iam`, "IAM users for cluster
/// admin", EKS tab), and a training plan the reserved capacity it creates (`…-training-plan-iam`).
fn sagemaker(stack: &Stack, has: &dyn Fn(&str) -> bool, push: &mut dyn FnMut(&str, Vec<&str>, Json, Option<Json>)) {
    let region = stack.region.as_str();
    let name = &stack.name;
    let request_tag = json!({ "StringEquals": { format!("aws:RequestTag/{}", tags::STACK): name } });
    let resource_tag = json!({ "StringEquals": { format!("aws:ResourceTag/{}", tags::STACK): name } });
    let mut resources = vec![];
    let mut creates = vec![];
    if has("sagemaker:CreateCluster") {
        resources.push(format!("arn:aws:sagemaker:{region}:*:cluster/*"));
        creates.push("sagemaker:CreateCluster");
    }
    // The stack's own plans, and the imported ones by their ARNs: changed (tags, destroy's
    // retain) only once the import has tagged them for the stack (`aws:ResourceTag` below).
    let mut plans = vec![format!("arn:aws:sagemaker:{region}:*:training-plan/{}-*", name)];
    plans.extend(imported_plans(stack));
    if has("sagemaker:CreateTrainingPlan") {
        resources.push(plans[0].clone());
        creates.push("sagemaker:CreateTrainingPlan");
    }
    if creates.is_empty() {
        return;
    }
    let tagging: Vec<&str> = creates.iter().map(|a| a.trim_start_matches("sagemaker:")).collect();
    push("SageMakerCreateTagged", creates.clone(), json!(resources.clone()), Some(request_tag.clone()));
    // Tags go on with the create only (`sagemaker:TaggingAction`, as AWS's managed policies
    // scope it): the role cannot tag a foreign cluster into the stack and then delete it.
    let mut on_create = request_tag;
    on_create["StringEquals"]["sagemaker:TaggingAction"] = json!(tagging);
    push("SageMakerTagOnCreate", vec!["sagemaker:AddTags"], json!(resources.clone()), Some(on_create));
    let mut managed = resources.clone();
    if has("sagemaker:CreateTrainingPlan") {
        managed.extend(plans[1..].iter().cloned());
    }
    push(
        "SageMakerManageStackResources",
        ["sagemaker:UpdateCluster", "sagemaker:DeleteCluster", "sagemaker:AddTags", "sagemaker:DeleteTags"]
            .into_iter()
            .filter(|a| has(a))
            .collect(),
        json!(managed),
        Some(resource_tag),
    );
    if has("sagemaker:CreateTrainingPlan") {
        // A plan retained by an earlier destroy carries only `gpustack:retained-from`; declaring
        // it again takes it back by re-tagging it.
        push(
            "SageMakerTakeBackRetainedPlans",
            vec!["sagemaker:AddTags", "sagemaker:DeleteTags"],
            json!(plans),
            Some(json!({ "StringLike": {
                format!("aws:ResourceTag/{}", crate::resources::capacity_block::RETAINED): format!("{name} *")
            } })),
        );
        push(
            "TrainingPlanReservedCapacity",
            vec!["sagemaker:CreateReservedCapacity", "sagemaker:AddTags"],
            json!(format!("arn:aws:sagemaker:{region}:*:reserved-capacity/*")),
            None,
        );
    }
    if has("sagemaker:CreateCluster") {
        // A cluster on a training plan names the plan and its reserved capacity.
        if has("sagemaker:CreateTrainingPlan") {
            push(
                "HyperPodOnTrainingPlans",
                vec!["sagemaker:CreateCluster", "sagemaker:UpdateCluster"],
                json!(
                    plans
                        .iter()
                        .cloned()
                        .chain([format!("arn:aws:sagemaker:{region}:*:reserved-capacity/*")])
                        .collect::<Vec<_>>()
                ),
                None,
            );
        }
        push(
            "HyperPodAccessEntries",
            vec![
                "eks:DescribeCluster",
                "eks:CreateAccessEntry",
                "eks:DescribeAccessEntry",
                "eks:DeleteAccessEntry",
                "eks:AssociateAccessPolicy",
            ],
            json!(
                orchestrators(stack)
                    .iter()
                    .flat_map(|c| [
                        format!("arn:aws:eks:{region}:*:cluster/{c}"),
                        format!("arn:aws:eks:{region}:*:access-entry/{c}/*")
                    ])
                    .collect::<Vec<_>>()
            ),
            None,
        );
    }
}

/// The names of the EKS clusters HyperPod clusters of the stack run on: a cluster of the
/// stack by its `name` (or default name), an ARN by its last part, anything else as `*`.
fn orchestrators(stack: &Stack) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for c in stack.resources.iter().filter(|r| r.kind.name() == "hyperpod_cluster") {
        let Some(e) = c.attrs.get("eks_cluster") else { continue };
        let name =
            match (e.as_single_ref().and_then(|x| stack.get(&x.address)), e.as_literal().and_then(|v| v.as_str())) {
                (Some(eks), _) => eks
                    .attrs
                    .get("name")
                    .and_then(|n| n.as_literal())
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_else(|| stack.default_physical_name(eks)),
                (None, Some(arn)) => arn.rsplit('/').next().unwrap_or("*").to_string(),
                _ => "*".to_string(),
            };
        out.insert(name);
    }
    out
}

fn is_rule_create(action: &str) -> bool {
    matches!(action, "ec2:AuthorizeSecurityGroupIngress" | "ec2:AuthorizeSecurityGroupEgress")
}

/// The groups the stack's `security_group_rule`s change that the stack does not own (so
/// they lack its tag), as narrow as the stack says them: a literal id or a group read by id
/// → that group's ARN; a group read by tags → any group with those tags; an EKS cluster's
/// security group → any group tagged `aws:eks:cluster-name = <cluster>` (EKS tags the
/// cluster security group it creates so; EKS UG `sec-group-reqs`); anything else → any
/// group in the region (the one case the policy cannot narrow offline). Rules on the
/// stack's own groups need nothing more: the stack-tag statement covers them.
fn foreign_rule_groups(stack: &Stack) -> Vec<(Json, Option<Json>)> {
    let region = stack.region.as_str();
    let one = |id: &str| (json!(format!("arn:aws:ec2:{region}:*:security-group/{id}")), None);
    let any = json!(format!("arn:aws:ec2:{region}:*:security-group/*"));
    let tagged = |t: serde_json::Map<String, Json>| (any.clone(), Some(json!({ "StringEquals": t })));
    let mut out: Vec<(Json, Option<Json>)> = vec![];
    for r in stack.resources.iter().filter(|r| r.kind.name() == "security_group_rule") {
        let Some(e) = r.attrs.get("security_group") else { continue };
        let target = match (e.as_single_ref(), e.as_literal().and_then(|v| v.as_str())) {
            (None, Some(id)) => one(id),
            (Some(x), _) => match stack.get(&x.address) {
                Some(g) if g.kind.name() == "security_group" => match g.attrs.get("existing") {
                    None => continue,
                    // Resolved with unknowns for references: a tag value known only at
                    // plan time cannot narrow the statement.
                    Some(ex) => match ex.resolve(&|_| crate::value::Value::Unknown) {
                        crate::value::Value::Str(id) => one(&id),
                        crate::value::Value::Table(t) => match t.get("tags").and_then(|t| t.as_table()) {
                            Some(tags) if !tags.is_empty() && tags.values().all(|v| v.as_str().is_some()) => tagged(
                                tags.iter().map(|(k, v)| (format!("aws:ResourceTag/{k}"), json!(v.as_str()))).collect(),
                            ),
                            _ => (any.clone(), None),
                        },
                        _ => (any.clone(), None),
                    },
                },
                Some(c) if c.kind.name() == "eks_cluster" => {
                    let name = c
                        .attrs
                        .get("name")
                        .and_then(|n| n.as_literal())
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_else(|| stack.default_physical_name(c));
                    tagged(serde_json::Map::from_iter([(
                        "aws:ResourceTag/aws:eks:cluster-name".to_string(),
                        json!(name),
                    )]))
                }
                _ => (any.clone(), None),
            },
            _ => (any.clone(), None),
        };
        if !out.contains(&target) {
            out.push(target);
        }
    }
    out
}

/// A command group whose policy `gpustack policy --for` prints, without a stack.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum PolicyFor {
    /// `capacity find` (and the other `capacity` commands): reads only, in any region
    Capacity,
}

/// What `capacity find` calls, each read-only (src/capacity/search.rs and the searches of the
/// buying kinds it reuses): the zones and their ids, Capacity Block offerings, Spot placement
/// scores (EC2 API Reference `GetSpotPlacementScores`: the action is
/// `ec2:GetSpotPlacementScores`), the instance catalog for types gpustack does not ship,
/// training-plan offerings, EC2 quotas as listed (applied and default values), and the prices
/// (the price book: `pricing:GetProducts` and `ec2:DescribeSpotPriceHistory`).
pub const CAPACITY_FIND: &[&str] = &[
    "ec2:DescribeAvailabilityZones",
    "ec2:DescribeCapacityBlockOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeSpotPriceHistory",
    "ec2:GetSpotPlacementScores",
    "pricing:GetProducts",
    "sagemaker:SearchTrainingPlanOfferings",
    "servicequotas:ListAWSDefaultServiceQuotas",
    "servicequotas:ListServiceQuotas",
];

/// What `capacity timeline` and `status` call besides the prices (`pricing:GetProducts`,
/// `ec2:DescribeSpotPriceHistory`, above): the stack's reservations by id
/// (`DescribeCapacityReservations`), its training plans by name (`DescribeTrainingPlan`), its
/// node groups (`DescribeNodegroup`) and their Auto Scaling groups' instances
/// (`DescribeAutoScalingGroups`). All read-only; the state itself is read with the stack's
/// backend permissions.
pub const CAPACITY_WATCH: &[&str] = &[
    "autoscaling:DescribeAutoScalingGroups",
    "ec2:DescribeCapacityReservations",
    "eks:DescribeNodegroup",
    "sagemaker:DescribeTrainingPlan",
];

/// The policy of a command group: its read actions on `"Resource": "*"` (none of them supports
/// resource-level permissions: EC2 UG `ec2-supported-iam-actions-resources`; the Price List
/// and Service Quotas listings have no resource type), in every region, since a search spans
/// regions and the Price List answers only in us-east-1, eu-central-1 and ap-south-1 (AWS
/// Billing UG `using-pelong`). Nothing that changes or buys.
pub fn command_document(what: PolicyFor) -> Json {
    let actions: BTreeSet<&str> = match what {
        PolicyFor::Capacity => CAPACITY_FIND.iter().chain(CAPACITY_WATCH).copied().collect(),
    };
    json!({
        "Version": "2012-10-17",
        "Statement": [{ "Sid": "CapacityRead", "Effect": "Allow", "Action": actions, "Resource": "*" }]
    })
}

/// The policy document for `stack`.
pub fn document(stack: &Stack) -> Json {
    let mut actions: BTreeSet<&'static str> = BTreeSet::new();
    for r in &stack.resources {
        // An object read with `existing` is only described (the reads below): no create,
        // change or delete action for it.
        if crate::resources::existing::is_existing(r) {
            continue;
        }
        actions.extend(crate::resources::of(r).actions());
    }
    // Refresh and destroy look for objects of every kind tagged for the stack (strays of an
    // interrupted run): the reads of every kind, which change nothing.
    for k in crate::resources::KINDS {
        actions.extend(k.actions().iter().copied().filter(|a| is_read(a) && !a.starts_with("iam:")));
    }
    let has = |prefix: &str| actions.iter().any(|a| a.starts_with(prefix));
    let of =
        |pred: &dyn Fn(&str) -> bool| -> Vec<&'static str> { actions.iter().copied().filter(|a| pred(a)).collect() };
    let region = stack.region.as_str();
    let stack_tag = format!("aws:ResourceTag/{}", tags::STACK);
    let in_region = json!({ "StringEquals": { "aws:RequestedRegion": region } });
    let mut statements: Vec<Json> = vec![];
    let mut push = |sid: &str, actions: Vec<&str>, resource: Json, condition: Option<Json>| {
        if actions.is_empty() {
            return;
        }
        let mut s = json!({ "Sid": sid, "Effect": "Allow", "Action": actions, "Resource": resource });
        if let Some(c) = condition {
            s["Condition"] = c;
        }
        statements.push(s);
    };

    push(
        "Read",
        of(&|a| is_read(a) && !a.starts_with("iam:") && !a.starts_with("servicequotas:GetServiceQuota")),
        json!("*"),
        Some(in_region.clone()),
    );
    // IAM is global: its requests are made in us-east-1, so no region condition.
    push("IamRead", of(&|a| a.starts_with("iam:") && is_read(a)), json!("*"), None);
    // The plan's cost (plan::cost): only for a stack with something it prices. GetProducts is
    // called at the Price List endpoint nearest the stack's region (price::endpoint_region),
    // which is the region the request is made in; the Billing UG (`using-pelong`, IAM) grants
    // it on "*". DescribeSpotPriceHistory has no resource type (Service Authorization
    // Reference, EC2), so "*" in the stack's region.
    if crate::plan::cost::prices_anything(stack) {
        // GovCloud and China regions make no GetProducts call (price::no_usd_price_list).
        if crate::price::no_usd_price_list(region).is_none() {
            push(
                "PriceList",
                vec!["pricing:GetProducts"],
                json!("*"),
                Some(json!({ "StringEquals": { "aws:RequestedRegion": crate::price::endpoint_region(region) } })),
            );
        }
        push("SpotPriceHistory", vec!["ec2:DescribeSpotPriceHistory"], json!("*"), Some(in_region.clone()));
    }
    let ec2_any = json!(format!("arn:aws:ec2:{region}:*:*"));
    let creates = of(&|a| a.starts_with("ec2:") && is_create(a));
    push("Ec2Create", creates.clone(), ec2_any.clone(), None);
    if has("ec2:") {
        // AuthorizeSecurityGroupIngress/Egress create `security-group-rule`s and tag them on
        // creation (`security_group_rule`), so CreateTags must be allowed for them too.
        let create_ops: Vec<&str> =
            creates.iter().chain(of(&is_rule_create).iter()).map(|a| a.trim_start_matches("ec2:")).collect();
        push(
            "Ec2TagOnCreate",
            vec!["ec2:CreateTags"],
            ec2_any.clone(),
            Some(json!({ "StringEquals": { "ec2:CreateAction": create_ops } })),
        );
        let mut manage = of(&|a| a.starts_with("ec2:") && !is_read(a) && !is_create(a));
        manage.extend(["ec2:CreateTags", "ec2:DeleteTags"]);
        push(
            "Ec2ManageStackResources",
            manage,
            ec2_any.clone(),
            Some(json!({ "StringEquals": { &stack_tag: stack.name } })),
        );
    }
    if stack.resources.iter().any(|r| r.kind.name() == "security_group_rule") {
        // The new rule is a resource of the Authorize call (Service Authorization Reference,
        // EC2: `security-group-rule`, with `aws:RequestTag`); it carries the stack's tag.
        push(
            "Ec2RulesCreatedTagged",
            of(&is_rule_create),
            json!(format!("arn:aws:ec2:{region}:*:security-group-rule/*")),
            Some(json!({ "StringEquals": { format!("aws:RequestTag/{}", tags::STACK): stack.name } })),
        );
        let rule_ops = of(&|a| {
            crate::resources::kind("security_group_rule").is_some_and(|k| k.actions().contains(&a)) && !is_read(a)
        });
        for (i, (resource, condition)) in foreign_rule_groups(stack).into_iter().enumerate() {
            push(&format!("Ec2RulesOnGroupsNotOwned{i}"), rule_ops.clone(), resource, condition);
        }
    }
    if has("ec2:PurchaseCapacityBlock") {
        // A block retained by an earlier destroy carries only `gpustack:retained-from`;
        // declaring it again takes it back by re-tagging it.
        push(
            "Ec2TakeBackRetainedBlocks",
            vec!["ec2:CreateTags", "ec2:DeleteTags"],
            json!(format!("arn:aws:ec2:{region}:*:capacity-reservation/*")),
            Some(json!({ "StringLike": {
                format!("aws:ResourceTag/{}", crate::resources::capacity_block::RETAINED): format!("{} *", stack.name)
            } })),
        );
    }
    // `[import]` (issue 20): an object the stack takes over carries no `gpustack:stack` tag
    // yet, so the statements conditioned on it refuse tagging it. Allowed: exactly the two
    // gpustack tags (`aws:TagKeys`), with this stack's name (`aws:RequestTag`), on exactly the
    // imported objects (their ARNs), so no other object can be tagged into the stack.
    for (i, (action, arns)) in crate::resources::import::tag_targets(stack).into_iter().enumerate() {
        push(
            &format!("TagImported{i}"),
            vec![action],
            json!(arns),
            Some(json!({
                "StringEquals": { format!("aws:RequestTag/{}", tags::STACK): stack.name },
                "ForAllValues:StringEquals": { "aws:TagKeys": [tags::STACK, tags::ADDRESS] },
            })),
        );
    }
    // An imported VPC's internet gateway and public route table and a subnet's own NAT route
    // table are tagged with the object that manages them, with
    // gpustack's markers (`vpc::PUBLIC_ROUTES`, `subnet::ROUTES_FOR`), so later runs find them
    // (docs/aws-facts-import-network.md). Their ids are read at apply time, not written in the
    // file: the statement names their resource types in the region, and allows only the stack's
    // own name and gpustack's four tag keys.
    let parts = imported_network_parts(stack);
    if !parts.is_empty() {
        push(
            "TagImportedNetworkParts",
            vec!["ec2:CreateTags"],
            json!(parts.iter().map(|t| format!("arn:aws:ec2:{region}:*:{t}/*")).collect::<Vec<_>>()),
            Some(json!({
                "StringEquals": { format!("aws:RequestTag/{}", tags::STACK): stack.name },
                "ForAllValues:StringEquals": { "aws:TagKeys": [
                    tags::STACK, tags::ADDRESS, crate::resources::PUBLIC_ROUTES, crate::resources::ROUTES_FOR
                ] },
            })),
        );
    }
    let eks_any = json!(format!("arn:aws:eks:{region}:*:*"));
    // gpustack tags every EKS object on creation with `gpustack:stack`; creates must carry it,
    // and tags change only on objects that already carry it (so no foreign cluster can be
    // tagged into the stack and then deleted).
    push(
        "EksCreateTagged",
        of(&|a| a.starts_with("eks:") && a.contains(":Create") && a != "eks:CreateCluster"),
        eks_any.clone(),
        Some(json!({ "StringEquals": { format!("aws:RequestTag/{}", tags::STACK): stack.name } })),
    );
    // The Service Authorization Reference lists no resource type for eks:CreateCluster (only
    // condition keys), which means `"Resource": "*"`; the region comes from the condition.
    push(
        "EksCreateClusterTagged",
        of(&|a| a == "eks:CreateCluster"),
        json!("*"),
        Some(json!({ "StringEquals": {
            format!("aws:RequestTag/{}", tags::STACK): stack.name,
            "aws:RequestedRegion": region,
        } })),
    );
    push(
        "EksManageStackResources",
        of(&|a| a.starts_with("eks:") && !is_read(a) && !a.contains(":Create")),
        eks_any,
        Some(json!({ "StringEquals": { &stack_tag: stack.name } })),
    );
    let mut roles = json!([
        format!("arn:aws:iam::*:role/gpustack/{}/*", stack.name),
        format!("arn:aws:iam::*:instance-profile/gpustack/{}/*", stack.name)
    ]);
    let role_changes = |a: &str| {
        a.starts_with("iam:")
            && !is_read(a)
            && !matches!(a, "iam:PassRole" | "iam:CreateServiceLinkedRole" | "iam:AttachRolePolicy")
            && !a.contains("OpenIDConnectProvider")
    };
    push("IamStackRoles", of(&role_changes), roles.clone(), None);
    // An imported role keeps its path (IAM cannot move a role), so it is outside the stack's:
    // its own ARN (with and without a path) and its instance profile's, changed only once the
    // import has tagged it for this stack (`aws:ResourceTag`, which IAM roles and instance
    // profiles support: Service Authorization Reference, IAM), and tagged with only the two
    // gpustack tags.
    let imported = imported_roles(stack);
    if !imported.is_empty() {
        push(
            "IamImportedRoles",
            // Not the creates: `aws:ResourceTag` is absent on a create, so they never match (review m6).
            of(&|a| role_changes(a) && !a.starts_with("iam:Create")),
            json!(imported),
            Some(json!({ "StringEquals": { &stack_tag: stack.name } })),
        );
        push(
            "TagImportedInstanceProfiles",
            vec!["iam:TagInstanceProfile"],
            json!(imported.iter().filter(|a| a.contains(":instance-profile/")).collect::<Vec<_>>()),
            Some(json!({
                "StringEquals": { format!("aws:RequestTag/{}", tags::STACK): stack.name },
                "ForAllValues:StringEquals": { "aws:TagKeys": [tags::STACK, tags::ADDRESS] },
            })),
        );
        if let Some(list) = roles.as_array_mut() {
            list.extend(imported.iter().filter(|a| a.contains(":role/")).map(|a| json!(a)));
        }
    }
    // `oidc_provider`: IAM OIDC providers have no path; their ARN names the issuer, which for
    // EKS is `oidc.eks.<region>.amazonaws.com/id/<id>` (EKS UG `enable-iam-roles-for-service-accounts`;
    // resource type `oidc-provider`, Service Authorization Reference, IAM).
    // Scoped by the stack tag too, so the deploy role cannot delete or retarget another
    // cluster's provider in the region (which would break its IRSA): created only carrying the
    // tag, changed only when it carries it ("You can use tags to restrict access to only an
    // OIDC provider that has a specified tag attached", IAM API reference
    // TagOpenIDConnectProvider). Tagging is allowed either way: IAM checks
    // iam:TagOpenIDConnectProvider for the tags of a create, before the provider has any.
    let providers = json!(format!("arn:aws:iam::*:oidc-provider/oidc.eks.{region}.amazonaws.com/id/*"));
    let oidc = |a: &str| a.contains("OpenIDConnectProvider") && !is_read(a);
    push(
        "IamClusterOidcProviders",
        of(&|a| oidc(a) && (is_create(a) || a == "iam:TagOpenIDConnectProvider")),
        providers.clone(),
        Some(json!({ "StringEquals": { format!("aws:RequestTag/{}", tags::STACK): stack.name } })),
    );
    push(
        "IamManageStackOidcProviders",
        of(&|a| oidc(a) && !is_create(a)),
        providers,
        Some(json!({ "StringEquals": { &stack_tag: stack.name } })),
    );
    // Attaching a managed policy is limited to the ones the stack names, so the deploy role
    // cannot attach AdministratorAccess to a stack role and launch an instance with it.
    let managed: BTreeSet<String> = stack
        .resources
        .iter()
        .filter(|r| r.kind.name() == "iam_role")
        .filter_map(|r| r.attrs.get("managed_policies").map(|e| e.resolve(&|_| crate::value::Value::Unknown)))
        .flat_map(|v| v.as_list().map(<[crate::value::Value]>::to_vec).unwrap_or_default())
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    if actions.contains("iam:AttachRolePolicy") && !managed.is_empty() {
        push(
            "AttachStackPolicies",
            vec!["iam:AttachRolePolicy", "iam:DetachRolePolicy"],
            roles,
            Some(json!({ "ArnEquals": { "iam:PolicyARN": managed } })),
        );
    }
    // Roles the stack passes by literal ARN (made elsewhere) must be passable too, and so must
    // the roles it imported (a node group refers to one by `${iam_role.NAME.arn}`).
    let mut passed = vec![format!("arn:aws:iam::*:role/gpustack/{}/*", stack.name)];
    passed.extend(imported.iter().filter(|a| a.contains(":role/")).cloned());
    for r in &stack.resources {
        let mut literal: Vec<String> = ["role", "node_role", "execution_role"]
            .iter()
            .filter_map(|k| r.attrs.get(*k).and_then(|e| e.as_literal()).and_then(|v| v.as_str().map(str::to_string)))
            .collect();
        // An add-on's Pod Identity roles, given by ARN inside `pod_identity`.
        if r.kind.name() == "eks_addon"
            && let Some(crate::stack::expr::ExprKind::List(items)) = r.attrs.get("pod_identity").map(|e| &e.kind)
        {
            for item in items {
                if let crate::stack::expr::ExprKind::Table(t) = &item.kind {
                    literal.extend(
                        t.get("role").and_then(|e| e.as_literal()).and_then(|v| v.as_str().map(str::to_string)),
                    );
                }
            }
        }
        // An Auto Mode cluster passes its node role (`computeConfig.nodeRoleArn`) to EKS, which
        // passes it to EC2 (aws-facts-auto-mode §4.5: derived, the UG names no deploy policy).
        if r.kind.name() == "eks_cluster"
            && let Some(crate::stack::expr::ExprKind::Table(t)) = r.attrs.get("auto_mode").map(|e| &e.kind)
        {
            literal
                .extend(t.get("node_role").and_then(|e| e.as_literal()).and_then(|v| v.as_str().map(str::to_string)));
        }
        // A HyperPod group's execution role, given by ARN inside `instance_groups`.
        if r.kind.name() == "hyperpod_cluster" {
            for (_, (_, g)) in crate::rules::hyperpod::groups(r) {
                literal.extend(
                    g.get("execution_role").and_then(|e| e.as_literal()).and_then(|v| v.as_str().map(str::to_string)),
                );
            }
        }
        for arn in literal {
            if arn.starts_with("arn:") && !passed.contains(&arn) {
                passed.push(arn);
            }
        }
    }
    if has("eks:") {
        // CreateCluster and CreateNodegroup look up EKS's service-linked roles with the caller's
        // credentials ("missing permissions for 'iam:GetRole'", terraform-aws-eks#823).
        push("EksServiceLinkedRoleLookup", vec!["iam:GetRole"], json!("arn:aws:iam::*:role/aws-service-role/*"), None);
    }
    // A Pod Identity association passes its role to EKS Pod Identity (EKS UG `pod-id-association`).
    let mut passed_to = vec!["eks.amazonaws.com", "ec2.amazonaws.com"];
    // So does an add-on's `pod_identity` (CreateAddon `podIdentityAssociations`).
    let addon_pod_identity =
        stack.resources.iter().any(|r| r.kind.name() == "eks_addon" && r.attrs.contains_key("pod_identity"));
    if has("eks:CreatePodIdentityAssociation") || addon_pod_identity {
        passed_to.push("pods.eks.amazonaws.com");
    }
    // A HyperPod instance group's execution role is passed to SageMaker.
    if has("sagemaker:CreateCluster") {
        passed_to.push("sagemaker.amazonaws.com");
    }
    push(
        "PassStackRoles",
        of(&|a| a == "iam:PassRole"),
        json!(passed),
        Some(json!({ "StringEquals": { "iam:PassedToService": passed_to } })),
    );
    let mut linked = vec!["eks.amazonaws.com", "eks-nodegroup.amazonaws.com"];
    if has("autoscaling:CreateAutoScalingGroup") {
        linked.push("autoscaling.amazonaws.com");
    }
    // HyperPod makes its service-linked role (AWSServiceRoleForSageMakerHyperPod) on the
    // first cluster (SageMaker DG `sagemaker-hyperpod-prerequisites-iam`). HyperPod's service
    // principal is hyperpod.sagemaker.amazonaws.com (DG `sagemaker-hyperpod-eks-autoscaling-iam`
    // trusts it); sagemaker.amazonaws.com would let the caller create SageMaker's other
    // service-linked roles too.
    if has("sagemaker:CreateCluster") {
        linked.push("hyperpod.sagemaker.amazonaws.com");
    }
    push(
        "EksServiceLinkedRoles",
        of(&|a| a == "iam:CreateServiceLinkedRole"),
        json!("arn:aws:iam::*:role/aws-service-role/*"),
        Some(json!({ "StringEquals": { "iam:AWSServiceName": linked } })),
    );
    push(
        "PublicAmiParameters",
        of(&|a| a.starts_with("ssm:GetParameter")),
        json!(format!("arn:aws:ssm:{region}::parameter/aws/service/*")),
        None,
    );
    if has("ssm:SendCommand") {
        push(
            "RunCommandDocument",
            vec!["ssm:SendCommand"],
            json!(format!("arn:aws:ssm:{region}::document/AWS-RunShellScript")),
            None,
        );
        push(
            "RunCommandOnStackInstances",
            vec!["ssm:SendCommand"],
            json!(format!("arn:aws:ec2:{region}:*:instance/*")),
            Some(json!({ "StringEquals": { &stack_tag: stack.name } })),
        );
    }
    if has("ec2:CreateVpcEndpoint") {
        // Private DNS on an interface endpoint associates the VPC with an AWS-managed private
        // hosted zone: CreateVpcEndpoint's dependent action (Service Authorization Reference).
        push("EndpointPrivateDns", vec!["route53:AssociateVPCWithHostedZone"], json!("*"), None);
    }
    if has("ec2:ModifyVpcEndpoint") {
        // ModifyVpcEndpoint authorises every resource the request names: vpc-endpoint (required),
        // route-table, subnet and security-group (Service Authorization Reference, "Actions
        // defined by Amazon EC2", ModifyVpcEndpoint:
        // https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html).
        // Those the endpoint is pointed at need not carry the stack's tag: the VPC's main route
        // table (where an s3 gateway endpoint goes for subnets without a table of their own) is
        // made by AWS, a subnet or security group may be a literal id, and the EKS cluster
        // security group is made by EKS. So they get their own statement, without a condition;
        // the endpoint itself stays scoped by Ec2ManageStackResources.
        push(
            "Ec2EndpointTargets",
            vec!["ec2:ModifyVpcEndpoint"],
            json!(["route-table", "subnet", "security-group"].map(|t| format!("arn:aws:ec2:{region}:*:{t}/*"))),
            None,
        );
    }
    if has("autoscaling:") {
        // Self-managed node groups: created with the stack's tag (aws:RequestTag, EC2 Auto
        // Scaling UG "Control Auto Scaling group creation with tags"), changed and deleted only
        // when they carry it (autoscaling:ResourceTag).
        let groups = json!(format!("arn:aws:autoscaling:{region}:*:autoScalingGroup:*:autoScalingGroupName/*"));
        // Tag-on-create takes CreateOrUpdateTags too; conditioned on the request tag alone it
        // would let the role tag any foreign group into the stack (then delete it under
        // AutoScalingManageStackGroups). So the create statement names only the stack's own
        // group names (a name given as an expression falls back to any).
        let named: Vec<String> = stack
            .resources
            .iter()
            .filter(|r| r.kind.name() == "self_managed_node_group")
            .map(|r| match r.attrs.get("name") {
                None => stack.default_physical_name(r),
                Some(e) => e.as_literal().and_then(Value::as_str).unwrap_or("*").to_string(),
            })
            .map(|n| format!("arn:aws:autoscaling:{region}:*:autoScalingGroup:*:autoScalingGroupName/{n}"))
            .collect();
        push(
            "AutoScalingCreateTagged",
            of(&|a| matches!(a, "autoscaling:CreateAutoScalingGroup" | "autoscaling:CreateOrUpdateTags")),
            if named.is_empty() { groups.clone() } else { json!(named) },
            Some(json!({ "StringEquals": { format!("aws:RequestTag/{}", tags::STACK): stack.name } })),
        );
        push(
            "AutoScalingManageStackGroups",
            of(&|a| a.starts_with("autoscaling:") && !is_read(a) && a != "autoscaling:CreateAutoScalingGroup"),
            groups,
            Some(json!({ "StringEquals": { format!("autoscaling:ResourceTag/{}", tags::STACK): stack.name } })),
        );
    }
    let request_tag = json!({ "StringEquals": { format!("aws:RequestTag/{}", tags::STACK): stack.name } });
    let resource_tag = json!({ "StringEquals": { &stack_tag: stack.name } });
    let queues = json!(format!("arn:aws:sqs:{region}:*:{}-*", stack.name));
    // Tagging on creation needs sqs:TagQueue too (SQS Developer Guide, "Tagging queues").
    push(
        "SqsCreateStackQueues",
        of(&|a| matches!(a, "sqs:CreateQueue" | "sqs:TagQueue")),
        queues.clone(),
        Some(request_tag.clone()),
    );
    push(
        "SqsManageStackQueues",
        of(&|a| a.starts_with("sqs:") && !is_read(a) && a != "sqs:CreateQueue"),
        queues,
        Some(resource_tag.clone()),
    );
    let rules = json!(format!("arn:aws:events:{region}:*:rule/{}-*", stack.name));
    push(
        "EventsCreateStackRules",
        of(&|a| matches!(a, "events:PutRule" | "events:TagResource")),
        rules.clone(),
        Some(request_tag),
    );
    push("EventsManageStackRules", of(&|a| a.starts_with("events:") && !is_read(a)), rules, Some(resource_tag));
    sagemaker(stack, &has, &mut push);
    cluster_options(stack, &mut push);
    push(
        "Ec2Quotas",
        of(&|a| a.starts_with("servicequotas:GetServiceQuota")),
        json!(format!("arn:aws:servicequotas:{region}:*:ec2/*")),
        None,
    );
    json!({ "Version": "2012-10-17", "Statement": statements })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::{Source, VarSources};

    fn policy(extra: &str) -> Json {
        let text =
            format!("[stack]\nname = \"p\"\nregion = \"us-west-2\"\n[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n{extra}");
        let vars = VarSources { cli: &[], env: &|_| None };
        let stack = crate::load::check(Source::new("p.toml", text), &vars).unwrap_or_else(|d| panic!("{d}"));
        document(&stack)
    }

    fn statement<'a>(doc: &'a Json, sid: &str) -> Option<&'a Json> {
        doc["Statement"].as_array()?.iter().find(|s| s["Sid"] == sid)
    }

    /// The plan's price reads are allowed only for a stack that has something to price: the
    /// Price List at its endpoint region (us-east-1 for us-west-2), Spot history in the stack's.
    #[test]
    fn price_reads_only_for_stacks_with_priced_objects() {
        let none = policy("");
        assert!(statement(&none, "PriceList").is_none() && statement(&none, "SpotPriceHistory").is_none());
        assert!(!none.to_string().contains("pricing:"), "no price action without priced objects");
        let doc = policy(
            "[capacity_reservation.r]\ninstance_type = \"p5.48xlarge\"\navailability_zone = \"us-west-2a\"\ninstance_count = 1\n",
        );
        let list = statement(&doc, "PriceList").expect("PriceList statement");
        assert_eq!(list["Action"], serde_json::json!(["pricing:GetProducts"]));
        assert_eq!(list["Condition"]["StringEquals"]["aws:RequestedRegion"], "us-east-1");
        let spot = statement(&doc, "SpotPriceHistory").expect("SpotPriceHistory statement");
        assert_eq!(spot["Action"], serde_json::json!(["ec2:DescribeSpotPriceHistory"]));
        assert_eq!(spot["Condition"]["StringEquals"]["aws:RequestedRegion"], "us-west-2");
    }

    /// Self-managed node groups: Auto Scaling groups are created only with the stack's tag and
    /// changed only when they carry it; the Auto Scaling service-linked role may be created.
    #[test]
    fn auto_scaling_groups_are_created_and_managed_under_the_stack_tag() {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/examples/self-managed.toml")).unwrap();
        let vars = VarSources { cli: &[], env: &|_| None };
        let stack = crate::load::check(Source::new("s.toml", text), &vars).unwrap_or_else(|d| panic!("{d}"));
        let doc = document(&stack);
        let create = statement(&doc, "AutoScalingCreateTagged").expect("create statement");
        assert!(create["Action"].to_string().contains("autoscaling:CreateAutoScalingGroup"), "{create}");
        assert_eq!(create["Condition"]["StringEquals"]["aws:RequestTag/gpustack:stack"], "selfmng-dev");
        // Tagging goes only to the stack's own group names, so no foreign group can be tagged
        // into the stack (review r19-lt m1).
        assert_eq!(
            create["Resource"],
            serde_json::json!([
                "arn:aws:autoscaling:us-west-2:*:autoScalingGroup:*:autoScalingGroupName/selfmng-dev-gpu"
            ])
        );
        let manage = statement(&doc, "AutoScalingManageStackGroups").expect("manage statement");
        assert!(manage["Action"].to_string().contains("autoscaling:DeleteAutoScalingGroup"), "{manage}");
        assert!(!manage["Action"].to_string().contains("CreateAutoScalingGroup"), "{manage}");
        assert_eq!(manage["Condition"]["StringEquals"]["autoscaling:ResourceTag/gpustack:stack"], "selfmng-dev");
        assert!(doc.to_string().contains("autoscaling.amazonaws.com"), "its service-linked role");
        // A stack without one gets only the read.
        let plain = policy("");
        assert!(statement(&plain, "AutoScalingCreateTagged").is_none());
    }

    /// Review r19-net B2: rules are created tagged (CreateTags through `ec2:CreateAction`),
    /// and on groups the stack does not own only as far as the stack names them.
    #[test]
    fn security_group_rules_may_tag_on_create_and_change_only_the_groups_named() {
        let rule = |name: &str, group: &str| {
            format!(
                "[security_group_rule.{name}]\nsecurity_group = \"{group}\"\ntype = \"ingress\"\nprotocol = \"tcp\"\nfrom_port = 443\nto_port = 443\ncidr = \"10.0.0.0/16\"\n"
            )
        };
        let doc = policy(&format!(
            "[security_group.by_id]\nexisting = \"sg-0123456789abcdef0\"\n[security_group.by_tags]\nexisting = {{ tags = {{ Name = \"shared\" }} }}\n[security_group.own]\nvpc = \"${{vpc.main.id}}\"\ndescription = \"own\"\n[eks_cluster.c]\nname = \"gpu\"\nversion = \"1.33\"\nrole = \"arn:aws:iam::1:role/r\"\nsubnets = [\"subnet-1\", \"subnet-2\"]\n{}{}{}{}",
            rule("a", "${security_group.by_id.id}"),
            rule("b", "${security_group.by_tags.id}"),
            rule("c", "${eks_cluster.c.security_group_id}"),
            rule("d", "${security_group.own.id}"),
        ));
        let tag_on_create = statement(&doc, "Ec2TagOnCreate").expect("tags on create");
        let ops = tag_on_create["Condition"]["StringEquals"]["ec2:CreateAction"].as_array().unwrap();
        for op in ["AuthorizeSecurityGroupIngress", "AuthorizeSecurityGroupEgress"] {
            assert!(ops.contains(&json!(op)), "CreateTags is refused for {op}: {tag_on_create}");
        }
        let created = statement(&doc, "Ec2RulesCreatedTagged").expect("the new rule is tagged");
        assert_eq!(created["Resource"], "arn:aws:ec2:us-west-2:*:security-group-rule/*");
        assert_eq!(created["Condition"]["StringEquals"]["aws:RequestTag/gpustack:stack"], "p");
        let foreign: Vec<&Json> = doc["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["Sid"].as_str().unwrap_or_default().starts_with("Ec2RulesOnGroupsNotOwned"))
            .collect();
        assert_eq!(foreign.len(), 3, "{foreign:?}");
        assert_eq!(foreign[0]["Resource"], "arn:aws:ec2:us-west-2:*:security-group/sg-0123456789abcdef0");
        assert!(foreign[0].get("Condition").is_none());
        assert_eq!(foreign[1]["Condition"]["StringEquals"]["aws:ResourceTag/Name"], "shared");
        assert_eq!(foreign[2]["Condition"]["StringEquals"]["aws:ResourceTag/aws:eks:cluster-name"], "gpu");
        for s in &foreign[1..] {
            assert_eq!(s["Resource"], "arn:aws:ec2:us-west-2:*:security-group/*");
        }
        assert!(foreign[0]["Action"].as_array().unwrap().contains(&json!("ec2:AuthorizeSecurityGroupIngress")));
        assert!(foreign[0]["Action"].as_array().unwrap().contains(&json!("ec2:RevokeSecurityGroupIngress")));
    }

    /// Review r19-net minor 3: a kind the stack only reads gets only its reads.
    #[test]
    fn objects_read_with_existing_get_only_reads() {
        let doc = policy(
            "[subnet.a]\nexisting = \"subnet-0abc\"\n[security_group.g]\nexisting = { tags = { Name = \"x\" } }\n",
        );
        let text = doc.to_string();
        for a in ["ec2:CreateSubnet", "ec2:DeleteSubnet", "ec2:CreateSecurityGroup", "ec2:DeleteSecurityGroup"] {
            assert!(!text.contains(a), "{a} in {text}");
        }
        assert!(text.contains("ec2:DescribeSubnets") && text.contains("ec2:CreateVpc"), "{text}");
    }

    /// Issue 18 item 20 / audit P1: eks:CreateCluster has no resource type in the SAR, so it
    /// is allowed on "*", still only with the stack's tag and in its region.
    #[test]
    fn create_cluster_is_allowed_on_any_resource_with_the_stack_tag() {
        let doc = policy(
            "[eks_cluster.c]\nversion = \"1.33\"\nrole = \"arn:aws:iam::1:role/r\"\nsubnets = [\"subnet-1\", \"subnet-2\"]\n",
        );
        let s = statement(&doc, "EksCreateClusterTagged").expect("a statement of its own");
        assert_eq!(s["Action"], json!(["eks:CreateCluster"]));
        assert_eq!(s["Resource"], json!("*"));
        assert_eq!(s["Condition"]["StringEquals"]["aws:RequestTag/gpustack:stack"], "p");
        assert_eq!(s["Condition"]["StringEquals"]["aws:RequestedRegion"], "us-west-2");
        let tagged = statement(&doc, "EksCreateTagged").map_or(json!([]), |s| s["Action"].clone());
        assert!(!tagged.to_string().contains("eks:CreateCluster"), "{tagged}");
    }

    /// Review r19 B1: EKS UG `enable-kms`: "The condition kms:GrantIsForAWSResource is not
    /// supported for the CreateCluster action". The caller's KMS statements carry no condition
    /// at all, so none can make AWS refuse the grant EKS asks for on the caller's behalf.
    #[test]
    fn the_callers_kms_grant_for_create_cluster_is_unconditioned() {
        let key = "arn:aws:kms:us-west-2:123456789012:key/k";
        let doc = policy(&format!(
            "[eks_cluster.c]\nversion = \"1.33\"\nrole = \"arn:aws:iam::1:role/r\"\nsubnets = [\"subnet-1\", \"subnet-2\"]\nencryption = {{ kms_key = \"{key}\" }}\n"
        ));
        let kms: Vec<&Json> =
            doc["Statement"].as_array().unwrap().iter().filter(|s| s["Action"].to_string().contains("kms:")).collect();
        let actions: Vec<String> = kms.iter().map(|s| s["Action"].to_string()).collect();
        assert!(actions.iter().any(|a| a.contains("kms:CreateGrant")), "{actions:?}");
        assert!(actions.iter().any(|a| a.contains("kms:DescribeKey")), "{actions:?}");
        for s in kms {
            assert!(s.get("Condition").is_none(), "a condition can refuse CreateCluster's grant: {s}");
            assert_eq!(s["Resource"], json!([key]), "{s}");
        }
    }

    /// Review r19 M5, M3: removing `log_retention_days` (DeleteRetentionPolicy) or a cluster
    /// that owned its group (DeleteLogGroup) is applied under the policy of the new file, which
    /// no longer sets it; creating a group stays for the clusters that set the retention.
    #[test]
    fn a_cluster_without_retention_can_still_take_its_group_back() {
        let doc = policy(
            "[eks_cluster.c]\nversion = \"1.33\"\nrole = \"arn:aws:iam::1:role/r\"\nsubnets = [\"subnet-1\", \"subnet-2\"]\n",
        );
        let s = statement(&doc, "LogsRemoveClusterLogGroups").expect("removals granted");
        assert_eq!(s["Action"], json!(["logs:DeleteRetentionPolicy", "logs:DeleteLogGroup"]));
        assert_eq!(
            s["Resource"],
            json!([
                "arn:aws:logs:us-west-2:*:log-group:/aws/eks/p-c/cluster",
                "arn:aws:logs:us-west-2:*:log-group:/aws/eks/p-c/cluster:*"
            ])
        );
        assert!(statement(&doc, "LogsManageClusterLogGroups").is_none(), "no CreateLogGroup without retention");
        assert!(statement(&doc, "LogsReadClusterLogGroups").is_some());
        assert!(statement(&policy(""), "LogsRemoveClusterLogGroups").is_none(), "no cluster, no Logs");
    }

    /// Audit N7, review r18 m2: ModifyVpcEndpoint may touch the VPC's untagged main route table,
    /// and subnets and security groups that are not the stack's (literal ids, the EKS cluster
    /// security group).
    /// Workload IAM: OIDC provider changes only on the region's EKS issuers (not the stack's
    /// role path, which providers do not have), and an add-on's Pod Identity roles passable to
    /// EKS Pod Identity, a literal ARN included.
    #[test]
    fn oidc_providers_and_addon_pod_identity_roles_are_scoped() {
        let doc = policy(concat!(
            "[eks_cluster.c]\nversion = \"1.33\"\nrole = \"arn:aws:iam::1:role/r\"\nsubnets = [\"subnet-1\", \"subnet-2\"]\n",
            "[oidc_provider.main]\nurl = \"${eks_cluster.c.oidc_issuer}\"\n",
            "[eks_addon.agent]\ncluster = \"${eks_cluster.c.name}\"\naddon = \"eks-pod-identity-agent\"\n",
            "[eks_addon.ebs]\ncluster = \"${eks_cluster.c.name}\"\naddon = \"aws-ebs-csi-driver\"\n",
            "pod_identity = [{ service_account = \"ebs-csi-controller-sa\", role = \"arn:aws:iam::1:role/ebs\" }]\n",
        ));
        let oidc = statement(&doc, "IamClusterOidcProviders").expect("a statement for OIDC providers");
        assert_eq!(oidc["Resource"], "arn:aws:iam::*:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/*");
        assert!(oidc["Action"].as_array().unwrap().iter().any(|a| a == "iam:CreateOpenIDConnectProvider"));
        // Review r19-iam m2: created only with the stack tag, changed only when it carries it.
        assert_eq!(oidc["Condition"]["StringEquals"]["aws:RequestTag/gpustack:stack"], "p", "{oidc}");
        let manage = statement(&doc, "IamManageStackOidcProviders").expect("a statement for the stack's providers");
        assert_eq!(manage["Resource"], oidc["Resource"]);
        assert_eq!(manage["Condition"]["StringEquals"]["aws:ResourceTag/gpustack:stack"], "p", "{manage}");
        for a in [
            "iam:DeleteOpenIDConnectProvider",
            "iam:UpdateOpenIDConnectProviderThumbprint",
            "iam:RemoveClientIDFromOpenIDConnectProvider",
        ] {
            assert!(manage["Action"].as_array().unwrap().iter().any(|x| x == a), "{a} in {manage}");
            assert!(!oidc["Action"].as_array().unwrap().iter().any(|x| x == a), "{a} unscoped in {oidc}");
        }
        let elsewhere = doc["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["Sid"] != "IamClusterOidcProviders" && s["Sid"] != "IamManageStackOidcProviders");
        assert!(elsewhere.filter(|s| s["Action"].to_string().contains("CreateOpenIDConnect")).count() == 0, "{doc}");
        let pass = statement(&doc, "PassStackRoles").unwrap();
        assert!(pass["Resource"].as_array().unwrap().iter().any(|r| r == "arn:aws:iam::1:role/ebs"), "{pass}");
        assert!(
            pass["Condition"]["StringEquals"]["iam:PassedToService"].to_string().contains("pods.eks.amazonaws.com")
        );
    }

    #[test]
    fn modify_vpc_endpoint_reaches_untagged_route_tables_subnets_and_security_groups() {
        let doc = policy("[vpc_endpoint.s3]\nvpc = \"${vpc.main.id}\"\nservice = \"s3\"\nsubnets = [\"subnet-1\"]\n");
        let s = statement(&doc, "Ec2EndpointTargets").expect("a statement for the endpoint's targets");
        assert_eq!(s["Action"], json!(["ec2:ModifyVpcEndpoint"]));
        assert_eq!(
            s["Resource"],
            json!([
                "arn:aws:ec2:us-west-2:*:route-table/*",
                "arn:aws:ec2:us-west-2:*:subnet/*",
                "arn:aws:ec2:us-west-2:*:security-group/*"
            ])
        );
        assert!(s.get("Condition").is_none(), "{s}");
        assert!(!s["Resource"].to_string().contains("vpc-endpoint"), "the endpoint stays tag-scoped: {s}");
    }

    /// Review imp-core M3/m8: an imported training plan keeps its own name, outside the
    /// stack's `p-*`: its ARN (as written and lower-cased) is in every statement that changes,
    /// takes back or uses the stack's plans, still conditioned on the stack's tag where it was.
    #[test]
    fn an_imported_training_plan_is_reachable_by_its_own_arn() {
        let now = jiff::Timestamp::now();
        let day = |n: i64| (now + jiff::SignedDuration::from_hours(24 * n)).to_string();
        let dated = |t: &str| t.replace("AFTER", &day(7)).replace("BEFORE", &day(14));
        let doc = policy(&dated(
            "[training_plan.base]\ninstance_type = \"ml.p5.48xlarge\"\ninstance_count = 2\nduration_hours = 48\n\
             start_after = \"AFTER\"\nstart_before = \"BEFORE\"\nmax_upfront_usd = 1\n\
             [import]\n\"training_plan.base\" = \"Team-Baseline\"\n",
        ));
        let arn = "arn:aws:sagemaker:us-west-2:*:training-plan/Team-Baseline";
        let lower = "arn:aws:sagemaker:us-west-2:*:training-plan/team-baseline";
        for sid in ["SageMakerManageStackResources", "SageMakerTakeBackRetainedPlans", "TagImported0"] {
            let s = statement(&doc, sid).unwrap_or_else(|| panic!("{sid}: {doc}"));
            let res = s["Resource"].to_string();
            assert!(res.contains(arn) && res.contains(lower), "{sid}: {s}");
        }
        let manage = statement(&doc, "SageMakerManageStackResources").unwrap();
        assert_eq!(manage["Condition"]["StringEquals"]["aws:ResourceTag/gpustack:stack"], "p");
        assert!(manage["Action"].to_string().contains("sagemaker:DeleteTags"), "{manage}");
        let create = statement(&doc, "SageMakerCreateTagged").unwrap();
        assert!(!create["Resource"].to_string().contains("Baseline"), "nothing is bought under its name: {create}");
        let plain = policy(&dated(
            "[training_plan.base]\ninstance_type = \"ml.p5.48xlarge\"\ninstance_count = 2\nduration_hours = 48\n\
             start_after = \"AFTER\"\nstart_before = \"BEFORE\"\nmax_upfront_usd = 1\n",
        ));
        assert!(!plain.to_string().contains("Baseline"));
    }

    /// Issue 20: an imported role outside the stack's path is changed (and passed) by its own
    /// ARN once tagged for the stack; an imported network's gateway and route tables may take
    /// gpustack's tags and markers, and nothing else (never a NAT's Elastic IPs: review M3/M4).
    #[test]
    fn imported_roles_and_network_parts_are_reachable_and_only_so() {
        let doc = policy(
            "[subnet.a]\nvpc = \"${vpc.main.id}\"\ncidr_block = \"10.0.0.0/20\"\navailability_zone = \"us-west-2a\"\n\
             [iam_role.node]\nname = \"eksctl-node\"\nservice = \"ec2.amazonaws.com\"\nmanaged_policies = [\"arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy\"]\n\
             [nat_gateway.n]\nsubnet = \"${subnet.a.id}\"\n\
             [import]\n\"vpc.main\" = \"vpc-0a\"\n\"subnet.a\" = \"subnet-0b\"\n\"iam_role.node\" = \"eksctl-node\"\n\"nat_gateway.n\" = \"nat-0c\"\n",
        );
        let roles = statement(&doc, "IamImportedRoles").expect("the imported role's statement");
        assert!(roles["Resource"].to_string().contains("arn:aws:iam::*:role/*/eksctl-node"), "{roles}");
        assert!(roles["Action"].to_string().contains("iam:DeleteRole"), "{roles}");
        assert!(!roles["Action"].to_string().contains("iam:Create"), "{roles}");
        assert_eq!(roles["Condition"]["StringEquals"]["aws:ResourceTag/gpustack:stack"], "p");
        let attach = statement(&doc, "AttachStackPolicies").expect("attach");
        assert!(attach["Resource"].to_string().contains("role/eksctl-node"), "{attach}");
        let parts = statement(&doc, "TagImportedNetworkParts").expect("the network parts' tags");
        assert_eq!(
            parts["Resource"],
            json!(["arn:aws:ec2:us-west-2:*:internet-gateway/*", "arn:aws:ec2:us-west-2:*:route-table/*"])
        );
        let keys = &parts["Condition"]["ForAllValues:StringEquals"]["aws:TagKeys"];
        assert_eq!(
            keys,
            &json!(["gpustack:stack", "gpustack:address", "gpustack:public-routes", "gpustack:routes-for"])
        );
        let plain = policy("");
        assert!(
            statement(&plain, "IamImportedRoles").is_none() && statement(&plain, "TagImportedNetworkParts").is_none()
        );
        // Review imp-core M4: the secondary objects of an imported role (its instance profile)
        // are reachable through the same statements.
        let tags = statement(&doc, "TagImportedInstanceProfiles").expect("the role's instance profile");
        assert!(tags["Resource"].to_string().contains("instance-profile/eksctl-node"), "{tags}");
        let nat = policy(
            "[vpc.pub]\ncidr_block = \"10.1.0.0/16\"\ninternet_gateway = true\n\
             [subnet.a]\nvpc = \"${vpc.pub.id}\"\ncidr_block = \"10.1.0.0/20\"\navailability_zone = \"us-west-2a\"\npublic = true\n\
             [nat_gateway.a]\nsubnet = \"${subnet.a.id}\"\n[import]\n\"nat_gateway.a\" = \"nat-0c\"\n",
        );
        // Review imp-net M3: an imported gateway's Elastic IPs stay the user's, never tagged.
        assert!(!nat.to_string().contains("elastic-ip/*"), "{nat}");
    }
}
