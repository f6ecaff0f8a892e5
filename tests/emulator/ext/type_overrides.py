"""Instance-type facts that differ from moto's, so tests can show an instance catalog that
changed since gpustack's embedded copy was generated (a refreshing plan warns about it).

* ``POST /_gpustack/instance-types?type=p5.48xlarge&max_efa=16&vcpus=96`` -> DescribeInstanceTypes
  reports that type with ``NetworkInfo.EfaInfo.MaximumEfaInterfaces`` and/or
  ``VCpuInfo.DefaultVCpus`` changed; answers ``{"type", "max_efa", "vcpus"}`` as now reported.
* ``POST /_gpustack/instance-types?reset=1`` -> moto's data again; answers ``{"reset": N}``.

Settings are global for the process; moto's reset does not clear them. The module name sorts
after ``request_log`` so its wrapper sees ``/_gpustack/instance-types`` before that module's 404.

``install()`` adds the accelerated types AWS has and moto's copy of ``DescribeInstanceTypes``
lacks (p3, g4ad, dl1): gpustack's embedded catalog takes them from Karpenter's generated
instance-type reference (``from_karpenter`` in ``src/aws/instance_catalog.json``, written by
``tests/emulator/gen_instance_catalog.py``), and the emulator answers for them as AWS does,
with those records. Without it a refreshing plan would call them unknown while ``validate``
knows them.
"""

from __future__ import annotations

import copy
import json
import threading
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs

from pathlib import Path

from moto.ec2.models import instance_types as moto_types
from moto.ec2.models.instance_types import InstanceType, InstanceTypeBackend

CATALOG = Path(__file__).resolve().parents[3] / "src" / "aws" / "instance_catalog.json"

_lock = threading.Lock()
# name -> the fields as moto had them, to restore.
_saved: dict[str, dict[str, Any]] = {}


def _json(start_response: Callable[..., Any], status: str, body: Any) -> Iterable[bytes]:
    data = json.dumps(body).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]


def _find(name: str) -> Any:
    return next((t for t in InstanceTypeBackend.instance_types if t.get("InstanceType") == name), None)


def _override(name: str, max_efa: int | None, vcpus: int | None) -> dict[str, Any] | None:
    t = _find(name)
    if t is None:
        return None
    _saved.setdefault(name, {"NetworkInfo": t.get("NetworkInfo"), "VCpuInfo": t.get("VCpuInfo")})
    # Replace (never mutate) the nested tables: they are shared with moto's module data.
    if max_efa is not None:
        net = copy.deepcopy(t.get("NetworkInfo") or {})
        net.setdefault("EfaInfo", {})["MaximumEfaInterfaces"] = max_efa
        t["NetworkInfo"] = net
    if vcpus is not None:
        cpu = copy.deepcopy(t.get("VCpuInfo") or {})
        cpu["DefaultVCpus"] = vcpus
        t["VCpuInfo"] = cpu
    return {
        "type": name,
        "max_efa": (t.get("NetworkInfo") or {}).get("EfaInfo", {}).get("MaximumEfaInterfaces"),
        "vcpus": (t.get("VCpuInfo") or {}).get("DefaultVCpus"),
    }


def _reset() -> int:
    n = 0
    for name, fields in _saved.items():
        t = _find(name)
        if t is not None:
            t.update(fields)
            n += 1
    _saved.clear()
    return n


def _int(query: dict[str, list[str]], key: str) -> int | None:
    value = (query.get(key) or [None])[0]
    return None if value is None else int(value)


def install() -> None:
    doc = json.loads(CATALOG.read_text())
    supplied = doc.get("from_karpenter", {})
    for record in doc["instance_types"]:
        name = record["InstanceType"]
        if name in supplied and name not in moto_types.INSTANCE_TYPES:
            moto_types.INSTANCE_TYPES[name] = record
            InstanceTypeBackend.instance_types.append(InstanceType(name))


class TypeOverrides:
    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path.rstrip("/") != "/_gpustack/instance-types" or environ.get("REQUEST_METHOD") != "POST":
            return self.app(environ, start_response)
        query = parse_qs(environ.get("QUERY_STRING", ""))
        with _lock:
            if query.get("reset"):
                return _json(start_response, "200 OK", {"reset": _reset()})
            try:
                max_efa, vcpus = _int(query, "max_efa"), _int(query, "vcpus")
            except ValueError:
                return _json(start_response, "400 Bad Request", {"error": "max_efa and vcpus are integers"})
            name = (query.get("type") or [""])[0]
            done = _override(name, max_efa, vcpus)
        if done is None:
            return _json(start_response, "404 Not Found", {"error": f"unknown instance type {name!r}"})
        return _json(start_response, "200 OK", done)


def wrap_wsgi(app: Callable[..., Any]) -> Callable[..., Any]:
    return TypeOverrides(app)
