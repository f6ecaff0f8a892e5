"""EventBridge as strict as AWS for the calls gpustack makes (PutRule, DescribeRule, ListRules,
PutTargets, ListTargetsByRule, RemoveTargets, DeleteRule, TagResource, UntagResource,
ListTagsForResource).

moto 5.2.5 already has rules on the default bus with ``EventPattern`` (kept as sent),
``ResourceNotFoundException`` for unknown rules in ListTargetsByRule/PutTargets/RemoveTargets,
DeleteRule refusing a rule that still has targets (``ValidationException`` "Rule can't be deleted
since it has targets.", [API] DeleteRule: "Before you can delete the rule, you must remove all
targets") and succeeding for a rule that does not exist ([API] "If you call delete rule multiple
times for the same rule, all calls will succeed"), tags on PutRule and TagResource/
UntagResource/ListTagsForResource by rule ARN. ``param_validation.py`` checks the botocore shapes,
including the ``RuleName``/``TargetId`` patterns EventBridge enforces. This module adds:

Sources: [API] the botocore model (events 2015-10-07, botocore 1.44.5): operation documentation of
PutRule, PutTargets, RemoveTargets; [EB-UG] EventBridge User Guide, "Creating event patterns" and
"Comparison operators for use in event patterns".

* PutTargets: "Each rule can have up to five (5) targets associated with it at one time" [API]:
  a call that would leave more is ``LimitExceededException`` (wording unverified). "The maximum
  number of entries per request is 10" [API PutTargets, RemoveTargets] (botocore's list max is
  100): more is ``ValidationException`` in the Coral wording (unverified).
* PutRule on an existing rule ignores ``Tags`` ("If you are updating an existing rule, any tags you
  specify in the PutRule operation are ignored" [API]); moto applied them.
* EventPattern [EB-UG]: a JSON object whose leaves are non-empty arrays; array members are
  strings, numbers, booleans, null or one-key objects naming a comparison operator (``prefix``,
  ``suffix``, ``anything-but``, ``numeric``, ``exists``, ``cidr``, ``equals-ignore-case``,
  ``wildcard``). Else ``InvalidEventPatternException`` "Event pattern is not valid. Reason: ..."
  (moto's prefix, EventBridge's; the reasons' exact text is unverified). moto answered 500 for a
  pattern that is JSON but not an object, and accepted unknown operators.
* ListRules ``NamePrefix`` is a literal prefix (moto used it as a regular expression).
"""

from __future__ import annotations

import json
import re
from typing import Any

from moto.core.exceptions import JsonRESTError
from moto.events.exceptions import InvalidEventPatternException, ValidationException
from moto.events.models import EventPatternParser, EventsBackend

MAX_TARGETS_PER_RULE = 5
MAX_ENTRIES_PER_REQUEST = 10
OPERATORS = ("prefix", "suffix", "anything-but", "numeric", "exists", "cidr", "equals-ignore-case", "wildcard")


class LimitExceededException(JsonRESTError):
    code = 400

    def __init__(self, message: str):
        super().__init__("LimitExceededException", message)


def _check_values(name: str, values: list[Any]) -> None:
    for value in values:
        if isinstance(value, dict):
            if len(value) != 1:
                raise InvalidEventPatternException(reason=f'"{name}" match objects take exactly one operator')
            operator = next(iter(value))
            if operator not in OPERATORS:
                raise InvalidEventPatternException(reason=f"Unrecognized match type {operator}")
        elif isinstance(value, list):
            raise InvalidEventPatternException(reason=f'"{name}" arrays cannot nest arrays')


def _check_pattern(pattern: dict[str, Any]) -> None:
    for name, value in pattern.items():
        if isinstance(value, dict):
            if not value:
                raise InvalidEventPatternException(reason=f'"{name}" must not be an empty object')
            _check_pattern(value)
        elif isinstance(value, list):
            if not value:
                raise InvalidEventPatternException(reason="Empty arrays are not allowed")
            _check_values(name, value)
        else:
            raise InvalidEventPatternException(reason=f'"{name}" must be an object or an array')


def _parse(self: EventPatternParser) -> dict[str, Any]:
    if not self.pattern:
        return {}
    try:
        pattern = json.loads(self.pattern)
    except ValueError:
        raise InvalidEventPatternException(reason="Invalid JSON") from None
    if not isinstance(pattern, dict):
        raise InvalidEventPatternException(reason="Filter is not an object")
    _check_pattern(pattern)
    return pattern


_orig_put_rule = EventsBackend.put_rule
_orig_put_targets = EventsBackend.put_targets
_orig_remove_targets = EventsBackend.remove_targets
_orig_list_rules = EventsBackend.list_rules


def _bus_rules(backend: EventsBackend, bus_arn: str | None) -> dict[str, Any]:
    try:
        return backend._get_event_bus(backend._normalize_event_bus_arn(bus_arn)).rules  # type: ignore[no-any-return]
    except Exception:  # noqa: BLE001  (moto's own call answers an unknown bus)
        return {}


def _put_rule(self: EventsBackend, name: str, *args: Any, **kwargs: Any) -> Any:
    if name in _bus_rules(self, kwargs.get("event_bus_arn")):
        kwargs["tags"] = None
    return _orig_put_rule(self, name, *args, **kwargs)


def _entries(count: int, member: str) -> None:
    if count > MAX_ENTRIES_PER_REQUEST:
        raise ValidationException(
            f"1 validation error detected: Value at '{member}' failed to satisfy constraint: "
            f"Member must have length less than or equal to {MAX_ENTRIES_PER_REQUEST}"
        )


def _put_targets(self: EventsBackend, name: str, event_bus_arn: str | None, targets: list[dict[str, Any]]) -> None:
    _entries(len(targets or []), "targets")
    rule = _bus_rules(self, event_bus_arn).get(name)
    if rule is not None:
        ids = {t["Id"] for t in rule.targets} | {t.get("Id") for t in targets}
        if len(ids) > MAX_TARGETS_PER_RULE:
            raise LimitExceededException(
                f"The requested resource exceeds the maximum number allowed: a rule can have "
                f"{MAX_TARGETS_PER_RULE} targets."
            )
    _orig_put_targets(self, name, event_bus_arn, targets)


def _remove_targets(self: EventsBackend, name: str, event_bus_arn: str | None, ids: list[str]) -> None:
    _entries(len(ids or []), "ids")
    _orig_remove_targets(self, name, event_bus_arn, ids)


def _list_rules(self: EventsBackend, prefix: str | None = None, **kwargs: Any) -> Any:
    return _orig_list_rules(self, prefix=re.escape(prefix) if prefix else prefix, **kwargs)


def install() -> None:
    EventPatternParser.parse = _parse  # type: ignore[method-assign]
    EventsBackend.put_rule = _put_rule  # type: ignore[method-assign]
    EventsBackend.put_targets = _put_targets  # type: ignore[method-assign]
    EventsBackend.remove_targets = _remove_targets  # type: ignore[method-assign]
    EventsBackend.list_rules = _list_rules  # type: ignore[method-assign]
