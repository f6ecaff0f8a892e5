"""End-to-end check of the EKS, SSM public parameter, instance type and launch template side of a
running emulator, through boto3 (starts nothing itself).

    tests/emulator/.venv/bin/python tests/emulator/selftest_eks.py --endpoint http://127.0.0.1:PORT

Exits non-zero on the first failure. Sets the EKS timings through ``POST /_gpustack/eks`` and,
last, checks ``POST /moto-api/reset``, which clears the whole emulator: run it against an
emulator of its own.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
import urllib.request
import uuid
from typing import Any, Callable

import boto3
from botocore.exceptions import ClientError

REGION = "us-west-2"
ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/selftest-eks"
TIMINGS = {
    "cluster_create_ms": 400,
    "nodegroup_create_ms": 300,
    "addon_create_ms": 200,
    "delete_ms": 200,
    "update_ms": 200,
}
DEFAULT_TIMINGS = {
    "cluster_create_ms": 1000,
    "nodegroup_create_ms": 500,
    "addon_create_ms": 300,
    "delete_ms": 300,
    "update_ms": 300,
}
ADDONS = (
    "vpc-cni",
    "coredns",
    "kube-proxy",
    "eks-pod-identity-agent",
    "aws-ebs-csi-driver",
    "aws-efs-csi-driver",
    "amazon-cloudwatch-observability",
    "amazon-sagemaker-hyperpod-taskgovernance",
)
K8S = ("1.28", "1.29", "1.30", "1.31", "1.32", "1.33", "1.34")


def check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)
    print(f"ok   {what}")


def error(call: Callable[..., Any], **kwargs: Any) -> tuple[str, int] | None:
    """(code, HTTP status) of the error ``call`` fails with, None when it succeeds."""
    try:
        call(**kwargs)
    except ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    return None


def error_message(call: Callable[..., Any], **kwargs: Any) -> str:
    try:
        call(**kwargs)
    except ClientError as e:
        return str(e.response["Error"].get("Message"))
    return ""


def http(endpoint: str, method: str, path: str) -> tuple[int, Any]:
    req = urllib.request.Request(endpoint + path, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def settle(read: Callable[[], str | None], want: str | None, started: float, min_ms: int, what: str) -> None:
    """Polls ``read()`` until it gives ``want`` (None: not found); checks that took ``min_ms``."""
    deadline = time.monotonic() + 10
    while (got := read()) != want:
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: still {got}, wanted {want}")
        time.sleep(0.02)
    elapsed_ms = (time.monotonic() - started) * 1000
    check(elapsed_ms >= min_ms, f"{what} -> {want or 'gone'} after {elapsed_ms:.0f} ms (>= {min_ms})")


def status_or_none(call: Callable[..., Any], key: str, **kwargs: Any) -> str | None:
    try:
        return call(**kwargs)[key]["status"]
    except ClientError as e:
        if e.response["Error"]["Code"] == "ResourceNotFoundException":
            return None
        raise


class Env:
    def __init__(self, endpoint: str) -> None:
        session = boto3.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
        )
        self.endpoint = endpoint
        self.eks = session.client("eks", endpoint_url=endpoint)
        self.ec2 = session.client("ec2", endpoint_url=endpoint)
        self.ssm = session.client("ssm", endpoint_url=endpoint)
        self.stack = f"selftest-eks-{uuid.uuid4().hex[:8]}"
        vpc = self.ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
        self.vpc = vpc
        self.subnets = [
            self.ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.20.{i}.0/24", AvailabilityZone=f"{REGION}{z}")[
                "Subnet"
            ]["SubnetId"]
            for i, z in ((1, "a"), (2, "b"))
        ]
        # Nodes need a way out to join (EKS UG; the emulator's node_join.py): an internet gateway on
        # the main route table and public IPv4 on launch. This selftest used to rely on node
        # groups becoming ACTIVE in a VPC without egress, which AWS does not do.
        igw = self.ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
        self.ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
        main = self.ec2.describe_route_tables(
            Filters=[{"Name": "vpc-id", "Values": [vpc]}, {"Name": "association.main", "Values": ["true"]}]
        )["RouteTables"][0]["RouteTableId"]
        self.ec2.create_route(RouteTableId=main, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)
        for subnet in self.subnets:
            self.ec2.modify_subnet_attribute(SubnetId=subnet, MapPublicIpOnLaunch={"Value": True})

    def cluster_status(self, name: str) -> str | None:
        return status_or_none(self.eks.describe_cluster, "cluster", name=name)

    def nodegroup_status(self, cluster: str, name: str) -> str | None:
        return status_or_none(
            self.eks.describe_nodegroup, "nodegroup", clusterName=cluster, nodegroupName=name
        )

    def addon_status(self, cluster: str, name: str) -> str | None:
        return status_or_none(self.eks.describe_addon, "addon", clusterName=cluster, addonName=name)

    def update_status(self, cluster: str, update_id: str, **scope: str) -> str:
        return self.eks.describe_update(name=cluster, updateId=update_id, **scope)["update"]["status"]

    def create_cluster(self, name: str, version: str = "1.31", **extra: Any) -> dict[str, Any]:
        started = time.monotonic()
        cluster = self.eks.create_cluster(
            name=name, version=version, roleArn=ROLE, resourcesVpcConfig={"subnetIds": self.subnets}, **extra
        )["cluster"]
        check(cluster["status"] == "CREATING", f"CreateCluster {name} answers CREATING")
        settle(
            lambda: self.cluster_status(name),
            "ACTIVE",
            started,
            TIMINGS["cluster_create_ms"],
            f"cluster {name}",
        )
        return cluster


def control(env: Env) -> None:
    status, body = http(env.endpoint, "POST", "/_gpustack/eks")
    check(
        status == 200 and set(body) == set(DEFAULT_TIMINGS),
        f"POST /_gpustack/eks returns the settings ({body})",
    )
    query = "&".join(f"{k}={v}" for k, v in TIMINGS.items())
    status, body = http(env.endpoint, "POST", f"/_gpustack/eks?{query}")
    check(status == 200 and body == TIMINGS, "POST /_gpustack/eks sets every timing")
    status, body = http(env.endpoint, "POST", "/_gpustack/eks?update_ms=150")
    check(body["update_ms"] == 150 and body["delete_ms"] == TIMINGS["delete_ms"], "a subset leaves the rest")
    http(env.endpoint, "POST", f"/_gpustack/eks?update_ms={TIMINGS['update_ms']}")
    check(http(env.endpoint, "POST", "/_gpustack/eks?bogus_ms=1")[0] == 400, "unknown setting -> 400")
    check(http(env.endpoint, "POST", "/_gpustack/eks?delete_ms=-1")[0] == 400, "negative -> 400")
    check(http(env.endpoint, "POST", "/_gpustack/eks?delete_ms=x")[0] == 400, "not a number -> 400")


def clusters(env: Env) -> str:
    eks, ec2 = env.eks, env.ec2
    bad = {"name": f"{env.stack}-bad", "version": "1.31", "roleArn": ROLE}
    check(
        error(
            eks.create_cluster,
            **bad,
            resourcesVpcConfig={"subnetIds": ["subnet-0123456789abcdef0", env.subnets[0]]},
        )
        == ("InvalidParameterException", 400),
        "CreateCluster with an unknown subnet -> InvalidParameterException",
    )
    check(
        error(eks.create_cluster, **bad, resourcesVpcConfig={"subnetIds": env.subnets[:1]})
        == ("InvalidParameterException", 400),
        "CreateCluster with subnets in one zone -> InvalidParameterException",
    )
    check(
        error(eks.create_cluster, **{**bad, "version": "1.27"}, resourcesVpcConfig={"subnetIds": env.subnets})
        == ("InvalidParameterException", 400),
        "CreateCluster with Kubernetes 1.27 -> InvalidParameterException",
    )
    check(eks.list_clusters()["clusters"] == [], "failed creates leave nothing (and no security group)")

    name = f"{env.stack}-c"
    created = env.create_cluster(name, tags={"gpustack:stack": env.stack})
    c = eks.describe_cluster(name=name)["cluster"]
    vpc_cfg = c["resourcesVpcConfig"]
    # The EKS API's default is CONFIG_MAP (botocore CreateAccessConfigRequest: "If you create a
    # cluster by using the EKS API, AWS SDKs, or CloudFormation, the default is CONFIG_MAP"); this
    # selftest used to expect API_AND_CONFIG_MAP, the console's default.
    check(
        c["accessConfig"]
        == {"authenticationMode": "CONFIG_MAP", "bootstrapClusterCreatorAdminPermissions": True},
        "accessConfig defaults: CONFIG_MAP, bootstrapClusterCreatorAdminPermissions",
    )
    check(
        vpc_cfg["subnetIds"] == env.subnets
        and vpc_cfg["vpcId"] == env.vpc
        and vpc_cfg["securityGroupIds"] == []
        and vpc_cfg["endpointPublicAccess"] is True
        and vpc_cfg["endpointPrivateAccess"] is False
        and vpc_cfg["publicAccessCidrs"] == ["0.0.0.0/0"],
        f"resourcesVpcConfig defaults ({vpc_cfg})",
    )
    sg_id = vpc_cfg["clusterSecurityGroupId"]
    groups = ec2.describe_security_groups(GroupIds=[sg_id])["SecurityGroups"]
    sg_tags = {t["Key"]: t["Value"] for t in groups[0].get("Tags", [])}
    check(
        groups[0]["VpcId"] == env.vpc
        and sg_tags.get("aws:eks:cluster-name") == name
        and groups[0]["GroupName"].startswith(f"eks-cluster-sg-{name}-"),
        f"clusterSecurityGroupId {sg_id} is an EC2 group in the VPC tagged aws:eks:cluster-name",
    )
    pem = base64.b64decode(c["certificateAuthority"]["data"]).decode()
    check(
        pem.startswith("-----BEGIN CERTIFICATE-----\n") and pem.endswith("-----END CERTIFICATE-----\n"),
        "certificateAuthority.data is base64 of a PEM block",
    )
    handle = c["endpoint"].split("//")[1].split(".")[0]
    check(c["endpoint"] == f"https://{handle}.gr7.{REGION}.eks.amazonaws.com", f"endpoint {c['endpoint']}")
    check(
        c["identity"]["oidc"]["issuer"] == f"https://oidc.eks.{REGION}.amazonaws.com/id/{handle}",
        "oidc issuer",
    )
    check(
        c["platformVersion"].startswith("eks.") and c["version"] == "1.31" and created["arn"] == c["arn"],
        "platformVersion, version",
    )
    check(
        c["logging"]
        == {
            "clusterLogging": [
                {
                    "types": ["api", "audit", "authenticator", "controllerManager", "scheduler"],
                    "enabled": False,
                }
            ]
        },
        "logging: every type disabled",
    )
    check(
        error(
            eks.create_cluster,
            name=name,
            version="1.31",
            roleArn=ROLE,
            resourcesVpcConfig={"subnetIds": env.subnets},
        )
        == ("ResourceInUseException", 409),
        "duplicate CreateCluster -> ResourceInUseException",
    )

    api = f"{env.stack}-api"
    started = time.monotonic()
    made = eks.create_cluster(
        name=api,
        version="1.30",
        roleArn=ROLE,
        resourcesVpcConfig={
            "subnetIds": env.subnets,
            "endpointPrivateAccess": True,
            "publicAccessCidrs": ["203.0.113.0/24"],
        },
        accessConfig={"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": False},
        logging={"clusterLogging": [{"types": ["api", "audit"], "enabled": True}]},
    )["cluster"]
    check(
        made["accessConfig"]
        == {"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": False},
        "CreateCluster stores accessConfig",
    )
    check(
        made["logging"]["clusterLogging"]
        == [
            {"types": ["api", "audit"], "enabled": True},
            {"types": ["authenticator", "controllerManager", "scheduler"], "enabled": False},
        ],
        "logging: enabled and disabled entries",
    )
    check(
        made["resourcesVpcConfig"]["publicAccessCidrs"] == ["203.0.113.0/24"]
        and made["resourcesVpcConfig"]["endpointPrivateAccess"] is True,
        "endpoint settings stored",
    )
    check(
        error(eks.update_cluster_version, name=api, version="1.31") == ("ResourceInUseException", 409),
        "UpdateClusterVersion while CREATING -> ResourceInUseException",
    )
    eks.get_waiter("cluster_active").wait(name=api, WaiterConfig={"Delay": 0.05, "MaxAttempts": 200})
    check((time.monotonic() - started) * 1000 >= TIMINGS["cluster_create_ms"], "boto3 cluster_active waiter")
    cluster_updates(env, api)
    return name


def cluster_updates(env: Env, name: str) -> None:
    eks = env.eks
    check(
        error_message(eks.update_cluster_version, name=name, version="1.32")
        == "Unsupported Kubernetes minor version update from 1.30 to 1.32",
        "skipping a minor version is refused",
    )
    check(
        error(eks.update_cluster_version, name=name, version="1.29") == ("InvalidParameterException", 400),
        "downgrade refused",
    )
    started = time.monotonic()
    update = eks.update_cluster_version(name=name, version="1.31")["update"]
    check(
        update["type"] == "VersionUpdate"
        and update["status"] == "InProgress"
        and {"type": "Version", "value": "1.31"} in update["params"],
        "UpdateClusterVersion returns an InProgress VersionUpdate",
    )
    check(env.cluster_status(name) == "UPDATING", "cluster UPDATING during the update")
    check(
        error(
            eks.update_cluster_config,
            name=name,
            logging={"clusterLogging": [{"types": ["scheduler"], "enabled": True}]},
        )
        == ("ResourceInUseException", 409),
        "UpdateClusterConfig while UPDATING -> ResourceInUseException",
    )
    settle(
        lambda: env.update_status(name, update["id"]),
        "Successful",
        started,
        TIMINGS["update_ms"],
        "version update",
    )
    check(
        env.cluster_status(name) == "ACTIVE"
        and eks.describe_cluster(name=name)["cluster"]["version"] == "1.31",
        "cluster ACTIVE on 1.31 after the update",
    )

    def config(cluster: str, **kwargs: Any) -> None:
        started = time.monotonic()
        update = eks.update_cluster_config(name=cluster, **kwargs)["update"]
        check(
            update["status"] == "InProgress",
            f"UpdateClusterConfig {list(kwargs)} -> {update['type']} InProgress",
        )
        settle(
            lambda: env.update_status(cluster, update["id"]),
            "Successful",
            started,
            TIMINGS["update_ms"],
            update["type"],
        )

    config(name, resourcesVpcConfig={"endpointPublicAccess": False})
    vpc_cfg = eks.describe_cluster(name=name)["cluster"]["resourcesVpcConfig"]
    check(
        vpc_cfg["endpointPublicAccess"] is False
        and vpc_cfg["endpointPrivateAccess"] is True
        and vpc_cfg["subnetIds"] == env.subnets
        and vpc_cfg["publicAccessCidrs"] == ["203.0.113.0/24"]
        and vpc_cfg["clusterSecurityGroupId"].startswith("sg-"),
        "endpoint update merges into resourcesVpcConfig",
    )
    check(
        error(eks.update_cluster_config, name=name, resourcesVpcConfig={"endpointPublicAccess": False})
        == ("InvalidParameterException", 400),
        "no-op endpoint update -> InvalidParameterException",
    )
    config(name, resourcesVpcConfig={"endpointPublicAccess": True, "publicAccessCidrs": ["198.51.100.0/24"]})
    check(
        eks.describe_cluster(name=name)["cluster"]["resourcesVpcConfig"]["publicAccessCidrs"]
        == ["198.51.100.0/24"],
        "CIDRs updated",
    )
    config(
        name,
        logging={
            "clusterLogging": [
                {"types": ["scheduler"], "enabled": True},
                {"types": ["api"], "enabled": False},
            ]
        },
    )
    check(
        eks.describe_cluster(name=name)["cluster"]["logging"]["clusterLogging"]
        == [
            {"types": ["audit", "scheduler"], "enabled": True},
            {"types": ["api", "authenticator", "controllerManager"], "enabled": False},
        ],
        "logging update merges per type",
    )
    check(
        error(eks.update_cluster_config, name=name, accessConfig={"authenticationMode": "API_AND_CONFIG_MAP"})
        == ("InvalidParameterException", 400),
        "authenticationMode API -> API_AND_CONFIG_MAP refused",
    )
    check(
        error(
            eks.update_cluster_config,
            name=name,
            resourcesVpcConfig={"endpointPrivateAccess": True},
            logging={"clusterLogging": [{"types": ["api"], "enabled": True}]},
        )
        == ("InvalidParameterException", 400),
        "two kinds of update at once refused",
    )

    other = f"{env.stack}-cm"
    env.create_cluster(other, version="1.34", accessConfig={"authenticationMode": "CONFIG_MAP"})
    check(
        error(eks.update_cluster_version, name=other, version="1.35") == ("InvalidParameterException", 400),
        "no upgrade past 1.34",
    )
    check(
        error(
            eks.create_nodegroup,
            clusterName=other,
            nodegroupName="al2",
            nodeRole=ROLE,
            subnets=env.subnets,
            amiType="AL2_x86_64_GPU",
        )
        == ("InvalidParameterException", 400),
        "AL2 node group on 1.34 -> InvalidParameterException",
    )
    config(other, accessConfig={"authenticationMode": "API_AND_CONFIG_MAP"})
    config(other, accessConfig={"authenticationMode": "API"})
    check(
        eks.describe_cluster(name=other)["cluster"]["accessConfig"]["authenticationMode"] == "API",
        "authenticationMode CONFIG_MAP -> API_AND_CONFIG_MAP -> API",
    )
    check(
        error(eks.describe_update, name=name, updateId="0f0f0f0f-0000-0000-0000-000000000000")
        == ("ResourceNotFoundException", 404),
        "DescribeUpdate of an unknown id -> ResourceNotFoundException",
    )
    for n in (name, other):
        eks.delete_cluster(name=n)
        eks.get_waiter("cluster_deleted").wait(name=n, WaiterConfig={"Delay": 0.05, "MaxAttempts": 200})
    check(True, "boto3 cluster_deleted waiter")


def addon_versions(env: Env) -> None:
    eks = env.eks
    every = eks.describe_addon_versions()["addons"]
    check(
        sorted(a["addonName"] for a in every) == sorted(ADDONS),
        "DescribeAddonVersions lists the eight add-ons",
    )
    for addon in ADDONS:
        for k8s in K8S:
            infos = eks.describe_addon_versions(addonName=addon, kubernetesVersion=k8s)["addons"]
            defaults = [
                v["addonVersion"]
                for v in infos[0]["addonVersions"]
                for c in v["compatibilities"]
                if c["clusterVersion"] == k8s and c["defaultVersion"]
            ]
            compat = {c["clusterVersion"] for v in infos[0]["addonVersions"] for c in v["compatibilities"]}
            if len(defaults) != 1 or compat != {k8s}:
                raise AssertionError(f"{addon} on {k8s}: defaults {defaults}, compatibilities {compat}")
    check(True, "every add-on has exactly one default version for each Kubernetes 1.28-1.34")
    default_131 = {
        a: next(
            v["addonVersion"]
            for v in eks.describe_addon_versions(addonName=a, kubernetesVersion="1.31")["addons"][0][
                "addonVersions"
            ]
            if v["compatibilities"][0]["defaultVersion"]
        )
        for a in ADDONS
    }
    check(
        default_131
        == {
            "vpc-cni": "v1.19.5-eksbuild.1",
            "coredns": "v1.11.4-eksbuild.14",
            "kube-proxy": "v1.31.13-eksbuild.2",
            "eks-pod-identity-agent": "v1.3.8-eksbuild.2",
            "aws-ebs-csi-driver": "v1.48.0-eksbuild.2",
            "aws-efs-csi-driver": "v2.1.4-eksbuild.1",
            "amazon-cloudwatch-observability": "v6.2.0-eksbuild.1",
            "amazon-sagemaker-hyperpod-taskgovernance": "v1.6.0-eksbuild.1",
        },
        f"defaults for 1.31: {default_131}",
    )
    pages = [eks.describe_addon_versions(maxResults=2)]
    while "nextToken" in pages[-1] and len(pages) < 10:
        pages.append(eks.describe_addon_versions(maxResults=2, nextToken=pages[-1]["nextToken"]))
    names = [a["addonName"] for page in pages for a in page["addons"]]
    check(
        sorted(names) == sorted(ADDONS) and len(pages) == (len(ADDONS) + 1) // 2,
        "DescribeAddonVersions pages with maxResults/nextToken",
    )
    check(eks.describe_addon_versions(addonName="nope")["addons"] == [], "unknown add-on name: no versions")
    check(
        [a["addonName"] for a in eks.describe_addon_versions(types=["storage"])["addons"]]
        == ["aws-ebs-csi-driver", "aws-efs-csi-driver"],
        "types filter",
    )


def addons(env: Env, cluster: str) -> None:
    eks = env.eks
    check(
        error(eks.create_addon, clusterName="nope", addonName="vpc-cni")
        == ("ResourceNotFoundException", 404),
        "CreateAddon on an unknown cluster -> ResourceNotFoundException",
    )
    check(
        error(eks.create_addon, clusterName=cluster, addonName="nope") == ("InvalidParameterException", 400),
        "unknown add-on -> InvalidParameterException",
    )
    check(
        error(
            eks.create_addon, clusterName=cluster, addonName="kube-proxy", addonVersion="v1.30.14-eksbuild.2"
        )
        == ("InvalidParameterException", 400),
        "version for another Kubernetes version -> InvalidParameterException",
    )
    check(
        error(eks.create_addon, clusterName=cluster, addonName="vpc-cni", configurationValues="{not json")
        == ("InvalidParameterException", 400),
        "configurationValues not JSON -> InvalidParameterException",
    )
    check(
        error(eks.create_addon, clusterName=cluster, addonName="vpc-cni", configurationValues="[1]")
        == ("InvalidParameterException", 400),
        "configurationValues not an object -> InvalidParameterException",
    )

    config = json.dumps({"env": {"ENABLE_PREFIX_DELEGATION": "true"}})
    started = time.monotonic()
    token = str(uuid.uuid4())
    addon = eks.create_addon(
        clusterName=cluster,
        addonName="vpc-cni",
        configurationValues=config,
        resolveConflicts="OVERWRITE",
        serviceAccountRoleArn=ROLE,
        tags={"gpustack:stack": env.stack},
        clientRequestToken=token,
    )["addon"]
    arn = addon["addonArn"]
    check(
        arn.startswith(f"arn:aws:eks:{REGION}:{ACCOUNT}:addon/{cluster}/vpc-cni/")
        and len(arn.rsplit("/", 1)[1]) == 36,
        f"addonArn {arn}",
    )
    check(
        addon["status"] == "CREATING"
        and addon["addonVersion"] == "v1.19.5-eksbuild.1"
        and addon["configurationValues"] == config
        and addon["serviceAccountRoleArn"] == ROLE
        and addon["tags"] == {"gpustack:stack": env.stack}
        and addon["health"] == {"issues": []}
        and addon["clusterName"] == cluster
        and "createdAt" in addon
        and "modifiedAt" in addon,
        "CreateAddon: CREATING, default version, configuration, role, tags, health",
    )
    check(
        error(eks.create_addon, clusterName=cluster, addonName="vpc-cni") == ("ResourceInUseException", 409),
        "second CreateAddon -> ResourceInUseException",
    )
    again = eks.create_addon(clusterName=cluster, addonName="vpc-cni", clientRequestToken=token)["addon"]
    check(again["addonArn"] == arn, "CreateAddon repeated with its clientRequestToken returns the add-on")
    check(
        error(eks.update_addon, clusterName=cluster, addonName="vpc-cni", addonVersion="v1.20.4-eksbuild.1")
        == ("ResourceInUseException", 409),
        "UpdateAddon while CREATING -> ResourceInUseException",
    )
    eks.get_waiter("addon_active").wait(
        clusterName=cluster, addonName="vpc-cni", WaiterConfig={"Delay": 0.05, "MaxAttempts": 200}
    )
    check((time.monotonic() - started) * 1000 >= TIMINGS["addon_create_ms"], "boto3 addon_active waiter")

    for name in ("coredns", "kube-proxy"):
        eks.create_addon(clusterName=cluster, addonName=name)
    first = eks.list_addons(clusterName=cluster, maxResults=2)
    second = eks.list_addons(clusterName=cluster, maxResults=2, nextToken=first["nextToken"])
    check(
        first["addons"] == ["coredns", "kube-proxy"]
        and second["addons"] == ["vpc-cni"]
        and "nextToken" not in second,
        "ListAddons pages with maxResults/nextToken",
    )
    check(
        error(eks.list_addons, clusterName="nope") == ("ResourceNotFoundException", 404),
        "ListAddons unknown cluster -> 404",
    )
    check(
        error(eks.describe_addon, clusterName=cluster, addonName="aws-ebs-csi-driver")
        == ("ResourceNotFoundException", 404),
        "DescribeAddon of an absent add-on -> ResourceNotFoundException",
    )

    check(
        error(eks.update_addon, clusterName=cluster, addonName="vpc-cni", addonVersion="v9.9.9-eksbuild.1")
        == ("InvalidParameterException", 400),
        "UpdateAddon to an unknown version -> InvalidParameterException",
    )
    started = time.monotonic()
    update = eks.update_addon(
        clusterName=cluster,
        addonName="vpc-cni",
        addonVersion="v1.20.4-eksbuild.1",
        configurationValues="{}",
        resolveConflicts="PRESERVE",
    )["update"]
    check(
        update["type"] == "AddonUpdate"
        and update["status"] == "InProgress"
        and {"type": "AddonVersion", "value": "v1.20.4-eksbuild.1"} in update["params"]
        and {"type": "ConfigurationValues", "value": "{}"} in update["params"],
        "UpdateAddon returns an AddonUpdate",
    )
    check(env.addon_status(cluster, "vpc-cni") == "UPDATING", "add-on UPDATING")
    check(
        error(eks.describe_update, name=cluster, updateId=update["id"]) == ("ResourceNotFoundException", 404),
        "DescribeUpdate of an add-on update without addonName -> ResourceNotFoundException",
    )
    settle(
        lambda: env.update_status(cluster, update["id"], addonName="vpc-cni"),
        "Successful",
        started,
        TIMINGS["update_ms"],
        "add-on update",
    )
    got = eks.describe_addon(clusterName=cluster, addonName="vpc-cni")["addon"]
    check(
        got["status"] == "ACTIVE"
        and got["addonVersion"] == "v1.20.4-eksbuild.1"
        and got["configurationValues"] == "{}",
        "add-on ACTIVE with the new version and configuration",
    )

    eks.tag_resource(resourceArn=arn, tags={"extra": "1"})
    check(
        eks.list_tags_for_resource(resourceArn=arn)["tags"] == {"gpustack:stack": env.stack, "extra": "1"},
        "TagResource on an add-on ARN",
    )
    eks.untag_resource(resourceArn=arn, tagKeys=["extra"])
    check(
        eks.describe_addon(clusterName=cluster, addonName="vpc-cni")["addon"]["tags"]
        == {"gpustack:stack": env.stack},
        "UntagResource on an add-on ARN",
    )
    check(
        error(eks.list_tags_for_resource, resourceArn=arn.replace("vpc-cni", "nope"))
        == ("NotFoundException", 404),
        "tags of an unknown ARN -> NotFoundException",
    )

    started = time.monotonic()
    deleted = eks.delete_addon(clusterName=cluster, addonName="kube-proxy")["addon"]
    check(deleted["status"] == "DELETING", "DeleteAddon answers DELETING")
    eks.get_waiter("addon_deleted").wait(
        clusterName=cluster, addonName="kube-proxy", WaiterConfig={"Delay": 0.05, "MaxAttempts": 200}
    )
    check(
        (time.monotonic() - started) * 1000 >= TIMINGS["delete_ms"], "boto3 addon_deleted waiter: add-on gone"
    )
    check(
        error(eks.delete_addon, clusterName=cluster, addonName="kube-proxy")
        == ("ResourceNotFoundException", 404),
        "DeleteAddon of a deleted add-on -> ResourceNotFoundException",
    )


LT_DATA: dict[str, Any] = {
    "InstanceType": "p5.48xlarge",
    "UserData": base64.b64encode(b"[settings.kubernetes]\nmax-pods = 110\n").decode(),
    "BlockDeviceMappings": [
        {
            "DeviceName": "/dev/xvda",
            "Ebs": {
                "VolumeSize": 100,
                "VolumeType": "gp3",
                "Iops": 3000,
                "Throughput": 125,
                "DeleteOnTermination": True,
                "Encrypted": True,
            },
        },
        {
            "DeviceName": "/dev/xvdb",
            "Ebs": {
                "VolumeSize": 500,
                "VolumeType": "gp3",
                "SnapshotId": "snap-0123456789abcdef0",
                "DeleteOnTermination": True,
                "Encrypted": False,
            },
        },
    ],
    "InstanceMarketOptions": {"MarketType": "capacity-block"},
    "CapacityReservationSpecification": {
        "CapacityReservationTarget": {"CapacityReservationId": "cr-0123456789abcdef0"}
    },
    "MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 2, "HttpEndpoint": "enabled"},
    "Placement": {"GroupName": "selftest-pg"},
    "TagSpecifications": [
        {"ResourceType": "instance", "Tags": [{"Key": "role", "Value": "gpu"}]},
        {"ResourceType": "volume", "Tags": [{"Key": "role", "Value": "gpu-disk"}]},
        {"ResourceType": "network-interface", "Tags": [{"Key": "role", "Value": "gpu-nic"}]},
    ],
}


def launch_templates(env: Env) -> str:
    ec2 = env.ec2
    sg = ec2.create_security_group(GroupName=f"{env.stack}-efa", Description="efa", VpcId=env.vpc)["GroupId"]
    data = {
        **LT_DATA,
        "NetworkInterfaces": [
            {
                "DeviceIndex": 0,
                "NetworkCardIndex": 0,
                "InterfaceType": "efa",
                "Groups": [sg],
                "DeleteOnTermination": True,
            },
            *(
                {
                    "DeviceIndex": 1,
                    "NetworkCardIndex": i,
                    "InterfaceType": "efa-only",
                    "Groups": [sg],
                    "DeleteOnTermination": True,
                }
                for i in range(1, 4)
            ),
            {
                "DeviceIndex": 1,
                "NetworkCardIndex": 4,
                "InterfaceType": "interface",
                "Groups": [sg],
                "DeleteOnTermination": False,
            },
        ],
    }
    name = f"{env.stack}-lt"
    own_tags = [{"Key": "gpustack:stack", "Value": env.stack}, {"Key": "Name", "Value": name}]
    made = ec2.create_launch_template(
        LaunchTemplateName=name,
        LaunchTemplateData=data,
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": own_tags}],
    )["LaunchTemplate"]
    lt = made["LaunchTemplateId"]
    check(
        made["DefaultVersionNumber"] == 1 and made["LatestVersionNumber"] == 1 and made["Tags"] == own_tags,
        "CreateLaunchTemplate: version 1 with the template's tags",
    )
    got = ec2.describe_launch_template_versions(LaunchTemplateId=lt, Versions=["$Latest"])[
        "LaunchTemplateVersions"
    ][0]
    check(
        got["LaunchTemplateData"] == data,
        "LaunchTemplateData round-trips exactly (launch-template tags stay out)",
    )
    check(
        error(ec2.create_launch_template, LaunchTemplateName=name, LaunchTemplateData=data)
        == ("InvalidLaunchTemplateName.AlreadyExistsException", 400),
        "duplicate name -> InvalidLaunchTemplateName.AlreadyExistsException",
    )

    v2_data = {
        **LT_DATA,
        "SecurityGroupIds": [sg],
        "InstanceType": "g6.xlarge",
        "CapacityReservationSpecification": {"CapacityReservationPreference": "none"},
    }
    v2 = ec2.create_launch_template_version(LaunchTemplateId=lt, LaunchTemplateData=v2_data)[
        "LaunchTemplateVersion"
    ]
    v3 = ec2.create_launch_template_version(
        LaunchTemplateId=lt, LaunchTemplateData={"InstanceType": "g6.2xlarge"}, SourceVersion="2"
    )["LaunchTemplateVersion"]
    check(
        v2["VersionNumber"] == 2
        and v3["VersionNumber"] == 3
        and v3["LaunchTemplateData"] == {**v2_data, "InstanceType": "g6.2xlarge"},
        "CreateLaunchTemplateVersion; SourceVersion starts from that version's data",
    )

    def versions(v: str) -> list[tuple[int, bool]]:
        out = ec2.describe_launch_template_versions(LaunchTemplateId=lt, Versions=[v])[
            "LaunchTemplateVersions"
        ]
        return [(x["VersionNumber"], x["DefaultVersion"]) for x in out]

    check(
        versions("$Latest") == [(3, False)]
        and versions("$Default") == [(1, True)]
        and versions("3") == [(3, False)],
        "DescribeLaunchTemplateVersions $Latest, $Default, 3",
    )
    check(
        error(ec2.describe_launch_template_versions, LaunchTemplateId=lt, Versions=["0"])
        == ("InvalidLaunchTemplateId.VersionNotFound", 400),
        "version 0 -> InvalidLaunchTemplateId.VersionNotFound",
    )
    modified = ec2.modify_launch_template(LaunchTemplateId=lt, DefaultVersion="2")["LaunchTemplate"]
    check(
        modified["DefaultVersionNumber"] == 2 and versions("$Default") == [(2, True)],
        "ModifyLaunchTemplate sets the default",
    )
    check(
        ec2.describe_launch_template_versions(LaunchTemplateId=lt, Versions=["$Default"])[
            "LaunchTemplateVersions"
        ][0]["LaunchTemplateData"]
        == v2_data,
        "the default version's data round-trips",
    )

    ec2.create_tags(Resources=[lt], Tags=[{"Key": "extra", "Value": "1"}])
    found = ec2.describe_launch_templates(Filters=[{"Name": "tag:gpustack:stack", "Values": [env.stack]}])[
        "LaunchTemplates"
    ]
    check(
        [t["LaunchTemplateId"] for t in found] == [lt] and {"Key": "extra", "Value": "1"} in found[0]["Tags"],
        "DescribeLaunchTemplates by tag:gpustack:stack shows later CreateTags",
    )
    ec2.delete_tags(Resources=[lt], Tags=[{"Key": "extra"}])

    others = [
        ec2.create_launch_template(
            LaunchTemplateName=f"{name}-{i}",
            LaunchTemplateData={"InstanceType": "m6i.xlarge"},
            TagSpecifications=[
                {"ResourceType": "launch-template", "Tags": [{"Key": "gpustack:stack", "Value": env.stack}]}
            ],
        )["LaunchTemplate"]["LaunchTemplateId"]
        for i in range(16)
    ]
    pages = ec2.get_paginator("describe_launch_templates").paginate(
        Filters=[{"Name": "tag:gpustack:stack", "Values": [env.stack]}], PaginationConfig={"PageSize": 5}
    )
    seen = [t["LaunchTemplateId"] for p in pages for t in p["LaunchTemplates"]]
    all_at_once = ec2.describe_launch_templates(
        Filters=[{"Name": "tag:gpustack:stack", "Values": [env.stack]}]
    )["LaunchTemplates"]
    check(
        sorted(seen) == sorted([lt, *others]) and len(all_at_once) == 17,
        "DescribeLaunchTemplates pages (17 templates, 5 a page)",
    )
    for other in others:
        ec2.delete_launch_template(LaunchTemplateId=other)

    # RunInstances from a later version with UserData (moto kept it as a plain string: 500).
    run_lt = ec2.create_launch_template(
        LaunchTemplateName=f"{name}-run", LaunchTemplateData={"InstanceType": "g6.xlarge"}
    )
    run_lt_id = run_lt["LaunchTemplate"]["LaunchTemplateId"]
    ec2.create_launch_template_version(
        LaunchTemplateId=run_lt_id,
        LaunchTemplateData={"InstanceType": "g6.xlarge", "UserData": LT_DATA["UserData"]},
    )
    image = env.ssm.get_parameter(
        Name="/aws/service/bottlerocket/aws-k8s-1.31-nvidia/x86_64/latest/image_id"
    )["Parameter"]["Value"]
    run = ec2.run_instances(
        ImageId=image,
        MinCount=1,
        MaxCount=1,
        SubnetId=env.subnets[0],
        LaunchTemplate={"LaunchTemplateId": run_lt_id, "Version": "2"},
    )["Instances"][0]
    user_data = ec2.describe_instance_attribute(InstanceId=run["InstanceId"], Attribute="userData")[
        "UserData"
    ]["Value"]
    check(
        run["InstanceType"] == "g6.xlarge" and run["ImageId"] == image and user_data == LT_DATA["UserData"],
        "RunInstances with a Bottlerocket AMI from template version 2 gets its UserData",
    )
    ec2.terminate_instances(InstanceIds=[run["InstanceId"]])
    ec2.delete_launch_template(LaunchTemplateId=run_lt_id)
    return lt


def launch_template_gone(env: Env, lt: str) -> None:
    ec2 = env.ec2
    check(
        ec2.delete_launch_template(LaunchTemplateId=lt)["LaunchTemplate"]["LaunchTemplateId"] == lt,
        "DeleteLaunchTemplate",
    )
    check(
        error(ec2.describe_launch_templates, LaunchTemplateIds=[lt])
        == ("InvalidLaunchTemplateId.NotFound", 400),
        "DescribeLaunchTemplates of a deleted id -> InvalidLaunchTemplateId.NotFound",
    )
    check(
        error(ec2.delete_launch_template, LaunchTemplateId=lt) == ("InvalidLaunchTemplateId.NotFound", 400),
        "DeleteLaunchTemplate of a deleted id -> InvalidLaunchTemplateId.NotFound",
    )
    check(
        ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [lt]}])["Tags"] == [],
        "its tags are gone",
    )


def nodegroups(env: Env, cluster: str, lt: str) -> None:
    eks = env.eks
    base = {
        "clusterName": cluster,
        "nodeRole": ROLE,
        "subnets": env.subnets,
        "scalingConfig": {"minSize": 1, "maxSize": 4, "desiredSize": 2},
    }
    check(
        error(eks.create_nodegroup, **base, nodegroupName="x", launchTemplate={"id": "lt-0123456789abcdef0"})
        == ("InvalidParameterException", 400),
        "unknown launch template -> InvalidParameterException",
    )
    check(
        error(eks.create_nodegroup, **base, nodegroupName="x", launchTemplate={"id": lt, "version": "9"})
        == ("InvalidParameterException", 400),
        "unknown launch template version -> InvalidParameterException",
    )
    check(
        error(
            eks.create_nodegroup,
            **base,
            nodegroupName="x",
            launchTemplate={"id": lt},
            instanceTypes=["g6.xlarge"],
        )
        == ("InvalidParameterException", 400),
        "instanceTypes with a template that sets InstanceType -> InvalidParameterException",
    )
    check(
        error(
            eks.create_nodegroup,
            **base,
            nodegroupName="x",
            amiType="BOTTLEROCKET_x86_64_NVIDIA",
            releaseVersion="1.0.0-deadbeef",
        )
        == ("InvalidParameterException", 400),
        "unknown release version -> InvalidParameterException",
    )

    name = "gpu"
    labels, taints = {"gpu": "true"}, [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    started = time.monotonic()
    ng = eks.create_nodegroup(
        **base,
        nodegroupName=name,
        amiType="BOTTLEROCKET_x86_64_NVIDIA",
        capacityType="CAPACITY_BLOCK",
        launchTemplate={"id": lt},
        updateConfig={"maxUnavailable": 2},
        labels=labels,
        taints=taints,
        tags={"gpustack:stack": env.stack},
    )["nodegroup"]
    check(ng["status"] == "CREATING", "CreateNodegroup answers CREATING")
    check(
        ng["launchTemplate"] == {"id": lt, "name": f"{env.stack}-lt", "version": "2"},
        "launchTemplate resolved: id, name, the template's default version",
    )
    check(
        ng["capacityType"] == "CAPACITY_BLOCK"
        and ng["updateConfig"] == {"maxUnavailable": 2}
        and ng["labels"] == labels
        and ng["taints"] == taints
        and ng["tags"] == {"gpustack:stack": env.stack}
        and ng["version"] == "1.31"
        and ng["releaseVersion"] == "1.57.0-0b6a2b38"
        and ng["amiType"] == "BOTTLEROCKET_x86_64_NVIDIA",
        "capacityType, updateConfig, labels, taints, tags, version, default releaseVersion",
    )
    check(
        "instanceTypes" not in ng and "diskSize" not in ng and "remoteAccess" not in ng,
        "no instanceTypes, diskSize or remoteAccess with a launch template",
    )
    eks.get_waiter("nodegroup_active").wait(
        clusterName=cluster, nodegroupName=name, WaiterConfig={"Delay": 0.05, "MaxAttempts": 200}
    )
    check(
        (time.monotonic() - started) * 1000 >= TIMINGS["nodegroup_create_ms"], "boto3 nodegroup_active waiter"
    )
    check(
        eks.describe_nodegroup(clusterName=cluster, nodegroupName=name)["nodegroup"]["launchTemplate"][
            "version"
        ]
        == "2",
        "DescribeNodegroup returns the launch template",
    )

    plain = eks.create_nodegroup(
        **base, nodegroupName="system", instanceTypes=["m6i.xlarge"], amiType="AL2023_x86_64_STANDARD"
    )["nodegroup"]
    check(
        plain["releaseVersion"] == "1.31.13-20251103"
        and plain["diskSize"] == 20
        and plain["instanceTypes"] == ["m6i.xlarge"]
        and plain["capacityType"] == "ON_DEMAND"
        and plain["updateConfig"] == {"maxUnavailable": 1}
        and "remoteAccess" not in plain,
        "node group without a template: AL2023 release, diskSize 20, ON_DEMAND, maxUnavailable 1",
    )
    by_name = eks.create_nodegroup(
        **base, nodegroupName="by-name", launchTemplate={"name": f"{env.stack}-lt", "version": "3"}
    )["nodegroup"]
    check(
        by_name["launchTemplate"] == {"id": lt, "name": f"{env.stack}-lt", "version": "3"},
        "launchTemplate by name resolves the id",
    )
    check(
        error(eks.list_nodegroups, clusterName="nope") == ("ResourceNotFoundException", 404),
        "ListNodegroups of an unknown cluster -> ResourceNotFoundException",
    )
    first = eks.list_nodegroups(clusterName=cluster, maxResults=2)
    second = eks.list_nodegroups(clusterName=cluster, maxResults=2, nextToken=first["nextToken"])
    check(first["nodegroups"] + second["nodegroups"] == ["by-name", "gpu", "system"], "ListNodegroups pages")

    started = time.monotonic()
    update = eks.update_nodegroup_config(
        clusterName=cluster,
        nodegroupName=name,
        scalingConfig={"minSize": 2, "maxSize": 6, "desiredSize": 3},
        labels={"addOrUpdateLabels": {"pool": "a"}, "removeLabels": ["gpu"]},
    )["update"]
    check(
        update["type"] == "ConfigUpdate"
        and update["status"] == "InProgress"
        and {"type": "DesiredSize", "value": "3"} in update["params"],
        "UpdateNodegroupConfig returns an InProgress ConfigUpdate",
    )
    check(env.nodegroup_status(cluster, name) == "UPDATING", "node group UPDATING")
    check(
        error(
            eks.update_nodegroup_version,
            clusterName=cluster,
            nodegroupName=name,
            launchTemplate={"id": lt, "version": "3"},
        )
        == ("ResourceInUseException", 409),
        "UpdateNodegroupVersion while UPDATING -> ResourceInUseException",
    )
    settle(
        lambda: env.update_status(cluster, update["id"], nodegroupName=name),
        "Successful",
        started,
        TIMINGS["update_ms"],
        "node group config update",
    )
    got = eks.describe_nodegroup(clusterName=cluster, nodegroupName=name)["nodegroup"]
    check(
        got["scalingConfig"] == {"minSize": 2, "maxSize": 6, "desiredSize": 3}
        and got["labels"] == {"pool": "a"},
        "scaling and labels updated",
    )
    check(
        eks.describe_nodegroup(clusterName=cluster, nodegroupName="by-name")["nodegroup"]["scalingConfig"]
        == {"minSize": 1, "maxSize": 4, "desiredSize": 2},
        "other node groups' scaling untouched",
    )

    # EKS User Guide, capacity-blocks-mng: a CAPACITY_BLOCK node group is upgraded with desired size
    # 0 (the block has no spare instances); with 3 the update is InvalidRequestException. This
    # selftest used to upgrade it at desired size 3.
    check(
        error(eks.update_nodegroup_version, clusterName=cluster, nodegroupName=name)
        == ("InvalidRequestException", 400),
        "UpdateNodegroupVersion of a CAPACITY_BLOCK group with desired size 3 -> InvalidRequestException",
    )
    eks.update_nodegroup_config(
        clusterName=cluster, nodegroupName=name, scalingConfig={"minSize": 0, "maxSize": 6, "desiredSize": 0}
    )
    eks.get_waiter("nodegroup_active").wait(
        clusterName=cluster, nodegroupName=name, WaiterConfig={"Delay": 0.05, "MaxAttempts": 200}
    )
    check(
        error(
            eks.update_nodegroup_version,
            clusterName=cluster,
            nodegroupName=name,
            launchTemplate={"id": lt, "version": "3"},
            releaseVersion="9.9.9-nope",
        )
        == ("InvalidParameterException", 400),
        "UpdateNodegroupVersion to an unknown release -> InvalidParameterException",
    )
    started = time.monotonic()
    update = eks.update_nodegroup_version(
        clusterName=cluster,
        nodegroupName=name,
        launchTemplate={"id": lt, "version": "3"},
        releaseVersion="1.56.0-7f3e0a51",
    )["update"]
    check(
        update["type"] == "VersionUpdate"
        and {"type": "LaunchTemplateVersion", "value": "3"} in update["params"]
        and {"type": "ReleaseVersion", "value": "1.56.0-7f3e0a51"} in update["params"],
        "UpdateNodegroupVersion returns a VersionUpdate",
    )
    settle(
        lambda: env.update_status(cluster, update["id"], nodegroupName=name),
        "Successful",
        started,
        TIMINGS["update_ms"],
        "node group version update",
    )
    got = eks.describe_nodegroup(clusterName=cluster, nodegroupName=name)["nodegroup"]
    check(
        got["launchTemplate"]["version"] == "3"
        and got["releaseVersion"] == "1.56.0-7f3e0a51"
        and got["status"] == "ACTIVE",
        "node group on template version 3 and the pinned release",
    )
    # An empty LaunchTemplateData serialises to nothing, which EC2 refuses (MissingParameter: it is
    # required in the model); this selftest used to rely on moto taking it.
    other_lt = env.ec2.create_launch_template(
        LaunchTemplateName=f"{env.stack}-other", LaunchTemplateData={"InstanceType": "m6i.xlarge"}
    )[
        "LaunchTemplate"
    ]
    check(
        error(
            eks.update_nodegroup_version,
            clusterName=cluster,
            nodegroupName=name,
            launchTemplate={"id": other_lt["LaunchTemplateId"]},
        )
        == ("InvalidParameterException", 400),
        "UpdateNodegroupVersion with another template -> InvalidParameterException",
    )
    env.ec2.delete_launch_template(LaunchTemplateId=other_lt["LaunchTemplateId"])

    eks.tag_resource(resourceArn=got["nodegroupArn"], tags={"extra": "1"})
    check(
        eks.list_tags_for_resource(resourceArn=got["nodegroupArn"])["tags"]
        == {"gpustack:stack": env.stack, "extra": "1"},
        "TagResource on a node group ARN",
    )

    # A template with a custom AMI (amiType CUSTOM): botocore `Nodegroup.releaseVersion` is the
    # AMI id; `CreateNodegroupRequest.releaseVersion` and `UpdateNodegroupVersionRequest.
    # {releaseVersion,version}`: "don't specify ... or the node group deployment/update will fail".
    image = env.ssm.get_parameter(
        Name="/aws/service/bottlerocket/aws-k8s-1.31-nvidia/x86_64/latest/image_id"
    )["Parameter"]["Value"]
    custom_lt = env.ec2.create_launch_template(
        LaunchTemplateName=f"{env.stack}-custom", LaunchTemplateData={"ImageId": image, "InstanceType": "g6.xlarge"}
    )["LaunchTemplate"]["LaunchTemplateId"]
    check(
        error(
            eks.create_nodegroup,
            **base,
            nodegroupName="custom",
            launchTemplate={"id": custom_lt},
            releaseVersion="1.56.0-7f3e0a51",
        )
        == ("InvalidParameterException", 400),
        "CreateNodegroup with a custom-AMI template and a releaseVersion -> InvalidParameterException",
    )
    eks.create_nodegroup(**base, nodegroupName="custom", launchTemplate={"id": custom_lt})
    eks.get_waiter("nodegroup_active").wait(
        clusterName=cluster, nodegroupName="custom", WaiterConfig={"Delay": 0.05, "MaxAttempts": 200}
    )
    custom = eks.describe_nodegroup(clusterName=cluster, nodegroupName="custom")["nodegroup"]
    check(
        custom["amiType"] == "CUSTOM" and custom["releaseVersion"] == image,
        "a custom-AMI group's releaseVersion is the AMI id",
    )
    for extra, what in ((
        {"releaseVersion": image}, "releaseVersion"), ({"version": custom["version"]}, "version")):
        check(
            error(
                eks.update_nodegroup_version,
                clusterName=cluster,
                nodegroupName="custom",
                launchTemplate={"id": custom_lt, "version": "1"},
                **extra,
            )
            == ("InvalidParameterException", 400),
            f"UpdateNodegroupVersion of a custom-AMI group with a {what} -> InvalidParameterException",
        )

    check(
        error(eks.delete_cluster, name=cluster) == ("ResourceInUseException", 409),
        "DeleteCluster with node groups -> ResourceInUseException",
    )
    started = time.monotonic()
    for n in ("gpu", "system", "by-name", "custom"):
        check(
            eks.delete_nodegroup(clusterName=cluster, nodegroupName=n)["nodegroup"]["status"] == "DELETING",
            f"DeleteNodegroup {n} answers DELETING",
        )
    check(
        error(eks.delete_cluster, name=cluster) == ("ResourceInUseException", 409),
        "DeleteCluster while node groups are DELETING -> ResourceInUseException",
    )
    settle(
        lambda: env.nodegroup_status(cluster, name),
        None,
        started,
        TIMINGS["delete_ms"],
        "node group deletion",
    )
    # All three: by-name's deletion started last, a few ms after the others (flaky under load).
    for n in ("system", "by-name", "custom"):
        eks.get_waiter("nodegroup_deleted").wait(
            clusterName=cluster, nodegroupName=n, WaiterConfig={"Delay": 0.05, "MaxAttempts": 200}
        )
    check(eks.list_nodegroups(clusterName=cluster)["nodegroups"] == [], "node groups gone")
    env.ec2.delete_launch_template(LaunchTemplateId=custom_lt)


def delete_cluster(env: Env, cluster: str) -> None:
    eks = env.eks
    sg = eks.describe_cluster(name=cluster)["cluster"]["resourcesVpcConfig"]["clusterSecurityGroupId"]
    started = time.monotonic()
    check(
        eks.delete_cluster(name=cluster)["cluster"]["status"] == "DELETING", "DeleteCluster answers DELETING"
    )
    check(env.addon_status(cluster, "vpc-cni") == "DELETING", "its add-ons are DELETING with it")
    settle(lambda: env.cluster_status(cluster), None, started, TIMINGS["delete_ms"], "cluster deletion")
    check(
        error(eks.describe_addon, clusterName=cluster, addonName="vpc-cni")
        == ("ResourceNotFoundException", 404),
        "add-ons gone with the cluster",
    )
    check(
        error(env.ec2.describe_security_groups, GroupIds=[sg]) == ("InvalidGroup.NotFound", 400),
        "the cluster security group is deleted with the cluster",
    )


def ssm_parameters(env: Env) -> None:
    ssm, ec2 = env.ssm, env.ec2

    def value(name: str) -> str:
        return ssm.get_parameter(Name=name)["Parameter"]["Value"]

    base = "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/x86_64"
    latest = value(f"{base}/latest/image_id")
    check(
        value(f"{base}/latest/image_version") == "1.57.0-0b6a2b38",
        "bottlerocket latest image_version 1.57.0-0b6a2b38",
    )
    check(
        value(f"{base}/1.57.0-0b6a2b38/image_id") == latest and value(f"{base}/1.57.0/image_id") == latest,
        "pinned 1.57.0-0b6a2b38 and 1.57.0 name the latest AMI",
    )
    older = value(f"{base}/1.56.0-7f3e0a51/image_id")
    check(
        older != latest and value(f"{base}/1.56.0-7f3e0a51/image_version") == "1.56.0-7f3e0a51",
        "older pinned release",
    )
    images = {i["ImageId"]: i for i in ec2.describe_images(ImageIds=[latest, older])["Images"]}
    check(
        images[latest]["Name"] == "bottlerocket-aws-k8s-1.31-nvidia-x86_64-v1.57.0-0b6a2b38"
        and images[older]["Name"] == "bottlerocket-aws-k8s-1.31-nvidia-x86_64-v1.56.0-7f3e0a51"
        and images[latest]["Architecture"] == "x86_64"
        and images[latest]["RootDeviceName"] == "/dev/xvda"
        and images[latest]["ImageOwnerAlias"] == "amazon",
        f"{latest} is a registered Bottlerocket AMI (name, x86_64, /dev/xvda)",
    )
    arm = value("/aws/service/bottlerocket/aws-k8s-1.34-fips/arm64/latest/image_id")
    check(ec2.describe_images(ImageIds=[arm])["Images"][0]["Architecture"] == "arm64", "arm64 AMIs are arm64")

    names = (
        [
            f"/aws/service/bottlerocket/aws-k8s-{k}{flavour}/{arch}/{leaf}"
            for k in K8S
            for flavour in ("", "-nvidia", "-fips", "-nvidia-fips")
            for arch in ("x86_64", "arm64")
            for leaf in ("latest/image_id", "latest/image_version", "1.56.0-7f3e0a51/image_id")
        ]
        + [
            f"/aws/service/eks/optimized-ami/{k}/amazon-linux-2023/{arch}/{flavour}/recommended/{leaf}"
            for k in K8S
            for arch in ("x86_64", "arm64")
            for flavour in ("standard", "nvidia")
            for leaf in ("release_version", "image_id")
        ]
        + [
            f"/aws/service/eks/optimized-ami/{k}/amazon-linux-2-gpu/recommended/release_version"
            for k in K8S[:5]
        ]
    )
    values = {}
    for i in range(0, len(names), 10):
        out = ssm.get_parameters(Names=names[i : i + 10])
        if out["InvalidParameters"]:
            raise AssertionError(f"missing: {out['InvalidParameters']}")
        values.update({p["Name"]: p["Value"] for p in out["Parameters"]})
    amis = {v for n, v in values.items() if n.endswith("image_id")}
    found = set()
    amis_list = sorted(amis)
    for i in range(0, len(amis_list), 50):
        found |= {im["ImageId"] for im in ec2.describe_images(ImageIds=amis_list[i : i + 50])["Images"]}
    check(
        len(values) == len(names) and found == amis,
        f"all {len(names)} parameters exist; all {len(amis)} AMIs are registered",
    )
    check(
        value(
            "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/nvidia/recommended/release_version"
        )
        == "1.31.13-20251103",
        "AL2023 nvidia release_version for 1.31: 1.31.13-20251103",
    )
    al2023 = value("/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/nvidia/recommended/image_id")
    check(
        ec2.describe_images(ImageIds=[al2023])["Images"][0]["Name"]
        == "amazon-eks-node-al2023-x86_64-nvidia-1.31-v20251103",
        "AL2023 AMI name",
    )
    check(
        value("/aws/service/eks/optimized-ami/1.31/amazon-linux-2-gpu/recommended/release_version")
        == "1.31.13-20251103",
        "AL2 GPU release_version for 1.31",
    )
    for missing in (
        "/aws/service/eks/optimized-ami/1.33/amazon-linux-2-gpu/recommended/release_version",
        "/aws/service/bottlerocket/aws-k8s-1.27/x86_64/latest/image_id",
        "/aws/service/nope/at/all",
    ):
        check(
            error(ssm.get_parameter, Name=missing) == ("ParameterNotFound", 400),
            f"{missing} -> ParameterNotFound",
        )
    out = ssm.get_parameters(Names=[f"{base}/latest/image_version", "/aws/service/bottlerocket/nope"])
    check(
        [p["Value"] for p in out["Parameters"]] == ["1.57.0-0b6a2b38"]
        and out["InvalidParameters"] == ["/aws/service/bottlerocket/nope"],
        "GetParameters splits found and invalid",
    )
    by_path = ssm.get_paginator("get_parameters_by_path").paginate(Path=base, Recursive=True)
    got = {p["Name"] for page in by_path for p in page["Parameters"]}
    check(
        len(got) == 10 and f"{base}/latest/image_id" in got,
        "GetParametersByPath over one variant (10 parameters)",
    )


def instance_types(env: Env) -> None:
    ec2 = env.ec2
    wanted = ["p5.48xlarge", "p4d.24xlarge", "g6.xlarge", "g6f.large", "g5.xlarge", "m6i.xlarge"]
    types = {t["InstanceType"]: t for t in ec2.describe_instance_types(InstanceTypes=wanted)["InstanceTypes"]}
    check(sorted(types) == sorted(wanted), "DescribeInstanceTypes InstanceTypes=[...] returns exactly those")
    p5 = types["p5.48xlarge"]
    gpu = p5["GpuInfo"]["Gpus"][0]
    check(
        p5["VCpuInfo"]["DefaultVCpus"] == 192
        and (gpu["Name"], gpu["Manufacturer"], gpu["Count"], gpu["LogicalGpuCount"])
        == ("H100", "NVIDIA", 8, 8)
        and gpu["MemoryInfo"]["SizeInMiB"] == 81920
        and p5["GpuInfo"]["TotalGpuMemoryInMiB"] == 655360,
        "p5.48xlarge: 192 vCPUs, 8 H100 of 81920 MiB",
    )
    net = p5["NetworkInfo"]
    check(
        net["EfaSupported"] is True
        and net["EfaInfo"]["MaximumEfaInterfaces"] == 32
        and net["MaximumNetworkCards"] == 32
        and len(net["NetworkCards"]) == 32
        and net["NetworkCards"][5]["NetworkCardIndex"] == 5
        and net["NetworkCards"][5]["MaximumNetworkInterfaces"] == 2,
        "p5.48xlarge: EFA, 32 network cards",
    )
    p4d = types["p4d.24xlarge"]["NetworkInfo"]
    check(
        p4d["EfaInfo"]["MaximumEfaInterfaces"] == 4 and p4d["MaximumNetworkCards"] == 4,
        "p4d.24xlarge: 4 EFA, 4 cards",
    )
    g6f = types["g6f.large"]["GpuInfo"]
    check(
        g6f["Gpus"][0]["Name"] == "L4"
        and g6f["Gpus"][0]["LogicalGpuCount"] == 1
        and g6f["TotalGpuMemoryInMiB"] == 2861,
        "g6f.large: a fraction of an L4",
    )
    for t in ("g6.xlarge", "g5.xlarge"):
        check(
            types[t]["GpuInfo"]["Gpus"][0]["Count"] == 1
            and types[t]["NetworkInfo"]["EfaSupported"] is False
            and types[t]["NetworkInfo"]["NetworkCards"][0]["NetworkCardIndex"] == 0,
            f"{t}: 1 GPU, no EFA",
        )
    check(
        "GpuInfo" not in types["m6i.xlarge"] and types["m6i.xlarge"]["VCpuInfo"]["DefaultVCpus"] == 4,
        "m6i.xlarge: no GPU",
    )
    check(
        error(ec2.describe_instance_types, InstanceTypes=["p5.48xlarge", "zz.huge"])
        == ("InvalidInstanceType", 400),
        "unknown type -> InvalidInstanceType",
    )
    # type_overrides.install: AWS's accelerated types moto's copy lacks, from the embedded
    # catalog's Karpenter-sourced records (p3 and dl1 left Karpenter's reference in 2026).
    older = ["p3.2xlarge", "g4ad.xlarge", "dl1.24xlarge"]
    got = {t["InstanceType"]: t for t in ec2.describe_instance_types(InstanceTypes=older)["InstanceTypes"]}
    check(
        sorted(got) == sorted(older)
        and got["p3.2xlarge"]["GpuInfo"]["Gpus"][0]["Name"] == "V100"
        and got["g4ad.xlarge"]["GpuInfo"]["Gpus"][0]["Manufacturer"] == "AMD"
        and got["dl1.24xlarge"]["NetworkInfo"]["EfaInfo"]["MaximumEfaInterfaces"] == 4,
        "p3, g4ad and dl1 are known (V100, AMD, 4 EFA)",
    )


def reset(env: Env) -> None:
    http(env.endpoint, "POST", "/_gpustack/eks?cluster_create_ms=0")
    env.eks.create_cluster(
        name=f"{env.stack}-r", version="1.31", roleArn=ROLE, resourcesVpcConfig={"subnetIds": env.subnets}
    )
    req = urllib.request.Request(env.endpoint + "/moto-api/reset", method="POST", data=b"")
    urllib.request.urlopen(req, timeout=30).read()
    check(env.eks.list_clusters()["clusters"] == [], "POST /moto-api/reset clears clusters")
    check(
        http(env.endpoint, "POST", "/_gpustack/eks")[1] == DEFAULT_TIMINGS,
        "reset restores the default timings",
    )
    image = env.ssm.get_parameter(Name="/aws/service/bottlerocket/aws-k8s-1.31/x86_64/latest/image_id")[
        "Parameter"
    ]["Value"]
    check(
        len(env.ec2.describe_images(ImageIds=[image])["Images"]) == 1,
        "after reset the public parameters and AMIs are back",
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True, help="e.g. http://127.0.0.1:PORT")
    args = parser.parse_args()
    try:
        env = Env(args.endpoint)
        control(env)
        instance_types(env)
        ssm_parameters(env)
        lt = launch_templates(env)
        addon_versions(env)
        cluster = clusters(env)
        addons(env, cluster)
        nodegroups(env, cluster, lt)
        launch_template_gone(env, lt)
        delete_cluster(env, cluster)
        reset(env)
    except Exception as e:  # noqa: BLE001
        print(f"FAIL {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print("selftest_eks: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
