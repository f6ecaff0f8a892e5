"""Request validation against the botocore service models, as strict as the AWS services are.

A WSGI middleware: before moto sees an EC2, IAM, EKS, SSM, Service Quotas, SQS, EventBridge,
SageMaker or EC2 Auto Scaling request, it turns the request back into the parameters of its operation (one
de-serialiser per protocol) and checks them against the operation's input shape in the pinned
botocore model (1.44.5):

* required members present; types (integer, boolean, double, timestamp, list, structure, map);
* ``enum`` values; numeric ``min``/``max``; string and list/map lengths ``min``/``max``;
* EventBridge and SageMaker only: ``pattern`` (EventBridge answers "Member must satisfy regular
  expression pattern: [\\.\\-_A-Za-z0-9]+" for a rule name such as ``a b``, botocore ``RuleName``;
  SageMaker's Coral validation answers the same form, e.g. for a ``ClusterName`` with ``_``);
  patterns Python cannot compile (``\\p{L}``) are skipped;
* JSON services: an ``X-Amz-Target`` operation the service's model does not have (e.g.
  ``SageMaker.DeleteTrainingPlan``: there is no such operation) is 400
  ``UnknownOperationException``, as AWS's awsJson services answer it (moto would crash with a 500
  page). An operation the model has but the emulator lacks stays 501 ``NotImplemented``
  (not_implemented.py);
* EC2 only: a parameter the operation does not have is ``UnknownParameter`` ("The parameter X is
  not recognized", EC2 API Reference, Common client error codes), and a filter name the EC2 API
  Reference does not document for that operation is ``InvalidParameterValue`` "The filter '<n>'
  is invalid" (the table is ``ec2_filters.FILTERS``).

botocore's own ``ParamValidator`` checks required members, types and minimums but not enums or
maximums (its client relies on the service for those), so the walk is done here.

Violations are answered as each service answers its own validation errors (HTTP 400):

* EC2 (``ec2`` protocol): ``<Response><Errors><Error>`` with ``MissingParameter`` ("The request
  must contain the parameter X"), ``UnknownParameter`` or ``InvalidParameterValue`` ("Value (v) for
  parameter X is invalid. ...");
* IAM and EC2 Auto Scaling (``query``): ``<ErrorResponse>`` with ``ValidationError``;
* EKS (``rest-json``): ``InvalidParameterException`` (``x-amzn-ErrorType`` header and JSON body);
* SSM, Service Quotas, EventBridge and SageMaker (``json``): ``ValidationException``;
* SQS (``json`` with ``awsQueryCompatible``): a missing member is ``MissingParameter`` ("The request
  must contain the parameter QueueName.", SQS API Reference, Common Errors; the wording as SQS
  answered ``Attribute.Name``, aws-controllers-k8s/community#2139), anything else
  ``InvalidParameterValue`` (Common Errors), both with the ``x-amzn-query-error: <code>;Sender``
  header the query-compatible services send, so the SDKs report the query error code. The
  attribute-name enum (``QueueAttributeName``) is left to ``sqs_strict.py``, which answers as SQS
  does (``InvalidAttributeName`` "Unknown Attribute X.").

The IAM/EKS/SSM/Service Quotas message is AWS's (Coral) wording: ``1 validation error detected:
Value 'x' at 'roleName' failed to satisfy constraint: Member must have length less than or equal
to 64``. Patterns (``pattern``) are not checked (Java regular expressions; not all translate).

The service is the SigV4 credential scope's (``request_log._service``); S3 and STS (other owners)
and unsigned requests pass through unchecked, as do operations the model does not have.
"""

from __future__ import annotations

import gzip
import io
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs, unquote, urlsplit

import botocore.session
from botocore.model import OperationModel, Shape
from botocore.utils import parse_timestamp

from . import ec2_filters
from .request_log import CONTROL_PREFIX, _service

