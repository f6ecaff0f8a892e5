"""Whether a managed node group's instances would join the cluster, and the upgrade rule for
Capacity Block node groups. Used by ``eks.py`` (CreateNodegroup, UpdateNodegroupVersion).

EKS accepts a node group whose nodes can never join: the instances boot, fail, and after EKS's
timeout the node group is ``CREATE_FAILED`` with the health issue ``NodeCreationFailure``
"Instances failed to join the kubernetes cluster" (EKS User Guide, "Troubleshoot problems with
Amazon EKS clusters and nodes" / managed node group health issues). The emulator models that:
the reasons below are decided when the request is made (from the network and the launch template
as they are then: a dependency the engine must order before the node group), and show when the
node group's timer ends: ``CREATE_FAILED`` after a create, ``DEGRADED`` after a version update
(whose update then ends ``Failed`` with the same error), with
``health.issues = [{"code": "NodeCreationFailure", "message": "Instances failed to join the
kubernetes cluster: <why>", "resourceIds": [...]}]``.

Why nodes do not join, as modelled:

* No egress (``vpc_network.egress``): a node needs ECR, EC2, STS and S3. A subnet has egress when
  its route table (the explicitly associated one, else the VPC's main table) sends 0.0.0.0/0 to an
  attached internet gateway and the subnet maps public IPv4 addresses on launch and the launch
  template has at most one network interface (EC2 User Guide, efa-acc-inst-types: EC2 does not
  auto-assign a public IPv4 address to an instance launched with several network interfaces); or
  0.0.0.0/0 goes to an available NAT gateway; or the VPC has interface endpoints with private DNS
  for ecr.api, ecr.dkr, ec2 and sts in that subnet and an s3 gateway endpoint on its route table
  (EKS User Guide, "Deploy private clusters with limited internet access"). Simplification:
  interface endpoints must list the subnet itself (AWS reaches an endpoint in any subnet of the
  VPC over the local route), which is stricter than AWS for a VPC with endpoints in some subnets
  only.
* DNS: the cluster has ``endpointPrivateAccess`` and the VPC lacks ``enableDnsHostnames`` or
  ``enableDnsSupport``: nodes cannot resolve the private endpoint (EKS User Guide,
  cluster-endpoint: "your VPC must have enableDnsHostnames and enableDnsSupport set to true").
* Bottlerocket user data (AMI type ``BOTTLEROCKET_*``, or ``CUSTOM`` with a Bottlerocket AMI):
  real AWS does not validate user data at CreateLaunchTemplate; Bottlerocket rejects bad settings
  at boot and the node never joins. The template's ``UserData`` must be base64 TOML (not MIME
  multipart: Bottlerocket takes TOML only, Bottlerocket docs "Settings"/EKS UG
  launch-templates "Bottlerocket"), and the settings gpustack writes must have Bottlerocket's types
  (Bottlerocket settings reference, kubelet-device-plugins and kubernetes):
  ``settings.kubelet-device-plugins.nvidia.device-sharing-strategy`` none|time-slicing|mps,
  ``device-partitioning-strategy`` none|mig, ``time-slicing.replicas`` an integer >= 2,
  ``mps.replicas`` an integer 2-48, ``mig.profile`` a table of strings (``"h100.80gb" = 4`` is
  refused; ``"4"`` or ``"1g.10gb"`` are fine), ``settings.kubernetes.node-labels`` string values,
  ``node-taints`` values lists of ``"value:Effect"`` strings (Effect NoSchedule, PreferNoSchedule
  or NoExecute).

* AL2023 user data (AMI type ``AL2023_*``): EKS merges its own NodeConfig with the template's
  user data, which must be MIME multi-part (EKS UG launch-templates, "Amazon EC2 user data": for
  Amazon Linux AMIs "user data must be in the MIME multi-part format"); each part of content type
  ``application/node.eks.aws`` must hold a nodeadm ``NodeConfig`` (``apiVersion:
  node.eks.aws/v1alpha1``, ``kind: NodeConfig``) whose ``spec.instance.localStorage.strategy``,
  if any, is ``RAID0``, ``RAID10`` or ``Mount`` (awslabs/amazon-eks-ami ``nodeadm/doc/api.md``);
  nodeadm fails at boot otherwise and the node never joins. Assumption: "not MIME → the node
  fails" follows the UG sentence only; nodeadm itself falls back to a bare NodeConfig
  (``configprovider/mime.go``, ``ParseMaybeMultipart``), and where EKS would refuse non-MIME
  user data is not sourced.

Capacity Blocks: ``UpdateNodegroupVersion`` of a ``CAPACITY_BLOCK`` node group whose desired size
is above 0 is ``InvalidRequestException`` (EKS User Guide, capacity-blocks-mng: "set the desired
size to 0 when upgrading"; a block has no spare instances for a rolling update).
"""

