//! The Karpenter controller's IAM policy, per Karpenter version, as Karpenter's own
//! getting-started CloudFormation template writes it (aws-facts §8), filled in for one
//! cluster. Pure: no AWS call.
//!
//! Sources (aws/karpenter-provider-aws, `website/content/en/<v>/getting-started/
//! getting-started-with-karpenter/cloudformation.yaml`):
//! - v1.6: commit d86b24f27448 ("Stable Release updates Release v1.6.8"), the 16 statements;
//! - v1.7: `v1.7/` at tag v1.10.0: + `AllowUnscopedInstanceProfileListAction`;
//! - v1.9: `v1.9/` at tag v1.10.0: `AllowScopedEC2InstanceActionsWithTags` no longer lists
//!   `capacity-reservation/*` (statement 1 still does); the policy is split into five managed
//!   policies with the same statements;
//! - v1.11: `v1.11/` at tag v1.12.0: `placement-group/*` in statement 1 and
//!   `ec2:DescribePlacementGroups` in `AllowRegionalReadActions`;
//! - v1.12: `v1.12/` at 1d927085 (last changed a0407445): `ec2:DescribeInstanceStatus` in
//!   `AllowRegionalReadActions` and `AllowZonalShiftStatusReadOnly`; v1.13 and v1.14 (tag
//!   v1.14.1) are the same statements.
//!
//! gpustack writes the statements as one inline role policy, in the v1.7 template's order
//! with the zonal-shift statement last. Inline, because the v1.6 document as one managed
//! policy passes IAM's 6,144-character quota once the cluster name passes 42 characters
//! (EKS allows 100), while a role's inline policies may hold 10,240.

use serde_json::{Value as Json, json};

/// What the document names: the partition, region and account, the cluster, the node role
/// Karpenter passes to EC2 and the interruption queue it reads.
#[derive(Clone, Debug, PartialEq)]
pub struct Scope {
    pub partition: String,
    pub region: String,
    pub account: String,
    pub cluster: String,
    pub node_role: String,
    pub queue_arn: String,
}

/// The name of the inline policy on the controller's role.
pub const NAME: &str = "KarpenterControllerPolicy";

/// IAM's limit on a role's inline policies together, white space not counted (IAM UG
/// "IAM and AWS STS quotas").
pub const INLINE_QUOTA: usize = 10_240;

/// The Karpenter versions at which the document changes. A version's document is that of the
/// highest of these at or below it.
pub const CHANGES: &[(u32, u32)] = &[(1, 6), (1, 7), (1, 9), (1, 11), (1, 12)];

/// The newest Karpenter minor whose reference (CloudFormation template, chart values, CRDs)
/// gpustack has been checked against: a later release may need a policy or fields gpustack
/// does not write yet, so it is a warning (`rules::access`).
pub const NEWEST_VERIFIED: (u32, u32) = (1, 14);

/// The change a version's document is written from (`CHANGES`), or None below 1.6.
pub fn generation(version: (u32, u32)) -> Option<(u32, u32)> {
    CHANGES.iter().rev().find(|c| **c <= version).copied()
}

/// The trust policy EKS Pod Identity needs on the controller's role (EKS UG
/// `pod-id-association`, aws-facts §11): EKS refuses an association to a role without it.
pub fn trust() -> Json {
    json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "AllowEksAuthToAssumeRoleForPodIdentity",
            "Effect": "Allow",
            "Principal": { "Service": "pods.eks.amazonaws.com" },
            "Action": ["sts:AssumeRole", "sts:TagSession"]
        }]
    })
}

