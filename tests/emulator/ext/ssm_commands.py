"""SSM Run Command and the EC2 life-cycle of an image-cache builder, with realistic timing.

An ``image_cache`` build (src/resources/image_cache.rs) launches a Bottlerocket instance with an
instance profile, waits for SSM to report it ``Online``, runs ``AWS-RunShellScript`` commands on
it (stop kubelet, ``ctr images pull`` per image), stops it, snapshots its ``/dev/xvdb`` volume,
waits for the snapshot and terminates it. moto 5.2.5 has no ``DescribeInstanceInformation`` and
no ``ListCommandInvocations``; it answers every command ``Success`` at once (even for instances
that do not exist), sends a command without ``Targets`` to every instance of the region as well,
answers ``InvalidCommandId`` where SSM says ``InvocationDoesNotExist``, makes snapshots
``completed`` at once, drops ``Throughput`` (and ``Iops`` on the volume) of RunInstances block
devices and ignores RunInstances' ``ClientToken``. This module fixes that. All times are evaluated
when read (no threads); state lives on moto's objects, so ``POST /moto-api/reset`` clears it.

SSM (per account and region of the request):

* ``DescribeInstanceInformation``: every non-terminated EC2 instance of the same account and
  region with an IAM instance profile is a managed instance (one without a profile never
  appears). It is absent until ``online_ms`` after its launch, then ``PingStatus`` ``Online``
  while running; once it has been online, stopping it makes it ``ConnectionLost`` (also after a
  start, until ``online_ms`` have passed again); terminated, it is gone. Fields: ``InstanceId``,
  ``PingStatus``, ``LastPingDateTime`` (now while online, else the time it stopped),
  ``AgentVersion``, ``IsLatestVersion``, ``PlatformType`` ``Linux``, ``PlatformName``
  ``Bottlerocket`` (whatever the AMI), ``ResourceType`` ``EC2Instance``, ``IPAddress`` (private),
  ``ComputerName`` (private DNS name), ``SourceId``, ``SourceType`` ``AWS::EC2::Instance``.
  An instance launched from a Bottlerocket NVIDIA-variant AMI (``aws-k8s-*-nvidia*``, the ids
  ``ssm_params`` hands out) on an instance type without an NVIDIA GPU never appears: NVIDIA
  variants do not reach ``configured.target`` without a GPU (bottlerocket-os/bottlerocket#4218,
  bottlerocket-kernel-kit#321), so its agent never reports in.
  ``Filters`` keys ``InstanceIds``, ``PingStatus``, ``PlatformTypes``, ``ResourceType``,
  ``AgentVersion``, ``SourceIds``, ``SourceTypes``, ``tag-key``, ``tag:<k>`` and the
  ``InstanceInformationFilterList`` keys (``ActivationIds``, ``IamRole``, ``AssociationStatus``
  match nothing here) are ANDed; values match exactly. Another key is ``InvalidFilterKey``.
  ``MaxResults`` 5-50 (default 50, else ``ValidationException``) and ``NextToken`` (unknown:
  ``InvalidNextToken``) page.
* ``SendCommand``: every ``InstanceIds`` entry must be a managed instance ``Online`` now, else
  ``InvalidInstanceId`` (``Targets`` are resolved by moto, unchecked); ``AWS-RunShellScript``
  without ``Parameters.commands`` is ``InvalidParameters``. The command goes to exactly those
  instances (and ``Targets``' ones), in that order. The answer's ``Status`` is ``Pending``.
* Each invocation is ``Pending`` for the first half of ``command_ms``, ``InProgress`` for the
  second, then ``Success`` (``ResponseCode`` 0) or ``Failed`` (``ResponseCode`` 1) if a fail rule
  matched when it was sent; ``ResponseCode`` is -1 and the execution times are "" until then.
  A successful ``ctr ... images pull ... <image>`` prints ``<image>: resolved`` / ``unpacking`` /
  ``done`` lines to ``StandardOutputContent``; a failed pull has ``StandardErrorContent``
  ``ctr: failed to resolve reference "<image>": <image>: not found`` (image = the last word of the
  first command line that matched), any other failed line ``<line>: exit status 1``.
* ``GetCommandInvocation``: an unknown command id, or an instance the command was not sent to, is
  ``InvocationDoesNotExist``; a ``PluginName`` other than ``aws:runShellScript`` is
  ``InvalidPluginName``.
* ``ListCommandInvocations`` (new): ``CommandId``, ``InstanceId``, ``Details`` (adds
  ``CommandPlugins`` with the combined ``Output``), ``Filters`` and paging as ``ListCommands``;
  an unknown command id lists nothing (as SSM).
* ``ListCommands``: ``CommandId`` (unknown: ``InvalidCommandId``, moto's), ``InstanceId``,
  ``Filters`` keys ``Status``, ``DocumentName``, ``ExecutionStage`` (``Executing``/``Complete``),
  ``InvokedAfter``/``InvokedBefore`` (ISO 8601; unparseable: ``InvalidFilterValue``), another key
  ``InvalidFilterKey``; ``MaxResults`` 1-50 (default 50) / ``NextToken``. A command's ``Status``
  is that of its invocations (every instance runs it alike, on the same clock);
  ``CompletedCount``/``ErrorCount`` count the done/failed ones.

EC2:

* ``CreateSnapshot`` (and ``CreateSnapshots``): ``State`` ``pending`` for ``snapshot_ms``
  (``Progress`` rising from ``0%``, capped at ``99%``), then ``completed``/``100%``, in
  DescribeSnapshots and its ``status`` filter too. AMI-backed snapshots stay completed at once.
* ``RunInstances``: block devices' ``Iops`` and ``Throughput`` reach the volumes
  (DescribeVolumes); a repeated ``ClientToken`` returns the reservation it launched instead of
  launching again (parameters are not compared).

Control endpoints (JSON; global to the emulator; ``POST /moto-api/reset`` restores the defaults
and clears the rules):

* ``POST /_gpustack/ssm/timing?online_ms=N&command_ms=N&snapshot_ms=N``: sets any subset
  (defaults 500, 200, 500; integers >= 0); answers all three. ``GET`` answers them. A setting
  applies to instances launched or started, commands sent and snapshots begun after it.
* ``POST /_gpustack/ssm/fail?match=<substring>``: every later SendCommand whose commands contain
  the substring fails as above; ``?clear=1`` removes all rules (``clear=1&match=S`` replaces them).
  Answers ``{"fail": [rules]}``.
* ``GET /_gpustack/ssm/commands``: ``{"commands": [{"id", "account", "region", "document",
  "instance_ids", "commands", "status", "invocations": [{"instance_id", "status",
  "response_code"}]}]}``, every command sent (accepted), oldest first, statuses as of now.

The routes are answered by ``capacity_control``'s router (outside request_log).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, TypeVar

from moto.core.responses import ActionResult
from moto.ec2.models import EC2Backend, ec2_backends
from moto.ec2.models.elastic_block_store import Snapshot
from moto.ec2.models.instance_types import INSTANCE_TYPES
from moto.ec2.models.instances import Instance, Reservation
from moto.ssm.exceptions import SSMException, ValidationException
from moto.ssm.models import Command, SimpleSystemManagerBackend, ssm_backends
from moto.ssm.responses import SimpleSystemManagerResponse

from . import eks_catalog as cat
from ._ec2 import LOCK, EC2Response, backend_for, ec2_action
from .capacity_control import ControlError, flag_arg, int_arg, on_reset, route

RUN_SHELL_SCRIPT = "AWS-RunShellScript"
PLUGIN = "aws:runShellScript"  # AWS-RunShellScript's one plugin (moto names every command's so)
AGENT_VERSION = "3.3.1957.0"
PAGE_MAX = 50
T = TypeVar("T")


# --- timing, fail rules and the control endpoints ---------------------------------------------


@dataclass
class Timing:
    online_ms: int = 500
    command_ms: int = 200
    snapshot_ms: int = 500


TIMING = Timing()
_fail_rules: list[str] = []


@route("POST", "/_gpustack/ssm/timing")
def _set_timing(query: dict[str, str]) -> tuple[int, Any]:
    known = asdict(TIMING)
    changes: dict[str, int] = {}
    for name in query:
        if name not in known:
            raise ControlError(f"unknown setting {name!r}; known: {', '.join(known)}")
        changes[name] = int_arg(query, name)
        if changes[name] < 0:
            raise ControlError(f"{name} must be >= 0")
    with LOCK:
        for name, value in changes.items():
            setattr(TIMING, name, value)
        return 200, asdict(TIMING)


@route("GET", "/_gpustack/ssm/timing")
def _get_timing(query: dict[str, str]) -> tuple[int, Any]:
    return 200, asdict(TIMING)


@route("POST", "/_gpustack/ssm/fail")
def _fail(query: dict[str, str]) -> tuple[int, Any]:
    clear = "clear" in query and flag_arg(query, "clear")
    match = query.get("match")
    if match == "" or (match is None and not clear):
        raise ControlError("give match=<substring> (non-empty) and/or clear=1")
    with LOCK:
        if clear:
            _fail_rules.clear()
        if match:
            _fail_rules.append(match)
        return 200, {"fail": list(_fail_rules)}


@route("GET", "/_gpustack/ssm/commands")
def _commands(query: dict[str, str]) -> tuple[int, Any]:
    now = time.time()
    sent: list[tuple[int, dict[str, Any]]] = []
    for account, regions in list(ssm_backends.items()):
        for region, backend in list(regions.items()):
            for command in list(backend._commands):
                run = _run(command)
                sent.append(
                    (
                        run.seq,
                        {
                            "id": command.command_id,
                            "account": account,
                            "region": region,
                            "document": command.document_name,
                            "instance_ids": list(command.instance_ids),
                            "commands": _lines(command.parameters),
                            "status": run.status(now),
                            "invocations": [
                                {
                                    "instance_id": i,
                                    "status": run.status(now),
                                    "response_code": run.response_code(now),
                                }
                                for i in command.instance_ids
                            ],
                        },
                    )
                )
    return 200, {"commands": [entry for _, entry in sorted(sent, key=lambda s: s[0])]}


def _reset_settings() -> None:
    with LOCK:
        for name, value in asdict(Timing()).items():
            setattr(TIMING, name, value)
        _fail_rules.clear()


# --- helpers ----------------------------------------------------------------------------------


def _utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, timezone.utc)


def _iso(epoch: float) -> str:
    """SSM's StringDateTime, e.g. ``2026-01-01T12:00:00.123Z``."""
    return _utc(epoch).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _epoch(moment: datetime) -> float:
    """A naive datetime is UTC (as moto's are)."""
    return moment.replace(tzinfo=timezone.utc).timestamp() if moment.tzinfo is None else moment.timestamp()


