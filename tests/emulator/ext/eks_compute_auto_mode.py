"""EKS Auto Mode (gpustack issue 21) on CreateCluster, UpdateClusterConfig and DescribeCluster:
``computeConfig``, ``storageConfig.blockStorage`` and ``kubernetesNetworkConfig.elasticLoadBalancing``,
strictly, and the ``EC2`` access entry of an Auto Mode node role.

Loaded after ``eks_cluster_options.py`` (module names load in order: ``eks_compute…`` >
``eks_cluster…``), so its CreateCluster and UpdateClusterConfig wrap that module's, which wrap
``eks_access.py``'s and ``eks.py``'s.

Sources: [M] botocore's eks 2017-11-01 model (1.44.5): ``ComputeConfigRequest`` {enabled,
nodePools, nodeRoleArn} ("This value cannot be changed after the compute capability of EKS Auto
Mode is enabled"), ``StorageConfigRequest.blockStorage``, ``ElasticLoadBalancing``, the
``Cluster`` response members ``computeConfig``/``storageConfig``/``kubernetesNetworkConfig``,
``UpdateType`` ``AutoModeUpdate`` and ``UpdateParamType`` ``ComputeConfig``/``StorageConfig``/
``KubernetesNetworkConfig``, ``CreateClusterRequest.bootstrapSelfManagedAddons`` (default true),
``CreateAccessEntryRequest.type`` ("EC2 (for EKS Auto Mode)"). [UG] EKS User Guide:
``auto-enable-existing`` / ``auto-disable`` ("The compute, block storage, and load balancing
capabilities must all be enabled or disabled in the same request"), ``create-auto`` ("EKS Auto
Mode requires Kubernetes version 1.29 or greater"), ``automode-get-started-cli`` (authentication
mode "Requires EKS access entries"), ``set-builtin-node-pools`` (pools ``general-purpose`` and
``system``), ``create-node-class`` ("EKS automatically creates access entries when you use the
built-in node class and node pools"; the node role's access policy AmazonEKSAutoNodePolicy).
EKS's own answers, quoted by third parties: [A] kubernetes-sigs/cluster-api-provider-aws#5278
(all-or-none message; "Only general-purpose or system is allowed"); [B]
terraform-aws-modules/terraform-aws-eks#3366 (pools without a node role); [C]
hashicorp/terraform-provider-aws#40483 (bootstrapSelfManagedAddons); [D] aws-cdk PR #33373 (no
pools or role with compute off). Wording marked (unverified) is ours.

* CreateCluster and UpdateClusterConfig refuse (``InvalidParameterException``):
  - compute, block storage and load balancing not all enabled or all disabled [UG][A]; on
    UpdateClusterConfig also any of the three missing from a request that has one [UG];
  - ``nodePools`` other than ``general-purpose``/``system`` [A]; pools without ``nodeRoleArn`` [B];
    ``nodePools``/``nodeRoleArn`` with compute disabled [D]; a ``nodeRoleArn`` that is not an IAM
    role ARN (unverified wording);
  - Auto Mode with authentication mode ``CONFIG_MAP`` [UG, unverified wording], on Kubernetes
    below 1.29 [UG, unverified wording];
  - CreateCluster with Auto Mode and ``bootstrapSelfManagedAddons`` not false [C];
  - UpdateClusterConfig changing ``nodeRoleArn`` of a cluster whose compute is on, also from
    none to a role [M] (unverified: EKS may take "" -> ARN), or mixing Auto Mode with another
    update kind.
* UpdateClusterConfig changing nothing: ``InvalidRequestException`` "No changes needed for EKS
  Auto Mode configuration provided" (EKS's answer quoted in terraform-aws-modules/terraform-aws-eks#3516).
* A successful update is an ``AutoModeUpdate`` with the three params [M]. DescribeCluster returns
  ``computeConfig``, ``storageConfig`` and ``kubernetesNetworkConfig.elasticLoadBalancing`` once
  set (a cluster made without them returns none).
* Compute on with built-in pools: EKS makes the node role's ``EC2`` access entry with
  AmazonEKSAutoNodePolicy [UG], so a second CreateAccessEntry for it is ``ResourceInUseException``
  (terraform-aws-modules/terraform-aws-eks#3241). ``EC2`` entries take access policies (the
  others of node type do not): only AmazonEKSAutoNodePolicy (unverified: stricter than documented).
"""

