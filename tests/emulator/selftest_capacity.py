"""End-to-end check of the capacity extensions of a running emulator through boto3 (starts nothing).

    tests/emulator/.venv/bin/python tests/emulator/selftest_capacity.py --endpoint http://127.0.0.1:PORT

Covers On-Demand Capacity Reservations (ext/capacity_reservations.py), Capacity Blocks
(ext/capacity_blocks.py), Service Quotas (ext/service_quotas.py) and their control endpoints.
Exits non-zero on the first failure. Ends with ``POST /moto-api/reset`` (checking that it clears
the extensions' state), so run it against an emulator whose state may be thrown away.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
import urllib.error
import urllib.request
import uuid
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Callable

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

REGION = "us-west-2"
ACCOUNT = "123456789012"
AZS = ["us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"]
NO_RETRY = Config(retries={"total_max_attempts": 1, "mode": "standard"})


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def error_of(call: Callable[..., Any], **kwargs: Any) -> tuple[str | None, int | None]:
    """(error code, HTTP status) of a call expected to fail; (None, None) if it succeeded."""
    try:
        call(**kwargs)
    except ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    return None, None


def error_code(call: Callable[..., Any], **kwargs: Any) -> str | None:
    return error_of(call, **kwargs)[0]


def check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)
    print(f"ok   {what}")


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


def tagged(stack: str, **extra: str) -> list[dict[str, Any]]:
    tags = [{"Key": "gpustack:stack", "Value": stack}] + [{"Key": k, "Value": v} for k, v in extra.items()]
    return [{"ResourceType": "capacity-reservation", "Tags": tags}]


def by_stack(stack: str) -> list[dict[str, Any]]:
    return [{"Name": "tag:gpustack:stack", "Values": [stack]}]


# --- On-Demand Capacity Reservations -------------------------------------------------------------


def odcr(endpoint: str, ec2: Any, ec2_no_retry: Any, ec2_east: Any) -> None:
    stack = f"selftest-{uuid.uuid4().hex[:8]}"
    base = dict(InstanceType="p5.48xlarge", InstancePlatform="Linux/UNIX", InstanceCount=2, AvailabilityZone="us-west-2a")
    token = uuid.uuid4().hex
    created = ec2.create_capacity_reservation(
        **base, ClientToken=token, EbsOptimized=True, TagSpecifications=tagged(stack, Name="odcr-a")
    )["CapacityReservation"]
    cid = created["CapacityReservationId"]
    check(re.fullmatch(r"cr-[0-9a-f]{17}", cid) is not None, f"create returns a cr- id ({cid})")
    check(created["CapacityReservationArn"] == f"arn:aws:ec2:{REGION}:{ACCOUNT}:capacity-reservation/{cid}", "ARN")
    expected = {
        "OwnerId": ACCOUNT, "InstanceType": "p5.48xlarge", "InstancePlatform": "Linux/UNIX",
        "AvailabilityZone": "us-west-2a", "Tenancy": "default", "TotalInstanceCount": 2,
        "AvailableInstanceCount": 2, "EbsOptimized": True, "State": "active", "EndDateType": "unlimited",
        "InstanceMatchCriteria": "open", "ReservationType": "default",
    }
    check({k: created.get(k) for k in expected} == expected, "create returns the reservation's fields and defaults")
    check("EndDate" not in created and created["StartDate"] <= utcnow() and "CreateDate" in created, "dates of an unlimited ODCR")
    check(created["AvailabilityZoneId"].startswith("usw2-az"), "AvailabilityZoneId")
    check({t["Key"]: t["Value"] for t in created["Tags"]} == {"gpustack:stack": stack, "Name": "odcr-a"}, "create returns tags")

    again = ec2.create_capacity_reservation(
        **base, ClientToken=token, EbsOptimized=True, TagSpecifications=tagged(stack, Name="odcr-a")
    )["CapacityReservation"]
    check(again["CapacityReservationId"] == cid, "same ClientToken and parameters -> the same reservation")
    check(
        error_code(ec2.create_capacity_reservation, **{**base, "InstanceCount": 3}, ClientToken=token, EbsOptimized=True,
                   TagSpecifications=tagged(stack, Name="odcr-a")) == "IdempotentParameterMismatch",
        "same ClientToken, other parameters -> IdempotentParameterMismatch",
    )

    end = (utcnow() + datetime.timedelta(days=3)).replace(microsecond=0)
    limited = ec2.create_capacity_reservation(
        InstanceType="g5.xlarge", InstancePlatform="Linux/UNIX", InstanceCount=1, AvailabilityZoneId=created["AvailabilityZoneId"],
        EndDateType="limited", EndDate=end, InstanceMatchCriteria="targeted", Tenancy="dedicated",
        TagSpecifications=tagged(stack, Name="odcr-b"),
    )["CapacityReservation"]
    check(
        (limited["EndDateType"], limited["EndDate"], limited["InstanceMatchCriteria"], limited["Tenancy"], limited["AvailabilityZone"])
        == ("limited", end, "targeted", "dedicated", "us-west-2a"),
        "limited EndDate, targeted, dedicated, AvailabilityZoneId -> AZ",
    )
    third = ec2.create_capacity_reservation(
        InstanceType="p4d.24xlarge", InstancePlatform="Linux/UNIX", InstanceCount=1, AvailabilityZone="us-west-2b",
        TagSpecifications=tagged(stack, Name="odcr-c"),
    )["CapacityReservation"]["CapacityReservationId"]

    invalid = [
        ({**base, "InstanceCount": 0}, "InvalidParameterValue", "InstanceCount 0"),
        ({**base, "InstanceCount": 1001}, "InvalidParameterValue", "InstanceCount 1001"),
        ({**base, "InstanceType": "p9.mega"}, "InvalidParameterValue", "unknown instance type"),
        ({**base, "AvailabilityZone": "us-west-2z"}, "InvalidParameterValue", "unknown AZ"),
        ({**base, "InstancePlatform": "BeOS"}, "InvalidParameterValue", "unknown platform"),
        ({**base, "InstanceMatchCriteria": "sometimes"}, "InvalidParameterValue", "unknown InstanceMatchCriteria"),
        ({**base, "EndDateType": "limited"}, "InvalidParameterCombination", "limited without EndDate"),
        ({**base, "EndDate": end}, "InvalidParameterCombination", "EndDate with unlimited"),
        ({**base, "EndDateType": "limited", "EndDate": utcnow() - datetime.timedelta(hours=1)}, "InvalidParameterValue", "EndDate in the past"),
        ({k: v for k, v in base.items() if k != "AvailabilityZone"}, "MissingParameter", "no AZ"),
    ]
    for kwargs, code, what in invalid:
        check(error_code(ec2.create_capacity_reservation, **kwargs) == code, f"create with {what} -> {code}")

    mine = ec2.describe_capacity_reservations(Filters=by_stack(stack))["CapacityReservations"]
    check([r["CapacityReservationId"] for r in mine] == [cid, limited["CapacityReservationId"], third], "describe by tag:<k>, creation order")
    check(
        [r["CapacityReservationId"] for r in ec2.describe_capacity_reservations(CapacityReservationIds=[third])["CapacityReservations"]] == [third],
        "describe by CapacityReservationIds",
    )
    filters = [
        ([{"Name": "instance-type", "Values": ["p4d.*"]}], [third], "instance-type (wildcard)"),
        ([{"Name": "availability-zone", "Values": ["us-west-2b"]}], [third], "availability-zone"),
        ([{"Name": "tag:Name", "Values": ["odcr-b"]}], [limited["CapacityReservationId"]], "tag:Name"),
        ([{"Name": "state", "Values": ["active"]}], [cid, limited["CapacityReservationId"], third], "state"),
        ([{"Name": "instance-match-criteria", "Values": ["targeted"]}], [limited["CapacityReservationId"]], "instance-match-criteria"),
    ]
    for extra, want, what in filters:
        got = ec2.describe_capacity_reservations(Filters=by_stack(stack) + extra)["CapacityReservations"]
        check([r["CapacityReservationId"] for r in got] == want, f"describe filter {what}")
    check(
        error_code(ec2.describe_capacity_reservations, Filters=[{"Name": "colour", "Values": ["x"]}]) == "InvalidParameterValue",
        "unknown filter -> InvalidParameterValue",
    )
    # The EC2 API Reference (botocore 1.44.5 DescribeCapacityReservations Filters doc) has no
    # reservation-type, tag-key or tag-value filter; this selftest used to assert moto-era leniency.
    for name in ("reservation-type", "tag-key", "tag-value"):
        check(
            error_code(ec2.describe_capacity_reservations, Filters=[{"Name": name, "Values": ["x"]}]) == "InvalidParameterValue",
            f"undocumented filter {name} -> InvalidParameterValue",
        )
    check(
        error_code(ec2.describe_capacity_reservations, CapacityReservationIds=["cr-00000000000000000"]) == "InvalidCapacityReservationId.NotFound",
        "unknown id -> InvalidCapacityReservationId.NotFound",
    )
    check(
        error_code(ec2.describe_capacity_reservations, CapacityReservationIds=["pg-0123"]) == "InvalidCapacityReservationId.Malformed",
        "malformed id -> InvalidCapacityReservationId.Malformed",
    )
    check(ec2_east.describe_capacity_reservations(Filters=by_stack(stack))["CapacityReservations"] == [], "reservations are per region")

    page1 = ec2.describe_capacity_reservations(Filters=by_stack(stack), MaxResults=2)
    check(len(page1["CapacityReservations"]) == 2 and page1.get("NextToken"), "MaxResults=2 -> 2 and a NextToken")
    page2 = ec2.describe_capacity_reservations(Filters=by_stack(stack), MaxResults=2, NextToken=page1["NextToken"])
    check(
        [r["CapacityReservationId"] for r in page2["CapacityReservations"]] == [third] and "NextToken" not in page2,
        "NextToken -> the last page, without a NextToken",
    )
    paged = [
        r["CapacityReservationId"]
        for page in ec2.get_paginator("describe_capacity_reservations").paginate(Filters=by_stack(stack), PaginationConfig={"PageSize": 1})
        for r in page["CapacityReservations"]
    ]
    check(paged == [r["CapacityReservationId"] for r in mine], "boto3 paginator with PageSize 1 sees every reservation once")
    check(error_code(ec2.describe_capacity_reservations, NextToken="bogus!") == "InvalidPaginationToken", "bad NextToken -> InvalidPaginationToken")

    ec2.create_tags(Resources=[cid], Tags=[{"Key": "extra", "Value": "1"}])
    via_tags = ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [cid]}])["Tags"]
    check(
        {(t["Key"], t["ResourceType"]) for t in via_tags}
        == {("gpustack:stack", "capacity-reservation"), ("Name", "capacity-reservation"), ("extra", "capacity-reservation")},
        "generic CreateTags/DescribeTags on a cr- id",
    )
    ec2.delete_tags(Resources=[cid], Tags=[{"Key": "extra"}])
    check(
        ec2.describe_capacity_reservations(Filters=[{"Name": "tag:extra", "Values": ["1"]}])["CapacityReservations"] == [],
        "generic DeleteTags on a cr- id",
    )
    check(
        error_code(ec2.create_tags, Resources=["cr-00000000000000000"], Tags=[{"Key": "k", "Value": "v"}]) == "InvalidCapacityReservationId.NotFound",
        "CreateTags on an unknown cr- id -> InvalidCapacityReservationId.NotFound",
    )

    def current(rid: str) -> dict[str, Any]:
        return ec2.describe_capacity_reservations(CapacityReservationIds=[rid])["CapacityReservations"][0]

    check(ec2.modify_capacity_reservation(CapacityReservationId=cid, InstanceCount=4)["Return"] is True, "modify InstanceCount returns Return=true")
    check((current(cid)["TotalInstanceCount"], current(cid)["AvailableInstanceCount"]) == (4, 4), "modify changes the count")
    ec2.modify_capacity_reservation(CapacityReservationId=cid, EndDateType="limited", EndDate=end, InstanceMatchCriteria="targeted")
    got = current(cid)
    check((got["EndDateType"], got.get("EndDate"), got["InstanceMatchCriteria"]) == ("limited", end, "targeted"), "modify to limited + targeted")
    ec2.modify_capacity_reservation(CapacityReservationId=cid, EndDateType="unlimited")
    check(current(cid)["EndDateType"] == "unlimited" and "EndDate" not in current(cid), "modify back to unlimited drops EndDate")
    check(
        error_code(ec2.modify_capacity_reservation, CapacityReservationId=cid, EndDateType="limited") == "InvalidParameterCombination",
        "modify to limited without EndDate -> InvalidParameterCombination",
    )
    check(error_code(ec2.modify_capacity_reservation, CapacityReservationId=cid) == "MissingParameter", "modify nothing -> MissingParameter")
    check(
        error_code(ec2.modify_capacity_reservation, CapacityReservationId=cid, InstanceCount=0) == "InvalidParameterValue",
        "modify InstanceCount 0 -> InvalidParameterValue",
    )

    check(ec2.cancel_capacity_reservation(CapacityReservationId=third)["Return"] is True, "cancel returns Return=true")
    got = current(third)
    check((got["State"], got["AvailableInstanceCount"]) == ("cancelled", 0), "cancelled reservation stays visible, state cancelled")
    check(
        [r["CapacityReservationId"] for r in ec2.describe_capacity_reservations(Filters=by_stack(stack) + [{"Name": "state", "Values": ["cancelled"]}])["CapacityReservations"]] == [third],
        "describe filter state=cancelled",
    )
    check(ec2.cancel_capacity_reservation(CapacityReservationId=third)["Return"] is True, "cancelling again is a no-op")
    check(error_code(ec2.modify_capacity_reservation, CapacityReservationId=third, InstanceCount=2) == "IncorrectState", "modify a cancelled one -> IncorrectState")
    check(
        error_code(ec2.cancel_capacity_reservation, CapacityReservationId="cr-00000000000000000") == "InvalidCapacityReservationId.NotFound",
        "cancel unknown -> InvalidCapacityReservationId.NotFound",
    )

    # Injected InsufficientInstanceCapacity: HTTP 500 like AWS, so SDKs retry it.
    check(control(endpoint, "POST", "/_gpustack/capacity/fail?kind=insufficient&n=2") == {"kind": "insufficient", "remaining": 2}, "fail control")
    kwargs = dict(InstanceType="p5.48xlarge", InstancePlatform="Linux/UNIX", InstanceCount=1, AvailabilityZone="us-west-2c")
    for attempt in (1, 2):
        check(
            error_of(ec2_no_retry.create_capacity_reservation, **kwargs) == ("InsufficientInstanceCapacity", 500),
            f"injected create {attempt}/2 -> InsufficientInstanceCapacity, HTTP 500",
        )
    created_after = ec2_no_retry.create_capacity_reservation(**kwargs, TagSpecifications=tagged(stack))["CapacityReservation"]
    check(created_after["State"] == "active", "the create after the N injected failures succeeds")
    control(endpoint, "POST", "/_gpustack/capacity/fail?kind=insufficient&n=1")
    control(endpoint, "POST", "/_gpustack/requests/reset")
    ec2.create_capacity_reservation(**kwargs, TagSpecifications=tagged(stack))  # default retries: 3 attempts
    attempts = [r for r in control(endpoint, "GET", "/_gpustack/requests") if r["action"] == "CreateCapacityReservation"]
    check(len(attempts) == 2, "with SDK retries, one injected failure is retried away (2 attempts)")
    check(http(endpoint, "POST", "/_gpustack/capacity/fail?kind=bogus&n=1")[0] == 400, "fail control rejects an unknown kind")
    for r in ec2.describe_capacity_reservations(Filters=by_stack(stack) + [{"Name": "state", "Values": ["active"]}])["CapacityReservations"]:
        ec2.cancel_capacity_reservation(CapacityReservationId=r["CapacityReservationId"])


# --- Capacity Blocks -----------------------------------------------------------------------------

RATES = {"p4d.24xlarge": "11.80", "p5.48xlarge": "31.46", "p5e.48xlarge": "34.61", "p5en.48xlarge": "36.18",
         "p6-b200.48xlarge": "55.04", "trn1.32xlarge": "8.82"}
AZ_FACTORS = ["1.04", "1.00", "1.07", "1.02", "1.05", "1.01"]


def expected_fee(offering: dict[str, Any], today: datetime.date, multiplier: str = "1") -> str:
    """The fee formula documented in ext/capacity_blocks.py, recomputed independently."""
    start = offering["StartDate"].astimezone(datetime.timezone.utc)
    days_ahead = (start.date() - today).days
    day = Decimal(1) + Decimal("0.02") * max(0, 7 - days_ahead) + Decimal("0.01") * (start.date().toordinal() % 3)
    az = Decimal(AZ_FACTORS[AZS.index(offering["AvailabilityZone"]) % len(AZ_FACTORS)])
    fee = Decimal(RATES[offering["InstanceType"]]) * offering["InstanceCount"] * offering["CapacityBlockDurationHours"] * az * day * Decimal(multiplier)
    return str(fee.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def expected_starts(now: datetime.datetime, end_range: datetime.datetime, hours: int) -> list[tuple[datetime.datetime, int]]:
    """(start, hours) of the offerings per AZ and type: each day the asked length from 11:30 UTC,
    3 h shorter from 14:30 and 3 h longer from 08:30, all ending 11:30 UTC (EC2 UG
    capacity-blocks-purchase: offerings slightly shorter and longer than asked; this selftest
    used to expect only the exact length)."""
    day = datetime.datetime.combine(now.date(), datetime.time(11, 30), tzinfo=datetime.timezone.utc) - datetime.timedelta(days=1)
    starts = []
    while day <= now + datetime.timedelta(weeks=8):
        if day + datetime.timedelta(hours=hours) > end_range:
            break
        for shift in (0, 3, -3):
            begins = day + datetime.timedelta(hours=shift)
            if now < begins <= now + datetime.timedelta(weeks=8):
                starts.append((begins, hours - shift))
        day += datetime.timedelta(days=1)
    return starts


def all_offerings(ec2: Any, **kwargs: Any) -> list[dict[str, Any]]:
    return [o for page in ec2.get_paginator("describe_capacity_block_offerings").paginate(**kwargs) for o in page["CapacityBlockOfferings"]]


def capacity_blocks(endpoint: str, ec2: Any) -> None:
    now = utcnow()
    week = now + datetime.timedelta(days=7)
    search = dict(InstanceType="p5.48xlarge", InstanceCount=1, CapacityDurationHours=24, StartDateRange=now, EndDateRange=week)
    offerings = ec2.describe_capacity_block_offerings(**search)["CapacityBlockOfferings"]
    starts = expected_starts(now, week, 24)
    check(len(offerings) == len(starts) * len(AZS), f"7-day search: three offerings per day per AZ ({len(offerings)})")
    check(
        sorted({(o["StartDate"], o["CapacityBlockDurationHours"], o["AvailabilityZone"]) for o in offerings})
        == sorted((s, h, az) for s, h in starts for az in AZS),
        "each day in the range, in every AZ: 24 h from 11:30, 21 h from 14:30, 27 h from 08:30 UTC",
    )
    check(
        all(
            o["EndDate"] - o["StartDate"] == datetime.timedelta(hours=o["CapacityBlockDurationHours"])
            and o["EndDate"].astimezone(datetime.timezone.utc).time() == datetime.time(11, 30)
            for o in offerings
        ),
        "end = start + duration, always 11:30 UTC",
    )
    exact = [o for o in offerings if o["CapacityBlockDurationHours"] == 24]
    check(
        exact
        and all(
            any(
                s["CapacityBlockDurationHours"] < 24
                and (s["EndDate"], s["AvailabilityZone"]) == (o["EndDate"], o["AvailabilityZone"])
                and Decimal(s["UpfrontFee"]) < Decimal(o["UpfrontFee"])
                for s in offerings
            )
            for o in exact
        ),
        "each asked-length offering has a cheaper, shorter one ending with it (cheapest-first picks it)",
    )
    check(all(re.fullmatch(r"cb-[0-9a-f]{17}", o["CapacityBlockOfferingId"]) for o in offerings), "offering ids are cb- + 17 hex")
    check(len({o["CapacityBlockOfferingId"] for o in offerings}) == len(offerings), "offering ids are unique")
    check(
        all((o["CurrencyCode"], o["Tenancy"], o["CapacityBlockDurationHours"] in (21, 24, 27), o["InstanceCount"], o["InstanceType"]) == ("USD", "default", True, 1, "p5.48xlarge") for o in offerings),
        "currency, tenancy, duration, count, type",
    )
    check(all(re.fullmatch(r"\d+\.\d\d", o["UpfrontFee"]) for o in offerings), "UpfrontFee is a string with two decimals")
    today = now.date()
    check(all(o["UpfrontFee"] == expected_fee(o, today) for o in offerings), "UpfrontFee follows the documented formula")
    cheapest = min(offerings, key=lambda o: Decimal(o["UpfrontFee"]))
    earliest = min(o["StartDate"] for o in offerings)
    check(cheapest["StartDate"] > earliest, "the cheapest offering is not one of the earliest")
    again = ec2.describe_capacity_block_offerings(**search)["CapacityBlockOfferings"]
    check(again == offerings, "the same search answers the same offerings (deterministic)")
    later = ec2.describe_capacity_block_offerings(**{**search, "StartDateRange": now + datetime.timedelta(days=2)})["CapacityBlockOfferings"]
    by_id = {o["CapacityBlockOfferingId"]: o for o in offerings}
    check(
        later and all(o["CapacityBlockOfferingId"] in by_id and by_id[o["CapacityBlockOfferingId"]]["StartDate"] == o["StartDate"] for o in later),
        "a narrower search finds the same offering ids",
    )

    page = ec2.describe_capacity_block_offerings(**search, MaxResults=5)
    check(len(page["CapacityBlockOfferings"]) == 5 and page.get("NextToken"), "MaxResults=5 -> 5 offerings and a NextToken")
    paged = all_offerings(ec2, **search, PaginationConfig={"PageSize": 5})
    check(paged == offerings, "following NextToken yields every offering once, in order")

    check(len(all_offerings(ec2, InstanceCount=2, CapacityDurationHours=24, EndDateRange=week)) == len(starts) * len(AZS) * len(RATES), "no InstanceType -> every supported type")
    check(ec2.describe_capacity_block_offerings(**{**search, "InstanceType": "m5.large"})["CapacityBlockOfferings"] == [], "unsupported type -> empty list")
    check(ec2.describe_capacity_block_offerings(**{**search, "InstanceType": "p9.mega"})["CapacityBlockOfferings"] == [], "unknown type -> empty list")
    long_block = ec2.describe_capacity_block_offerings(InstanceType="p4d.24xlarge", InstanceCount=64, CapacityDurationHours=504, MaxResults=1)["CapacityBlockOfferings"]
    check(long_block and long_block[0]["CapacityBlockDurationHours"] in (501, 504, 507) and long_block[0]["InstanceCount"] == 64, "21 days, 64 instances")
    for hours in (0, 12, 25, 360, 4536):
        check(
            error_code(ec2.describe_capacity_block_offerings, **{**search, "CapacityDurationHours": hours}) == "InvalidParameterValue",
            f"CapacityDurationHours {hours} -> InvalidParameterValue",
        )
    for hours in (336, 4368):
        check(error_code(ec2.describe_capacity_block_offerings, **{**search, "CapacityDurationHours": hours, "EndDateRange": now + datetime.timedelta(days=300)}) is None, f"CapacityDurationHours {hours} is valid")
    for count in (0, 65, 128):
        check(error_code(ec2.describe_capacity_block_offerings, **{**search, "InstanceCount": count}) == "InvalidParameterValue", f"InstanceCount {count} -> InvalidParameterValue")
    # Counts 1-64, not only powers of two (this selftest used to refuse 3).
    check(error_code(ec2.describe_capacity_block_offerings, **{**search, "InstanceCount": 3}) is None, "InstanceCount 3 is valid")
    check(
        error_code(ec2.describe_capacity_block_offerings, **{**search, "StartDateRange": week, "EndDateRange": now}) == "InvalidParameterValue",
        "StartDateRange after EndDateRange -> InvalidParameterValue",
    )
    far = ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", InstanceCount=1, CapacityDurationHours=24, StartDateRange=now + datetime.timedelta(weeks=9))
    check(far["CapacityBlockOfferings"] == [], "no starts more than 8 weeks ahead")

    stack = f"selftest-{uuid.uuid4().hex[:8]}"
    target = cheapest
    bought = ec2.purchase_capacity_block(
        CapacityBlockOfferingId=target["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX", TagSpecifications=tagged(stack, Name="cb")
    )["CapacityReservation"]
    check(re.fullmatch(r"cr-[0-9a-f]{17}", bought["CapacityReservationId"]) is not None, "purchase returns a cr- reservation")
    check(
        (bought["ReservationType"], bought["State"], bought["StartDate"], bought["EndDate"], bought["AvailabilityZone"], bought["InstanceType"], bought["TotalInstanceCount"], bought["AvailableInstanceCount"], bought["EndDateType"], bought["InstanceMatchCriteria"])
        == ("capacity-block", "scheduled", target["StartDate"], target["EndDate"], target["AvailabilityZone"], "p5.48xlarge", 1, 0, "limited", "targeted"),
        "purchased block: capacity-block, scheduled, the offering's dates/AZ/type/count",
    )
    check({t["Key"]: t["Value"] for t in bought["Tags"]} == {"gpustack:stack": stack, "Name": "cb"}, "purchase applies the tags")
    # No reservation-type filter in EC2 (API Reference): select on the answer's ReservationType.
    listed = [
        r
        for r in ec2.describe_capacity_reservations(Filters=by_stack(stack))["CapacityReservations"]
        if r["ReservationType"] == "capacity-block"
    ]
    check([r["CapacityReservationId"] for r in listed] == [bought["CapacityReservationId"]], "DescribeCapacityReservations sees the block")
    remaining = ec2.describe_capacity_block_offerings(**search)["CapacityBlockOfferings"]
    check(
        target["CapacityBlockOfferingId"] not in {o["CapacityBlockOfferingId"] for o in remaining} and len(remaining) == len(offerings) - 1,
        "a bought offering is gone from later searches",
    )
    check(
        error_code(ec2.purchase_capacity_block, CapacityBlockOfferingId=target["CapacityBlockOfferingId"], InstancePlatform="Linux/UNIX") == "InvalidCapacityBlockOfferingIdExpired",
        "buying it again -> InvalidCapacityBlockOfferingIdExpired",
    )
    check(
        error_code(ec2.purchase_capacity_block, CapacityBlockOfferingId="cb-00000000000000000", InstancePlatform="Linux/UNIX") == "InvalidCapacityBlockOfferingIdNotFound",
        "unknown offering -> InvalidCapacityBlockOfferingIdNotFound",
    )
    check(
        error_code(ec2.purchase_capacity_block, CapacityBlockOfferingId="offer-1", InstancePlatform="Linux/UNIX") == "InvalidCapacityBlockOfferingIdMalformed",
        "malformed offering id -> InvalidCapacityBlockOfferingIdMalformed",
    )
    check(
        error_code(ec2.purchase_capacity_block, CapacityBlockOfferingId=remaining[0]["CapacityBlockOfferingId"], InstancePlatform="BeOS") == "InvalidParameterValue",
        "bad InstancePlatform -> InvalidParameterValue",
    )
    check(
        error_code(ec2.cancel_capacity_reservation, CapacityReservationId=bought["CapacityReservationId"]) == "UnsupportedOperation",
        "cancelling a Capacity Block -> UnsupportedOperation",
    )
    check(
        error_code(ec2.modify_capacity_reservation, CapacityReservationId=bought["CapacityReservationId"], InstanceCount=2) == "UnsupportedOperation",
        "modifying a Capacity Block -> UnsupportedOperation",
    )

    log = control(endpoint, "GET", "/_gpustack/capacity/purchases")
    record = log["purchases"][-1]
    check(
        log["count"] == len(log["purchases"]) >= 1
        and (record["offering_id"], record["reservation_id"], record["tags"], record["upfront_fee"], record["region"])
        == (target["CapacityBlockOfferingId"], bought["CapacityReservationId"], {"gpustack:stack": stack, "Name": "cb"}, target["UpfrontFee"], REGION)
        and record["time"].endswith("Z"),
        "purchases log: offering id, reservation id, tags, fee, time",
    )

    state = control(endpoint, "POST", "/_gpustack/capacity/offerings?price_multiplier=2")
    check(state["price_multiplier"] == 2.0, "price_multiplier control")
    dearer = ec2.describe_capacity_block_offerings(**search)["CapacityBlockOfferings"]
    check(
        [o["CapacityBlockOfferingId"] for o in dearer] == [o["CapacityBlockOfferingId"] for o in remaining]
        and all(o["UpfrontFee"] == expected_fee(o, today, "2") for o in dearer),
        "price_multiplier=2 doubles fees, same ids",
    )
    gone = remaining[0]["CapacityBlockOfferingId"]
    control(endpoint, "POST", f"/_gpustack/capacity/offerings?remove={gone}")
    check(gone not in {o["CapacityBlockOfferingId"] for o in ec2.describe_capacity_block_offerings(**search)["CapacityBlockOfferings"]}, "remove=<id> hides the offering")
    check(
        error_code(ec2.purchase_capacity_block, CapacityBlockOfferingId=gone, InstancePlatform="Linux/UNIX") == "InvalidCapacityBlockOfferingIdExpired",
        "buying a removed offering -> InvalidCapacityBlockOfferingIdExpired",
    )
    control(endpoint, "POST", "/_gpustack/capacity/offerings?none=1")
    check(ec2.describe_capacity_block_offerings(**search)["CapacityBlockOfferings"] == [], "none=1 -> no offerings at all")
    state = control(endpoint, "POST", "/_gpustack/capacity/offerings?reset=1")
    check(state == {"price_multiplier": 1.0, "removed": [], "none": False}, "reset=1 undoes the offering controls")
    check(ec2.describe_capacity_block_offerings(**search)["CapacityBlockOfferings"] == remaining, "after reset=1 the offerings are back")
    check(http(endpoint, "POST", "/_gpustack/capacity/offerings?price_multiplier=abc")[0] == 400, "bad control value -> 400")


# --- Service Quotas ------------------------------------------------------------------------------

# code -> (name, applied value, AWS default). AWS's default is 0 for the accelerator quotas the
# issue lists (EC2 quotas: a new account has none); the Trn/Inf/DL ones are a fresh account's.
QUOTAS = {
    "L-417A185B": ("Running On-Demand P instances", 1536.0, 1536.0),
    "L-DB2E81BA": ("Running On-Demand G and VT instances", 1024.0, 0.0),
    "L-7212CCBC": ("All P4, P3 and P2 Spot Instance Requests", 384.0, 384.0),
    "L-C4BD4855": ("All P5 Spot Instance Requests", 384.0, 384.0),
    "L-3819A6DF": ("All G and VT Spot Instance Requests", 512.0, 0.0),
    "L-1216C47A": ("Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", 1024.0, 1024.0),
    "L-DA6814F2": ("Concurrent P5 Capacity Blocks per account", 1536.0, 0.0),
    "L-C45F30BC": ("Concurrent P5e Capacity Blocks per account", 1536.0, 0.0),
    "L-4F9BB70B": ("Concurrent P5en Capacity Blocks per account", 1536.0, 0.0),
    "L-2C8F52B3": ("Concurrent P4d Capacity Blocks per account", 1536.0, 0.0),
    "L-2E30FD7D": ("Concurrent Trn1 Capacity Blocks per account", 0.0, 0.0),
    "L-64569A79": ("Concurrent Trn2 Capacity Blocks per account", 0.0, 0.0),
    "L-2C3B7624": ("Running On-Demand Trn instances", 0.0, 0.0),
    "L-1945791B": ("Running On-Demand Inf instances", 0.0, 0.0),
    "L-6E869C2A": ("Running On-Demand DL instances", 0.0, 0.0),
    "L-6B0D517C": ("All Trn Spot Instance Requests", 0.0, 0.0),
    "L-B5D1601B": ("All Inf Spot Instance Requests", 0.0, 0.0),
    "L-85EED4F7": ("All DL Spot Instance Requests", 0.0, 0.0),
}


def service_quotas(endpoint: str, sq: Any) -> None:
    for code, (name, value, aws_default) in QUOTAS.items():
        applied = sq.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]
        default = sq.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]
        common = {"ServiceCode": "ec2", "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)", "QuotaCode": code,
                  "QuotaName": name, "Unit": "None", "Adjustable": True, "GlobalQuota": False}
        check(
            applied == {**common, "Value": value, "QuotaArn": f"arn:aws:servicequotas:{REGION}:{ACCOUNT}:ec2/{code}"}
            and default == {**common, "Value": aws_default, "QuotaArn": f"arn:aws:servicequotas:{REGION}::ec2/{code}"},
            f"GetServiceQuota {code} = {value}, GetAWSDefaultServiceQuota = {aws_default}",
        )
    listed = sq.list_aws_default_service_quotas(ServiceCode="ec2")["Quotas"]
    check({q["QuotaCode"] for q in listed} == set(QUOTAS), "ListAWSDefaultServiceQuotas ec2")
    for call in (sq.get_service_quota, sq.get_aws_default_service_quota):
        check(error_code(call, ServiceCode="ec2", QuotaCode="L-00000000") == "NoSuchResourceException", f"{call.__name__} unknown code -> NoSuchResourceException")
    check(sq.get_service_quota(ServiceCode="vpc", QuotaCode="L-F678F1CE")["Quota"]["ServiceCode"] == "vpc", "moto's vpc quotas still answer")
    check(sq.get_aws_default_service_quota(ServiceCode="vpc", QuotaCode="L-F678F1CE")["Quota"]["ServiceCode"] == "vpc", "GetAWSDefaultServiceQuota vpc")

    control(endpoint, "POST", "/_gpustack/requests/reset")
    sq.get_service_quota(ServiceCode="ec2", QuotaCode="L-417A185B")
    check(control(endpoint, "GET", "/_gpustack/requests") == [{"service": "servicequotas", "region": "us-west-2", "action": "GetServiceQuota"}], "request log sees servicequotas GetServiceQuota")

    row = control(endpoint, "POST", "/_gpustack/quotas?code=L-417A185B&value=96")
    check(row["value"] == 96.0 and row["default"] == 1536.0, "value control answers the row")
    check(sq.get_service_quota(ServiceCode="ec2", QuotaCode="L-417A185B")["Quota"]["Value"] == 96.0, "applied value set to 96")
    check(sq.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode="L-417A185B")["Quota"]["Value"] == 1536.0, "default unchanged")
    control(endpoint, "POST", "/_gpustack/quotas?code=L-417A185B&default=0")
    check(sq.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode="L-417A185B")["Quota"]["Value"] == 0.0, "default control")
    control(endpoint, "POST", "/_gpustack/quotas?code=L-C4BD4855&deny=1")
    check(error_code(sq.get_service_quota, ServiceCode="ec2", QuotaCode="L-C4BD4855") == "AccessDeniedException", "deny=1 -> AccessDeniedException")
    check(sq.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode="L-C4BD4855")["Quota"]["Value"] == 384.0, "deny leaves the default answering")
    control(endpoint, "POST", "/_gpustack/quotas?code=L-C4BD4855&deny=0")
    check(sq.get_service_quota(ServiceCode="ec2", QuotaCode="L-C4BD4855")["Quota"]["Value"] == 384.0, "deny=0 undoes")
    control(endpoint, "POST", "/_gpustack/quotas?code=L-DB2E81BA&missing=1")
    check(error_code(sq.get_service_quota, ServiceCode="ec2", QuotaCode="L-DB2E81BA") == "NoSuchResourceException", "missing=1 -> NoSuchResourceException")
    check(sq.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode="L-DB2E81BA")["Quota"]["Value"] == 0.0, "missing leaves the (AWS: 0) default answering")
    rows = {r["code"]: r for r in control(endpoint, "GET", "/_gpustack/quotas")["quotas"]}
    check(
        set(rows) == set(QUOTAS) and rows["L-417A185B"]["value"] == 96.0 and rows["L-DB2E81BA"]["missing"] is True,
        "GET /_gpustack/quotas lists every quota with its settings",
    )
    check(http(endpoint, "POST", "/_gpustack/quotas?code=L-NOPE&value=1")[0] == 400, "unknown code in control -> 400")
    check(http(endpoint, "POST", "/_gpustack/quotas?code=L-417A185B&deny=maybe")[0] == 400, "bad flag in control -> 400")


def reset_clears(endpoint: str, ec2: Any, sq: Any) -> None:
    control(endpoint, "POST", "/_gpustack/capacity/offerings?none=1")
    control(endpoint, "POST", "/_gpustack/capacity/fail?kind=insufficient&n=5")
    control(endpoint, "POST", "/moto-api/reset")
    check(ec2.describe_capacity_reservations()["CapacityReservations"] == [], "moto reset clears reservations")
    check(control(endpoint, "GET", "/_gpustack/capacity/purchases") == {"count": 0, "purchases": []}, "moto reset clears the purchase log")
    check(ec2.describe_capacity_block_offerings(InstanceType="p5.48xlarge", CapacityDurationHours=24, MaxResults=1)["CapacityBlockOfferings"] != [], "moto reset clears offering controls")
    check(
        ec2.create_capacity_reservation(InstanceType="m5.large", InstancePlatform="Linux/UNIX", InstanceCount=1, AvailabilityZone="us-west-2a")["CapacityReservation"]["State"] == "active",
        "moto reset clears injected failures",
    )
    check(sq.get_service_quota(ServiceCode="ec2", QuotaCode="L-417A185B")["Quota"]["Value"] == 1536.0, "moto reset restores quotas")
    control(endpoint, "POST", "/moto-api/reset")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True, help="e.g. http://127.0.0.1:PORT")
    args = parser.parse_args()
    endpoint = args.endpoint
    session = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)
    ec2 = session.client("ec2", endpoint_url=endpoint)
    ec2_no_retry = session.client("ec2", endpoint_url=endpoint, config=NO_RETRY)
    ec2_east = session.client("ec2", endpoint_url=endpoint, region_name="us-east-1")
    sq = session.client("service-quotas", endpoint_url=endpoint)
    try:
        odcr(endpoint, ec2, ec2_no_retry, ec2_east)
        capacity_blocks(endpoint, ec2)
        service_quotas(endpoint, sq)
        reset_clears(endpoint, ec2, sq)
    except Exception as e:  # noqa: BLE001
        print(f"FAIL {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print("selftest_capacity: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
