"""Turn moto's "action has not been implemented" crash into a fast, readable AWS error.

moto 5.2.5 raises ``NotImplementedError`` for an action it lacks; its server then answers
``500`` with an HTML page (which the AWS SDKs retry, then fail to parse) and prints a traceback.
This middleware answers ``501`` with an AWS-shaped error whose code is ``NotImplemented`` (not a
status the SDKs retry) and writes one line to stderr, e.g.
``gpustack-emulator: 501 NotImplemented: The describe_capacity_reservations action has not been
implemented``.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Callable
from xml.sax.saxutils import escape

CODE = "NotImplemented"


def _error_body(environ: dict[str, Any], message: str) -> tuple[str, bytes]:
    auth = environ.get("HTTP_AUTHORIZATION", "")
    if environ.get("HTTP_X_AMZ_TARGET"):
        return "application/x-amz-json-1.1", json.dumps(
            {"__type": CODE, "message": message}
        ).encode()
    form = environ.get("CONTENT_TYPE", "").startswith("application/x-www-form-urlencoded")
    if form or "Action=" in environ.get("QUERY_STRING", ""):
        msg = escape(message)
        if "/ec2/aws4_request" in auth:
            body = (
                f"<Response><Errors><Error><Code>{CODE}</Code><Message>{msg}</Message>"
                f"</Error></Errors><RequestID>0</RequestID></Response>"
            )
        else:
            body = (
                f"<ErrorResponse><Error><Type>Sender</Type><Code>{CODE}</Code>"
                f"<Message>{msg}</Message></Error><RequestId>0</RequestId></ErrorResponse>"
            )
        return "text/xml", body.encode()
    return "application/json", json.dumps({"message": message}).encode()


class NotImplementedToError:
    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        try:
            return self.app(environ, start_response)
        except NotImplementedError as e:
            message = str(e) or "not implemented by the emulator"
            print(f"gpustack-emulator: 501 {CODE}: {message}", file=sys.stderr, flush=True)
            content_type, body = _error_body(environ, message)
            start_response(
                "501 Not Implemented",
                [
                    ("Content-Type", content_type),
                    ("Content-Length", str(len(body))),
                    ("x-amzn-ErrorType", CODE),
                ],
            )
            return [body]


def wrap_wsgi(app: Callable[..., Any]) -> Callable[..., Any]:
    return NotImplementedToError(app)
