"""The AWS Price List Query API (``pricing``): GetProducts for ``AmazonEC2`` instances, answered from
``tests/emulator/data/prices.json`` (a small slice of real On-Demand rates, each with its source).

moto 5.2.5 has no ``pricing`` service (docs/aws-facts-pricing-capacity.md section 8). The AWS SDKs
send JSON 1.1 (``X-Amz-Target: AWSPriceListService.GetProducts``, SigV4 scope ``pricing``, botocore
``pricing/2017-10-15``); this module's middleware answers those requests itself, after the request
passed ``param_validation`` against the botocore model (``ServiceCode`` required, ``Filters`` 0-50
items of ``{Type, Field, Value}`` all required, ``Type`` in ``TERM_MATCH``/``EQUALS``/``CONTAINS``/
``ANY_OF``/``NONE_OF``, ``Field``/``Value`` 1-1024 characters, ``FormatVersion`` 1-32,
``MaxResults`` 1-100: a violation is 400 ``ValidationException``).

Beyond the model, as the service documents it (botocore doc strings, Billing UG "Using the AWS
Price List Query API"):

* ``FormatVersion``: only ``aws_v1`` exists; another value is ``InvalidParameterException``.
* ``ServiceCode``: only ``AmazonEC2`` is served here; another code is ``NotFoundException``
  (an emulator limit: AWS serves other services).
* ``Field``: "Valid values include: ServiceCode, and all attribute names" -> a field that is
  neither is ``InvalidParameterException`` (AWS's exact answer to an unknown field is UNVERIFIED;
  the emulator refuses rather than silently match nothing). Field names match case-insensitively
  (Karpenter filters ``serviceCode`` and ``capacitystatus`` against the attributes ``servicecode``
  and ``capacitystatus``).
* ``TERM_MATCH`` and ``EQUALS``: the attribute equals the value; ``CONTAINS``: substring;
  ``ANY_OF``/``NONE_OF``: the value is a comma-separated list (that encoding is UNVERIFIED).
* ``NextToken``: opaque, tied to the query it came from; another query's or a forged token is
  ``InvalidNextTokenException``. Pages hold ``MaxResults`` items (default 100, UNVERIFIED).

Each ``PriceList`` item is a JSON document in a string, in the layout of the botocore GetProducts
example (``examples-1.json``): ``product`` (``productFamily``, ``attributes``, ``sku``),
``serviceCode``, ``terms.OnDemand.<sku>.<sku>.JRTCKXETXF.priceDimensions.<rate>`` with ``unit``
``Hrs`` and ``pricePerUnit.USD`` a decimal string, ``version``, ``publicationDate``. Each type and
region has its real row (Linux, Shared, ``capacitystatus`` ``Used``, ``marketoption`` ``OnDemand``,
``preInstalledSw`` ``NA``) and decoys a careless query would also match: the
``UnusedCapacityReservation`` and ``AllocatedCapacityReservation`` rows (same rate), a Windows row
a Dedicated-tenancy row and a Linux row with ``preInstalledSw`` ``SQL Web`` (synthetic rates, 1.5x,
1.1x and 1.3x: not AWS data), so a client must send
the filters to get one price.

Throttling: GetProducts has a token bucket of 10 requests refilled at 5 a second, per account and
Region (AWS Billing UG ``using-pelong``, "Quotas"; the Region is the endpoint's: the Price List
Query API has endpoints in us-east-1, eu-central-1 and ap-south-1 whatever region is priced). The
emulator keeps one bucket per endpoint Region (the SigV4 credential scope's) and answers a request
that finds it empty with 400 ``ThrottlingException`` (an error GetProducts declares in botocore).
Endpoint regions: the Price List Query API exists only where botocore ``endpoints.json`` lists
an ``api.pricing`` endpoint (``aws``: us-east-1, eu-central-1, ap-south-1; ``aws-cn``:
cn-northwest-1; and the isolated partitions' one region each). A client that signs for another
region (the SDK's default ``Client::new`` for a us-west-2 stack) would reach no endpoint in AWS;
the emulator, which serves every region at one address, refuses such a request with 400
``InvalidSignatureException`` "Credential should be scoped to a valid region" (the wording of
AWS's SigV4 scope refusal; that AWS answers a wrongly scoped pricing request with exactly this
code is UNVERIFIED: in AWS the host ``api.pricing.<region>`` simply does not exist).

Control endpoint: ``GET /_gpustack/prices`` -> the data file's content (tests compute expected
costs from it).
"""

