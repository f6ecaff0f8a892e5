"""SageMaker training plans: SearchTrainingPlanOfferings, CreateTrainingPlan, DescribeTrainingPlan,
ListTrainingPlans, and tags on training-plan ARNs (AddTags/DeleteTags/ListTags).

moto 5.2.5 has no training plans. Wire shapes are botocore 1.44.5's (sagemaker 2017-07-24):
``TrainingPlanOffering``, ``ReservedCapacityOffering``, ``DescribeTrainingPlanResponse``,
``TrainingPlanSummary``, ``ReservedCapacitySummary``.

Sources: [API] the SageMaker API Reference pages of these operations and shapes (and botocore's
copy of them); [DG-search] SageMaker Developer Guide "Search training plan offerings"
(search-training-plan-offerings-api-cli-sdk); [DG-plans] "Reserve training plans for your training
jobs or HyperPod clusters" (reserve-capacity-with-training-plans); [DG-details] "View training plan
details" (training-plan-details-using-api-cli-sdk); [DG-hyperpod] "Training plans utilization for
Amazon SageMaker HyperPod clusters" (training-plan-utilization-for-hyperpod); [DG-quotas] "View
SageMaker training plans quotas" (training-plan-quotas); [3P] a third-party
account survey (read-only calls against a real account, 2026) quoted where used.

SearchTrainingPlanOfferings
---------------------------

Offerings are computed, not stored (like ``capacity_blocks.py``), so the same search finds the same
offerings:

* Asked: ``InstanceType`` (botocore enum ``ReservedCapacityInstanceType``), ``InstanceCount``,
  ``DurationHours``, ``TargetResources`` (exactly one of training-job, hyperpod-cluster, endpoint,
  studio-apps), optional ``StartTimeAfter`` / ``EndTimeBefore``. botocore 1.44.5 marks none of
  them required (the operation also serves UltraServer and extension searches), but [DG-search]
  lists TargetResources, InstanceType, InstanceCount and DurationHours under "Required
  parameters" and the earlier API Reference marked InstanceType, InstanceCount and
  TargetResources "Required: Yes"; a missing one is ``ValidationException`` "1 validation error
  detected: Value null at 'instanceType' failed to satisfy constraint: Member must not be null".
  [DG-search] also says TargetResources defaults to training-job; the emulator keeps it required
  (the stricter reading). More than one target resource: ``ValidationException`` (plans are
  "specific to their target resource" [DG-plans]; wording unverified).
* ``InstanceCount`` must be 1, 2, 4, 8, 16, 32 or 64 ("The reservation instance quantity options
  are 1, 2, 4, 8, 16, 32 or 64 instances" [DG-search]; "If the number of instances is greater than
  1, it should be a power of 2"); else ``ValidationException`` (wording unverified).
* ``DurationHours`` is "rounded up to the nearest multiple of 24" [DG-search] (AWS's own example
  asks for 15 hours); durations are "1-day increments from 1 to 182 days", so more than 4368 hours
  is ``ValidationException`` (wording unverified). Call the rounded value D.
* ``StartTimeAfter`` must be before ``EndTimeBefore`` and ``EndTimeBefore`` "at least 24 hours
  after the start time" [DG-search], else ``ValidationException`` (wording unverified). A
  ``StartTimeAfter`` more than 5 s in the past is ``ValidationException`` ("The ``StartTimeAfter``
  should be a ``timestamp`` ... in the future", [DG-search]; whether AWS refuses or clamps is
  unverified: the strict side); one in the last 5 s counts as now.
* Offerings start at least 30 minutes from now ("Minimum lead time ... within 30 minutes") and at
  most 56 days ahead ("up to 8 weeks (56 days) in advance"), and every block starts and ends at
  11:30 UTC ("Training Plans always end at 11:30 AM UTC on the final day") [DG-plans].
* For each Availability Zone of the region (sorted by name, index i) up to three single-block
  offerings: A = D hours from the first 11:30 UTC at or after the earliest start (day d0), B = D
  hours from d0 + 1 day, C = D + 24 hours from d0 (only while D + 24 <= 4368). An offering whose
  end is after ``EndTimeBefore`` or whose start is more than 56 days ahead is left out. Order:
  every AZ's A, then every B, then every C ("The first offering in the list represents the best
  match" [DG-search]). AWS "return[s] up to three offerings" per search [DG-plans] and picks the
  AZs by availability, which cannot be modelled; the emulator gives every AZ its own three, so an
  instance group bound to one AZ can always find one, and tests make capacity scarce with the
  control endpoints below. Two-block (split) offerings only under the control ``split=1`` (below).
  ``ml.p6e-gb200.36xlarge``
  is sold as UltraServers only [DG-plans]: an instance search for it finds nothing.
* ``TrainingPlanOfferingId`` = ``tpo-`` + the sha256 hex of
  ``type|count|AZ|start (YYYY-MM-DDTHH:MMZ)|hours|target`` (``|split <gap>`` appended for a
  two-block offering) ([DG-search] shows ``tpo-`` + "SHA-256-hash-value"; the target is in the
  key because a plan is bound to it). Whether AWS's ids are stable between searches is NOT
  documented (round-2 audit M5): under the control ``per_search_ids=1`` every search numbers its
  ids afresh (``|search <n>`` appended), so the same offering has a new id each time. An offering
  that was bought is unavailable under any id (its content is remembered).
* Two-block offerings ([DG-plans]: "SageMaker training plans don't return a 'no capacity' result
  if a single continuous Reserved Capacity block meeting all criteria is unavailable. Instead, it
  automatically attempts to fulfill the request using two separate Reserved Capacity blocks"):
  under the control ``split=1`` (no continuous capacity) every offering of D >= 48 hours is two
  blocks of the asked type and count, the first ``max(24, D/2 rounded down to days)`` hours,
  then a 24-hour gap, then the rest; ``DurationHours`` is D (the reserved hours), each
  ``ReservedCapacityOfferings`` entry has its own start, end and hours, and the plan bought from
  it has one ``ReservedCapacitySummaries`` entry per block (``…-rc1``, ``…-rc2``), ``Active``
  within a block and ``Scheduled`` before and between them ("The status goes back to
  Scheduled between blocks", [DG-plans]). The gap's length is the emulator's choice.
* ``UpfrontFee`` (string, two decimals, rounded half up, ``CurrencyCode`` ``USD``)::

      HOURLY_RATES[type] x InstanceCount x hours x AZ_FACTORS[i mod 6] x day factor x price multiplier

  day factor = 1 + 0.02 x max(0, 7 - days ahead) + 0.01 x (start date ordinal mod 3), as in
  capacity_blocks.py: blocks starting within a week cost up to 14 % more, so offering B (a day
  later) is usually cheaper than A and the cheapest offering is not always the first. The rates are
  illustrative, not AWS's prices. The fee of a bought plan is fixed at purchase.
* ``RequestedStartTimeAfter`` echoes ``StartTimeAfter`` (now when absent), ``RequestedEndTimeBefore``
  echoes ``EndTimeBefore``; ``DurationMinutes`` is 0; ``ReservedCapacityOfferings`` has one entry
  (two for a split offering).
* Quota: an ``InstanceCount`` above the applied "Number of <type> instances in reserved capacity
  across training plans per Region" quota ([DG-quotas]) is ``ResourceLimitExceeded`` ([3P]: a
  search with that quota at 0 answered ResourceLimitExceeded; wording unverified).
* Not emulated (501 ``NotImplemented``, the emulator's answer for what it lacks):
  ``TrainingPlanArn`` (extension offerings, and ``ExtendTrainingPlan``), ``UltraServerType`` /
  ``UltraServerCount``.

CreateTrainingPlan
------------------

``TrainingPlanName`` (unique in the account and region), ``TrainingPlanOfferingId``, ``Tags``:

* A name already used in the account and region, whatever its plan's status, is ``ResourceInUse``
  "Training plan with name <name> already exists." Whether AWS frees the name of an expired plan is
  not documented (there is no DeleteTrainingPlan); the emulator keeps it taken. Wording unverified.
* An offering id no search in this account and region returned: ``ResourceNotFound`` "Training plan
  offering <id> not found." One that was bought already, was removed by a test, has started, or
  while a test set ``none``: ``ValidationException`` "Training plan offering <id> is no longer
  available." (codes and wording unverified: the model lists ResourceNotFound, ResourceInUse and
  ResourceLimitExceeded for this operation).
* ``ResourceLimitExceeded`` when the account already has "Number of training plans per Region"
  plans that are not Expired/Failed, or when the reserved instances of the type in such plans plus
  the offering's exceed the reserved-capacity quota ([DG-quotas] names both quotas; that expired
  plans do not count and the wording are unverified).
* ``SpareInstanceCountPerUltraServer``: 501 ``NotImplemented`` (UltraServer plans are not emulated).
* Answers ``TrainingPlanArn`` ``arn:<partition>:sagemaker:<region>:<account>:training-plan/<name>``
  and records the purchase (control endpoint below). Tag keys starting ``aws:`` are refused.

Status (evaluated when read): ``Scheduled`` until the start, ``Active`` until the end, then
``Expired`` ([API] CreateTrainingPlan: "After successful upfront payment, the plan's status becomes
Scheduled ... When the plan start date arrives, it becomes Active"; [DG-details] "After the plan's
end date, the status becomes Expired"). Payment is immediate unless a test delays it or makes it
fail (``payment_ms``, ``fail_payment``: control endpoint), and a test may force a status.

DescribeTrainingPlan / ListTrainingPlans
----------------------------------------

* DescribeTrainingPlan takes the name or the ARN; unknown: ``ResourceNotFound`` "Training plan
  <name> not found." (wording unverified). Answers the plan with TotalInstanceCount,
  InUseInstanceCount = the TargetCount of every HyperPod instance group (any cluster of the account
  and region that still exists) using the plan, AvailableInstanceCount = total - in use (not below
  0), UnhealthyInstanceCount 0, TargetResources and one ReservedCapacitySummary: ReservedCapacityArn
  ``arn:<partition>:sagemaker:<region>:<account>:reserved-capacity/<plan name>-rc1`` (the form of
  [DG-details]'s example), ReservedCapacityType ``Instance``, InstanceType, TotalInstanceCount,
  Status (the plan's), AvailabilityZone, AvailabilityZoneId, DurationHours/Minutes, Start/EndTime.
  [DG-details]'s example shows in-use instances on a Scheduled plan, so instance groups count as in
  use from their creation.
* ListTrainingPlans: ``Filters`` (Name ``Status``; filters with the same name are ORed, wording of
  AWS's semantics unverified), ``StartTimeAfter`` / ``StartTimeBefore`` (the plan's start strictly
  after / before), ``SortBy`` TrainingPlanName | StartTime | Status (default StartTime, unverified),
  ``SortOrder`` (default Ascending, unverified), ``MaxResults`` 1-100 (default 100) and an opaque
  ``NextToken`` (another one: ``ValidationException``).
* There is no DeleteTrainingPlan, CancelTrainingPlan or UpdateTrainingPlan in the API ("Training
  plans cannot be modified once purchased" [DG-plans]): such an ``X-Amz-Target`` is answered 400
  ``UnknownOperationException`` by param_validation.py, as AWS's JSON services answer an operation
  they do not have.

Tags: ``AddTags`` ("Adds or overwrites", [API]) / ``DeleteTags`` / ``ListTags`` on a training-plan
ARN of this account and region; at most 50 tags per resource (the ``TagList`` maximum; more:
``ValidationException``); an unknown ARN is ``ValidationException`` (the model lists no other
error for these operations; wording unverified).

Control endpoints (JSON; global, cleared by ``POST /moto-api/reset``):

* ``GET /_gpustack/sagemaker/purchases`` -> ``{"count": N, "purchases": [{"name", "arn",
  "offering_id", "upfront_fee", "tags", "time", "account_id", "region", "instance_type",
  "instance_count", "availability_zone", "start_time", "end_time", "duration_hours",
  "target_resources"}]}``, every successful CreateTrainingPlan, oldest first.
* ``POST /_gpustack/sagemaker/offerings?price_multiplier=X`` (fees x X from now on),
  ``?remove=<tpo- id>`` (that offering vanishes from searches and cannot be bought), ``?none=1``
  (no offerings at all; ``none=0`` undoes), ``?split=1`` (two-block offerings only, above),
  ``?per_search_ids=1`` (ids differ between searches, above), ``?reset=1`` (undo them all) ->
  ``{"price_multiplier", "removed", "none", "split", "per_search_ids"}``; ``GET`` reads them.
* ``POST /_gpustack/sagemaker/plans?name=N&status=Expired`` forces the status of every plan named N
  (any account/region; Pending, Active, Scheduled, Expired or Failed; ``status=auto`` goes back to
  the timed status) -> ``{"plans": [{"account_id", "region", "name", "arn", "status", "forced"}]}``;
  ``GET /_gpustack/sagemaker/plans`` lists every plan the same way. An unknown name is a 400.
* ``POST /_gpustack/sagemaker/consistency?list_lag_ms=N&payment_ms=N&fail_payment=0|1`` (defaults
  0) -> all three: ListTrainingPlans leaves out plans created less than ``list_lag_ms`` ago, while
  DescribeTrainingPlan finds them at once; a new plan is ``Pending`` for ``payment_ms`` ("When
  created, the plan initially enters a ``Pending`` state ... The training plan reservation is
  fulfilled asynchronously", DG choose-best-training-plan-using-api-cli-sdk), then ``Scheduled``,
  or ``Failed`` with ``fail_payment=1`` ("If the plan purchase fails, the status is set to
  ``Failed``", [DG-details]; its offering stays on sale, its name stays taken). Whether AWS's list lags is not documented (the audit of round 2, M4); the knob
  lets tests check that gpustack never depends on the list to find a plan it just bought.
"""

