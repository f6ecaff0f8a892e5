"""End-to-end check of the price extensions of a running emulator through boto3 (starts nothing).

    tests/emulator/.venv/bin/python tests/emulator/selftest_pricing.py --endpoint http://127.0.0.1:PORT

Covers pricing:GetProducts (ext/pricing.py) and ec2:DescribeSpotPriceHistory (ext/spot_prices.py):
their strictness (each refusal's rule is cited in the module docstrings) and that the answers
carry the prices of tests/emulator/data/prices.json, read here independently. Exits non-zero on
the first failure.
"""

from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import urllib.request
from decimal import Decimal
from typing import Any, Callable

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

DATA = json.loads((pathlib.Path(__file__).resolve().parent / "data" / "prices.json").read_text())
NO_RETRY = Config(retries={"total_max_attempts": 1, "mode": "standard"}, parameter_validation=False)
# The pricing checks send more GetProducts than the 10-token bucket holds: throttled calls are
# retried (only ThrottlingException is retryable among the codes checked here).
PACED = Config(retries={"total_max_attempts": 10, "mode": "standard"}, parameter_validation=False)


def check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)
    print(f"ok   {what}")


def error_code(call: Callable[..., Any], **kwargs: Any) -> str | None:
    try:
        call(**kwargs)
    except ClientError as e:
        return e.response["Error"]["Code"]
    return None


def term(field: str, value: str) -> dict[str, str]:
    return {"Type": "TERM_MATCH", "Field": field, "Value": value}


def linux(region: str, instance_type: str) -> list[dict[str, str]]:
    return [
        term("serviceCode", "AmazonEC2"),
        term("regionCode", region),
        term("instanceType", instance_type),
        term("operatingSystem", "Linux"),
        term("tenancy", "Shared"),
        term("preInstalledSw", "NA"),
        term("capacitystatus", "Used"),
        term("marketoption", "OnDemand"),
    ]


def usd_of(item: str) -> Decimal:
    doc = json.loads(item)
    (term_,) = doc["terms"]["OnDemand"].values()
    (dim,) = term_["priceDimensions"].values()
    assert dim["unit"] == "Hrs"
    return Decimal(dim["pricePerUnit"]["USD"])


