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
//!   `AWS-RunShellScript` document and instances tagged for the stack.
//!
//! It reads the stack file only: no AWS call.

use std::collections::BTreeSet;

use serde_json::{Value as Json, json};

use crate::aws::tags;
use crate::stack::Stack;

/// EC2 actions that create something (tagged on creation, so `ec2:CreateTags` must be
/// allowed for them through `ec2:CreateAction`).
fn is_create(action: &str) -> bool {
    let op = action.split(':').nth(1).unwrap_or_default();
    (op.starts_with("Create") && op != "CreateTags")
        || matches!(op, "RunInstances" | "AllocateAddress" | "PurchaseCapacityBlock")
}

fn is_read(action: &str) -> bool {
    let op = action.split(':').nth(1).unwrap_or_default();
    op.starts_with("Describe")
        || op.starts_with("List")
        || (op.starts_with("Get") && !action.starts_with("ssm:GetParameter"))
}

/// The policy document for `stack`.
pub fn document(stack: &Stack) -> Json {
    let mut actions: BTreeSet<&'static str> = BTreeSet::new();
    for r in &stack.resources {
        actions.extend(r.kind.actions());
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
    let ec2_any = json!(format!("arn:aws:ec2:{region}:*:*"));
    let creates = of(&|a| a.starts_with("ec2:") && is_create(a));
    push("Ec2Create", creates.clone(), ec2_any.clone(), None);
    if has("ec2:") {
        // The creates that take TagSpecifications (not CreateRoute or a template's new version).
        let create_ops: Vec<&str> = creates
            .iter()
            .map(|a| a.trim_start_matches("ec2:"))
            .filter(|op| !matches!(*op, "CreateRoute" | "CreateLaunchTemplateVersion"))
            .collect();
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
    let eks_any = json!(format!("arn:aws:eks:{region}:*:*"));
    push(
        "EksCreate",
        of(&|a| a.starts_with("eks:") && (a.contains(":Create") || a.ends_with(":TagResource"))),
        eks_any.clone(),
        None,
    );
    push(
        "EksManageStackResources",
        of(&|a| a.starts_with("eks:") && !is_read(a) && !a.contains(":Create") && !a.ends_with(":TagResource")),
        eks_any,
        Some(json!({ "StringEquals": { &stack_tag: stack.name } })),
    );
    let roles = json!([
        format!("arn:aws:iam::*:role/gpustack/{}/*", stack.name),
        format!("arn:aws:iam::*:instance-profile/gpustack/{}/*", stack.name)
    ]);
    push(
        "IamStackRoles",
        of(&|a| a.starts_with("iam:") && !is_read(a) && !matches!(a, "iam:PassRole" | "iam:CreateServiceLinkedRole")),
        roles,
        None,
    );
    push(
        "PassStackRoles",
        of(&|a| a == "iam:PassRole"),
        json!(format!("arn:aws:iam::*:role/gpustack/{}/*", stack.name)),
        Some(json!({ "StringEquals": { "iam:PassedToService": ["eks.amazonaws.com", "ec2.amazonaws.com"] } })),
    );
    push(
        "EksServiceLinkedRoles",
        of(&|a| a == "iam:CreateServiceLinkedRole"),
        json!("arn:aws:iam::*:role/aws-service-role/*"),
        Some(json!({ "StringEquals": { "iam:AWSServiceName": ["eks.amazonaws.com", "eks-nodegroup.amazonaws.com"] } })),
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
    push(
        "Ec2Quotas",
        of(&|a| a.starts_with("servicequotas:GetServiceQuota")),
        json!(format!("arn:aws:servicequotas:{region}:*:ec2/*")),
        None,
    );
    json!({ "Version": "2012-10-17", "Statement": statements })
}