def _page(
    items: list[T], max_results: int | None, token: str | None, least: int
) -> tuple[list[T], str | None]:
    """One page of ``items``; NextToken is the base64 of the next offset."""
    if max_results is None:
        max_results = PAGE_MAX
    elif not least <= max_results <= PAGE_MAX:
        raise ValidationException(
            f"1 validation error detected: Value '{max_results}' at 'maxResults' failed to satisfy "
            f"constraint: Member must have value between {least} and {PAGE_MAX}"
        )
    start = 0
    if token:
        try:
            start = int(base64.urlsafe_b64decode(token.encode()).decode())
        except (binascii.Error, UnicodeDecodeError, ValueError):
            start = -1
        if not 0 <= start <= len(items):
            raise SSMException("InvalidNextToken", "The specified token isn't valid.")
    end = start + max_results
    next_token = base64.urlsafe_b64encode(str(end).encode()).decode() if end < len(items) else None
    return items[start:end], next_token


# --- managed instances (DescribeInstanceInformation) ------------------------------------------

# On moto's Instance: ``_gpustack_online_at`` (epoch its agent reports in: launch or last start
# plus the online delay then in force) and ``_gpustack_last_ping`` (epoch it was stopped while
# online: it stays registered with SSM).


def _clock_online(instance: Instance) -> None:
    instance.__dict__["_gpustack_online_at"] = time.time() + TIMING.online_ms / 1000.0