# SigV4 scope -> botocore service name.
SERVICES = {
    "ec2": "ec2",
    "iam": "iam",
    "eks": "eks",
    "ssm": "ssm",
    "servicequotas": "service-quotas",
    "sqs": "sqs",
    "events": "events",
    "sagemaker": "sagemaker",
    # EC2 Auto Scaling (self-managed node groups): moto takes any SpotAllocationStrategy or
    # CapacityReservationPreference and ignores CapacityReservationSpecification; AWS
    # validates the enums of the botocore autoscaling model (query protocol, ValidationError).
    "autoscaling": "autoscaling",
}
# Services whose ``pattern`` traits are checked: EventBridge answers them with ValidationException
# (botocore ``RuleName``/``TargetId`` patterns; PutRule refuses ``Name="r 1"``). Other services'
# patterns are Java regular expressions that do not all translate.
PATTERN_SERVICES = {"events", "sagemaker"}
# Query parameters that are not operation members (EC2 and IAM common parameters; SigV4 query auth).
COMMON_QUERY = {"Action", "Version", "AWSAccessKeyId", "Signature", "SignatureMethod", "SignatureVersion"}
COMMON_QUERY |= {"Timestamp", "Expires", "SecurityToken"}
# Enum shapes not checked (see check()).
ENUM_EXEMPT = {"InstanceType", "QueueAttributeName"}


@lru_cache(maxsize=None)
def model(service: str) -> Any:
    return botocore.session.get_session().get_service_model(service)


@dataclass
class Violation:
    kind: str  # required, type, enum, min, max, length_min, length_max, pattern, unknown, filter
    path: list[str]  # member names (list items as their 1-based index)
    wire: str  # the parameter as EC2 names it on the wire (ec2 protocol only)
    value: Any = None
    limit: Any = None
    detail: str = ""


@dataclass
class Request:
    operation: OperationModel
    params: dict[str, Any]
    violations: list[Violation] = field(default_factory=list)


# --- query protocols (EC2, IAM) ------------------------------------------------------------------


def _ec2_wire(member: Shape, name: str) -> str:
    """botocore EC2Serializer._get_serialized_name."""
    if "queryName" in member.serialization:
        return str(member.serialization["queryName"])
    if "name" in member.serialization:
        wire = str(member.serialization["name"])
        return wire[0].upper() + wire[1:]
    return name


def _query_wire(member: Shape, name: str) -> str:
    return str(member.serialization.get("name", name))


class _Query:
    """Rebuilds an operation's parameters from flat query keys (botocore's QuerySerializer and
    EC2Serializer, backwards); records the keys it used and the values of the wrong type."""

    def __init__(self, flat: dict[str, str], ec2: bool) -> None:
        self.flat = flat
        self.ec2 = ec2
        self.used: set[str] = set()
        self.violations: list[Violation] = []
        self.prefixes: set[str] = set()
        for key in flat:
            parts = key.split(".")
            for i in range(1, len(parts) + 1):
                self.prefixes.add(".".join(parts[:i]))

    def value(self, shape: Shape, key: str, path: list[str]) -> Any:
        kind = shape.type_name
        if kind == "structure":
            out = {}
            for name, member in shape.members.items():
                wire = _ec2_wire(member, name) if self.ec2 else _query_wire(member, name)
                sub = f"{key}.{wire}" if key else wire
                if sub in self.prefixes:
                    out[name] = self.value(member, sub, path + [name])
            return out
        if kind == "list":
            if not self.ec2 and self.flat.get(key) == "":
                self.used.add(key)
                return []
            if self.ec2 or shape.serialization.get("flattened"):
                base = key
            else:
                base = f"{key}.{shape.member.serialization.get('name', 'member')}"
            indices = sorted(
                {
                    int(k.split(".")[0])
                    for k in (p[len(base) + 1 :] for p in self.prefixes if p.startswith(base + "."))
                    if k.split(".")[0].isdigit()
                }
            )
            return [self.value(shape.member, f"{base}.{i}", path + [str(i)]) for i in indices]
        if kind == "map":
            base = key if shape.serialization.get("flattened") else f"{key}.entry"
            key_name = shape.key.serialization.get("name", "key")
            value_name = shape.value.serialization.get("name", "value")
            out = {}
            i = 1
            while f"{base}.{i}.{key_name}" in self.flat:
                k = self.value(shape.key, f"{base}.{i}.{key_name}", path)
                out[k] = self.value(shape.value, f"{base}.{i}.{value_name}", path + [str(k)])
                i += 1
            return out
        if key not in self.flat:
            # A nested key under a scalar (e.g. ``Name.1``): not a parameter of this shape.
            return None
        self.used.add(key)
        return _scalar(shape, self.flat[key], path, key, self.violations)


def _scalar(shape: Shape, raw: str, path: list[str], wire: str, out: list[Violation]) -> Any:
    """A query-string scalar as its model type (a Violation and the raw string if it is not one)."""
    kind = shape.type_name
    try:
        if kind in ("integer", "long"):
            return int(raw)
        if kind in ("float", "double"):
            return float(raw)
        if kind == "boolean":
            if raw.lower() not in ("true", "false"):
                raise ValueError(raw)
            return raw.lower() == "true"
        if kind == "timestamp":
            parse_timestamp(raw)
    except (ValueError, TypeError, OverflowError):
        out.append(Violation("type", path, wire, raw, kind))
        return None
    return raw


