"""EKS clusters and managed node groups as the EKS waiters see them: timed lifecycles, updates,
and the fields moto 5.2.5 leaves out. (Add-ons are in ``eks_addons.py``, on the same machinery.)

Lifecycle. moto makes everything ACTIVE at once and deletes at once. Here a new cluster, node
group or add-on is ``CREATING`` for a set time, then ``ACTIVE``; a deleted one is ``DELETING``
for a set time, then gone (``ResourceNotFoundException``); an updated one is ``UPDATING``, and
its update ``InProgress`` then ``Successful``. Nothing runs in the background: each object keeps
a deadline, its ``status`` is computed when read, and every EKS request first drops the objects
whose deletion is over (``_sweep``). Times come from ``POST /_gpustack/eks`` (below).

Changed moto actions:

* ``CreateCluster``: ``version`` must be one of 1.28-1.34 (default 1.33), subnets must exist,
  share a VPC and span two zones, else ``InvalidParameterException`` (400). Stores
  ``accessConfig`` (``authenticationMode`` default ``CONFIG_MAP``,
  ``bootstrapClusterCreatorAdminPermissions`` default true) and the whole
  ``resourcesVpcConfig``: ``vpcId``, endpoint access (public true, private false, CIDRs
  ``0.0.0.0/0`` by default) and ``clusterSecurityGroupId``, a real EC2 security group
  ``eks-cluster-sg-<name>-<n>`` in the VPC, tagged ``aws:eks:cluster-name``, deleted with the
  cluster. The ``CONFIG_MAP`` default is the EKS API's (botocore ``CreateAccessConfigRequest``);
  that mode needs ``bootstrapClusterCreatorAdminPermissions`` true (``InvalidParameterException``,
  terraform-aws-modules/terraform-aws-eks#3026). Per cluster:
  ``endpoint``, ``identity.oidc.issuer``, ``certificateAuthority.data``
  (base64 of a PEM block), ``platformVersion``, ``logging`` (two entries: enabled types, disabled
  types).
* ``DeleteCluster``: ``ResourceInUseException`` (409) while node groups exist (moto's check,
  also while they are DELETING); add-ons go with the cluster.
* ``UpdateClusterConfig``: exactly one of ``resourcesVpcConfig`` (merged into the stored config:
  endpoint access and CIDRs, or subnets/security groups), ``logging`` (merged per log type) or
  ``accessConfig.authenticationMode`` (only CONFIG_MAP -> API_AND_CONFIG_MAP -> API); returns an
  ``update``. A no-op, a step back or two kinds at once is ``InvalidParameterException``; a
  cluster that is not ACTIVE ``ResourceInUseException``.
* ``CreateNodegroup``: takes ``capacityType`` ON_DEMAND/SPOT/CAPACITY_BLOCK, ``updateConfig``
  (default ``maxUnavailable`` 1), ``nodeRepairConfig``; resolves ``launchTemplate`` (id or name)
  to ``{id, name, version}``, the version to the template's default number when omitted; an
  unknown template or version is ``InvalidParameterException``. ``version`` defaults to the
  cluster's; ``releaseVersion`` to the newest release of the AMI type (``eks_catalog``); a
  release EKS does not have, or an AL2 AMI type past Kubernetes 1.32, is
  ``InvalidParameterException``. With a launch template there is no default disk size, instance
  type or remote access, and an ``ImageId`` in it means ``CUSTOM``. A cluster that is not ACTIVE
  is ``InvalidRequestException`` (moto's check).
* ``UpdateNodegroupConfig``: the update is recorded (moto answered ``Successful`` and forgot it).
* ``ListNodegroups``: an unknown cluster is ``ResourceNotFoundException`` (moto: 500).
* ``TagResource``/``UntagResource``/``ListTagsForResource``: clusters, node groups, Fargate
  profiles and add-ons by ARN; an unknown ARN is ``NotFoundException`` (404) as in EKS.

Added actions:

* ``UpdateClusterVersion``: exactly one minor version up within 1.28-1.34, else
  ``InvalidParameterException`` "Unsupported Kubernetes minor version update from 1.30 to 1.32".
* ``UpdateNodegroupVersion``: ``version`` (default: the cluster's), ``releaseVersion`` (default:
  newest for the AMI type), ``launchTemplate`` (the group's own template, another version).
* ``DescribeUpdate``: cluster, node group (``nodegroupName``) and add-on (``addonName``) updates;
  an id unknown in that scope is ``ResourceNotFoundException``.

Node groups whose instances would not join (no egress, private endpoint without VPC DNS,
Bottlerocket user data Bottlerocket refuses; ``node_join.py``) end ``CREATE_FAILED`` after their
create timer, or ``DEGRADED`` after a version update (that update ends ``Failed``), with the
health issue ``NodeCreationFailure``; a DEGRADED node group can be updated again. A
``CAPACITY_BLOCK`` node group with desired size > 0 refuses ``UpdateNodegroupVersion``
(``InvalidRequestException``).

Changes apply when the update starts; only ``status`` waits for the deadline. An update of a
cluster, node group or add-on that is not ACTIVE is ``ResourceInUseException`` (409).

Control endpoint (JSON answers; settings are global and ``POST /moto-api/reset`` restores the
defaults): ``POST /_gpustack/eks?cluster_create_ms=N&nodegroup_create_ms=N&addon_create_ms=N&``
``delete_ms=N&update_ms=N`` sets any subset and returns all five. Defaults 1000, 500, 300, 300, 300.
An unknown name or a value that is not an integer >= 0 is ``400 {"error": ...}``. The route is
answered by ``capacity_control``'s router (outside request_log, which 404s unknown paths).
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import time
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any, Callable

from moto.core.responses import ActionResult
from moto.core.utils import utcnow
from moto.ec2.exceptions import EC2ClientError
from moto.ec2.models import ec2_backends
from moto.eks import urls as eks_urls
from moto.eks.exceptions import (
    EKSError,
    InvalidParameterException,
    ResourceInUseException,
    ResourceNotFoundException,
)
from moto.eks.models import (
    DEFAULT_INSTANCE_TYPES,
    DEFAULT_SCALING_CONFIG,
    Cluster,
    EKSBackend,
    Nodegroup,
    validate_safe_to_delete,
)
from moto.eks.responses import EKSResponse

from . import eks_catalog as cat
from . import node_join
from ._ec2 import LOCK
from .capacity_control import ControlError, int_arg, on_reset, route

ACTIVE = "ACTIVE"
AUTH_MODES = ("CONFIG_MAP", "API_AND_CONFIG_MAP", "API")  # the only order EKS moves through
LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
CAPACITY_TYPES = ("ON_DEMAND", "SPOT", "CAPACITY_BLOCK")
DEFAULT_AMI_TYPE = "AL2023_x86_64_STANDARD"
DEFAULT_DISK_SIZE = 20
MAX_PAGE = 100
CLUSTER_SG_DESCRIPTION = (
    "EKS created security group applied to ENI that is attached to EKS Control Plane master "
    "nodes, as well as any managed workloads."
)

# REST routes moto 5.2.5 does not map (its Flask app would answer a bare 404 page).
ROUTES = (
    "{0}/addons/supported-versions$",
    "{0}/clusters/(?P<name>[^/]+)/addons$",
    "{0}/clusters/(?P<name>[^/]+)/addons/(?P<addonName>[^/]+)$",
    "{0}/clusters/(?P<name>[^/]+)/addons/(?P<addonName>[^/]+)/update$",
    "{0}/clusters/(?P<name>[^/]+)/updates$",
    "{0}/clusters/(?P<name>[^/]+)/updates/(?P<updateId>[^/]+)$",
    "{0}/clusters/(?P<name>[^/]+)/node-groups/(?P<nodegroupName>[^/]+)/update-version$",
)


# --- timing and the control endpoint ---------------------------------------------------------


@dataclass
class Timing:
    cluster_create_ms: int = 1000
    nodegroup_create_ms: int = 500
    addon_create_ms: int = 300
    delete_ms: int = 300
    update_ms: int = 300


TIMING = Timing()


def _control(query: dict[str, str]) -> tuple[int, Any]:
    known = asdict(TIMING)
    changes: dict[str, int] = {}
    for name in query:
        if name not in known:
            raise ControlError(f"unknown setting {name!r}; known: {', '.join(known)}")
        changes[name] = int_arg(query, name)
        if changes[name] < 0:
            raise ControlError(f"{name} must be >= 0")
    with LOCK:
        for name, value in changes.items():
            setattr(TIMING, name, value)
        return 200, asdict(TIMING)


def _reset_timing() -> None:
    with LOCK:
        for name, value in asdict(Timing()).items():
            setattr(TIMING, name, value)


# --- lifecycle --------------------------------------------------------------------------------


@dataclass
class Phase:
    status: str  # CREATING, UPDATING or DELETING
    until: float  # time.monotonic() deadline
    failure: str | None = None  # set: the phase ends CREATE_FAILED / DEGRADED (node_join.py)


def begin(obj: Any, status: str, ms: int, failure: str | None = None) -> float:
    """Puts ``obj`` in ``status`` for ``ms`` milliseconds; returns the deadline. With ``failure``
    (a health-issue message) the phase ends in CREATE_FAILED (creating) or DEGRADED (updating)."""
    until = time.monotonic() + ms / 1000.0
    obj.__dict__["_gpustack_phase"] = Phase(status, until, failure)
    return until


def failure_of(obj: Any) -> str | None:
    """The health-issue message of a create/update that has ended in failure, else None."""
    phase: Phase | None = obj.__dict__.get("_gpustack_phase")
    if phase is None or phase.status == "DELETING" or time.monotonic() < phase.until:
        return None
    return phase.failure


def status_of(obj: Any) -> str:
    phase: Phase | None = obj.__dict__.get("_gpustack_phase")
    if phase is None:
        return ACTIVE
    # A deleted object stays DELETING until _sweep drops it.
    if phase.status == "DELETING" or time.monotonic() < phase.until:
        return phase.status
    if phase.failure is not None:
        return "CREATE_FAILED" if phase.status == "CREATING" else "DEGRADED"
    return ACTIVE


def _nodegroup_health(nodegroup: Nodegroup) -> dict[str, Any]:
    failure = failure_of(nodegroup)
    if failure is not None:
        return {"issues": [node_join.issue(failure, nodegroup)]}
    return nodegroup.__dict__.get("_gpustack_health") or {"issues": []}


def _set_nodegroup_health(nodegroup: Nodegroup, value: dict[str, Any]) -> None:
    nodegroup.__dict__["_gpustack_health"] = value


def _deleted(obj: Any) -> bool:
    phase: Phase | None = obj.__dict__.get("_gpustack_phase")
    return phase is not None and phase.status == "DELETING" and time.monotonic() >= phase.until


def _ignore_status(obj: Any, value: str) -> None:
    """moto's constructors set ``status = "ACTIVE"``; the phase decides instead."""