def _online_at(instance: Instance) -> float:
    online_at: float = instance.__dict__["_gpustack_online_at"]
    return online_at


_nvidia_amis: dict[str, frozenset[str]] = {}


def nvidia_amis(region: str) -> frozenset[str]:
    """Ids of the Bottlerocket NVIDIA-variant AMIs (``aws-k8s-*-nvidia*``) the SSM public
    parameters hand out in ``region`` (ssm_params.py)."""
    if region not in _nvidia_amis:
        _nvidia_amis[region] = frozenset(
            cat.bottlerocket_ami(cat.bottlerocket_variant(k8s, flavour), arch, release).image_id(region)
            for k8s in cat.KUBERNETES_VERSIONS
            for flavour in cat.BOTTLEROCKET_FLAVOURS
            if "nvidia" in flavour
            for arch in cat.ARCHITECTURES
            for release in cat.BOTTLEROCKET_RELEASES
        )
    return _nvidia_amis[region]


def has_nvidia_gpu(instance_type: str) -> bool:
    """Whether the EC2 catalog lists an NVIDIA GPU (whole or fractional) for the type."""
    gpus = (INSTANCE_TYPES.get(instance_type) or {}).get("GpuInfo", {}).get("Gpus", [])
    return any(g.get("Manufacturer") == "NVIDIA" for g in gpus)


