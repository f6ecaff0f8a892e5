"""SSM public parameters for EKS node AMIs, and the AMIs they name.

moto 5.2.5 serves a few ``/aws/service/...`` trees (``ami-amazon-linux-latest``, ``ecs``,
``global-infrastructure``) by loading them into an account's ``ParameterDict`` the first time a
name or path under them is asked for (``ParameterDict._check_loading_status``). This adds two
trees the same way, so GetParameter, GetParameters and GetParametersByPath work on them as on
any parameter, and an unknown name under ``/aws/service/`` stays ``ParameterNotFound`` (400):

* ``/aws/service/bottlerocket/aws-k8s-<k8s><flavour>/<arch>/latest/image_id`` and
  ``.../latest/image_version``, and pinned ``.../<version>/image_id`` and ``.../image_version``
  (``<version>`` both as ``1.57.0-0b6a2b38`` and as ``1.57.0``), for Kubernetes 1.28-1.34,
  flavours ``""``, ``-nvidia``, ``-fips``, ``-nvidia-fips``, arch ``x86_64`` and ``arm64``.
* ``/aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/<arch>/{standard,nvidia}/recommended/``
  ``release_version`` and ``image_id``, and ``.../<k8s>/amazon-linux-2-gpu/recommended/...`` for
  Kubernetes up to 1.32 (AWS publishes no AL2 AMIs after that).

Every ``image_id`` is an AMI registered in moto's EC2 backend of that region (so RunInstances
takes it): name e.g. ``bottlerocket-aws-k8s-1.31-nvidia-x86_64-v1.57.0-0b6a2b38``, its
architecture, root device ``/dev/xvda``, public, owner alias ``amazon``. Ids are derived from
region and name (``eks_catalog.NodeAmi.image_id``), so they survive ``POST /moto-api/reset``.
"""

from __future__ import annotations

import threading

from collections import defaultdict
from datetime import datetime, timezone
from typing import Any

from moto.ec2.models.amis import Ami, AmiBackend
from moto.ssm.models import Parameter, ParameterDict

from . import eks_catalog as cat

BOTTLEROCKET_ROOT = "/aws/service/bottlerocket"
EKS_AMI_ROOT = "/aws/service/eks/optimized-ami"
ROOTS = (BOTTLEROCKET_ROOT, EKS_AMI_ROOT)
# A path at least this deep may hold our trees (GetParametersByPath on "/aws/service").
PUBLIC_ROOT = "/aws/service"
PUBLISHED = datetime(2025, 11, 3, 18, 0, tzinfo=timezone.utc)


def public_parameters(region: str) -> dict[str, str]:
    """name -> value of every parameter this module adds, for ``region``."""
    params: dict[str, str] = {}
    for k8s in cat.KUBERNETES_VERSIONS:
        for flavour in cat.BOTTLEROCKET_FLAVOURS:
            variant = cat.bottlerocket_variant(k8s, flavour)
            for arch in cat.ARCHITECTURES:
                base = f"{BOTTLEROCKET_ROOT}/{variant}/{arch}"
                for i, release in enumerate(cat.BOTTLEROCKET_RELEASES):
                    image = cat.bottlerocket_ami(variant, arch, release).image_id(region)
                    dirs = [release, release.split("-")[0]] + (["latest"] if i == 0 else [])
                    for d in dirs:
                        params[f"{base}/{d}/image_id"] = image
                        params[f"{base}/{d}/image_version"] = release
        release = cat.eks_ami_release(k8s)
        for arch in cat.ARCHITECTURES:
            for flavour in cat.AL2023_FLAVOURS:
                base = f"{EKS_AMI_ROOT}/{k8s}/amazon-linux-2023/{arch}/{flavour}/recommended"
                params[f"{base}/release_version"] = release
                params[f"{base}/image_id"] = cat.al2023_ami(k8s, arch, flavour).image_id(region)
        if cat.has_al2(k8s):
            base = f"{EKS_AMI_ROOT}/{k8s}/amazon-linux-2-gpu/recommended"
            params[f"{base}/release_version"] = release
            params[f"{base}/image_id"] = cat.al2_gpu_ami(k8s).image_id(region)
    return params


def _asks_for_ours(key: str) -> bool:
    """True when a GetParameter name or GetParametersByPath path can reach our trees."""
    return any(
        key.startswith(root) or (key.startswith(PUBLIC_ROOT) and root.startswith(key)) for root in ROOTS
    )


_orig_check_loading_status = ParameterDict._check_loading_status


_load_lock = threading.Lock()


def _check_loading_status(self: ParameterDict, key: str) -> None:
    _orig_check_loading_status(self, key)
    key = str(key or "")
    if getattr(self, "gpustack_public_loaded", False) or not _asks_for_ours(key):
        return
    # Two concurrent GetParameter calls (two node groups starting together) must not see the
    # flag set before the parameters are in: load under a lock, set the flag last.
    with _load_lock:
        if getattr(self, "gpustack_public_loaded", False):
            return
        _load_public(self)
        self.gpustack_public_loaded = True  # type: ignore[attr-defined]


def _load_public(self: ParameterDict) -> None:
    for name, value in public_parameters(self.region_name).items():
        # defaultdict's own __getitem__: ParameterDict's would recurse into this loader.
        defaultdict.__getitem__(self, name).append(
            Parameter(
                account_id=self.account_id,
                name=name,
                value=value,
                parameter_type="String",
                description=None,
                allowed_pattern=None,
                keyid=None,
                last_modified_date=PUBLISHED,
                version=1,
                data_type="text",
            )
        )


_orig_load_amis = AmiBackend._load_amis


def _load_amis(self: Any) -> None:
    _orig_load_amis(self)
    region = self.region_name
    for spec in cat.node_amis():
        ami_id = spec.image_id(region)
        self.amis[ami_id] = Ami(
            self,
            ami_id,
            name=spec.name,
            description=spec.description,
            owner_id=cat.AMI_OWNER_ID,
            owner_alias=cat.AMI_OWNER_ALIAS,
            public=True,
            virtualization_type="hvm",
            architecture=spec.architecture,
            creation_date=PUBLISHED,
            image_location=f"{cat.AMI_OWNER_ALIAS}/{spec.name}",
            hypervisor="xen",
            root_device_type="ebs",
            root_device_name=cat.ROOT_DEVICE,
        )


def install() -> None:
    ParameterDict._check_loading_status = _check_loading_status  # type: ignore[method-assign]
    AmiBackend._load_amis = _load_amis  # type: ignore[method-assign]