def require_active(obj: Any, what: str, **names: str | None) -> None:
    status = status_of(obj)
    # EKS lets a DEGRADED node group be updated (that is how it is repaired).
    if status not in (ACTIVE, "DEGRADED"):
        raise in_use(f"{what} is {status}; it must be ACTIVE for this request", **names)


def addons_of(cluster: Cluster) -> dict[str, Any]:
    """addon name -> ``eks_addons.Addon`` of a cluster (kept on moto's object, so reset drops it)."""
    return cluster.__dict__.setdefault("_gpustack_addons", {})


def _sweep(backend: EKSBackend) -> None:
    """Drops what has finished deleting."""
    for name, cluster in list(backend.clusters.items()):
        if _deleted(cluster):
            del backend.clusters[name]
            backend.cluster_count -= 1
            _delete_cluster_security_group(backend, cluster)
            continue
        for ng_name, nodegroup in list(cluster.nodegroups.items()):
            if _deleted(nodegroup):
                del cluster.nodegroups[ng_name]
                cluster.nodegroup_count -= 1
        addons = addons_of(cluster)
        for addon_name, addon in list(addons.items()):
            if _deleted(addon):
                del addons[addon_name]


_orig_call_action = EKSResponse.call_action


def _call_action(self: EKSResponse) -> Any:
    with LOCK:
        _sweep(self.eks_backend)
    return _orig_call_action(self)