def never_boots(instance: Instance) -> bool:
    """A Bottlerocket NVIDIA variant on an instance type without an NVIDIA GPU never reaches
    ``configured.target``, so its SSM agent never reports in (bottlerocket-os/bottlerocket#4218,
    bottlerocket-kernel-kit#321: the NVIDIA driver units fail without a GPU)."""
    region = instance.ec2_backend.region_name
    return instance.image_id in nvidia_amis(region) and not has_nvidia_gpu(instance.instance_type)


def _ping(instance: Instance, now: float) -> tuple[str, float] | None:
    """(PingStatus, LastPingDateTime) of an instance as SSM reports it, or None if it does not."""
    if not instance.iam_instance_profile or instance.state == "terminated":
        return None
    if never_boots(instance):
        return None
    if instance.state == "running" and now >= _online_at(instance):
        return "Online", now
    last_ping: float | None = instance.__dict__.get("_gpustack_last_ping")
    return ("ConnectionLost", last_ping) if last_ping is not None else None


def _managed(account: str, region: str, now: float) -> list[tuple[Instance, str, float]]:
    out = []
    for instance in ec2_backends[account][region].all_instances():
        ping = _ping(instance, now)
        if ping is not None:
            out.append((instance, *ping))
    return out


def _instance_information(instance: Instance, ping: str, last_ping: float) -> dict[str, Any]:
    """The botocore ``InstanceInformation`` shape."""
    return {
        "InstanceId": instance.id,
        "PingStatus": ping,
        "LastPingDateTime": _utc(last_ping),
        "AgentVersion": AGENT_VERSION,
        "IsLatestVersion": True,
        "PlatformType": "Linux",
        "PlatformName": "Bottlerocket",
        "ResourceType": "EC2Instance",
        "IPAddress": instance.private_ip or "",
        "ComputerName": instance.private_dns_name if instance.private_ip else instance.id,
        "SourceId": instance.id,
        "SourceType": "AWS::EC2::Instance",
    }


INFORMATION_FILTER_KEYS = (
    "InstanceIds",
    "PingStatus",
    "PlatformTypes",
    "ResourceType",
    "AgentVersion",
    "SourceIds",
    "SourceTypes",
    "tag-key",
    "ActivationIds",
    "IamRole",
    "AssociationStatus",
)


