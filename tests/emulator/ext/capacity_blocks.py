"""EC2 Capacity Blocks for ML: DescribeCapacityBlockOfferings and PurchaseCapacityBlock.

moto 5.2.5 has neither. Offerings are computed, not stored, so a search is deterministic: for
each supported instance type (``HOURLY_RATES``) that the EC2 catalog also knows, in every
Availability Zone of the region, and each day whose 11:30 UTC end (a day's 11:30 UTC start +
``CapacityDurationHours``) is at or before ``EndDateRange`` (if given), there are three offerings
that all end at that 11:30 UTC: the asked length starting 11:30 UTC, one 3 hours shorter
starting 14:30 UTC and one 3 hours longer starting 08:30 UTC (EC2 UG capacity-blocks-purchase:
EC2 offers blocks slightly shorter and longer than asked, since every block ends at 11:30 UTC;
``CapacityBlockDurationHours`` says which). An offering's start must be at or after
``StartDateRange`` (default now), in the future and at most 8 weeks ahead. The shorter one is
the cheapest of a day, so a cheapest-first choice must check the length. Offerings are listed by start, then AZ, then type, and paged with
MaxResults (1..1000, default 1000) and NextToken.

* ``CapacityBlockOfferingId`` is ``cb-`` + the first 17 hex chars of the sha256 of
  ``type|count|AZ|start|hours``: the same offering has the same id in every search, so an id
  found at plan time can be looked up again at apply time.
* ``UpfrontFee`` (a string, two decimals, rounded half up), in USD:

      HOURLY_RATES[type] x InstanceCount x hours x AZ_FACTORS[i] x day factor x price multiplier

  where ``i`` is the AZ's position in the region's sorted AZ names (``AZ_FACTORS`` repeats past
  6 AZs), and the day factor is ``1 + 0.02 x max(0, 7 - days ahead) + 0.01 x (ordinal of the start
  date mod 3)``: blocks starting within a week cost up to 14 % more, so the cheapest offering of
  a search over a few days is never one of the earliest. "Days ahead" counts UTC dates from today,
  so the fee of an offering changes at UTC midnight; its id does not. The price multiplier is 1
  unless a test sets it.
* Validation (``InvalidParameterValue``): CapacityDurationHours not 24..336 in 24-hour steps nor
  336..4368 in 168-hour (7-day) steps; InstanceCount not 1-64 (default 1);
  StartDateRange after EndDateRange. ``MissingParameter`` without CapacityDurationHours. An
  unsupported or unknown instance type gives an empty list.

PurchaseCapacityBlock takes an offering id that a search in this account and region returned and
answers a ``CapacityReservation`` (``cr-`` id, ReservationType ``capacity-block``, the offering's
type, count, AZ, StartDate and EndDate, EndDateType ``limited``, InstanceMatchCriteria
``targeted``, State ``scheduled`` until the start, then ``active``, then ``expired``; the
TagSpecifications of type ``capacity-reservation``). Bought offerings vanish from later searches.
Errors, with the codes of EC2's error-code reference:

* ``InvalidCapacityBlockOfferingIdMalformed``: not ``cb-`` + 17 hex chars.
* ``InvalidCapacityBlockOfferingIdNotFound``: no search (page) in this account and region returned
  it.
* ``InvalidCapacityBlockOfferingIdExpired``: it was bought already, has started, or a test made it
  vanish (control endpoints below).
* ``MissingParameter`` / ``InvalidParameterValue``: InstancePlatform absent / outside its enum.

Control endpoints (JSON; global to the emulator, cleared by ``POST /moto-api/reset``):

* ``GET /_gpustack/capacity/purchases`` -> ``{"count": N, "purchases": [...]}``, every successful
  purchase, oldest first.
* ``POST /_gpustack/capacity/offerings?price_multiplier=X`` (fees x X from now on),
  ``?remove=<offering id>`` (that offering vanishes from searches and cannot be bought), ``?none=1``
  (no offerings at all; ``none=0`` undoes it), ``?reset=1`` (undo all three) -> the settings.
"""

from __future__ import annotations

import datetime
import hashlib
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from moto.core.utils import utcnow