from __future__ import annotations

import json
from typing import Any

from moto.core.responses import ActionResult
from moto.eks.exceptions import InvalidRequestException
from moto.eks.models import Cluster
from moto.eks.responses import EKSResponse

from moto.core.utils import utcnow

from . import eks, eks_access
from ._ec2 import LOCK

BUILT_IN = ("general-purpose", "system")
MIN_MINOR = 29
AUTO_NODE_POLICY = "AmazonEKSAutoNodePolicy"
ALL_OR_NONE = (
    "For EKS Auto Mode, please ensure that all required configs, including computeConfig, "
    "kubernetesNetworkConfig, and blockStorage are all either fully enabled or fully disabled."
)
NO_ROLE = "When Compute Config nodeRoleArn is null or empty, nodePool list cannot be populated."
BOOTSTRAP = "When EKS Auto Mode is enabled, bootstrapSelfManagedAddons must be set to false."

_create_cluster: Any = None
_update_cluster_config: Any = None
_standard: Any = None


def _parts(body: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None, dict[str, Any] | None]:
    compute = body.get("computeConfig")
    storage = (body.get("storageConfig") or {}).get("blockStorage")
    elb = (body.get("kubernetesNetworkConfig") or {}).get("elasticLoadBalancing")
    return compute, storage, elb


def _minor(version: str) -> int:
    try:
        return int(version.split(".")[1])
    except (IndexError, ValueError):
        return 0


def _check(body: dict[str, Any], name: str, mode: str, version: str) -> bool | None:
    """The Auto Mode members of a request, checked; True/False when they turn it on/off, None
    when the request has none."""
    compute, storage, elb = _parts(body)
    if compute is None and storage is None and elb is None:
        return None
    flags = [bool((x or {}).get("enabled")) for x in (compute, storage, elb)]
    if any(flags) and not all(flags):
        raise eks.invalid(ALL_OR_NONE, name)
    compute = compute or {}
    pools = compute.get("nodePools") or []
    role = compute.get("nodeRoleArn")
    if not flags[0] and (pools or role):
        raise eks.invalid("nodeRoleArn and nodePools cannot be set when computeConfig is disabled", name)
    for pool in pools:
        if pool not in BUILT_IN:
            raise eks.invalid(f"Invalid nodePool {pool}: Only general-purpose or system is allowed", name)
    if pools and not role:
        raise eks.invalid(NO_ROLE, name)
    if role and (eks_access.PRINCIPAL.match(role) is None or ":role/" not in role):
        raise eks.invalid(f"nodeRoleArn {role} is not a valid IAM role ARN", name)
    if flags[0]:
        if mode not in ("API", "API_AND_CONFIG_MAP"):
            raise eks.invalid("EKS Auto Mode requires the authentication mode API or API_AND_CONFIG_MAP", name)
        if _minor(version) < MIN_MINOR:
            raise eks.invalid(f"EKS Auto Mode requires Kubernetes version 1.{MIN_MINOR} or greater", name)
    return flags[0]


def _apply(cluster: Cluster, on: bool, body: dict[str, Any]) -> None:
    compute = body.get("computeConfig") or {}
    if on:
        cluster.compute_config = {
            "enabled": True,
            "nodePools": list(compute.get("nodePools") or []),
            "nodeRoleArn": compute.get("nodeRoleArn") or "",
        }
    else:
        cluster.compute_config = {"enabled": False}
    cluster.storage_config = {"blockStorage": {"enabled": on}}
    network = dict(cluster.kubernetes_network_config or {})
    network["elasticLoadBalancing"] = {"enabled": on}
    cluster.kubernetes_network_config = network
    role = cluster.compute_config.get("nodeRoleArn")
    if on and cluster.compute_config["nodePools"] and role and role not in eks_access.entries_of(cluster):
        entry = eks_access.add_entry(cluster, role, "EC2")
        now = utcnow()
        arn = eks_access.policy_arn(AUTO_NODE_POLICY)
        entry.policies[arn] = {
            "policyArn": arn,
            "accessScope": {"type": "cluster", "namespaces": []},
            "associatedAt": now,
            "modifiedAt": now,
        }


