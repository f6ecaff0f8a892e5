"""Latency per AWS service, for benchmarks that model one service slower than another.

The request log's ``POST /_gpustack/latency?ms=N`` delays every request alike. A benchmark of
remote state needs EC2 at one latency and S3 at another, in the same run, so this middleware
adds a delay per service, on top of that global one:

* ``POST /_gpustack/service-latency?service=s3&ms=50`` -> every later request to that service
  (the SigV4 credential scope's service: ``s3``, ``ec2``, ``iam``, ``eks``, ...) waits N ms before
  it is passed on; ``ms=0`` removes it. Answers ``{"latency_ms": {"s3": 50, ...}}``.

Settings are global for the process; moto's reset does not clear them. moto has nothing like this.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs

_CREDENTIAL = re.compile(r"Credential=[^/\s]+/[^/]+/[^/]+/([^/]+)/aws4_request")
_lock = threading.Lock()
_latency_ms: dict[str, int] = {}


def _service(environ: dict[str, Any]) -> str | None:
    match = _CREDENTIAL.search(environ.get("HTTP_AUTHORIZATION", ""))
    return match.group(1) if match else None


def _json(start_response: Callable[..., Any], status: str, body: Any) -> Iterable[bytes]:
    data = json.dumps(body).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]


class ServiceLatency:
    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path.rstrip("/") == "/_gpustack/service-latency" and environ.get("REQUEST_METHOD") == "POST":
            query = parse_qs(environ.get("QUERY_STRING", ""))
            service = (query.get("service") or [""])[0]
            try:
                ms = max(0, int((query.get("ms") or ["0"])[0]))
            except ValueError:
                return _json(start_response, "400 Bad Request", {"error": "ms must be an integer"})
            if not service:
                return _json(start_response, "400 Bad Request", {"error": "service is required (e.g. s3)"})
            with _lock:
                if ms:
                    _latency_ms[service] = ms
                else:
                    _latency_ms.pop(service, None)
                current = dict(_latency_ms)
            return _json(start_response, "200 OK", {"latency_ms": current})
        if not path.startswith("/_gpustack/") and not path.startswith("/moto-api"):
            service = _service(environ)
            with _lock:
                delay = _latency_ms.get(service or "", 0)
            if delay:
                time.sleep(delay / 1000.0)
        return self.app(environ, start_response)


def wrap_wsgi(app: Callable[..., Any]) -> Callable[..., Any]:
    return ServiceLatency(app)
