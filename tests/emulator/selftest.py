"""Quick end-to-end check of a running emulator through boto3 (starts nothing itself).

    tests/emulator/.venv/bin/python tests/emulator/selftest.py --endpoint http://127.0.0.1:PORT

Exits non-zero on the first failure. Clears the request log as it goes.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request
import uuid

import boto3
from botocore.exceptions import ClientError

REGION = "us-west-2"


def error_code(call, **kwargs) -> str | None:
    try:
        call(**kwargs)
    except ClientError as e:
        return e.response["Error"]["Code"]
    return None


def check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)
    print(f"ok   {what}")


def http(endpoint: str, method: str, path: str):
    req = urllib.request.Request(endpoint + path, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def placement_groups(ec2, ec2_other_region) -> None:
    stack = f"selftest-{uuid.uuid4().hex[:8]}"
    name = f"{stack}-pg"
    tags = [{"Key": "gpustack:stack", "Value": stack}, {"Key": "Name", "Value": name}]
    created = ec2.create_placement_group(
        GroupName=name,
        Strategy="cluster",
        TagSpecifications=[{"ResourceType": "placement-group", "Tags": tags}],
    )["PlacementGroup"]
    gid = created["GroupId"]
    check(gid.startswith("pg-") and len(gid) == 20, f"create returns a pg- id ({gid})")
    check(
        created["GroupArn"] == f"arn:aws:ec2:{REGION}:123456789012:placement-group/{name}",
        "create returns GroupArn",
    )
    check(created["State"] == "available" and created["Strategy"] == "cluster", "state/strategy")
    check(sorted(created["Tags"], key=lambda t: t["Key"]) == sorted(tags, key=lambda t: t["Key"]), "create returns tags")

    part = ec2.create_placement_group(GroupName=f"{stack}-part", Strategy="partition", PartitionCount=3)
    check(part["PlacementGroup"]["PartitionCount"] == 3, "partition count")
    spread = ec2.create_placement_group(GroupName=f"{stack}-spread", Strategy="spread")
    check(spread["PlacementGroup"]["SpreadLevel"] == "rack", "spread level defaults to rack")

    found = ec2.describe_placement_groups(
        Filters=[{"Name": "tag:gpustack:stack", "Values": [stack]}]
    )["PlacementGroups"]
    check([g["GroupId"] for g in found] == [gid], "describe by tag:gpustack:stack filter")
    check(found[0]["Tags"] and found[0]["GroupName"] == name, "describe returns name and tags")
    by_strategy = ec2.describe_placement_groups(
        Filters=[{"Name": "strategy", "Values": ["partition"]}, {"Name": "group-name", "Values": [f"{stack}-*"]}]
    )["PlacementGroups"]
    check([g["GroupName"] for g in by_strategy] == [f"{stack}-part"], "describe by strategy + wildcard group-name")
    check(
        [g["GroupName"] for g in ec2.describe_placement_groups(GroupIds=[gid])["PlacementGroups"]] == [name],
        "describe by GroupIds",
    )
    check(
        len(ec2.describe_placement_groups(GroupNames=[name, f"{stack}-part"])["PlacementGroups"]) == 2,
        "describe by GroupNames",
    )
    check(
        ec2_other_region.describe_placement_groups(Filters=[{"Name": "tag:gpustack:stack", "Values": [stack]}])[
            "PlacementGroups"
        ]
        == [],
        "groups are per region",
    )

    ec2.create_tags(Resources=[gid], Tags=[{"Key": "extra", "Value": "1"}])
    via_tags = ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [gid]}])["Tags"]
    check(
        {(t["Key"], t["ResourceType"]) for t in via_tags}
        == {("gpustack:stack", "placement-group"), ("Name", "placement-group"), ("extra", "placement-group")},
        "generic CreateTags/DescribeTags on a pg- id",
    )
    ec2.delete_tags(Resources=[gid], Tags=[{"Key": "extra"}])
    got = ec2.describe_placement_groups(Filters=[{"Name": "tag-key", "Values": ["extra"]}])
    check(got["PlacementGroups"] == [], "generic DeleteTags on a pg- id; tag-key filter")
    # EC2 API Reference (botocore 1.44.5 DescribePlacementGroups Filters doc) lists no tag-value
    # filter: it is refused (this selftest used to assert moto-era leniency).
    check(
        error_code(ec2.describe_placement_groups, Filters=[{"Name": "tag-value", "Values": [stack]}])
        == "InvalidParameterValue",
        "tag-value filter is not documented for DescribePlacementGroups -> InvalidParameterValue",
    )

    check(
        error_code(ec2.create_placement_group, GroupName=name, Strategy="cluster") == "InvalidPlacementGroup.Duplicate",
        "duplicate name -> InvalidPlacementGroup.Duplicate",
    )
    check(
        error_code(ec2.create_placement_group, GroupName=f"{stack}-bad", Strategy="bogus") == "InvalidParameterValue",
        "bad strategy -> InvalidParameterValue",
    )
    check(
        error_code(ec2.create_placement_group, GroupName=f"{stack}-bad", Strategy="cluster", PartitionCount=2)
        == "InvalidParameterValue",
        "partition count with cluster -> InvalidParameterValue",
    )
    check(
        error_code(ec2.describe_placement_groups, GroupNames=[f"{stack}-nope"]) == "InvalidPlacementGroup.Unknown",
        "describe unknown name -> InvalidPlacementGroup.Unknown",
    )

    for n in (name, f"{stack}-part", f"{stack}-spread"):
        ec2.delete_placement_group(GroupName=n)
    check(
        ec2.describe_placement_groups(Filters=[{"Name": "group-name", "Values": [f"{stack}-*"]}])["PlacementGroups"] == [],
        "delete removes the groups",
    )
    check(ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [gid]}])["Tags"] == [], "delete drops the tags")
    check(
        error_code(ec2.delete_placement_group, GroupName=name) == "InvalidPlacementGroup.Unknown",
        "delete unknown -> InvalidPlacementGroup.Unknown",
    )
    check(
        error_code(ec2.create_tags, Resources=[gid], Tags=[{"Key": "k", "Value": "v"}]) == "InvalidPlacementGroup.Unknown",
        "CreateTags on a deleted pg- id -> InvalidPlacementGroup.Unknown",
    )


def request_log(endpoint: str, session) -> None:
    ec2 = session.client("ec2", endpoint_url=endpoint)
    sts = session.client("sts", endpoint_url=endpoint)
    iam = session.client("iam", endpoint_url=endpoint)
    check(http(endpoint, "POST", "/_gpustack/requests/reset")["cleared"] >= 0, "reset")
    check(http(endpoint, "GET", "/_gpustack/requests") == [], "log empty after reset")
    ec2.describe_vpcs()
    sts.get_caller_identity()
    iam.list_roles()
    error_code(ec2.delete_placement_group, GroupName="does-not-exist")
    log = http(endpoint, "GET", "/_gpustack/requests")
    check(
        log
        == [
            {"service": "ec2", "region": "us-west-2", "action": "DescribeVpcs"},
            {"service": "sts", "region": "us-west-2", "action": "GetCallerIdentity"},
            {"service": "iam", "region": "us-west-2", "action": "ListRoles"},
            {"service": "ec2", "region": "us-west-2", "action": "DeletePlacementGroup"},
        ],
        f"request log records service and action in order ({log})",
    )
    logs = session.client("logs", endpoint_url=endpoint)
    logs.describe_log_groups()
    check(http(endpoint, "GET", "/_gpustack/requests")[-1] == {"service": "logs", "region": "us-west-2", "action": "DescribeLogGroups"}, "X-Amz-Target action")
    s3 = session.client("s3", endpoint_url=endpoint)
    s3.list_buckets()
    check(http(endpoint, "GET", "/_gpustack/requests")[-1] == {"service": "s3", "region": "us-west-2", "action": "GET /"}, "REST action is METHOD /path")
    http(endpoint, "POST", "/_gpustack/requests/reset")
    check(http(endpoint, "GET", "/_gpustack/requests") == [], "reset clears")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True, help="e.g. http://127.0.0.1:PORT")
    args = parser.parse_args()
    session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)
    ec2 = session.client("ec2", endpoint_url=args.endpoint)
    ec2_east = session.client("ec2", endpoint_url=args.endpoint, region_name="us-east-1")
    try:
        placement_groups(ec2, ec2_east)
        request_log(args.endpoint, session)
    except Exception as e:  # noqa: BLE001
        print(f"FAIL {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print("selftest: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