from __future__ import annotations

import base64
import hashlib
import json
import pathlib
import re
import threading
import time
from decimal import Decimal
from functools import lru_cache
from typing import Any, Callable, Iterable

from . import param_validation

TARGET_PREFIX = "AWSPriceListService."
DATA = pathlib.Path(__file__).resolve().parent.parent / "data" / "prices.json"
CONTROL_PATH = "/_gpustack/prices"
FORMAT_VERSION = "aws_v1"
DEFAULT_PAGE = 100
FILTER_TYPES = ("TERM_MATCH", "EQUALS", "CONTAINS", "ANY_OF", "NONE_OF")
PUBLICATION = "2026-07-20T13:44:30Z"
# GetProducts: "Bucket size 10, refill rate 5 per second" (Billing UG ``using-pelong``, Quotas).
BUCKET_SIZE = 10.0
REFILL_PER_SECOND = 5.0
_BUCKETS: dict[str, tuple[float, float]] = {}
_BUCKETS_LOCK = threading.Lock()
_SCOPE = re.compile(r"Credential=[^/]+/\d{8}/([a-z0-9-]+)/")


def take_token(region: str, now: float | None = None) -> bool:
    """Takes one GetProducts token of ``region``'s bucket; False: the bucket is empty."""
    now = time.monotonic() if now is None else now
    with _BUCKETS_LOCK:
        tokens, at = _BUCKETS.get(region, (BUCKET_SIZE, now))
        tokens = min(BUCKET_SIZE, tokens + (now - at) * REFILL_PER_SECOND)
        if tokens < 1.0:
            _BUCKETS[region] = (tokens, now)
            return False
        _BUCKETS[region] = (tokens - 1.0, now)
        return True
VERSION = "20260720134430"
ON_DEMAND_TERM = "JRTCKXETXF"  # the On-Demand offer term code in the botocore example
RATE_CODE = "6YS6EN2CT7"

# Region codes -> the Price List's ``location`` (display names as the Price List writes them).
LOCATIONS = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-2": "US West (Oregon)",
}


@lru_cache(maxsize=1)
def data() -> dict[str, Any]:
    return json.loads(DATA.read_text())


def _sku(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16].upper()


def _row(region: str, instance_type: str, usd: Decimal, **over: str) -> dict[str, Any]:
    attrs = {
        "servicecode": "AmazonEC2",
        "servicename": "Amazon Elastic Compute Cloud",
        "location": LOCATIONS.get(region, region),
        "locationType": "AWS Region",
        "regionCode": region,
        "instanceType": instance_type,
        "instanceFamily": "GPU instance" if instance_type[0] in "gp" else "General purpose",
        "operatingSystem": "Linux",
        "licenseModel": "No License required",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
        "marketoption": "OnDemand",
        "usagetype": f"BoxUsage:{instance_type}",
        "operation": "RunInstances",
    }
    attrs.update(over)
    sku = _sku(region, instance_type, *sorted(over.values()))
    term = f"{sku}.{ON_DEMAND_TERM}"
    rate = f"{term}.{RATE_CODE}"
    price = f"{usd:.10f}"
    return {
        "product": {"productFamily": "Compute Instance", "attributes": attrs, "sku": sku},
        "serviceCode": "AmazonEC2",
        "terms": {
            "OnDemand": {
                term: {
                    "priceDimensions": {
                        rate: {
                            "unit": "Hrs",
                            "endRange": "Inf",
                            "description": f"${usd:.4f} per On Demand {attrs['operatingSystem']} {instance_type} Instance Hour",
                            "appliesTo": [],
                            "rateCode": rate,
                            "beginRange": "0",
                            "pricePerUnit": {"USD": price},
                        }
                    },
                    "sku": sku,
                    "effectiveDate": "2026-07-01T00:00:00Z",
                    "offerTermCode": ON_DEMAND_TERM,
                    "termAttributes": {},
                }
            }
        },
        "version": VERSION,
        "publicationDate": PUBLICATION,
    }