def pricing_checks(endpoint: str) -> None:
    p = boto3.client("pricing", region_name="us-east-1", endpoint_url=endpoint, config=PACED)
    want = Decimal(DATA["on_demand"]["us-west-2"]["g6.xlarge"]["usd"])
    out = p.get_products(ServiceCode="AmazonEC2", FormatVersion="aws_v1", Filters=linux("us-west-2", "g6.xlarge"))
    check(out["FormatVersion"] == "aws_v1", "GetProducts answers FormatVersion aws_v1")
    check(len(out["PriceList"]) == 1, "the eight Linux filters leave exactly one product")
    check(usd_of(out["PriceList"][0]) == want, f"its USD hourly price is the data file's ({want})")
    doc = json.loads(out["PriceList"][0])
    check(doc["product"]["attributes"]["regionCode"] == "us-west-2", "the item is a JSON string with product.attributes")
    west = boto3.client("pricing", region_name="us-west-2", endpoint_url=endpoint, config=NO_RETRY)
    check(
        error_code(west.get_products, ServiceCode="AmazonEC2", Filters=linux("us-west-2", "g6.xlarge")) == "InvalidSignatureException",
        "a request signed for us-west-2 (no api.pricing endpoint there) is refused",
    )
    for region in ("eu-central-1", "ap-south-1"):
        other = boto3.client("pricing", region_name=region, endpoint_url=endpoint, config=NO_RETRY)
        check(len(other.get_products(ServiceCode="AmazonEC2", Filters=linux("us-west-2", "g6.xlarge"))["PriceList"]) == 1, f"{region} has an endpoint and prices us-west-2")
    no_sw = [f for f in linux("us-west-2", "g6.xlarge") if f["Field"] != "preInstalledSw"]
    check(len(p.get_products(ServiceCode="AmazonEC2", Filters=no_sw)["PriceList"]) == 2, "without preInstalledSw NA the SQL Web row matches too")
    loose = p.get_products(ServiceCode="AmazonEC2", Filters=[term("regionCode", "us-west-2"), term("instanceType", "g6.xlarge")])
    check(len(loose["PriceList"]) > 1, "without the OS/tenancy/capacitystatus filters decoy rows match too")
    check(
        p.get_products(ServiceCode="AmazonEC2", Filters=linux("us-west-2", "g6f.large"))["PriceList"] == [],
        "a type not in the data file has no product",
    )
    # Paging: MaxResults and a NextToken tied to its query.
    seen, token = [], None
    while True:
        kw: dict[str, Any] = {"ServiceCode": "AmazonEC2", "Filters": [term("regionCode", "us-west-2")], "MaxResults": 7}
        if token:
            kw["NextToken"] = token
        page = p.get_products(**kw)
        check(len(page["PriceList"]) <= 7, "a page holds at most MaxResults items") if not seen else None
        seen.extend(page["PriceList"])
        token = page.get("NextToken")
        if not token:
            break
    check(len(seen) == len(set(seen)) and len(seen) == 6 * len(DATA["on_demand"]["us-west-2"]), "paging returns every row once")
    first = p.get_products(ServiceCode="AmazonEC2", Filters=[term("regionCode", "us-west-2")], MaxResults=3)
    check(
        error_code(p.get_products, ServiceCode="AmazonEC2", Filters=[term("regionCode", "us-east-1")], NextToken=first["NextToken"])
        == "InvalidNextTokenException",
        "a NextToken of another query is InvalidNextTokenException",
    )
    check(error_code(p.get_products, ServiceCode="AmazonEC2", NextToken="forged") == "InvalidNextTokenException", "a forged NextToken is refused")
    # Strictness per the botocore model (param_validation) and the service docs (pricing.py).
    check(error_code(p.get_products, ServiceCode="AmazonEC2", MaxResults=101) == "ValidationException", "MaxResults above 100 is refused")
    check(error_code(p.get_products, ServiceCode="AmazonEC2", MaxResults=0) == "ValidationException", "MaxResults 0 is refused")
    check(
        error_code(p.get_products, ServiceCode="AmazonEC2", Filters=[{"Type": "LIKE", "Field": "regionCode", "Value": "x"}]) == "ValidationException",
        "a filter Type outside the enum is refused",
    )
    check(
        error_code(p.get_products, ServiceCode="AmazonEC2", Filters=[term("regionCode", "us-west-2")] * 51) == "ValidationException",
        "more than 50 filters are refused",
    )
    check(
        error_code(p.get_products, ServiceCode="AmazonEC2", Filters=[term("regionCode", "")]) == "ValidationException",
        "an empty filter Value is refused (min 1)",
    )
    check(error_code(p.get_products, ServiceCode="AmazonEC2", FormatVersion="aws_v2") == "InvalidParameterException", "FormatVersion other than aws_v1 is refused")
    check(
        error_code(p.get_products, ServiceCode="AmazonEC2", Filters=[term("noSuchAttribute", "x")]) == "InvalidParameterException",
        "a field that is no attribute name is refused",
    )
    check(error_code(p.get_products, ServiceCode="AmazonNoSuch") == "NotFoundException", "another service code is NotFoundException")
    any_of = p.get_products(
        ServiceCode="AmazonEC2",
        Filters=linux("us-west-2", "g6.xlarge")[:2] + [{"Type": "ANY_OF", "Field": "instanceType", "Value": "g6.xlarge,m6i.large"}] + linux("us-west-2", "x")[3:],
    )
    check(len(any_of["PriceList"]) == 2, "ANY_OF matches either of its comma-separated values")
    # Throttling: a bucket of 10 per endpoint Region, refilled 5/s (pricing.py, Billing UG).
    burst = boto3.client("pricing", region_name="ap-south-1", endpoint_url=endpoint, config=NO_RETRY)
    codes = [error_code(burst.get_products, ServiceCode="AmazonEC2", MaxResults=1) for _ in range(20)]
    check(codes[:10] == [None] * 10 and "ThrottlingException" in codes[10:], "the 11th GetProducts in a burst at one endpoint is ThrottlingException")