/// The controller's policy for Karpenter `version` (major, minor).
pub fn document(version: (u32, u32), s: &Scope) -> Json {
    let at_least = |v: (u32, u32)| version >= v;
    let (p, r, a, c) = (&s.partition, &s.region, &s.account, &s.cluster);
    let ec2 = |what: &str| format!("arn:{p}:ec2:{r}:*:{what}/*");
    let owned = format!("aws:ResourceTag/kubernetes.io/cluster/{c}");
    let req_owned = format!("aws:RequestTag/kubernetes.io/cluster/{c}");
    let profiles = format!("arn:{p}:iam::{a}:instance-profile/*");
    let cluster_arn = format!("arn:{p}:eks:{r}:{a}:cluster/{c}");

    let mut access = vec![
        format!("arn:{p}:ec2:{r}::image/*"),
        format!("arn:{p}:ec2:{r}::snapshot/*"),
        ec2("security-group"),
        ec2("subnet"),
        ec2("capacity-reservation"),
    ];
    if at_least((1, 11)) {
        access.push(ec2("placement-group"));
    }
    let tagged = ["fleet", "instance", "volume", "network-interface", "launch-template", "spot-instances-request"];
    let mut with_tags: Vec<String> = tagged.iter().map(|t| ec2(t)).collect();
    if !at_least((1, 9)) {
        with_tags.push(ec2("capacity-reservation"));
    }
    let mut reads = vec![
        "ec2:DescribeCapacityReservations",
        "ec2:DescribeImages",
        "ec2:DescribeInstances",
        "ec2:DescribeInstanceStatus",
        "ec2:DescribeInstanceTypeOfferings",
        "ec2:DescribeInstanceTypes",
        "ec2:DescribeLaunchTemplates",
        "ec2:DescribePlacementGroups",
        "ec2:DescribeSecurityGroups",
        "ec2:DescribeSpotPriceHistory",
        "ec2:DescribeSubnets",
    ];
    reads.retain(|a| match *a {
        "ec2:DescribeInstanceStatus" => at_least((1, 12)),
        "ec2:DescribePlacementGroups" => at_least((1, 11)),
        _ => true,
    });

    let mut st = vec![
        json!({
            "Sid": "AllowScopedEC2InstanceAccessActions",
            "Effect": "Allow",
            "Resource": access,
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"]
        }),
        json!({
            "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
            "Effect": "Allow",
            "Resource": ec2("launch-template"),
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Condition": {
                "StringEquals": { &owned: "owned" },
                "StringLike": { "aws:ResourceTag/karpenter.sh/nodepool": "*" }
            }
        }),
        json!({
            "Sid": "AllowScopedEC2InstanceActionsWithTags",
            "Effect": "Allow",
            "Resource": with_tags,
            "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
            "Condition": {
                "StringEquals": { &req_owned: "owned", "aws:RequestTag/eks:eks-cluster-name": c },
                "StringLike": { "aws:RequestTag/karpenter.sh/nodepool": "*" }
            }
        }),
        json!({
            "Sid": "AllowScopedResourceCreationTagging",
            "Effect": "Allow",
            "Resource": tagged.iter().map(|t| ec2(t)).collect::<Vec<_>>(),
            "Action": "ec2:CreateTags",
            "Condition": {
                "StringEquals": {
                    &req_owned: "owned",
                    "aws:RequestTag/eks:eks-cluster-name": c,
                    "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"]
                },
                "StringLike": { "aws:RequestTag/karpenter.sh/nodepool": "*" }
            }
        }),
        json!({
            "Sid": "AllowScopedResourceTagging",
            "Effect": "Allow",
            "Resource": ec2("instance"),
            "Action": "ec2:CreateTags",
            "Condition": {
                "StringEquals": { &owned: "owned" },
                "StringLike": { "aws:ResourceTag/karpenter.sh/nodepool": "*" },
                "StringEqualsIfExists": { "aws:RequestTag/eks:eks-cluster-name": c },
                "ForAllValues:StringEquals": {
                    "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
                }
            }
        }),
        json!({
            "Sid": "AllowScopedDeletion",
            "Effect": "Allow",
            "Resource": [ec2("instance"), ec2("launch-template")],
            "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            "Condition": {
                "StringEquals": { &owned: "owned" },
                "StringLike": { "aws:ResourceTag/karpenter.sh/nodepool": "*" }
            }
        }),
        json!({
            "Sid": "AllowRegionalReadActions",
            "Effect": "Allow",
            "Resource": "*",
            "Action": reads,
            "Condition": { "StringEquals": { "aws:RequestedRegion": r } }
        }),
        json!({
            "Sid": "AllowSSMReadActions",
            "Effect": "Allow",
            "Resource": format!("arn:{p}:ssm:{r}::parameter/aws/service/*"),
            "Action": "ssm:GetParameter"
        }),
        json!({ "Sid": "AllowPricingReadActions", "Effect": "Allow", "Resource": "*", "Action": "pricing:GetProducts" }),
        json!({
            "Sid": "AllowInterruptionQueueActions",
            "Effect": "Allow",
            "Resource": s.queue_arn,
            "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"]
        }),
        json!({
            "Sid": "AllowPassingInstanceRole",
            "Effect": "Allow",
            "Resource": s.node_role,
            "Action": "iam:PassRole",
            "Condition": { "StringEquals": { "iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"] } }
        }),
        json!({
            "Sid": "AllowScopedInstanceProfileCreationActions",
            "Effect": "Allow",
            "Resource": profiles,
            "Action": ["iam:CreateInstanceProfile"],
            "Condition": {
                "StringEquals": {
                    &req_owned: "owned",
                    "aws:RequestTag/eks:eks-cluster-name": c,
                    "aws:RequestTag/topology.kubernetes.io/region": r
                },
                "StringLike": { "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*" }
            }
        }),
        json!({
            "Sid": "AllowScopedInstanceProfileTagActions",
            "Effect": "Allow",
            "Resource": profiles,
            "Action": ["iam:TagInstanceProfile"],
            "Condition": {
                "StringEquals": {
                    &owned: "owned",
                    "aws:ResourceTag/topology.kubernetes.io/region": r,
                    &req_owned: "owned",
                    "aws:RequestTag/eks:eks-cluster-name": c,
                    "aws:RequestTag/topology.kubernetes.io/region": r
                },
                "StringLike": {
                    "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*",
                    "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"
                }
            }
        }),
        json!({
            "Sid": "AllowScopedInstanceProfileActions",
            "Effect": "Allow",
            "Resource": profiles,
            "Action": ["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile"],
            "Condition": {
                "StringEquals": { &owned: "owned", "aws:ResourceTag/topology.kubernetes.io/region": r },
                "StringLike": { "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*" }
            }
        }),
        json!({
            "Sid": "AllowInstanceProfileReadActions",
            "Effect": "Allow",
            "Resource": profiles,
            "Action": "iam:GetInstanceProfile"
        }),
    ];
    if at_least((1, 7)) {
        st.push(json!({
            "Sid": "AllowUnscopedInstanceProfileListAction",
            "Effect": "Allow",
            "Resource": "*",
            "Action": "iam:ListInstanceProfiles"
        }));
    }
    st.push(json!({
        "Sid": "AllowAPIServerEndpointDiscovery",
        "Effect": "Allow",
        "Resource": cluster_arn,
        "Action": "eks:DescribeCluster"
    }));
    if at_least((1, 12)) {
        st.push(json!({
            "Sid": "AllowZonalShiftStatusReadOnly",
            "Effect": "Allow",
            "Resource": "*",
            "Action": ["arc-zonal-shift:GetManagedResource"],
            "Condition": { "StringEquals": { "arc-zonal-shift:ResourceIdentifier": cluster_arn } }
        }));
    }
    json!({ "Version": "2012-10-17", "Statement": st })
}

