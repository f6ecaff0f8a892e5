"""What AWS publishes for EKS, as the emulator pretends it: Kubernetes versions, node AMIs and
their release versions, EKS add-on versions. Data only (no ``install``); ``eks.py``,
``eks_addons.py`` and ``ssm_params.py`` share it so that a cluster version, the release an SSM
public parameter names and the AMI it points to always agree.

The values are plausible, not AWS's current ones: the tests need them stable.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

KUBERNETES_VERSIONS = ("1.28", "1.29", "1.30", "1.31", "1.32", "1.33", "1.34")
# CreateCluster without `version` (EKS picks its current default).
DEFAULT_KUBERNETES_VERSION = "1.33"
# The platform version of a new cluster, and of a cluster just upgraded to a new minor version.
PLATFORM_VERSION = "eks.1"

# Bottlerocket: newest release first. SSM `latest` names the first; both are pinned.
BOTTLEROCKET_RELEASES = ("1.57.0-0b6a2b38", "1.56.0-7f3e0a51")
BOTTLEROCKET_FLAVOURS = ("", "-nvidia", "-fips", "-nvidia-fips")
ARCHITECTURES = ("x86_64", "arm64")

# EKS-optimized Amazon Linux AMIs: one release (build date) for every Kubernetes version;
# the release version is "<kubernetes patch>-<date>", e.g. 1.31.13-20251103.
EKS_AMI_BUILD_DATE = "20251103"
KUBERNETES_PATCH = {
    "1.28": "1.28.15",
    "1.29": "1.29.15",
    "1.30": "1.30.14",
    "1.31": "1.31.13",
    "1.32": "1.32.9",
    "1.33": "1.33.5",
    "1.34": "1.34.1",
}
AL2023_FLAVOURS = ("standard", "nvidia")
# AWS publishes no Amazon Linux 2 EKS AMIs after Kubernetes 1.32.
AL2_LAST_VERSION = "1.32"

# What DescribeImages shows as the owner of these AMIs.
AMI_OWNER_ID = "602401143452"
AMI_OWNER_ALIAS = "amazon"
ROOT_DEVICE = "/dev/xvda"


def minor(version: str) -> tuple[int, int]:
    """ "1.31" -> (1, 31); ValueError for anything else."""
    major, _, rest = version.partition(".")
    return int(major), int(rest)


def eks_ami_release(k8s: str) -> str:
    return f"{KUBERNETES_PATCH[k8s]}-{EKS_AMI_BUILD_DATE}"


def has_al2(k8s: str) -> bool:
    return minor(k8s) <= minor(AL2_LAST_VERSION)


def bottlerocket_variant(k8s: str, flavour: str) -> str:
    return f"aws-k8s-{k8s}{flavour}"


@dataclass(frozen=True)
class NodeAmi:
    name: str
    architecture: str  # EC2's: x86_64 or arm64
    description: str

    def image_id(self, region: str) -> str:
        """A stable id per region and name, so SSM and EC2 agree without sharing state."""
        digest = hashlib.sha256(f"{region}/{self.name}".encode()).hexdigest()
        return f"ami-{digest[:17]}"


def bottlerocket_ami(variant: str, arch: str, release: str) -> NodeAmi:
    return NodeAmi(
        name=f"bottlerocket-{variant}-{arch}-v{release}",
        architecture=arch,
        description=f"bottlerocket-{variant}-{arch}-v{release}",
    )


def al2023_ami(k8s: str, arch: str, flavour: str) -> NodeAmi:
    return NodeAmi(
        name=f"amazon-eks-node-al2023-{arch}-{flavour}-{k8s}-v{EKS_AMI_BUILD_DATE}",
        architecture=arch,
        description=f"EKS-optimized Kubernetes node based on Amazon Linux 2023, ({k8s}, {flavour})",
    )


def al2_gpu_ami(k8s: str) -> NodeAmi:
    return NodeAmi(
        name=f"amazon-eks-gpu-node-{k8s}-v{EKS_AMI_BUILD_DATE}",
        architecture="x86_64",
        description=f"EKS Kubernetes Worker AMI with AmazonLinux2 image, (k8s: {KUBERNETES_PATCH[k8s]})",
    )


def node_amis() -> list[NodeAmi]:
    """Every node AMI the SSM public parameters name (registered in every EC2 region)."""
    amis: list[NodeAmi] = []
    for k8s in KUBERNETES_VERSIONS:
        for flavour in BOTTLEROCKET_FLAVOURS:
            for arch in ARCHITECTURES:
                for release in BOTTLEROCKET_RELEASES:
                    amis.append(bottlerocket_ami(bottlerocket_variant(k8s, flavour), arch, release))
        for arch in ARCHITECTURES:
            for al2023 in AL2023_FLAVOURS:
                amis.append(al2023_ami(k8s, arch, al2023))
        if has_al2(k8s):
            amis.append(al2_gpu_ami(k8s))
    return amis


def node_releases(ami_type: str, k8s: str) -> tuple[str, ...]:
    """The release versions a managed node group of ``ami_type`` may run on Kubernetes ``k8s``,
    newest (EKS's default) first; empty when EKS knows none (CUSTOM, or no such AMI)."""
    if k8s not in KUBERNETES_VERSIONS:
        return ()
    if ami_type.startswith("BOTTLEROCKET_"):
        return BOTTLEROCKET_RELEASES
    if ami_type.startswith("AL2023_") or (ami_type.startswith("AL2_") and has_al2(k8s)):
        return (eks_ami_release(k8s),)
    return ()