# --- updates ----------------------------------------------------------------------------------


@dataclass
class Update:
    id: str
    type: str
    params: list[dict[str, str]]
    created_at: datetime
    until: float
    nodegroup: str | None
    addon: str | None
    failure: str | None = None  # node_join: the update ends Failed with this error

    def shape(self) -> dict[str, Any]:
        """The botocore ``Update`` shape."""
        done = time.monotonic() >= self.until
        errors = []
        if done and self.failure is not None:
            errors = [
                {
                    "errorCode": node_join.ISSUE_CODE,
                    "errorMessage": self.failure,
                    "resourceIds": [self.nodegroup] if self.nodegroup else [],
                }
            ]
        return {
            "id": self.id,
            "status": "InProgress" if not done else ("Failed" if errors else "Successful"),
            "type": self.type,
            "params": self.params,
            "createdAt": self.created_at,
            "errors": errors,
        }


def param(kind: str, value: Any) -> dict[str, str]:
    """An ``UpdateParam``: strings as they are, anything else as JSON (booleans ``true``)."""
    return {"type": kind, "value": value if isinstance(value, str) else json.dumps(value)}


def _updates_of(cluster: Cluster) -> dict[str, Update]:
    return cluster.__dict__.setdefault("_gpustack_updates", {})


def start_update(
    cluster: Cluster,
    target: Any,
    kind: str,
    params: list[dict[str, str]],
    nodegroup: str | None = None,
    addon: str | None = None,
    failure: str | None = None,
) -> Update:
    """``target`` (the cluster, a node group or an add-on) goes UPDATING; returns the update.
    With ``failure`` it ends Failed and the target DEGRADED (node_join)."""
    until = begin(target, "UPDATING", TIMING.update_ms, failure)
    update = Update(str(uuid.uuid4()), kind, params, utcnow(), until, nodegroup, addon, failure)
    _updates_of(cluster)[update.id] = update
    return update


# --- errors, actions, paging ------------------------------------------------------------------


class NotFoundException(EKSError):
    """What EKS's tagging actions answer for an unknown ARN."""

    TYPE = "NotFoundException"
    STATUS = 404


def _names(cluster: str | None, nodegroup: str | None, addon: str | None) -> dict[str, Any]:
    return {"clusterName": cluster, "nodegroupName": nodegroup, "addonName": addon}


def invalid(
    message: str, cluster: str | None = None, nodegroup: str | None = None, addon: str | None = None
) -> EKSError:
    return InvalidParameterException(message=message, **_names(cluster, nodegroup, addon))


def in_use(
    message: str, cluster: str | None = None, nodegroup: str | None = None, addon: str | None = None
) -> EKSError:
    return ResourceInUseException(message=message, **_names(cluster, nodegroup, addon))


def not_found(
    message: str, cluster: str | None = None, nodegroup: str | None = None, addon: str | None = None
) -> EKSError:
    return ResourceNotFoundException(message=message, **_names(cluster, nodegroup, addon))


