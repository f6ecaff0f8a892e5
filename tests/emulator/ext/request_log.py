"""Request log: a WSGI middleware that records every AWS request, so tests can count calls.

Each request is recorded, in arrival order, as ``{"service": ..., "region": ..., "action": ...}``:

* ``service``: the SigV4 credential scope's service (``Authorization: AWS4-HMAC-SHA256
  Credential=AKID/20260101/us-west-2/ec2/aws4_request, ...`` -> ``"ec2"``; also the
  ``X-Amz-Credential`` query parameter of presigned URLs), else ``null``.
* ``region``: the credential scope's region (``us-west-2`` above), else ``null``; so a test can
  check e.g. that an ECR token was asked for in the image's region.
* ``action``: the ``Action`` query/form parameter (EC2, IAM, STS: query protocol), else the part
  of ``X-Amz-Target`` after the last dot (JSON protocols), else for EKS (REST) the botocore
  operation the method and path route to, else ``"METHOD /path"``.

Control endpoints, answered here and not forwarded to moto (nor recorded):

* ``GET  /_gpustack/requests``       -> JSON array of the records, oldest first.
* ``POST /_gpustack/requests/reset`` -> clears the log (``{"cleared": N}``).
* ``POST /_gpustack/latency?ms=N``   -> every later AWS request waits N ms before moto answers
  (0 turns it off). Tests use it to hold an apply open (lock and kill -9 tests) and benchmarks to
  model real API latency. ``&after=1`` sets a second delay instead: moto acts at once and the
  answer is held N ms, so a test can kill the client after AWS acted but before it heard back.
* ``POST /_gpustack/faults?every=N&kind=throttle|5xx`` -> every Nth later AWS request fails before
  moto sees it (so a retry is always safe): ``throttle`` answers like AWS's rate limiting
  (EC2 ``RequestLimitExceeded``/503, other services ``Throttling``/400), ``5xx`` with
  ``InternalError``/500. ``every=0`` turns it off. Tests use it to prove apply converges
  through the SDK's retries.

Other ``/_gpustack/...`` routes pass through to the modules this one wraps (their own control
endpoints) and are not recorded. moto's own ``/moto-api/...`` calls are not recorded either.
moto has nothing like this.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs

CONTROL_PREFIX = "/_gpustack/"
_CREDENTIAL = re.compile(r"Credential=([^,\s]+)")

_lock = threading.Lock()
_records: list[dict[str, Any]] = []
_latency_ms = 0
_latency_after_ms = 0
# Fault injection: fail every Nth AWS request (`every`), of `kind`; `seen` counts requests since
# it was set, `injected` counts faults served in total.
_faults: dict[str, Any] = {"every": 0, "kind": "throttle", "seen": 0, "injected": 0}


def records() -> list[dict[str, Any]]:
    with _lock:
        return [dict(r) for r in _records]


def reset() -> int:
    with _lock:
        n = len(_records)
        _records.clear()
        return n


def _scope_from_credential(credential: str) -> tuple[str, str] | None:
    # AKID/yyyymmdd/region/service/aws4_request
    parts = credential.split("/")
    if len(parts) >= 5 and parts[-1] == "aws4_request":
        return parts[-3], parts[-2]
    return None


def _scope(environ: dict[str, Any], query: dict[str, list[str]]) -> tuple[str, str] | None:
    """(region, service) of the request's SigV4 credential scope, if it is signed."""
    match = _CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", ""))
    if match:
        return _scope_from_credential(match.group(1))
    cred = query.get("X-Amz-Credential")
    if cred:
        return _scope_from_credential(cred[0])
    return None


def _service(environ: dict[str, Any], query: dict[str, list[str]]) -> str | None:
    scope = _scope(environ, query)
    return scope[1] if scope else None


def _form_body(environ: dict[str, Any]) -> dict[str, list[str]]:
    """Parse a form-encoded body without consuming it (wsgi.input is replaced by a copy)."""
    if not environ.get("CONTENT_TYPE", "").startswith("application/x-www-form-urlencoded"):
        return {}
    from .param_validation import _read_body  # one body reader for both middlewares

    raw = _read_body(environ)
    return parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True) if raw else {}


def describe(environ: dict[str, Any]) -> dict[str, Any]:
    query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    scope = _scope(environ, query)
    service, region = (scope[1], scope[0]) if scope else (None, None)
    action = (query.get("Action") or [None])[0]
    if action is None:
        action = (_form_body(environ).get("Action") or [None])[0]
    if action is None:
        target = environ.get("HTTP_X_AMZ_TARGET")
        if target:
            action = target.rsplit(".", 1)[-1]
    if action is None and service == "eks":
        action = _rest_operation(service, environ)
    if action is None:
        action = f"{environ.get('REQUEST_METHOD', 'GET')} {environ.get('PATH_INFO', '/')}"
    return {"service": service, "region": region, "action": action}


