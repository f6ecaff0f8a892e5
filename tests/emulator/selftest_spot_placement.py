"""Selftest of GetSpotPlacementScores (ext/spot_placement.py) through boto3 against a running
emulator (starts nothing):

    tests/emulator/.venv/bin/python tests/emulator/selftest_spot_placement.py --endpoint http://127.0.0.1:PORT

boto3's client-side validation is off, so the emulator's strictness is what answers. Each check
names its source (botocore ec2 2016-11-15 model unless said). Exits non-zero on the first failure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

REGION = "us-west-2"
NO_CLIENT_VALIDATION = Config(parameter_validation=False, retries={"total_max_attempts": 1, "mode": "standard"})
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "spot_placement_scores.json")
REQS = {"InstanceRequirements": {"VCpuCount": {"Min": 1}, "MemoryMiB": {"Min": 1}}}


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


def run(ec2: Any) -> None:
    data = json.load(open(DATA, encoding="utf-8"))["regions"]
    sps = ec2.get_spot_placement_scores
    one = {"InstanceTypes": ["p5.48xlarge"]}

    # Validation (param_validation.py from the model, then the handler).
    check(code(sps, **one) == "MissingParameter", "TargetCapacity is required (model: required)")
    check(code(sps, TargetCapacity=0, **one) == "InvalidParameterValue", "TargetCapacity 0 refused (model: min 1)")
    check(
        code(sps, TargetCapacity=2_000_000_001, **one) == "InvalidParameterValue",
        "TargetCapacity above 2,000,000,000 refused (model: max 2000000000)",
    )
    check(code(sps, TargetCapacity=2_000_000_000, **one) is None, "TargetCapacity 2,000,000,000 accepted (model: max)")
    check(
        code(sps, TargetCapacity=1, TargetCapacityUnitType="gpus", **one) == "InvalidParameterValue",
        "TargetCapacityUnitType outside vcpu/memory-mib/units refused (model: enum)",
    )
    check(code(sps, TargetCapacity=1, MaxResults=9, **one) == "InvalidParameterValue", "MaxResults 9 refused (model: 10-1000)")
    check(code(sps, TargetCapacity=1, MaxResults=1001, **one) == "InvalidParameterValue", "MaxResults 1001 refused")
    check(
        code(sps, TargetCapacity=1, RegionNames=[REGION] * 11, **one) == "InvalidParameterValue",
        "11 RegionNames refused (model: RegionNames max 10)",
    )
    check(
        code(sps, TargetCapacity=1, InstanceRequirementsWithMetadata=REQS, **one) == "InvalidParameterCombination",
        "InstanceTypes with InstanceRequirementsWithMetadata refused (doc: you can't specify both)",
    )
    check(code(sps, TargetCapacity=1) == "MissingParameter", "neither InstanceTypes nor requirements refused (op doc: either)")
    check(
        code(sps, TargetCapacity=1, InstanceRequirementsWithMetadata={"InstanceRequirements": {"VCpuCount": {"Min": 1}}})
        == "MissingParameter",
        "InstanceRequirements without MemoryMiB refused (model: required VCpuCount, MemoryMiB)",
    )
    check(
        code(sps, TargetCapacity=1, InstanceRequirementsWithMetadata=REQS) == "NotImplemented",
        "InstanceRequirementsWithMetadata alone: 501 NotImplemented (emulator scores named types only)",
    )
    check(
        code(sps, TargetCapacity=1, InstanceTypes=["p5.96xlarge"]) == "InvalidParameterValue",
        "an instance type EC2 does not know is refused",
    )
    check(
        code(sps, TargetCapacity=1, RegionNames=["us-moon-1"], **one) == "InvalidParameterValue",
        "a Region outside the aws partition is refused (endpoints.json)",
    )
    check(code(sps, TargetCapacity=1, DryRun=True, **one) == "DryRunOperation", "DryRun answers DryRunOperation")

    # Scores: computed here from the data file, not from the extension's code.
    zones = data[REGION]
    out = sps(TargetCapacity=2, SingleAvailabilityZone=True, RegionNames=[REGION], **one)["SpotPlacementScores"]
    want = {}
    for zid, z in zones.items():
        score, instances = z.get("p5.48xlarge") or z["*"]
        want[zid] = min(score if 2 <= instances else 1, 3)
    got = {s["AvailabilityZoneId"]: s["Score"] for s in out}
    check(got == want, f"single type per zone: data-file score, 1 above its instances, at most 3 (doc: 'always low') {got}")
    check(all(s["Region"] == REGION for s in out), "each zone score names its Region")
    check([s["Score"] for s in out] == sorted((s["Score"] for s in out), reverse=True), "highest score first")

    three = ["p5.48xlarge", "p5en.48xlarge", "p4d.24xlarge"]
    out = sps(TargetCapacity=1, SingleAvailabilityZone=True, RegionNames=[REGION], InstanceTypes=three)
    got = {s["AvailabilityZoneId"]: s["Score"] for s in out["SpotPlacementScores"]}
    want = {zid: max((z.get(t) or z["*"])[0] for t in three) for zid, z in zones.items()}
    check(got == want, "three types: a zone scores its best type, up to 10")

    every = sps(TargetCapacity=1, SingleAvailabilityZone=True, InstanceTypes=three)["SpotPlacementScores"]
    total_zones = sum(len(z) for z in data.values())
    check(total_zones > 10 and len(every) == 10, "at most the top 10 zones are answered (result doc: top 10)")
    page1 = sps(TargetCapacity=1, SingleAvailabilityZone=True, InstanceTypes=three, MaxResults=10)
    check("NextToken" not in page1, "a full top 10 fits one page of MaxResults 10")

    regions = sps(TargetCapacity=1, InstanceTypes=three, RegionNames=[REGION, "us-east-1"])["SpotPlacementScores"]
    check(
        sorted(s["Region"] for s in regions) == ["us-east-1", REGION] and all("AvailabilityZoneId" not in s for s in regions),
        "without SingleAvailabilityZone, Regions are scored",
    )
    vcpu = sps(TargetCapacity=192, TargetCapacityUnitType="vcpu", SingleAvailabilityZone=True, RegionNames=[REGION], **one)
    units = sps(TargetCapacity=1, SingleAvailabilityZone=True, RegionNames=[REGION], **one)
    check(
        {s["AvailabilityZoneId"]: s["Score"] for s in vcpu["SpotPlacementScores"]}
        == {s["AvailabilityZoneId"]: s["Score"] for s in units["SpotPlacementScores"]},
        "TargetCapacityUnitType vcpu: 192 vCPUs of p5.48xlarge is one instance",
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True, help="e.g. http://127.0.0.1:PORT")
    args = parser.parse_args()
    session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)
    ec2 = session.client("ec2", endpoint_url=args.endpoint, config=NO_CLIENT_VALIDATION)
    try:
        run(ec2)
    except Exception as e:  # noqa: BLE001
        print(f"FAIL {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print("selftest_spot_placement: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