def parse_query(service: str, flat: dict[str, str]) -> Request | None:
    """EC2 (``ec2`` protocol) and IAM (``query``) requests."""
    action = flat.get("Action")
    svc = model(service)
    if not action or action not in svc.operation_names:
        return None
    operation = svc.operation_model(action)
    ec2 = svc.protocol == "ec2"
    reader = _Query(flat, ec2)
    params = reader.value(operation.input_shape, "", []) if operation.input_shape is not None else {}
    request = Request(operation, params, reader.violations)
    if ec2:
        for key in sorted(set(flat) - reader.used):
            if key not in COMMON_QUERY and not key.startswith("X-Amz-"):
                request.violations.append(Violation("unknown", [], key))
    return request


# --- rest-json (EKS) -----------------------------------------------------------------------------


@lru_cache(maxsize=None)
def _routes(service: str) -> list[tuple[str, re.Pattern[str], str, int]]:
    """(method, path regex, operation, literal length) for every operation, most specific first."""
    svc = model(service)
    routes = []
    for name in svc.operation_names:
        http = svc.operation_model(name).http
        uri = http["requestUri"].split("?")[0]
        regex, literal = "", 0
        for part in re.split(r"(\{[^}]+\})", uri):
            if part.startswith("{"):
                label = part[1:-1]
                greedy = label.endswith("+")
                label = label.rstrip("+")
                regex += f"(?P<{label}>{'.+' if greedy else '[^/]+'})"
            else:
                regex += re.escape(part)
                literal += len(part)
        routes.append((http["method"], re.compile(regex + "/?$"), name, literal))
    routes.sort(key=lambda r: -r[3])
    return routes


def raw_path(environ: dict[str, Any]) -> str:
    """The request path as sent (labels still percent-encoded). ``PATH_INFO`` is decoded, so an
    ARN label (EKS access entries: ``/clusters/c/access-entries/arn%3Aaws%3Aiam%3A%3A1%3Arole%2Fr``)
    would show its ``/`` and no longer match the one-segment ``{principalArn}`` label."""
    raw = urlsplit(environ.get("RAW_URI") or environ.get("REQUEST_URI") or "").path
    return raw or environ.get("PATH_INFO", "")


def rest_operation(service: str, environ: dict[str, Any]) -> tuple[str, re.Match[str]] | None:
    """(operation, path match) of a REST request, routed like the SDK built it."""
    method = environ.get("REQUEST_METHOD", "GET")
    path = raw_path(environ)
    for route_method, regex, name, _ in _routes(service):
        match = regex.match(path) if route_method == method else None
        if match:
            return name, match
    return None


def parse_rest_json(service: str, environ: dict[str, Any], body: bytes) -> Request | None:
    method = environ.get("REQUEST_METHOD", "GET")
    path = raw_path(environ)
    for route_method, regex, name, _ in _routes(service):
        match = regex.match(path) if route_method == method else None
        if match:
            break
    else:
        return None
    operation = model(service).operation_model(name)
    shape = operation.input_shape
    params: dict[str, Any] = {}
    violations: list[Violation] = []
    if shape is None:
        return Request(operation, params)
    labels = {k: unquote(v) for k, v in match.groupdict().items()}
    query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    try:
        document = json.loads(body) if body.strip() else {}
    except ValueError:
        document = None
    if document is not None and not isinstance(document, dict):
        document = None
    if document is None:
        violations.append(
            Violation("type", [], "", "<request body>", "structure", "the body is not a JSON object")
        )
        document = {}
    for member_name, member in shape.members.items():
        location = member.serialization.get("location")
        wire = member.serialization.get("name", member_name)
        if location == "uri":
            if wire in labels:
                params[member_name] = labels[wire]
        elif location == "querystring":
            if wire in query:
                values = query[wire]
                if member.type_name == "list":
                    params[member_name] = [
                        _scalar(member.member, v, [member_name], wire, violations) for v in values
                    ]
                else:
                    params[member_name] = _scalar(member, values[0], [member_name], wire, violations)
        elif location == "header":
            header = environ.get("HTTP_" + wire.upper().replace("-", "_"))
            if header is not None:
                params[member_name] = _scalar(member, header, [member_name], wire, violations)
        elif wire in document:
            params[member_name] = document[wire]
    return Request(operation, params, violations)


