"""Service Quotas for EC2's GPU-relevant quotas: GetServiceQuota, GetAWSDefaultServiceQuota,
ListAWSDefaultServiceQuotas with ServiceCode ``ec2``.

moto 5.2.5's servicequotas knows only ServiceCode ``vpc`` (GetServiceQuota and
ListAWSDefaultServiceQuotas answer its AWS defaults) and has no GetAWSDefaultServiceQuota. Its
server routes the AWS SDKs' requests (JSON 1.1, ``X-Amz-Target: ServiceQuotasV20190624.<Action>``,
SigV4 scope ``servicequotas``) to ``ServiceQuotasResponse.<action in snake_case>``; this module
patches those methods: ``ec2`` is answered here, any other service code goes to moto as before
(GetAWSDefaultServiceQuota answers moto's ``vpc`` defaults, else ``NoSuchResourceException``).

For the quota codes in ``QUOTAS`` the answer is a botocore ``ServiceQuota``: ServiceCode ``ec2``,
ServiceName, QuotaArn (``arn:aws:servicequotas:<region>:<account>:ec2/<code>``; the AWS default's
ARN has no account), QuotaCode, QuotaName, Value (a float), Unit ``None``, Adjustable true,
GlobalQuota false. The values are generous (a test account "with approved increases"), the same
for the applied value and the AWS default, in every account and region, unless a test changes
them. Errors: ``NoSuchResourceException`` for an unknown quota code (both actions) or when a test
removed the applied value (GetServiceQuota only: AWS then has only the default);
``AccessDeniedException`` when a test denies the quota (GetServiceQuota only).

Control endpoints (JSON; global to the emulator, cleared by ``POST /moto-api/reset``):

* ``GET /_gpustack/quotas`` -> ``{"quotas": [{"code", "name", "value", "default", "deny",
  "missing"}, ...]}``.
* ``POST /_gpustack/quotas?code=L-...&value=96`` sets the applied value, ``&default=0`` the AWS
  default, ``&deny=1`` / ``&missing=1`` make GetServiceQuota fail as above (``=0`` undoes);
  parameters combine; answers the quota's row. An unknown code is a 400.

This module's ``wrap_wsgi`` also installs the router for every capacity/quota control endpoint
(see capacity_control.py for why it is here).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any, Callable

from moto.core.exceptions import JsonRESTError
from moto.servicequotas.responses import ServiceQuotasResponse

from . import capacity_control

SERVICE_CODE = "ec2"
SERVICE_NAME = "Amazon Elastic Compute Cloud (Amazon EC2)"


@dataclass(frozen=True)
class Quota:
    code: str
    name: str
    value: float  # vCPUs (the Capacity Block quotas count the vCPUs of concurrently active blocks too)
    default: float | None = None  # AWS's default (GetAWSDefaultServiceQuota); None: same as value


# Names as in the EC2 quota tables (docs/aws-facts.md section 6). AWS's own defaults are 0 for the
# GPU/accelerator quotas and 5 for standard instances. The applied values of the older entries are
# what an account for training stacks has (the Rust tests rely on them); their AWS default is 0 where
# the issue lists the code. The Trn/Inf/DL entries are a fresh account's: 0 applied, 0 default
# (tests set them). Trn1/Trn2 Capacity Block names follow the P5 ones (UNVERIFIED wording).
QUOTAS: dict[str, Quota] = {
    q.code: q
    for q in (
        Quota("L-417A185B", "Running On-Demand P instances", 1536.0),
        Quota("L-DB2E81BA", "Running On-Demand G and VT instances", 1024.0, 0.0),
        Quota("L-7212CCBC", "All P4, P3 and P2 Spot Instance Requests", 384.0),
        Quota("L-C4BD4855", "All P5 Spot Instance Requests", 384.0),
        Quota("L-3819A6DF", "All G and VT Spot Instance Requests", 512.0, 0.0),
        Quota("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", 1024.0),
        # Capacity Block quotas are in vCPUs of concurrently active blocks ("Amazon EC2 instance
        # type quotas" page): 1536 = 8 p5.48xlarge, what an account for training stacks has.
        Quota("L-DA6814F2", "Concurrent P5 Capacity Blocks per account", 1536.0, 0.0),
        Quota("L-C45F30BC", "Concurrent P5e Capacity Blocks per account", 1536.0, 0.0),
        Quota("L-4F9BB70B", "Concurrent P5en Capacity Blocks per account", 1536.0, 0.0),
        Quota("L-2C8F52B3", "Concurrent P4d Capacity Blocks per account", 1536.0, 0.0),
        Quota("L-2E30FD7D", "Concurrent Trn1 Capacity Blocks per account", 0.0, 0.0),
        Quota("L-64569A79", "Concurrent Trn2 Capacity Blocks per account", 0.0, 0.0),
        Quota("L-2C3B7624", "Running On-Demand Trn instances", 0.0, 0.0),
        Quota("L-1945791B", "Running On-Demand Inf instances", 0.0, 0.0),
        Quota("L-6E869C2A", "Running On-Demand DL instances", 0.0, 0.0),
        Quota("L-6B0D517C", "All Trn Spot Instance Requests", 0.0, 0.0),
        Quota("L-B5D1601B", "All Inf Spot Instance Requests", 0.0, 0.0),
        Quota("L-85EED4F7", "All DL Spot Instance Requests", 0.0, 0.0),
    )
}

_lock = threading.Lock()
# code -> {"value": applied value, "default": AWS default, "deny": bool, "missing": bool}
_settings: dict[str, dict[str, Any]] = {}


def _reset_settings() -> None:
    with _lock:
        _settings.clear()
        _settings.update(
            {
                q.code: {
                    "value": q.value,
                    "default": q.value if q.default is None else q.default,
                    "deny": False,
                    "missing": False,
                }
                for q in QUOTAS.values()
            }
        )


_reset_settings()


def _no_such_quota(code: str) -> JsonRESTError:
    return JsonRESTError(
        "NoSuchResourceException", f"The request failed because the specified quota {code} does not exist."
    )


def _shape(response: ServiceQuotasResponse, quota: Quota, value: float, account: str) -> dict[str, Any]:
    """The botocore ``ServiceQuota`` shape."""
    return {
        "ServiceCode": SERVICE_CODE,
        "ServiceName": SERVICE_NAME,
        "QuotaArn": f"arn:aws:servicequotas:{response.region}:{account}:{SERVICE_CODE}/{quota.code}",
        "QuotaCode": quota.code,
        "QuotaName": quota.name,
        "Value": float(value),
        "Unit": "None",
        "Adjustable": True,
        "GlobalQuota": False,
    }


def _request(response: ServiceQuotasResponse) -> tuple[str, str]:
    params = json.loads(response.body or "{}")
    return str(params.get("ServiceCode")), str(params.get("QuotaCode"))


def _settings_of(code: str) -> tuple[Quota, dict[str, Any]]:
    quota = QUOTAS.get(code)
    if quota is None:
        raise _no_such_quota(code)
    with _lock:
        return quota, dict(_settings[code])


_moto_get_service_quota: Callable[[ServiceQuotasResponse], str] = ServiceQuotasResponse.get_service_quota
_moto_list_defaults: Callable[[ServiceQuotasResponse], str] = ServiceQuotasResponse.list_aws_default_service_quotas


def _get_service_quota(self: ServiceQuotasResponse) -> str:
    service, code = _request(self)
    if service != SERVICE_CODE:
        return _moto_get_service_quota(self)
    quota, settings = _settings_of(code)
    if settings["deny"]:
        raise JsonRESTError("AccessDeniedException", "You do not have sufficient access to perform this action.")
    if settings["missing"]:
        raise JsonRESTError(
            "NoSuchResourceException",
            f"The request failed because the applied value of quota {code} is not available.",
        )
    return json.dumps({"Quota": _shape(self, quota, settings["value"], self.current_account)})


def _get_aws_default_service_quota(self: ServiceQuotasResponse) -> str:
    service, code = _request(self)
    if service != SERVICE_CODE:
        # moto's GetServiceQuota answers its (vpc) AWS defaults, or NoSuchResourceException.
        return json.dumps({"Quota": self.backend.get_service_quota(service, code)})
    quota, settings = _settings_of(code)
    return json.dumps({"Quota": _shape(self, quota, settings["default"], "")})


def _list_aws_default_service_quotas(self: ServiceQuotasResponse) -> str:
    service, _ = _request(self)
    if service != SERVICE_CODE:
        return _moto_list_defaults(self)
    with _lock:
        defaults = {code: s["default"] for code, s in _settings.items()}
    return json.dumps({"Quotas": [_shape(self, q, defaults[q.code], "") for q in QUOTAS.values()]})


# --- control endpoints ---------------------------------------------------------------------------


def _row(code: str) -> dict[str, Any]:
    return {"code": code, "name": QUOTAS[code].name, **_settings[code]}


@capacity_control.route("GET", "/_gpustack/quotas")
def _control_list(query: dict[str, str]) -> tuple[int, Any]:
    with _lock:
        return 200, {"quotas": [_row(code) for code in QUOTAS]}


@capacity_control.route("POST", "/_gpustack/quotas")
def _control_set(query: dict[str, str]) -> tuple[int, Any]:
    code = query.get("code", "")
    if code not in QUOTAS:
        raise capacity_control.ControlError(f"code must be one of {', '.join(QUOTAS)}, not {code!r}")
    # Parse everything before changing anything, so a bad request changes nothing.
    changes: dict[str, Any] = {}
    for name in ("value", "default"):
        if name in query:
            number = capacity_control.float_arg(query, name)
            if number < 0:
                raise capacity_control.ControlError(f"{name} must not be negative")
            changes[name] = number
    for name in ("deny", "missing"):
        if name in query:
            changes[name] = capacity_control.flag_arg(query, name)
    with _lock:
        _settings[code].update(changes)
        return 200, _row(code)


def install() -> None:
    if hasattr(ServiceQuotasResponse, "get_aws_default_service_quota"):
        raise RuntimeError("moto already implements GetAWSDefaultServiceQuota; revisit service_quotas.py")
    capacity_control.on_reset(_reset_settings)
    ServiceQuotasResponse.get_service_quota = _get_service_quota  # type: ignore[method-assign]
    ServiceQuotasResponse.get_aws_default_service_quota = _get_aws_default_service_quota  # type: ignore[attr-defined]
    ServiceQuotasResponse.list_aws_default_service_quotas = _list_aws_default_service_quotas  # type: ignore[method-assign]


def wrap_wsgi(app: Callable[..., Any]) -> Callable[..., Any]:
    return capacity_control.ControlRouter(app)
