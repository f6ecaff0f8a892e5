"""EC2 GetSpotPlacementScores, from a data file (moto 5.2.5 has no handler for it).

Request (botocore ``ec2/2016-11-15`` ``GetSpotPlacementScoresRequest``; the param_validation
middleware already refuses, before this handler, a missing ``TargetCapacity``, a
``TargetCapacity`` outside 1-2,000,000,000, a ``TargetCapacityUnitType`` outside ``vcpu`` /
``memory-mib`` / ``units``, more than 10 ``RegionNames``, more than 1000 ``InstanceTypes``,
``MaxResults`` outside 10-1000, an unknown parameter, and an ``InstanceRequirements`` without
its required ``VCpuCount`` and ``MemoryMiB``). This handler adds what the model cannot say:

* ``InstanceTypes`` and ``InstanceRequirementsWithMetadata`` are exclusive ("If you specify
  InstanceTypes, you can't specify InstanceRequirementsWithMetadata", botocore doc of both
  members): both -> ``InvalidParameterCombination``; neither -> ``MissingParameter`` (the
  operation doc: compute requirements are given "either by using
  InstanceRequirementsWithMetadata ... or ... InstanceTypes"). The emulator scores named types
  only: ``InstanceRequirementsWithMetadata`` is 501 ``NotImplemented`` (gpustack never sends it).
* every instance type must be one EC2 knows (DescribeInstanceTypes as patched by the other
  extensions), else ``InvalidParameterValue``; every ``RegionNames`` entry must be a Region of
  the ``aws`` partition (botocore ``endpoints.json`` for ``ec2``), else ``InvalidParameterValue``.
* ``DryRun``: ``DryRunOperation`` as every EC2 action.

Answer (``GetSpotPlacementScoresResult``): ``SpotPlacementScores`` of ``{Region, Score}`` or,
with ``SingleAvailabilityZone=true``, ``{Region, AvailabilityZoneId, Score}`` (the AZ as an ID,
as the model's ``AvailabilityZoneId`` says), for "the top 10 Regions or Availability Zones"
(botocore result doc): sorted by score (highest first), then Region and zone ID, at most 10;
then paged with ``MaxResults`` (default 1000) and an opaque ``NextToken``. Regions without
``RegionNames`` are every Region of the data file.

Scores come from ``tests/emulator/data/spot_placement_scores.json``: per Region, per AZ ID, per
type, ``[score, instances]``; a type a zone does not list takes its ``"*"`` entry; a Region or
zone the file lacks scores nothing. The target in instances is ``TargetCapacity`` (unit
``units`` or none: "defaults to number of instances", EC2 UG spot-placement-score), or divided by
the type's vCPUs (``vcpu``) or memory (``memory-mib``), rounded up. A type scores its entry's
score when the target fits in its ``instances``, else 1; a zone scores its best requested type.
A Region (``SingleAvailabilityZone`` false) scores its best type whose instances summed over its
zones hold the target, at that type's best zone score, else 1. Fewer than three distinct
instance types score at most ``LOW_SCORE`` (3): "If you specify one or two instance types ...
the returned placement score will always be low" (botocore ``InstanceTypes`` doc; AWS gives no
number for "low").

Control endpoint: none (the data file is the control).
"""

from __future__ import annotations

import base64
import json
import math
import os
from functools import lru_cache
from typing import Any

import botocore.session
from moto.ec2.exceptions import InvalidInstanceTypeError

from ._ec2 import ActionResult, EC2Response, backend_for, ec2_action, ec2_error

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "spot_placement_scores.json")
TOP = 10
LOW_SCORE = 3
MAX_RESULTS = 1000


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    with open(DATA, encoding="utf-8") as f:
        return json.load(f)["regions"]


@lru_cache(maxsize=1)
def _aws_regions() -> frozenset[str]:
    return frozenset(botocore.session.get_session().get_available_regions("ec2", "aws"))


