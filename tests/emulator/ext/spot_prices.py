"""EC2 DescribeSpotPriceHistory, strictly, with per-zone prices from ``tests/emulator/data/prices.json``.

moto 5.2.5's handler is a stub (docs/aws-facts-pricing-capacity.md section 8): a constant
``0.00001`` for every offering, ``StartTime``/``EndTime``/``ProductDescriptions``/
``AvailabilityZone``/``MaxResults``/``NextToken`` ignored. This replaces it.

History: each (zone, type) in the data's ``spot`` table has two price changes: the current price,
effective at ``spot_effective``, and an earlier one (``spot_previous``: its ``factor`` times the
current price, effective at its ``effective``). The data file says these prices are synthetic.
Rows have ``ProductDescription`` ``Linux/UNIX`` (the response enum ``RIProductDescription``).

Request (botocore 1.44.5 ``DescribeSpotPriceHistoryRequest``; parameter names, ``InstanceType``
enum values and filter names are already checked by ``param_validation``, with the filter names
in ``ec2_filters.FILTERS``):

* ``StartTime``/``EndTime``: "When you specify a start and end time, the operation returns the
  prices of the instance types within that time range. It also returns the last price change
  before the start time, which is the effective price as of the start time" (operation doc).
  Without ``StartTime`` every change up to ``EndTime`` is returned. ``StartTime`` after
  ``EndTime`` is ``InvalidParameterValue`` (wording UNVERIFIED). ``StartTime`` "up to the past 90
  days" and ``EndTime`` "up to the current date" are not refused (AWS's answer is UNVERIFIED).
* ``InstanceTypes``: a type the EC2 catalog (DescribeInstanceTypes) lacks is
  ``InvalidParameterValue`` (wording UNVERIFIED).
* ``InstanceTypes``, ``ProductDescriptions``: ORed within each; ``AvailabilityZone`` or
  ``AvailabilityZoneId``, "not both" (both: ``InvalidParameterCombination``, wording UNVERIFIED);
  an unknown zone of the region is ``InvalidParameterValue``.
* Filters (only the documented ones): ``availability-zone``, ``availability-zone-id``,
  ``instance-type``, ``product-description``, ``spot-price`` (exact or wildcards), ``timestamp``
  (``ddd MMM dd HH:mm:ss UTC YYYY`` with wildcards).
* ``MaxResults``: at least 5, default 1000 (the lower bound of EC2's paginated Describe calls,
  EC2 API Reference "Pagination"; botocore gives none for this call: UNVERIFIED). No upper bound:
  botocore gives none and Karpenter sends 2000 in production ("EC2 doesn't seem to limit page
  size here", karpenter-provider-aws ``pkg/providers/pricing/pricing.go`` ``UpdateSpotPricing``).
  ``NextToken`` opaque; the last page has no token.

Rows are sorted newest first, then by zone and type.
"""

from __future__ import annotations

import base64
import datetime
import json
from decimal import Decimal
from typing import Any

from moto.core.utils import utcnow

from ._ec2 import ActionResult, EC2Response, ec2_action, ec2_error, filter_values_match
from .capacity_reservations import instance_type_known
from .pricing import data

LINUX = "Linux/UNIX"
MIN_RESULTS, DEFAULT_RESULTS = 5, 1000


