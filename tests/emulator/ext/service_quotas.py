"""Service Quotas for EC2's GPU-relevant quotas and SageMaker's HyperPod / training-plan quotas:
GetServiceQuota, GetAWSDefaultServiceQuota, ListAWSDefaultServiceQuotas and ListServiceQuotas with
ServiceCode ``ec2`` or ``sagemaker``.

moto 5.2.5's servicequotas knows only ServiceCode ``vpc`` (GetServiceQuota and
ListAWSDefaultServiceQuotas answer its AWS defaults) and has neither GetAWSDefaultServiceQuota nor
ListServiceQuotas. Its server routes the AWS SDKs' requests (JSON 1.1, ``X-Amz-Target:
ServiceQuotasV20190624.<Action>``, SigV4 scope ``servicequotas``) to
``ServiceQuotasResponse.<action in snake_case>``; this module patches those methods: ``ec2`` and
``sagemaker`` are answered here, any other service code goes to moto as before
(GetAWSDefaultServiceQuota answers moto's ``vpc`` defaults, else ``NoSuchResourceException``;
ListServiceQuotas is 501 ``NotImplemented`` for other codes, as moto lacks it).

For the quota codes in ``QUOTAS`` the answer is a botocore ``ServiceQuota``: ServiceCode,
ServiceName (``Amazon Elastic Compute Cloud (Amazon EC2)``; ``Amazon SageMaker AI``, the name the
Service Quotas console lists, SageMaker Developer Guide "SageMaker HyperPod quotas"), QuotaArn
(``arn:aws:servicequotas:<region>:<account>:<service>/<code>``; the AWS default's ARN has no
account), QuotaCode, QuotaName, Value (a float), Unit ``None``, Adjustable true, GlobalQuota false.
The EC2 values are generous (a test account "with approved increases"), the same for the applied
value and the AWS default, in every account and region, unless a test changes them. Errors:
``NoSuchResourceException`` for an unknown quota code or a code of another service (both Get
actions) or when a test removed the applied value (GetServiceQuota only: AWS then has only the
default); ``AccessDeniedException`` when a test denies the quota (GetServiceQuota only).

ListAWSDefaultServiceQuotas and ListServiceQuotas page with MaxResults (1-100, default 100) and an
opaque NextToken (another token: ``InvalidPaginationTokenException``). ListServiceQuotas lists the
applied values; a quota whose applied value a test removed (``missing``) is left out ("If the
applied quota value is not available for a quota, the quota is not retrieved", Service Quotas API
Reference); ``QuotaCode`` narrows it to one quota; ``QuotaAppliedAtLevel`` ``RESOURCE`` lists none
(every quota here is account-level).

SageMaker quotas (``SAGEMAKER_QUOTAS``), names as the SageMaker Developer Guide ("SageMaker
HyperPod quotas": "ml.<instance_type> for cluster usage", "Maximum number instances allowed per
SageMaker HyperPod cluster", "Total number of instances allowed across SageMaker HyperPod
clusters", "Maximum size of EBS volume in GB for a SageMaker HyperPod cluster instance") words them:

* ``ml.<type> for cluster usage``: instances of that type across all HyperPod clusters of the
  account in the region ("must be greater than the number of instances to add across all your
  clusters in your account in aggregate", ibid.); training-plan instances count too ("Make sure
  that your Training Jobs or HyperPod service quotas allow a maximum number of instances per
  instance type that exceeds the number of instances specified in your plan", SageMaker DG
  "Reserve training plans"). Applied values: p5/p5e/p5en/p4d/p4de/trn1/trn1n/trn2 4 instances,
  p5.4xlarge 8, p6-b200 2, p6-b300 and p6e-gb200 0, g5/g6e 8, CPU types 16; AWS default 0 for
  every accelerated type.
* the three HyperPod-wide quotas above: applied 64 per cluster, 128 across clusters, 4096 GB per
  EBS volume (AWS defaults 20, 30, 1024: values a third-party account listing reports, unverified
  as defaults).
* training plans: ``Number of <type> instances in reserved capacity across training plans per
  Region`` (per type) and ``Number of training plans per Region`` (names from SageMaker DG "View
  SageMaker training plans quotas", training-plan-quotas, which lists the per-type quota for
  p4d.24xlarge, p5.48xlarge, p5e.48xlarge, p5en.48xlarge, trn1.32xlarge and trn2.48xlarge; the
  emulator also has p4de, p5.4xlarge, p6-b200, p6-b300 and p6e-gb200 rows, unverified).
  SearchTrainingPlanOfferings answers ``ResourceLimitExceeded`` when the asked count is above the
  type's quota (a third-party account survey reports that answer for a 0 quota). Applied values:
  64 or 256 instances per type (p6-b200 16, p6-b300 0, p6e-gb200 18), 25 plans.

Quota codes: those marked ``verified`` in ``SAGEMAKER_QUOTAS`` appear with that name in third-party
listings of real accounts' ``list-service-quotas --service-code sagemaker`` (L-8762A75F,
L-47E0BC8F and L-177AF1AD in two independent ones); every other SageMaker code is made up, stable
(``L-`` + the first 8 hex digits, upper case, of the sha256 of ``sagemaker|<quota name>``) and
UNVERIFIED. The HyperPod extension enforces the cluster-usage and HyperPod-wide quotas at
CreateCluster/UpdateCluster (``ResourceLimitExceeded``), the training-plan ones at
SearchTrainingPlanOfferings/CreateTrainingPlan, always with the applied value (``value``).

Control endpoints (JSON; global to the emulator, cleared by ``POST /moto-api/reset``):

* ``GET /_gpustack/quotas`` -> ``{"quotas": [{"code", "name", "service", "value", "default",
  "deny", "missing"}, ...]}``, the ``ec2`` quotas; ``?service=sagemaker`` (or ``all``) lists the
  SageMaker ones (or every one).
* ``POST /_gpustack/quotas?code=L-...&value=96`` sets the applied value, ``&default=0`` the AWS
  default, ``&deny=1`` / ``&missing=1`` make GetServiceQuota fail as above (``=0`` undoes);
  parameters combine; any service's code; answers the quota's row. An unknown code is a 400.

This module's ``wrap_wsgi`` also installs the router for every capacity/quota control endpoint
(see capacity_control.py for why it is here).
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from dataclasses import dataclass
from typing import Any, Callable

from moto.core.exceptions import JsonRESTError
from moto.servicequotas.responses import ServiceQuotasResponse

from . import capacity_control

SERVICE_CODE = "ec2"
SERVICE_NAMES = {
    "ec2": "Amazon Elastic Compute Cloud (Amazon EC2)",
    "sagemaker": "Amazon SageMaker AI",
}
MAX_PAGE = 100


@dataclass(frozen=True)
class Quota:
    code: str
    name: str
    value: float  # EC2: vCPUs (the Capacity Block quotas count the vCPUs of concurrently active blocks too)
    default: float | None = None  # AWS's default (GetAWSDefaultServiceQuota); None: same as value
    service: str = SERVICE_CODE
    verified: bool = True  # the code is AWS's (EC2: docs/aws-facts.md; SageMaker: see the docstring)


# Names as in the EC2 quota tables (docs/aws-facts.md section 6). AWS's own defaults are 0 for the
# GPU/accelerator quotas and 5 for standard instances. The applied values of the older entries are
# what an account for training stacks has (the Rust tests rely on them); their AWS default is 0 where
# the issue lists the code. The Trn/Inf/DL entries are a fresh account's: 0 applied, 0 default
# (tests set them). Trn1/Trn2 Capacity Block names follow the P5 ones (UNVERIFIED wording).
EC2_QUOTAS = (
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


# --- SageMaker ---------------------------------------------------------------------------------

# Codes seen with these names in third-party listings of real accounts (see the docstring).
_SAGEMAKER_CODES = {
    "ml.p4d.24xlarge for cluster usage": "L-47E0BC8F",
    "ml.p4de.24xlarge for cluster usage": "L-BEF3120E",
    "ml.p5.48xlarge for cluster usage": "L-8762A75F",
    "ml.p5e.48xlarge for cluster usage": "L-FD431820",
    "ml.p5en.48xlarge for cluster usage": "L-6EF3AE05",
    "ml.p6-b200.48xlarge for cluster usage": "L-44097F05",
    "ml.p6-b300.48xlarge for cluster usage": "L-9883FE68",
    "ml.p6e-gb200.36xlarge for cluster usage": "L-5DB70460",
    "ml.g6e.4xlarge for cluster usage": "L-9C8CF3DC",
    "ml.g6e.12xlarge for cluster usage": "L-A15DF696",
    "ml.g6e.48xlarge for cluster usage": "L-177AF1AD",
    "ml.c5.9xlarge for cluster usage": "L-9AD1D725",
    "ml.c6i.8xlarge for cluster usage": "L-A0E4DD54",
    "ml.c6i.16xlarge for cluster usage": "L-934B4E57",
    "ml.m6i.4xlarge for cluster usage": "L-A2EAB650",
    "ml.m7i.4xlarge for cluster usage": "L-9AB16BF2",
    "Maximum number instances allowed per SageMaker HyperPod cluster": "L-2CE978FC",
    "Total number of instances allowed across SageMaker HyperPod clusters": "L-3308CCC7",
    "Maximum size of EBS volume in GB for a SageMaker HyperPod cluster instance": "L-E13DF72A",
    "Number of ml.p5.48xlarge instances in reserved capacity across training plans per Region": "L-9EF527CA",
    "Number of training plans per Region": "L-867702E6",
}

CLUSTER_USAGE = "{} for cluster usage"
RESERVED_CAPACITY = "Number of {} instances in reserved capacity across training plans per Region"
PER_CLUSTER = "Maximum number instances allowed per SageMaker HyperPod cluster"
ACROSS_CLUSTERS = "Total number of instances allowed across SageMaker HyperPod clusters"
EBS_VOLUME = "Maximum size of EBS volume in GB for a SageMaker HyperPod cluster instance"
TRAINING_PLANS = "Number of training plans per Region"

# instance type -> (applied value, AWS default) of "<type> for cluster usage"
_CLUSTER_TYPES: dict[str, tuple[float, float]] = {
    **dict.fromkeys(
        ["ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge", "ml.p5e.48xlarge", "ml.p5en.48xlarge"],
        (4.0, 0.0),
    ),
    "ml.p5.4xlarge": (8.0, 0.0),
    "ml.p6-b200.48xlarge": (2.0, 0.0),
    "ml.p6-b300.48xlarge": (0.0, 0.0),
    "ml.p6e-gb200.36xlarge": (0.0, 0.0),
    **dict.fromkeys(["ml.trn1.32xlarge", "ml.trn1n.32xlarge", "ml.trn2.48xlarge"], (4.0, 0.0)),
    **dict.fromkeys(
        [f"ml.g5.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge")],
        (8.0, 0.0),
    ),
    **dict.fromkeys(
        [f"ml.g6e.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge", "48xlarge")],
        (8.0, 0.0),
    ),
    **dict.fromkeys(
        [f"ml.m5.{s}" for s in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge")]
        + [f"ml.c5.{s}" for s in ("large", "xlarge", "2xlarge", "4xlarge", "9xlarge")]
        + ["ml.m6i.4xlarge", "ml.m7i.4xlarge", "ml.c6i.8xlarge", "ml.c6i.16xlarge"]
        + [f"ml.t3.{s}" for s in ("medium", "large", "xlarge", "2xlarge")],
        (16.0, 0.0),
    ),
}
# instance type -> (applied, AWS default) of the reserved-capacity quota. AWS defaults: the values
# a third-party us-west-2 listing reports (p5 0, p5e/p5en/p4d 256, p6-b200 8, p6-b300 0,
# p6e-gb200 18); the others unknown (0).
_RESERVED_TYPES: dict[str, tuple[float, float]] = {
    "ml.p4d.24xlarge": (256.0, 256.0),
    "ml.p4de.24xlarge": (64.0, 0.0),
    "ml.p5.48xlarge": (64.0, 0.0),
    "ml.p5.4xlarge": (64.0, 0.0),
    "ml.p5e.48xlarge": (256.0, 256.0),
    "ml.p5en.48xlarge": (256.0, 256.0),
    "ml.p6-b200.48xlarge": (16.0, 8.0),
    "ml.p6-b300.48xlarge": (0.0, 0.0),
    "ml.p6e-gb200.36xlarge": (18.0, 18.0),
    "ml.trn1.32xlarge": (64.0, 0.0),
    "ml.trn2.48xlarge": (64.0, 0.0),
}


def made_up_code(name: str) -> str:
    """The stable, UNVERIFIED code of a SageMaker quota whose real code is not known here."""
    return "L-" + hashlib.sha256(f"sagemaker|{name}".encode()).hexdigest()[:8].upper()


def _sagemaker(name: str, value: float, default: float) -> Quota:
    code = _SAGEMAKER_CODES.get(name)
    return Quota(code or made_up_code(name), name, value, default, "sagemaker", code is not None)


SAGEMAKER_QUOTAS = (
    *(_sagemaker(CLUSTER_USAGE.format(t), v, d) for t, (v, d) in _CLUSTER_TYPES.items()),
    _sagemaker(PER_CLUSTER, 64.0, 20.0),
    _sagemaker(ACROSS_CLUSTERS, 128.0, 30.0),
    _sagemaker(EBS_VOLUME, 4096.0, 1024.0),
    *(_sagemaker(RESERVED_CAPACITY.format(t), v, d) for t, (v, d) in _RESERVED_TYPES.items()),
    _sagemaker(TRAINING_PLANS, 25.0, 25.0),
)

QUOTAS: dict[str, Quota] = {q.code: q for q in (*EC2_QUOTAS, *SAGEMAKER_QUOTAS)}
if len(QUOTAS) != len(EC2_QUOTAS) + len(SAGEMAKER_QUOTAS):
    raise RuntimeError("duplicate quota code in service_quotas.py")
_BY_NAME: dict[tuple[str, str], Quota] = {(q.service, q.name): q for q in QUOTAS.values()}

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


def quota_named(service: str, name: str) -> Quota | None:
    return _BY_NAME.get((service, name))


def applied(quota: Quota) -> float:
    """The applied value the services enforce (what a test set through the control endpoint)."""
    with _lock:
        return float(_settings[quota.code]["value"])


def _no_such_quota(code: str) -> JsonRESTError:
    return JsonRESTError(
        "NoSuchResourceException", f"The request failed because the specified quota {code} does not exist."
    )


def _shape(response: ServiceQuotasResponse, quota: Quota, value: float, account: str) -> dict[str, Any]:
    """The botocore ``ServiceQuota`` shape."""
    return {
        "ServiceCode": quota.service,
        "ServiceName": SERVICE_NAMES[quota.service],
        "QuotaArn": f"arn:aws:servicequotas:{response.region}:{account}:{quota.service}/{quota.code}",
        "QuotaCode": quota.code,
        "QuotaName": quota.name,
        "Value": float(value),
        "Unit": "None",
        "Adjustable": True,
        "GlobalQuota": False,
    }


def _params(response: ServiceQuotasResponse) -> dict[str, Any]:
    return json.loads(response.body or "{}")


def _request(response: ServiceQuotasResponse) -> tuple[str, str]:
    params = _params(response)
    return str(params.get("ServiceCode")), str(params.get("QuotaCode"))


def _settings_of(service: str, code: str) -> tuple[Quota, dict[str, Any]]:
    quota = QUOTAS.get(code)
    if quota is None or quota.service != service:
        raise _no_such_quota(code)
    with _lock:
        return quota, dict(_settings[code])


def _page(response: ServiceQuotasResponse, items: list[Any]) -> tuple[list[Any], str | None]:
    params = _params(response)
    size = params.get("MaxResults") or MAX_PAGE
    token = params.get("NextToken")
    start = 0
    if token:
        try:
            start = int(base64.b64decode(str(token).encode(), validate=True).decode())
        except (ValueError, UnicodeDecodeError):
            start = -1
        if not 0 <= start <= len(items):
            raise JsonRESTError("InvalidPaginationTokenException", "Invalid pagination token.")
    end = start + int(size)
    following = base64.b64encode(str(end).encode()).decode() if end < len(items) else None
    return items[start:end], following


_moto_get_service_quota: Callable[[ServiceQuotasResponse], str] = ServiceQuotasResponse.get_service_quota
_moto_list_defaults: Callable[[ServiceQuotasResponse], str] = ServiceQuotasResponse.list_aws_default_service_quotas


def _get_service_quota(self: ServiceQuotasResponse) -> str:
    service, code = _request(self)
    if service not in SERVICE_NAMES:
        return _moto_get_service_quota(self)
    quota, settings = _settings_of(service, code)
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
    if service not in SERVICE_NAMES:
        # moto's GetServiceQuota answers its (vpc) AWS defaults, or NoSuchResourceException.
        return json.dumps({"Quota": self.backend.get_service_quota(service, code)})
    quota, settings = _settings_of(service, code)
    return json.dumps({"Quota": _shape(self, quota, settings["default"], "")})


def _list_aws_default_service_quotas(self: ServiceQuotasResponse) -> str:
    service, _ = _request(self)
    if service not in SERVICE_NAMES:
        return _moto_list_defaults(self)
    with _lock:
        rows = [(q, _settings[q.code]["default"]) for q in QUOTAS.values() if q.service == service]
    chunk, token = _page(self, rows)
    out: dict[str, Any] = {"Quotas": [_shape(self, q, value, "") for q, value in chunk]}
    if token:
        out["NextToken"] = token
    return json.dumps(out)


def _list_service_quotas(self: ServiceQuotasResponse) -> str:
    params = _params(self)
    service = str(params.get("ServiceCode"))
    if service not in SERVICE_NAMES:
        raise NotImplementedError(f"ListServiceQuotas for ServiceCode {service} is not emulated")
    wanted = params.get("QuotaCode")
    level = params.get("QuotaAppliedAtLevel") or "ACCOUNT"
    with _lock:
        rows = [
            (q, _settings[q.code]["value"])
            for q in QUOTAS.values()
            if q.service == service
            and not _settings[q.code]["missing"]
            and (wanted is None or q.code == wanted)
            and level != "RESOURCE"
        ]
    chunk, token = _page(self, rows)
    out: dict[str, Any] = {"Quotas": [_shape(self, q, value, self.current_account) for q, value in chunk]}
    if token:
        out["NextToken"] = token
    return json.dumps(out)


# --- control endpoints ---------------------------------------------------------------------------


def _row(code: str) -> dict[str, Any]:
    quota = QUOTAS[code]
    return {"code": code, "name": quota.name, "service": quota.service, **_settings[code]}


@capacity_control.route("GET", "/_gpustack/quotas")
def _control_list(query: dict[str, str]) -> tuple[int, Any]:
    service = query.get("service", SERVICE_CODE)
    if service not in (*SERVICE_NAMES, "all"):
        raise capacity_control.ControlError(f"service must be one of {', '.join(SERVICE_NAMES)}, all; not {service!r}")
    with _lock:
        return 200, {
            "quotas": [_row(code) for code, q in QUOTAS.items() if service in ("all", q.service)]
        }


@capacity_control.route("POST", "/_gpustack/quotas")
def _control_set(query: dict[str, str]) -> tuple[int, Any]:
    code = query.get("code", "")
    if code not in QUOTAS:
        raise capacity_control.ControlError(f"code must be a known quota code (GET /_gpustack/quotas), not {code!r}")
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
    if hasattr(ServiceQuotasResponse, "list_service_quotas"):
        raise RuntimeError("moto already implements ListServiceQuotas; revisit service_quotas.py")
    capacity_control.on_reset(_reset_settings)
    ServiceQuotasResponse.get_service_quota = _get_service_quota  # type: ignore[method-assign]
    ServiceQuotasResponse.get_aws_default_service_quota = _get_aws_default_service_quota  # type: ignore[attr-defined]
    ServiceQuotasResponse.list_aws_default_service_quotas = _list_aws_default_service_quotas  # type: ignore[method-assign]
    ServiceQuotasResponse.list_service_quotas = _list_service_quotas  # type: ignore[attr-defined]


def wrap_wsgi(app: Callable[..., Any]) -> Callable[..., Any]:
    return capacity_control.ControlRouter(app)