def _instances(backend: Any, instance_type: str, target: int, unit: str | None) -> int:
    if unit in (None, "units"):
        return target
    info = backend.describe_instance_types([instance_type])[0]
    if unit == "vcpu":
        per = info.get("VCpuInfo", {}).get("DefaultVCpus") or 1
    else:
        per = info.get("MemoryInfo", {}).get("SizeInMiB") or 1
    return math.ceil(target / per)


def _entry(zone: dict[str, Any], instance_type: str) -> list[int] | None:
    return zone.get(instance_type) or zone.get("*")


def _scores(backend: Any, types: list[str], target: int, unit: str | None, regions: list[str], single_az: bool) -> list[dict[str, Any]]:
    need = {t: _instances(backend, t, target, unit) for t in types}
    cap = LOW_SCORE if len(set(types)) < 3 else 10
    out = []
    for region in regions:
        zones = _data().get(region)
        if not zones:
            continue
        if single_az:
            for zone_id, zone in sorted(zones.items()):
                best = 1
                for t in types:
                    e = _entry(zone, t)
                    if e and need[t] <= e[1]:
                        best = max(best, e[0])
                out.append({"Region": region, "AvailabilityZoneId": zone_id, "Score": min(best, cap)})
        else:
            best = 1
            for t in types:
                entries = [e for e in (_entry(z, t) for z in zones.values()) if e]
                if entries and need[t] <= sum(e[1] for e in entries):
                    best = max(best, max(e[0] for e in entries))
            out.append({"Region": region, "Score": min(best, cap)})
    out.sort(key=lambda s: (-s["Score"], s["Region"], s.get("AvailabilityZoneId", "")))
    return out[:TOP]


def _page(response: EC2Response, items: list[Any]) -> tuple[list[Any], str | None]:
    max_results = response._get_int_param("MaxResults") or MAX_RESULTS
    token = response._get_param("NextToken")
    offset = 0
    if token:
        try:
            offset = int(base64.urlsafe_b64decode(token.encode()).decode())
        except ValueError:
            offset = -1
        if offset < 0 or offset > len(items):
            raise ec2_error("InvalidPaginationToken", f"Invalid pagination token: {token}")
    end = offset + max_results
    nxt = base64.urlsafe_b64encode(str(end).encode()).decode() if end < len(items) else None
    return items[offset:end], nxt


def _get_scores(self: EC2Response) -> ActionResult:
    types = self._get_param("InstanceTypes") or []
    requirements = self._get_param("InstanceRequirementsWithMetadata")
    if types and requirements:
        raise ec2_error(
            "InvalidParameterCombination",
            "You can't specify both InstanceTypes and InstanceRequirementsWithMetadata.",
        )
    if not types and not requirements:
        raise ec2_error(
            "MissingParameter",
            "The request must contain the parameter InstanceTypes or InstanceRequirementsWithMetadata",
        )
    target = self._get_int_param("TargetCapacity")
    if target is None:
        raise ec2_error("MissingParameter", "The request must contain the parameter TargetCapacity")
    unit = self._get_param("TargetCapacityUnitType")
    regions = self._get_param("RegionNames") or []
    single_az = bool(self._get_bool_param("SingleAvailabilityZone", False))
    backend = backend_for(self)
    for t in types:
        try:
            backend.describe_instance_types([t])
        except InvalidInstanceTypeError:
            raise ec2_error(
                "InvalidParameterValue", f"Value ({t}) for parameter instanceType is invalid. Unknown instance type."
            ) from None
    for r in regions:
        if r not in _aws_regions():
            raise ec2_error("InvalidParameterValue", f"Value ({r}) for parameter regionName is invalid. Unknown Region.")
    if requirements:
        raise NotImplementedError(
            "GetSpotPlacementScores with InstanceRequirementsWithMetadata: the emulator scores InstanceTypes only"
        )
    self.error_on_dryrun()
    scored = _scores(backend, list(types), target, unit, list(regions) or sorted(_data()), single_az)
    page, nxt = _page(self, scored)
    out: dict[str, Any] = {"SpotPlacementScores": page}
    if nxt:
        out["NextToken"] = nxt
    return ActionResult(out)


def install() -> None:
    ec2_action("GetSpotPlacementScores")(_get_scores)