# --- json (SSM, Service Quotas) ------------------------------------------------------------------


class UnknownOperation(Exception):
    """An ``X-Amz-Target`` naming an operation the service's model does not have."""


def parse_json(service: str, environ: dict[str, Any], body: bytes) -> Request | None:
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    name = target.rsplit(".", 1)[-1]
    svc = model(service)
    if not name:
        return None
    if name not in svc.operation_names:
        raise UnknownOperation(name)
    operation = svc.operation_model(name)
    try:
        params = json.loads(body) if body.strip() else {}
    except ValueError:
        params = None
    if not isinstance(params, dict):
        return Request(
            operation, {}, [Violation("type", [], "", "<request body>", "structure", "not a JSON object")]
        )
    return Request(operation, params)


# --- the check -----------------------------------------------------------------------------------

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "long": (int,),
    "float": (int, float),
    "double": (int, float),
    "boolean": (bool,),
    "timestamp": (int, float, str),
    "blob": (str,),
    "list": (list,),
    "structure": (dict,),
    "map": (dict,),
}


@lru_cache(maxsize=None)
def _pattern(regex: str) -> re.Pattern[str] | None:
    """``regex`` as a Python pattern, or None when it does not translate (``\\p{L}``)."""
    if "\\p{" in regex or "\\P{" in regex:
        return None
    try:
        return re.compile(regex)
    except re.error:
        return None


def check(
    shape: Shape,
    value: Any,
    path: list[str],
    wire: str,
    ec2: bool,
    out: list[Violation],
    patterns: bool = False,
) -> None:
    """Appends to ``out`` every way ``value`` breaks ``shape`` (required, type, enum, min, max;
    with ``patterns``, the ``pattern`` trait too)."""
    if value is None:
        return
    kind = shape.type_name
    allowed = _JSON_TYPES.get(kind)
    if allowed and (
        not isinstance(value, allowed) or (kind in ("integer", "long") and isinstance(value, bool))
    ):
        out.append(Violation("type", path, wire, value, kind))
        return
    meta = shape.metadata
    if kind == "structure":
        for required in shape.required_members:
            if value.get(required) is None:
                member = shape.members[required]
                sub = _ec2_wire(member, required) if ec2 else required
                out.append(Violation("required", path + [required], f"{wire}.{sub}" if wire else sub))
        for name, member_value in value.items():
            member = shape.members.get(name)
            if member is not None:
                sub = _ec2_wire(member, name) if ec2 else name
                check(
                    member, member_value, path + [name], f"{wire}.{sub}" if wire else sub, ec2, out, patterns
                )
        return
    if kind in ("list", "map", "string", "blob"):
        size = len(value)
        if "min" in meta and size < meta["min"]:
            out.append(Violation("length_min", path, wire, value, meta["min"]))
        if "max" in meta and size > meta["max"]:
            out.append(Violation("length_max", path, wire, value, meta["max"]))
    elif kind in ("integer", "long", "float", "double"):
        if "min" in meta and value < meta["min"]:
            out.append(Violation("min", path, wire, value, meta["min"]))
        if "max" in meta and value > meta["max"]:
            out.append(Violation("max", path, wire, value, meta["max"]))
    # InstanceType is exempt: botocore's enum lags EC2's catalog, and EC2 answers an unknown type
    # with each operation's own error (DescribeInstanceTypes: InvalidInstanceType), not a
    # validation error; the emulator's catalog (moto + extensions) decides instead.
    if kind == "string" and shape.enum and value not in shape.enum and shape.name not in ENUM_EXEMPT:
        out.append(Violation("enum", path, wire, value, list(shape.enum)))
    if patterns and kind == "string" and "pattern" in meta:
        compiled = _pattern(meta["pattern"])
        if compiled is not None and compiled.fullmatch(value) is None:
            out.append(Violation("pattern", path, wire, value, meta["pattern"]))
    if kind == "list":
        for i, item in enumerate(value, 1):
            check(shape.member, item, path + [str(i)], f"{wire}.{i}", ec2, out, patterns)
    if kind == "map":
        for k, v in value.items():
            check(shape.key, k, path, wire, ec2, out, patterns)
            check(shape.value, v, path + [str(k)], f"{wire}.{k}", ec2, out, patterns)