def _information_values(instance: Instance, ping: str, key: str) -> list[str]:
    """The values filter ``key`` (one of INFORMATION_FILTER_KEYS or ``tag:<k>``) sees on an instance."""
    tags = {t["key"]: t["value"] for t in instance.get_tags()}
    if key.startswith("tag:"):
        return [tags[key[4:]]] if key[4:] in tags else []
    values: dict[str, list[str]] = {
        "InstanceIds": [instance.id],
        "PingStatus": [ping],
        "PlatformTypes": ["Linux"],
        "ResourceType": ["EC2Instance"],
        "AgentVersion": [AGENT_VERSION],
        "SourceIds": [instance.id],
        "SourceTypes": ["AWS::EC2::Instance"],
        "tag-key": list(tags),
        # Hybrid activations, IAM roles of activations and associations: none on these.
        "ActivationIds": [],
        "IamRole": [],
        "AssociationStatus": [],
    }
    return values[key]


def _describe_instance_information(self: SimpleSystemManagerResponse) -> ActionResult:
    filters = [(f.get("Key", ""), f.get("Values", [])) for f in self._get_param("Filters", []) or []]
    filters += [
        (f.get("key", ""), f.get("valueSet", []))
        for f in self._get_param("InstanceInformationFilterList", []) or []
    ]
    for key, _ in filters:
        if not key.startswith("tag:") and key not in INFORMATION_FILTER_KEYS:
            raise SSMException("InvalidFilterKey", f"The filter key {key!r} isn't valid.")
    found = [
        _instance_information(instance, ping, last_ping)
        for instance, ping, last_ping in _managed(self.current_account, self.region, time.time())
        if all(any(v in wanted for v in _information_values(instance, ping, key)) for key, wanted in filters)
    ]
    page, token = _page(found, self._get_int_param("MaxResults"), self._get_param("NextToken"), least=5)
    return ActionResult({"InstanceInformationList": page, "NextToken": token})


# --- commands ---------------------------------------------------------------------------------

_seq = itertools.count()


@dataclass
class Run:
    """How a command's invocations play out; all its instances run it alike."""

    seq: int  # global send order, for /_gpustack/ssm/commands
    sent: float  # epoch
    duration: float  # seconds from sent to done
    stdout: str
    stderr: str | None  # set: the invocations fail with it

    @property
    def started(self) -> float:
        return self.sent + self.duration / 2

    @property
    def finished(self) -> float:
        return self.sent + self.duration

    def status(self, now: float) -> str:
        if now >= self.finished:
            return "Failed" if self.stderr is not None else "Success"
        return "InProgress" if now >= self.started else "Pending"

    def response_code(self, now: float) -> int:
        if now < self.finished:
            return -1
        return 1 if self.stderr is not None else 0


def _run(command: Command) -> Run:
    run: Run = command.__dict__["_gpustack_run"]
    return run


def _lines(parameters: dict[str, Any] | None) -> list[str]:
    """The shell lines of a command's ``Parameters``."""
    return [str(c) for c in (parameters or {}).get("commands", [])]


def _pulled_image(line: str) -> str | None:
    """The image of a ``ctr ... images pull ... <image>`` line (its last word)."""
    return line.split()[-1] if "images pull" in line else None


def _outcome(lines: list[str]) -> tuple[str, str | None]:
    """(stdout, stderr or None) of running ``lines``, per the fail rules now in force."""
    with LOCK:
        rules = list(_fail_rules)
    for line in lines:
        if any(rule in line for rule in rules):
            image = _pulled_image(line)
            if image is None:
                return "", f"{line}: exit status 1\n"
            return "", f'ctr: failed to resolve reference "{image}": {image}: not found\n'
    stdout = ""
    for line in lines:
        image = _pulled_image(line)
        if image is not None:
            digest = hashlib.sha256(image.encode()).hexdigest()
            stdout += f"{image}: resolved\nunpacking sha256:{digest}...\ndone\n"
    return stdout, None


def _invalid_instances(backend: SimpleSystemManagerBackend, instance_ids: list[str]) -> Exception:
    return SSMException(
        "InvalidInstanceId",
        f"Instances [[{', '.join(instance_ids)}]] not in a valid state for account {backend.account_id}",
    )


_orig_targets = Command._get_instance_ids_from_targets