from . import capacity_control
from ._ec2 import (
    LOCK,
    ActionResult,
    EC2Response,
    backend_for,
    backend_state,
    ec2_action,
    ec2_error,
)
from .capacity_reservations import (
    RESOURCE_TYPE,
    CapacityReservation,
    add_reservation,
    check_platform,
    instance_type_known,
    paginate,
)

# Illustrative USD per instance-hour (not AWS's prices, which vary by region and over time).
HOURLY_RATES: dict[str, Decimal] = {
    "p4d.24xlarge": Decimal("11.80"),
    "p5.48xlarge": Decimal("31.46"),
    "p5e.48xlarge": Decimal("34.61"),
    "p5en.48xlarge": Decimal("36.18"),
    "p6-b200.48xlarge": Decimal("55.04"),
    "trn1.32xlarge": Decimal("8.82"),
}
AZ_FACTORS = (Decimal("1.04"), Decimal("1.00"), Decimal("1.07"), Decimal("1.02"), Decimal("1.05"), Decimal("1.01"))
VALID_COUNTS = tuple(range(1, 65))  # 1-64 instances (not only powers of two)
# Offerings around the asked length: one starting this many hours later (shorter) and one
# starting this many hours earlier (longer), both ending at 11:30 UTC like the exact one.
SHIFT_HOURS = 3
START_TIME = datetime.time(11, 30)  # every Capacity Block starts and ends at 11:30 UTC
MAX_LEAD = datetime.timedelta(weeks=8)
DAY_HOURS = 24
WEEK_HOURS = 7 * 24
MAX_DAILY_HOURS = 14 * 24
MAX_HOURS = 182 * 24
OFFERING_ID = re.compile(r"cb-[0-9a-f]{17}")


@dataclass(frozen=True)
class Offering:
    offering_id: str
    instance_type: str
    count: int
    zone: Any  # moto's Zone
    zone_index: int
    start: datetime.datetime  # naive UTC, like moto's timestamps
    hours: int

    @property
    def end(self) -> datetime.datetime:
        return self.start + datetime.timedelta(hours=self.hours)

    def upfront_fee(self, now: datetime.datetime) -> str:
        days_ahead = (self.start.date() - now.date()).days
        day_factor = (
            1 + Decimal("0.02") * max(0, 7 - days_ahead) + Decimal("0.01") * (self.start.toordinal() % 3)
        )
        fee = (
            HOURLY_RATES[self.instance_type]
            * self.count
            * self.hours
            * AZ_FACTORS[self.zone_index % len(AZ_FACTORS)]
            * day_factor
            * _control["price_multiplier"]
        )
        return str(fee.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))

    def to_shape(self, now: datetime.datetime) -> dict[str, Any]:
        """The botocore ``CapacityBlockOffering`` shape."""
        return {
            "CapacityBlockOfferingId": self.offering_id,
            "InstanceType": self.instance_type,
            "AvailabilityZone": self.zone.name,
            "InstanceCount": self.count,
            "StartDate": self.start,
            "EndDate": self.end,
            "CapacityBlockDurationHours": self.hours,
            "CapacityBlockDurationMinutes": 0,
            "UpfrontFee": self.upfront_fee(now),
            "CurrencyCode": "USD",
            "Tenancy": "default",
        }


def offering_id(instance_type: str, count: int, zone_name: str, start: datetime.datetime, hours: int) -> str:
    key = f"{instance_type}|{count}|{zone_name}|{start:%Y-%m-%dT%H:%M}Z|{hours}"
    return "cb-" + hashlib.sha256(key.encode()).hexdigest()[:17]


# --- state ---------------------------------------------------------------------------------------

# Test controls (global) and the purchase log.
_control: dict[str, Any] = {"price_multiplier": Decimal(1), "removed": set(), "none": False}
_purchases: list[dict[str, Any]] = []


def _reset_offerings_control() -> None:
    with LOCK:
        _control.update(price_multiplier=Decimal(1), removed=set(), none=False)


def _clear() -> None:
    _reset_offerings_control()
    with LOCK:
        _purchases.clear()


