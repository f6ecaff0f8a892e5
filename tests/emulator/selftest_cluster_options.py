"""End-to-end check of the EKS cluster options and the control-plane log group of a running
emulator (``ext/eks_cluster_options.py``, ``ext/logs_strict.py``), through boto3 (starts nothing).

    tests/emulator/.venv/bin/python tests/emulator/selftest_cluster_options.py --endpoint http://127.0.0.1:PORT

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
ROLE = f"arn:aws:iam::{ACCOUNT}:role/selftest-options"
KEY = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"


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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    args = parser.parse_args()
    s = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)
    eks = s.client("eks", endpoint_url=args.endpoint)
    ec2 = s.client("ec2", endpoint_url=args.endpoint)
    logs = s.client("logs", endpoint_url=args.endpoint)
    tag = uuid.uuid4().hex[:8]
    try:
        vpc = ec2.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"]
        subnets = [
            ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.30.{i}.0/24", AvailabilityZone=f"{REGION}{z}")["Subnet"]["SubnetId"]
            for i, z in ((1, "a"), (2, "b"))
        ]
        base = {"version": "1.33", "roleArn": ROLE, "resourcesVpcConfig": {"subnetIds": subnets}}

        def refused(what: str, want: str = "InvalidParameterException", **extra: Any) -> None:
            got = code(eks.create_cluster, name=f"bad-{tag}", **base, **extra)
            check(got == want, f"CreateCluster {what} -> {want} (got {got})")

        refused("with a service CIDR inside the VPC", kubernetesNetworkConfig={"serviceIpv4Cidr": "10.30.0.0/20"})
        refused("with a /25 service CIDR", kubernetesNetworkConfig={"serviceIpv4Cidr": "172.20.0.0/25"})
        refused("with a public service CIDR", kubernetesNetworkConfig={"serviceIpv4Cidr": "100.64.0.0/16"})
        refused(
            "ipv6 with a service CIDR",
            kubernetesNetworkConfig={"ipFamily": "ipv6", "serviceIpv4Cidr": "172.20.0.0/16"},
        )
        refused("ipv6 on subnets without IPv6", kubernetesNetworkConfig={"ipFamily": "ipv6"})
        refused("with an unknown ipFamily (enum)", kubernetesNetworkConfig={"ipFamily": "ipv5"})
        refused("with a key in another region", encryptionConfig=[{"resources": ["secrets"], "provider": {"keyArn": KEY.replace(REGION, "us-east-1")}}])
        refused("with a key that is no ARN", encryptionConfig=[{"resources": ["secrets"], "provider": {"keyArn": "my-key"}}])
        refused("with resources other than secrets", encryptionConfig=[{"resources": ["configmaps"], "provider": {"keyArn": KEY}}])
        refused(
            "with two encryption configs (max 1)",
            encryptionConfig=[{"provider": {"keyArn": KEY}}, {"provider": {"keyArn": KEY}}],
        )
        check(eks.list_clusters()["clusters"] == [] or f"bad-{tag}" not in eks.list_clusters()["clusters"], "refused creates leave nothing")

        name = f"opts-{tag}"
        eks.create_cluster(
            name=name,
            **base,
            kubernetesNetworkConfig={"serviceIpv4Cidr": "172.20.0.0/16"},
            encryptionConfig=[{"resources": ["secrets"], "provider": {"keyArn": KEY}}],
            zonalShiftConfig={"enabled": True},
            deletionProtection=True,
            upgradePolicy={"supportType": "STANDARD"},
            accessConfig={"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": False},
            logging={"clusterLogging": [{"types": ["api", "audit"], "enabled": True}]},
        )
        c = wait_active(eks, name)
        check(c["kubernetesNetworkConfig"] == {"ipFamily": "ipv4", "serviceIpv4Cidr": "172.20.0.0/16"}, "network config described")
        check(c["encryptionConfig"][0]["provider"]["keyArn"] == KEY, "encryption described")
        check(c["zonalShiftConfig"] == {"enabled": True}, "zonal shift described")
        check(c["deletionProtection"] is True, "deletion protection described")
        check(c["upgradePolicy"] == {"supportType": "STANDARD"}, "upgrade policy described")
        check(c["accessConfig"]["bootstrapClusterCreatorAdminPermissions"] is False, "no creator admin")
        groups = logs.describe_log_groups(logGroupNamePrefix=f"/aws/eks/{name}/cluster")["logGroups"]
        check(len(groups) == 1 and "retentionInDays" not in groups[0], "logging creates the group, never expiring")

        update_code = code(eks.update_cluster_config, name=name, zonalShiftConfig={"enabled": False}, deletionProtection=False)
        check(update_code == "InvalidParameterException", "two kinds of update in one call -> InvalidParameterException")
        check(
            code(eks.update_cluster_config, name=name, zonalShiftConfig={"enabled": True}) == "InvalidParameterException",
            "a zonal shift update that changes nothing -> InvalidParameterException",
        )
        u = eks.update_cluster_config(name=name, zonalShiftConfig={"enabled": False})["update"]
        check(u["type"] == "ZonalShiftConfigUpdate" and u["params"][0]["type"] == "ZonalShiftConfig", "zonal shift update")
        wait_active(eks, name)
        check(
            code(eks.associate_encryption_config, clusterName=name, encryptionConfig=[{"resources": ["secrets"], "provider": {"keyArn": KEY}}])
            == "InvalidRequestException",
            "AssociateEncryptionConfig on an encrypted cluster -> InvalidRequestException",
        )
        check(code(eks.delete_cluster, name=name) == "InvalidRequestException", "DeleteCluster with deletion protection -> InvalidRequestException")
        u = eks.update_cluster_config(name=name, deletionProtection=False)["update"]
        check(u["type"] == "DeletionProtectionUpdate", "deletion protection update")
        wait_active(eks, name)
        u = eks.update_cluster_config(name=name, upgradePolicy={"supportType": "EXTENDED"})["update"]
        check(u["type"] == "UpgradePolicyUpdate", "upgrade policy update")
        wait_active(eks, name)
        check(code(eks.delete_cluster, name=name) is None, "DeleteCluster once protection is off")

        plain = f"plain-{tag}"
        eks.create_cluster(name=plain, **base)
        c = wait_active(eks, plain)
        check(c["kubernetesNetworkConfig"]["serviceIpv4Cidr"] == "172.20.0.0/16", "a 10.x VPC gets 172.20.0.0/16 for services")
        check(c["deletionProtection"] is False and c["zonalShiftConfig"] == {"enabled": False}, "defaults described")
        check(c["upgradePolicy"] == {"supportType": "EXTENDED"}, "EXTENDED is the API's default")
        u = eks.associate_encryption_config(clusterName=plain, encryptionConfig=[{"resources": ["secrets"], "provider": {"keyArn": KEY}}])["update"]
        check(u["type"] == "AssociateEncryptionConfig", "AssociateEncryptionConfig on an unencrypted cluster")
        check(eks.describe_update(name=plain, updateId=u["id"])["update"]["id"] == u["id"], "its update is described")

        group = f"/aws/eks/{plain}/cluster"
        check(code(logs.create_log_group, logGroupName="bad name") == "InvalidParameterException", "a log group name with a space -> InvalidParameterException")
        logs.create_log_group(logGroupName=group, tags={"gpustack:stack": tag})
        check(code(logs.create_log_group, logGroupName=group) == "ResourceAlreadyExistsException", "a second CreateLogGroup -> ResourceAlreadyExistsException")
        check(code(logs.put_retention_policy, logGroupName=group, retentionInDays=10) == "InvalidParameterException", "retention 10 -> InvalidParameterException")
        logs.put_retention_policy(logGroupName=group, retentionInDays=14)
        got = logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"][0]
        check(got["retentionInDays"] == 14, "retention 14 set")
        logs.delete_retention_policy(logGroupName=group)
        check("retentionInDays" not in logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"][0], "retention cleared")
        logs.delete_log_group(logGroupName=group)
        check(code(logs.delete_log_group, logGroupName=group) == "ResourceNotFoundException", "a deleted group is gone")
        logs.create_log_group(logGroupName=group)
        arn = logs.describe_log_groups(logGroupNamePrefix=group)["logGroups"][0]["logGroupArn"]
        check(logs.list_tags_for_resource(resourceArn=arn).get("tags", {}) == {}, "a group made again has none of the deleted group's tags")
        logs.delete_log_group(logGroupName=group)
    except Exception as e:  # noqa: BLE001
        print(f"FAIL {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print("selftest_cluster_options: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