def _target_instance_ids(self: Command) -> list[str]:
    """moto sends a command without ``Targets`` to every instance of the region; SSM to none."""
    return _orig_targets(self) if self.targets else []


_orig_send_command = SimpleSystemManagerBackend.send_command


def _send_command(self: SimpleSystemManagerBackend, **kwargs: Any) -> Command:
    now = time.time()
    requested = list(kwargs.get("instance_ids") or [])
    online = {i.id for i, ping, _ in _managed(self.account_id, self.region_name, now) if ping == "Online"}
    bad = [i for i in requested if i not in online]
    if bad:
        raise _invalid_instances(self, bad)
    lines = _lines(kwargs.get("parameters"))
    if kwargs.get("document_name") == RUN_SHELL_SCRIPT and not lines:
        raise SSMException("InvalidParameters", 'Parameter "commands" is required.')
    command = _orig_send_command(self, **kwargs)
    # moto de-duplicates through a set; keep the order asked for (targets' instances after).
    command.instance_ids = list(dict.fromkeys(requested + command.instance_ids))
    stdout, stderr = _outcome(lines)
    command.__dict__["_gpustack_run"] = Run(next(_seq), now, TIMING.command_ms / 1000.0, stdout, stderr)
    return command


_orig_response_object = Command.response_object


def _response_object(self: Command) -> dict[str, Any]:
    """moto's ``Command`` shape with the status and counts as of now."""
    run = _run(self)
    status = run.status(time.time())
    done = status in ("Success", "Failed")
    out = _orig_response_object(self)
    out.update(
        Status=status,
        StatusDetails=status,
        CompletedCount=len(self.instance_ids) if done else 0,
        ErrorCount=len(self.instance_ids) if status == "Failed" else 0,
        TargetCount=len(self.instance_ids),
        RequestedDateTime=_utc(run.sent),
    )
    return out


def _invocation(command: Command, instance_id: str, now: float) -> dict[str, Any]:
    """The botocore ``GetCommandInvocationResult`` shape."""
    run = _run(command)
    status = run.status(now)
    started = now >= run.started
    done = now >= run.finished
    return {
        "CommandId": command.command_id,
        "InstanceId": instance_id,
        "Comment": command.comment,
        "DocumentName": command.document_name,
        "PluginName": PLUGIN,
        "ResponseCode": run.response_code(now),
        "ExecutionStartDateTime": _iso(run.started) if started else "",
        "ExecutionElapsedTime": f"PT{(min(now, run.finished) - run.started):.3f}S" if started else "",
        "ExecutionEndDateTime": _iso(run.finished) if done else "",
        "Status": status,
        "StatusDetails": status,
        "StandardOutputContent": run.stdout if done else "",
        "StandardOutputUrl": "",
        "StandardErrorContent": (run.stderr or "") if done else "",
        "StandardErrorUrl": "",
    }


def _get_command_invocation(
    self: SimpleSystemManagerBackend, command_id: str, instance_id: str, plugin_name: str | None
) -> dict[str, Any]:
    command = next((c for c in self._commands if c.command_id == command_id), None)
    if command is None or instance_id not in command.instance_ids:
        raise SSMException(
            "InvocationDoesNotExist",
            "The command ID and managed node ID you specified didn't match any invocations.",
        )
    if plugin_name is not None and plugin_name != PLUGIN:
        raise SSMException("InvalidPluginName", "The plugin name isn't valid.")
    return _invocation(command, instance_id, time.time())


def _command_filter(key: str, value: str) -> Callable[[Command, float], bool]:
    """A ListCommands/ListCommandInvocations filter as a predicate on (command, now)."""
    if key in ("InvokedAfter", "InvokedBefore"):
        try:
            moment = _epoch(datetime.fromisoformat(value))
        except ValueError:
            raise SSMException("InvalidFilterValue", f"The filter value {value!r} isn't valid.") from None
        if key == "InvokedAfter":
            return lambda c, now: _run(c).sent >= moment
        return lambda c, now: _run(c).sent <= moment
    if key == "Status":
        return lambda c, now: _run(c).status(now) == value
    if key == "DocumentName":
        return lambda c, now: c.document_name == value
    if key == "ExecutionStage":
        return lambda c, now: ("Complete" if now >= _run(c).finished else "Executing") == value
    raise SSMException("InvalidFilterKey", f"The filter key {key!r} isn't valid.")


