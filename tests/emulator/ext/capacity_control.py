"""Control-endpoint plumbing shared by the capacity and service-quotas extensions.

Tests steer these extensions over plain HTTP (JSON answers), like request_log.py's endpoints:
``capacity_reservations.py``, ``capacity_blocks.py`` and ``service_quotas.py`` register handlers
with ``@route(method, path)``, and ``ControlRouter`` answers them.

Why the router is installed by ``service_quotas.wrap_wsgi`` and not here: ``ext.wrap_wsgi``
applies middleware in module-name order, later names outside, and request_log.py answers *every*
``/_gpustack/...`` path it does not know with 404. A router must therefore sit outside
request_log, i.e. come from a module whose name sorts after ``request_log``; of these three
extensions only ``service_quotas`` does. (Were request_log to gain a route registry, this router
could go.)

Settings made through these endpoints are global to the emulator (a control call carries no
account or region) and, like moto's own state, are cleared by ``POST /moto-api/reset``: modules
register a callback with ``on_reset``.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs

from moto.core.base_backend import BackendDict

# A handler gets the query string (first value of each parameter) and returns (HTTP status, body).
Handler = Callable[[dict[str, str]], tuple[int, Any]]

_routes: dict[tuple[str, str], Handler] = {}
_reset_callbacks: list[Callable[[], None]] = []


class ControlError(Exception):
    """A bad control request; answered ``400 {"error": message}``."""


def route(method: str, path: str) -> Callable[[Handler], Handler]:
    """Register ``handler(query) -> (status, body)`` for ``method path`` (path without a trailing /)."""

    def register(handler: Handler) -> Handler:
        _routes[(method, path)] = handler
        return handler

    return register


def int_arg(query: dict[str, str], name: str) -> int:
    raw = query.get(name)
    if raw is None:
        raise ControlError(f"{name} is required")
    try:
        return int(raw)
    except ValueError:
        raise ControlError(f"{name} must be an integer, not {raw!r}") from None


def float_arg(query: dict[str, str], name: str) -> float:
    raw = query.get(name, "")
    try:
        return float(raw)
    except ValueError:
        raise ControlError(f"{name} must be a number, not {raw!r}") from None


def flag_arg(query: dict[str, str], name: str) -> bool:
    """``name=1``/``true`` -> True, ``name=0``/``false`` -> False."""
    raw = query.get(name, "").lower()
    if raw in ("1", "true"):
        return True
    if raw in ("0", "false"):
        return False
    raise ControlError(f"{name} must be 1 or 0, not {raw!r}")


def on_reset(callback: Callable[[], None]) -> None:
    """Call ``callback()`` whenever moto resets its backends (``POST /moto-api/reset``)."""
    _reset_callbacks.append(callback)


_orig_reset = BackendDict.reset


def _reset(cls: type) -> None:
    _orig_reset()
    for callback in _reset_callbacks:
        callback()


BackendDict.reset = classmethod(_reset)  # type: ignore[method-assign, assignment]


def _json(start_response: Callable[..., Any], status: int, body: Any) -> Iterable[bytes]:
    data = json.dumps(body).encode()
    reason = {200: "OK", 400: "Bad Request"}.get(status, "")
    start_response(
        f"{status} {reason}".strip(),
        [("Content-Type", "application/json"), ("Content-Length", str(len(data)))],
    )
    return [data]


class ControlRouter:
    """WSGI middleware answering the registered routes; everything else goes to ``app``."""

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "").rstrip("/")
        handler = _routes.get((environ.get("REQUEST_METHOD", "GET"), path))
        if handler is None:
            return self.app(environ, start_response)
        query = {
            k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True).items()
        }
        try:
            status, body = handler(query)
        except ControlError as e:
            status, body = 400, {"error": str(e)}
        return _json(start_response, status, body)
