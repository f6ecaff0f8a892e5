"""EC2 On-Demand Capacity Reservations: Create/Describe/Modify/CancelCapacityReservation.

moto 5.2.5 has no capacity-reservation model or actions (only a ``CapacityReservationSpecification``
echo in launch templates), so these are added, per account and region. Capacity Blocks
(capacity_blocks.py) are reservations too (``ReservationType`` ``capacity-block``) and live in the
same store, so DescribeCapacityReservations, CancelCapacityReservation and the tag APIs see them.

Behaviour and error codes (EC2 error-code reference where it names one):

* ``MissingParameter``: no InstanceType, InstancePlatform or InstanceCount (Create), no
  AvailabilityZone/AvailabilityZoneId, no CapacityReservationId, nothing to change (Modify).
* ``InvalidParameterValue``: InstanceCount outside 1..1000, an instance type the catalog
  (DescribeInstanceTypes) does not know, an unknown AZ, an InstancePlatform/Tenancy/EndDateType/
  InstanceMatchCriteria outside its enum, an EndDate not in the future, MaxResults outside 1..1000,
  an unknown filter.
* ``InvalidParameterCombination``: EndDateType ``limited`` without EndDate, or an EndDate with
  ``unlimited``.
* ``IdempotentParameterMismatch``: a ClientToken reused with different parameters (the same token
  with the same parameters returns the first reservation again).
* ``InsufficientInstanceCapacity`` (HTTP 500, as AWS answers it): injected by
  ``POST /_gpustack/capacity/fail?kind=insufficient&n=N`` for the next N creates that would
  otherwise succeed. The AWS SDKs retry a 500 (3 attempts by default), and each attempt uses one of
  the N.
* ``InvalidCapacityReservationId.Malformed`` / ``InvalidCapacityReservationId.NotFound``: an id
  not of the form ``cr-...`` / not in this account and region.
* ``UnsupportedOperation``: Modify or Cancel of a Capacity Block ("You can't modify or cancel a
  Capacity Block", the CancelCapacityReservation doc; AWS documents no code for it, so EC2's
  common code for an unsupported request is used); a future-dated reservation (StartDate), which
  is not emulated.
* ``IncorrectState``: Modify of a cancelled or expired reservation.
* ``InvalidPaginationToken``: a NextToken this emulator did not hand out.

DescribeCapacityReservations filters: those the EC2 API Reference documents (``ec2_filters``):
instance-type, owner-id, instance-platform, availability-zone, tenancy, outpost-arn (none here),
state, start-date, end-date (ISO 8601 ``2026-01-01T11:30:00.000Z``, wildcards allowed),
end-date-type, instance-match-criteria, placement-group-arn, and ``tag:<k>``. There is no
``reservation-type`` filter (nor tag-key/tag-value): ``param_validation`` refuses them as EC2 does.
MaxResults 1..1000 (default 1000) and NextToken are honoured, in creation order.

Cancel of an already cancelled or expired reservation returns ``Return=true`` again. Cancelled
reservations stay visible to Describe (state ``cancelled``), as in AWS. State is computed on read:
``cancelled``, else ``expired`` once EndDate has passed, else ``scheduled`` before StartDate, else
``active``; AvailableInstanceCount is TotalInstanceCount minus the used count while active, else
0. Nothing launches into reservations here; ``POST /_gpustack/capacity/used?id=cr-...&count=N``
marks N instances as running in one (``{"id", "used", "total"}``). ModifyCapacityReservation with
``InstanceMatchCriteria`` on a reservation that is not idle (used > 0) is ``IncorrectState``
(EC2 UG capacity-reservations-modify: eligibility changes need an idle reservation). Ids are ``cr-`` + 17 hex chars and work with the generic CreateTags,
DeleteTags and DescribeTags (resource type ``capacity-reservation``).
"""

from __future__ import annotations

import base64
import datetime
from typing import Any, TypeVar

from moto.core.utils import utcnow
from moto.ec2.exceptions import InvalidInstanceTypeError
from moto.ec2.models.core import TaggedEC2Resource
from moto.ec2.utils import random_id