@lru_cache(maxsize=1)
def products() -> tuple[dict[str, Any], ...]:
    rows = []
    for region, types in sorted(data()["on_demand"].items()):
        for instance_type, entry in sorted(types.items()):
            usd = Decimal(entry["usd"])
            rows.append(_row(region, instance_type, usd))
            for status in ("UnusedCapacityReservation", "AllocatedCapacityReservation"):
                rows.append(_row(region, instance_type, usd, capacitystatus=status))
            rows.append(_row(region, instance_type, usd * Decimal("1.5"), operatingSystem="Windows"))
            rows.append(_row(region, instance_type, usd * Decimal("1.1"), tenancy="Dedicated"))
            # Linux with SQL Server Web pre-installed: same OS, so only ``preInstalledSw`` NA
            # leaves it out (synthetic rate, 1.3x: not AWS data).
            rows.append(_row(region, instance_type, usd * Decimal("1.3"), preInstalledSw="SQL Web", licenseModel="License included"))
    return tuple(rows)


@lru_cache(maxsize=1)
def attribute_names() -> dict[str, str]:
    """lower-case field name -> the attribute's name (plus ``ServiceCode``)."""
    names = {"servicecode": "servicecode"}
    for row in products():
        for name in row["product"]["attributes"]:
            names[name.lower()] = name
    names["productfamily"] = "productFamily"
    return names


class PricingError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _value_of(row: dict[str, Any], field: str) -> str | None:
    if field == "productFamily":
        return row["product"]["productFamily"]
    return row["product"]["attributes"].get(field)


def _matches(row: dict[str, Any], f: dict[str, str]) -> bool:
    actual = _value_of(row, attribute_names()[f["Field"].lower()])
    kind, want = f["Type"], f["Value"]
    if actual is None:
        return kind == "NONE_OF"
    if kind in ("TERM_MATCH", "EQUALS"):
        return actual == want
    if kind == "CONTAINS":
        return want in actual
    values = [v.strip() for v in want.split(",")]
    return (actual in values) == (kind == "ANY_OF")


def _token(query: str, offset: int) -> str:
    raw = json.dumps({"q": query, "o": offset}).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _offset(token: str, query: str) -> int:
    try:
        parsed = json.loads(base64.urlsafe_b64decode(token.encode()))
        if parsed["q"] == query and isinstance(parsed["o"], int) and parsed["o"] >= 0:
            return parsed["o"]
    except (ValueError, KeyError, TypeError):
        pass
    raise PricingError("InvalidNextTokenException", "The next token is invalid or expired.")


@lru_cache(maxsize=1)
def endpoint_regions() -> frozenset[str]:
    """The regions with an ``api.pricing`` endpoint in botocore ``endpoints.json``, every partition."""
    import botocore

    path = pathlib.Path(botocore.__file__).resolve().parent / "data" / "endpoints.json"
    doc = json.loads(path.read_text())
    return frozenset(
        region
        for partition in doc["partitions"]
        for region in partition["services"].get("api.pricing", {}).get("endpoints", {})
    )