def _matching_commands(response: SimpleSystemManagerResponse, now: float) -> list[Command]:
    backend: SimpleSystemManagerBackend = response.ssm_backend
    command_id = response._get_param("CommandId")
    instance_id = response._get_param("InstanceId")
    predicates = [
        _command_filter(f.get("key", ""), f.get("value", ""))
        for f in response._get_param("Filters", []) or []
    ]
    return [
        c
        for c in backend._commands
        if (not command_id or c.command_id == command_id)
        and (not instance_id or instance_id in c.instance_ids)
        and all(p(c, now) for p in predicates)
    ]


def _list_commands(self: SimpleSystemManagerResponse) -> ActionResult:
    command_id = self._get_param("CommandId")
    if command_id:
        self.ssm_backend.get_command_by_id(command_id)  # InvalidCommandId, as moto and SSM
    commands = _matching_commands(self, time.time())
    page, token = _page(commands, self._get_int_param("MaxResults"), self._get_param("NextToken"), least=1)
    return ActionResult({"Commands": [c.response_object() for c in page], "NextToken": token})


def _list_command_invocations(self: SimpleSystemManagerResponse) -> ActionResult:
    now = time.time()
    instance_id = self._get_param("InstanceId")
    details = bool(self._get_param("Details"))
    pairs = [
        (c, i)
        for c in _matching_commands(self, now)
        for i in c.instance_ids
        if not instance_id or i == instance_id
    ]
    page, token = _page(pairs, self._get_int_param("MaxResults"), self._get_param("NextToken"), least=1)
    out = []
    for command, instance in page:
        run = _run(command)
        inv = _invocation(command, instance, now)
        item: dict[str, Any] = {
            "CommandId": command.command_id,
            "InstanceId": instance,
            "InstanceName": "",
            "Comment": command.comment,
            "DocumentName": command.document_name,
            "RequestedDateTime": _utc(run.sent),
            "Status": inv["Status"],
            "StatusDetails": inv["StatusDetails"],
            "TraceOutput": "",
            "StandardOutputUrl": "",
            "StandardErrorUrl": "",
            "CommandPlugins": [],
            "ServiceRole": command.service_role_arn,
        }
        if details:
            output = inv["StandardOutputContent"]
            if inv["StandardErrorContent"]:
                output += "\n----------ERROR-------\n" + inv["StandardErrorContent"]
            plugin: dict[str, Any] = {
                "Name": PLUGIN,
                "Status": inv["Status"],
                "StatusDetails": inv["StatusDetails"],
                "ResponseCode": inv["ResponseCode"],
                "Output": output,
                "StandardOutputUrl": "",
                "StandardErrorUrl": "",
            }
            if now >= run.started:
                plugin["ResponseStartDateTime"] = _utc(run.started)
            if now >= run.finished:
                plugin["ResponseFinishDateTime"] = _utc(run.finished)
            item["CommandPlugins"] = [plugin]
        out.append(item)
    return ActionResult({"CommandInvocations": out, "NextToken": token})


# --- EC2: instance clocks, RunInstances, snapshots --------------------------------------------

_orig_backend_run_instances = EC2Backend.run_instances
_orig_start = Instance.start
_orig_stop = Instance.stop


def _backend_run_instances(self: Any, *args: Any, **kwargs: Any) -> Any:
    """Every launch path (RunInstances, Auto Scaling, fleets) starts the SSM agent's clock."""
    reservation = _orig_backend_run_instances(self, *args, **kwargs)
    for instance in reservation.instances:
        _clock_online(instance)
    return reservation


def _start(self: Instance) -> Any:
    if self.state != "running":
        _clock_online(self)
    return _orig_start(self)


def _stop(self: Instance) -> Any:
    now = time.time()
    if self.state == "running" and now >= _online_at(self):
        self.__dict__["_gpustack_last_ping"] = now
    return _orig_stop(self)


