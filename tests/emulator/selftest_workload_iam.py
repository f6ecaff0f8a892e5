"""Selftest of workload IAM in the emulator (iam_oidc.py, eks_addons.py's Pod Identity and
PRESERVE rules, eks_pod_identity.py's ownerArn), through boto3 against a running emulator
(starts nothing itself):

    tests/emulator/.venv/bin/python tests/emulator/selftest_workload_iam.py --endpoint http://127.0.0.1:PORT

Every check names its source (the module docstrings quote them). boto3's client-side validation
is off, so the emulator's is what answers. Ends with a moto reset.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.request
import uuid
from typing import Any, Callable

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

REGION = "us-west-2"
ACCOUNT = "123456789012"
CONFIG = Config(parameter_validation=False, retries={"max_attempts": 1})
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
EC2_TRUST = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}


def check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)
    print(f"ok   {what}")


def error(call: Callable[..., Any], **kwargs: Any) -> tuple[str | None, str]:
    try:
        call(**kwargs)
    except ClientError as e:
        return e.response["Error"]["Code"], e.response["Error"].get("Message", "")
    return None, ""


def wait(what: str, probe: Callable[[], bool], seconds: float = 20.0) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if probe():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def oidc(iam: Any) -> None:
    url = f"https://oidc.eks.{REGION}.amazonaws.com/id/{uuid.uuid4().hex.upper()}"
    for bad in ("http://oidc.example.com", "https://oidc.example.com:8443/id/x", "https://oidc.example.com/?a=b"):
        code, _ = error(iam.create_open_id_connect_provider, Url=bad, ClientIDList=["sts.amazonaws.com"])
        check(code == "ValidationError", f"CreateOpenIDConnectProvider {bad} -> ValidationError (URL must be https://, no port or query)")
    arn = iam.create_open_id_connect_provider(Url=url, ClientIDList=["sts.amazonaws.com"])["OpenIDConnectProviderArn"]
    check(arn.endswith(f":oidc-provider/{url[len('https://'):]}"), "the ARN names the issuer's host and path")
    got = iam.get_open_id_connect_provider(OpenIDConnectProviderArn=arn)
    check(len(got["ThumbprintList"]) == 1 and len(got["ThumbprintList"][0]) == 40, "no ThumbprintList: IAM records one it fetched")
    code, _ = error(iam.create_open_id_connect_provider, Url=url, ClientIDList=["sts.amazonaws.com"])
    check(code == "EntityAlreadyExists", "the same URL twice -> EntityAlreadyExists")
    iam.add_client_id_to_open_id_connect_provider(OpenIDConnectProviderArn=arn, ClientID="other")
    iam.add_client_id_to_open_id_connect_provider(OpenIDConnectProviderArn=arn, ClientID="other")
    got = iam.get_open_id_connect_provider(OpenIDConnectProviderArn=arn)["ClientIDList"]
    check(sorted(got) == ["other", "sts.amazonaws.com"], "AddClientIDToOpenIDConnectProvider adds once")
    iam.remove_client_id_from_open_id_connect_provider(OpenIDConnectProviderArn=arn, ClientID="other")
    iam.remove_client_id_from_open_id_connect_provider(OpenIDConnectProviderArn=arn, ClientID="other")
    got = iam.get_open_id_connect_provider(OpenIDConnectProviderArn=arn)["ClientIDList"]
    check(got == ["sts.amazonaws.com"], "RemoveClientIDFromOpenIDConnectProvider is idempotent")
    code, _ = error(iam.create_open_id_connect_provider, Url=url + "x", ClientIDList=[""])
    check(code == "ValidationError", "an empty client id -> ValidationError (clientIDType min 1)")
    iam.delete_open_id_connect_provider(OpenIDConnectProviderArn=arn)


def addons(eks: Any, ec2: Any, iam: Any) -> None:
    vpc = ec2.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.30.{i}.0/24", AvailabilityZone=f"{REGION}{z}")["Subnet"]["SubnetId"]
        for i, z in ((1, "a"), (2, "b"))
    ]
    suffix = uuid.uuid4().hex[:8]
    pod_role = iam.create_role(RoleName=f"pod-{suffix}", AssumeRolePolicyDocument=json.dumps(POD_TRUST))["Role"]["Arn"]
    ec2_role = iam.create_role(RoleName=f"ec2-{suffix}", AssumeRolePolicyDocument=json.dumps(EC2_TRUST))["Role"]["Arn"]
    name = f"wl-{suffix}"
    eks.create_cluster(name=name, version="1.31", roleArn=ec2_role, resourcesVpcConfig={"subnetIds": subnets})
    wait("cluster", lambda: eks.describe_cluster(name=name)["cluster"]["status"] == "ACTIVE")
    code, message = error(eks.create_addon, clusterName=name, addonName="aws-ebs-csi-driver", resolveConflicts="PRESERVE")
    check(
        code == "InvalidParameterException" and "PRESERVE is not supported for operation CreateAddon" in message,
        "CreateAddon resolveConflicts=PRESERVE -> InvalidParameterException (terraform-provider-aws#27481)",
    )
    code, message = error(
        eks.create_addon,
        clusterName=name,
        addonName="aws-ebs-csi-driver",
        podIdentityAssociations=[{"serviceAccount": "ebs-csi-controller-sa", "roleArn": ec2_role}],
    )
    check(code == "InvalidParameterException" and "Trust policy" in message, "an add-on role not trusting pods.eks -> refused")
    addon = eks.create_addon(
        clusterName=name,
        addonName="aws-ebs-csi-driver",
        podIdentityAssociations=[{"serviceAccount": "ebs-csi-controller-sa", "roleArn": pod_role}],
    )["addon"]
    check(len(addon["podIdentityAssociations"]) == 1, "CreateAddon lists the association it made")
    association_id = addon["podIdentityAssociations"][0].rsplit("/", 1)[1]
    a = eks.describe_pod_identity_association(clusterName=name, associationId=association_id)["association"]
    check(
        a["ownerArn"] == addon["addonArn"] and a["serviceAccount"] == "ebs-csi-controller-sa" and a["namespace"] == "kube-system",
        "the association is owned by the add-on (ownerArn), in kube-system",
    )
    code, _ = error(
        eks.create_pod_identity_association,
        clusterName=name,
        namespace="kube-system",
        serviceAccount="ebs-csi-controller-sa",
        roleArn=pod_role,
    )
    check(code == "ResourceInUseException", "a second association for the add-on's service account -> ResourceInUse")
    wait("add-on", lambda: eks.describe_addon(clusterName=name, addonName="aws-ebs-csi-driver")["addon"]["status"] == "ACTIVE")
    eks.update_addon(clusterName=name, addonName="aws-ebs-csi-driver", resolveConflicts="PRESERVE")
    check(True, "UpdateAddon takes resolveConflicts=PRESERVE")
    wait("update", lambda: eks.describe_addon(clusterName=name, addonName="aws-ebs-csi-driver")["addon"]["status"] == "ACTIVE")
    kept = eks.describe_addon(clusterName=name, addonName="aws-ebs-csi-driver")["addon"]["podIdentityAssociations"]
    check(kept == addon["podIdentityAssociations"], "UpdateAddon without podIdentityAssociations keeps them")
    eks.update_addon(clusterName=name, addonName="aws-ebs-csi-driver", podIdentityAssociations=[])
    wait("update", lambda: eks.describe_addon(clusterName=name, addonName="aws-ebs-csi-driver")["addon"]["status"] == "ACTIVE")
    gone = eks.describe_addon(clusterName=name, addonName="aws-ebs-csi-driver")["addon"]["podIdentityAssociations"]
    listed = eks.list_pod_identity_associations(clusterName=name)["associations"]
    check(gone == [] and listed == [], "UpdateAddon with an empty list deletes the add-on's associations")
    eks.update_addon(
        clusterName=name,
        addonName="aws-ebs-csi-driver",
        podIdentityAssociations=[{"serviceAccount": "ebs-csi-controller-sa", "roleArn": pod_role}],
    )
    wait("update", lambda: eks.describe_addon(clusterName=name, addonName="aws-ebs-csi-driver")["addon"]["status"] == "ACTIVE")
    code, message = error(
        eks.update_addon,
        clusterName=name,
        addonName="aws-ebs-csi-driver",
        podIdentityAssociations=[{"serviceAccount": "ebs-csi-node-sa", "roleArn": pod_role}],
    )
    check(
        code == "InvalidParameterException"
        and message.startswith("Service account ebs-csi-node-sa in pod identity configuration is not supported for addon aws-ebs-csi-driver"),
        "UpdateAddon: a service account the add-on's Pod Identity configuration lacks -> refused (terraform-aws-eks#3520)",
    )
    code, message = error(
        eks.create_addon,
        clusterName=name,
        addonName="coredns",
        podIdentityAssociations=[{"serviceAccount": "coredns", "roleArn": pod_role}],
    )
    check(
        code == "InvalidParameterException" and "Pod Identity feature is not supported for addon version: v1.11.4-eksbuild.14" in message,
        "CreateAddon: Pod Identity for an add-on version without it -> refused (containers-roadmap#2712)",
    )
    propagation(eks, iam, name, suffix)
    eks.delete_addon(clusterName=name, addonName="aws-ebs-csi-driver", preserve=True)
    check(len(eks.list_pod_identity_associations(clusterName=name)["associations"]) == 1, "DeleteAddon preserve=true keeps the association")
    eks.create_addon(clusterName=name, addonName="aws-efs-csi-driver")
    wait("efs", lambda: eks.describe_addon(clusterName=name, addonName="aws-efs-csi-driver")["addon"]["status"] == "ACTIVE")
    check(True, "aws-efs-csi-driver is in the catalog")


def propagation(eks: Any, iam: Any, cluster: str, suffix: str) -> None:
    """iam_propagation.py's ``roles`` setting: new roles and providers are refused once."""
    endpoint = eks.meta.endpoint_url
    req = urllib.request.Request(f"{endpoint}/_gpustack/iam-propagation?roles=60", method="POST")
    check(json.load(urllib.request.urlopen(req))["roles"] == 60.0, "iam-propagation?roles=60")
    role = iam.create_role(RoleName=f"young-{suffix}", AssumeRolePolicyDocument=json.dumps(POD_TRUST))["Role"]["Arn"]
    create = dict(clusterName=cluster, namespace="jobs", serviceAccount="trainer", roleArn=role)
    code, message = error(eks.create_pod_identity_association, **create)
    check(
        (code, message) == ("InvalidParameterException", f"Role provided in the request does not exist: {role}"),
        "CreatePodIdentityAssociation with a role made moments ago -> refused once (terraform-provider-aws#34711)",
    )
    association = eks.create_pod_identity_association(**create)["association"]
    check(association["roleArn"] == role, "... and the retry goes through")
    eks.delete_pod_identity_association(clusterName=cluster, associationId=association["associationId"])
    other = iam.create_role(RoleName=f"young2-{suffix}", AssumeRolePolicyDocument=json.dumps(EC2_TRUST))["Role"]["Arn"]
    code, message = error(eks.create_addon, clusterName=cluster, addonName="aws-efs-csi-driver", serviceAccountRoleArn=other)
    check(code == "InvalidParameterException" and "Role provided in the request does not exist" in message, "CreateAddon with a new IRSA role -> refused once")
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": other}, "Action": "sts:AssumeRole"}],
    }
    code, message = error(iam.create_role, RoleName=f"trusting-{suffix}", AssumeRolePolicyDocument=json.dumps(trust))
    check(
        (code, message) == ("MalformedPolicyDocument", f'Invalid principal in policy: "AWS":"{other}"'),
        "CreateRole trusting a role made moments ago -> MalformedPolicyDocument once (terraform-provider-aws retryCreateRole)",
    )
    iam.create_role(RoleName=f"trusting-{suffix}", AssumeRolePolicyDocument=json.dumps(trust))
    check(True, "... and the retry goes through")
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/_gpustack/iam-propagation?roles=0", method="POST"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    args = parser.parse_args()
    session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)
    client = lambda s: session.client(s, endpoint_url=args.endpoint, config=CONFIG)  # noqa: E731
    try:
        oidc(client("iam"))
        addons(client("eks"), client("ec2"), client("iam"))
    except Exception as e:  # noqa: BLE001
        print(f"FAIL {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        urllib.request.urlopen(urllib.request.Request(f"{args.endpoint}/moto-api/reset", method="POST"))
    print("selftest_workload_iam: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
