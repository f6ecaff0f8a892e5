"""SSM for the image-cache builder: DescribeInstanceInformation, failing command invocations on
demand, and a log of the commands sent.

moto 5.2.5 lacks DescribeInstanceInformation (501) and answers every GetCommandInvocation with
``Success``. This adds:

* ``DescribeInstanceInformation``: every EC2 instance (any account/region backend of the request)
  that has an IAM instance profile is a managed instance; ``PingStatus`` is ``Online`` while it
  runs and ``ConnectionLost`` otherwise; instances without a profile never appear (as in SSM).
  ``Filters`` / ``InstanceInformationFilterList`` with key ``InstanceIds`` (or ``PingStatus``)
  are honoured.
* Failure injection: ``POST /_gpustack/ssm/fail?match=<substring>`` makes every invocation whose
  commands contain the substring end ``Failed`` with ``ResponseCode`` 1 and a ``ctr``-like
  ``StandardErrorContent``; ``?clear=1`` removes the rules.
* ``GET /_gpustack/ssm/commands``: ``{"commands": [{"id", "instance_ids", "commands"}]}``, in the
  order sent, so tests can assert what was pulled.

``POST /moto-api/reset`` clears the rules and the log.
"""

from __future__ import annotations

import datetime
import json
import threading
from typing import Any, Callable
from urllib.parse import parse_qs

from moto.core.responses import ActionResult
from moto.ec2.models import ec2_backends
from moto.ssm import models as ssm_models
from moto.ssm.responses import SimpleSystemManagerResponse

_lock = threading.Lock()
_fail: list[str] = []
_sent: list[dict[str, Any]] = []


def _commands_of(command: Any) -> list[str]:
    params = getattr(command, "parameters", None) or {}
    return [str(c) for c in params.get("commands", [])]


def _describe_instance_information(self: SimpleSystemManagerResponse) -> ActionResult:
    wanted: set[str] = set()
    pings: set[str] = set()
    for f in self._get_param("Filters", []) or []:
        if f.get("Key") == "InstanceIds":
            wanted.update(f.get("Values", []))
        if f.get("Key") == "PingStatus":
            pings.update(f.get("Values", []))
    for f in self._get_param("InstanceInformationFilterList", []) or []:
        if f.get("key") == "InstanceIds":
            wanted.update(f.get("valueSet", []))
    backend = ec2_backends[self.current_account][self.region]
    out = []
    for instance in backend.all_instances():
        if not instance.iam_instance_profile:
            continue
        if wanted and instance.id not in wanted:
            continue
        state = instance._state.name
        if state == "terminated":
            continue
        ping = "Online" if state == "running" else "ConnectionLost"
        if pings and ping not in pings:
            continue
        out.append(
            {
                "InstanceId": instance.id,
                "PingStatus": ping,
                "LastPingDateTime": datetime.datetime.now(datetime.timezone.utc),
                "AgentVersion": "3.3.0.0",
                "IsLatestVersion": True,
                "PlatformType": "Linux",
                "PlatformName": "Bottlerocket",
                "ResourceType": "EC2Instance",
                "IPAddress": instance.private_ip or "",
                "ComputerName": instance.id,
            }
        )
    return ActionResult({"InstanceInformationList": out})


def install() -> None:
    SimpleSystemManagerResponse.describe_instance_information = _describe_instance_information  # type: ignore[attr-defined]

    original_response = ssm_models.Command.invocation_response

    def invocation_response(self: Any, instance_id: str, plugin_name: str) -> dict[str, Any]:
        result = original_response(self, instance_id, plugin_name)
        text = "\n".join(_commands_of(self))
        with _lock:
            hit = next((m for m in _fail if m in text), None)
        if hit is not None:
            image = text.split()[-1] if text.split() else hit
            result.update(
                ResponseCode=1,
                Status="Failed",
                StatusDetails="Failed",
                StandardErrorContent=f'ctr: failed to resolve reference "{image}": {image}: not found\n',
            )
        return result

    ssm_models.Command.invocation_response = invocation_response  # type: ignore[method-assign]

    original_send = ssm_models.SimpleSystemManagerBackend.send_command

    def send_command(self: Any, **kwargs: Any) -> Any:
        command = original_send(self, **kwargs)
        with _lock:
            _sent.append(
                {
                    "id": command.command_id,
                    "instance_ids": list(kwargs.get("instance_ids") or []),
                    "commands": _commands_of(command),
                }
            )
        return command

    ssm_models.SimpleSystemManagerBackend.send_command = send_command  # type: ignore[method-assign]


def _json(start_response: Callable[..., Any], status: str, body: Any) -> list[bytes]:
    data = json.dumps(body).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]


def wrap_wsgi(app: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "").rstrip("/")
        method = environ.get("REQUEST_METHOD", "GET")
        if path == "/_gpustack/ssm/fail" and method == "POST":
            query = parse_qs(environ.get("QUERY_STRING", ""))
            with _lock:
                if (query.get("clear") or ["0"])[0] == "1":
                    _fail.clear()
                _fail.extend(query.get("match", []))
                rules = list(_fail)
            return _json(start_response, "200 OK", {"fail": rules})
        if path == "/_gpustack/ssm/commands" and method in ("GET", "HEAD"):
            with _lock:
                return _json(start_response, "200 OK", {"commands": [dict(c) for c in _sent]})
        if path == "/moto-api/reset" and method == "POST":
            with _lock:
                _fail.clear()
                _sent.clear()
        return app(environ, start_response)

    return wrapped
