"""End-to-end check of EKS Auto Mode in a running emulator (``ext/eks_compute_auto_mode.py``),
through boto3 (starts nothing).

    tests/emulator/.venv/bin/python tests/emulator/selftest_auto_mode.py --endpoint http://127.0.0.1:PORT

Exits non-zero on the first failure. Leaves its objects behind (names carry a random suffix).
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from typing import Any, Callable

import boto3
from botocore.exceptions import ClientError

REGION = "us-west-2"
ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/selftest-auto-cluster"
NODES = f"arn:aws:iam::{ACCOUNT}:role/selftest-auto-nodes"
OTHER = f"arn:aws:iam::{ACCOUNT}:role/selftest-auto-other"


def check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)
    print(f"ok   {what}")


def code(call: Callable[..., Any], **kwargs: Any) -> str | None:
    try:
        call(**kwargs)
    except ClientError as e:
        return e.response["Error"]["Code"]
    return None


def wait_active(eks: Any, name: str) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        c = eks.describe_cluster(name=name)["cluster"]
        if c["status"] == "ACTIVE":
            return c
        time.sleep(0.1)
    raise AssertionError(f"cluster {name} never ACTIVE")


def auto(on: bool, pools: list[str] | None = None, role: str | None = None) -> dict[str, Any]:
    compute: dict[str, Any] = {"enabled": on}
    if pools is not None:
        compute["nodePools"] = pools
    if role is not None:
        compute["nodeRoleArn"] = role
    return {
        "computeConfig": compute,
        "storageConfig": {"blockStorage": {"enabled": on}},
        "kubernetesNetworkConfig": {"elasticLoadBalancing": {"enabled": on}},
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    args = parser.parse_args()
    s = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)
    eks = s.client("eks", endpoint_url=args.endpoint)
    ec2 = s.client("ec2", endpoint_url=args.endpoint)
    iam = s.client("iam", endpoint_url=args.endpoint)
    tag = uuid.uuid4().hex[:8]
    trust = '{"Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}'
    for arn in (NODES, OTHER):
        try:
            iam.create_role(RoleName=arn.rsplit("/", 1)[1], AssumeRolePolicyDocument=trust)
        except ClientError:
            pass
    vpc = ec2.create_vpc(CidrBlock="10.31.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.31.{i}.0/24", AvailabilityZone=f"{REGION}{z}")["Subnet"]["SubnetId"]
        for i, z in ((1, "a"), (2, "b"))
    ]
    base = {
        "version": "1.33",
        "roleArn": ROLE,
        "resourcesVpcConfig": {"subnetIds": subnets},
        "accessConfig": {"authenticationMode": "API"},
    }

    def refused(what: str, body: dict[str, Any], **over: Any) -> None:
        kwargs = {**base, **over, **body}
        got = code(eks.create_cluster, name=f"bad-{tag}", **kwargs)
        check(got == "InvalidParameterException", f"CreateCluster {what} -> InvalidParameterException (got {got})")

    on = {**auto(True, ["general-purpose", "system"], NODES), "bootstrapSelfManagedAddons": False}
    refused("with compute alone", {"computeConfig": {"enabled": True}, "bootstrapSelfManagedAddons": False})
    refused(
        "with load balancing off",
        {**on, "kubernetesNetworkConfig": {"elasticLoadBalancing": {"enabled": False}}},
    )
    refused("with node pools but no node role", {**auto(True, ["system"]), "bootstrapSelfManagedAddons": False})
    refused("with an unknown built-in pool", {**auto(True, ["gpu"], NODES), "bootstrapSelfManagedAddons": False})
    refused("with compute off and node pools", auto(False, ["system"], NODES))
    refused("without bootstrapSelfManagedAddons false", auto(True, ["system"], NODES))
    refused("on CONFIG_MAP", on, accessConfig={"authenticationMode": "CONFIG_MAP"})
    refused("on Kubernetes 1.28", on, version="1.28")
    refused("with a user as node role", {**auto(True, ["system"], f"arn:aws:iam::{ACCOUNT}:user/x"), "bootstrapSelfManagedAddons": False})

    name = f"auto-{tag}"
    eks.create_cluster(name=name, **base, **on)
    c = wait_active(eks, name)
    check(c["computeConfig"] == {"enabled": True, "nodePools": ["general-purpose", "system"], "nodeRoleArn": NODES}, "DescribeCluster returns computeConfig")
    check(c["storageConfig"]["blockStorage"]["enabled"] is True, "DescribeCluster returns storageConfig.blockStorage")
    check(c["kubernetesNetworkConfig"]["elasticLoadBalancing"]["enabled"] is True, "DescribeCluster returns elasticLoadBalancing")
    entry = eks.describe_access_entry(clusterName=name, principalArn=NODES)["accessEntry"]
    check(entry["type"] == "EC2", "EKS entered the built-in pools' node role as EC2")
    got = code(eks.create_access_entry, clusterName=name, principalArn=NODES, type="EC2")
    check(got == "ResourceInUseException", f"a second entry for it -> ResourceInUseException (got {got})")
    pols = eks.list_associated_access_policies(clusterName=name, principalArn=NODES)["associatedAccessPolicies"]
    check([p["policyArn"].rsplit("/", 1)[1] for p in pols] == ["AmazonEKSAutoNodePolicy"], "with AmazonEKSAutoNodePolicy")
    eks.create_access_entry(clusterName=name, principalArn=OTHER, type="EC2")
    got = code(
        eks.associate_access_policy,
        clusterName=name,
        principalArn=OTHER,
        policyArn="arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
        accessScope={"type": "cluster"},
    )
    check(got == "InvalidParameterException", f"an EC2 entry refuses other access policies (got {got})")
    eks.associate_access_policy(
        clusterName=name,
        principalArn=OTHER,
        policyArn="arn:aws:eks::aws:cluster-access-policy/AmazonEKSAutoNodePolicy",
        accessScope={"type": "cluster"},
    )
    check(True, "an EC2 entry takes AmazonEKSAutoNodePolicy")

    def update_refused(what: str, **body: Any) -> None:
        got = code(eks.update_cluster_config, name=name, **body)
        check(got == "InvalidParameterException", f"UpdateClusterConfig {what} -> InvalidParameterException (got {got})")

    update_refused("with compute alone", computeConfig={"enabled": True, "nodePools": ["system"], "nodeRoleArn": NODES})
    update_refused("changing the node role", **auto(True, ["system"], OTHER))
    got = code(eks.update_cluster_config, name=name, **auto(True, ["general-purpose", "system"], NODES))
    check(got == "InvalidRequestException", f"UpdateClusterConfig changing nothing -> InvalidRequestException (got {got})")
    update_refused("with logging beside it", **auto(True, ["system"], NODES), logging={"clusterLogging": []})
    u = eks.update_cluster_config(name=name, **auto(True, ["system"], NODES))["update"]
    check(u["type"] == "AutoModeUpdate", f"pools change in place: AutoModeUpdate (got {u['type']})")
    check(sorted(p["type"] for p in u["params"]) == ["ComputeConfig", "KubernetesNetworkConfig", "StorageConfig"], "with the three params")
    c = wait_active(eks, name)
    check(c["computeConfig"]["nodePools"] == ["system"], "DescribeCluster reads the new pools")
    update_refused("turning off with node pools", **auto(False, ["system"], NODES))
    eks.update_cluster_config(name=name, **auto(False))
    c = wait_active(eks, name)
    check(c["computeConfig"]["enabled"] is False and c["storageConfig"]["blockStorage"]["enabled"] is False, "turned off")

    plain = f"plain-{tag}"
    eks.create_cluster(name=plain, **base)
    c = wait_active(eks, plain)
    check("computeConfig" not in c, "a cluster made without Auto Mode returns no computeConfig")
    eks.update_cluster_config(name=plain, **auto(True, [], None))
    c = wait_active(eks, plain)
    check(c["computeConfig"]["enabled"] is True and c["computeConfig"]["nodePools"] == [], "Auto Mode turned on in place without built-in pools")
    got = code(eks.update_cluster_config, name=plain, **auto(True, ["system"], NODES))
    check(got == "InvalidParameterException", f"UpdateClusterConfig adding a node role once compute is on -> InvalidParameterException (got {got})")
    print("selftest_auto_mode: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
