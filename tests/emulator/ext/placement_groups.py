"""EC2 placement groups: CreatePlacementGroup, DescribePlacementGroups, DeletePlacementGroup.

moto 5.2.5 has no placement-group model or actions (``grep -ri placementgroup moto/ec2`` finds
nothing outside instance-type data), so the AWS SDK gets ``NotImplementedError``/500 for them.
This adds them, per account and region, with EC2's error codes:

* ``InvalidPlacementGroup.Duplicate``: the name already exists.
* ``InvalidPlacementGroup.Unknown``: an unknown name (Delete, Describe by GroupNames) or id.
* ``InvalidParameterValue``: a strategy other than cluster/spread/partition, a PartitionCount
  with a non-partition strategy or outside 1..7, a SpreadLevel with a non-spread strategy.

Ids are ``pg-`` + 17 hex chars; ``pg-`` ids also work with the generic CreateTags, DeleteTags and
DescribeTags (resource type ``placement-group``). Groups are ``available`` at once.
"""

from __future__ import annotations

from typing import Any

from moto.ec2.models.core import TaggedEC2Resource
from moto.ec2.utils import random_id

from ._ec2 import (
    LOCK,
    ActionResult,
    EC2Response,
    EmptyResult,
    backend_for,
    backend_state,
    ec2_action,
    ec2_error,
    filter_values_match,
    register_resource_prefix,
    tag_list,
)

PREFIX = "pg"
RESOURCE_TYPE = "placement-group"
STRATEGIES = ("cluster", "spread", "partition")
SPREAD_LEVELS = ("host", "rack")
DEFAULT_PARTITION_COUNT = 2  # what EC2 uses when PartitionCount is omitted
MAX_PARTITION_COUNT = 7


class PlacementGroup(TaggedEC2Resource):
    def __init__(
        self,
        backend: Any,
        name: str,
        strategy: str,
        partition_count: int | None,
        spread_level: str | None,
    ) -> None:
        self.ec2_backend = backend
        self.id = random_id(prefix=PREFIX, size=17)
        self.name = name
        self.strategy = strategy
        self.partition_count = partition_count
        self.spread_level = spread_level
        self.state = "available"
        self.arn = (
            f"arn:aws:ec2:{backend.region_name}:{backend.account_id}:placement-group/{name}"
        )

    def to_shape(self) -> dict[str, Any]:
        """The botocore ``PlacementGroup`` shape (member names, not wire names)."""
        out: dict[str, Any] = {
            "GroupName": self.name,
            "State": self.state,
            "Strategy": self.strategy,
            "GroupId": self.id,
            "GroupArn": self.arn,
            "Tags": tag_list(self),
        }
        if self.partition_count is not None:
            out["PartitionCount"] = self.partition_count
        if self.spread_level is not None:
            out["SpreadLevel"] = self.spread_level
        return out

    def filter_value(self, name: str) -> Any:
        tags = {t["key"]: t["value"] for t in self.get_tags()}
        if name.startswith("tag:"):
            return tags.get(name[4:])
        simple = {
            "group-name": self.name,
            "group-id": self.id,
            "group-arn": self.arn,
            "strategy": self.strategy,
            "state": self.state,
            "spread-level": self.spread_level,
            "partition-count": self.partition_count,
            "tag-key": list(tags),
        }
        if name not in simple:
            raise ec2_error("InvalidParameterValue", f"The filter '{name}' is invalid")
        return simple[name]


def _groups(backend: Any) -> dict[str, PlacementGroup]:
    """name -> group, for one account and region."""
    return backend_state(backend, "placement_groups", dict)


def _unknown(what: str) -> Exception:
    return ec2_error("InvalidPlacementGroup.Unknown", f"The Placement Group '{what}' is unknown.")


def _exists(backend: Any, group_id: str) -> None:
    if not any(g.id == group_id for g in _groups(backend).values()):
        raise _unknown(group_id)


def _create(self: EC2Response) -> ActionResult:
    name = self._get_param("GroupName")
    strategy = self._get_param("Strategy")
    partition_count = self._get_int_param("PartitionCount")
    spread_level = self._get_param("SpreadLevel")
    tags = self._parse_tag_specification(RESOURCE_TYPE).get(RESOURCE_TYPE, {})
    if not name:
        raise ec2_error("MissingParameter", "The request must contain the parameter groupName")
    if strategy not in STRATEGIES:
        raise ec2_error(
            "InvalidParameterValue",
            f"Value ({strategy}) for parameter strategy is invalid. "
            f"Valid values: {', '.join(STRATEGIES)}.",
        )
    if partition_count is not None:
        if strategy != "partition":
            raise ec2_error(
                "InvalidParameterValue",
                "Partition count can only be specified for the partition placement strategy.",
            )
        if not 1 <= partition_count <= MAX_PARTITION_COUNT:
            raise ec2_error(
                "InvalidParameterValue",
                f"Value ({partition_count}) for parameter partitionCount is invalid. "
                f"Valid range is 1 to {MAX_PARTITION_COUNT}.",
            )
    elif strategy == "partition":
        partition_count = DEFAULT_PARTITION_COUNT
    if spread_level is not None:
        if strategy != "spread":
            raise ec2_error(
                "InvalidParameterValue",
                "Spread level can only be specified for the spread placement strategy.",
            )
        if spread_level not in SPREAD_LEVELS:
            raise ec2_error(
                "InvalidParameterValue",
                f"Value ({spread_level}) for parameter spreadLevel is invalid.",
            )
    elif strategy == "spread":
        spread_level = "rack"
    self.error_on_dryrun()
    backend = backend_for(self)
    with LOCK:
        groups = _groups(backend)
        if name in groups:
            raise ec2_error(
                "InvalidPlacementGroup.Duplicate",
                f"The Placement Group '{name}' already exists.",
            )
        group = PlacementGroup(backend, name, strategy, partition_count, spread_level)
        groups[name] = group
        if tags:
            backend.create_tags([group.id], tags)
    return ActionResult({"PlacementGroup": group.to_shape()})


def _describe(self: EC2Response) -> ActionResult:
    names = self._get_param("GroupNames", []) or []
    ids = self._get_param("GroupIds", []) or []
    filters = self._filters_from_querystring()
    self.error_on_dryrun()
    with LOCK:
        groups = list(_groups(backend_for(self)).values())
    for name in names:
        if not any(g.name == name for g in groups):
            raise _unknown(name)
    for group_id in ids:
        if not any(g.id == group_id for g in groups):
            raise _unknown(group_id)
    if names:
        groups = [g for g in groups if g.name in names]
    if ids:
        groups = [g for g in groups if g.id in ids]
    for fname, fvalues in filters.items():
        groups = [g for g in groups if filter_values_match(g.filter_value(fname), fvalues)]
    return ActionResult({"PlacementGroups": [g.to_shape() for g in groups]})


def _delete(self: EC2Response) -> ActionResult:
    name = self._get_param("GroupName")
    self.error_on_dryrun()
    backend = backend_for(self)
    with LOCK:
        group = _groups(backend).pop(name or "", None)
        if group is None:
            raise _unknown(name)
        backend.tags.pop(group.id, None)
    return EmptyResult()


def install() -> None:
    register_resource_prefix(RESOURCE_TYPE, PREFIX, _exists)
    ec2_action("CreatePlacementGroup")(_create)
    ec2_action("DescribePlacementGroups")(_describe)
    ec2_action("DeletePlacementGroup")(_delete)