def _when(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def history(region: str) -> list[dict[str, Any]]:
    """Every price change of ``region``: dicts with zone, type, price (str), timestamp."""
    d = data()
    current = _when(d["spot_effective"])
    previous = _when(d["spot_previous"]["effective"])
    factor = Decimal(d["spot_previous"]["factor"])
    rows = []
    for instance_type, zones in sorted(d["spot"].get(region, {}).items()):
        for zone, price in sorted(zones.items()):
            rows.append({"zone": zone, "type": instance_type, "price": price, "at": current})
            old = (Decimal(price) * factor).quantize(Decimal("0.000001"))
            rows.append({"zone": zone, "type": instance_type, "price": f"{old}", "at": previous})
    return rows


def _aware(t: Any) -> datetime.datetime | None:
    if t is None:
        return None
    if isinstance(t, str):
        t = _when(t)
    return t if t.tzinfo else t.replace(tzinfo=datetime.timezone.utc)


def _in_window(rows: list[dict[str, Any]], start: datetime.datetime | None, end: datetime.datetime) -> list[dict[str, Any]]:
    """Changes in [start, end] plus, per (zone, type), the last change before ``start``."""
    out = [r for r in rows if r["at"] <= end and (start is None or r["at"] >= start)]
    if start is not None:
        last: dict[tuple[str, str], dict[str, Any]] = {}
        for r in rows:
            if r["at"] < start and r["at"] <= end:
                key = (r["zone"], r["type"])
                if key not in last or r["at"] > last[key]["at"]:
                    last[key] = r
        out.extend(last.values())
    return out


def _paginate(self: EC2Response, items: list[Any]) -> tuple[list[Any], str | None]:
    max_results = self._get_int_param("MaxResults")
    if max_results is None:
        max_results = DEFAULT_RESULTS
    elif max_results < MIN_RESULTS:
        raise ec2_error(
            "InvalidParameterValue",
            f"Value ({max_results}) for parameter maxResults is invalid. "
            f"Expecting a value greater than or equal to {MIN_RESULTS}.",
        )
    token = self._get_param("NextToken")
    offset = 0
    if token:
        try:
            offset = int(base64.urlsafe_b64decode(token.encode()).decode())
        except ValueError:
            offset = -1
        if offset < 0:
            raise ec2_error("InvalidPaginationToken", f"Invalid pagination token: {token}")
    end = offset + max_results
    next_token = base64.urlsafe_b64encode(str(end).encode()).decode() if end < len(items) else None
    return items[offset:end], next_token


def _stamp(t: datetime.datetime) -> str:
    return t.strftime("%a %b %d %H:%M:%S UTC %Y")


def _describe(self: EC2Response) -> ActionResult:
    region = self.region
    zones = {z.name: z.zone_id for z in self.ec2_backend.describe_availability_zones()}
    ids = {v: k for k, v in zones.items()}
    zone = self._get_param("AvailabilityZone")
    zone_id = self._get_param("AvailabilityZoneId")
    if zone and zone_id:
        raise ec2_error(
            "InvalidParameterCombination",
            "Either AvailabilityZone or AvailabilityZoneId can be specified, but not both.",
        )
    if zone is not None and zone not in zones:
        raise ec2_error("InvalidParameterValue", f"Invalid availability zone: [{zone}]")
    if zone_id is not None and zone_id not in ids:
        raise ec2_error("InvalidParameterValue", f"Invalid availability zone id: [{zone_id}]")
    start = _aware(self._get_param("StartTime"))
    end = _aware(self._get_param("EndTime")) or utcnow().replace(tzinfo=datetime.timezone.utc)
    if start is not None and start > end:
        raise ec2_error("InvalidParameterValue", "The start time must be before the end time.")
    types = set(self._get_param("InstanceTypes", []) or [])
    for t in sorted(types):
        # botocore's InstanceType enum is exempt from param_validation (it lags EC2's catalog);
        # a type EC2's catalog does not have is refused here (EC2's wording UNVERIFIED).
        if not instance_type_known(self.ec2_backend, t):
            raise ec2_error("InvalidParameterValue", f"Value ({t}) for parameter instanceType is invalid.")
    products = set(self._get_param("ProductDescriptions", []) or [])
    filters = self._filters_from_querystring() or {}
    rows = [r for r in history(region) if r["zone"] in zones]
    rows = _in_window(rows, start, end)
    out = []
    for r in rows:
        item = {
            "AvailabilityZone": r["zone"],
            "AvailabilityZoneId": zones[r["zone"]],
            "InstanceType": r["type"],
            "ProductDescription": LINUX,
            "SpotPrice": r["price"],
            "Timestamp": r["at"],
        }
        if types and r["type"] not in types:
            continue
        # "Linux/UNIX (Amazon VPC)" asks for the same Linux prices (instances in a VPC).
        if products and not products & {LINUX, f"{LINUX} (Amazon VPC)"}:
            continue
        if zone and r["zone"] != zone or zone_id and zones[r["zone"]] != zone_id:
            continue
        by_filter = {
            "availability-zone": r["zone"],
            "availability-zone-id": zones[r["zone"]],
            "instance-type": r["type"],
            "product-description": [LINUX, f"{LINUX} (Amazon VPC)"],
            "spot-price": r["price"],
            "timestamp": _stamp(r["at"]),
        }
        if all(filter_values_match(by_filter[name], wanted) for name, wanted in filters.items()):
            out.append(item)
    out.sort(key=lambda i: (-i["Timestamp"].timestamp(), i["AvailabilityZone"], i["InstanceType"]))
    page, next_token = _paginate(self, out)
    self.error_on_dryrun()
    result: dict[str, Any] = {"SpotPriceHistory": page}
    if next_token:
        result["NextToken"] = next_token
    return ActionResult(result)


def install() -> None:
    ec2_action("DescribeSpotPriceHistory", override=True)(_describe)


def spot_rows_json(region: str) -> str:
    """For selftests: the region's history as JSON."""
    return json.dumps([{**r, "at": r["at"].isoformat()} for r in history(region)])