from __future__ import annotations

import base64
import binascii
import email
import tomllib
from typing import Any

from moto.eks.exceptions import InvalidRequestException

from . import vpc_network

JOIN_FAILED = "Instances failed to join the kubernetes cluster"
ISSUE_CODE = "NodeCreationFailure"
SHARING = ("none", "time-slicing", "mps")
PARTITIONING = ("none", "mig")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
MPS_MAX = 48


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def bottlerocket_errors(user_data_b64: Any) -> list[str]:
    """Why Bottlerocket would refuse this user data at boot (empty: it would not). The user data is
    base64 text, or moto's ``Base64EncodedString`` (which keeps the text in ``as_bytes()``)."""
    if hasattr(user_data_b64, "as_bytes"):
        user_data_b64 = user_data_b64.as_bytes()
    try:
        raw = base64.b64decode(user_data_b64, validate=True)
    except (binascii.Error, ValueError):
        return ["user data is not base64"]
    text = raw.decode("utf-8", "replace")
    head = text.lstrip()[:200].lower()
    if head.startswith("mime-version") or "content-type: multipart" in head:
        return ["user data is MIME multipart; Bottlerocket takes TOML settings only"]
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        return [f"user data is not valid TOML ({e})"]
    errors: list[str] = []
    settings = doc.get("settings", {})
    if not isinstance(settings, dict):
        return ["settings must be a table"]
    nvidia = settings.get("kubelet-device-plugins", {}).get("nvidia", {})
    if isinstance(nvidia, dict):
        prefix = "settings.kubelet-device-plugins.nvidia"
        sharing = nvidia.get("device-sharing-strategy")
        if sharing is not None and sharing not in SHARING:
            errors.append(
                f"{prefix}.device-sharing-strategy must be one of {'|'.join(SHARING)}, not {sharing!r}"
            )
        partitioning = nvidia.get("device-partitioning-strategy")
        if partitioning is not None and partitioning not in PARTITIONING:
            errors.append(
                f"{prefix}.device-partitioning-strategy must be one of {'|'.join(PARTITIONING)}, not {partitioning!r}"
            )
        replicas = nvidia.get("time-slicing", {}).get("replicas")
        if replicas is not None and not (_is_int(replicas) and replicas >= 2):
            errors.append(f"{prefix}.time-slicing.replicas must be an integer >= 2, not {replicas!r}")
        replicas = nvidia.get("mps", {}).get("replicas")
        if replicas is not None and not (_is_int(replicas) and 2 <= replicas <= MPS_MAX):
            errors.append(f"{prefix}.mps.replicas must be an integer from 2 to {MPS_MAX}, not {replicas!r}")
        profile = nvidia.get("mig", {}).get("profile")
        if profile is not None:
            if not isinstance(profile, dict):
                errors.append(f"{prefix}.mig.profile must be a table of strings")
            else:
                for gpu, value in profile.items():
                    if not isinstance(value, str):
                        errors.append(f"{prefix}.mig.profile.{gpu!r} must be a string, not {value!r}")
    kubernetes = settings.get("kubernetes", {})
    if isinstance(kubernetes, dict):
        for key, value in (kubernetes.get("node-labels") or {}).items():
            if not isinstance(value, str):
                errors.append(f"settings.kubernetes.node-labels.{key!r} must be a string, not {value!r}")
        for key, value in (kubernetes.get("node-taints") or {}).items():
            values = value if isinstance(value, list) else [value]
            for taint in values:
                if (
                    not isinstance(value, list)
                    or not isinstance(taint, str)
                    or taint.rpartition(":")[2] not in EFFECTS
                ):
                    errors.append(
                        f'settings.kubernetes.node-taints.{key!r} must be a list of "value:Effect" strings '
                        f"(Effect {'|'.join(EFFECTS)}), not {value!r}"
                    )
                    break
    return errors


