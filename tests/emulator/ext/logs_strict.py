"""CloudWatch Logs as strict as AWS for the calls gpustack makes for an EKS cluster's
control-plane log group (CreateLogGroup, PutRetentionPolicy, DeleteRetentionPolicy,
DescribeLogGroups, DeleteLogGroup).

moto 5.2.5 already has: ``ResourceAlreadyExistsException`` for an existing group,
``ResourceNotFoundException`` for an unknown one (PutRetentionPolicy, DeleteRetentionPolicy,
DeleteLogGroup), the 512-character name limit, ``retentionInDays`` left out of DescribeLogGroups
for a group that never expires. It stores any retention. This module adds, answering
``InvalidParameterException`` with the Coral validation wording moto's own checks use
("1 validation error detected: Value 'x' at 'y' failed to satisfy constraint: ..."):

* ``retentionInDays`` must be one of the values the API reference lists ("Possible values are: 1,
  3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288,
  and 3653": botocore ``logs`` 2014-03-28 shape ``Days``, which types it as a plain integer, so
  param validation cannot see it);
* ``logGroupName`` must match ``[\\.\\-_/#A-Za-z0-9]+`` (botocore ``LogGroupName`` pattern);
* DeleteLogGroup takes the group's tags with it (moto keeps them in its tagger under the ARN,
  so a new group of the same name came back with the old tags; tags are the resource's:
  TagResource API reference, "Assigns one or more tags ... to the specified CloudWatch Logs
  resource", and DeleteLogGroup "Deletes the specified log group").
* CreateLogGroup ``tags``: at most 50 ([M] ``Tags`` max 50), keys not starting ``aws:`` (reserved
  for AWS: CloudWatch Logs API reference, TagResource, "Tags that begin with aws: are reserved").
"""

from __future__ import annotations

import re
from typing import Any

from moto.logs.exceptions import InvalidParameterException
from moto.logs.models import LogsBackend

RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)
NAME = re.compile(r"[\.\-_/#A-Za-z0-9]+")

_create_log_group = LogsBackend.create_log_group
_put_retention_policy = LogsBackend.put_retention_policy
_delete_log_group = LogsBackend.delete_log_group


def _check_name(name: str) -> None:
    if not NAME.fullmatch(name or ""):
        raise InvalidParameterException(
            constraint=f"Member must satisfy regular expression pattern: {NAME.pattern}",
            parameter="logGroupName",
            value=name,
        )


def _create(self: LogsBackend, log_group_name: str, tags: dict[str, str] | None, **kwargs: Any) -> Any:
    _check_name(log_group_name)
    tags = tags or {}
    if len(tags) > 50:
        raise InvalidParameterException(
            constraint="Member must have length less than or equal to 50", parameter="tags", value=tags
        )
    reserved = [k for k in tags if k.startswith("aws:")]
    if reserved:
        raise InvalidParameterException(msg=f"Tag keys starting with 'aws:' are reserved: {reserved[0]}")
    return _create_log_group(self, log_group_name, tags, **kwargs)


def _put_retention(self: LogsBackend, log_group_name: str, retention_in_days: Any) -> None:
    _check_name(log_group_name)
    if retention_in_days not in RETENTION_DAYS:
        raise InvalidParameterException(
            constraint=f"Member must satisfy enum value set: [{', '.join(map(str, RETENTION_DAYS))}]",
            parameter="retentionInDays",
            value=retention_in_days,
        )
    _put_retention_policy(self, log_group_name, retention_in_days)


def _delete(self: LogsBackend, log_group_name: str) -> None:
    group = self.groups.get(log_group_name)
    _delete_log_group(self, log_group_name)
    if group is not None:
        self.tagger.delete_all_tags_for_resource(group.arn)


def install() -> None:
    LogsBackend.delete_log_group = _delete  # type: ignore[method-assign]
    LogsBackend.create_log_group = _create  # type: ignore[method-assign]
    LogsBackend.put_retention_policy = _put_retention  # type: ignore[method-assign]