/// IAM's size of a policy: its characters without white space (IAM UG "IAM and AWS STS quotas").
pub fn size(doc: &Json) -> usize {
    doc.to_string().chars().filter(|c| !c.is_whitespace()).count()
}

/// The cluster and node role a document names (its `eks:DescribeCluster` and `iam:PassRole`
/// statements), so refresh can tell which cluster and role a found policy was written for.
pub fn named(doc: &Json) -> (Option<String>, Option<String>) {
    let resource = |sid: &str| -> Option<String> {
        doc["Statement"].as_array()?.iter().find(|s| s["Sid"] == sid)?["Resource"].as_str().map(str::to_string)
    };
    let cluster =
        resource("AllowAPIServerEndpointDiscovery").and_then(|a| a.rsplit_once(":cluster/").map(|x| x.1.to_string()));
    (cluster, resource("AllowPassingInstanceRole"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(cluster: &str) -> Scope {
        Scope {
            partition: "aws".into(),
            region: "us-west-2".into(),
            account: "123456789012".into(),
            cluster: cluster.into(),
            node_role: format!("arn:aws:iam::123456789012:role/KarpenterNodeRole-{cluster}"),
            queue_arn: format!("arn:aws:sqs:us-west-2:123456789012:{cluster}"),
        }
    }

    fn sids(doc: &Json) -> Vec<&str> {
        doc["Statement"].as_array().unwrap().iter().map(|s| s["Sid"].as_str().unwrap()).collect()
    }

    fn statement<'a>(doc: &'a Json, sid: &str) -> &'a Json {
        doc["Statement"].as_array().unwrap().iter().find(|s| s["Sid"] == sid).unwrap()
    }

    #[test]
    fn v1_6_has_the_sixteen_statements_of_the_template() {
        let doc = document((1, 6), &scope("c"));
        assert_eq!(
            sids(&doc),
            [
                "AllowScopedEC2InstanceAccessActions",
                "AllowScopedEC2LaunchTemplateAccessActions",
                "AllowScopedEC2InstanceActionsWithTags",
                "AllowScopedResourceCreationTagging",
                "AllowScopedResourceTagging",
                "AllowScopedDeletion",
                "AllowRegionalReadActions",
                "AllowSSMReadActions",
                "AllowPricingReadActions",
                "AllowInterruptionQueueActions",
                "AllowPassingInstanceRole",
                "AllowScopedInstanceProfileCreationActions",
                "AllowScopedInstanceProfileTagActions",
                "AllowScopedInstanceProfileActions",
                "AllowInstanceProfileReadActions",
                "AllowAPIServerEndpointDiscovery",
            ]
        );
    }

    /// The v1.6 size formula of aws-facts §8: 4,936 fixed characters, plus 15 × the cluster
    /// name, 29 × the region, 28 × the partition, 5 × 12 for the account, and the queue and
    /// node role ARNs once each; with the template's names (a node role
    /// `KarpenterNodeRole-<cluster>`, a queue named like the cluster) 5,425 + 17 × the name.
    #[test]
    fn the_v1_6_size_follows_the_counted_formula() {
        for name in ["c", "a-20-character-name", &"x".repeat(100)] {
            let s = scope(name);
            let doc = document((1, 6), &s);
            let expected =
                4936 + 15 * name.len() + 29 * s.region.len() + 28 * 3 + 5 * 12 + s.queue_arn.len() + s.node_role.len();
            assert_eq!(size(&doc), expected, "cluster name {name}");
            assert_eq!(size(&doc), 5425 + 17 * name.len());
        }
        // A 20-character cluster name: 5,765 in v1.6; the largest document (v1.12+) 6,190.
        assert_eq!(size(&document((1, 6), &scope(&"c".repeat(20)))), 5765);
        assert_eq!(size(&document((1, 12), &scope(&"c".repeat(20)))), 6190);
    }

    #[test]
    fn as_one_managed_policy_v1_6_would_pass_6144_characters_after_42_character_names() {
        let at = |n: usize| size(&document((1, 6), &scope(&"x".repeat(n))));
        assert!(at(42) <= 6144, "{}", at(42));
        assert!(at(43) > 6144, "{}", at(43));
    }

    #[test]
    fn every_version_fits_the_inline_quota_with_the_longest_names() {
        // EKS cluster names reach 100 characters; the queue name 80, a role ARN with path more.
        let mut s = scope(&"c".repeat(100));
        s.queue_arn = format!("arn:aws-us-gov:sqs:us-gov-west-1:123456789012:{}", "q".repeat(80));
        s.node_role = format!("arn:aws-us-gov:iam::123456789012:role/gpustack/{}/{}", "s".repeat(31), "r".repeat(64));
        s.partition = "aws-us-gov".into();
        s.region = "us-gov-west-1".into();
        for v in CHANGES {
            let n = size(&document(*v, &s));
            assert!(n <= INLINE_QUOTA, "v{v:?}: {n}");
        }
    }

    #[test]
    fn later_versions_add_what_their_templates_add() {
        let s = scope("c");
        let v17 = document((1, 7), &s);
        assert_eq!(sids(&v17).len(), 17);
        assert_eq!(statement(&v17, "AllowUnscopedInstanceProfileListAction")["Action"], "iam:ListInstanceProfiles");
        let with_tags = |d: &Json| statement(d, "AllowScopedEC2InstanceActionsWithTags")["Resource"].to_string();
        assert!(with_tags(&document((1, 8), &s)).contains("capacity-reservation"));
        assert!(!with_tags(&document((1, 9), &s)).contains("capacity-reservation"));
        let access = |d: &Json| statement(d, "AllowScopedEC2InstanceAccessActions")["Resource"].to_string();
        let reads = |d: &Json| statement(d, "AllowRegionalReadActions")["Action"].to_string();
        let v110 = document((1, 10), &s);
        assert!(!access(&v110).contains("placement-group") && !reads(&v110).contains("DescribePlacementGroups"));
        let v111 = document((1, 11), &s);
        assert!(access(&v111).contains("placement-group/*") && reads(&v111).contains("DescribePlacementGroups"));
        assert!(!reads(&v111).contains("DescribeInstanceStatus"));
        let v112 = document((1, 12), &s);
        assert_eq!(sids(&v112).len(), 18);
        assert!(reads(&v112).contains("ec2:DescribeInstanceStatus"));
        assert_eq!(
            statement(&v112, "AllowZonalShiftStatusReadOnly")["Condition"]["StringEquals"]["arc-zonal-shift:ResourceIdentifier"],
            "arn:aws:eks:us-west-2:123456789012:cluster/c"
        );
        assert_eq!(document((1, 14), &s), v112, "1.13 and 1.14 add nothing");
    }

    #[test]
    fn the_cluster_name_is_in_condition_keys_and_the_node_role_only_in_pass_role() {
        let s = scope("gpu-main");
        let doc = document((1, 6), &s);
        let launch = statement(&doc, "AllowScopedEC2LaunchTemplateAccessActions");
        assert_eq!(launch["Condition"]["StringEquals"]["aws:ResourceTag/kubernetes.io/cluster/gpu-main"], "owned");
        let pass = statement(&doc, "AllowPassingInstanceRole");
        assert_eq!(pass["Resource"], s.node_role.as_str());
        assert_eq!(pass["Condition"]["StringEquals"]["iam:PassedToService"][0], "ec2.amazonaws.com");
        assert_eq!(doc.to_string().matches(&s.node_role).count(), 1);
        assert_eq!(statement(&doc, "AllowInterruptionQueueActions")["Resource"], s.queue_arn.as_str());
        assert_eq!(
            statement(&doc, "AllowRegionalReadActions")["Condition"]["StringEquals"]["aws:RequestedRegion"],
            "us-west-2"
        );
        assert_eq!(named(&doc), (Some("gpu-main".into()), Some(s.node_role.clone())));
    }

    #[test]
    fn generations_follow_the_changes() {
        assert_eq!(generation((1, 5)), None);
        assert_eq!(generation((1, 6)), Some((1, 6)));
        assert_eq!(generation((1, 8)), Some((1, 7)));
        assert_eq!(generation((1, 10)), Some((1, 9)));
        assert_eq!(generation((2, 0)), Some((1, 12)));
    }

    #[test]
    fn the_trust_policy_lets_pod_identity_assume_and_tag() {
        let t = trust();
        assert_eq!(t["Statement"][0]["Principal"]["Service"], "pods.eks.amazonaws.com");
        assert_eq!(t["Statement"][0]["Action"], json!(["sts:AssumeRole", "sts:TagSession"]));
    }
}