def spot_checks(endpoint: str) -> None:
    ec2 = boto3.client("ec2", region_name="us-west-2", endpoint_url=endpoint, config=NO_RETRY)
    now = datetime.datetime.now(datetime.timezone.utc)
    out = ec2.describe_spot_price_history(
        InstanceTypes=["g6.xlarge"], ProductDescriptions=["Linux/UNIX", "Linux/UNIX (Amazon VPC)"], StartTime=now
    )
    rows = out["SpotPriceHistory"]
    want = DATA["spot"]["us-west-2"]["g6.xlarge"]
    check({r["AvailabilityZone"]: r["SpotPrice"] for r in rows} == want, "StartTime now: one row per zone, the data file's current price")
    check(all(r["AvailabilityZoneId"].startswith("usw2-az") and r["ProductDescription"] == "Linux/UNIX" for r in rows), "rows carry the zone id and Linux/UNIX")
    everything = ec2.describe_spot_price_history(InstanceTypes=["g6.xlarge"])["SpotPriceHistory"]
    check(len(everything) == 2 * len(want), "without StartTime the whole history (two changes per zone)")
    check(everything[0]["Timestamp"] >= everything[-1]["Timestamp"], "newest first")
    zone = ec2.describe_spot_price_history(InstanceTypes=["g6.xlarge"], AvailabilityZone="us-west-2b", StartTime=now)["SpotPriceHistory"]
    check([r["SpotPrice"] for r in zone] == [want["us-west-2b"]], "AvailabilityZone narrows to one zone")
    filt = ec2.describe_spot_price_history(Filters=[{"Name": "instance-type", "Values": ["m6i.large"]}, {"Name": "availability-zone", "Values": ["us-west-2c"]}], StartTime=now)
    check([r["SpotPrice"] for r in filt["SpotPriceHistory"]] == [DATA["spot"]["us-west-2"]["m6i.large"]["us-west-2c"]], "instance-type and availability-zone filters")
    check(ec2.describe_spot_price_history(InstanceTypes=["g6.xlarge"], ProductDescriptions=["Windows"])["SpotPriceHistory"] == [], "Windows has no rows")
    check(error_code(ec2.describe_spot_price_history, Filters=[{"Name": "region", "Values": ["x"]}]) == "InvalidParameterValue", "an undocumented filter is refused")
    check(error_code(ec2.describe_spot_price_history, AvailabilityZone="us-west-2a", AvailabilityZoneId="usw2-az1") == "InvalidParameterCombination", "AvailabilityZone and AvailabilityZoneId together are refused")
    check(error_code(ec2.describe_spot_price_history, MaxResults=4) == "InvalidParameterValue", "MaxResults below 5 is refused")
    check(error_code(ec2.describe_spot_price_history, MaxResults=2000, StartTime=now) is None, "MaxResults 2000 is accepted (Karpenter sends it)")
    check(error_code(ec2.describe_spot_price_history, InstanceTypes=["g6.huge"]) == "InvalidParameterValue", "an instance type outside the enum is refused")
    check(
        error_code(ec2.describe_spot_price_history, StartTime=now, EndTime=now - datetime.timedelta(days=1)) == "InvalidParameterValue",
        "StartTime after EndTime is refused",
    )
    pages = ec2.get_paginator("describe_spot_price_history").paginate(StartTime=now, PaginationConfig={"PageSize": 5})
    got = [r for page in pages for r in page["SpotPriceHistory"]]
    total = sum(len(z) for z in DATA["spot"]["us-west-2"].values())
    check(len(got) == total, f"paging with MaxResults 5 returns all {total} current rows")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    a = ap.parse_args()
    with urllib.request.urlopen(a.endpoint + "/_gpustack/prices", timeout=10) as r:
        check(json.loads(r.read()) == DATA, "GET /_gpustack/prices serves the data file")
    pricing_checks(a.endpoint)
    spot_checks(a.endpoint)
    print("selftest_pricing: all checks passed")


if __name__ == "__main__":
    main()
