"""Selftest of the SageMaker extensions (training plans, HyperPod clusters with an EKS
orchestrator, SageMaker service quotas, SageMaker request validation) through boto3 against a
running emulator (starts nothing itself):

    tests/emulator/.venv/bin/python tests/emulator/selftest_sagemaker.py --endpoint http://127.0.0.1:PORT

Every check names the rule it exercises; the module docstrings of ``ext/sagemaker_training_plans.py``,
``ext/sagemaker_hyperpod.py``, ``ext/service_quotas.py`` and ``ext/param_validation.py`` have the
sources. boto3's client-side validation is off, so the emulator's is what answers. Exits non-zero
on the first failure; ends with ``POST /moto-api/reset`` (checking that it clears the extensions'
state): run it against an emulator of its own.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
import time
import urllib.error
import urllib.request
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Callable

import boto3
import botocore.credentials
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.exceptions import ClientError

REGION = "us-west-2"
ACCOUNT = "123456789012"
AZS = ["us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"]
NO_CLIENT_VALIDATION = Config(parameter_validation=False, retries={"total_max_attempts": 1, "mode": "standard"})
CLUSTER_ARN = re.compile(rf"^arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/[a-z0-9]{{12}}$")
OFFERING_ID = re.compile(r"^tpo-[0-9a-f]{64}$")
P5 = "ml.p5.48xlarge"
# Mirrors sagemaker_training_plans.HOURLY_RATES / AZ_FACTORS (the documented fee formula).
P5_RATE = Decimal("45.77")
AZ_FACTORS = (Decimal("1.04"), Decimal("1.00"), Decimal("1.07"), Decimal("1.02"))
LIFECYCLE = {"SourceS3Uri": "s3://sagemaker-gpustack-lcs/base/", "OnCreate": "on_create.sh"}
P5_QUOTA = "L-8762A75F"  # ml.p5.48xlarge for cluster usage
PER_CLUSTER_QUOTA = "L-2CE978FC"
EBS_QUOTA = "L-E13DF72A"
P5_RESERVED_QUOTA = "L-9EF527CA"
PLANS_QUOTA = "L-867702E6"


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


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


def refused(call: Callable[..., Any], code: str, what: str, contains: str = "", **kwargs: Any) -> None:
    got, status, message = error(call, **kwargs)
    check(
        got == code and status == (501 if code == "NotImplemented" else 400) and contains in message,
        f"{what} -> {code}" + (f" ({contains!r})" if contains else ""),
    )


def http(endpoint: str, method: str, path: str) -> tuple[int, Any]:
    req = urllib.request.Request(endpoint + path, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def control(endpoint: str, method: str, path: str) -> Any:
    status, body = http(endpoint, method, path)
    if status != 200:
        raise AssertionError(f"{method} {path} -> {status} {body}")
    return body


def raw_sagemaker(endpoint: str, operation: str, body: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
    """A signed SageMaker JSON request the SDKs cannot send (an operation the model lacks)."""
    request = AWSRequest(
        method="POST",
        url=endpoint + "/",
        data=json.dumps(body),
        headers={"X-Amz-Target": f"SageMaker.{operation}", "Content-Type": "application/x-amz-json-1.1"},
    )
    SigV4Auth(botocore.credentials.Credentials("testing", "testing"), "sagemaker", REGION).add_auth(request)
    data = request.body if isinstance(request.body, bytes) else str(request.body).encode()
    req = urllib.request.Request(endpoint + "/", data=data, headers=dict(request.headers.items()), method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), json.loads(e.read() or b"null")


def wait_for(what: str, probe: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class Env:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)

        def client(name: str, region: str = REGION) -> Any:
            return session.client(name, endpoint_url=endpoint, config=NO_CLIENT_VALIDATION, region_name=region)

        self.sm, self.ec2, self.eks, self.iam = client("sagemaker"), client("ec2"), client("eks"), client("iam")
        self.sq = client("service-quotas")
        self.ec2_east, self.eks_east = client("ec2", "us-east-1"), client("eks", "us-east-1")
        control(endpoint, "POST", "/_gpustack/eks?cluster_create_ms=0&nodegroup_create_ms=0&delete_ms=0&update_ms=0")
        control(endpoint, "POST", "/_gpustack/sagemaker?cluster_create_ms=300&cluster_update_ms=300&cluster_delete_ms=300")
        vpc = self.ec2.create_vpc(CidrBlock="10.40.0.0/16")["Vpc"]["VpcId"]
        self.subnets = {
            z: self.ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.40.{i}.0/24", AvailabilityZone=z)["Subnet"]["SubnetId"]
            for i, z in enumerate(AZS, 1)
        }
        self.sg = self.ec2.create_security_group(GroupName="hp", Description="hyperpod", VpcId=vpc)["GroupId"]
        other_vpc = self.ec2.create_vpc(CidrBlock="10.41.0.0/16")["Vpc"]["VpcId"]
        self.other_subnet = self.ec2.create_subnet(VpcId=other_vpc, CidrBlock="10.41.1.0/24", AvailabilityZone=AZS[0])[
            "Subnet"
        ]["SubnetId"]
        self.other_sg = self.ec2.create_security_group(GroupName="hp-other", Description="other", VpcId=other_vpc)["GroupId"]
        trust = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}],
        }
        self.role = self.iam.create_role(RoleName="sagemaker-hp-exec", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        self.role2 = self.iam.create_role(RoleName="sagemaker-hp-exec-2", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
        eks_trust = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"Service": "eks.amazonaws.com"}, "Action": "sts:AssumeRole"}],
        }
        eks_role = self.iam.create_role(RoleName="eks-cluster", AssumeRolePolicyDocument=json.dumps(eks_trust))["Role"]["Arn"]
        two = [self.subnets[AZS[0]], self.subnets[AZS[1]]]

        def eks_cluster(name: str, mode: str | None, version: str) -> str:
            kwargs: dict[str, Any] = {"name": name, "roleArn": eks_role, "version": version, "resourcesVpcConfig": {"subnetIds": two}}
            if mode:
                kwargs["accessConfig"] = {"authenticationMode": mode}
            return self.eks.create_cluster(**kwargs)["cluster"]["arn"]

        self.eks_api = eks_cluster("hp-eks", "API", "1.33")
        self.eks_configmap = eks_cluster("hp-eks-configmap", None, "1.33")
        self.eks_old = eks_cluster("hp-eks-old", "API_AND_CONFIG_MAP", "1.29")
        east_vpc = self.ec2_east.create_vpc(CidrBlock="10.42.0.0/16")["Vpc"]["VpcId"]
        east_subnets = [
            self.ec2_east.create_subnet(VpcId=east_vpc, CidrBlock=f"10.42.{i}.0/24", AvailabilityZone=z)["Subnet"]["SubnetId"]
            for i, z in ((1, "us-east-1a"), (2, "us-east-1b"))
        ]
        self.eks_east_arn = self.eks_east.create_cluster(
            name="hp-eks-east", roleArn=eks_role, version="1.33", resourcesVpcConfig={"subnetIds": east_subnets},
            accessConfig={"authenticationMode": "API"},
        )["cluster"]["arn"]

    def vpc(self, *zones: str) -> dict[str, Any]:
        return {"SecurityGroupIds": [self.sg], "Subnets": [self.subnets[z] for z in zones]}

    def group(self, name: str, kind: str = "ml.m5.xlarge", count: int = 1, **extra: Any) -> dict[str, Any]:
        return {
            "InstanceGroupName": name,
            "InstanceType": kind,
            "InstanceCount": count,
            "LifeCycleConfig": dict(LIFECYCLE),
            "ExecutionRole": self.role,
            **extra,
        }

    def create(self, name: str, groups: list[dict[str, Any]], zone: str = AZS[0], **extra: Any) -> str:
        kwargs = {
            "ClusterName": name,
            "Orchestrator": {"Eks": {"ClusterArn": self.eks_api}},
            "VpcConfig": self.vpc(zone),
            "InstanceGroups": groups,
            **extra,
        }
        return self.sm.create_cluster(**kwargs)["ClusterArn"]

    def describe(self, name: str) -> dict[str, Any]:
        return self.sm.describe_cluster(ClusterName=name)

    def groups(self, name: str) -> dict[str, dict[str, Any]]:
        return {g["InstanceGroupName"]: g for g in self.describe(name)["InstanceGroups"]}

    def wait_status(self, name: str, status: str) -> None:
        wait_for(f"{name} {status}", lambda: self.describe(name)["ClusterStatus"] == status)

    def search(self, **kwargs: Any) -> list[dict[str, Any]]:
        params = {"InstanceType": P5, "InstanceCount": 2, "DurationHours": 48, "TargetResources": ["hyperpod-cluster"], **kwargs}
        return self.sm.search_training_plan_offerings(**params)["TrainingPlanOfferings"]

    def buy(self, name: str, zone: str, count: int = 2, target: str = "hyperpod-cluster", kind: str = P5) -> str:
        offering = next(
            o
            for o in self.search(InstanceCount=count, TargetResources=[target], InstanceType=kind)
            if o["ReservedCapacityOfferings"][0]["AvailabilityZone"] == zone
        )
        return self.sm.create_training_plan(TrainingPlanName=name, TrainingPlanOfferingId=offering["TrainingPlanOfferingId"])[
            "TrainingPlanArn"
        ]


# --- validation and unknown operations -----------------------------------------------------------


def validation(env: Env) -> None:
    status, headers, body = raw_sagemaker(env.endpoint, "DeleteTrainingPlan", {"TrainingPlanName": "x"})
    check(
        status == 400 and body.get("__type", "").endswith("UnknownOperationException"),
        "SageMaker.DeleteTrainingPlan (no such operation) -> 400 UnknownOperationException",
    )
    for op in ("CancelTrainingPlan", "UpdateTrainingPlan"):
        check(raw_sagemaker(env.endpoint, op, {})[0] == 400, f"SageMaker.{op} (no such operation) -> 400")
    refused(env.sm.extend_training_plan, "NotImplemented", "ExtendTrainingPlan (in the model, not emulated)", TrainingPlanExtensionOfferingId="x")
    refused(
        env.sm.describe_cluster, "ValidationException", "ClusterName outside its pattern", "regular expression pattern",
        ClusterName="bad_name",
    )
    refused(
        env.sm.create_training_plan, "ValidationException", "CreateTrainingPlan without TrainingPlanName",
        "Value null at 'trainingPlanName'", TrainingPlanOfferingId="tpo-" + "0" * 64,
    )
    refused(
        env.sm.search_training_plan_offerings, "ValidationException", "InstanceType outside ReservedCapacityInstanceType",
        "enum value set", InstanceType="ml.g5.xlarge", InstanceCount=1, DurationHours=24, TargetResources=["hyperpod-cluster"],
    )
    refused(env.sm.list_training_plans, "ValidationException", "ListTrainingPlans MaxResults 101", "less than or equal to 100", MaxResults=101)
    refused(
        env.sm.create_cluster, "ValidationException", "CreateCluster InstanceType outside ClusterInstanceType",
        "enum value set", ClusterName="c1", InstanceGroups=[env.group("g", kind="ml.bogus.xlarge")],
    )
    refused(
        env.sm.create_cluster, "ValidationException", "CreateCluster InstanceGroupName outside its pattern",
        "regular expression pattern", ClusterName="c1", InstanceGroups=[env.group("bad_group")],
    )


# --- training plans ------------------------------------------------------------------------------


def fee(offering: dict[str, Any], now: datetime.datetime, multiplier: Decimal = Decimal(1)) -> str:
    block = offering["ReservedCapacityOfferings"][0]
    start = block["StartTime"].astimezone(datetime.timezone.utc)
    days_ahead = (start.date() - now.date()).days
    day = 1 + Decimal("0.02") * max(0, 7 - days_ahead) + Decimal("0.01") * (start.toordinal() % 3)
    total = P5_RATE * block["InstanceCount"] * block["DurationHours"] * AZ_FACTORS[AZS.index(block["AvailabilityZone"])] * day * multiplier
    return str(total.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def stable(offerings: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What a search keeps from one call to the next (RequestedStartTimeAfter is the call's now)."""
    return [(o["TrainingPlanOfferingId"], o["UpfrontFee"], o["ReservedCapacityOfferings"][0]["StartTime"]) for o in offerings]


