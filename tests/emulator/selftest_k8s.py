"""Selftest of what the Kubernetes side (Karpenter GPU pools, issue 12) needs from the emulator:
EKS access entries and access policies, EKS Pod Identity associations, the SQS interruption queue
and the EventBridge rules that feed it, and the IAM size quotas the controller policy meets,
through boto3 against a running emulator (starts nothing
itself):

    tests/emulator/.venv/bin/python tests/emulator/selftest_k8s.py --endpoint http://127.0.0.1:PORT

Every check names its source (the module docstrings of ``ext/eks_access.py``,
``ext/eks_pod_identity.py``, ``ext/sqs_strict.py``, ``ext/events_strict.py``,
``ext/iam_policy_size.py`` have the full list).
boto3's own client-side validation is off, so the emulator's is what answers. Exits non-zero on
the first failure; ends with a moto reset: run it against an emulator of its own.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import urllib.error
import urllib.request
import uuid
from typing import Any, Callable

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

REGION = "us-west-2"
ACCOUNT = "123456789012"
NO_CLIENT_VALIDATION = Config(parameter_validation=False, retries={"max_attempts": 1})
POLICY = "arn:aws:eks::aws:cluster-access-policy/{}"
MODE_MESSAGE = (
    "The cluster's authentication mode must be set to one of [API, API_AND_CONFIG_MAP] to perform "
    "this operation."
)
INVALID_PRINCIPAL = "The specified principalArn is invalid: invalid principal."
STANDARD_ONLY = 'This operation can only be performed on Access Entries with a type of "STANDARD".'
NOT_FOUND = (
    "The specified principalArn could not be found. You can view your available access entries "
    "with 'list-access-entries'."
)
EC2_TRUST = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}
POD_TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"Service": "pods.eks.amazonaws.com"},
            "Action": ["sts:AssumeRole", "sts:TagSession"],
        }
    ],
}
# Karpenter's interruption rules (getting-started cloudformation.yaml, v1.x; aws-facts.md §8).
KARPENTER_PATTERNS = {
    "scheduled-change": {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},
    "spot-interruption": {"source": ["aws.ec2"], "detail-type": ["EC2 Spot Instance Interruption Warning"]},
    "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "instance-state-change": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance State-change Notification"]},
}


def check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)
    print(f"ok   {what}")


def error(call: Callable[..., Any], **kwargs: Any) -> tuple[str | None, int | None, str]:
    """(code, HTTP status, message) of a call that fails; (None, None, "") if it succeeds."""
    try:
        call(**kwargs)
    except ClientError as e:
        return (
            e.response["Error"].get("Code"),
            e.response["ResponseMetadata"]["HTTPStatusCode"],
            e.response["Error"].get("Message", ""),
        )
    return None, None, ""


def http(endpoint: str, method: str, path: str) -> Any:
    req = urllib.request.Request(endpoint + path, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return json.loads(e.read())


class Env:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)

        def client(name: str) -> Any:
            return session.client(name, endpoint_url=endpoint, config=NO_CLIENT_VALIDATION)

        self.eks, self.ec2, self.iam = client("eks"), client("ec2"), client("iam")
        self.sqs, self.events, self.sts = client("sqs"), client("events"), client("sts")
        self.other_iam = boto3.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
        ).client("iam", endpoint_url=endpoint)
        self.stack = f"k8s-{uuid.uuid4().hex[:6]}"
        http(endpoint, "POST", "/_gpustack/eks?cluster_create_ms=0&nodegroup_create_ms=0&delete_ms=0&update_ms=0")
        vpc = self.ec2.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"]
        self.subnets = [
            self.ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.30.{i}.0/24", AvailabilityZone=f"{REGION}{z}")[
                "Subnet"
            ]["SubnetId"]
            for i, z in ((1, "a"), (2, "b"))
        ]

    def role(self, name: str, trust: dict[str, Any], path: str = "/") -> str:
        return str(
            self.iam.create_role(RoleName=f"{self.stack}-{name}", Path=path, AssumeRolePolicyDocument=json.dumps(trust))[
                "Role"
            ]["Arn"]
        )

    def cluster(self, name: str, **access: Any) -> str:
        full = f"{self.stack}-{name}"
        kwargs: dict[str, Any] = {"accessConfig": access} if access else {}
        self.eks.create_cluster(
            name=full,
            version="1.33",
            roleArn=f"arn:aws:iam::{ACCOUNT}:role/cluster",
            resourcesVpcConfig={"subnetIds": self.subnets},
            **kwargs,
        )
        return full

    def log(self) -> list[dict[str, Any]]:
        return list(http(self.endpoint, "GET", "/_gpustack/requests"))


# --- EKS access entries -----------------------------------------------------------------------


def access_entries(env: Env) -> dict[str, str]:
    eks = env.eks
    node = env.role("node", EC2_TRUST)
    admin = env.role("admin", EC2_TRUST, path="/team/ops/")
    user = env.iam.create_user(UserName=f"{env.stack}-dev")["User"]["Arn"]

    # botocore CreateAccessConfigRequest: the API's default mode is CONFIG_MAP.
    legacy = env.cluster("legacy")
    check(
        eks.describe_cluster(name=legacy)["cluster"]["accessConfig"]["authenticationMode"] == "CONFIG_MAP",
        "CreateCluster without accessConfig -> CONFIG_MAP (botocore CreateAccessConfigRequest)",
    )
    # EKS's answer on a CONFIG_MAP cluster (upbound/configuration-aws-eks#122, eksctl#7695).
    for label, call, kwargs in (
        ("ListAccessEntries", eks.list_access_entries, {}),
        ("CreateAccessEntry", eks.create_access_entry, {"principalArn": node, "type": "EC2_LINUX"}),
        ("DescribeAccessEntry", eks.describe_access_entry, {"principalArn": node}),
    ):
        check(
            error(call, clusterName=legacy, **kwargs) == ("InvalidRequestException", 400, MODE_MESSAGE),
            f"{label} on a CONFIG_MAP cluster -> InvalidRequestException (eksctl#7695, upbound#122)",
        )
    # terraform-aws-modules/terraform-aws-eks#3026.
    check(
        error(
            eks.create_cluster,
            name=f"{env.stack}-bad",
            roleArn=f"arn:aws:iam::{ACCOUNT}:role/cluster",
            resourcesVpcConfig={"subnetIds": env.subnets},
            accessConfig={"authenticationMode": "CONFIG_MAP", "bootstrapClusterCreatorAdminPermissions": False},
        )[:2]
        == ("InvalidParameterException", 400),
        "CONFIG_MAP without bootstrapClusterCreatorAdminPermissions -> InvalidParameterException (terraform-aws-eks#3026)",
    )

    cluster = env.cluster("api", authenticationMode="API")
    creator = env.sts.get_caller_identity()["Arn"].replace(":sts::", ":iam::")
    entries = eks.list_access_entries(clusterName=cluster)["accessEntries"]
    check(entries == [creator], f"API cluster: the creator's entry {creator} (botocore bootstrapClusterCreatorAdminPermissions)")
    creator_policies = eks.list_associated_access_policies(clusterName=cluster, principalArn=creator)[
        "associatedAccessPolicies"
    ]
    check(
        [(p["policyArn"], p["accessScope"]) for p in creator_policies]
        == [(POLICY.format("AmazonEKSClusterAdminPolicy"), {"type": "cluster", "namespaces": []})],
        "the creator holds AmazonEKSClusterAdminPolicy at cluster scope",
    )
    quiet = env.cluster("quiet", authenticationMode="API_AND_CONFIG_MAP", bootstrapClusterCreatorAdminPermissions=False)
    check(
        eks.list_access_entries(clusterName=quiet)["accessEntries"] == [],
        "bootstrapClusterCreatorAdminPermissions false -> no creator entry",
    )

    token = str(uuid.uuid4())
    made = eks.create_access_entry(
        clusterName=cluster, principalArn=node, type="EC2_LINUX", tags={"gpustack:stack": env.stack}, clientRequestToken=token
    )["accessEntry"]
    check(
        made["type"] == "EC2_LINUX"
        and made["kubernetesGroups"] == ["system:nodes"]
        and made["username"] == "system:node:{{EC2PrivateDNSName}}"
        and made["tags"] == {"gpustack:stack": env.stack}
        and made["clusterName"] == cluster
        and made["principalArn"] == node,
        "EC2_LINUX entry: system:nodes, system:node:{{EC2PrivateDNSName}}, tags (aws-cli create-access-entry example 2)",
    )
    check(
        re.fullmatch(
            rf"arn:aws:eks:{REGION}:{ACCOUNT}:access-entry/{cluster}/role/{ACCOUNT}/{env.stack}-node/[0-9a-f-]{{36}}",
            made["accessEntryArn"],
        )
        is not None,
        "access entry ARN access-entry/<cluster>/role/<account>/<name>/<uuid> (aws-cli example)",
    )
    check(
        eks.create_access_entry(clusterName=cluster, principalArn=node, type="EC2_LINUX", clientRequestToken=token)[
            "accessEntry"
        ]["accessEntryArn"]
        == made["accessEntryArn"],
        "the same clientRequestToken returns the entry (botocore idempotencyToken)",
    )
    check(
        error(eks.create_access_entry, clusterName=cluster, principalArn=node, type="EC2_LINUX")
        == ("ResourceInUseException", 409, "The specified access entry resource is already in use on this cluster."),
        "a second entry for a principal -> ResourceInUseException 409 (terraform-aws-eks#3293)",
    )
    for label, principal in (
        ("a role that does not exist", f"arn:aws:iam::{ACCOUNT}:role/{env.stack}-nobody"),
        ("an STS session ARN", f"arn:aws:sts::{ACCOUNT}:assumed-role/{env.stack}-node/s"),
        ("not an ARN", "node"),
    ):
        check(
            error(eks.create_access_entry, clusterName=cluster, principalArn=principal)
            == ("InvalidParameterException", 400, INVALID_PRINCIPAL),
            f"{label} -> 'invalid principal' (EKS UG: an existing IAM principal; terraform-aws-eks#2969)",
        )
    refusals = (
        ("EC2_LINUX for an IAM user", {"principalArn": user, "type": "EC2_LINUX"}, "botocore: node types take only IAM roles"),
        ("EC2_LINUX with kubernetesGroups", {"principalArn": admin, "type": "EC2_LINUX", "kubernetesGroups": ["x"]}, "EKS UG"),
        ("EC2_LINUX with a username", {"principalArn": admin, "type": "EC2_LINUX", "username": "me"}, "EKS UG"),
        ("type NODE", {"principalArn": admin, "type": "NODE"}, "botocore type doc"),
        ("username system:admin", {"principalArn": admin, "username": "system:admin"}, "EKS UG username rules"),
        ("username john{{SessionName}}", {"principalArn": admin, "username": "john{{SessionName}}"}, "EKS UG"),
        ("tag key aws:x", {"principalArn": admin, "tags": {"aws:x": "1"}}, "botocore tags doc"),
    )
    for label, kwargs, source in refusals:
        check(
            error(eks.create_access_entry, clusterName=cluster, **kwargs)[:2] == ("InvalidParameterException", 400),
            f"{label} -> InvalidParameterException ({source})",
        )
    check(
        error(eks.create_access_entry, clusterName=cluster, principalArn=admin, kubernetesGroups=["system:masters"])
        == (
            "InvalidParameterException",
            400,
            "The kubernetes group name system:masters is invalid, it cannot start with system:",
        ),
        "group system:masters -> 'cannot start with system:' (karpenter-provider-aws#7558)",
    )
    check(
        error(eks.create_access_entry, clusterName=cluster)[:2] == ("InvalidParameterException", 400),
        "CreateAccessEntry without principalArn -> InvalidParameterException (botocore required)",
    )
    std = eks.create_access_entry(clusterName=cluster, principalArn=admin, kubernetesGroups=["viewers"])["accessEntry"]
    check(
        std["type"] == "STANDARD"
        and std["username"] == f"arn:aws:sts::{ACCOUNT}:assumed-role/{env.stack}-admin/{{{{SessionName}}}}"
        and std["kubernetesGroups"] == ["viewers"],
        "STANDARD role entry: username the assumed-role ARN without the path (EKS UG username table)",
    )
    dev = eks.create_access_entry(clusterName=cluster, principalArn=user)["accessEntry"]
    check(dev["username"] == user and dev["kubernetesGroups"] == [], "STANDARD user entry: username the user ARN (aws-cli example 1)")
    check(
        eks.describe_access_entry(clusterName=cluster, principalArn=admin)["accessEntry"] == std,
        "DescribeAccessEntry of a role ARN with a path (%2F in the URI) answers the entry",
    )
    check(
        error(eks.describe_access_entry, clusterName=cluster, principalArn=f"arn:aws:iam::{ACCOUNT}:role/none")
        == ("ResourceNotFoundException", 404, NOT_FOUND),
        "unknown entry -> ResourceNotFoundException 404 (terraform-aws-eks#3024)",
    )

    updated = eks.update_access_entry(clusterName=cluster, principalArn=admin, kubernetesGroups=["editors"])["accessEntry"]
    check(updated["kubernetesGroups"] == ["editors"], "UpdateAccessEntry replaces kubernetesGroups")
    check(
        error(eks.update_access_entry, clusterName=cluster, principalArn=node, kubernetesGroups=["x"])
        == ("InvalidParameterException", 400, STANDARD_ONLY),
        "UpdateAccessEntry groups of an EC2_LINUX entry -> STANDARD only (EKS UG)",
    )

    view, edit = POLICY.format("AmazonEKSViewPolicy"), POLICY.format("AmazonEKSEditPolicy")
    first = eks.associate_access_policy(
        clusterName=cluster, principalArn=admin, policyArn=view, accessScope={"type": "namespace", "namespaces": ["a", "dev-*"]}
    )
    check(
        first["associatedAccessPolicy"]["accessScope"] == {"type": "namespace", "namespaces": ["a", "dev-*"]}
        and first["principalArn"] == admin,
        "AssociateAccessPolicy at namespace scope (aws-cli associate-access-policy example)",
    )
    again = eks.associate_access_policy(clusterName=cluster, principalArn=admin, policyArn=view, accessScope={"type": "cluster"})
    check(
        again["associatedAccessPolicy"]["accessScope"] == {"type": "cluster", "namespaces": []}
        and again["associatedAccessPolicy"]["associatedAt"] == first["associatedAccessPolicy"]["associatedAt"],
        "associating the same policy again changes its scope (EKS UG: once per entry, scope changeable)",
    )
    eks.associate_access_policy(clusterName=cluster, principalArn=admin, policyArn=edit, accessScope={"type": "cluster"})
    for label, kwargs in (
        ("an unknown policy", {"policyArn": POLICY.format("AmazonEKSRootPolicy"), "accessScope": {"type": "cluster"}}),
        ("namespace scope without namespaces", {"policyArn": view, "accessScope": {"type": "namespace"}}),
        ("scope type everything", {"policyArn": view, "accessScope": {"type": "everything"}}),
    ):
        check(
            error(eks.associate_access_policy, clusterName=cluster, principalArn=admin, **kwargs)[:2]
            == ("InvalidParameterException", 400),
            f"AssociateAccessPolicy with {label} -> InvalidParameterException (botocore AccessScope, ListAccessPolicies)",
        )
    # aws-controllers-k8s/community#2144: EKS refuses these on a Karpenter EC2_LINUX entry.
    for label, call, kwargs in (
        ("AssociateAccessPolicy", eks.associate_access_policy, {"policyArn": view, "accessScope": {"type": "cluster"}}),
        ("ListAssociatedAccessPolicies", eks.list_associated_access_policies, {}),
        ("DisassociateAccessPolicy", eks.disassociate_access_policy, {"policyArn": view}),
    ):
        check(
            error(call, clusterName=cluster, principalArn=node, **kwargs) == ("InvalidParameterException", 400, STANDARD_ONLY),
            f"{label} on an EC2_LINUX entry -> STANDARD only (ACK community#2144)",
        )
    listed = eks.list_associated_access_policies(clusterName=cluster, principalArn=admin)
    check(
        [p["policyArn"] for p in listed["associatedAccessPolicies"]] == [edit, view] and listed["clusterName"] == cluster,
        "ListAssociatedAccessPolicies lists both",
    )
    check(
        eks.list_access_entries(clusterName=cluster, associatedPolicyArn=edit)["accessEntries"] == [admin],
        "ListAccessEntries associatedPolicyArn filter (botocore)",
    )
    page = eks.list_access_entries(clusterName=cluster, maxResults=2)
    rest = eks.list_access_entries(clusterName=cluster, maxResults=2, nextToken=page["nextToken"])
    check(
        len(page["accessEntries"]) == 2 and sorted(page["accessEntries"] + rest["accessEntries"]) == sorted([creator, node, admin, user]),
        "ListAccessEntries pages with maxResults/nextToken",
    )
    check(
        error(eks.list_access_entries, clusterName=cluster, maxResults=101)[:2] == ("InvalidParameterException", 400),
        "maxResults 101 -> InvalidParameterException (botocore max 100)",
    )
    eks.disassociate_access_policy(clusterName=cluster, principalArn=admin, policyArn=edit)
    check(
        [p["policyArn"] for p in eks.list_associated_access_policies(clusterName=cluster, principalArn=admin)["associatedAccessPolicies"]]
        == [view],
        "DisassociateAccessPolicy removes it",
    )
    check(
        error(eks.disassociate_access_policy, clusterName=cluster, principalArn=admin, policyArn=edit)[:2]
        == ("ResourceNotFoundException", 404),
        "disassociating a policy the entry lacks -> ResourceNotFoundException",
    )

    policies = eks.list_access_policies()["accessPolicies"]
    names = {p["name"]: p["arn"] for p in policies}
    check(
        names.get("AmazonEKSClusterAdminPolicy") == POLICY.format("AmazonEKSClusterAdminPolicy")
        and {"AmazonEKSAdminPolicy", "AmazonEKSViewPolicy", "AmazonEKSEditPolicy", "AmazonEKSAdminViewPolicy"} <= set(names),
        f"ListAccessPolicies: {len(policies)} AWS-managed policies (aws-cli list-access-policies example)",
    )
    first_page = eks.list_access_policies(maxResults=5)
    check(
        len(first_page["accessPolicies"]) == 5 and first_page.get("nextToken"),
        "ListAccessPolicies pages",
    )

    arn = made["accessEntryArn"]
    eks.tag_resource(resourceArn=arn, tags={"team": "ml"})
    check(
        eks.list_tags_for_resource(resourceArn=arn)["tags"] == {"gpustack:stack": env.stack, "team": "ml"},
        "TagResource/ListTagsForResource on an access entry ARN",
    )
    eks.untag_resource(resourceArn=arn, tagKeys=["team"])
    check(eks.list_tags_for_resource(resourceArn=arn)["tags"] == {"gpustack:stack": env.stack}, "UntagResource")

    eks.delete_access_entry(clusterName=cluster, principalArn=admin)
    check(
        error(eks.describe_access_entry, clusterName=cluster, principalArn=admin)[:2] == ("ResourceNotFoundException", 404)
        and error(eks.delete_access_entry, clusterName=cluster, principalArn=admin)[:2] == ("ResourceNotFoundException", 404),
        "DeleteAccessEntry: gone, a second delete 404 (associations go along, EKS UG)",
    )

    # A managed node group's role gets an EC2_LINUX entry in the API modes (terraform-aws-eks#3286).
    ng_role = env.role("ng", EC2_TRUST)
    eks.create_nodegroup(clusterName=cluster, nodegroupName="ng", nodeRole=ng_role, subnets=env.subnets)
    check(
        eks.describe_access_entry(clusterName=cluster, principalArn=ng_role)["accessEntry"]["type"] == "EC2_LINUX",
        "CreateNodegroup in API mode makes an EC2_LINUX entry for the node role (terraform-aws-eks#3286)",
    )
    check(
        error(eks.create_access_entry, clusterName=cluster, principalArn=ng_role, type="EC2_LINUX")[:2]
        == ("ResourceInUseException", 409),
        "so an EC2_LINUX entry for a node group's role is ResourceInUseException",
    )
    eks.create_nodegroup(clusterName=legacy, nodegroupName="ng", nodeRole=node, subnets=env.subnets)
    eks.update_cluster_config(name=legacy, accessConfig={"authenticationMode": "API_AND_CONFIG_MAP"})
    check(
        eks.list_access_entries(clusterName=legacy)["accessEntries"] == [],
        "node groups made under CONFIG_MAP leave no entries (unverified: EKS's migration)",
    )

    log = [r["action"] for r in env.log() if r["service"] == "eks"]
    wanted = {
        "CreateAccessEntry", "DescribeAccessEntry", "ListAccessEntries", "UpdateAccessEntry", "DeleteAccessEntry",
        "AssociateAccessPolicy", "DisassociateAccessPolicy", "ListAssociatedAccessPolicies", "ListAccessPolicies",
    }
    check(wanted <= set(log), "the request log names every access-entry operation (raw-path routing)")
    eks.delete_nodegroup(clusterName=cluster, nodegroupName="ng")
    eks.delete_nodegroup(clusterName=legacy, nodegroupName="ng")
    time.sleep(0.05)
    eks.list_clusters()  # sweep
    eks.delete_cluster(name=quiet)
    time.sleep(0.05)
    env.cluster("quiet", authenticationMode="API", bootstrapClusterCreatorAdminPermissions=False)
    check(eks.list_access_entries(clusterName=quiet)["accessEntries"] == [], "entries go with their cluster")
    return {"cluster": cluster, "legacy": legacy, "node": node}


# --- EKS Pod Identity -------------------------------------------------------------------------


def pod_identity(env: Env, clusters: dict[str, str]) -> None:
    eks = env.eks
    cluster, legacy = clusters["cluster"], clusters["legacy"]
    karpenter = env.role("karpenter", POD_TRUST)
    wildcard = env.role(
        "wild",
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": ["pods.eks.amazonaws.com"]}, "Action": "sts:*"}]},
    )
    oidc = env.role(
        "irsa",
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Federated": f"arn:aws:iam::{ACCOUNT}:oidc-provider/oidc.eks.{REGION}.amazonaws.com/id/X"},
                    "Action": "sts:AssumeRoleWithWebIdentity",
                }
            ],
        },
    )
    no_tag = env.role(
        "notag",
        {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"}, "Action": "sts:AssumeRole"}]},
    )
    token = str(uuid.uuid4())
    made = eks.create_pod_identity_association(
        clusterName=cluster,
        namespace="kube-system",
        serviceAccount="karpenter",
        roleArn=karpenter,
        tags={"gpustack:stack": env.stack},
        clientRequestToken=token,
    )["association"]
    check(
        re.fullmatch(r"a-[a-z0-9]{17}", made["associationId"]) is not None
        and made["associationArn"] == f"arn:aws:eks:{REGION}:{ACCOUNT}:podidentityassociation/{cluster}/{made['associationId']}"
        and made["roleArn"] == karpenter
        and made["tags"] == {"gpustack:stack": env.stack}
        and made["disableSessionTags"] is False,
        "CreatePodIdentityAssociation: a-<17> id, podidentityassociation/<cluster>/<id> ARN (aws-cli example)",
    )
    check(
        eks.create_pod_identity_association(
            clusterName=cluster, namespace="kube-system", serviceAccount="karpenter", roleArn=karpenter, clientRequestToken=token
        )["association"]["associationId"]
        == made["associationId"],
        "the same clientRequestToken returns the association (botocore idempotencyToken)",
    )
    check(
        error(eks.create_pod_identity_association, clusterName=cluster, namespace="kube-system", serviceAccount="karpenter", roleArn=karpenter)
        == ("ResourceInUseException", 409, f"Association already exists: {made['associationId']}"),
        "a second association for the service account -> 409 'Association already exists' (crossplane-on-eks#168)",
    )
    trust = "Trust policy of the role provided is invalid. Follow the official documentation to resolve the issue."
    check(
        error(eks.create_pod_identity_association, clusterName=cluster, namespace="ml", serviceAccount="a", roleArn=oidc)
        == ("InvalidParameterException", 400, trust),
        "a role trusting only an OIDC provider -> 'Trust policy ... invalid' (terraform-provider-aws#41483)",
    )
    check(
        error(eks.create_pod_identity_association, clusterName=cluster, namespace="ml", serviceAccount="a", roleArn=no_tag)[:2]
        == ("InvalidParameterException", 400),
        "a trust policy without sts:TagSession -> refused (EKS UG pod-id-association trust policy)",
    )
    for label, role in (
        ("a role that does not exist", f"arn:aws:iam::{ACCOUNT}:role/{env.stack}-nobody"),
        ("another account's role", f"arn:aws:iam::210987654321:role/{env.stack}-karpenter"),
        ("a user ARN", f"arn:aws:iam::{ACCOUNT}:user/someone"),
    ):
        check(
            error(eks.create_pod_identity_association, clusterName=cluster, namespace="ml", serviceAccount="a", roleArn=role)[:2]
            == ("InvalidParameterException", 400),
            f"{label} -> InvalidParameterException (EKS UG: same-account roles)",
        )
    for label, kwargs in (
        ("namespace Kube_System", {"namespace": "Kube_System", "serviceAccount": "a"}),
        ("service account a/b", {"namespace": "ml", "serviceAccount": "a/b"}),
        ("a policy without disableSessionTags", {"namespace": "ml", "serviceAccount": "p", "policy": json.dumps({"Version": "2012-10-17", "Statement": []})}),
        ("tag key aws:x", {"namespace": "ml", "serviceAccount": "t", "tags": {"aws:x": "1"}}),
    ):
        check(
            error(eks.create_pod_identity_association, clusterName=cluster, roleArn=wildcard, **kwargs)[:2]
            == ("InvalidParameterException", 400),
            f"{label} -> InvalidParameterException (Kubernetes names; botocore policy/tags docs)",
        )
    check(
        error(eks.create_pod_identity_association, clusterName=cluster, namespace="ml", serviceAccount="a")[:2]
        == ("InvalidParameterException", 400),
        "without roleArn -> InvalidParameterException (botocore required)",
    )
    other = eks.create_pod_identity_association(clusterName=cluster, namespace="ml", serviceAccount="trainer", roleArn=wildcard)["association"]
    check(other["roleArn"] == wildcard, "sts:* in the trust policy covers AssumeRole and TagSession")
    legacy_assoc = eks.create_pod_identity_association(clusterName=legacy, namespace="kube-system", serviceAccount="karpenter", roleArn=karpenter)
    check(legacy_assoc["association"]["clusterName"] == legacy, "Pod Identity works whatever the authentication mode")

    listed = eks.list_pod_identity_associations(clusterName=cluster)["associations"]
    check(
        sorted(a["associationId"] for a in listed) == sorted([made["associationId"], other["associationId"]])
        and all(set(a) == {"clusterName", "namespace", "serviceAccount", "associationArn", "associationId"} for a in listed),
        "ListPodIdentityAssociations: summaries without roleArn, times, tags (botocore summary shape)",
    )
    check(
        [a["associationId"] for a in eks.list_pod_identity_associations(clusterName=cluster, namespace="kube-system")["associations"]]
        == [made["associationId"]]
        and [a["serviceAccount"] for a in eks.list_pod_identity_associations(clusterName=cluster, serviceAccount="trainer")["associations"]]
        == ["trainer"]
        and eks.list_pod_identity_associations(clusterName=cluster, namespace="ml", serviceAccount="karpenter")["associations"] == [],
        "namespace and serviceAccount filters",
    )
    first = eks.list_pod_identity_associations(clusterName=cluster, maxResults=1)
    check(len(first["associations"]) == 1 and first.get("nextToken"), "ListPodIdentityAssociations pages")
    check(
        eks.describe_pod_identity_association(clusterName=cluster, associationId=made["associationId"])["association"]["roleArn"]
        == karpenter,
        "DescribePodIdentityAssociation",
    )
    check(
        error(eks.describe_pod_identity_association, clusterName=cluster, associationId="a-00000000000000000")[:2]
        == ("ResourceNotFoundException", 404),
        "unknown association -> ResourceNotFoundException 404",
    )

    moved = eks.update_pod_identity_association(clusterName=cluster, associationId=made["associationId"], roleArn=wildcard)["association"]
    check(moved["roleArn"] == wildcard and moved["namespace"] == "kube-system", "UpdatePodIdentityAssociation changes the role")
    check(
        error(eks.update_pod_identity_association, clusterName=cluster, associationId=made["associationId"], roleArn=wildcard)[:2]
        == ("InvalidParameterException", 400),
        "an update that changes nothing -> InvalidParameterException (botocore: must change at least one)",
    )
    check(
        error(eks.update_pod_identity_association, clusterName=cluster, associationId=made["associationId"], roleArn=oidc)
        == ("InvalidParameterException", 400, trust),
        "UpdatePodIdentityAssociation checks the trust policy too",
    )
    scoped = eks.update_pod_identity_association(
        clusterName=cluster,
        associationId=made["associationId"],
        disableSessionTags=True,
        policy=json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "ec2:*", "Resource": "*"}]}),
        targetRoleArn=f"arn:aws:iam::210987654321:role/target",
    )["association"]
    check(
        scoped["disableSessionTags"] is True and scoped["policy"] and scoped["externalId"] and scoped["targetRoleArn"].endswith("role/target"),
        "policy with disableSessionTags, target role with an externalId (botocore)",
    )
    eks.tag_resource(resourceArn=made["associationArn"], tags={"team": "ml"})
    check(
        eks.list_tags_for_resource(resourceArn=made["associationArn"])["tags"] == {"gpustack:stack": env.stack, "team": "ml"},
        "TagResource/ListTagsForResource on an association ARN",
    )
    gone = eks.delete_pod_identity_association(clusterName=cluster, associationId=made["associationId"])["association"]
    check(
        gone["associationId"] == made["associationId"]
        and error(eks.describe_pod_identity_association, clusterName=cluster, associationId=made["associationId"])[:2]
        == ("ResourceNotFoundException", 404),
        "DeletePodIdentityAssociation answers the association; then 404",
    )
    log = {r["action"] for r in env.log() if r["service"] == "eks"}
    check(
        {
            "CreatePodIdentityAssociation", "DescribePodIdentityAssociation", "ListPodIdentityAssociations",
            "UpdatePodIdentityAssociation", "DeletePodIdentityAssociation",
        }
        <= log,
        "the request log names every Pod Identity operation",
    )


# --- SQS interruption queue -------------------------------------------------------------------


def sqs(env: Env) -> str:
    q = env.sqs
    name = f"{env.stack}-interruption"
    arn = f"arn:aws:sqs:{REGION}:{ACCOUNT}:{name}"
    policy = json.dumps(
        {
            "Version": "2012-10-17",
            "Id": "EC2InterruptionPolicy",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
                    "Action": "sqs:SendMessage",
                    "Resource": arn,
                },
                {
                    "Sid": "DenyHTTP",
                    "Effect": "Deny",
                    "Action": "sqs:*",
                    "Resource": arn,
                    "Condition": {"Bool": {"aws:SecureTransport": False}},
                    "Principal": "*",
                },
            ],
        }
    )
    attributes = {"MessageRetentionPeriod": "300", "SqsManagedSseEnabled": "true", "Policy": policy}
    created = q.create_queue(QueueName=name, Attributes=attributes, tags={"gpustack:stack": env.stack})
    url = created["QueueUrl"]
    check(
        created["ResponseMetadata"]["HTTPHeaders"]["content-type"] == "application/x-amz-json-1.0",
        "moto serves SQS over awsJson1_0, the protocol of aws-sdk-sqs (botocore sqs metadata: protocol json)",
    )
    check(url.endswith(f"/{ACCOUNT}/{name}") and q.get_queue_url(QueueName=name)["QueueUrl"] == url, "CreateQueue/GetQueueUrl")
    got = q.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    check(
        got["MessageRetentionPeriod"] == "300"
        and got["SqsManagedSseEnabled"] == "true"
        and json.loads(got["Policy"]) == json.loads(policy)
        and got["QueueArn"] == arn,
        "GetQueueAttributes All: retention 300, SSE, Policy, QueueArn",
    )
    check(q.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"] == url, "CreateQueue with the same attributes returns the queue (botocore CreateQueue)")
    check(
        error(q.create_queue, QueueName=name, Attributes={"MessageRetentionPeriod": "600"})[0] == "QueueAlreadyExists",
        "CreateQueue with other attributes -> QueueAlreadyExists (botocore QueueNameExists; moto's)",
    )
    check(q.list_queue_tags(QueueUrl=url)["Tags"] == {"gpustack:stack": env.stack}, "ListQueueTags: tags from CreateQueue")

    for label, attrs, code in (
        ("an unknown attribute", {"Bogus": "1"}, "InvalidAttributeName"),
        ("All", {"All": "1"}, "InvalidAttributeName"),
        ("read-only QueueArn", {"QueueArn": arn}, "InvalidAttributeName"),
        ("FifoQueue false", {"FifoQueue": "false"}, "InvalidAttributeName"),
        ("ContentBasedDeduplication on a standard queue", {"ContentBasedDeduplication": "true"}, "InvalidAttributeName"),
        ("MessageRetentionPeriod 59", {"MessageRetentionPeriod": "59"}, "InvalidAttributeValue"),
        ("MessageRetentionPeriod 1209601", {"MessageRetentionPeriod": "1209601"}, "InvalidAttributeValue"),
        ("MessageRetentionPeriod five", {"MessageRetentionPeriod": "five"}, "InvalidAttributeValue"),
        ("SqsManagedSseEnabled yes", {"SqsManagedSseEnabled": "yes"}, "InvalidAttributeValue"),
        ("a Policy that is not JSON", {"Policy": "{"}, "InvalidAttributeValue"),
        ("a Policy without Statement", {"Policy": "{}"}, "InvalidAttributeValue"),
        ("SSE-KMS and SSE-SQS", {"KmsMasterKeyId": "alias/aws/sqs", "SqsManagedSseEnabled": "true"}, "InvalidAttributeValue"),
        ("VisibilityTimeout 43201", {"VisibilityTimeout": "43201"}, "InvalidAttributeValue"),
    ):
        got_code, status, message = error(q.create_queue, QueueName=f"{env.stack}-bad", Attributes=attrs)
        check(
            (got_code, status) == (code, 400),
            f"CreateQueue with {label} -> {code} (botocore CreateQueueRequest.Attributes)",
        )
    check(
        error(q.create_queue, QueueName=f"{env.stack}-x", Attributes={"Bogus": "1"})[2] == "Unknown Attribute Bogus.",
        "InvalidAttributeName says 'Unknown Attribute Bogus.' (aws-sdk-ruby#1632)",
    )
    for label, bad in (("a dot", "bad.name"), ("81 characters", "q" * 81), (".fifo on a standard queue", f"{env.stack}.fifo")):
        check(
            error(q.create_queue, QueueName=bad)[:2] == ("InvalidParameterValue", 400),
            f"queue name with {label} -> InvalidParameterValue (botocore QueueName doc)",
        )
    check(
        error(q.create_queue)[:3] == ("MissingParameter", 400, "The request must contain the parameter QueueName."),
        "CreateQueue without QueueName -> MissingParameter (SQS Common Errors)",
    )
    check(
        error(q.get_queue_attributes, QueueUrl=url, AttributeNames=["Nope"])[:2] == ("InvalidAttributeName", 400),
        "GetQueueAttributes of an unknown name -> InvalidAttributeName (moto's)",
    )

    q.set_queue_attributes(QueueUrl=url, Attributes={"MessageRetentionPeriod": "600"})
    after = q.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy", "MessageRetentionPeriod"])["Attributes"]
    check(
        after.get("MessageRetentionPeriod") == "600" and json.loads(after.get("Policy", "{}")) == json.loads(policy),
        "SetQueueAttributes changes only what it names (moto dropped the Policy)",
    )
    for label, attrs, code in (
        ("FifoQueue", {"FifoQueue": "true"}, "InvalidAttributeName"),
        ("MessageRetentionPeriod 10", {"MessageRetentionPeriod": "10"}, "InvalidAttributeValue"),
    ):
        check(
            error(q.set_queue_attributes, QueueUrl=url, Attributes=attrs)[:2] == (code, 400),
            f"SetQueueAttributes {label} -> {code} (botocore SetQueueAttributesRequest)",
        )
    q.set_queue_attributes(QueueUrl=url, Attributes={"Policy": ""})
    check(
        "Policy" not in q.get_queue_attributes(QueueUrl=url, AttributeNames=["Policy"]).get("Attributes", {}),
        "SetQueueAttributes Policy '' removes the policy",
    )
    q.set_queue_attributes(QueueUrl=url, Attributes={"Policy": policy})

    for suffix in ("a", "b"):
        q.create_queue(QueueName=f"{env.stack}-pfx-{suffix}")
    q.create_queue(QueueName=f"{env.stack}xpfx-c")
    listed = q.list_queues(QueueNamePrefix=f"{env.stack}-pfx")["QueueUrls"]
    check(sorted(u.rsplit("/", 1)[1] for u in listed) == [f"{env.stack}-pfx-a", f"{env.stack}-pfx-b"], "ListQueues QueueNamePrefix")
    paged = q.list_queues(QueueNamePrefix=f"{env.stack}-pfx", MaxResults=1)
    check(len(paged["QueueUrls"]) == 1 and paged.get("NextToken"), "ListQueues MaxResults pages with NextToken (botocore ListQueues)")

    doomed = q.create_queue(QueueName=f"{env.stack}-gone")["QueueUrl"]
    q.delete_queue(QueueUrl=doomed)
    check(
        error(q.get_queue_url, QueueName=f"{env.stack}-gone")[0] == "AWS.SimpleQueueService.NonExistentQueue",
        "after DeleteQueue: NonExistentQueue",
    )
    check(
        error(q.delete_queue, QueueUrl=doomed)[0] == "AWS.SimpleQueueService.NonExistentQueue",
        "DeleteQueue of a deleted queue -> NonExistentQueue",
    )
    check(
        error(q.create_queue, QueueName=f"{env.stack}-gone")[:2] == ("AWS.SimpleQueueService.QueueDeletedRecently", 400),
        "CreateQueue within 60 s of deleting the name -> QueueDeletedRecently (botocore CreateQueue/DeleteQueue)",
    )
    check(http(env.endpoint, "GET", "/_gpustack/sqs") == {"deleted_recently_seconds": 60.0}, "GET /_gpustack/sqs: 60 s")
    http(env.endpoint, "POST", "/_gpustack/sqs?deleted_recently_seconds=0")
    check(q.create_queue(QueueName=f"{env.stack}-gone")["QueueUrl"].endswith("-gone"), "window 0: the name can be reused")
    check(
        "error" in http(env.endpoint, "POST", "/_gpustack/sqs?deleted_recently_seconds=-1"),
        "a negative window -> 400",
    )
    actions = {r["action"] for r in env.log() if r["service"] == "sqs"}
    check(
        {"CreateQueue", "GetQueueUrl", "GetQueueAttributes", "SetQueueAttributes", "DeleteQueue", "ListQueues", "ListQueueTags"} <= actions,
        "the request log names the SQS operations (X-Amz-Target)",
    )
    return arn


# --- EventBridge rules ------------------------------------------------------------------------


def events(env: Env, queue_arn: str) -> None:
    ev = env.events
    prefix = f"{env.stack}-karpenter"
    arns = {}
    for kind, pattern in KARPENTER_PATTERNS.items():
        arns[kind] = ev.put_rule(
            Name=f"{prefix}-{kind}", EventPattern=json.dumps(pattern), Tags=[{"Key": "gpustack:stack", "Value": env.stack}]
        )["RuleArn"]
        ev.put_targets(Rule=f"{prefix}-{kind}", Targets=[{"Id": "KarpenterInterruptionQueueTarget", "Arn": queue_arn}])
    check(
        arns["rebalance"] == f"arn:aws:events:{REGION}:{ACCOUNT}:rule/{prefix}-rebalance",
        "PutRule answers the rule ARN on the default bus",
    )
    compact = '{"source":["aws.ec2"],"detail-type":["EC2 Spot Instance Interruption Warning"]}'
    ev.put_rule(Name=f"{prefix}-spot-interruption", EventPattern=compact, Tags=[{"Key": "other", "Value": "x"}])
    check(
        ev.describe_rule(Name=f"{prefix}-spot-interruption")["EventPattern"] == compact,
        "DescribeRule returns EventPattern as sent (moto keeps the raw string)",
    )
    check(
        ev.list_tags_for_resource(ResourceARN=arns["spot-interruption"])["Tags"] == [{"Key": "gpustack:stack", "Value": env.stack}],
        "PutRule on an existing rule ignores Tags (botocore PutRule)",
    )
    listed = ev.list_rules(NamePrefix=prefix)["Rules"]
    check(sorted(r["Name"] for r in listed) == sorted(f"{prefix}-{k}" for k in KARPENTER_PATTERNS), "ListRules NamePrefix")
    ev.put_rule(Name=f"{env.stack}.dot", EventPattern=compact)
    ev.put_rule(Name=f"{env.stack}Xdot", EventPattern=compact)
    check(
        [r["Name"] for r in ev.list_rules(NamePrefix=f"{env.stack}.")["Rules"]] == [f"{env.stack}.dot"],
        "NamePrefix is literal: '.' matches only a dot (moto used a regular expression)",
    )
    targets = ev.list_targets_by_rule(Rule=f"{prefix}-rebalance")["Targets"]
    check(targets == [{"Id": "KarpenterInterruptionQueueTarget", "Arn": queue_arn}], "ListTargetsByRule: the SQS target")
    rule = f"{prefix}-scheduled-change"
    many = [{"Id": f"t{i}", "Arn": queue_arn} for i in range(5)]
    check(
        error(ev.put_targets, Rule=rule, Targets=many)[:2] == ("LimitExceededException", 400),
        "a sixth target -> LimitExceededException (botocore PutTargets: up to five targets per rule)",
    )
    check(
        error(ev.put_targets, Rule=rule, Targets=[{"Id": f"t{i}", "Arn": queue_arn} for i in range(11)])[:2]
        == ("ValidationException", 400),
        "11 entries in one PutTargets -> ValidationException (botocore: at most 10 per request)",
    )
    check(
        error(ev.put_targets, Rule=rule, Targets=[{"Id": "bad id", "Arn": queue_arn}])[:2] == ("ValidationException", 400),
        "target Id 'bad id' -> ValidationException (botocore TargetId pattern)",
    )
    check(
        error(ev.put_targets, Rule=f"{prefix}-none", Targets=[{"Id": "a", "Arn": queue_arn}])[:2] == ("ResourceNotFoundException", 400),
        "PutTargets on an unknown rule -> ResourceNotFoundException (moto's)",
    )
    check(
        error(ev.delete_rule, Name=rule) == ("ValidationException", 400, "Rule can't be deleted since it has targets."),
        "DeleteRule with targets -> ValidationException (botocore DeleteRule: remove all targets first; moto's)",
    )
    removed = ev.remove_targets(Rule=rule, Ids=["KarpenterInterruptionQueueTarget"])
    check(removed["FailedEntryCount"] == 0 and ev.list_targets_by_rule(Rule=rule)["Targets"] == [], "RemoveTargets")
    ev.delete_rule(Name=rule)
    check(error(ev.describe_rule, Name=rule)[0] == "ResourceNotFoundException", "DeleteRule removes the rule")
    check(error(ev.delete_rule, Name=rule) == (None, None, ""), "DeleteRule again succeeds (botocore DeleteRule)")
    check(
        error(ev.list_targets_by_rule, Rule=rule)[0] == "ResourceNotFoundException",
        "ListTargetsByRule of an unknown rule -> ResourceNotFoundException",
    )
    for label, kwargs, code in (
        ("Name 'a b'", {"Name": "a b", "EventPattern": compact}, "ValidationException"),
        ("a 65-character Name", {"Name": "r" * 65, "EventPattern": compact}, "ValidationException"),
        ("no Name", {"EventPattern": compact}, "ValidationException"),
        ("State ON", {"Name": "s", "EventPattern": compact, "State": "ON"}, "ValidationException"),
        ("a pattern that is not JSON", {"Name": "p", "EventPattern": "{"}, "InvalidEventPatternException"),
        ("a pattern that is a list", {"Name": "p", "EventPattern": "[1]"}, "InvalidEventPatternException"),
        ("a string leaf", {"Name": "p", "EventPattern": '{"source":"aws.ec2"}'}, "InvalidEventPatternException"),
        ("an empty array", {"Name": "p", "EventPattern": '{"source":[]}'}, "InvalidEventPatternException"),
        ("an unknown operator", {"Name": "p", "EventPattern": '{"source":[{"like":"aws"}]}'}, "InvalidEventPatternException"),
        ("neither pattern nor schedule", {"Name": "p"}, "ValidationException"),
    ):
        check(error(ev.put_rule, **kwargs)[:2] == (code, 400), f"PutRule with {label} -> {code} (botocore; EventBridge UG event patterns)")
    check(
        ev.put_rule(Name=f"{env.stack}-ops", EventPattern='{"source":[{"prefix":"aws."}],"detail":{"state":[{"anything-but":"running"}]}}')[
            "RuleArn"
        ].endswith("-ops"),
        "comparison operators prefix/anything-but are accepted (EventBridge UG)",
    )
    ev.tag_resource(ResourceARN=arns["rebalance"], Tags=[{"Key": "team", "Value": "ml"}])
    tags = {t["Key"]: t["Value"] for t in ev.list_tags_for_resource(ResourceARN=arns["rebalance"])["Tags"]}
    ev.untag_resource(ResourceARN=arns["rebalance"], TagKeys=["team"])
    check(
        tags == {"gpustack:stack": env.stack, "team": "ml"}
        and ev.list_tags_for_resource(ResourceARN=arns["rebalance"])["Tags"] == [{"Key": "gpustack:stack", "Value": env.stack}],
        "TagResource/UntagResource/ListTagsForResource on a rule",
    )
    actions = {r["action"] for r in env.log() if r["service"] == "events"}
    check(
        {"PutRule", "PutTargets", "ListRules", "ListTargetsByRule", "RemoveTargets", "DeleteRule", "TagResource", "ListTagsForResource"}
        <= actions,
        "the request log names the EventBridge operations (X-Amz-Target)",
    )


# --- IAM quotas the controller policy meets -----------------------------------------------------


def iam_quotas(env: Env) -> None:
    iam = env.iam

    def policy(chars: int) -> str:
        """A valid policy document of ``chars`` non-blank characters, padded in a Sid."""
        base = {"Version": "2012-10-17", "Statement": [{"Sid": "", "Effect": "Allow", "Action": "ec2:DescribeImages", "Resource": "*"}]}
        pad = chars - len(json.dumps(base, separators=(",", ":")))
        base["Statement"][0]["Sid"] = "A" * pad
        return json.dumps(base, indent=2)  # white space does not count

    check(
        iam.create_policy(PolicyName=f"{env.stack}-6144", PolicyDocument=policy(6144))["Policy"]["PolicyName"].endswith("6144"),
        "a managed policy of 6,144 characters (white space not counted) is accepted (IAM UG quotas)",
    )
    code, status, message = error(iam.create_policy, PolicyName=f"{env.stack}-6145", PolicyDocument=policy(6145))
    check(
        (code, status, message) == ("LimitExceeded", 409, "Cannot exceed quota for PolicySize: 6144"),
        "6,145 characters -> LimitExceeded 409 'PolicySize: 6144' (Karpenter v1.6's single policy with a long cluster name)",
    )
    arn = f"arn:aws:iam::{ACCOUNT}:policy/{env.stack}-6144"
    check(
        error(iam.create_policy_version, PolicyArn=arn, PolicyDocument=policy(7000))[:2] == ("LimitExceeded", 409),
        "CreatePolicyVersion past 6,144 -> LimitExceeded (analytical-platform#6873)",
    )
    role = env.role("quota", POD_TRUST)
    name = role.rsplit("/", 1)[1]
    iam.put_role_policy(RoleName=name, PolicyName="a", PolicyDocument=policy(6000))
    iam.put_role_policy(RoleName=name, PolicyName="a", PolicyDocument=policy(6100))
    check(
        error(iam.put_role_policy, RoleName=name, PolicyName="b", PolicyDocument=policy(4200))[:2] == ("LimitExceeded", 409),
        "inline policies of a role past 10,240 in total -> LimitExceeded (IAM UG quotas)",
    )
    iam.put_role_policy(RoleName=name, PolicyName="b", PolicyDocument=policy(4100))
    check(True, "a replaced inline policy counts once (6,100 + 4,100 <= 10,240)")
    big_trust = json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {"Sid": "S" * 2000, "Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"}, "Action": ["sts:AssumeRole", "sts:TagSession"]}
            ],
        }
    )
    check(
        error(iam.create_role, RoleName=f"{env.stack}-bigtrust", AssumeRolePolicyDocument=big_trust)
        == ("LimitExceeded", 409, "Cannot exceed quota for ACLSizePerRole: 2048"),
        "a trust policy past 2,048 -> LimitExceeded 'ACLSizePerRole: 2048' (aws-load-balancer-controller#2718)",
    )
    check(
        error(iam.update_assume_role_policy, RoleName=name, PolicyDocument=big_trust)[:2] == ("LimitExceeded", 409),
        "UpdateAssumeRolePolicy past 2,048 -> LimitExceeded",
    )
    for i in range(10):
        made = iam.create_policy(PolicyName=f"{env.stack}-p{i}", PolicyDocument=policy(200))["Policy"]["Arn"]
        iam.attach_role_policy(RoleName=name, PolicyArn=made)
    extra = iam.create_policy(PolicyName=f"{env.stack}-p10", PolicyDocument=policy(200))["Policy"]["Arn"]
    check(
        error(iam.attach_role_policy, RoleName=name, PolicyArn=extra)[:2] == ("LimitExceeded", 409),
        "an 11th managed policy on a role -> LimitExceeded (IAM UG: 10 per role by default)",
    )
    iam.attach_role_policy(RoleName=name, PolicyArn=f"arn:aws:iam::{ACCOUNT}:policy/{env.stack}-p0")
    check(True, "attaching a policy the role already has is not an 11th")


def reset(env: Env, clusters: dict[str, str]) -> None:
    req = urllib.request.Request(env.endpoint + "/moto-api/reset", method="POST", data=b"")
    urllib.request.urlopen(req, timeout=30).read()
    check(env.eks.list_clusters()["clusters"] == [], "POST /moto-api/reset clears clusters (and their entries)")
    check(http(env.endpoint, "GET", "/_gpustack/sqs") == {"deleted_recently_seconds": 60.0}, "reset restores the SQS window")
    check(env.sqs.list_queues().get("QueueUrls", []) == [] and env.events.list_rules()["Rules"] == [], "reset clears queues and rules")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True, help="e.g. http://127.0.0.1:PORT")
    args = parser.parse_args()
    try:
        env = Env(args.endpoint)
        clusters = access_entries(env)
        pod_identity(env, clusters)
        queue_arn = sqs(env)
        events(env, queue_arn)
        iam_quotas(env)
        reset(env, clusters)
    except Exception as e:  # noqa: BLE001
        print(f"FAIL {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print("selftest_k8s: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