from . import capacity_control
from ._ec2 import (
    LOCK,
    ActionResult,
    all_backends,
    EC2Response,
    backend_for,
    backend_state,
    ec2_action,
    ec2_error,
    filter_values_match,
    register_resource_prefix,
    tag_list,
)

PREFIX = "cr"
RESOURCE_TYPE = "capacity-reservation"
# The botocore enum CapacityReservationInstancePlatform.
PLATFORMS = (
    "Linux/UNIX",
    "Red Hat Enterprise Linux",
    "SUSE Linux",
    "Windows",
    "Windows with SQL Server",
    "Windows with SQL Server Enterprise",
    "Windows with SQL Server Standard",
    "Windows with SQL Server Web",
    "Linux with SQL Server Standard",
    "Linux with SQL Server Web",
    "Linux with SQL Server Enterprise",
    "RHEL with SQL Server Standard",
    "RHEL with SQL Server Enterprise",
    "RHEL with SQL Server Web",
    "RHEL with HA",
    "RHEL with HA and SQL Server Standard",
    "RHEL with HA and SQL Server Enterprise",
    "Ubuntu Pro",
)
TENANCIES = ("default", "dedicated")
END_DATE_TYPES = ("unlimited", "limited")
MATCH_CRITERIA = ("open", "targeted")
MAX_INSTANCE_COUNT = 1000
MAX_RESULTS = 1000  # the model's bound for MaxResults, and the page size when it is omitted

T = TypeVar("T")


class CapacityReservation(TaggedEC2Resource):
    def __init__(
        self,
        backend: Any,
        *,
        instance_type: str,
        platform: str,
        zone: Any,
        tenancy: str,
        count: int,
        ebs_optimized: bool,
        start_date: datetime.datetime,
        end_date: datetime.datetime | None,
        end_date_type: str,
        match_criteria: str,
        placement_group_arn: str | None = None,
        reservation_type: str = "default",
    ) -> None:
        self.ec2_backend = backend
        self.id = random_id(prefix=PREFIX, size=17)
        self.arn = f"arn:aws:ec2:{backend.region_name}:{backend.account_id}:capacity-reservation/{self.id}"
        self.owner_id = backend.account_id
        self.instance_type = instance_type
        self.platform = platform
        self.zone = zone  # moto's Zone: .name, .zone_id
        self.tenancy = tenancy
        self.count = count
        self.ebs_optimized = ebs_optimized
        self.create_date = utcnow()
        self.start_date = start_date
        self.end_date = end_date
        self.end_date_type = end_date_type
        self.match_criteria = match_criteria
        self.placement_group_arn = placement_group_arn
        self.reservation_type = reservation_type
        self.cancelled = False
        # Instances running in it (set by tests through /_gpustack/capacity/used; nothing here
        # launches into reservations).
        self.used = 0

    @property
    def state(self) -> str:
        now = utcnow()
        if self.cancelled:
            return "cancelled"
        if self.end_date is not None and now >= self.end_date:
            return "expired"
        if self.start_date > now:
            return "scheduled"
        return "active"

    def to_shape(self) -> dict[str, Any]:
        """The botocore ``CapacityReservation`` shape (member names, not wire names)."""
        state = self.state
        out: dict[str, Any] = {
            "CapacityReservationId": self.id,
            "OwnerId": self.owner_id,
            "CapacityReservationArn": self.arn,
            "AvailabilityZoneId": self.zone.zone_id,
            "InstanceType": self.instance_type,
            "InstancePlatform": self.platform,
            "AvailabilityZone": self.zone.name,
            "Tenancy": self.tenancy,
            "TotalInstanceCount": self.count,
            "AvailableInstanceCount": max(0, self.count - self.used) if state == "active" else 0,
            "EbsOptimized": self.ebs_optimized,
            "EphemeralStorage": False,
            "State": state,
            "StartDate": self.start_date,
            "EndDateType": self.end_date_type,
            "InstanceMatchCriteria": self.match_criteria,
            "CreateDate": self.create_date,
            "Tags": tag_list(self),
            "ReservationType": self.reservation_type,
        }
        if self.end_date is not None:
            out["EndDate"] = self.end_date
        if self.placement_group_arn is not None:
            out["PlacementGroupArn"] = self.placement_group_arn
        return out

    def filter_value(self, name: str) -> Any:
        tags = {t["key"]: t["value"] for t in self.get_tags()}
        if name.startswith("tag:"):
            return tags.get(name[4:])
        simple = {
            "instance-type": self.instance_type,
            "owner-id": self.owner_id,
            "instance-platform": self.platform,
            "availability-zone": self.zone.name,
            "tenancy": self.tenancy,
            "state": self.state,
            "end-date-type": self.end_date_type,
            "instance-match-criteria": self.match_criteria,
            "placement-group-arn": self.placement_group_arn,
            "outpost-arn": None,
            "start-date": _iso(self.start_date),
            "end-date": _iso(self.end_date) if self.end_date is not None else None,
        }
        if name not in simple:
            raise ec2_error("InvalidParameterValue", f"The filter '{name}' is invalid")
        return simple[name]