def _rest_operation(service: str, environ: dict[str, Any]) -> str | None:
    """The botocore operation a REST request maps to (EKS: ``GET /clusters/x`` is DescribeCluster),
    so the log names IAM actions (``eks:DescribeCluster``) whatever the protocol. Routed on the raw
    path: an access entry's principal ARN label holds ``%2F``, which ``PATH_INFO`` decodes."""
    from .param_validation import rest_operation  # one route table for both

    found = rest_operation(service, environ)
    return found[0] if found else None


def _json(start_response: Callable[..., Any], status: str, body: Any) -> Iterable[bytes]:
    data = json.dumps(body).encode()
    start_response(
        status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
    )
    return [data]


def _fault_response(start_response: Callable[..., Any], kind: str, service: str | None) -> Iterable[bytes]:
    """An AWS error as the query protocols write it: EC2's <Response><Errors> shape, or the
    <ErrorResponse> shape of IAM and the other query services."""
    if kind == "throttle":
        code, message = ("RequestLimitExceeded", "Request limit exceeded.") if service == "ec2" else ("Throttling", "Rate exceeded")
        status = "503 Service Unavailable" if service == "ec2" else "400 Bad Request"
    else:
        code, message, status = "InternalError", "An internal error has occurred", "500 Internal Server Error"
    if service == "ec2":
        body = (
            f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response><Errors><Error><Code>{code}</Code>"
            f"<Message>{message}</Message></Error></Errors><RequestID>gpustack-fault</RequestID></Response>"
        )
    else:
        body = (
            f"<ErrorResponse><Error><Type>{'Sender' if kind == 'throttle' else 'Receiver'}</Type><Code>{code}</Code>"
            f"<Message>{message}</Message></Error><RequestId>gpustack-fault</RequestId></ErrorResponse>"
        )
    data = body.encode()
    start_response(status, [("Content-Type", "text/xml"), ("Content-Length", str(len(data)))])
    return [data]


class RequestLog:
    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        if path.startswith(CONTROL_PREFIX):
            route = path.rstrip("/")
            if route == "/_gpustack/requests" and method in ("GET", "HEAD"):
                return _json(start_response, "200 OK", records())
            if route == "/_gpustack/requests/reset" and method == "POST":
                return _json(start_response, "200 OK", {"cleared": reset()})
            if route == "/_gpustack/faults" and method == "POST":
                query = parse_qs(environ.get("QUERY_STRING", ""))
                kind = (query.get("kind") or ["throttle"])[0]
                try:
                    every = max(0, int((query.get("every") or ["0"])[0]))
                except ValueError:
                    return _json(start_response, "400 Bad Request", {"error": "every must be an integer"})
                if kind not in ("throttle", "5xx"):
                    return _json(start_response, "400 Bad Request", {"error": "kind is throttle or 5xx"})
                with _lock:
                    _faults.update(every=every, kind=kind, seen=0)
                    injected = _faults["injected"]
                return _json(start_response, "200 OK", {"every": every, "kind": kind, "injected_so_far": injected})
            if route == "/_gpustack/latency" and method == "POST":
                global _latency_ms, _latency_after_ms
                query = parse_qs(environ.get("QUERY_STRING", ""))
                try:
                    ms = max(0, int((query.get("ms") or ["0"])[0]))
                except ValueError:
                    return _json(start_response, "400 Bad Request", {"error": "ms must be an integer"})
                if (query.get("after") or ["0"])[0] == "1":
                    _latency_after_ms = ms
                else:
                    _latency_ms = ms
                return _json(
                    start_response, "200 OK", {"latency_ms": _latency_ms, "latency_after_ms": _latency_after_ms}
                )
            # Another module's control endpoint.
            return self.app(environ, start_response)
        if not path.startswith("/moto-api"):
            record = describe(environ)
            with _lock:
                _records.append(record)
                delay = _latency_ms
                fault = None
                if _faults["every"]:
                    _faults["seen"] += 1
                    if _faults["seen"] % _faults["every"] == 0:
                        _faults["injected"] += 1
                        fault = _faults["kind"]
            if delay:
                time.sleep(delay / 1000.0)
            if fault:
                return _fault_response(start_response, fault, record.get("service"))
            after = _latency_after_ms
            if after:
                body = list(self.app(environ, start_response))
                time.sleep(after / 1000.0)
                return body
        return self.app(environ, start_response)


def wrap_wsgi(app: Callable[..., Any]) -> Callable[..., Any]:
    return RequestLog(app)