def _apply_volume_performance(
    backend: Any, instances: Iterable[Instance], mappings: list[dict[str, Any]]
) -> None:
    """Copies block devices' Iops/Throughput to the volumes moto made without them."""
    by_device = {m.get("DeviceName"): m.get("Ebs") or {} for m in mappings}
    for instance in instances:
        for device, attached in instance.get_block_device_mapping:
            ebs = by_device.get(device, {})
            volume = backend.get_volume(attached.volume_id)
            if ebs.get("Iops") is not None:
                volume.iops = int(ebs["Iops"])
            if ebs.get("Throughput") is not None:
                volume.throughput = int(ebs["Throughput"])


_orig_run_instances: Callable[[EC2Response], ActionResult] = EC2Response.run_instances


def _run_instances(self: EC2Response) -> ActionResult:
    token = self._get_param("ClientToken")
    backend = backend_for(self)
    with LOCK:
        if token:
            for reservation in list(backend.reservations.values()):
                if any(i.client_token == token for i in reservation.instances):
                    return ActionResult(reservation)
        result = _orig_run_instances(self)
    launched: Reservation = result.result  # type: ignore[assignment]
    _apply_volume_performance(backend, launched.instances, self._get_param("BlockDeviceMappings", []) or [])
    return result


# Snapshot ``status``/``progress`` as properties over moto's stored status and our clock:
# ``_gpustack_clock`` = (start, done) epochs of a snapshot being made.


def _snapshot_status(self: Snapshot) -> str:
    clock = self.__dict__.get("_gpustack_clock")
    if clock is not None and time.time() < clock[1]:
        return "pending"
    stored: str = self.__dict__["_status"]
    return stored


def _set_snapshot_status(self: Snapshot, value: str) -> None:
    self.__dict__["_status"] = value


def _snapshot_progress(self: Snapshot) -> str:
    clock = self.__dict__.get("_gpustack_clock")
    now = time.time()
    if clock is None or now >= clock[1]:
        return "100%"
    start, done = clock
    return f"{min(99, int((now - start) / (done - start) * 100))}%"


_orig_create_snapshot = EC2Backend.create_snapshot


def _create_snapshot(
    self: Any, volume_id: str, description: str, owner_id: str | None = None, from_ami: str | None = None
) -> Snapshot:
    snapshot = _orig_create_snapshot(self, volume_id, description, owner_id=owner_id, from_ami=from_ami)
    if from_ami is None and TIMING.snapshot_ms > 0:
        now = time.time()
        snapshot.__dict__["_gpustack_clock"] = (now, now + TIMING.snapshot_ms / 1000.0)
    return snapshot


def install() -> None:
    on_reset(_reset_settings)

    SimpleSystemManagerResponse.describe_instance_information = _describe_instance_information  # type: ignore[attr-defined]
    SimpleSystemManagerResponse.list_command_invocations = _list_command_invocations  # type: ignore[attr-defined]
    SimpleSystemManagerResponse.list_commands = _list_commands  # type: ignore[method-assign]
    SimpleSystemManagerBackend.send_command = _send_command  # type: ignore[method-assign, assignment]
    SimpleSystemManagerBackend.get_command_invocation = _get_command_invocation  # type: ignore[method-assign]
    Command.response_object = _response_object  # type: ignore[method-assign]
    Command._get_instance_ids_from_targets = _target_instance_ids  # type: ignore[method-assign]

    EC2Backend.run_instances = _backend_run_instances  # type: ignore[method-assign]
    Instance.start = _start  # type: ignore[method-assign]
    Instance.stop = _stop  # type: ignore[method-assign]
    ec2_action("RunInstances", override=True)(_run_instances)
    Snapshot.status = property(_snapshot_status, _set_snapshot_status)  # type: ignore[assignment, method-assign]
    Snapshot.progress = property(_snapshot_progress)  # type: ignore[assignment, method-assign]
    EC2Backend.create_snapshot = _create_snapshot  # type: ignore[method-assign]