def ec2_filter_violations(request: Request) -> list[Violation]:
    """Filter names the EC2 API Reference does not document for the operation (``ec2_filters``)."""
    name = request.operation.name
    if not ec2_filters.checked(name):
        return []
    member = "Filter" if "Filter" in request.params else "Filters"
    return [
        Violation("filter", [member], "Filter", f.get("Name"))
        for f in request.params.get(member) or []
        if isinstance(f, dict) and isinstance(f.get("Name"), str) and not ec2_filters.valid(name, f["Name"])
    ]


def violations(request: Request, ec2: bool, patterns: bool = False) -> list[Violation]:
    out = list(request.violations)
    shape = request.operation.input_shape
    if shape is not None:
        check(shape, request.params, [], "", ec2, out, patterns)
    if ec2:
        out += ec2_filter_violations(request)
    return out


# --- answers -------------------------------------------------------------------------------------


def _coral_path(path: list[str]) -> str:
    parts = []
    for p in path:
        parts.append(f"{p}.member" if p.isdigit() else p[:1].lower() + p[1:])
    return ".".join(parts)


def _coral_value(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_coral_value(v) for v in value) + "]"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


_CONSTRAINT = {
    "length_min": "Member must have length greater than or equal to {limit}",
    "length_max": "Member must have length less than or equal to {limit}",
    "min": "Member must have value greater than or equal to {limit}",
    "max": "Member must have value less than or equal to {limit}",
    "enum": "Member must satisfy enum value set: [{enum}]",
    "type": "Member must be of type {limit}",
    "pattern": "Member must satisfy regular expression pattern: {limit}",
}


def coral_message(found: list[Violation]) -> str:
    """``N validation error(s) detected: ...``, as the Coral-based services word it."""
    parts = []
    for v in found:
        at = _coral_path(v.path) or "body"
        if v.kind == "required":
            parts.append(f"Value null at '{at}' failed to satisfy constraint: Member must not be null")
            continue
        constraint = _CONSTRAINT[v.kind].format(
            limit=v.limit, enum=", ".join(v.limit or []) if v.kind == "enum" else ""
        )
        parts.append(f"Value '{_coral_value(v.value)}' at '{at}' failed to satisfy constraint: {constraint}")
    plural = "error" if len(parts) == 1 else "errors"
    return f"{len(parts)} validation {plural} detected: " + "; ".join(parts)


def ec2_error(v: Violation) -> tuple[str, str]:
    """(code, message) of EC2's answer to the first violation."""
    if v.kind == "required":
        return "MissingParameter", f"The request must contain the parameter {v.wire}"
    if v.kind == "unknown":
        return "UnknownParameter", f"The parameter {v.wire} is not recognized"
    if v.kind == "filter":
        return "InvalidParameterValue", ec2_filters.message(v.value)
    value = _coral_value(v.value) if not isinstance(v.value, (dict, list)) else f"{len(v.value)} items"
    reason = {
        "type": f"Expecting a value of type {v.limit}.",
        "enum": (
            f"Valid values: {', '.join(v.limit)}."
            if v.kind == "enum" and len(v.limit) <= 30
            else "Unknown value."
        ),
        "min": f"Expecting a value greater than or equal to {v.limit}.",
        "max": f"Expecting a value less than or equal to {v.limit}.",
        "length_min": f"Expecting at least {v.limit} (length/items).",
        "length_max": f"Expecting at most {v.limit} (length/items).",
    }[v.kind]
    return "InvalidParameterValue", f"Value ({value}) for parameter {v.wire} is invalid. {reason}"


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _send(
    start_response: Callable[..., Any],
    content_type: str,
    body: str,
    extra: list[tuple[str, str]] | None = None,
) -> Iterable[bytes]:
    data = body.encode()
    headers = [("Content-Type", content_type), ("Content-Length", str(len(data)))] + (extra or [])
    start_response("400 Bad Request", headers)
    return [data]


def answer_ec2(start_response: Callable[..., Any], found: list[Violation]) -> Iterable[bytes]:
    code, message = ec2_error(found[0])
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
        f"<Code>{code}</Code><Message>{_xml(message)}</Message></Error></Errors>"
        "<RequestID>gpustack-validation</RequestID></Response>"
    )
    return _send(start_response, "text/xml", body)


def answer_iam(start_response: Callable[..., Any], found: list[Violation]) -> Iterable[bytes]:
    body = (
        '<ErrorResponse xmlns="https://iam.amazonaws.com/doc/2010-05-08/"><Error><Type>Sender</Type>'
        f"<Code>ValidationError</Code><Message>{_xml(coral_message(found))}</Message></Error>"
        "<RequestId>gpustack-validation</RequestId></ErrorResponse>"
    )
    return _send(start_response, "text/xml", body)