def scope_region(environ: dict[str, Any]) -> str | None:
    """The region of the request's SigV4 credential scope (``Credential=AKID/date/REGION/pricing/aws4_request``)."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    marker = "Credential="
    if marker not in auth:
        return None
    parts = auth.split(marker, 1)[1].split(",", 1)[0].strip().split("/")
    return parts[-3] if len(parts) >= 5 and parts[-1] == "aws4_request" else None


def get_products(params: dict[str, Any]) -> dict[str, Any]:
    fmt = params.get("FormatVersion", FORMAT_VERSION)
    if fmt != FORMAT_VERSION:
        raise PricingError("InvalidParameterException", f"Invalid FormatVersion {fmt}: the only format is {FORMAT_VERSION}.")
    service = params["ServiceCode"]
    if service != "AmazonEC2":
        raise PricingError("NotFoundException", f"Service {service} not found (the emulator serves AmazonEC2 only).")
    filters = params.get("Filters") or []
    for f in filters:
        if f["Field"].lower() not in attribute_names():
            raise PricingError(
                "InvalidParameterException",
                f"Invalid filter field {f['Field']}: valid fields are ServiceCode and the attribute names of {service}.",
            )
    query = hashlib.sha256(json.dumps([service, filters], sort_keys=True).encode()).hexdigest()
    offset = _offset(params["NextToken"], query) if params.get("NextToken") else 0
    size = params.get("MaxResults", DEFAULT_PAGE)
    found = [r for r in products() if all(_matches(r, f) for f in filters)]
    page = found[offset : offset + size]
    out: dict[str, Any] = {"FormatVersion": fmt, "PriceList": [json.dumps(r) for r in page]}
    if offset + size < len(found):
        out["NextToken"] = _token(query, offset + size)
    return out


OPERATIONS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {"GetProducts": get_products}


def _answer(start_response: Callable[..., Any], status: str, body: Any, extra: list[tuple[str, str]] | None = None) -> Iterable[bytes]:
    raw = json.dumps(body).encode()
    headers = [("Content-Type", "application/x-amz-json-1.1"), ("Content-Length", str(len(raw)))]
    start_response(status, headers + (extra or []))
    return [raw]


class PricingApp:
    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("PATH_INFO") == CONTROL_PATH and environ.get("REQUEST_METHOD") == "GET":
            return _answer(start_response, "200 OK", data())
        target = environ.get("HTTP_X_AMZ_TARGET", "")
        if not target.startswith(TARGET_PREFIX):
            return self.app(environ, start_response)
        region = scope_region(environ)
        if region is not None and region not in endpoint_regions():
            return _answer(
                start_response,
                "400 Bad Request",
                {
                    "__type": "InvalidSignatureException",
                    "message": f"Credential should be scoped to a valid region, not '{region}'. "
                    f"The Price List Query API has endpoints in {', '.join(sorted(endpoint_regions()))} only.",
                },
                [("x-amzn-ErrorType", "InvalidSignatureException")],
            )
        refused = param_validation.validate(environ, start_response)
        if refused is not None:
            return refused
        name = target[len(TARGET_PREFIX) :]
        handler = OPERATIONS.get(name)
        if handler is None:
            # In the model but not emulated (DescribeServices, GetAttributeValues, …).
            return _answer(
                start_response,
                "501 Not Implemented",
                {"__type": "NotImplemented", "message": f"pricing {name} is not implemented by the emulator"},
                [("x-amzn-ErrorType", "NotImplemented")],
            )
        body = param_validation._read_body(environ)
        params = json.loads(body) if body.strip() else {}
        scope = _SCOPE.search(environ.get("HTTP_AUTHORIZATION", ""))
        if not take_token(scope.group(1) if scope else "us-east-1"):
            return _answer(
                start_response,
                "400 Bad Request",
                {"__type": "ThrottlingException", "Message": "Rate exceeded"},
                [("x-amzn-ErrorType", "ThrottlingException")],
            )
        try:
            return _answer(start_response, "200 OK", handler(params))
        except PricingError as e:
            return _answer(
                start_response,
                "400 Bad Request",
                {"__type": e.code, "Message": e.message},
                [("x-amzn-ErrorType", e.code)],
            )


def install() -> None:
    param_validation.SERVICES["pricing"] = "pricing"


def wrap_wsgi(app: Callable[..., Any]) -> Callable[..., Any]:
    return PricingApp(app)
