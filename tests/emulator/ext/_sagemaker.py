"""Helpers shared by the SageMaker extensions (``sagemaker_training_plans.py``,
``sagemaker_hyperpod.py``) on moto 5.2.5's SageMaker server.

moto's ``SageMakerResponse`` (JSON 1.1, ``X-Amz-Target: SageMaker.<Op>``) parses the request
against the botocore model (``self._get_param("InstanceGroups")`` gives the decoded structure) and
calls the method named after the operation in snake_case. A method returning
``ActionResult(dict)`` is serialised through the operation's botocore output shape, so members
outside the shape are dropped and timestamps become epoch seconds, as the AWS SDKs expect. Raising
one of the errors below yields ``{"__type": <code>, "Message": ...}`` with HTTP 400, the codes the
SageMaker model lists (``ResourceNotFound``, ``ResourceInUse``, ``ResourceLimitExceeded``,
``ConflictException``) and the common ``ValidationException``.

Extension state lives in the per-account/region moto backend's ``__dict__`` (``state()``), so
``POST /moto-api/reset`` (which rebuilds the backends) clears it.
"""

from __future__ import annotations

import base64
import datetime
import re
from typing import Any, Callable, Iterable, Sequence

from moto.core.utils import utcnow
from moto.ec2.models import ec2_backends
from moto.sagemaker.exceptions import (
    ConflictException,
    ResourceInUseException,
    ResourceNotFound,
    SagemakerClientError,
    ValidationError,
)
from moto.sagemaker.models import SageMakerModelBackend, sagemaker_backends
from moto.sagemaker.responses import SageMakerResponse
from moto.utilities.utils import get_partition

from . import capacity_control
from ._ec2 import LOCK

__all__ = [
    "LOCK",
    "Conflict",
    "InUse",
    "LimitExceeded",
    "NotFound",
    "Invalid",
    "SageMakerResponse",
    "backend_of",
    "ec2_of",
    "page",
    "partition_of",
    "sagemaker_action",
    "state",
    "tag_dict",
    "tag_list",
    "to_utc",
    "utcnow",
]


class LimitExceeded(SagemakerClientError):
    """``ResourceLimitExceeded`` (HTTP 400), the code the SageMaker model lists."""

    code = "ResourceLimitExceeded"


def Invalid(message: str) -> ValidationError:  # noqa: N802 - reads like the exception it returns
    return ValidationError(message=message)


def NotFound(message: str) -> ResourceNotFound:  # noqa: N802
    return ResourceNotFound(message=message)


def InUse(message: str) -> ResourceInUseException:  # noqa: N802
    return ResourceInUseException(message=message)


def Conflict(message: str) -> ConflictException:  # noqa: N802
    return ConflictException(message)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def sagemaker_action(action: str, override: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Registers ``func(self: SageMakerResponse) -> ActionResult`` as the handler of ``action``;
    refuses to shadow a handler moto has unless ``override=True`` (as ``_ec2.ec2_action``)."""
    method = _snake(action)

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        existing = getattr(SageMakerResponse, method, None)
        if existing is not None and not getattr(existing, "_gpustack_ext", False) and not override:
            raise RuntimeError(f"moto already implements SageMaker {action}; pass override=True to replace it")
        func._gpustack_ext = True  # type: ignore[attr-defined]
        func.__name__ = method
        setattr(SageMakerResponse, method, func)
        return func

    return register


def backend_of(response: SageMakerResponse) -> SageMakerModelBackend:
    return sagemaker_backends[response.current_account][response.region]


def ec2_of(backend: SageMakerModelBackend) -> Any:
    return ec2_backends[backend.account_id][backend.region_name]


def partition_of(backend: SageMakerModelBackend) -> str:
    return get_partition(backend.region_name)


def all_backends() -> Iterable[SageMakerModelBackend]:
    for account in list(sagemaker_backends.values()):
        for backend in list(account.values()):
            yield backend


def state(backend: Any, name: str, factory: Callable[[], Any]) -> Any:
    """Per account/region extension state, kept on moto's backend (so moto's reset drops it)."""
    with LOCK:
        key = f"_gpustack_{name}"
        value = backend.__dict__.get(key)
        if value is None:
            value = backend.__dict__[key] = factory()
        return value


def to_utc(value: Any) -> datetime.datetime | None:
    """A request timestamp (datetime, epoch seconds or ISO 8601) as a naive UTC datetime."""
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return value
    if isinstance(value, (int, float)):
        return datetime.datetime.fromtimestamp(value, datetime.timezone.utc).replace(tzinfo=None)
    parsed = datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return to_utc(parsed)


def page(items: Sequence[Any], max_results: int | None, token: str | None, default: int = 100) -> tuple[list[Any], str | None]:
    """One page of ``items`` (already filtered and sorted) and the token of the next page. The
    token is opaque (base64 of the offset); one this module did not hand out is
    ``ValidationException``."""
    size = default if max_results is None else max_results
    start = 0
    if token:
        try:
            start = int(base64.b64decode(token.encode(), validate=True).decode())
        except (ValueError, UnicodeDecodeError):
            raise Invalid(f"Invalid pagination token {token}") from None
        if start < 0 or start > len(items):
            raise Invalid(f"Invalid pagination token {token}")
    chunk = list(items[start : start + size])
    following = start + size
    return chunk, (base64.b64encode(str(following).encode()).decode() if following < len(items) else None)


def tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def tag_dict(tags: list[dict[str, str]] | None) -> dict[str, str]:
    """A request's ``Tags`` as a dict (a repeated key keeps its last value). Keys starting with
    ``aws:`` are reserved for AWS (AWS tagging rules; SageMaker answer wording unverified)."""
    out: dict[str, str] = {}
    for tag in tags or []:
        key = tag.get("Key", "")
        if key.lower().startswith("aws:"):
            raise Invalid(f"Tag keys beginning with 'aws:' are reserved for system use: {key}")
        out[key] = tag.get("Value", "")
    return out


def int_settings(query: dict[str, str], known: Iterable[str]) -> dict[str, int]:
    """A control endpoint's integer settings, each a known name and >= 0; anything else is a 400."""
    known = list(known)
    changes: dict[str, int] = {}
    for name in query:
        if name not in known:
            raise capacity_control.ControlError(f"unknown setting {name!r}; known: {', '.join(known)}")
        changes[name] = capacity_control.int_arg(query, name)
        if changes[name] < 0:
            raise capacity_control.ControlError(f"{name} must be >= 0")
    return changes
