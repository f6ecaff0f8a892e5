"""S3 conditional writes made atomic, and the S3 failures a state backend must survive.

moto 5.2.5 honours ``If-None-Match: *`` and ``If-Match: <etag>`` on PutObject and DeleteObject
(412 ``PreconditionFailed``; ``If-Match`` on a missing key: 404 ``NoSuchKey``), but it checks and
then writes without a lock, so two racing ``If-None-Match: *`` PUTs can both succeed. AWS promises
that exactly one wins (S3 User Guide, "Conditional writes": "if multiple conditional writes occur
for the same object name, the first write operation to finish succeeds"). This middleware runs
every S3 PUT, POST and DELETE that carries ``If-Match`` or ``If-None-Match`` under one lock, so the
check and the write are one step, as on AWS.

Control endpoints (answered here, not recorded by the request log):

* ``POST /_gpustack/s3/deny?bucket=B`` -> every later S3 request on bucket ``B`` answers 403
  ``AccessDenied`` (what a bucket policy ``Deny`` or a missing IAM grant gives); ``&off=1`` lifts
  it. Answers ``{"denied": [...]}``.
* ``POST /_gpustack/s3/conflict?n=N`` -> the next N conditional writes answer 409
  ``ConditionalRequestConflict`` before moto sees them, as S3 does when conditional writes on one
  key race ("A conflicting conditional operation is currently in progress against this
  resource"); moto never does. Answers ``{"remaining": N}``.
* ``POST /_gpustack/s3/lost?n=N[&key=K]`` -> the next N conditional writes (to object key ``K``
  only, when given) are carried out and then answered 500 ``InternalError``, as when the answer
  to a PUT that landed is lost and the SDK's retries end in timeouts or 5xx (opentofu/opentofu#4405:
  "a lock acquisition can 412 against the lock it just created"; S3 API error responses: 500
  ``InternalError`` "We encountered an internal error. Please try again."). Answers
  ``{"remaining": N}``.

S3 requests are told from others by the SigV4 credential scope's service (``s3``); the bucket is
the first path segment (path-style addressing, which the SDKs use with an endpoint URL).
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs

_CREDENTIAL = re.compile(r"Credential=[^/\s]+/[^/]+/[^/]+/([^/]+)/aws4_request")

_write_lock = threading.Lock()
_state_lock = threading.Lock()
_denied: set[str] = set()
_conflicts = 0
_lost = {"n": 0, "key": ""}


def _is_s3(environ: dict[str, Any]) -> bool:
    match = _CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", ""))
    if match:
        return match.group(1) == "s3"
    query = parse_qs(environ.get("QUERY_STRING", ""))
    cred = (query.get("X-Amz-Credential") or [""])[0]
    return cred.split("/")[-2:-1] == ["s3"]


def _bucket(environ: dict[str, Any]) -> str:
    return environ.get("PATH_INFO", "/").lstrip("/").split("/", 1)[0]


def _json(start_response: Callable[..., Any], status: str, body: Any) -> Iterable[bytes]:
    data = json.dumps(body).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]


def _s3_error(start_response: Callable[..., Any], environ: dict[str, Any], status: str, code: str, message: str):
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
        f"<RequestId>gpustack-s3</RequestId><HostId>gpustack-s3</HostId></Error>"
    ).encode()
    if environ.get("REQUEST_METHOD") == "HEAD":
        body = b""
    start_response(status, [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
    return [body]


class S3Conditional:
    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app

    def _control(self, environ: dict[str, Any], start_response: Callable[..., Any], route: str):
        global _conflicts
        query = parse_qs(environ.get("QUERY_STRING", ""))
        if route == "/_gpustack/s3/deny":
            bucket = (query.get("bucket") or [""])[0]
            if not bucket:
                return _json(start_response, "400 Bad Request", {"error": "bucket is required"})
            with _state_lock:
                if (query.get("off") or ["0"])[0] == "1":
                    _denied.discard(bucket)
                else:
                    _denied.add(bucket)
                denied = sorted(_denied)
            return _json(start_response, "200 OK", {"denied": denied})
        if route == "/_gpustack/s3/conflict":
            try:
                n = max(0, int((query.get("n") or ["0"])[0]))
            except ValueError:
                return _json(start_response, "400 Bad Request", {"error": "n must be an integer"})
            with _state_lock:
                _conflicts = n
            return _json(start_response, "200 OK", {"remaining": n})
        if route == "/_gpustack/s3/lost":
            try:
                n = max(0, int((query.get("n") or ["0"])[0]))
            except ValueError:
                return _json(start_response, "400 Bad Request", {"error": "n must be an integer"})
            with _state_lock:
                _lost.update(n=n, key=(query.get("key") or [""])[0])
            return _json(start_response, "200 OK", {"remaining": n})
        return None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        global _conflicts
        path = environ.get("PATH_INFO", "")
        if path.startswith("/_gpustack/s3/") and environ.get("REQUEST_METHOD") == "POST":
            answered = self._control(environ, start_response, path.rstrip("/"))
            if answered is not None:
                return answered
        if path.startswith("/_gpustack/") or path.startswith("/moto-api") or not _is_s3(environ):
            return self.app(environ, start_response)
        with _state_lock:
            denied = _bucket(environ) in _denied
        if denied:
            return _s3_error(start_response, environ, "403 Forbidden", "AccessDenied", "Access Denied")
        conditional = environ.get("REQUEST_METHOD") in ("PUT", "POST", "DELETE") and (
            "HTTP_IF_MATCH" in environ or "HTTP_IF_NONE_MATCH" in environ
        )
        if not conditional:
            return self.app(environ, start_response)
        with _state_lock:
            conflict = _conflicts > 0
            if conflict:
                _conflicts -= 1
        if conflict:
            return _s3_error(
                start_response,
                environ,
                "409 Conflict",
                "ConditionalRequestConflict",
                "A conflicting conditional operation is currently in progress against this resource. Please try again.",
            )
        key = environ.get("PATH_INFO", "/").lstrip("/").split("/", 1)[-1]
        with _state_lock:
            lost = _lost["n"] > 0 and _lost["key"] in ("", key)
            if lost:
                _lost["n"] -= 1
        with _write_lock:
            if not lost:
                return list(self.app(environ, start_response))
            list(self.app(environ, lambda *_: None))
        return _s3_error(
            start_response, environ, "500 Internal Server Error", "InternalError", "We encountered an internal error. Please try again."
        )


def wrap_wsgi(app: Callable[..., Any]) -> Callable[..., Any]:
    return S3Conditional(app)