def _issued(backend: Any) -> dict[str, Offering]:
    """id -> every offering a search in this account and region has returned."""
    return backend_state(backend, "capacity_block_offerings", dict)


def _purchased(backend: Any) -> set[str]:
    return backend_state(backend, "capacity_block_purchased", set)


def _available(backend: Any, offering: Offering, now: datetime.datetime) -> bool:
    return (
        not _control["none"]
        and offering.offering_id not in _control["removed"]
        and offering.offering_id not in _purchased(backend)
        and offering.start > now
    )


# --- actions -------------------------------------------------------------------------------------


def _check_hours(hours: int | None) -> int:
    if hours is None:
        raise ec2_error("MissingParameter", "The request must contain the parameter CapacityDurationHours")
    daily = DAY_HOURS <= hours <= MAX_DAILY_HOURS and hours % DAY_HOURS == 0
    weekly = MAX_DAILY_HOURS <= hours <= MAX_HOURS and hours % WEEK_HOURS == 0
    if not (daily or weekly):
        raise ec2_error(
            "InvalidParameterValue",
            f"Value ({hours}) for parameter capacityDurationHours is invalid. Capacity Block "
            "durations are 1 to 14 days in 1-day (24-hour) increments, or 14 to 182 days in "
            "7-day increments.",
        )
    return hours


def _search(
    backend: Any,
    instance_type: str | None,
    count: int,
    hours: int,
    start_range: datetime.datetime | None,
    end_range: datetime.datetime | None,
    now: datetime.datetime,
) -> list[Offering]:
    types = [instance_type] if instance_type else sorted(HOURLY_RATES)
    types = [t for t in types if t in HOURLY_RATES and instance_type_known(backend, t)]
    zones = sorted(
        (z for z in backend.describe_availability_zones() if z.zone_type == "availability-zone"),
        key=lambda z: z.name,
    )
    earliest = max(now, start_range) if start_range else now
    # From the day before: that day's shorter offering (14:30 UTC) may still start after ``earliest``.
    start = datetime.datetime.combine(earliest.date(), START_TIME) - datetime.timedelta(days=1)
    found = []
    while start <= now + MAX_LEAD:
        end = start + datetime.timedelta(hours=hours)
        if end_range is not None and end > end_range:
            break
        # The asked length, then one slightly shorter (starts later) and one slightly longer
        # (starts earlier), all ending at 11:30 UTC (EC2 UG capacity-blocks-purchase).
        for shift in (0, SHIFT_HOURS, -SHIFT_HOURS):
            begins = start + datetime.timedelta(hours=shift)
            if begins <= now or begins < earliest or begins > now + MAX_LEAD:
                continue
            length = hours - shift
            for index, zone in enumerate(zones):
                for t in types:
                    oid = offering_id(t, count, zone.name, begins, length)
                    found.append(Offering(oid, t, count, zone, index, begins, length))
        start += datetime.timedelta(days=1)
    return [o for o in found if _available(backend, o, now)]


def _describe_offerings(self: EC2Response) -> ActionResult:
    hours = _check_hours(self._get_int_param("CapacityDurationHours"))
    instance_type = self._get_param("InstanceType")
    count = self._get_int_param("InstanceCount", 1)
    start_range = self._get_param("StartDateRange")
    end_range = self._get_param("EndDateRange")
    if count not in VALID_COUNTS:
        raise ec2_error(
            "InvalidParameterValue",
            f"Value ({count}) for parameter instanceCount is invalid. Expecting a value between 1 and 64.",
        )
    if start_range is not None and end_range is not None and start_range > end_range:
        raise ec2_error("InvalidParameterValue", "StartDateRange must be before EndDateRange.")
    backend = backend_for(self)
    now = utcnow()
    with LOCK:
        offerings = _search(backend, instance_type, count, hours, start_range, end_range, now)
    page, next_token = paginate(self, offerings)
    self.error_on_dryrun()
    with LOCK:
        _issued(backend).update((o.offering_id, o) for o in page)
    out: dict[str, Any] = {"CapacityBlockOfferings": [o.to_shape(now) for o in page]}
    if next_token:
        out["NextToken"] = next_token
    return ActionResult(out)