def _iso(moment: datetime.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.000Z")


def reservations(backend: Any) -> dict[str, CapacityReservation]:
    """id -> reservation (ODCRs and Capacity Blocks), for one account and region, in creation order."""
    return backend_state(backend, "capacity_reservations", dict)


def add_reservation(backend: Any, reservation: CapacityReservation, tags: dict[str, str]) -> None:
    """Store a new reservation and its tags (call with LOCK held)."""
    reservations(backend)[reservation.id] = reservation
    if tags:
        backend.create_tags([reservation.id], tags)


def check_platform(platform: str | None) -> str:
    if not platform:
        raise _missing("InstancePlatform")
    if platform not in PLATFORMS:
        raise _invalid_enum("InstancePlatform", platform, PLATFORMS)
    return platform


def paginate(response: EC2Response, items: list[T]) -> tuple[list[T], str | None]:
    """Apply the request's MaxResults (1..1000, default 1000) and NextToken to ``items``.

    Tokens are opaque to the client: the base64 of the offset of the next page.
    """
    max_results = response._get_int_param("MaxResults")
    token = response._get_param("NextToken")
    if max_results is None:
        max_results = MAX_RESULTS
    elif not 1 <= max_results <= MAX_RESULTS:
        raise ec2_error(
            "InvalidParameterValue",
            f"Value ({max_results}) for parameter maxResults is invalid. "
            f"Expecting a value between 1 and {MAX_RESULTS}.",
        )
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


def _missing(param: str) -> Exception:
    return ec2_error("MissingParameter", f"The request must contain the parameter {param}")


def _invalid_enum(param: str, value: Any, allowed: tuple[str, ...]) -> Exception:
    return ec2_error(
        "InvalidParameterValue",
        f"Value ({value}) for parameter {param} is invalid. Valid values: {', '.join(allowed)}.",
    )


def _check_enum(param: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise _invalid_enum(param, value, allowed)
    return value


def _check_count(count: int) -> None:
    if not 1 <= count <= MAX_INSTANCE_COUNT:
        raise ec2_error(
            "InvalidParameterValue",
            f"Value ({count}) for parameter instanceCount is invalid. "
            f"Valid range is 1 to {MAX_INSTANCE_COUNT}.",
        )


def _check_end(end_date_type: str, end_date: datetime.datetime | None) -> None:
    if end_date_type == "limited" and end_date is None:
        raise ec2_error(
            "InvalidParameterCombination", "EndDate is required when EndDateType is limited."
        )
    if end_date_type == "unlimited" and end_date is not None:
        raise ec2_error(
            "InvalidParameterCombination", "EndDate can only be specified when EndDateType is limited."
        )
    if end_date is not None and end_date <= utcnow():
        raise ec2_error("InvalidParameterValue", "EndDate must be in the future.")


def _zone(backend: Any, name: str | None, zone_id: str | None) -> Any:
    if not name and not zone_id:
        raise _missing("AvailabilityZone")
    for zone in backend.describe_availability_zones():
        if (name and zone.name == name) or (not name and zone.zone_id == zone_id):
            return zone
    raise ec2_error(
        "InvalidParameterValue",
        f"Invalid availability zone: [{name or zone_id}]",
    )


def instance_type_known(backend: Any, instance_type: str) -> bool:
    """Whether the EC2 catalog (DescribeInstanceTypes, as patched by other extensions) has it."""
    try:
        backend.describe_instance_types([instance_type])
    except InvalidInstanceTypeError:
        return False
    return True


def _get(backend: Any, reservation_id: str | None) -> CapacityReservation:
    if not reservation_id:
        raise _missing("CapacityReservationId")
    if not reservation_id.startswith(f"{PREFIX}-"):
        raise ec2_error(
            "InvalidCapacityReservationId.Malformed",
            f"Invalid id: \"{reservation_id}\" (expecting \"cr-...\")",
        )
    reservation = reservations(backend).get(reservation_id)
    if reservation is None:
        raise ec2_error(
            "InvalidCapacityReservationId.NotFound",
            f"The capacity reservation ID '{reservation_id}' does not exist",
        )
    return reservation


def _exists(backend: Any, reservation_id: str) -> None:
    _get(backend, reservation_id)


def _refuse_capacity_block(reservation: CapacityReservation) -> None:
    if reservation.reservation_type == "capacity-block":
        raise ec2_error("UnsupportedOperation", "You can't modify or cancel a Capacity Block.")


# --- injected InsufficientInstanceCapacity -------------------------------------------------------

_insufficient = {"remaining": 0}


def _take_insufficient() -> bool:
    with LOCK:
        if _insufficient["remaining"] > 0:
            _insufficient["remaining"] -= 1
            return True
        return False


def _insufficient_capacity(response: EC2Response, instance_type: str, zone: str) -> tuple[str, dict[str, Any]]:
    """The EC2 error document with HTTP 500, as AWS sends InsufficientInstanceCapacity."""
    error = ec2_error(
        "InsufficientInstanceCapacity",
        f"We currently do not have sufficient {instance_type} capacity in the Availability Zone "
        f"you requested ({zone}). Our system will be working on provisioning additional capacity.",
    )
    _, headers, body = response.serialized(ActionResult(error))
    headers["status"] = 500
    return body, headers


@capacity_control.route("POST", "/_gpustack/capacity/fail")
def _control_fail(query: dict[str, str]) -> tuple[int, Any]:
    kind = query.get("kind", "insufficient")
    if kind != "insufficient":
        raise capacity_control.ControlError("kind must be insufficient")
    n = max(0, capacity_control.int_arg(query, "n"))
    with LOCK:
        _insufficient["remaining"] = n
    return 200, {"kind": kind, "remaining": n}


@capacity_control.route("POST", "/_gpustack/capacity/used")
def _control_used(query: dict[str, str]) -> tuple[int, Any]:
    reservation_id = query.get("id", "")
    count = capacity_control.int_arg(query, "count")
    if count < 0:
        raise capacity_control.ControlError("count must be >= 0")
    with LOCK:
        for backend in all_backends():
            reservation = reservations(backend).get(reservation_id)
            if reservation is not None:
                if count > reservation.count:
                    raise capacity_control.ControlError(f"count must be <= the reservation's {reservation.count}")
                reservation.used = count
                return 200, {"id": reservation_id, "used": count, "total": reservation.count}
    raise capacity_control.ControlError(f"no capacity reservation {reservation_id!r}")


@capacity_control.route("POST", "/_gpustack/capacity/window")
def _control_window(query: dict[str, str]) -> tuple[int, Any]:
    """Moves a reservation's StartDate/EndDate: the stand-in for the passing of time, so a test
    can hold a Capacity Block that started yesterday and ends tomorrow (only future blocks can
    be bought). ``start`` and ``end`` are ISO 8601 UTC (``2026-11-25T11:30:00Z``); ``end`` may be
    ``none`` (no end date). State follows the dates as it always does here."""

    def when(name: str) -> datetime.datetime | None:
        raw = query.get(name)
        if raw is None:
            raise capacity_control.ControlError(f"{name} is required")
        if name == "end" and raw == "none":
            return None
        try:
            parsed = datetime.datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise capacity_control.ControlError(f"{name} must be an ISO 8601 time, not {raw!r}") from None
        if parsed.tzinfo is None:
            raise capacity_control.ControlError(f"{name} must be UTC (end it with Z)")
        return parsed.astimezone(datetime.timezone.utc).replace(tzinfo=None)  # naive UTC, like moto's

    reservation_id = query.get("id", "")
    start, end = when("start"), when("end")
    if start is None or (end is not None and end <= start):
        raise capacity_control.ControlError("end must be after start")
    with LOCK:
        for backend in all_backends():
            reservation = reservations(backend).get(reservation_id)
            if reservation is not None:
                reservation.start_date = start
                reservation.end_date = end
                reservation.end_date_type = "limited" if end is not None else "unlimited"
                return 200, {"id": reservation_id, "state": reservation.state}
    raise capacity_control.ControlError(f"no capacity reservation {reservation_id!r}")


def _clear_control() -> None:
    with LOCK:
        _insufficient["remaining"] = 0


# --- actions ---------------------------------------------------------------------------------------


def _create(self: EC2Response) -> Any:
    instance_type = self._get_param("InstanceType")
    platform = self._get_param("InstancePlatform")
    count = self._get_int_param("InstanceCount")
    zone_name = self._get_param("AvailabilityZone")
    zone_id = self._get_param("AvailabilityZoneId")
    tenancy = self._get_param("Tenancy") or "default"
    ebs_optimized = bool(self._get_bool_param("EbsOptimized", False))
    end_date = self._get_param("EndDate")
    end_date_type = self._get_param("EndDateType") or "unlimited"
    match_criteria = self._get_param("InstanceMatchCriteria") or "open"
    placement_group_arn = self._get_param("PlacementGroupArn")
    token = self._get_param("ClientToken")
    tags = self._parse_tag_specification(RESOURCE_TYPE).get(RESOURCE_TYPE, {})
    if not instance_type:
        raise _missing("InstanceType")
    check_platform(platform)
    if count is None:
        raise _missing("InstanceCount")
    _check_count(count)
    _check_enum("Tenancy", tenancy, TENANCIES)
    _check_enum("EndDateType", end_date_type, END_DATE_TYPES)
    _check_enum("InstanceMatchCriteria", match_criteria, MATCH_CRITERIA)
    _check_end(end_date_type, end_date)
    if self._get_param("StartDate") is not None:
        raise ec2_error(
            "UnsupportedOperation", "Future-dated Capacity Reservations are not supported by the emulator."
        )
    backend = backend_for(self)
    if not instance_type_known(backend, instance_type):
        raise ec2_error(
            "InvalidParameterValue", f"The instance type '{instance_type}' is not supported."
        )
    zone = _zone(backend, zone_name, zone_id)
    self.error_on_dryrun()
    # Everything that defines the reservation: a reused ClientToken must repeat all of it.
    fingerprint = (
        instance_type, platform, count, zone.name, tenancy, ebs_optimized, end_date,
        end_date_type, match_criteria, placement_group_arn, tuple(sorted(tags.items())),
    )
    with LOCK:
        tokens: dict[str, tuple[tuple[Any, ...], str]] = backend_state(
            backend, "capacity_reservation_tokens", dict
        )
        if token and token in tokens:
            first_fingerprint, reservation_id = tokens[token]
            if first_fingerprint != fingerprint:
                raise ec2_error(
                    "IdempotentParameterMismatch",
                    "The client token you have provided is associated with a resource that was "
                    "created with different parameters.",
                )
            return ActionResult({"CapacityReservation": reservations(backend)[reservation_id].to_shape()})
        if _take_insufficient():
            return _insufficient_capacity(self, instance_type, zone.name)
        reservation = CapacityReservation(
            backend,
            instance_type=instance_type,
            platform=platform,
            zone=zone,
            tenancy=tenancy,
            count=count,
            ebs_optimized=ebs_optimized,
            start_date=utcnow(),
            end_date=end_date,
            end_date_type=end_date_type,
            match_criteria=match_criteria,
            placement_group_arn=placement_group_arn,
        )
        add_reservation(backend, reservation, tags)
        if token:
            tokens[token] = (fingerprint, reservation.id)
    return ActionResult({"CapacityReservation": reservation.to_shape()})


def _describe(self: EC2Response) -> ActionResult:
    ids = self._get_param("CapacityReservationIds", []) or []
    filters = self._filters_from_querystring()
    backend = backend_for(self)
    with LOCK:
        found = [_get(backend, i) for i in ids] if ids else list(reservations(backend).values())
    for fname, fvalues in filters.items():
        found = [r for r in found if filter_values_match(r.filter_value(fname), fvalues)]
    page, next_token = paginate(self, found)
    self.error_on_dryrun()
    out: dict[str, Any] = {"CapacityReservations": [r.to_shape() for r in page]}
    if next_token:
        out["NextToken"] = next_token
    return ActionResult(out)


def _modify(self: EC2Response) -> ActionResult:
    reservation_id = self._get_param("CapacityReservationId")
    count = self._get_int_param("InstanceCount")
    end_date = self._get_param("EndDate")
    end_date_type = self._get_param("EndDateType")
    match_criteria = self._get_param("InstanceMatchCriteria")
    backend = backend_for(self)
    with LOCK:
        reservation = _get(backend, reservation_id)
        _refuse_capacity_block(reservation)
        if reservation.state not in ("active", "scheduled"):
            raise ec2_error(
                "IncorrectState",
                f"The capacity reservation '{reservation.id}' is {reservation.state} and cannot be modified.",
            )
        if count is None and end_date is None and end_date_type is None and match_criteria is None:
            raise _missing("InstanceCount, EndDate, EndDateType or InstanceMatchCriteria")
        if count is not None:
            _check_count(count)
        if match_criteria is not None:
            _check_enum("InstanceMatchCriteria", match_criteria, MATCH_CRITERIA)
            # EC2 UG capacity-reservations-modify: "To change the instance eligibility, the Capacity
            # Reservation must be completely idle (zero usage)". AWS's error code for it is not
            # documented; IncorrectState (UNVERIFIED) is EC2's code for a resource in the wrong state.
            if reservation.used > 0:
                raise ec2_error(
                    "IncorrectState",
                    f"The capacity reservation '{reservation.id}' has {reservation.used} running instance(s); "
                    "its instance eligibility (InstanceMatchCriteria) can only change while it is idle.",
                )
        new_type = _check_enum("EndDateType", end_date_type or reservation.end_date_type, END_DATE_TYPES)
        # Changing only the date of a limited reservation keeps it limited; switching to unlimited
        # drops the date; switching to limited needs a date in the same call.
        if end_date is None and end_date_type is None:
            new_end = reservation.end_date
        else:
            new_end = end_date
            _check_end(new_type, new_end)
        self.error_on_dryrun()
        if count is not None:
            reservation.count = count
        if match_criteria is not None:
            reservation.match_criteria = match_criteria
        reservation.end_date_type = new_type
        reservation.end_date = new_end
    return ActionResult({"Return": True})


def _cancel(self: EC2Response) -> ActionResult:
    reservation_id = self._get_param("CapacityReservationId")
    backend = backend_for(self)
    with LOCK:
        reservation = _get(backend, reservation_id)
        _refuse_capacity_block(reservation)
        self.error_on_dryrun()
        if reservation.state in ("active", "scheduled"):
            reservation.cancelled = True
    return ActionResult({"Return": True})


def install() -> None:
    register_resource_prefix(RESOURCE_TYPE, PREFIX, _exists)
    capacity_control.on_reset(_clear_control)
    ec2_action("CreateCapacityReservation")(_create)
    ec2_action("DescribeCapacityReservations")(_describe)
    ec2_action("ModifyCapacityReservation")(_modify)
    ec2_action("CancelCapacityReservation")(_cancel)