from __future__ import annotations

import datetime
import hashlib
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from moto.core.responses import ActionResult

from . import capacity_control
from . import service_quotas as sq
from ._sagemaker import (
    LOCK,
    InUse,
    Invalid,
    LimitExceeded,
    NotFound,
    SageMakerResponse,
    all_backends,
    backend_of,
    ec2_of,
    int_settings,
    page,
    partition_of,
    sagemaker_action,
    state,
    tag_dict,
    tag_list,
    to_utc,
    utcnow,
)

# Illustrative USD per instance-hour (not AWS's prices, which vary by region and over time; the
# p4d/p5/p5en ones are close to the per-hour rates a third-party survey derived from real offerings).
HOURLY_RATES: dict[str, Decimal] = {
    "ml.p4d.24xlarge": Decimal("13.00"),
    "ml.p4de.24xlarge": Decimal("16.40"),
    "ml.p5.4xlarge": Decimal("5.90"),
    "ml.p5.48xlarge": Decimal("45.77"),
    "ml.p5e.48xlarge": Decimal("52.40"),
    "ml.p5en.48xlarge": Decimal("60.53"),
    "ml.p6-b200.48xlarge": Decimal("72.00"),
    "ml.p6-b300.48xlarge": Decimal("95.00"),
    "ml.trn1.32xlarge": Decimal("9.50"),
    "ml.trn2.48xlarge": Decimal("25.00"),
}
AZ_FACTORS = (Decimal("1.04"), Decimal("1.00"), Decimal("1.07"), Decimal("1.02"), Decimal("1.05"), Decimal("1.01"))
VALID_COUNTS = (1, 2, 4, 8, 16, 32, 64)
DAY_HOURS = 24
MAX_HOURS = 182 * DAY_HOURS
BLOCK_TIME = datetime.time(11, 30)
MIN_LEAD = datetime.timedelta(minutes=30)
MAX_LEAD = datetime.timedelta(days=56)
PAST_SLACK = datetime.timedelta(seconds=5)  # clock skew allowed for "in the future"
OFFERING_ID = re.compile(r"tpo-[0-9a-f]{64}")
STATUSES = ("Pending", "Active", "Scheduled", "Expired", "Failed")
LIVE = ("Pending", "Active", "Scheduled")  # statuses that hold reserved capacity
SORT_KEYS = {
    "TrainingPlanName": lambda p, now: p.name,
    "StartTime": lambda p, now: p.start,
    "Status": lambda p, now: p.status(now),
}
MAX_TAGS = 50