def answer_json(
    start_response: Callable[..., Any], code: str, content_type: str, found: list[Violation]
) -> Iterable[bytes]:
    message = coral_message(found)
    body = json.dumps({"__type": code, "message": message})
    return _send(start_response, content_type, body, [("x-amzn-ErrorType", code)])


def answer_sqs(start_response: Callable[..., Any], found: list[Violation]) -> Iterable[bytes]:
    """SQS (JSON, query-compatible): ``MissingParameter`` for a missing member, else
    ``InvalidParameterValue``; the query error code travels in ``x-amzn-query-error``."""
    missing = next((v for v in found if v.kind == "required"), None)
    if missing is not None:
        code = "MissingParameter"
        message = f"The request must contain the parameter {'.'.join(missing.path)}."
    else:
        code, message = "InvalidParameterValue", coral_message(found)
    body = json.dumps({"__type": f"com.amazon.coral.service#{code}", "message": message})
    headers = [("x-amzn-ErrorType", code), ("x-amzn-query-error", f"{code};Sender")]
    return _send(start_response, "application/x-amz-json-1.0", body, headers)


def answer_unknown_operation(start_response: Callable[..., Any], service: str) -> Iterable[bytes]:
    """400 ``UnknownOperationException``, AWS's awsJson answer to an operation it does not have
    (no message; the SQS query-compatible form adds ``x-amzn-query-error``)."""
    code = "UnknownOperationException"
    body = json.dumps({"__type": f"com.amazon.coral.service#{code}"})
    extra = [("x-amzn-ErrorType", code)]
    if service == "sqs":
        extra.append(("x-amzn-query-error", f"{code};Sender"))
    version = "1.0" if model(service).metadata.get("jsonVersion") == "1.0" else "1.1"
    return _send(start_response, f"application/x-amz-json-{version}", body, extra)


# --- the middleware ------------------------------------------------------------------------------


def _read_body(environ: dict[str, Any]) -> bytes:
    """The request body; ``wsgi.input`` is replaced by a copy so moto still reads it."""
    try:
        length = int(environ.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    stream = environ["wsgi.input"]
    if length > 0:
        raw = stream.read(length)
    elif "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
        raw = stream.read()
        environ["CONTENT_LENGTH"] = str(len(raw))
    else:
        raw = b""
    environ["wsgi.input"] = io.BytesIO(raw)
    if environ.get("HTTP_CONTENT_ENCODING", "").lower() == "gzip" and raw:
        try:
            raw = gzip.decompress(raw)
        except OSError:
            pass
    return raw


def _flat_query(environ: dict[str, Any], body: bytes) -> dict[str, str]:
    flat = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True).items()}
    if environ.get("CONTENT_TYPE", "").startswith("application/x-www-form-urlencoded"):
        form = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        flat.update({k: v[0] for k, v in form.items()})
    return flat


def validate(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes] | None:
    """The error answer for an invalid request, or None to let it through."""
    query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    scope = _service(environ, query)
    service = SERVICES.get(scope or "")
    if service is None:
        return None
    body = _read_body(environ)
    protocol = model(service).protocol
    if protocol in ("ec2", "query"):
        request = parse_query(service, _flat_query(environ, body))
    elif protocol == "rest-json":
        request = parse_rest_json(service, environ, body)
    else:
        try:
            request = parse_json(service, environ, body)
        except UnknownOperation:
            return answer_unknown_operation(start_response, service)
    if request is None:
        return None
    found = violations(request, protocol == "ec2", service in PATTERN_SERVICES)
    if not found:
        return None
    if protocol == "ec2":
        return answer_ec2(start_response, found)
    if protocol == "query":
        return answer_iam(start_response, found)
    if protocol == "rest-json":
        return answer_json(start_response, "InvalidParameterException", "application/json", found)
    if service == "sqs":
        return answer_sqs(start_response, found)
    return answer_json(start_response, "ValidationException", "application/x-amz-json-1.1", found)


class Validator:
    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "")
        if not path.startswith(CONTROL_PREFIX) and not path.startswith("/moto-api"):
            refused = validate(environ, start_response)
            if refused is not None:
                return refused
        return self.app(environ, start_response)


def wrap_wsgi(app: Callable[..., Any]) -> Callable[..., Any]:
    return Validator(app)
