"""Generates src/aws/instance_catalog.json: gpustack's embedded, dated instance catalog.

`plan --refresh=false` and `validate` make no AWS call, yet the GPU rules need instance facts
(EFA on a type without it, MIG on an L4, GPU counts). This script reads `DescribeInstanceTypes`
(paged, every type), keeps the GPU, EFA and accelerator types (GpuInfo, EFA support,
InferenceAcceleratorInfo, NeuronInfo, FpgaInfo, MediaAcceleratorInfo), trims each to the
fields `aws/catalog.rs` reads, and writes them with the date and the source.

Source: the local emulator by default (moto's DescribeInstanceTypes data, the same answers the
integration tests get), started here on a free port. `--endpoint URL` reads another endpoint;
with `--endpoint aws` the SDK's normal chain (real AWS, credentials from the environment) is used.

Run:  tests/emulator/.venv/bin/python tests/emulator/gen_instance_catalog.py [--region us-west-2]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import boto3

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
OUT = REPO / "src" / "aws" / "instance_catalog.json"


def keep(t: dict) -> bool:
    """A GPU, EFA or accelerator type."""
    net = t.get("NetworkInfo", {})
    return bool(
        t.get("GpuInfo", {}).get("Gpus")
        or net.get("EfaSupported")
        or t.get("InferenceAcceleratorInfo")
        or t.get("NeuronInfo")
        or t.get("FpgaInfo")
        or t.get("MediaAcceleratorInfo")
    )


def trim(t: dict) -> dict:
    """Only what gpustack reads (aws/catalog.rs InstanceInfo::from_sdk), in DescribeInstanceTypes shape."""
    out: dict = {
        "InstanceType": t["InstanceType"],
        "VCpuInfo": {"DefaultVCpus": t.get("VCpuInfo", {}).get("DefaultVCpus", 0)},
        "ProcessorInfo": {"SupportedArchitectures": t.get("ProcessorInfo", {}).get("SupportedArchitectures", [])},
    }
    gpus = t.get("GpuInfo", {}).get("Gpus", [])
    if gpus:
        out["GpuInfo"] = {
            "Gpus": [
                {
                    k: g[k]
                    for k in ("Name", "Manufacturer", "Count", "LogicalGpuCount", "MemoryInfo")
                    if k in g
                }
                for g in gpus
            ]
        }
    net = t.get("NetworkInfo", {})
    n: dict = {"MaximumNetworkCards": net.get("MaximumNetworkCards", 1), "EfaSupported": bool(net.get("EfaSupported"))}
    if "EfaInfo" in net:
        n["EfaInfo"] = {"MaximumEfaInterfaces": net["EfaInfo"].get("MaximumEfaInterfaces", 0)}
    cards = [
        {k: c[k] for k in ("NetworkCardIndex", "InterfaceTypes") if k in c}
        for c in net.get("NetworkCards", [])
    ]
    if cards:
        n["NetworkCards"] = cards
    out["NetworkInfo"] = n
    for k in ("InferenceAcceleratorInfo", "NeuronInfo"):
        if k in t:
            out[k] = t[k]
    return out


def start_emulator() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "server.py"), "--port", "0"], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    prefix = "GPUSTACK_EMULATOR_READY port="
    if not line.startswith(prefix):
        proc.kill()
        sys.exit(f"the emulator said {line!r}")
    return proc, f"http://127.0.0.1:{line[len(prefix):]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--region", default="us-west-2")
    ap.add_argument("--endpoint", default="emulator", help="'emulator' (default), 'aws', or a URL")
    ap.add_argument("--out", default=str(OUT))
    a = ap.parse_args()

    proc = None
    kwargs: dict = {"region_name": a.region}
    if a.endpoint == "emulator":
        proc, url = start_emulator()
        kwargs.update(endpoint_url=url, aws_access_key_id="test", aws_secret_access_key="test")
        source = "DescribeInstanceTypes of gpustack's local emulator (moto 5.2.5)"
    elif a.endpoint == "aws":
        source = "DescribeInstanceTypes of AWS"
    else:
        kwargs.update(endpoint_url=a.endpoint)
        source = f"DescribeInstanceTypes of {a.endpoint}"
    try:
        ec2 = boto3.client("ec2", **kwargs)
        types = []
        for page in ec2.get_paginator("describe_instance_types").paginate():
            types.extend(page["InstanceTypes"])
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait()

    kept = sorted((trim(t) for t in types if keep(t)), key=lambda t: t["InstanceType"])
    doc = {
        "generated": datetime.date.today().isoformat(),
        "source": f"{source}, region {a.region}; GPU, EFA and accelerator types only",
        "generator": "tests/emulator/gen_instance_catalog.py",
        "region": a.region,
        "instance_types": kept,
    }
    # One type per line: small, and a regenerated file diffs type by type.
    head = {k: v for k, v in doc.items() if k != "instance_types"}
    lines = [json.dumps(head)[:-1] + ', "instance_types": [']
    lines += [" " + json.dumps(t, separators=(",", ":")) + "," for t in kept]
    lines[-1] = lines[-1].rstrip(",")
    lines.append("]}")
    Path(a.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {len(kept)} of {len(types)} instance types to {os.path.relpath(a.out, REPO)}", file=sys.stderr)


if __name__ == "__main__":
    main()