# --- offerings -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Offering:
    offering_id: str
    instance_type: str
    count: int
    zone_name: str
    zone_id: str
    zone_index: int
    start: datetime.datetime  # naive UTC
    hours: int
    target: str
    requested_after: datetime.datetime
    requested_before: datetime.datetime | None
    gap_hours: int = 0  # > 0: a two-block (split) offering with this gap between its blocks

    @property
    def content(self) -> tuple[Any, ...]:
        """What the offering sells, whatever its id (ids may be per search: control below)."""
        return (self.instance_type, self.count, self.zone_name, self.start, self.hours, self.target, self.gap_hours)

    def blocks(self) -> list[tuple[datetime.datetime, int]]:
        """(start, hours) of each reserved-capacity block: one, or two around the gap."""
        if not self.gap_hours:
            return [(self.start, self.hours)]
        first = max(DAY_HOURS, self.hours // 2 // DAY_HOURS * DAY_HOURS)
        second_start = self.start + datetime.timedelta(hours=first + self.gap_hours)
        return [(self.start, first), (second_start, self.hours - first)]

    @property
    def end(self) -> datetime.datetime:
        start, hours = self.blocks()[-1]
        return start + datetime.timedelta(hours=hours)

    def upfront_fee(self, now: datetime.datetime) -> str:
        days_ahead = (self.start.date() - now.date()).days
        day_factor = 1 + Decimal("0.02") * max(0, 7 - days_ahead) + Decimal("0.01") * (self.start.toordinal() % 3)
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
        """The botocore ``TrainingPlanOffering`` shape."""
        shape: dict[str, Any] = {
            "TrainingPlanOfferingId": self.offering_id,
            "TargetResources": [self.target],
            "RequestedStartTimeAfter": self.requested_after,
            "DurationHours": self.hours,
            "DurationMinutes": 0,
            "UpfrontFee": self.upfront_fee(now),
            "CurrencyCode": "USD",
            "ReservedCapacityOfferings": [
                {
                    "InstanceType": self.instance_type,
                    "InstanceCount": self.count,
                    "AvailabilityZone": self.zone_name,
                    "DurationHours": hours,
                    "DurationMinutes": 0,
                    "StartTime": start,
                    "EndTime": start + datetime.timedelta(hours=hours),
                }
                for start, hours in self.blocks()
            ],
        }
        if self.requested_before is not None:
            shape["RequestedEndTimeBefore"] = self.requested_before
        return shape


def offering_id(
    instance_type: str, count: int, zone: str, start: datetime.datetime, hours: int, target: str, gap: int = 0
) -> str:
    key = f"{instance_type}|{count}|{zone}|{start:%Y-%m-%dT%H:%M}Z|{hours}|{target}"
    if gap:
        key += f"|split {gap}"
    if _control["per_search_ids"]:
        _control["searches"] += 1
        key += f"|search {_control['searches']}"
    return "tpo-" + hashlib.sha256(key.encode()).hexdigest()


_control: dict[str, Any] = {
    "price_multiplier": Decimal(1),
    "removed": set(),
    "none": False,
    "split": False,
    "per_search_ids": False,
    "searches": 0,
}
# Eventual consistency of the list (see the control endpoint): a new plan is listed only
# ``list_lag_ms`` after its creation, while DescribeTrainingPlan finds it at once.
_consistency: dict[str, int] = {"list_lag_ms": 0, "payment_ms": 0, "fail_payment": 0}
_purchases: list[dict[str, Any]] = []


def _reset_offerings_control() -> None:
    with LOCK:
        _control.update(price_multiplier=Decimal(1), removed=set(), none=False, split=False, per_search_ids=False)


def _clear() -> None:
    _reset_offerings_control()
    with LOCK:
        _purchases.clear()
        _consistency.update(list_lag_ms=0, payment_ms=0, fail_payment=0)


def _issued(backend: Any) -> dict[str, Offering]:
    return state(backend, "training_plan_offerings", dict)


def _purchased(backend: Any) -> set[str]:
    return state(backend, "training_plan_purchased", set)


def _available(backend: Any, offering: Offering, now: datetime.datetime) -> bool:
    return (
        not _control["none"]
        and offering.offering_id not in _control["removed"]
        and offering.offering_id not in _purchased(backend)
        and offering.content not in _purchased(backend)
        and offering.start > now
    )


def _null(member: str) -> Exception:
    return Invalid(
        f"1 validation error detected: Value null at '{member[:1].lower() + member[1:]}' failed to satisfy "
        "constraint: Member must not be null"
    )


def _first_block(earliest: datetime.datetime) -> datetime.datetime:
    start = datetime.datetime.combine(earliest.date(), BLOCK_TIME)
    return start if start >= earliest else start + datetime.timedelta(days=1)


def search(
    backend: Any,
    instance_type: str,
    count: int,
    hours: int,
    target: str,
    after: datetime.datetime | None,
    before: datetime.datetime | None,
    now: datetime.datetime,
) -> list[Offering]:
    if instance_type not in HOURLY_RATES:
        return []
    zones = sorted(
        (z for z in ec2_of(backend).describe_availability_zones() if z.zone_type == "availability-zone"),
        key=lambda z: z.name,
    )
    requested_after = after if after is not None else now
    earliest = max(now + MIN_LEAD, after or now)
    d0 = _first_block(earliest)
    variants = [(d0, hours), (d0 + datetime.timedelta(days=1), hours)]
    if hours + DAY_HOURS <= MAX_HOURS:
        variants.append((d0, hours + DAY_HOURS))
    # No continuous capacity (control ``split``): every offering is two blocks a day apart.
    gap = DAY_HOURS if _control["split"] else 0
    found = []
    for begins, length in variants:
        if gap and length < 2 * DAY_HOURS:
            continue
        ends = begins + datetime.timedelta(hours=length + gap)
        if begins > now + MAX_LEAD or (before is not None and ends > before):
            continue
        for index, zone in enumerate(zones):
            oid = offering_id(instance_type, count, zone.name, begins, length, target, gap)
            found.append(
                Offering(
                    oid, instance_type, count, zone.name, zone.zone_id, index, begins, length, target, requested_after, before, gap
                )
            )
    return [o for o in found if _available(backend, o, now)]


def _reserved_quota(instance_type: str) -> sq.Quota | None:
    return sq.quota_named("sagemaker", sq.RESERVED_CAPACITY.format(instance_type))


def _search_offerings(self: SageMakerResponse) -> ActionResult:
    if self._get_param("TrainingPlanArn") is not None:
        raise NotImplementedError("SearchTrainingPlanOfferings with TrainingPlanArn (extension offerings) is not emulated")
    if self._get_param("UltraServerType") is not None or self._get_param("UltraServerCount") is not None:
        raise NotImplementedError("SearchTrainingPlanOfferings for UltraServers is not emulated")
    for member in ("InstanceType", "InstanceCount", "DurationHours", "TargetResources"):
        if self._get_param(member) is None:
            raise _null(member)
    instance_type = self._get_param("InstanceType")
    count = int(self._get_param("InstanceCount"))
    asked_hours = int(self._get_param("DurationHours"))
    targets = list(self._get_param("TargetResources"))
    after = to_utc(self._get_param("StartTimeAfter"))
    before = to_utc(self._get_param("EndTimeBefore"))
    if len(targets) != 1:
        raise Invalid("Specify exactly one target resource; training plans are specific to their target resource.")
    if count not in VALID_COUNTS:
        raise Invalid(f"InstanceCount {count} is not supported. Valid instance counts are 1, 2, 4, 8, 16, 32 and 64.")
    if asked_hours > MAX_HOURS:
        raise Invalid(f"DurationHours {asked_hours} exceeds the maximum of {MAX_HOURS} hours (182 days).")
    hours = -(-asked_hours // DAY_HOURS) * DAY_HOURS
    now = utcnow()
    if after is not None and after < now - PAST_SLACK:
        raise Invalid("StartTimeAfter must be a time in the future.")
    if after is not None and before is not None:
        if after >= before:
            raise Invalid("StartTimeAfter must be before EndTimeBefore.")
        if before - after < datetime.timedelta(hours=DAY_HOURS):
            raise Invalid("EndTimeBefore must be at least 24 hours after StartTimeAfter.")
    quota = _reserved_quota(instance_type)
    if quota is not None and count > sq.applied(quota):
        raise LimitExceeded(
            f"The account-level service limit '{quota.name}' is {int(sq.applied(quota))} Instances, with current "
            f"utilization of 0 Instances and a request delta of {count} Instances. Please use AWS Service Quotas "
            "to request an increase for this quota."
        )
    backend = backend_of(self)
    with LOCK:
        offerings = search(backend, instance_type, count, hours, targets[0], after, before, now)
        _issued(backend).update((o.offering_id, o) for o in offerings)
    return ActionResult({"TrainingPlanOfferings": [o.to_shape(now) for o in offerings]})


# --- plans ---------------------------------------------------------------------------------------


@dataclass
class Plan:
    name: str
    arn: str
    account_id: str
    region: str
    partition: str
    offering: Offering
    upfront_fee: str
    tags: dict[str, str]
    created: datetime.datetime
    forced: str | None = None
    paid_at: datetime.datetime | None = None  # Pending until then (control ``payment_ms``)
    payment_fails: bool = False  # then Failed instead of Scheduled (control ``fail_payment``)

    @property
    def instance_type(self) -> str:
        return self.offering.instance_type

    @property
    def total(self) -> int:
        return self.offering.count

    @property
    def zone_name(self) -> str:
        return self.offering.zone_name

    @property
    def start(self) -> datetime.datetime:
        return self.offering.start

    @property
    def end(self) -> datetime.datetime:
        return self.offering.end

    @property
    def target_resources(self) -> list[str]:
        return [self.offering.target]

    def status(self, now: datetime.datetime | None = None) -> str:
        if self.forced is not None:
            return self.forced
        now = now or utcnow()
        if self.paid_at is not None and now < self.paid_at:
            return "Pending"
        if self.payment_fails:
            return "Failed"
        if now >= self.end:
            return "Expired"
        # Active during a block, Scheduled before it and between blocks ([DG-plans]).
        for start, hours in self.offering.blocks():
            if start <= now < start + datetime.timedelta(hours=hours):
                return "Active"
        return "Scheduled"

    def reserved_capacity_arn(self, block: int = 1) -> str:
        return f"arn:{self.partition}:sagemaker:{self.region}:{self.account_id}:reserved-capacity/{self.name}-rc{block}"

    def shape(self, in_use: int, now: datetime.datetime, summary: bool = False) -> dict[str, Any]:
        """``DescribeTrainingPlanResponse`` (``summary``: ``TrainingPlanSummary``)."""
        status = self.status(now)
        out: dict[str, Any] = {
            "TrainingPlanArn": self.arn,
            "TrainingPlanName": self.name,
            "Status": status,
            "DurationHours": self.offering.hours,
            "DurationMinutes": 0,
            "StartTime": self.start,
            "EndTime": self.end,
            "UpfrontFee": self.upfront_fee,
            "CurrencyCode": "USD",
            "TotalInstanceCount": self.total,
            "AvailableInstanceCount": max(0, self.total - in_use),
            "InUseInstanceCount": in_use,
            "TargetResources": self.target_resources,
            "ReservedCapacitySummaries": [
                {
                    "ReservedCapacityArn": self.reserved_capacity_arn(i + 1),
                    "ReservedCapacityType": "Instance",
                    "InstanceType": self.instance_type,
                    "TotalInstanceCount": self.total,
                    "Status": status,
                    "AvailabilityZone": self.zone_name,
                    "AvailabilityZoneId": self.offering.zone_id,
                    "DurationHours": hours,
                    "DurationMinutes": 0,
                    "StartTime": start,
                    "EndTime": start + datetime.timedelta(hours=hours),
                }
                for i, (start, hours) in enumerate(self.offering.blocks())
            ],
        }
        if not summary:
            out["UnhealthyInstanceCount"] = 0
        return out


def plans_of(backend: Any) -> dict[str, Plan]:
    """name -> plan of an account and region."""
    return state(backend, "training_plans", dict)


def plan_arn(backend: Any, name: str) -> str:
    return f"arn:{partition_of(backend)}:sagemaker:{backend.region_name}:{backend.account_id}:training-plan/{name}"


def find_plan(backend: Any, name_or_arn: str) -> Plan | None:
    plans = plans_of(backend)
    if name_or_arn.startswith("arn:"):
        return next((p for p in plans.values() if p.arn == name_or_arn), None)
    return plans.get(name_or_arn)


# Who uses a plan: the HyperPod extension registers a function (backend, plan arn) -> instances.
_usage_counters: list[Any] = []


def register_usage(counter: Any) -> None:
    _usage_counters.append(counter)


def in_use(backend: Any, plan: Plan, exclude: Any = None) -> int:
    return sum(counter(backend, plan.arn, exclude) for counter in _usage_counters)


def _create_plan(self: SageMakerResponse) -> ActionResult:
    name = self._get_param("TrainingPlanName")
    oid = self._get_param("TrainingPlanOfferingId")
    if self._get_param("SpareInstanceCountPerUltraServer") is not None:
        raise NotImplementedError("UltraServer training plans (SpareInstanceCountPerUltraServer) are not emulated")
    tags = tag_dict(self._get_param("Tags"))
    backend = backend_of(self)
    now = utcnow()
    with LOCK:
        plans = plans_of(backend)
        if name in plans:
            raise InUse(f"Training plan with name {name} already exists.")
        offering = _issued(backend).get(oid)
        if offering is None:
            raise NotFound(f"Training plan offering {oid} not found.")
        if not _available(backend, offering, now):
            raise Invalid(f"Training plan offering {oid} is no longer available.")
        live = [p for p in plans.values() if p.status(now) in LIVE]
        plan_quota = sq.quota_named("sagemaker", sq.TRAINING_PLANS)
        if plan_quota is not None and len(live) + 1 > sq.applied(plan_quota):
            raise LimitExceeded(
                f"The account-level service limit '{plan_quota.name}' is {int(sq.applied(plan_quota))}, with "
                f"current utilization of {len(live)}."
            )
        quota = _reserved_quota(offering.instance_type)
        if quota is not None:
            reserved = sum(p.total for p in live if p.instance_type == offering.instance_type)
            if reserved + offering.count > sq.applied(quota):
                raise LimitExceeded(
                    f"The account-level service limit '{quota.name}' is {int(sq.applied(quota))} Instances, with "
                    f"current utilization of {reserved} Instances and a request delta of {offering.count} Instances. "
                    "Please use AWS Service Quotas to request an increase for this quota."
                )
        fee = offering.upfront_fee(now)
        plan = Plan(
            name=name,
            arn=plan_arn(backend, name),
            account_id=backend.account_id,
            region=backend.region_name,
            partition=partition_of(backend),
            offering=offering,
            upfront_fee=fee,
            tags=tags,
            created=now,
            paid_at=now + datetime.timedelta(milliseconds=_consistency["payment_ms"]),
            payment_fails=bool(_consistency["fail_payment"]),
        )
        plans[name] = plan
        if not plan.payment_fails:  # a failed purchase leaves the capacity on sale
            _purchased(backend).update((oid, offering.content))
        _purchases.append(
            {
                "name": name,
                "arn": plan.arn,
                "offering_id": oid,
                "upfront_fee": fee,
                "tags": dict(tags),
                "time": f"{now:%Y-%m-%dT%H:%M:%S}Z",
                "account_id": backend.account_id,
                "region": backend.region_name,
                "instance_type": offering.instance_type,
                "instance_count": offering.count,
                "availability_zone": offering.zone_name,
                "start_time": f"{offering.start:%Y-%m-%dT%H:%M:%S}Z",
                "end_time": f"{offering.end:%Y-%m-%dT%H:%M:%S}Z",
                "duration_hours": offering.hours,
                "target_resources": [offering.target],
            }
        )
    return ActionResult({"TrainingPlanArn": plan.arn})


def _describe_plan(self: SageMakerResponse) -> ActionResult:
    name = self._get_param("TrainingPlanName")
    backend = backend_of(self)
    with LOCK:
        plan = find_plan(backend, name)
        if plan is None:
            raise NotFound(f"Training plan {name} not found.")
        return ActionResult(plan.shape(in_use(backend, plan), utcnow()))


def _list_plans(self: SageMakerResponse) -> ActionResult:
    backend = backend_of(self)
    after = to_utc(self._get_param("StartTimeAfter"))
    before = to_utc(self._get_param("StartTimeBefore"))
    sort_by = self._get_param("SortBy") or "StartTime"
    descending = self._get_param("SortOrder") == "Descending"
    wanted: dict[str, set[str]] = {}
    for f in self._get_param("Filters") or []:
        wanted.setdefault(f["Name"], set()).add(f["Value"])
    now = utcnow()
    with LOCK:
        plans = [
            p
            for p in plans_of(backend).values()
            if (after is None or p.start > after)
            and (before is None or p.start < before)
            and all(p.status(now) in values for name, values in wanted.items() if name == "Status")
            and p.created + datetime.timedelta(milliseconds=_consistency["list_lag_ms"]) <= now
        ]
        plans.sort(key=lambda p: (SORT_KEYS[sort_by](p, now), p.name), reverse=descending)
        chunk, token = page(plans, self._get_param("MaxResults"), self._get_param("NextToken"))
        out: dict[str, Any] = {
            "TrainingPlanSummaries": [p.shape(in_use(backend, p), now, summary=True) for p in chunk]
        }
    if token:
        out["NextToken"] = token
    return ActionResult(out)


# --- tags ----------------------------------------------------------------------------------------


def plan_by_arn(backend: Any, arn: str) -> Plan | None:
    return next((p for p in plans_of(backend).values() if p.arn == arn), None)


def add_tags(target: Any, tags: list[dict[str, str]]) -> list[dict[str, str]]:
    """AddTags semantics on an object with a ``tags`` dict: add or overwrite, at most 50."""
    new = tag_dict(tags)
    merged = {**target.tags, **new}
    if len(merged) > MAX_TAGS:
        raise Invalid(f"Resource cannot have more than {MAX_TAGS} tags; the request would give it {len(merged)}.")
    target.tags = merged
    return tag_list(target.tags)


# --- control endpoints ---------------------------------------------------------------------------


def _control_state() -> dict[str, Any]:
    return {
        "price_multiplier": float(_control["price_multiplier"]),
        "removed": sorted(_control["removed"]),
        "none": _control["none"],
        "split": _control["split"],
        "per_search_ids": _control["per_search_ids"],
    }


def _control_purchases(query: dict[str, str]) -> tuple[int, Any]:
    with LOCK:
        return 200, {"count": len(_purchases), "purchases": [dict(p) for p in _purchases]}


def _control_offerings_get(query: dict[str, str]) -> tuple[int, Any]:
    with LOCK:
        return 200, _control_state()


def _control_offerings(query: dict[str, str]) -> tuple[int, Any]:
    # Parse everything before changing anything, so a bad request changes nothing.
    reset = "reset" in query and capacity_control.flag_arg(query, "reset")
    multiplier = None
    if "price_multiplier" in query:
        multiplier = capacity_control.float_arg(query, "price_multiplier")
        if multiplier <= 0:
            raise capacity_control.ControlError("price_multiplier must be positive")
    none = capacity_control.flag_arg(query, "none") if "none" in query else None
    split = capacity_control.flag_arg(query, "split") if "split" in query else None
    per_search = capacity_control.flag_arg(query, "per_search_ids") if "per_search_ids" in query else None
    remove = query.get("remove")
    if remove is not None and not OFFERING_ID.fullmatch(remove):
        raise capacity_control.ControlError(f"remove must be an offering id (tpo-...), not {remove!r}")
    with LOCK:
        if reset:
            _reset_offerings_control()
        if multiplier is not None:
            _control["price_multiplier"] = Decimal(str(multiplier))
        if none is not None:
            _control["none"] = none
        if split is not None:
            _control["split"] = split
        if per_search is not None:
            _control["per_search_ids"] = per_search
        if remove is not None:
            _control["removed"].add(remove)
        return 200, _control_state()


def _control_consistency(query: dict[str, str]) -> tuple[int, Any]:
    changes = int_settings(query, _consistency)
    with LOCK:
        _consistency.update(changes)
        return 200, dict(_consistency)


def _plan_row(plan: Plan) -> dict[str, Any]:
    return {
        "account_id": plan.account_id,
        "region": plan.region,
        "name": plan.name,
        "arn": plan.arn,
        "status": plan.status(),
        "forced": plan.forced is not None,
    }


def _all_plans() -> list[Plan]:
    return [p for backend in all_backends() for p in plans_of(backend).values()]


def _control_plans_get(query: dict[str, str]) -> tuple[int, Any]:
    with LOCK:
        return 200, {"plans": [_plan_row(p) for p in _all_plans()]}


def _control_plans(query: dict[str, str]) -> tuple[int, Any]:
    name = query.get("name", "")
    status = query.get("status", "")
    if status not in (*STATUSES, "auto"):
        raise capacity_control.ControlError(f"status must be one of {', '.join(STATUSES)}, auto; not {status!r}")
    with LOCK:
        plans = [p for p in _all_plans() if p.name == name]
        if not plans:
            raise capacity_control.ControlError(f"no training plan named {name!r}")
        for plan in plans:
            plan.forced = None if status == "auto" else status
        return 200, {"plans": [_plan_row(p) for p in plans]}


def install() -> None:
    capacity_control.on_reset(_clear)
    sagemaker_action("SearchTrainingPlanOfferings")(_search_offerings)
    sagemaker_action("CreateTrainingPlan")(_create_plan)
    sagemaker_action("DescribeTrainingPlan")(_describe_plan)
    sagemaker_action("ListTrainingPlans")(_list_plans)
    capacity_control.route("GET", "/_gpustack/sagemaker/purchases")(_control_purchases)
    capacity_control.route("GET", "/_gpustack/sagemaker/offerings")(_control_offerings_get)
    capacity_control.route("POST", "/_gpustack/sagemaker/offerings")(_control_offerings)
    capacity_control.route("GET", "/_gpustack/sagemaker/plans")(_control_plans_get)
    capacity_control.route("POST", "/_gpustack/sagemaker/plans")(_control_plans)
    capacity_control.route("POST", "/_gpustack/sagemaker/consistency")(_control_consistency)
