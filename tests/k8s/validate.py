"""Validates the Kubernetes YAML `gpustack manifests --out DIR` wrote against the real schemas.

Usage: python tests/k8s/validate.py DIR      (the emulator's venv has jsonschema and PyYAML)

Every document of every *.yaml file under DIR is matched to a schema by apiVersion and kind:
Karpenter's NodePool and EC2NodeClass from their CRDs (tests/k8s/crds/, vendored with their
source), PriorityClass from tests/k8s/schemas/. A document with no schema is an error, so a new
rendered kind cannot go unchecked. Helm values files (`values.yaml`) are not Kubernetes objects
and are skipped by name.

Two things the API server does are added, so the check is not weaker than `kubectl apply`:
- fields a schema does not declare are refused (kubectl's default strict field validation;
  a structural CRD schema would prune them silently), unless the schema allows extra keys
  (`additionalProperties`, `x-kubernetes-preserve-unknown-fields`);
- `metadata.name` must be an RFC 1123 subdomain, as for every object.

Not checked: the CRDs' CEL rules (`x-kubernetes-validations`), which jsonschema cannot run;
the Rust unit tests of karpenter_pool check the networkInterfaces ones.

Exit 0 when every document validates, 1 otherwise (one line per problem), 2 on bad usage.
"""

from __future__ import annotations

import copy
import pathlib
import re
import sys

import jsonschema
import yaml

HERE = pathlib.Path(__file__).resolve().parent
NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def strict(schema: object) -> object:
    """A copy of `schema` whose objects with declared properties refuse undeclared ones."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def crd_schemas() -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> the openAPIV3Schema of every served version of every vendored CRD."""
    schemas = {}
    for path in sorted((HERE / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            if version.get("served", True):
                api = f"{group}/{version['name']}"
                schemas[(api, kind)] = strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))
    return schemas


def builtin_schemas() -> dict[tuple[str, str], dict]:
    """(apiVersion, kind) -> the hand-written schemas of built-in kinds (already strict)."""
    schemas = {}
    for path in sorted((HERE / "schemas").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        schemas[(doc["apiVersion"], doc["kind"])] = doc["schema"]
    return schemas


def problems(doc: object, schemas: dict[tuple[str, str], dict]) -> list[str]:
    if not isinstance(doc, dict):
        return [f"not a Kubernetes object: {type(doc).__name__}"]
    key = (doc.get("apiVersion"), doc.get("kind"))
    schema = schemas.get(key)
    if schema is None:
        return [f"no schema for apiVersion {key[0]!r} kind {key[1]!r} (vendor one under tests/k8s/)"]
    found = [
        f"{'/'.join(str(p) for p in e.absolute_path) or '(document)'}: {e.message}"
        for e in sorted(jsonschema.Draft7Validator(schema).iter_errors(doc), key=lambda e: list(e.absolute_path))
    ]
    name = (doc.get("metadata") or {}).get("name")
    if not isinstance(name, str) or len(name) > 253 or not NAME.match(name):
        found.append(f"metadata/name: {name!r} is not an RFC 1123 subdomain")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not pathlib.Path(argv[1]).is_dir():
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root = pathlib.Path(argv[1])
    schemas = {**crd_schemas(), **builtin_schemas()}
    failed, checked = 0, 0
    for path in sorted(root.rglob("*.yaml")):
        rel = path.relative_to(root)
        if path.name == "values.yaml":
            print(f"skip {rel}: Helm values, not Kubernetes objects")
            continue
        for i, doc in enumerate(d for d in yaml.safe_load_all(path.read_text()) if d is not None):
            checked += 1
            where = f"{rel}#{i + 1}"
            found = problems(doc, schemas)
            for p in found:
                print(f"FAIL {where}: {p}")
            if found:
                failed += 1
            else:
                print(f"ok   {where}: {doc['kind']} {doc['metadata']['name']}")
    if checked == 0:
        print(f"no Kubernetes documents under {root}")
        return 1
    print(f"{checked - failed} of {checked} document(s) valid")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
