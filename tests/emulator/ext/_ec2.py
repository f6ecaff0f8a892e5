"""Helpers for extensions that add EC2 query-protocol actions to moto 5.2.5.

moto's EC2 handler (``moto.ec2.responses.EC2Response``) parses the request against the botocore
model (so ``self._get_param("GroupName")``, ``self._get_param("GroupIds", [])``,
``self._filters_from_querystring()`` and ``self._parse_tag_specification(type)`` all work for any
action in the model), then calls the method named after the ``Action`` in snake_case. A method
that returns ``ActionResult(dict)`` is serialised from the botocore output shape, so the XML
element names (``placementGroupSet``/``item``, ``tagSet``, camelCase members, the 2016-11-15
namespace) are exactly those the AWS SDKs expect. Raising ``ec2_error(code, message)`` yields
EC2's ``<Response><Errors><Error><Code>`` document with HTTP 400.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Callable, Iterable

from moto.core.responses import ActionResult, EmptyResult
from moto.ec2 import utils as ec2_utils
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.models import EC2Backend, ec2_backends
from moto.ec2.responses import EC2Response

__all__ = [
    "ActionResult",
    "EmptyResult",
    "EC2Backend",
    "EC2Response",
    "backend_for",
    "backend_state",
    "ec2_action",
    "ec2_error",
    "filter_values_match",
    "register_resource_prefix",
    "tag_list",
]

# One lock for check-then-act sequences in extension state (moto itself is not thread-safe
# either, but the werkzeug server is threaded).
LOCK = threading.RLock()


def ec2_error(code: str, message: str) -> EC2ClientError:
    return EC2ClientError(code, message)


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def ec2_action(action: str, override: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``func(self: EC2Response) -> ActionResult`` as the handler of ``action``.

    Refuses to replace a handler moto already has unless ``override=True``, so an upgrade of moto
    that gains the action is noticed instead of silently shadowed.
    """

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        method = _snake(action)
        if hasattr(EC2Response, method) and not getattr(
            getattr(EC2Response, method), "_gpustack_ext", False
        ):
            if not override:
                raise RuntimeError(
                    f"moto already implements EC2 {action}; pass override=True to replace it"
                )
        func._gpustack_ext = True  # type: ignore[attr-defined]
        func.__name__ = method
        setattr(EC2Response, method, func)
        return func

    return register


def backend_for(response: EC2Response) -> Any:
    """The moto EC2 backend (per account and region) of the request being handled."""
    return response.ec2_backend


def backend_state(backend: Any, name: str, factory: Callable[[], Any]) -> Any:
    """Per-backend (so per account and region) extension state.

    Kept in the backend's ``__dict__``, so moto's reset (``POST /moto-api/reset``) clears it along
    with moto's own state.
    """
    with LOCK:
        state = backend.__dict__.get(f"_gpustack_{name}")
        if state is None:
            state = factory()
            backend.__dict__[f"_gpustack_{name}"] = state
        return state


def all_backends() -> Iterable[Any]:
    for account in list(ec2_backends.values()):
        for region in list(account.values()):
            yield region


_exists_checks: dict[str, Callable[[Any, str], None]] = {}
_orig_do_resources_exist = EC2Backend.do_resources_exist


def _do_resources_exist(self: Any, resource_ids: list[str]) -> bool:
    rest = []
    for resource_id in resource_ids:
        check = _exists_checks.get(ec2_utils.get_prefix(resource_id) or "")
        if check is not None:
            check(self, resource_id)
        else:
            rest.append(resource_id)
    return _orig_do_resources_exist(self, rest)


EC2Backend.do_resources_exist = _do_resources_exist  # type: ignore[method-assign]


def register_resource_prefix(
    resource_type: str, prefix: str, exists: Callable[[Any, str], None]
) -> None:
    """Make ``<prefix>-<hex>`` ids valid for CreateTags/DeleteTags/DescribeTags.

    ``exists(backend, resource_id)`` must raise the EC2 error for an unknown id (CreateTags calls
    it). Tags then live in moto's generic tag store, so ``TaggedEC2Resource.get_tags`` works.
    """
    ec2_utils.EC2_RESOURCE_TO_PREFIX[resource_type] = prefix
    ec2_utils.EC2_PREFIX_TO_RESOURCE[prefix] = resource_type
    _exists_checks[prefix] = exists


def tag_list(resource: Any) -> list[dict[str, str]]:
    """A resource's tags as the model's ``Tag`` shape (``Key``/``Value``)."""
    return [{"Key": t["key"], "Value": t["value"]} for t in resource.get_tags()]


def filter_values_match(actual: Any, wanted: list[str]) -> bool:
    """EC2 filter semantics: any actual value matches any wanted value; ``*`` and ``?`` wildcards."""
    if actual is None:
        return False
    values = actual if isinstance(actual, (list, set, tuple)) else [actual]
    patterns = [re.compile(ec2_utils.simple_aws_filter_to_re(w)) for w in wanted]
    return any(
        str(v) == w or p.match(str(v)) for v in values for w, p in zip(wanted, patterns)
    )