def eks_action(action: str, override: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Registers ``func(self: EKSResponse) -> ActionResult`` as the handler of ``action``;
    refuses to shadow a handler moto has unless ``override=True`` (as ``_ec2.ec2_action``)."""
    method = re.sub(r"(?<!^)(?=[A-Z])", "_", action).lower()

    def register(func: Callable[..., Any]) -> Callable[..., Any]:
        existing = getattr(EKSResponse, method, None)
        if existing is not None and not getattr(existing, "_gpustack_ext", False) and not override:
            raise RuntimeError(f"moto already implements EKS {action}; pass override=True to replace it")
        func._gpustack_ext = True  # type: ignore[attr-defined]
        func.__name__ = method
        setattr(EKSResponse, method, func)
        return func

    return register


def page(names: list[str], max_results: int | None, token: str | None) -> tuple[list[str], str | None]:
    """One page of sorted ``names``; the token is the last name returned (so it survives
    deletions between pages)."""
    size = MAX_PAGE if max_results is None else max_results
    if not 1 <= size <= MAX_PAGE:
        raise invalid(f"maxResults must be between 1 and {MAX_PAGE}")
    rest = [n for n in sorted(names) if not token or n > token]
    chunk = rest[:size]
    return chunk, (chunk[-1] if len(rest) > size else None)


def _body(response: EKSResponse) -> dict[str, Any]:
    return json.loads(response.body) if response.body else {}


def _ec2(backend: EKSBackend) -> Any:
    return ec2_backends[backend.account_id][backend.region_name]


# --- clusters ---------------------------------------------------------------------------------


def _vpc_of_subnets(ec2: Any, subnet_ids: list[str], cluster: str) -> str:
    """The VPC of ``subnet_ids``, which must exist, share it and span two zones."""
    if not subnet_ids:
        raise invalid("Subnets are required", cluster)
    subnets = []
    for subnet_id in subnet_ids:
        try:
            subnets.append(ec2.get_subnet(subnet_id))
        except EC2ClientError:
            raise invalid(f"The subnet ID '{subnet_id}' does not exist", cluster) from None
    vpcs = {s.vpc_id for s in subnets}
    if len(vpcs) != 1:
        raise invalid("Subnets specified must all be in the same VPC", cluster)
    if len({s.availability_zone for s in subnets}) < 2:
        raise invalid("Subnets specified must be in at least two different AZs", cluster)
    return vpcs.pop()


def _logging(current: dict[str, bool], request: dict[str, Any] | None, cluster: str) -> dict[str, bool]:
    """Log type -> enabled after applying a ``Logging`` request (unlisted types keep theirs)."""
    state = dict(current)
    for setup in (request or {}).get("clusterLogging") or []:
        for log_type in setup.get("types") or []:
            if log_type not in LOG_TYPES:
                raise invalid(f"Unknown log type {log_type!r}; valid: {', '.join(LOG_TYPES)}", cluster)
            state[log_type] = bool(setup.get("enabled", False))
    return state


def _logging_shape(state: dict[str, bool]) -> dict[str, Any]:
    """As EKS reports it: one entry of the enabled types, one of the disabled ones."""
    setups = []
    for enabled in (True, False):
        types = [t for t in LOG_TYPES if state[t] is enabled]
        if types:
            setups.append({"types": types, "enabled": enabled})
    return {"clusterLogging": setups}


def _certificate_authority() -> str:
    """Base64 of a PEM block (random DER: nothing verifies it)."""
    der = base64.b64encode(os.urandom(768)).decode()
    body = "\n".join(der[i : i + 64] for i in range(0, len(der), 64))
    pem = f"-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n"
    return base64.b64encode(pem.encode()).decode()


def _create_cluster_security_group(ec2: Any, cluster: str, vpc_id: str) -> str:
    name = f"eks-cluster-sg-{cluster}-{secrets.randbelow(10**10):010d}"
    tags = {"Name": name, "aws:eks:cluster-name": cluster, f"kubernetes.io/cluster/{cluster}": "owned"}
    return ec2.create_security_group(name, CLUSTER_SG_DESCRIPTION, vpc_id=vpc_id, tags=tags).id


def _delete_cluster_security_group(backend: EKSBackend, cluster: Cluster) -> None:
    group_id = cluster.resources_vpc_config.get("clusterSecurityGroupId")
    if not group_id:
        return
    ec2 = _ec2(backend)
    try:
        ec2.delete_security_group(group_id=group_id)
    except EC2ClientError:
        pass  # already deleted through EC2
    ec2.tags.pop(group_id, None)


def _create_cluster(self: EKSResponse) -> ActionResult:
    name = self._get_param("name")
    version = self._get_param("version") or cat.DEFAULT_KUBERNETES_VERSION
    vpc_request = self._get_param("resourcesVpcConfig") or {}
    access = self._get_param("accessConfig") or {}
    # "If you create a cluster by using the EKS API, AWS SDKs, or CloudFormation, the default is
    # CONFIG_MAP" (botocore CreateAccessConfigRequest.authenticationMode).
    mode = access.get("authenticationMode") or "CONFIG_MAP"
    bootstrap = access.get("bootstrapClusterCreatorAdminPermissions", True)
    if version not in cat.KUBERNETES_VERSIONS:
        raise invalid(
            f"Unsupported Kubernetes version {version}; supported: {', '.join(cat.KUBERNETES_VERSIONS)}", name
        )
    if mode not in AUTH_MODES:
        raise invalid(f"Unsupported authentication mode {mode}", name)
    if mode == "CONFIG_MAP" and not bootstrap:
        # EKS's answer, quoted in terraform-aws-modules/terraform-aws-eks#3026.
        raise invalid(
            "bootstrapClusterCreatorAdminPermissions must be true if cluster authentication mode is set to CONFIG_MAP",
            name,
        )
    backend = self.eks_backend
    ec2 = _ec2(backend)
    with LOCK:
        vpc_id = _vpc_of_subnets(ec2, vpc_request.get("subnetIds") or [], name)
        logging = _logging(dict.fromkeys(LOG_TYPES, False), self._get_param("logging"), name)
        cluster = backend.create_cluster(
            name=name,
            role_arn=self._get_param("roleArn"),
            resources_vpc_config={},
            version=version,
            kubernetes_network_config=self._get_param("kubernetesNetworkConfig"),
            logging=_logging_shape(logging),
            client_request_token=self._get_param("clientRequestToken"),
            tags=self._get_param("tags"),
            encryption_config=self._get_param("encryptionConfig"),
            remote_network_config=self._get_param("remoteNetworkConfig"),
        )
        public = vpc_request.get("endpointPublicAccess", True)
        cluster.resources_vpc_config = {
            "subnetIds": vpc_request["subnetIds"],
            "securityGroupIds": vpc_request.get("securityGroupIds") or [],
            "clusterSecurityGroupId": _create_cluster_security_group(ec2, name, vpc_id),
            "vpcId": vpc_id,
            "endpointPublicAccess": public,
            "endpointPrivateAccess": vpc_request.get("endpointPrivateAccess", False),
            "publicAccessCidrs": vpc_request.get("publicAccessCidrs") or ["0.0.0.0/0"],
        }
        cluster.access_config = {
            "authenticationMode": mode,
            "bootstrapClusterCreatorAdminPermissions": bootstrap,
        }
        handle = secrets.token_hex(16).upper()
        region = backend.region_name
        cluster.endpoint = f"https://{handle}.gr7.{region}.eks.amazonaws.com"
        cluster.identity = {"oidc": {"issuer": f"https://oidc.eks.{region}.amazonaws.com/id/{handle}"}}
        cluster.certificate_authority = {"data": _certificate_authority()}
        cluster.platformVersion = cat.PLATFORM_VERSION
        cluster.health = {"issues": []}
        begin(cluster, "CREATING", TIMING.cluster_create_ms)
    return ActionResult({"cluster": cluster})


def _delete_cluster(self: EKSBackend, name: str) -> Cluster:
    with LOCK:
        cluster = self.describe_cluster(name)
        if status_of(cluster) != "DELETING":
            validate_safe_to_delete(cluster)
            begin(cluster, "DELETING", TIMING.delete_ms)
            for addon in addons_of(cluster).values():
                begin(addon, "DELETING", TIMING.delete_ms)
        return cluster


# resourcesVpcConfig member -> its UpdateParam type; changing the last two is a VpcConfigUpdate.
VPC_PARAM_TYPES = {
    "endpointPublicAccess": "EndpointPublicAccess",
    "endpointPrivateAccess": "EndpointPrivateAccess",
    "publicAccessCidrs": "PublicAccessCidrs",
    "subnetIds": "Subnets",
    "securityGroupIds": "SecurityGroups",
}
VPC_NETWORK_KEYS = ("subnetIds", "securityGroupIds")
CONFIG_KINDS = ("resourcesVpcConfig", "logging", "accessConfig")


def _vpc_update(ec2: Any, cluster: Cluster, request: dict[str, Any]) -> tuple[str, list[dict[str, str]]]:
    current = cluster.resources_vpc_config
    wanted = {k: v for k, v in request.items() if k in VPC_PARAM_TYPES and v is not None}
    if "subnetIds" in wanted and _vpc_of_subnets(ec2, wanted["subnetIds"], cluster.name) != current["vpcId"]:
        raise invalid("Subnets specified must be in the cluster's VPC", cluster.name)
    if all(current.get(k) == v for k, v in wanted.items()):
        raise invalid(
            "Cluster is already at the desired configuration with endpointPrivateAccess: "
            f"{str(current['endpointPrivateAccess']).lower()} , endpointPublicAccess: "
            f"{str(current['endpointPublicAccess']).lower()}, and Public Endpoint Restrictions: "
            f"{current['publicAccessCidrs']}",
            cluster.name,
        )
    current.update(wanted)
    kind = "VpcConfigUpdate" if any(k in wanted for k in VPC_NETWORK_KEYS) else "EndpointAccessUpdate"
    return kind, [param(VPC_PARAM_TYPES[k], v) for k, v in wanted.items()]


def _logging_update(cluster: Cluster, request: dict[str, Any]) -> tuple[str, list[dict[str, str]]]:
    current = _logging(dict.fromkeys(LOG_TYPES, False), cluster.logging, cluster.name)
    wanted = _logging(current, request, cluster.name)
    if wanted == current:
        raise invalid("No changes needed for the logging config provided", cluster.name)
    cluster.logging = _logging_shape(wanted)
    return "LoggingUpdate", [param("ClusterLogging", cluster.logging["clusterLogging"])]


def _access_update(cluster: Cluster, request: dict[str, Any]) -> tuple[str, list[dict[str, str]]]:
    old = cluster.access_config["authenticationMode"]
    new = request.get("authenticationMode")
    if new not in AUTH_MODES or AUTH_MODES.index(new) <= AUTH_MODES.index(old):
        raise invalid(f"Unsupported authentication mode update from {old} to {new}", cluster.name)
    cluster.access_config["authenticationMode"] = new
    return "AccessConfigUpdate", [param("AuthenticationMode", new)]


def _update_cluster_config(self: EKSResponse) -> ActionResult:
    name = self._get_param("name")
    body = _body(self)
    unsupported = sorted(set(body) - set(CONFIG_KINDS) - {"clientRequestToken"})
    if unsupported:
        raise invalid(f"The emulator cannot update {', '.join(unsupported)}", name)
    kinds = [k for k in CONFIG_KINDS if body.get(k) is not None]
    if len(kinds) != 1:
        raise invalid("Only one type of update can be allowed.", name)
    backend = self.eks_backend
    with LOCK:
        cluster = backend.describe_cluster(name)
        require_active(cluster, f"Cluster {name}", cluster=name)
        request = body[kinds[0]]
        if kinds[0] == "resourcesVpcConfig":
            kind, params = _vpc_update(_ec2(backend), cluster, request)
        elif kinds[0] == "logging":
            kind, params = _logging_update(cluster, request)
        else:
            kind, params = _access_update(cluster, request)
        update = start_update(cluster, cluster, kind, params)
    return ActionResult({"update": update.shape()})


def _next_minor(version: str) -> str | None:
    try:
        major, minor = cat.minor(version)
    except ValueError:
        return None
    return f"{major}.{minor + 1}"


def _update_cluster_version(self: EKSResponse) -> ActionResult:
    name = self._get_param("name")
    version = self._get_param("version")
    with LOCK:
        cluster = self.eks_backend.describe_cluster(name)
        require_active(cluster, f"Cluster {name}", cluster=name)
        if version != _next_minor(cluster.version) or version not in cat.KUBERNETES_VERSIONS:
            raise invalid(
                f"Unsupported Kubernetes minor version update from {cluster.version} to {version}", name
            )
        cluster.version = version
        cluster.platformVersion = cat.PLATFORM_VERSION
        update = start_update(
            cluster,
            cluster,
            "VersionUpdate",
            [param("Version", version), param("PlatformVersion", cat.PLATFORM_VERSION)],
        )
    return ActionResult({"update": update.shape()})


def _describe_update(self: EKSResponse) -> ActionResult:
    name = self._get_param("name")
    update_id = self._get_param("updateId")
    nodegroup = self._get_param("nodegroupName")
    addon = self._get_param("addonName")
    with LOCK:
        cluster = self.eks_backend.describe_cluster(name)
        update = _updates_of(cluster).get(update_id)
    # An update belongs to its cluster, node group or add-on: asked in another scope, it is unknown.
    if update is None or (update.nodegroup, update.addon) != (nodegroup, addon):
        raise not_found(f"No update found for ID: {update_id}", name, nodegroup, addon)
    return ActionResult({"update": update.shape()})


# --- node groups ------------------------------------------------------------------------------


def _template_data(ec2: Any, template: dict[str, str] | None) -> dict[str, Any]:
    """The launch template data a node group runs now ({} without a template, or if it is gone)."""
    if not template:
        return {}
    try:
        return dict(ec2.get_launch_template(template["id"]).get_version(template["version"]).data)
    except EC2ClientError:
        return {}


def _launch_template(ec2: Any, spec: dict[str, Any], cluster: str) -> tuple[dict[str, str], dict[str, Any]]:
    """``{id, name, version}`` of an EKS ``LaunchTemplateSpecification``, and that version's data."""
    template_id, name = spec.get("id"), spec.get("name")
    if bool(template_id) == bool(name):
        raise invalid("Specify either the launch template id or its name, not both", cluster)
    try:
        template = (
            ec2.get_launch_template(template_id) if template_id else ec2.get_launch_template_by_name(name)
        )
        version = template.get_version(spec.get("version") or template.default_version_number)
    except EC2ClientError as e:
        raise invalid(f"Launch template {template_id or name}: {e.message}", cluster) from None
    return {"id": template.id, "name": template.name, "version": str(version.number)}, version.data


def _release(ami_type: str, k8s: str, wanted: str | None, cluster: str, image_id: str | None = None) -> str | None:
    """The release version for a node group: ``wanted`` if EKS has it, else the newest.

    A custom AMI (``image_id`` in the template, amiType CUSTOM): botocore
    ``CreateNodegroupRequest.releaseVersion`` / ``UpdateNodegroupVersionRequest.releaseVersion``:
    "If you specify launchTemplate, and your launch template uses a custom AMI, then don't
    specify releaseVersion, or the node group deployment/update will fail"; and
    ``Nodegroup.releaseVersion``: "If the node group was deployed using a launch template with
    a custom AMI, then this is the AMI ID that was specified in the launch template".
    """
    if ami_type == "CUSTOM":
        if wanted is not None:
            raise invalid(
                "You cannot specify a release version for a node group whose launch template uses a custom AMI",
                cluster,
            )
        return image_id
    if ami_type.startswith("AL2_") and not cat.has_al2(k8s):
        raise invalid(
            f"AMI Type {ami_type} is only supported for kubernetes versions {cat.AL2_LAST_VERSION} or earlier",
            cluster,
        )
    releases = cat.node_releases(ami_type, k8s)
    if wanted is None:
        return releases[0] if releases else None
    if wanted not in releases:
        raise invalid(
            f"Requested release version {wanted} is not valid for kubernetes version {k8s}.", cluster
        )
    return wanted


def _nodegroup_version(cluster: Cluster, wanted: str | None) -> str:
    version = wanted or cluster.version
    try:
        newer = cat.minor(version) > cat.minor(cluster.version)
    except ValueError:
        newer = True
    if newer:
        raise invalid(
            f"Requested Nodegroup Kubernetes version {version} is not supported with cluster version {cluster.version}",
            cluster.name,
        )
    return version


def _create_nodegroup(self: EKSResponse) -> ActionResult:
    cluster_name = self._get_param("name")
    nodegroup_name = self._get_param("nodegroupName")
    capacity_type = self._get_param("capacityType") or "ON_DEMAND"
    instance_types = self._get_param("instanceTypes")
    spec = self._get_param("launchTemplate")
    if capacity_type not in CAPACITY_TYPES:
        raise invalid(f"Unsupported capacity type {capacity_type}", cluster_name, nodegroup_name)
    backend = self.eks_backend
    with LOCK:
        cluster = backend.describe_cluster(cluster_name)
        template, data = _launch_template(_ec2(backend), spec, cluster_name) if spec else (None, {})
        ami_type = self._get_param("amiType") or ("CUSTOM" if data.get("ImageId") else DEFAULT_AMI_TYPE)
        if data.get("ImageId") and ami_type != "CUSTOM":
            raise invalid(
                "You cannot specify an AMI Type other than CUSTOM, when specifying an image id in your launch template",
                cluster_name,
                nodegroup_name,
            )
        if instance_types and data.get("InstanceType"):
            raise invalid(
                "Instance type is specified both in the launch template and in instanceTypes",
                cluster_name,
                nodegroup_name,
            )
        version = _nodegroup_version(cluster, self._get_param("version"))
        release = _release(ami_type, version, self._get_param("releaseVersion"), cluster_name, data.get("ImageId"))
        # Decided now (node_join.py), shown when the create timer ends.
        failure = node_join.join_failure(_ec2(backend), cluster, self._get_param("subnets") or [], ami_type, data)
        # moto checks the name, the cluster's status, diskSize/remoteAccess against a template, the role.
        nodegroup = backend.create_nodegroup(
            cluster_name=cluster_name,
            node_role=self._get_param("nodeRole"),
            nodegroup_name=nodegroup_name,
            subnets=self._get_param("subnets"),
            scaling_config=dict(self._get_param("scalingConfig") or DEFAULT_SCALING_CONFIG),
            disk_size=self._get_int_param("diskSize"),
            remote_access=self._get_param("remoteAccess"),
            labels=self._get_param("labels"),
            taints=self._get_param("taints"),
            tags=self._get_param("tags"),
            client_request_token=self._get_param("clientRequestToken"),
            launch_template=template,
            capacity_type=capacity_type,
        )
        # moto fills in defaults EKS does not have (remote access to key "eksKeypair", Kubernetes
        # 1.19, ...): set what EKS reports.
        nodegroup.ami_type = ami_type
        nodegroup.version = version
        nodegroup.release_version = release
        nodegroup.launch_template = template
        nodegroup.remote_access = self._get_param("remoteAccess")
        nodegroup.disk_size = self._get_int_param("diskSize") or (None if template else DEFAULT_DISK_SIZE)
        nodegroup.instance_types = instance_types or (
            None if data.get("InstanceType") else list(DEFAULT_INSTANCE_TYPES)
        )
        nodegroup.update_config = self._get_param("updateConfig") or {"maxUnavailable": 1}
        nodegroup.node_repair_config = self._get_param("nodeRepairConfig")
        nodegroup.health = {"issues": []}
        begin(nodegroup, "CREATING", TIMING.nodegroup_create_ms, failure)
    return ActionResult({"nodegroup": nodegroup})


def _delete_nodegroup(self: EKSBackend, cluster_name: str, nodegroup_name: str) -> Nodegroup:
    with LOCK:
        nodegroup = self.describe_nodegroup(cluster_name, nodegroup_name)
        if status_of(nodegroup) != "DELETING":
            begin(nodegroup, "DELETING", TIMING.delete_ms)
        return nodegroup


def _list_nodegroups(
    self: EKSBackend, cluster_name: str, max_results: int, next_token: str | None
) -> tuple[list[str], str | None]:
    return page(list(self.describe_cluster(cluster_name).nodegroups), max_results, next_token)


_orig_update_nodegroup_config = EKSBackend.update_nodegroup_config


def _update_nodegroup_config(
    self: EKSBackend,
    cluster_name: str,
    nodegroup_name: str,
    labels: dict[str, Any] | None = None,
    taints: dict[str, Any] | None = None,
    scaling_config: dict[str, int] | None = None,
    update_config: dict[str, Any] | None = None,
    node_repair_config: dict[str, Any] | None = None,
    client_request_token: str | None = None,
) -> dict[str, Any]:
    with LOCK:
        cluster = self.describe_cluster(cluster_name)
        nodegroup = self.describe_nodegroup(cluster_name, nodegroup_name)
        require_active(
            nodegroup, f"Nodegroup {nodegroup_name}", cluster=cluster_name, nodegroup=nodegroup_name
        )
        # moto applies the changes; its answer (already Successful, not kept) is replaced.
        _orig_update_nodegroup_config(
            self,
            cluster_name,
            nodegroup_name,
            labels,
            taints,
            scaling_config,
            update_config,
            node_repair_config,
        )
        params = []
        for key, kind in (("addOrUpdateLabels", "LabelsToAdd"), ("removeLabels", "LabelsToRemove")):
            if (labels or {}).get(key):
                params.append(param(kind, labels[key]))  # type: ignore[index]
        for key, kind in (("addOrUpdateTaints", "TaintsToAdd"), ("removeTaints", "TaintsToRemove")):
            if (taints or {}).get(key):
                params.append(param(kind, taints[key]))  # type: ignore[index]
        for key, kind in (("minSize", "MinSize"), ("maxSize", "MaxSize"), ("desiredSize", "DesiredSize")):
            if (scaling_config or {}).get(key) is not None:
                params.append(param(kind, str(scaling_config[key])))  # type: ignore[index]
        for key, kind in (
            ("maxUnavailable", "MaxUnavailable"),
            ("maxUnavailablePercentage", "MaxUnavailablePercentage"),
        ):
            if (update_config or {}).get(key) is not None:
                params.append(param(kind, str(update_config[key])))  # type: ignore[index]
        if node_repair_config is not None:
            params.append(param("NodeRepairEnabled", bool(node_repair_config.get("enabled"))))
        return start_update(cluster, nodegroup, "ConfigUpdate", params, nodegroup=nodegroup_name).shape()


def _update_nodegroup_version(self: EKSResponse) -> ActionResult:
    cluster_name = self._get_param("name")
    nodegroup_name = self._get_param("nodegroupName")
    spec = self._get_param("launchTemplate")
    backend = self.eks_backend
    with LOCK:
        cluster = backend.describe_cluster(cluster_name)
        nodegroup = backend.describe_nodegroup(cluster_name, nodegroup_name)
        require_active(
            nodegroup, f"Nodegroup {nodegroup_name}", cluster=cluster_name, nodegroup=nodegroup_name
        )
        node_join.check_capacity_block_upgrade(nodegroup, cluster_name)
        params = []
        data = _template_data(_ec2(backend), nodegroup.launch_template)
        if spec:
            if nodegroup.launch_template is None:
                raise invalid(
                    "The node group was not created with a launch template", cluster_name, nodegroup_name
                )
            template, data = _launch_template(_ec2(backend), spec, cluster_name)
            if template["id"] != nodegroup.launch_template["id"]:
                raise invalid(
                    "You cannot specify a different launch template than the one the node group was created with",
                    cluster_name,
                    nodegroup_name,
                )
            nodegroup.launch_template = template
            params += [
                param("LaunchTemplateName", template["name"]),
                param("LaunchTemplateVersion", template["version"]),
            ]
        # botocore `UpdateNodegroupVersionRequest.version`: "If you specify launchTemplate, and
        # your launch template uses a custom AMI, then don't specify version, or the node group
        # update will fail".
        if nodegroup.ami_type == "CUSTOM" and self._get_param("version"):
            raise invalid(
                "You cannot specify a Kubernetes version for a node group whose launch template uses a custom AMI",
                cluster_name,
                nodegroup_name,
            )
        # Without a version EKS moves the group to the cluster's, and to its newest release.
        version = _nodegroup_version(cluster, self._get_param("version"))
        release = _release(
            nodegroup.ami_type, version, self._get_param("releaseVersion"), cluster_name, data.get("ImageId")
        )
        nodegroup.version = version
        params.append(param("Version", version))
        if release is not None:
            nodegroup.release_version = release
            params.append(param("ReleaseVersion", release))
        nodegroup.modified_at = utcnow()
        failure = node_join.join_failure(_ec2(backend), cluster, nodegroup.subnets or [], nodegroup.ami_type, data)
        update = start_update(
            cluster, nodegroup, "VersionUpdate", params, nodegroup=nodegroup_name, failure=failure
        )
    return ActionResult({"update": update.shape()})


# --- tags -------------------------------------------------------------------------------------


def _taggable(backend: EKSBackend, arn: str) -> Any:
    for cluster in backend.clusters.values():
        if cluster.arn == arn:
            return cluster
        children = [
            *((n.arn, n) for n in cluster.nodegroups.values()),
            *((f.fargate_profile_arn, f) for f in cluster.fargate_profiles.values()),
            *((a.arn, a) for a in addons_of(cluster).values()),
        ]
        for child_arn, child in children:
            if child_arn == arn:
                return child
    raise NotFoundException(message="Resource was not found")


def _tag_resource(self: EKSBackend, resource_arn: str, tags: dict[str, str]) -> None:
    with LOCK:
        _taggable(self, resource_arn).tags.update(tags)


def _untag_resource(self: EKSBackend, resource_arn: str, tag_keys: list[str] | str) -> None:
    keys = [tag_keys] if isinstance(tag_keys, str) else tag_keys
    with LOCK:
        tags = _taggable(self, resource_arn).tags
        for key in keys:
            tags.pop(key, None)


def _list_tags_for_resource(self: EKSBackend, resource_arn: str) -> dict[str, str]:
    with LOCK:
        return dict(_taggable(self, resource_arn).tags)


def install() -> None:
    for path in ROUTES:
        eks_urls.url_paths.setdefault(path, EKSResponse.dispatch)
    Cluster.status = property(status_of, _ignore_status)  # type: ignore[assignment]
    Nodegroup.status = property(status_of, _ignore_status)  # type: ignore[assignment]
    Nodegroup.health = property(_nodegroup_health, _set_nodegroup_health)  # type: ignore[assignment]
    EKSResponse.call_action = _call_action  # type: ignore[method-assign]
    EKSBackend.delete_cluster = _delete_cluster  # type: ignore[method-assign]
    EKSBackend.delete_nodegroup = _delete_nodegroup  # type: ignore[method-assign]
    EKSBackend.list_nodegroups = _list_nodegroups  # type: ignore[method-assign]
    EKSBackend.update_nodegroup_config = _update_nodegroup_config  # type: ignore[method-assign]
    EKSBackend.tag_resource = _tag_resource  # type: ignore[method-assign]
    EKSBackend.untag_resource = _untag_resource  # type: ignore[method-assign]
    EKSBackend.list_tags_for_resource = _list_tags_for_resource  # type: ignore[method-assign]
    eks_action("CreateCluster", override=True)(_create_cluster)
    eks_action("UpdateClusterConfig", override=True)(_update_cluster_config)
    eks_action("UpdateClusterVersion")(_update_cluster_version)
    eks_action("DescribeUpdate")(_describe_update)
    eks_action("CreateNodegroup", override=True)(_create_nodegroup)
    eks_action("UpdateNodegroupVersion")(_update_nodegroup_version)
    route("POST", "/_gpustack/eks")(_control)
    on_reset(_reset_timing)
