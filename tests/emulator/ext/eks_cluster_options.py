"""EKS cluster options beyond the control plane's core (gpustack issue 19), on top of ``eks.py``'s
CreateCluster, UpdateClusterConfig and DeleteCluster: secrets encryption, the Kubernetes network
(IP family, service CIDR), zonal shift, the upgrade policy, deletion protection, and the
CloudWatch Logs group EKS writes control-plane logs to. Added action: AssociateEncryptionConfig.

Sources: [M] the botocore model (eks 2017-11-01, botocore 1.44.5) member documentation:
``KubernetesNetworkConfigRequest``, ``Provider``, ``EncryptionConfig``, ``CreateClusterRequest``
(``deletionProtection``), ``UpgradePolicyRequest``, ``ZonalShiftConfigRequest``, the ``UpdateType``
and ``UpdateParamType`` enums; [UG] EKS User Guide (awsdocs/amazon-eks-user-guide @4d52b4d:
``observability/control-plane-logs.adoc``; ``enable-kms``). Wording marked (unverified) is ours.

* CreateCluster:
  - ``encryptionConfig`` (at most one: [M] ``EncryptionConfigList`` max 1, checked by
    param_validation): ``provider.keyArn`` is required and must be a KMS key or alias ARN in the
    cluster's region ("created in the same Amazon Web Services Region as the cluster" [M]
    ``Provider``); ``resources``, when given, only ``["secrets"]`` ("The only supported value is
    secrets" [M]). Else ``InvalidParameterException`` (unverified wording).
  - ``kubernetesNetworkConfig`` [M]: ``serviceIpv4Cidr`` inside 10.0.0.0/8, 172.16.0.0/12 or
    192.168.0.0/16, a /12 to /24, not overlapping the VPC's blocks, and not with ``ipFamily``
    ipv6 ("Don't specify a value if you select ipv6"); ``ipFamily`` ipv6 needs every subnet to
    have an IPv6 block ("the VPC and subnets ... must have both IPv4 and IPv6 CIDR blocks").
    Else ``InvalidParameterException`` (unverified wording). Stored as EKS reports it: an ipv4
    cluster's ``serviceIpv4Cidr`` (default 10.100.0.0/16, or 172.20.0.0/16 when the VPC is in
    10.0.0.0/8 [M] "either the 10.100.0.0/16 or 172.20.0.0/16"), an ipv6 cluster's
    ``serviceIpv6Cidr`` (a /108 from fc00::/7 [M]).
  - ``zonalShiftConfig.enabled`` (default false), ``deletionProtection`` (default false [M]),
    ``upgradePolicy.supportType`` (default EXTENDED [M] ``UpgradePolicyRequest``) are stored and
    described.
  - Logging with any type enabled: the log group ``/aws/eks/<name>/cluster`` is created if it
    does not exist, without a retention ([UG] control-plane-logs: the group name, and that
    exported logs go to CloudWatch Logs; CloudWatch's default is never expire). The same for
    UpdateClusterConfig turning logging on. EKS never deletes the group.
* UpdateClusterConfig also takes exactly one of ``upgradePolicy`` (``UpgradePolicyUpdate``,
  param ``UpgradePolicy``), ``zonalShiftConfig`` (``ZonalShiftConfigUpdate``/``ZonalShiftConfig``)
  or ``deletionProtection`` (``DeletionProtectionUpdate``/``DeletionProtection``) [M enums]; a
  request that changes nothing is ``InvalidParameterException`` (as eks.py's other kinds).
* AssociateEncryptionConfig (``POST /clusters/{name}/encryption-config/associate``): only on a
  cluster without encryption ("enable encryption on existing clusters that don't already have
  encryption enabled" [M]; "You can't disable secrets encryption after enabling it" [UG]); a
  second one is ``InvalidRequestException`` (unverified wording). An ``AssociateEncryptionConfig``
  update, param ``EncryptionConfig``.
* DeleteCluster of a cluster with deletion protection: ``InvalidRequestException`` ("the cluster
  cannot be deleted unless deletion protection is first disabled" [M]; unverified wording).
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from moto.core.responses import ActionResult
from moto.eks.exceptions import InvalidRequestException
from moto.eks.models import Cluster, EKSBackend
from moto.eks.responses import EKSResponse
from moto.logs.exceptions import ResourceAlreadyExistsException
from moto.logs.models import logs_backends

from . import eks
from ._ec2 import LOCK

PRIVATE = [ipaddress.ip_network(b) for b in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")]
UPDATE_KINDS = {
    "upgradePolicy": ("UpgradePolicyUpdate", "UpgradePolicy"),
    "zonalShiftConfig": ("ZonalShiftConfigUpdate", "ZonalShiftConfig"),
    "deletionProtection": ("DeletionProtectionUpdate", "DeletionProtection"),
}

# The handlers this module wraps, as installed before it (eks.py's, with eks_access.py's
# CreateCluster wrapper around them); set by install().
_create_cluster: Any = None
_update_cluster_config: Any = None
_delete_cluster: Any = None


def log_group_name(cluster: str) -> str:
    return f"/aws/eks/{cluster}/cluster"


def ensure_log_group(backend: EKSBackend, cluster: Cluster) -> None:
    """EKS creates the group it exports to when it is missing (never-expire retention)."""
    setups = (cluster.logging or {}).get("clusterLogging") or []
    if not any(s.get("enabled") for s in setups):
        return
    logs = logs_backends[backend.account_id][backend.region_name]
    try:
        logs.create_log_group(log_group_name(cluster.name), {})
    except ResourceAlreadyExistsException:
        pass


def _check_encryption(configs: list[dict[str, Any]] | None, name: str, region: str) -> list[dict[str, Any]]:
    out = []
    for config in configs or []:
        key = ((config.get("provider") or {}).get("keyArn")) or ""
        parts = key.split(":", 5)
        ok = (
            len(parts) == 6
            and parts[0] == "arn"
            and parts[2] == "kms"
            and (parts[5].startswith("key/") or parts[5].startswith("alias/"))
        )
        if not ok:
            raise eks.invalid(f"Invalid KMS key ARN {key!r} in encryptionConfig.provider.keyArn", name)
        if parts[3] != region:
            raise eks.invalid(f"The KMS key {key} must be in the cluster's region {region}", name)
        resources = config.get("resources")
        if resources is not None and resources != ["secrets"]:
            raise eks.invalid("encryptionConfig.resources only supports [\"secrets\"]", name)
        out.append({"resources": ["secrets"], "provider": {"keyArn": key}})
    return out


def _network(ec2: Any, request: dict[str, Any] | None, subnet_ids: list[str], name: str) -> dict[str, Any]:
    request = request or {}
    family = request.get("ipFamily") or "ipv4"
    cidr = request.get("serviceIpv4Cidr")
    subnets = []
    for subnet_id in subnet_ids:
        try:
            subnets.append(ec2.get_subnet(subnet_id))
        except Exception:  # eks._vpc_of_subnets has already refused unknown subnets
            continue
    if family == "ipv6":
        if cidr is not None:
            raise eks.invalid("serviceIpv4Cidr cannot be specified when ipFamily is ipv6", name)
        without = [s.id for s in subnets if not s.ipv6_cidr_block_associations]
        if without:
            raise eks.invalid(f"Subnets {', '.join(without)} have no IPv6 CIDR block; ipv6 clusters need them", name)
        return {"ipFamily": "ipv6", "serviceIpv6Cidr": "fd52:64f7:1c6a::/108"}
    vpc = ec2.get_vpc(subnets[0].vpc_id) if subnets else None
    vpc_blocks = []
    if vpc is not None:
        vpc_blocks = [ipaddress.ip_network(a["cidr_block"]) for a in vpc.cidr_block_association_set]
    if cidr is None:
        in_ten = any(b.subnet_of(PRIVATE[0]) for b in vpc_blocks if b.version == 4)
        return {"ipFamily": "ipv4", "serviceIpv4Cidr": "172.20.0.0/16" if in_ten else "10.100.0.0/16"}
    try:
        net = ipaddress.ip_network(cidr)
    except ValueError:
        raise eks.invalid(f"Invalid serviceIpv4Cidr {cidr}", name) from None
    if net.version != 4 or not any(net.subnet_of(p) for p in PRIVATE):
        raise eks.invalid(f"serviceIpv4Cidr {cidr} must be within 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16", name)
    if not 12 <= net.prefixlen <= 24:
        raise eks.invalid(f"serviceIpv4Cidr {cidr} must be between /24 and /12", name)
    for block in vpc_blocks:
        if block.version == 4 and net.overlaps(block):
            raise eks.invalid(f"serviceIpv4Cidr {cidr} overlaps the VPC CIDR block {block}", name)
    return {"ipFamily": "ipv4", "serviceIpv4Cidr": str(net)}


def _create(self: EKSResponse) -> ActionResult:
    name = self._get_param("name")
    backend = self.eks_backend
    encryption = _check_encryption(self._get_param("encryptionConfig"), name, backend.region_name)
    subnet_ids = (self._get_param("resourcesVpcConfig") or {}).get("subnetIds") or []
    with LOCK:
        network = _network(eks._ec2(backend), self._get_param("kubernetesNetworkConfig"), subnet_ids, name)
    result = _create_cluster(self)
    with LOCK:
        cluster = backend.describe_cluster(name)
        cluster.encryption_config = encryption
        cluster.kubernetes_network_config = network
        cluster.zonal_shift_config = {"enabled": bool((self._get_param("zonalShiftConfig") or {}).get("enabled"))}
        cluster.deletion_protection = bool(self._get_param("deletionProtection"))
        support = (self._get_param("upgradePolicy") or {}).get("supportType") or "EXTENDED"
        cluster.upgrade_policy = {"supportType": support}
        ensure_log_group(backend, cluster)
    return result


def _update_config(self: EKSResponse) -> ActionResult:
    name = self._get_param("name")
    body = eks._body(self)
    kinds = [k for k in (*eks.CONFIG_KINDS, *UPDATE_KINDS) if body.get(k) is not None]
    ours = [k for k in kinds if k in UPDATE_KINDS]
    if not ours:
        result = _update_cluster_config(self)
        if body.get("logging") is not None:
            with LOCK:
                ensure_log_group(self.eks_backend, self.eks_backend.describe_cluster(name))
        return result
    unsupported = sorted(set(body) - set(eks.CONFIG_KINDS) - set(UPDATE_KINDS) - {"clientRequestToken"})
    if unsupported:
        raise eks.invalid(f"The emulator cannot update {', '.join(unsupported)}", name)
    if len(kinds) != 1:
        raise eks.invalid("Only one type of update can be allowed.", name)
    kind = ours[0]
    with LOCK:
        cluster = self.eks_backend.describe_cluster(name)
        eks.require_active(cluster, f"Cluster {name}", cluster=name)
        if kind == "upgradePolicy":
            value = body[kind].get("supportType")
            if value not in ("STANDARD", "EXTENDED") or cluster.upgrade_policy.get("supportType") == value:
                raise eks.invalid(f"Cluster is already at the desired upgrade policy {value}", name)
            cluster.upgrade_policy = {"supportType": value}
            shown: Any = value
        elif kind == "zonalShiftConfig":
            value = bool(body[kind].get("enabled"))
            if cluster.zonal_shift_config.get("enabled") == value:
                raise eks.invalid(f"Zonal shift is already {'enabled' if value else 'disabled'}", name)
            cluster.zonal_shift_config = {"enabled": value}
            shown = value
        else:
            value = bool(body[kind])
            if cluster.deletion_protection == value:
                raise eks.invalid(f"Deletion protection is already {'enabled' if value else 'disabled'}", name)
            cluster.deletion_protection = value
            shown = value
        update_type, param_type = UPDATE_KINDS[kind]
        update = eks.start_update(cluster, cluster, update_type, [eks.param(param_type, shown)])
    return ActionResult({"update": update.shape()})


def _associate_encryption_config(self: EKSResponse) -> ActionResult:
    name = self._get_param("name")
    backend = self.eks_backend
    configs = self._get_param("encryptionConfig")
    if not configs:
        raise eks.invalid("encryptionConfig is required", name)
    encryption = _check_encryption(configs, name, backend.region_name)
    with LOCK:
        cluster = backend.describe_cluster(name)
        eks.require_active(cluster, f"Cluster {name}", cluster=name)
        if cluster.encryption_config:
            raise InvalidRequestException(
                message=f"Cluster {name} already has an encryption configuration; it cannot be changed",
                clusterName=name,
                nodegroupName=None,
                addonName=None,
            )
        cluster.encryption_config = encryption
        update = eks.start_update(cluster, cluster, "AssociateEncryptionConfig", [eks.param("EncryptionConfig", json.dumps(encryption))])
    return ActionResult({"update": update.shape()})


def _delete(self: EKSBackend, name: str) -> Cluster:
    with LOCK:
        cluster = self.describe_cluster(name)
        if getattr(cluster, "deletion_protection", False):
            raise InvalidRequestException(
                message=f"Cluster {name} has deletion protection enabled; disable it before deleting the cluster",
                clusterName=name,
                nodegroupName=None,
                addonName=None,
            )
    return _delete_cluster(self, name)


def install() -> None:
    global _create_cluster, _update_cluster_config, _delete_cluster
    _create_cluster = EKSResponse.create_cluster
    _update_cluster_config = EKSResponse.update_cluster_config
    _delete_cluster = EKSBackend.delete_cluster
    eks_routes = ("{0}/clusters/(?P<name>[^/]+)/encryption-config/associate$",)
    from moto.eks import urls as eks_urls

    for path in eks_routes:
        eks_urls.url_paths.setdefault(path, EKSResponse.dispatch)
    Cluster.zonal_shift_config = {"enabled": False}  # type: ignore[attr-defined]
    Cluster.deletion_protection = False  # type: ignore[attr-defined]
    Cluster.upgrade_policy = {"supportType": "EXTENDED"}  # type: ignore[attr-defined]
    eks.eks_action("CreateCluster", override=True)(_create)
    eks.eks_action("UpdateClusterConfig", override=True)(_update_config)
    eks.eks_action("AssociateEncryptionConfig")(_associate_encryption_config)
    EKSBackend.delete_cluster = _delete  # type: ignore[method-assign]