LOCAL_STORAGE = ("RAID0", "RAID10", "Mount")


def al2023_errors(user_data_b64: Any) -> list[str]:
    """Why nodeadm would refuse the user data of an AL2023 node (see the module docstring)."""
    import yaml

    if hasattr(user_data_b64, "as_bytes"):
        user_data_b64 = user_data_b64.as_bytes()
    try:
        raw = base64.b64decode(user_data_b64, validate=True)
    except (binascii.Error, ValueError):
        return ["user data is not base64"]
    message = email.message_from_bytes(raw)
    if not message.is_multipart():
        return ["user data is not MIME multi-part; AL2023 managed nodes take MIME only"]
    errors: list[str] = []
    for part in message.walk():
        if part.get_content_type() != "application/node.eks.aws":
            continue
        try:
            docs = [d for d in yaml.safe_load_all(part.get_payload(decode=True) or b"") if d is not None]
        except yaml.YAMLError as e:
            errors.append(f"a NodeConfig part is not YAML: {e}")
            continue
        for doc in docs:
            if not isinstance(doc, dict) or doc.get("apiVersion") != "node.eks.aws/v1alpha1" or doc.get("kind") != "NodeConfig":
                errors.append("a node.eks.aws part holds something other than a node.eks.aws/v1alpha1 NodeConfig")
                continue
            storage = ((doc.get("spec") or {}).get("instance") or {}).get("localStorage") or {}
            if "strategy" in storage and storage["strategy"] not in LOCAL_STORAGE:
                errors.append(f"localStorage.strategy {storage['strategy']!r} is not one of {'|'.join(LOCAL_STORAGE)}")
    return errors


def _bottlerocket(ec2: Any, ami_type: str, template_data: dict[str, Any]) -> bool:
    if ami_type.startswith("BOTTLEROCKET_"):
        return True
    image_id = template_data.get("ImageId")
    if ami_type == "CUSTOM" and image_id:
        image = ec2.amis.get(image_id)
        return image is not None and str(image.name or "").startswith("bottlerocket-")
    return False


def join_failure(
    ec2: Any, cluster: Any, subnet_ids: list[str], ami_type: str, template_data: dict[str, Any]
) -> str | None:
    """The health-issue message if the node group's instances would not join, else None."""
    reasons: list[str] = []
    user_data = template_data.get("UserData")
    if user_data and _bottlerocket(ec2, ami_type, template_data):
        reasons += [f"Bottlerocket rejected the user data: {e}" for e in bottlerocket_errors(user_data)]
    if user_data and ami_type.startswith("AL2023_"):
        reasons += [f"nodeadm rejected the user data: {e}" for e in al2023_errors(user_data)]
    config = cluster.resources_vpc_config or {}
    if config.get("endpointPrivateAccess") and config.get("vpcId"):
        vpc = ec2.get_vpc(config["vpcId"])
        if not vpc_network.dns_ok(vpc):
            reasons.append(
                f"the cluster endpoint is private and {vpc.id} lacks enableDnsHostnames or enableDnsSupport, "
                "so nodes cannot resolve it"
            )
    interfaces = max(1, len(template_data.get("NetworkInterfaces") or []))
    for subnet_id in subnet_ids or []:
        why = vpc_network.egress(ec2, subnet_id, interfaces)
        if why:
            reasons.append(why)
    if not reasons:
        return None
    return f"{JOIN_FAILED}: " + "; ".join(reasons)


def issue(message: str, nodegroup: Any) -> dict[str, Any]:
    """A botocore ``Issue`` (node group health)."""
    return {"code": ISSUE_CODE, "message": message, "resourceIds": [nodegroup.nodegroup_name]}


def check_capacity_block_upgrade(nodegroup: Any, cluster_name: str) -> None:
    if nodegroup.capacity_type != "CAPACITY_BLOCK":
        return
    desired = (nodegroup.scaling_config or {}).get("desiredSize") or 0
    if desired > 0:
        raise InvalidRequestException(
            message=(
                f"Nodegroup {nodegroup.nodegroup_name} has capacity type CAPACITY_BLOCK and desired size "
                f"{desired}: set the desired size to 0 before updating its version (a Capacity Block has no "
                "spare instances for a rolling update)"
            ),
            clusterName=cluster_name,
            nodegroupName=nodegroup.nodegroup_name,
            addonName=None,
        )