def _purchase(self: EC2Response) -> ActionResult:
    oid = self._get_param("CapacityBlockOfferingId")
    platform = check_platform(self._get_param("InstancePlatform"))
    tags = self._parse_tag_specification(RESOURCE_TYPE).get(RESOURCE_TYPE, {})
    if not oid:
        raise ec2_error("MissingParameter", "The request must contain the parameter CapacityBlockOfferingId")
    if not OFFERING_ID.fullmatch(oid):
        raise ec2_error(
            "InvalidCapacityBlockOfferingIdMalformed", f"The Capacity Block offering ID '{oid}' is malformed."
        )
    backend = backend_for(self)
    now = utcnow()
    with LOCK:
        offering = _issued(backend).get(oid)
        if offering is None:
            raise ec2_error(
                "InvalidCapacityBlockOfferingIdNotFound",
                f"The Capacity Block offering ID '{oid}' cannot be found for this account.",
            )
        if not _available(backend, offering, now):
            raise ec2_error(
                "InvalidCapacityBlockOfferingIdExpired",
                f"The Capacity Block offering ID '{oid}' is no longer available.",
            )
        self.error_on_dryrun()
        reservation = CapacityReservation(
            backend,
            instance_type=offering.instance_type,
            platform=platform,
            zone=offering.zone,
            tenancy="default",
            count=offering.count,
            ebs_optimized=True,
            start_date=offering.start,
            end_date=offering.end,
            end_date_type="limited",
            match_criteria="targeted",
            reservation_type="capacity-block",
        )
        add_reservation(backend, reservation, tags)
        _purchased(backend).add(oid)
        _purchases.append(
            {
                "account_id": backend.account_id,
                "region": backend.region_name,
                "offering_id": oid,
                "reservation_id": reservation.id,
                "instance_type": offering.instance_type,
                "instance_count": offering.count,
                "availability_zone": offering.zone.name,
                "start_date": f"{offering.start:%Y-%m-%dT%H:%M:%S}Z",
                "end_date": f"{offering.end:%Y-%m-%dT%H:%M:%S}Z",
                "duration_hours": offering.hours,
                "upfront_fee": offering.upfront_fee(now),
                "instance_platform": platform,
                "tags": dict(tags),
                "time": f"{now:%Y-%m-%dT%H:%M:%S}Z",
            }
        )
    return ActionResult({"CapacityReservation": reservation.to_shape()})


# --- control endpoints ---------------------------------------------------------------------------


def _control_state() -> dict[str, Any]:
    return {
        "price_multiplier": float(_control["price_multiplier"]),
        "removed": sorted(_control["removed"]),
        "none": _control["none"],
    }


@capacity_control.route("GET", "/_gpustack/capacity/purchases")
def _control_purchases(query: dict[str, str]) -> tuple[int, Any]:
    with LOCK:
        return 200, {"count": len(_purchases), "purchases": [dict(p) for p in _purchases]}


@capacity_control.route("POST", "/_gpustack/capacity/offerings")
def _control_offerings(query: dict[str, str]) -> tuple[int, Any]:
    # Parse everything before changing anything, so a bad request changes nothing.
    reset = "reset" in query and capacity_control.flag_arg(query, "reset")
    multiplier = None
    if "price_multiplier" in query:
        multiplier = capacity_control.float_arg(query, "price_multiplier")
        if multiplier <= 0:
            raise capacity_control.ControlError("price_multiplier must be positive")
    none = capacity_control.flag_arg(query, "none") if "none" in query else None
    remove = query.get("remove")
    if remove is not None and not OFFERING_ID.fullmatch(remove):
        raise capacity_control.ControlError(f"remove must be an offering id (cb-...), not {remove!r}")
    with LOCK:
        if reset:
            _reset_offerings_control()
        if multiplier is not None:
            _control["price_multiplier"] = Decimal(str(multiplier))
        if none is not None:
            _control["none"] = none
        if remove is not None:
            _control["removed"].add(remove)
        return 200, _control_state()


def install() -> None:
    capacity_control.on_reset(_clear)
    ec2_action("DescribeCapacityBlockOfferings")(_describe_offerings)
    ec2_action("PurchaseCapacityBlock")(_purchase)