def _create(self: EKSResponse) -> ActionResult:
    name = self._get_param("name")
    body = eks._body(self)
    mode = (body.get("accessConfig") or {}).get("authenticationMode") or "CONFIG_MAP"
    version = body.get("version") or eks.cat.DEFAULT_KUBERNETES_VERSION
    on = _check(body, name, mode, version)
    if on and body.get("bootstrapSelfManagedAddons", True) is not False:
        raise eks.invalid(BOOTSTRAP, name)
    result = _create_cluster(self)
    if on is not None:
        with LOCK:
            _apply(self.eks_backend.describe_cluster(name), on, body)
    return result


def _update_config(self: EKSResponse) -> ActionResult:
    name = self._get_param("name")
    body = eks._body(self)
    parts = _parts(body)
    if all(p is None for p in parts):
        return _update_cluster_config(self)
    if any(p is None for p in parts):
        raise eks.invalid(ALL_OR_NONE, name)
    others = sorted(set(body) - {"computeConfig", "storageConfig", "kubernetesNetworkConfig", "clientRequestToken"})
    if others or set(body["kubernetesNetworkConfig"]) != {"elasticLoadBalancing"}:
        raise eks.invalid("Only one type of update can be allowed.", name)
    with LOCK:
        cluster = self.eks_backend.describe_cluster(name)
        eks.require_active(cluster, f"Cluster {name}", cluster=name)
        on = bool(_check(body, name, cluster.access_config.get("authenticationMode", "CONFIG_MAP"), cluster.version))
        current = cluster.compute_config or {"enabled": False}
        role = (body["computeConfig"] or {}).get("nodeRoleArn") or ""
        # [M] "cannot be changed after the compute capability of EKS Auto Mode is enabled": also
        # from none to a role (review auto m3; whether EKS treats "" -> ARN as a change is
        # unverified, so this is at least as strict as the documented rule).
        if on and current.get("enabled") and role != (current.get("nodeRoleArn") or ""):
            raise eks.invalid("nodeRoleArn cannot be changed after the compute capability of EKS Auto Mode is enabled", name)
        wanted = {"enabled": on}
        if on:
            wanted = {"enabled": True, "nodePools": list(body["computeConfig"].get("nodePools") or []), "nodeRoleArn": role}
        if wanted == current or (not on and not current.get("enabled")):
            # EKS's own answer, quoted in terraform-aws-modules/terraform-aws-eks#3516 (review auto m2).
            raise InvalidRequestException(
                message="No changes needed for EKS Auto Mode configuration provided", clusterName=name
            )
        _apply(cluster, on, body)
        params = [
            eks.param("ComputeConfig", json.dumps(cluster.compute_config)),
            eks.param("StorageConfig", json.dumps(cluster.storage_config)),
            eks.param("KubernetesNetworkConfig", json.dumps({"elasticLoadBalancing": {"enabled": on}})),
        ]
        update = eks.start_update(cluster, cluster, "AutoModeUpdate", params)
    return ActionResult({"update": update.shape()})


def _standard_or_auto_node(entry: Any) -> None:
    """``EC2`` (Auto Mode) entries take AmazonEKSAutoNodePolicy; other node types none."""
    if entry.type == "EC2":
        return
    _standard(entry)


_associate: Any = None


def _associate_access_policy(self: EKSResponse) -> ActionResult:
    policy = self._get_param("policyArn") or ""
    with LOCK:
        cluster = self.eks_backend.describe_cluster(self._get_param("name"))
        entry = eks_access.entries_of(cluster).get(self._get_param("principalArn"))
    if entry is not None and entry.type == "EC2" and not policy.endswith(f"/{AUTO_NODE_POLICY}"):
        raise eks.invalid(f"An EC2 access entry takes only the {AUTO_NODE_POLICY} access policy", cluster.name)
    return _associate(self)


def install() -> None:
    global _create_cluster, _update_cluster_config, _standard, _associate
    _create_cluster = EKSResponse.create_cluster
    _update_cluster_config = EKSResponse.update_cluster_config
    _associate = EKSResponse.associate_access_policy
    _standard = eks_access._standard
    eks_access._standard = _standard_or_auto_node
    Cluster.compute_config = None  # type: ignore[attr-defined]
    Cluster.storage_config = None  # type: ignore[attr-defined]
    eks.eks_action("CreateCluster", override=True)(_create)
    eks.eks_action("UpdateClusterConfig", override=True)(_update_config)
    eks.eks_action("AssociateAccessPolicy", override=True)(_associate_access_policy)