def searches(env: Env) -> None:
    for member in ("InstanceType", "InstanceCount", "DurationHours", "TargetResources"):
        params = {"InstanceType": P5, "InstanceCount": 2, "DurationHours": 48, "TargetResources": ["hyperpod-cluster"]}
        params.pop(member)
        refused(env.sm.search_training_plan_offerings, "ValidationException", f"search without {member}", "Member must not be null", **params)
    refused(env.sm.search_training_plan_offerings, "ValidationException", "InstanceCount 3 (not 1/2/4/.../64)", "Valid instance counts",
            InstanceType=P5, InstanceCount=3, DurationHours=48, TargetResources=["hyperpod-cluster"])
    refused(env.sm.search_training_plan_offerings, "ValidationException", "InstanceCount 128", "Valid instance counts",
            InstanceType=P5, InstanceCount=128, DurationHours=48, TargetResources=["hyperpod-cluster"])
    refused(env.sm.search_training_plan_offerings, "ValidationException", "DurationHours 4392 (> 182 days)", "182 days",
            InstanceType=P5, InstanceCount=1, DurationHours=4392, TargetResources=["hyperpod-cluster"])
    refused(env.sm.search_training_plan_offerings, "ValidationException", "two target resources", "exactly one target",
            InstanceType=P5, InstanceCount=1, DurationHours=24, TargetResources=["hyperpod-cluster", "training-job"])
    now = utcnow()
    refused(env.sm.search_training_plan_offerings, "ValidationException", "StartTimeAfter after EndTimeBefore", "before EndTimeBefore",
            InstanceType=P5, InstanceCount=1, DurationHours=24, TargetResources=["hyperpod-cluster"],
            StartTimeAfter=now + datetime.timedelta(days=3), EndTimeBefore=now + datetime.timedelta(days=2))
    refused(env.sm.search_training_plan_offerings, "ValidationException", "EndTimeBefore < StartTimeAfter + 24 h", "at least 24 hours",
            InstanceType=P5, InstanceCount=1, DurationHours=24, TargetResources=["hyperpod-cluster"],
            StartTimeAfter=now + datetime.timedelta(days=2), EndTimeBefore=now + datetime.timedelta(days=2, hours=20))
    refused(env.sm.search_training_plan_offerings, "NotImplemented", "extension search (TrainingPlanArn)",
            TrainingPlanArn=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-plan/x", DurationHours=24)
    refused(env.sm.search_training_plan_offerings, "NotImplemented", "UltraServer search",
            UltraServerType="ml.u-p6e-gb200x72", UltraServerCount=1, DurationHours=24, TargetResources=["hyperpod-cluster"])

    first = env.search()
    check(stable(first) == stable(env.search()), "the same search finds the same offerings (computed, stable ids)")
    check(all(OFFERING_ID.match(o["TrainingPlanOfferingId"]) for o in first), "offering ids are tpo- + sha256 hex ([a-z0-9-]+)")
    blocks = [o["ReservedCapacityOfferings"][0] for o in first]
    check(len(first) == 3 * len(AZS), "three offerings per Availability Zone (A, B, C)")
    check(
        [b["AvailabilityZone"] for b in blocks] == AZS * 3
        and [o["DurationHours"] for o in first] == [48] * 8 + [72] * 4,
        "order: every AZ's asked length from d0, then from d0+1 day, then 24 h longer from d0",
    )
    check(
        all(b["StartTime"].astimezone(datetime.timezone.utc).time() == datetime.time(11, 30) for b in blocks)
        and all(b["EndTime"].astimezone(datetime.timezone.utc).time() == datetime.time(11, 30) for b in blocks),
        "blocks start and end at 11:30 UTC",
    )
    check(
        all(b["StartTime"] >= now + datetime.timedelta(minutes=29) for b in blocks),
        "offerings start at least 30 minutes ahead",
    )
    check(
        all(
            o["CurrencyCode"] == "USD" and re.fullmatch(r"\d+\.\d\d", o["UpfrontFee"]) and o["DurationMinutes"] == 0
            and o["TargetResources"] == ["hyperpod-cluster"] and "RequestedStartTimeAfter" in o
            and b["InstanceType"] == P5 and b["InstanceCount"] == 2 and b["DurationMinutes"] == 0
            and b["EndTime"] - b["StartTime"] == datetime.timedelta(hours=o["DurationHours"])
            for o, b in zip(first, blocks)
        ),
        "TrainingPlanOffering / ReservedCapacityOffering shapes",
    )
    check(all(o["UpfrontFee"] == fee(o, utcnow()) for o in first), "UpfrontFee = rate x count x hours x AZ factor x day factor")
    fees = [Decimal(o["UpfrontFee"]) for o in first]
    check(fees.index(min(fees)) != 0, "the cheapest offering is not the first one")
    rounded = env.search(DurationHours=15)
    check([o["DurationHours"] for o in rounded] == [24] * 8 + [48] * 4, "DurationHours 15 is rounded up to 24")
    end = first[0]["ReservedCapacityOfferings"][0]["EndTime"]
    narrow = env.search(EndTimeBefore=end, StartTimeAfter=now)
    check(
        len(narrow) == len(AZS) and all(o["ReservedCapacityOfferings"][0]["EndTime"] <= end for o in narrow)
        and all("RequestedEndTimeBefore" in o for o in narrow),
        "EndTimeBefore keeps only offerings that end by then",
    )
    check(env.search(StartTimeAfter=now + datetime.timedelta(days=57)) == [], "nothing starts more than 56 days ahead")
    check(env.search(InstanceType="ml.p6e-gb200.36xlarge") == [], "p6e-gb200 is sold as UltraServers only: no instance offerings")

    control(env.endpoint, "POST", f"/_gpustack/quotas?code={P5_RESERVED_QUOTA}&value=1")
    refused(env.sm.search_training_plan_offerings, "ResourceLimitExceeded", "count above the reserved-capacity quota",
            "reserved capacity across training plans", InstanceType=P5, InstanceCount=2, DurationHours=48, TargetResources=["hyperpod-cluster"])
    control(env.endpoint, "POST", f"/_gpustack/quotas?code={P5_RESERVED_QUOTA}&value=64")

    settings = control(env.endpoint, "POST", "/_gpustack/sagemaker/offerings?price_multiplier=2")
    check(settings == {"price_multiplier": 2.0, "removed": [], "none": False, "split": False, "per_search_ids": False}, "price_multiplier control answers the settings")
    doubled = env.search()
    check(all(o["UpfrontFee"] == fee(o, utcnow(), Decimal(2)) for o in doubled), "price_multiplier doubles every fee")
    gone = first[0]["TrainingPlanOfferingId"]
    control(env.endpoint, "POST", f"/_gpustack/sagemaker/offerings?remove={gone}")
    check(gone not in {o["TrainingPlanOfferingId"] for o in env.search()}, "remove=<id> takes an offering out of searches")
    refused(env.sm.create_training_plan, "ValidationException", "buying a removed offering", "no longer available",
            TrainingPlanName="removed", TrainingPlanOfferingId=gone)
    control(env.endpoint, "POST", "/_gpustack/sagemaker/offerings?none=1")
    check(env.search() == [], "none=1: no offerings")
    check(http(env.endpoint, "POST", "/_gpustack/sagemaker/offerings?remove=cb-123")[0] == 400, "remove of a non-tpo id -> 400")
    check(
        control(env.endpoint, "POST", "/_gpustack/sagemaker/offerings?reset=1") == {"price_multiplier": 1.0, "removed": [], "none": False, "split": False, "per_search_ids": False},
        "reset=1 undoes the offering controls",
    )
    check(stable(env.search()) == stable(first), "offerings are back after reset")
    refused(env.search, "ValidationException", "a StartTimeAfter in the past", "in the future",
            StartTimeAfter=utcnow() - datetime.timedelta(hours=1))
    control(env.endpoint, "POST", "/_gpustack/sagemaker/offerings?split=1")
    split = env.search(DurationHours=96)
    blocks = [o["ReservedCapacityOfferings"] for o in split]
    check(
        bool(split) and all(len(b) == 2 and b[0]["EndTime"] < b[1]["StartTime"] for b in blocks)
        and all(o["DurationHours"] == sum(b["DurationHours"] for b in o["ReservedCapacityOfferings"]) for o in split)
        and all(b["InstanceType"] == P5 and b["InstanceCount"] == 2 for o in blocks for b in o),
        "split=1: two-block offerings with a gap, DurationHours the reserved hours, each block of the asked type and count",
    )
    check(all(o["DurationHours"] >= 48 for o in env.search(DurationHours=24)), "split=1: no split offering shorter than two days")
    control(env.endpoint, "POST", "/_gpustack/sagemaker/offerings?split=0&per_search_ids=1")
    a, b = env.search(), env.search()
    check(
        {o["TrainingPlanOfferingId"] for o in a}.isdisjoint({o["TrainingPlanOfferingId"] for o in b})
        and [o["ReservedCapacityOfferings"] for o in a] == [o["ReservedCapacityOfferings"] for o in b],
        "per_search_ids=1: the same offerings under new ids in every search",
    )
    control(env.endpoint, "POST", "/_gpustack/sagemaker/offerings?reset=1")


def plans(env: Env) -> dict[str, str]:
    refused(env.sm.create_training_plan, "ResourceNotFound", "an offering id no search returned", "not found",
            TrainingPlanName="nope", TrainingPlanOfferingId="tpo-" + "a" * 64)
    offerings = env.search()
    pick = next(o for o in offerings if o["ReservedCapacityOfferings"][0]["AvailabilityZone"] == AZS[0])
    refused(env.sm.create_training_plan, "ValidationException", "a tag key starting aws:", "reserved",
            TrainingPlanName="tags", TrainingPlanOfferingId=pick["TrainingPlanOfferingId"], Tags=[{"Key": "aws:x", "Value": "1"}])
    arn = env.sm.create_training_plan(
        TrainingPlanName="gpustack-p5", TrainingPlanOfferingId=pick["TrainingPlanOfferingId"],
        Tags=[{"Key": "gpustack:stack", "Value": "demo"}],
    )["TrainingPlanArn"]
    check(arn == f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-plan/gpustack-p5", "CreateTrainingPlan answers the plan ARN")
    purchases = control(env.endpoint, "GET", "/_gpustack/sagemaker/purchases")
    row = purchases["purchases"][0]
    check(
        purchases["count"] == 1 and row["name"] == "gpustack-p5" and row["arn"] == arn
        and row["offering_id"] == pick["TrainingPlanOfferingId"] and row["upfront_fee"] == pick["UpfrontFee"]
        and row["tags"] == {"gpustack:stack": "demo"} and row["availability_zone"] == AZS[0] and row["time"].endswith("Z"),
        "the purchase log records the purchase",
    )
    refused(env.sm.create_training_plan, "ValidationException", "buying an offering twice", "no longer available",
            TrainingPlanName="twice", TrainingPlanOfferingId=pick["TrainingPlanOfferingId"])
    other = next(o for o in offerings if o["TrainingPlanOfferingId"] != pick["TrainingPlanOfferingId"])
    refused(env.sm.create_training_plan, "ResourceInUse", "a plan name already used", "already exists",
            TrainingPlanName="gpustack-p5", TrainingPlanOfferingId=other["TrainingPlanOfferingId"])
    check(pick["TrainingPlanOfferingId"] not in {o["TrainingPlanOfferingId"] for o in env.search()}, "a bought offering leaves later searches")
    block = pick["ReservedCapacityOfferings"][0]
    described = env.sm.describe_training_plan(TrainingPlanName="gpustack-p5")
    summary = described["ReservedCapacitySummaries"][0]
    check(
        described["Status"] == "Scheduled" and described["TotalInstanceCount"] == 2 and described["AvailableInstanceCount"] == 2
        and described["InUseInstanceCount"] == 0 and described["TargetResources"] == ["hyperpod-cluster"]
        and described["UpfrontFee"] == pick["UpfrontFee"] and described["CurrencyCode"] == "USD"
        and described["StartTime"] == block["StartTime"] and described["EndTime"] == block["EndTime"]
        and described["DurationHours"] == 48,
        "DescribeTrainingPlan: Scheduled until its start, counts, fee, times",
    )
    check(
        summary["ReservedCapacityArn"] == f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:reserved-capacity/gpustack-p5-rc1"
        and summary["AvailabilityZone"] == AZS[0] and re.fullmatch(r"[a-z]{3}\d-az\d", summary["AvailabilityZoneId"])
        and summary["Status"] == "Scheduled" and summary["InstanceType"] == P5 and summary["TotalInstanceCount"] == 2
        and summary["ReservedCapacityType"] == "Instance",
        "ReservedCapacitySummary",
    )
    check(env.sm.describe_training_plan(TrainingPlanName=arn)["TrainingPlanName"] == "gpustack-p5", "DescribeTrainingPlan by ARN")
    refused(env.sm.describe_training_plan, "ResourceNotFound", "an unknown plan", "not found", TrainingPlanName="missing")

    job_arn = env.buy("gpustack-jobs", AZS[1], count=1, target="training-job")
    expired_arn = env.buy("gpustack-expired", AZS[0], count=1)
    rows = control(env.endpoint, "POST", "/_gpustack/sagemaker/plans?name=gpustack-expired&status=Expired")["plans"]
    check(rows == [{"account_id": ACCOUNT, "region": REGION, "name": "gpustack-expired", "arn": expired_arn, "status": "Expired", "forced": True}],
          "control forces a plan's status")
    check(env.sm.describe_training_plan(TrainingPlanName="gpustack-expired")["Status"] == "Expired", "a forced Expired plan describes Expired")
    check(http(env.endpoint, "POST", "/_gpustack/sagemaker/plans?name=nope&status=Expired")[0] == 400, "forcing an unknown plan -> 400")
    check(http(env.endpoint, "POST", "/_gpustack/sagemaker/plans?name=gpustack-p5&status=Gone")[0] == 400, "forcing an unknown status -> 400")
    refused(env.sm.create_training_plan, "ResourceInUse", "the name of an expired plan stays taken", "already exists",
            TrainingPlanName="gpustack-expired", TrainingPlanOfferingId=env.search(InstanceCount=1)[0]["TrainingPlanOfferingId"])

    names = lambda **kw: [p["TrainingPlanName"] for p in env.sm.list_training_plans(**kw)["TrainingPlanSummaries"]]  # noqa: E731
    check(sorted(names()) == ["gpustack-expired", "gpustack-jobs", "gpustack-p5"], "ListTrainingPlans lists every plan")
    check(names(Filters=[{"Name": "Status", "Value": "Expired"}]) == ["gpustack-expired"], "Filters Status=Expired")
    check(names(SortBy="TrainingPlanName", SortOrder="Descending") == ["gpustack-p5", "gpustack-jobs", "gpustack-expired"], "SortBy TrainingPlanName Descending")
    first_page = env.sm.list_training_plans(MaxResults=2, SortBy="TrainingPlanName")
    second_page = env.sm.list_training_plans(MaxResults=2, SortBy="TrainingPlanName", NextToken=first_page["NextToken"])
    check(
        [p["TrainingPlanName"] for p in first_page["TrainingPlanSummaries"] + second_page["TrainingPlanSummaries"]]
        == ["gpustack-expired", "gpustack-jobs", "gpustack-p5"] and "NextToken" not in second_page,
        "ListTrainingPlans pages with MaxResults/NextToken",
    )
    refused(env.sm.list_training_plans, "ValidationException", "a NextToken the emulator did not hand out", "pagination token", NextToken="bogus!")
    later = utcnow() + datetime.timedelta(days=30)
    check(names(StartTimeAfter=later) == [], "StartTimeAfter filters on the plan's start")
    summary = env.sm.list_training_plans(Filters=[{"Name": "Status", "Value": "Scheduled"}], SortBy="TrainingPlanName")["TrainingPlanSummaries"][1]
    check(
        summary["TrainingPlanArn"] == arn and summary["AvailableInstanceCount"] == 2 and summary["ReservedCapacitySummaries"][0]["AvailabilityZone"] == AZS[0],
        "TrainingPlanSummary carries counts and reserved capacities",
    )

    env.sm.add_tags(ResourceArn=arn, Tags=[{"Key": "gpustack:stack", "Value": "demo2"}, {"Key": "team", "Value": "ml"}])
    check(
        env.sm.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "gpustack:stack", "Value": "demo2"}, {"Key": "team", "Value": "ml"}],
        "AddTags adds or overwrites on a training plan",
    )
    env.sm.delete_tags(ResourceArn=arn, TagKeys=["team"])
    check(env.sm.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "gpustack:stack", "Value": "demo2"}], "DeleteTags on a training plan")
    refused(env.sm.add_tags, "ValidationException", "AddTags aws: key", "reserved", ResourceArn=arn, Tags=[{"Key": "aws:x", "Value": "1"}])
    refused(env.sm.add_tags, "ValidationException", "more than 50 tags", "50 tags",
            ResourceArn=arn, Tags=[{"Key": f"k{i}", "Value": "v"} for i in range(50)])
    refused(env.sm.list_tags, "ValidationException", "ListTags of an unknown training plan", "Could not find",
            ResourceArn=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-plan/missing")

    control(env.endpoint, "POST", f"/_gpustack/quotas?code={PLANS_QUOTA}&value=2")
    refused(env.sm.create_training_plan, "ResourceLimitExceeded", "a plan beyond 'Number of training plans per Region'",
            "Number of training plans per Region", TrainingPlanName="third", TrainingPlanOfferingId=env.search()[0]["TrainingPlanOfferingId"])
    control(env.endpoint, "POST", f"/_gpustack/quotas?code={PLANS_QUOTA}&value=25")
    control(env.endpoint, "POST", f"/_gpustack/quotas?code={P5_RESERVED_QUOTA}&value=3")
    refused(env.sm.create_training_plan, "ResourceLimitExceeded", "reserved instances beyond the reserved-capacity quota",
            "reserved capacity", TrainingPlanName="fourth", TrainingPlanOfferingId=env.search()[0]["TrainingPlanOfferingId"])
    control(env.endpoint, "POST", f"/_gpustack/quotas?code={P5_RESERVED_QUOTA}&value=64")
    return {"p5": arn, "jobs": job_arn, "expired": expired_arn}


# --- HyperPod --------------------------------------------------------------------------------------


def cluster_refusals(env: Env, plan_arns: dict[str, str]) -> None:
    base = {"ClusterName": "refused", "VpcConfig": env.vpc(AZS[0]), "InstanceGroups": [env.group("system")]}

    def create(**changes: Any) -> dict[str, Any]:
        kwargs = {**base, "Orchestrator": {"Eks": {"ClusterArn": env.eks_api}}, **changes}
        return {k: v for k, v in kwargs.items() if v is not None}

    refused(env.sm.create_cluster, "ValidationException", "Orchestrator without Eks or Slurm", "exactly one orchestrator", **create(Orchestrator={}))
    refused(env.sm.create_cluster, "NotImplemented", "a Slurm orchestrator configuration", **create(Orchestrator={"Slurm": {"SlurmConfigStrategy": "Managed"}}))
    refused(env.sm.create_cluster, "ValidationException", "an EKS cluster that does not exist", "does not exist",
            **create(Orchestrator={"Eks": {"ClusterArn": f"arn:aws:eks:{REGION}:{ACCOUNT}:cluster/nope"}}))
    refused(env.sm.create_cluster, "ValidationException", "an EKS cluster in another region", "account and Region",
            **create(Orchestrator={"Eks": {"ClusterArn": env.eks_east_arn}}))
    refused(env.sm.create_cluster, "ValidationException", "an EKS cluster in CONFIG_MAP mode", "API and API_AND_CONFIG_MAP",
            **create(Orchestrator={"Eks": {"ClusterArn": env.eks_configmap}}))
    refused(env.sm.create_cluster, "ValidationException", "an EKS cluster on Kubernetes 1.29", "1.30",
            **create(Orchestrator={"Eks": {"ClusterArn": env.eks_old}}))
    refused(env.sm.create_cluster, "ValidationException", "an EKS orchestrator without VpcConfig", "VpcConfig is required", **create(VpcConfig=None))
    refused(env.sm.create_cluster, "ValidationException", "an unknown subnet", "does not exist",
            **create(VpcConfig={"SecurityGroupIds": [env.sg], "Subnets": ["subnet-0123456789abcdef0"]}))
    refused(env.sm.create_cluster, "ValidationException", "an unknown security group", "does not exist",
            **create(VpcConfig={"SecurityGroupIds": ["sg-0123456789abcdef0"], "Subnets": [env.subnets[AZS[0]]]}))
    refused(env.sm.create_cluster, "ValidationException", "subnets of two VPCs", "same VPC",
            **create(VpcConfig={"SecurityGroupIds": [env.sg], "Subnets": [env.subnets[AZS[0]], env.other_subnet]}))
    refused(env.sm.create_cluster, "ValidationException", "a security group of another VPC", "not in the VPC",
            **create(VpcConfig={"SecurityGroupIds": [env.other_sg], "Subnets": [env.subnets[AZS[0]]]}))
    refused(env.sm.create_cluster, "ValidationException", "an empty InstanceGroups (model min 1)", "greater than or equal to 1",
            **create(InstanceGroups=[]))
    refused(env.sm.create_cluster, "ValidationException", "no InstanceGroups", "at least one", **create(InstanceGroups=None))
    refused(env.sm.create_cluster, "ValidationException", "two groups of one name", "more than once",
            **create(InstanceGroups=[env.group("a"), env.group("a")]))
    no_lifecycle = env.group("g")
    no_lifecycle.pop("LifeCycleConfig")
    refused(env.sm.create_cluster, "ValidationException", "a group without LifeCycleConfig", "LifeCycleConfig.SourceS3Uri is required",
            **create(InstanceGroups=[no_lifecycle]))
    refused(env.sm.create_cluster, "ValidationException", "LifeCycleConfig without OnCreate", "LifeCycleConfig.OnCreate is required",
            **create(InstanceGroups=[env.group("g", LifeCycleConfig={"SourceS3Uri": LIFECYCLE["SourceS3Uri"]})]))
    refused(env.sm.create_cluster, "ValidationException", "an execution role that does not exist", "does not exist",
            **create(InstanceGroups=[env.group("g", ExecutionRole=f"arn:aws:iam::{ACCOUNT}:role/missing")]))
    refused(env.sm.create_cluster, "ValidationException", "deep health checks on a CPU type", "GPU and Trainium",
            **create(InstanceGroups=[env.group("g", OnStartDeepHealthChecks=["InstanceStress"])]))
    refused(env.sm.create_cluster, "ValidationException", "deep health checks with custom taints", "custom taints",
            **create(InstanceGroups=[env.group("g", kind="ml.g5.xlarge", OnStartDeepHealthChecks=["InstanceStress"],
                                                KubernetesConfig={"Taints": [{"Key": "gpu", "Value": "yes", "Effect": "NoSchedule"}]})]))
    refused(env.sm.create_cluster, "ValidationException", "a label under a reserved prefix (node.kubernetes.io/)", "reserved prefix",
            **create(InstanceGroups=[env.group("g", KubernetesConfig={"Labels": {"node.kubernetes.io/role": "x"}})]))
    refused(env.sm.create_cluster, "ValidationException", "a taint under a reserved prefix (sagemaker.amazonaws.com/)", "reserved prefix",
            **create(InstanceGroups=[env.group("g", KubernetesConfig={"Taints": [{"Key": "sagemaker.amazonaws.com/x", "Effect": "NoSchedule"}]})]))
    refused(env.sm.create_cluster, "ValidationException", "21 instance groups (up to 20)", "up to 20",
            **create(InstanceGroups=[env.group(f"g{i}") for i in range(21)]))
    for ebs, what, text in (
        ({"RootVolume": True, "VolumeSizeInGB": 100, "VolumeKmsKeyId": "k"}, "a root volume with a size", "cannot be specified"),
        ({"RootVolume": True}, "a root volume without VolumeKmsKeyId", "VolumeKmsKeyId is required"),
        ({"VolumeKmsKeyId": "k"}, "a secondary volume without VolumeSizeInGB", "VolumeSizeInGB is required"),
    ):
        refused(env.sm.create_cluster, "ValidationException", what, text,
                **create(InstanceGroups=[env.group("g", InstanceStorageConfigs=[{"EbsVolumeConfig": ebs}])]))
    refused(env.sm.create_cluster, "ResourceLimitExceeded", "an EBS volume above the HyperPod EBS quota", "Maximum size of EBS volume",
            **create(InstanceGroups=[env.group("g", InstanceStorageConfigs=[{"EbsVolumeConfig": {"VolumeSizeInGB": 5000}}])]))
    refused(env.sm.create_cluster, "ValidationException", "InstanceType with InstanceRequirements", "mutually exclusive",
            **create(InstanceGroups=[env.group("g", InstanceRequirements={"InstanceTypes": ["ml.m5.xlarge"]})]))
    requirements = env.group("g", InstanceRequirements={"InstanceTypes": ["ml.m5.xlarge"]})
    requirements.pop("InstanceType")
    refused(env.sm.create_cluster, "NotImplemented", "InstanceRequirements", **create(InstanceGroups=[requirements]))
    refused(env.sm.create_cluster, "NotImplemented", "NodeProvisioningMode Continuous", **create(NodeProvisioningMode="Continuous"))
    refused(env.sm.create_cluster, "ResourceLimitExceeded", "5 ml.p5.48xlarge above 'for cluster usage' (4)", "ml.p5.48xlarge for cluster usage",
            **create(InstanceGroups=[env.group("g", kind=P5, count=5)]))
    control(env.endpoint, "POST", f"/_gpustack/quotas?code={PER_CLUSTER_QUOTA}&value=3")
    refused(env.sm.create_cluster, "ResourceLimitExceeded", "4 instances above 'Maximum number instances allowed per ... cluster' (3)",
            "allowed per SageMaker HyperPod cluster", **create(InstanceGroups=[env.group("a", count=2), env.group("b", count=2)]))
    control(env.endpoint, "POST", f"/_gpustack/quotas?code={PER_CLUSTER_QUOTA}&value=64")
    p5, jobs, expired = plan_arns["p5"], plan_arns["jobs"], plan_arns["expired"]
    refused(env.sm.create_cluster, "ValidationException", "a training plan that does not exist", "does not exist",
            **create(InstanceGroups=[env.group("g", kind=P5, count=1, TrainingPlanArn=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-plan/nope")]))
    refused(env.sm.create_cluster, "ValidationException", "an Expired training plan", "Scheduled or Active",
            **create(InstanceGroups=[env.group("g", kind=P5, count=1, TrainingPlanArn=expired)]))
    refused(env.sm.create_cluster, "ValidationException", "a training-job plan on a cluster", "not hyperpod-cluster",
            **create(VpcConfig=env.vpc(AZS[1]), InstanceGroups=[env.group("g", kind=P5, count=1, TrainingPlanArn=jobs)]))
    refused(env.sm.create_cluster, "ValidationException", "a plan of another instance type", "does not match the instance type",
            **create(InstanceGroups=[env.group("g", kind="ml.p5e.48xlarge", count=1, TrainingPlanArn=p5)]))
    refused(env.sm.create_cluster, "ValidationException", "subnets outside the plan's AZ", "Availability Zone us-west-2a",
            **create(VpcConfig=env.vpc(AZS[1]), InstanceGroups=[env.group("g", kind=P5, count=1, TrainingPlanArn=p5)]))
    refused(env.sm.create_cluster, "ValidationException", "a plan's AZ matching only one of the subnets", "subnets are in us-west-2a, us-west-2b",
            **create(VpcConfig=env.vpc(AZS[0], AZS[1]), InstanceGroups=[env.group("g", kind=P5, count=1, TrainingPlanArn=p5)]))
    refused(env.sm.create_cluster, "ValidationException", "more instances than the plan has", "available instances",
            **create(InstanceGroups=[env.group("g", kind=P5, count=3, TrainingPlanArn=p5)]))
    refused(env.sm.create_cluster, "ValidationException", "two groups overflowing one plan together", "are available",
            **create(InstanceGroups=[env.group("a", kind=P5, count=2, TrainingPlanArn=p5), env.group("b", kind=P5, count=1, TrainingPlanArn=p5)]))
    check(env.sm.list_clusters()["ClusterSummaries"] == [], "no refused request left a cluster behind")


def clusters(env: Env, plan_arns: dict[str, str]) -> None:
    p5 = plan_arns["p5"]
    labels = {"gpustack/pool": "gpu"}
    taints = [{"Key": "nvidia.com/gpu", "Value": "true", "Effect": "NoSchedule"}]
    arn = env.create(
        "gpustack-hp",
        [
            env.group("system"),
            env.group(
                "gpu", kind=P5, count=2, TrainingPlanArn=p5, ThreadsPerCore=1,
                KubernetesConfig={"Labels": labels, "Taints": taints},
                InstanceStorageConfigs=[{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}],
            ),
        ],
        Tags=[{"Key": "gpustack:stack", "Value": "demo"}],
    )
    check(bool(CLUSTER_ARN.match(arn)) and not arn.endswith("gpustack-hp"), "ClusterArn is .../cluster/<12 [a-z0-9]> (an id, not the name)")
    described = env.describe("gpustack-hp")
    groups = {g["InstanceGroupName"]: g for g in described["InstanceGroups"]}
    check(
        described["ClusterStatus"] == "Creating" and described["Orchestrator"] == {"Eks": {"ClusterArn": env.eks_api}}
        and described["NodeRecovery"] == "Automatic" and described["VpcConfig"] == env.vpc(AZS[0])
        and described["ClusterArn"] == arn and described["ClusterName"] == "gpustack-hp",
        "DescribeCluster right after create: Creating, Orchestrator kept, NodeRecovery Automatic",
    )
    check(
        all(g["Status"] == "Creating" and g["CurrentCount"] == 0 for g in groups.values())
        and groups["system"]["TargetCount"] == 1 and groups["gpu"]["TargetCount"] == 2
        and "ThreadsPerCore" not in groups["system"] and groups["gpu"]["ThreadsPerCore"] == 1,
        "groups are Creating with CurrentCount 0; ThreadsPerCore optional",
    )
    gpu = groups["gpu"]
    check(
        gpu["TrainingPlanArn"] == p5 and gpu["TrainingPlanStatus"] == "Scheduled"
        and gpu["KubernetesConfig"] == {"CurrentLabels": {}, "DesiredLabels": labels, "CurrentTaints": [], "DesiredTaints": taints}
        and gpu["InstanceStorageConfigs"] == [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}]
        and gpu["LifeCycleConfig"] == LIFECYCLE and gpu["ExecutionRole"] == env.role,
        "group details: training plan and its status, desired labels/taints, storage, lifecycle",
    )
    entries = env.eks.list_access_entries(clusterName="hp-eks")["accessEntries"]
    slr = f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/hyperpod.sagemaker.amazonaws.com/AWSServiceRoleForSageMakerHyperPod"
    check(slr in entries and env.role in entries, "HyperPod makes EKS access entries for its service-linked role and the execution role")
    check(
        env.eks.describe_access_entry(clusterName="hp-eks", principalArn=env.role)["accessEntry"]["type"] == "HYPERPOD_LINUX"
        and [p["policyArn"].rsplit("/", 1)[1] for p in env.eks.list_associated_access_policies(clusterName="hp-eks", principalArn=slr)["associatedAccessPolicies"]]
        == ["AmazonSagemakerHyperpodClusterPolicy"],
        "the execution role's entry is HYPERPOD_LINUX; the SLR's has AmazonSagemakerHyperpodClusterPolicy",
    )
    check(env.iam.get_role(RoleName="AWSServiceRoleForSageMakerHyperPod")["Role"]["Arn"] == slr, "the service-linked role exists in IAM")
    code, status, _ = error(env.eks.create_access_entry, clusterName="hp-eks", principalArn=env.role, type="STANDARD")
    check((code, status) == ("ResourceInUseException", 409), "a stack's own access entry for the execution role -> 409 ResourceInUseException")
    refused(env.sm.update_cluster, "ConflictException", "UpdateCluster while Creating", "must be InService",
            ClusterName="gpustack-hp", NodeRecovery="None")
    refused(env.sm.delete_cluster, "ConflictException", "DeleteCluster while Creating", "cannot be deleted now", ClusterName="gpustack-hp")
    refused(env.sm.create_cluster, "ResourceInUse", "a cluster name already used", "already exists",
            ClusterName="gpustack-hp", Orchestrator={"Eks": {"ClusterArn": env.eks_api}}, VpcConfig=env.vpc(AZS[0]), InstanceGroups=[env.group("x")])
    env.wait_status("gpustack-hp", "InService")
    groups = env.groups("gpustack-hp")
    check(
        groups["system"]["Status"] == "InService" and groups["system"]["CurrentCount"] == 1
        and groups["gpu"]["Status"] == "InService" and groups["gpu"]["CurrentCount"] == 0
        and groups["gpu"]["KubernetesConfig"]["CurrentLabels"] == labels and groups["gpu"]["KubernetesConfig"]["CurrentTaints"] == taints,
        "InService: CurrentCount reaches TargetCount, except on a Scheduled plan (0 until it is Active); current labels/taints",
    )
    plan = env.sm.describe_training_plan(TrainingPlanName="gpustack-p5")
    check(plan["InUseInstanceCount"] == 2 and plan["AvailableInstanceCount"] == 0, "the plan counts the group's instances as in use")
    control(env.endpoint, "POST", "/_gpustack/sagemaker/plans?name=gpustack-p5&status=Active")
    groups = env.groups("gpustack-hp")
    check(groups["gpu"]["CurrentCount"] == 2 and groups["gpu"]["TrainingPlanStatus"] == "Active", "an Active plan runs the group's instances")
    nodes = env.sm.list_cluster_nodes(ClusterName="gpustack-hp")["ClusterNodeSummaries"]
    check(
        len(nodes) == 3 and all(re.fullmatch(r"i-[0-9a-f]{17}", n["InstanceId"]) and n["InstanceStatus"]["Status"] == "Running" for n in nodes)
        and sorted(n["InstanceGroupName"] for n in nodes) == ["gpu", "gpu", "system"],
        "ListClusterNodes lists CurrentCount Running nodes",
    )
    check(
        [n["InstanceGroupName"] for n in env.sm.list_cluster_nodes(ClusterName=arn, InstanceGroupNameContains="gp")["ClusterNodeSummaries"]] == ["gpu", "gpu"],
        "ListClusterNodes by ARN and InstanceGroupNameContains",
    )
    node = env.sm.describe_cluster_node(ClusterName="gpustack-hp", NodeId=nodes[0]["InstanceId"])["NodeDetails"]
    check(node["InstanceId"] == nodes[0]["InstanceId"] and node["LifeCycleConfig"] == LIFECYCLE, "DescribeClusterNode")
    refused(env.sm.describe_cluster_node, "ResourceNotFound", "an unknown node", "not found", ClusterName="gpustack-hp", NodeId="i-0123456789abcdef0")
    refused(env.sm.create_cluster, "ResourceLimitExceeded", "p5 across clusters above 'for cluster usage'", "current utilization of 2 Instances",
            ClusterName="second", Orchestrator={"Eks": {"ClusterArn": env.eks_api}}, VpcConfig=env.vpc(AZS[0]),
            InstanceGroups=[env.group("g", kind=P5, count=3)])

    env.sm.add_tags(ResourceArn=arn, Tags=[{"Key": "team", "Value": "ml"}])
    check(
        env.sm.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "gpustack:stack", "Value": "demo"}, {"Key": "team", "Value": "ml"}],
        "cluster tags: CreateCluster Tags + AddTags",
    )
    env.sm.delete_tags(ResourceArn=arn, TagKeys=["team"])
    check(env.sm.list_tags(ResourceArn=arn)["Tags"] == [{"Key": "gpustack:stack", "Value": "demo"}], "DeleteTags on a cluster")
    refused(env.sm.list_tags, "ValidationException", "ListTags of an unknown cluster", "Could not find",
            ResourceArn=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/abcdefghijkl")

    env.create(
        "gpustack-aux",
        [env.group("cpu", ExecutionRole=env.role2, LifeCycleConfig={"SourceS3Uri": "s3://team-lifecycle/base/", "OnCreate": "on_create.sh"})],
        zone=AZS[1],
    )
    check(env.groups("gpustack-aux")["cpu"]["LifeCycleConfig"]["SourceS3Uri"] == "s3://team-lifecycle/base/",
          "a lifecycle bucket not named sagemaker-* is accepted (the managed policy's limit, not an API rule)")
    check(env.role2 in env.eks.list_access_entries(clusterName="hp-eks")["accessEntries"], "a second cluster's execution role gets its entry")
    summaries = env.sm.list_clusters()["ClusterSummaries"]
    check(
        [s["ClusterName"] for s in summaries] == ["gpustack-hp", "gpustack-aux"]
        and summaries[0]["TrainingPlanArns"] == [p5] and "TrainingPlanArns" not in summaries[1],
        "ListClusters (creation order) with TrainingPlanArns",
    )
    check([s["ClusterName"] for s in env.sm.list_clusters(TrainingPlanArn=p5)["ClusterSummaries"]] == ["gpustack-hp"], "ListClusters TrainingPlanArn")
    check([s["ClusterName"] for s in env.sm.list_clusters(NameContains="aux")["ClusterSummaries"]] == ["gpustack-aux"], "ListClusters NameContains")
    check(
        [s["ClusterName"] for s in env.sm.list_clusters(SortBy="NAME", SortOrder="Descending")["ClusterSummaries"]] == ["gpustack-hp", "gpustack-aux"],
        "ListClusters SortBy NAME Descending",
    )
    first = env.sm.list_clusters(MaxResults=1)
    second = env.sm.list_clusters(MaxResults=1, NextToken=first["NextToken"])
    check(
        [s["ClusterName"] for s in first["ClusterSummaries"] + second["ClusterSummaries"]] == ["gpustack-hp", "gpustack-aux"] and "NextToken" not in second,
        "ListClusters pages",
    )
    update_refusals(env)
    updates(env, p5)
    deletes(env)


def update_refusals(env: Env) -> None:
    name = "gpustack-hp"
    refused(env.sm.update_cluster, "ResourceNotFound", "UpdateCluster of an unknown cluster", "not found", ClusterName="nope", NodeRecovery="None")
    refused(env.sm.describe_cluster, "ResourceNotFound", "DescribeCluster of an unknown cluster", "not found", ClusterName="nope")
    refused(env.sm.describe_cluster, "ResourceNotFound", "DescribeCluster of an unknown cluster ARN", "not found",
            ClusterName=f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:cluster/abcdefghijkl")
    refused(env.sm.delete_cluster, "ResourceNotFound", "DeleteCluster of an unknown cluster", "not found", ClusterName="nope")
    refused(env.sm.list_cluster_nodes, "ResourceNotFound", "ListClusterNodes of an unknown cluster", "not found", ClusterName="nope")
    for member, value in (
        ("InstanceType", "ml.m5.2xlarge"),
        ("ExecutionRole", env.role2),
        ("ThreadsPerCore", 2),
        ("OverrideVpcConfig", env.vpc(AZS[0])),
    ):
        refused(env.sm.update_cluster, "ValidationException", f"changing an existing group's {member}", "cannot be changed",
                ClusterName=name, InstanceGroups=[env.group("system", **{member: value})])
    refused(env.sm.update_cluster, "ValidationException", "changing the EKS cluster", "cannot be changed",
            ClusterName=name, Orchestrator={"Eks": {"ClusterArn": env.eks_old}})
    refused(env.sm.update_cluster, "ValidationException", "a new group with InstanceCount 0", "at least 1",
            ClusterName=name, InstanceGroups=[env.group("new", count=0)])
    refused(env.sm.update_cluster, "ValidationException", "deleting a group the cluster lacks", "has no instance group",
            ClusterName=name, InstanceGroupsToDelete=["nope"])
    refused(env.sm.update_cluster, "ValidationException", "deleting a group also listed", "both in InstanceGroups",
            ClusterName=name, InstanceGroups=[env.group("system", count=2)], InstanceGroupsToDelete=["system"])
    refused(env.sm.update_cluster, "ValidationException", "deleting every group", "at least one instance group",
            ClusterName=name, InstanceGroupsToDelete=["system", "gpu"])
    refused(env.sm.update_cluster, "ValidationException", "an update that changes nothing", "does not change", ClusterName=name)
    refused(env.sm.update_cluster, "ValidationException", "scaling a plan group beyond the plan", "available instances",
            ClusterName=name, InstanceGroups=[{**env.groups_spec(name, "gpu"), "InstanceCount": 3}])
    refused(env.sm.update_cluster, "ResourceLimitExceeded", "a new group above 'for cluster usage'", "ml.p5.48xlarge for cluster usage",
            ClusterName=name, InstanceGroups=[env.group("more-p5", kind=P5, count=3)])


def updates(env: Env, p5: str) -> None:
    name = "gpustack-hp"
    new_labels = {"gpustack/pool": "system"}
    arn = env.sm.update_cluster(
        ClusterName=name,
        InstanceGroups=[env.group("system", count=2, KubernetesConfig={"Labels": new_labels}), env.group("extra")],
    )["ClusterArn"]
    described = env.describe(name)
    groups = {g["InstanceGroupName"]: g for g in described["InstanceGroups"]}
    check(arn == described["ClusterArn"] and described["ClusterStatus"] == "Updating", "UpdateCluster -> Updating")
    check(
        groups["system"]["Status"] == "Updating" and groups["system"]["CurrentCount"] == 1 and groups["system"]["TargetCount"] == 2
        and groups["system"]["KubernetesConfig"] == {"CurrentLabels": {}, "DesiredLabels": new_labels, "CurrentTaints": [], "DesiredTaints": []}
        and groups["extra"]["Status"] == "Creating" and groups["extra"]["CurrentCount"] == 0
        and groups["gpu"]["Status"] == "InService",
        "while Updating: changed group Updating at its old count and labels, new group Creating, others InService",
    )
    refused(env.sm.update_cluster, "ConflictException", "UpdateCluster while Updating", "must be InService", ClusterName=name, NodeRecovery="None")
    refused(env.sm.delete_cluster, "ConflictException", "DeleteCluster while Updating", "cannot be deleted now", ClusterName=name)
    env.wait_status(name, "InService")
    groups = env.groups(name)
    check(
        groups["system"]["CurrentCount"] == 2 and groups["system"]["KubernetesConfig"]["CurrentLabels"] == new_labels
        and groups["extra"]["CurrentCount"] == 1 and groups["extra"]["Status"] == "InService",
        "after the update: counts and labels current",
    )
    env.sm.update_cluster(ClusterName=name, InstanceGroupsToDelete=["extra"], NodeRecovery="None")
    check(env.groups(name)["extra"]["Status"] == "Deleting", "InstanceGroupsToDelete: the group is Deleting")
    env.wait_status(name, "InService")
    check("extra" not in env.groups(name) and env.describe(name)["NodeRecovery"] == "None", "the deleted group is gone; NodeRecovery updated")
    control(env.endpoint, "POST", "/_gpustack/sagemaker?omit_target_count=1")
    check(all("TargetCount" not in g and g["InstanceGroupName"] for g in env.describe(name)["InstanceGroups"]),
          "omit_target_count=1: DescribeCluster groups without TargetCount (optional in ClusterInstanceGroupDetails)")
    control(env.endpoint, "POST", "/_gpustack/sagemaker?omit_target_count=0")
    env.sm.update_cluster(ClusterName=name, InstanceGroups=[{**env.groups_spec(name, "gpu"), "InstanceCount": 1}])
    env.wait_status(name, "InService")
    check(
        env.sm.describe_training_plan(TrainingPlanName="gpustack-p5")["AvailableInstanceCount"] == 1 and env.groups(name)["gpu"]["CurrentCount"] == 1,
        "scaling a plan group down frees plan capacity",
    )
    control(env.endpoint, "POST", "/_gpustack/sagemaker/plans?name=gpustack-p5&status=Expired")
    env.sm.update_cluster(ClusterName=name, InstanceGroups=[{**env.groups_spec(name, "gpu"), "InstanceCount": 0}])
    env.wait_status(name, "InService")
    check(env.groups(name)["gpu"]["TargetCount"] == 0, "a group on an expired plan can still scale down")
    refused(env.sm.update_cluster, "ValidationException", "scaling up on an Expired plan", "Scheduled or Active",
            ClusterName=name, InstanceGroups=[{**env.groups_spec(name, "gpu"), "InstanceCount": 1}])
    control(env.endpoint, "POST", "/_gpustack/sagemaker/plans?name=gpustack-p5&status=auto")


def deletes(env: Env) -> None:
    arn = env.sm.delete_cluster(ClusterName="gpustack-aux")["ClusterArn"]
    check(bool(CLUSTER_ARN.match(arn)) and env.describe("gpustack-aux")["ClusterStatus"] == "Deleting", "DeleteCluster -> Deleting")
    refused(env.sm.delete_cluster, "ConflictException", "DeleteCluster while Deleting", "cannot be deleted now", ClusterName="gpustack-aux")
    refused(env.sm.update_cluster, "ConflictException", "UpdateCluster while Deleting", "must be InService", ClusterName="gpustack-aux", NodeRecovery="None")
    refused(env.sm.create_cluster, "ResourceInUse", "the name of a Deleting cluster", "already exists",
            ClusterName="gpustack-aux", Orchestrator={"Eks": {"ClusterArn": env.eks_api}}, VpcConfig=env.vpc(AZS[0]), InstanceGroups=[env.group("x")])
    wait_for("gpustack-aux gone", lambda: error(env.sm.describe_cluster, ClusterName="gpustack-aux")[0] == "ResourceNotFound")
    check("gpustack-aux" not in [s["ClusterName"] for s in env.sm.list_clusters()["ClusterSummaries"]], "a deleted cluster leaves ListClusters")
    check(env.role2 not in env.eks.list_access_entries(clusterName="hp-eks")["accessEntries"], "a gone cluster's execution-role entry goes too")
    check(env.role in env.eks.list_access_entries(clusterName="hp-eks")["accessEntries"], "an entry another HyperPod cluster uses stays")
    env.create("gpustack-aux", [env.group("cpu")], zone=AZS[1])
    check(env.describe("gpustack-aux")["ClusterStatus"] == "Creating", "the name is free again once the cluster is gone")


def groups_spec(self: Env, cluster: str, group: str) -> dict[str, Any]:
    """An UpdateCluster spec that repeats a group as it is."""
    g = self.groups(cluster)[group]
    spec = {k: g[k] for k in ("InstanceGroupName", "InstanceType", "LifeCycleConfig", "ExecutionRole") }
    spec["InstanceCount"] = g["TargetCount"]
    for member in ("ThreadsPerCore", "InstanceStorageConfigs", "OnStartDeepHealthChecks", "TrainingPlanArn", "OverrideVpcConfig"):
        if member in g:
            spec[member] = g[member]
    if "KubernetesConfig" in g:
        spec["KubernetesConfig"] = {"Labels": g["KubernetesConfig"]["DesiredLabels"], "Taints": g["KubernetesConfig"]["DesiredTaints"]}
    return spec


Env.groups_spec = groups_spec  # type: ignore[attr-defined]


# --- quotas, timing, request log, reset ------------------------------------------------------------


def quotas(env: Env) -> None:
    quota = env.sq.get_service_quota(ServiceCode="sagemaker", QuotaCode=P5_QUOTA)["Quota"]
    check(
        quota["QuotaName"] == "ml.p5.48xlarge for cluster usage" and quota["Value"] == 4.0 and quota["ServiceName"] == "Amazon SageMaker AI"
        and quota["QuotaArn"] == f"arn:aws:servicequotas:{REGION}:{ACCOUNT}:sagemaker/{P5_QUOTA}" and quota["Unit"] == "None",
        "GetServiceQuota sagemaker ml.p5.48xlarge for cluster usage = 4",
    )
    check(env.sq.get_aws_default_service_quota(ServiceCode="sagemaker", QuotaCode=P5_QUOTA)["Quota"]["Value"] == 0.0, "its AWS default is 0")
    check(error(env.sq.get_service_quota, ServiceCode="sagemaker", QuotaCode="L-417A185B")[0] == "NoSuchResourceException",
          "an EC2 quota code under ServiceCode sagemaker -> NoSuchResourceException")
    listed, token = [], None
    while True:
        page = env.sq.list_service_quotas(ServiceCode="sagemaker", MaxResults=10, **({"NextToken": token} if token else {}))
        listed += page["Quotas"]
        token = page.get("NextToken")
        if not token:
            break
    names = {q["QuotaName"]: q for q in listed}
    check(
        len(listed) > 10 and "ml.p5.48xlarge for cluster usage" in names and "ml.trn2.48xlarge for cluster usage" in names
        and "Maximum number instances allowed per SageMaker HyperPod cluster" in names
        and "Total number of instances allowed across SageMaker HyperPod clusters" in names
        and "Number of training plans per Region" in names and len({q["QuotaCode"] for q in listed}) == len(listed),
        "ListServiceQuotas sagemaker pages through every quota",
    )
    defaults = env.sq.list_aws_default_service_quotas(ServiceCode="sagemaker", MaxResults=100)["Quotas"]
    check(len(defaults) == len(listed) and {q["QuotaArn"].split(":")[4] for q in defaults} == {""}, "ListAWSDefaultServiceQuotas sagemaker")
    check([q["QuotaCode"] for q in env.sq.list_service_quotas(ServiceCode="sagemaker", QuotaCode=P5_QUOTA)["Quotas"]] == [P5_QUOTA],
          "ListServiceQuotas QuotaCode")
    check(error(env.sq.list_service_quotas, ServiceCode="sagemaker", NextToken="Zm9vYmFy")[0] == "InvalidPaginationTokenException",
          "a foreign NextToken -> InvalidPaginationTokenException")
    rows = control(env.endpoint, "GET", "/_gpustack/quotas?service=sagemaker")["quotas"]
    check({r["code"] for r in rows} == {q["QuotaCode"] for q in listed} and all(r["service"] == "sagemaker" for r in rows),
          "GET /_gpustack/quotas?service=sagemaker lists them")
    check({r["service"] for r in control(env.endpoint, "GET", "/_gpustack/quotas")["quotas"]} == {"ec2"}, "GET /_gpustack/quotas stays ec2")
    control(env.endpoint, "POST", f"/_gpustack/quotas?code={P5_QUOTA}&value=16")
    check(env.sq.get_service_quota(ServiceCode="sagemaker", QuotaCode=P5_QUOTA)["Quota"]["Value"] == 16.0, "the control endpoint sets a SageMaker quota")
    control(env.endpoint, "POST", f"/_gpustack/quotas?code={P5_QUOTA}&missing=1")
    check(P5_QUOTA not in {q["QuotaCode"] for q in env.sq.list_service_quotas(ServiceCode="sagemaker")["Quotas"]},
          "ListServiceQuotas leaves out a quota without applied value")
    control(env.endpoint, "POST", f"/_gpustack/quotas?code={P5_QUOTA}&missing=0&value=4")
    check(len(env.sq.list_service_quotas(ServiceCode="ec2")["Quotas"]) == 18, "ListServiceQuotas ec2")


def consistency(env: Env) -> None:
    check(control(env.endpoint, "POST", "/_gpustack/sagemaker/consistency?list_lag_ms=60000") == {"list_lag_ms": 60000, "payment_ms": 0, "fail_payment": 0},
          "POST /_gpustack/sagemaker/consistency sets the list lag")
    offering = env.search(InstanceType=P5, InstanceCount=1, DurationHours=24, TargetResources=["hyperpod-cluster"])[0]
    env.sm.create_training_plan(TrainingPlanName="gpustack-lagging", TrainingPlanOfferingId=offering["TrainingPlanOfferingId"])
    names = [p["TrainingPlanName"] for p in env.sm.list_training_plans()["TrainingPlanSummaries"]]
    check("gpustack-lagging" not in names and env.sm.describe_training_plan(TrainingPlanName="gpustack-lagging")["TrainingPlanName"] == "gpustack-lagging",
          "list_lag_ms: a new plan is described at once but not listed yet")
    control(env.endpoint, "POST", "/_gpustack/sagemaker/consistency?list_lag_ms=0")
    check("gpustack-lagging" in [p["TrainingPlanName"] for p in env.sm.list_training_plans()["TrainingPlanSummaries"]],
          "list_lag_ms=0: listed")
    check(http(env.endpoint, "POST", "/_gpustack/sagemaker/consistency?bogus=1")[0] == 400, "an unknown consistency setting -> 400")
    control(env.endpoint, "POST", "/_gpustack/sagemaker/consistency?payment_ms=60000")
    offering = env.search(InstanceCount=1, DurationHours=24)[0]
    env.sm.create_training_plan(TrainingPlanName="gpustack-unpaid", TrainingPlanOfferingId=offering["TrainingPlanOfferingId"])
    check(env.sm.describe_training_plan(TrainingPlanName="gpustack-unpaid")["Status"] == "Pending", "payment_ms: a new plan is Pending")
    control(env.endpoint, "POST", "/_gpustack/sagemaker/consistency?payment_ms=0&fail_payment=1")
    offering = env.search(InstanceCount=1, DurationHours=24)[0]
    env.sm.create_training_plan(TrainingPlanName="gpustack-failed", TrainingPlanOfferingId=offering["TrainingPlanOfferingId"])
    check(env.sm.describe_training_plan(TrainingPlanName="gpustack-failed")["Status"] == "Failed"
          and offering["TrainingPlanOfferingId"] in {o["TrainingPlanOfferingId"] for o in env.search(InstanceCount=1, DurationHours=24)},
          "fail_payment=1: the plan is Failed and its offering stays on sale")
    control(env.endpoint, "POST", "/_gpustack/sagemaker/consistency?fail_payment=0")
    control(env.endpoint, "POST", "/_gpustack/sagemaker/offerings?split=1")
    offering = env.search(InstanceCount=1, DurationHours=48)[0]
    env.sm.create_training_plan(TrainingPlanName="gpustack-split", TrainingPlanOfferingId=offering["TrainingPlanOfferingId"])
    plan = env.sm.describe_training_plan(TrainingPlanName="gpustack-split")
    summaries = plan["ReservedCapacitySummaries"]
    check(
        len(summaries) == 2 and summaries[1]["ReservedCapacityArn"].endswith("-rc2")
        and plan["StartTime"] == summaries[0]["StartTime"] and plan["EndTime"] == summaries[1]["EndTime"],
        "a plan bought from a split offering has one summary per block and spans them",
    )
    control(env.endpoint, "POST", "/_gpustack/sagemaker/offerings?reset=1")


def timing(env: Env) -> None:
    check(control(env.endpoint, "GET", "/_gpustack/sagemaker") == {"cluster_create_ms": 300, "cluster_update_ms": 300, "cluster_delete_ms": 300, "omit_target_count": 0},
          "GET /_gpustack/sagemaker answers the timings")
    check(
        control(env.endpoint, "POST", "/_gpustack/sagemaker?cluster_update_ms=250") == {"cluster_create_ms": 300, "cluster_update_ms": 250, "cluster_delete_ms": 300, "omit_target_count": 0},
        "POST sets a subset and answers all four",
    )
    check(http(env.endpoint, "POST", "/_gpustack/sagemaker?cluster_create_ms=-1")[0] == 400, "a negative timing -> 400")
    check(http(env.endpoint, "POST", "/_gpustack/sagemaker?bogus_ms=1")[0] == 400, "an unknown timing -> 400")


def request_log(env: Env) -> None:
    control(env.endpoint, "POST", "/_gpustack/requests/reset")
    env.sm.list_training_plans()
    check(control(env.endpoint, "GET", "/_gpustack/requests") == [{"service": "sagemaker", "region": REGION, "action": "ListTrainingPlans"}],
          "the request log names SageMaker actions")


def reset(env: Env) -> None:
    control(env.endpoint, "POST", "/_gpustack/sagemaker/offerings?none=1")
    control(env.endpoint, "POST", f"/_gpustack/quotas?code={P5_QUOTA}&value=1")
    control(env.endpoint, "POST", "/moto-api/reset")
    check(env.sm.list_clusters()["ClusterSummaries"] == [], "moto reset clears HyperPod clusters")
    check(env.sm.list_training_plans()["TrainingPlanSummaries"] == [], "moto reset clears training plans")
    check(control(env.endpoint, "GET", "/_gpustack/sagemaker/purchases") == {"count": 0, "purchases": []}, "moto reset clears the purchase log")
    check(control(env.endpoint, "GET", "/_gpustack/sagemaker/offerings") == {"price_multiplier": 1.0, "removed": [], "none": False, "split": False, "per_search_ids": False},
          "moto reset clears the offering controls")
    check(control(env.endpoint, "GET", "/_gpustack/sagemaker") == {"cluster_create_ms": 1500, "cluster_update_ms": 500, "cluster_delete_ms": 500, "omit_target_count": 0},
          "moto reset restores the default timings")
    check(env.sq.get_service_quota(ServiceCode="sagemaker", QuotaCode=P5_QUOTA)["Quota"]["Value"] == 4.0, "moto reset restores SageMaker quotas")
    control(env.endpoint, "POST", "/moto-api/reset")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True, help="e.g. http://127.0.0.1:PORT")
    args = parser.parse_args()
    try:
        env = Env(args.endpoint)
        validation(env)
        searches(env)
        plan_arns = plans(env)
        cluster_refusals(env, plan_arns)
        clusters(env, plan_arns)
        quotas(env)
        consistency(env)
        timing(env)
        request_log(env)
        reset(env)
    except Exception as e:  # noqa: BLE001
        print(f"FAIL {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print("selftest_sagemaker: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
