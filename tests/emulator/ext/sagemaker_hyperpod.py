"""SageMaker HyperPod clusters with an Amazon EKS orchestrator: CreateCluster, DescribeCluster,
UpdateCluster, DeleteCluster, ListClusters, ListClusterNodes, DescribeClusterNode, and tags on
cluster (and training-plan) ARNs.

moto 5.2.5 has HyperPod clusters but drops ``Orchestrator``, has no UpdateCluster, answers
InService at once, answers ValidationException (not ResourceNotFound) for an unknown cluster,
crashes without ``ThreadsPerCore``/``LifeCycleConfig`` and names its ARNs after the cluster name.
This module replaces those handlers; clusters live in the extension's own per-account/region
store (so ``POST /moto-api/reset`` drops them). Wire shapes are botocore 1.44.5's (sagemaker
2017-07-24): ``CreateClusterRequest``, ``ClusterInstanceGroupSpecification``,
``DescribeClusterResponse``, ``ClusterInstanceGroupDetails``, ``ClusterSummary``,
``ClusterNodeSummary``, ``ClusterNodeDetails``.

Sources: [API] the SageMaker API Reference (CreateCluster, UpdateCluster, DeleteCluster,
ClusterInstanceGroupSpecification, ClusterEbsVolumeConfig, ClusterLifeCycleConfig) and botocore's
copy of its documentation; [DG-eks] SageMaker Developer Guide "Getting started with Amazon EKS
support in SageMaker HyperPod" (sagemaker-hyperpod-eks-prerequisites); [DG-prereq] "Prerequisites
for using SageMaker HyperPod" (quotas, custom VPC, multiple AZs); [DG-update] "Updating SageMaker
HyperPod cluster configuration" (sagemaker-hyperpod-eks-operate-cli-command-update-cluster);
[DG-scale] "Scaling down a SageMaker HyperPod cluster" (smcluster-scale-down); [DG-taints]
"Custom labels and taints" (sagemaker-hyperpod-eks-custom-labels-and-taints); [DG-tp]
"Training plans utilization for Amazon SageMaker HyperPod clusters"; [DG-details] "View training
plan details"; [DG-iam] "AWS Identity and Access Management for SageMaker HyperPod".

Clusters
--------

* ``ClusterArn`` is ``arn:<partition>:sagemaker:<region>:<account>:cluster/<id>``, ``<id>`` 12
  random ``[a-z0-9]`` (the model's ``ClusterArn`` pattern); every operation takes the name or the
  ARN. A name is unique in the account and region while its cluster exists (also while Deleting):
  ``ResourceInUse`` "Resource Already Exists: Cluster with name <name> already exists. Choose a
  different name." (moto's wording).
* Timed status, evaluated when read (every SageMaker request first settles what has finished; no
  threads): ``Creating`` for ``cluster_create_ms``, ``Updating`` for ``cluster_update_ms`` after
  UpdateCluster, ``Deleting`` for ``cluster_delete_ms`` after DeleteCluster, then gone
  (DescribeCluster ``ResourceNotFound``, ListClusters leaves it out); ``InService`` otherwise.
* An unknown cluster is ``ResourceNotFound`` "Cluster <name> not found." for DescribeCluster,
  UpdateCluster, DeleteCluster, ListClusterNodes and DescribeClusterNode (the errors the model
  lists; wording unverified).
* ``NodeRecovery`` ``Automatic`` or ``None``; omitted it is ``Automatic`` (the AWS samples'
  CloudFormation default; the API Reference names no default, unverified); ``Tags`` (at most 50;
  ``aws:`` keys refused).
* Not emulated (501 ``NotImplemented``): ``RestrictedInstanceGroups(Config)``,
  ``NodeProvisioningMode``, ``AutoScaling``, ``ClusterRole``, ``TieredStorageConfig``, a Slurm
  ``Orchestrator`` configuration, and per group ``InstanceRequirements``,
  ``CapacityRequirements``, ``MinInstanceCount``, ``ScheduledUpdateConfig``, ``ImageId``,
  ``ImageReleaseVersion``, ``AutoPatchConfig``, ``SlurmConfig``, ``NetworkInterface``. A cluster
  without ``Orchestrator`` (Slurm, as moto had it) is still accepted with the generic checks.

The EKS orchestrator (CreateCluster; ``ValidationException``, wordings unverified unless quoted)
-------------------------------------------------------------------------------------------------

* ``Orchestrator`` must hold exactly one of ``Eks`` / ``Slurm`` ("Specifying both or providing an
  empty configuration returns a validation error", [API]).
* ``Eks.ClusterArn`` must name an EKS cluster of this account and region ("you need a running
  Amazon EKS cluster", "you should create an Amazon EKS cluster before creating a HyperPod cluster
  to associate with", [DG-eks]) that is ``ACTIVE`` in eks.py's lifecycle.
* Its ``accessConfig.authenticationMode`` must be ``API`` or ``API_AND_CONFIG_MAP`` ("The
  authentication mode of an Amazon EKS cluster supported by SageMaker HyperPod are API and
  API_AND_CONFIG_MAP", [DG-eks]); ``CONFIG_MAP`` (the EKS API default) is refused.
* Its Kubernetes version must be 1.30-1.35 ("SageMaker HyperPod supports Kubernetes versions
  1.30, 1.31, 1.32, 1.33, 1.34, and 1.35", [DG-eks]; an older revision of the page said
  1.28-1.33).
* ``VpcConfig`` is required ("VPC configuration is mandatory for Amazon EKS orchestration",
  [DG-prereq]); its subnets and security groups (and every ``OverrideVpcConfig``'s) must exist
  in this account and region, the subnets must share one VPC and the security groups must be in
  it (an ENI cannot join a group of another VPC). That they are in the EKS cluster's VPC is NOT
  checked: only third-party guides say so. Private subnets ([DG-eks]: "must be private") are not
  checked either. ``OverrideVpcConfig`` on a cluster without ``Orchestrator`` needs a cluster
  ``VpcConfig`` ([DG-prereq], Slurm).
* UpdateCluster cannot change the EKS cluster ("You cannot change the EKS cluster information
  that your HyperPod cluster is associated after the cluster is created", [DG-update]).
* HyperPod's effects on the EKS side: HyperPod makes EKS access entries "on your behalf" (botocore
  ``ClusterMetadata.SlrAccessEntry``: "The Service-Linked Role (SLR) associated with the cluster.
  This is created by HyperPod on your behalf and only applies for EKS orchestrated clusters";
  ``EksRoleAccessEntries``: "A list of Amazon EKS IAM role ARNs associated with the cluster. This
  is created by HyperPod on your behalf"; the cluster-admin policy of [DG-iam] grants
  ``eks:CreateAccessEntry`` / ``eks:AssociateAccessPolicy`` and ``iam:CreateServiceLinkedRole``
  for CreateCluster). Emulated through eks_access.py's store at CreateCluster (and UpdateCluster
  for new execution roles): the IAM role ``AWSServiceRoleForSageMakerHyperPod`` (path
  ``/aws-service-role/hyperpod.sagemaker.amazonaws.com/``, made when missing) gets a ``STANDARD``
  entry with ``AmazonSagemakerHyperpodClusterPolicy`` at cluster scope, each execution role a
  ``HYPERPOD_LINUX`` entry (the EKS type "for Amazon SageMaker HyperPod"); a principal that already
  has an entry keeps it. So a stack's own CreateAccessEntry for an execution role is
  ``ResourceInUseException`` (409) afterwards, as EKS answers a second entry. The entry types,
  the policy and the removal of the entries once the cluster is gone (unless another HyperPod
  cluster on the EKS cluster uses the principal) are UNVERIFIED. moto took a request's region from
  any ``.<x>.amazonaws.com`` in its URL, the path included, so an EKS access-entry call naming the
  service-linked role (``.../hyperpod.sagemaker.amazonaws.com/...``) failed with a 500; this module
  makes moto read the region from the host only (then the SigV4 credential scope), for every
  service.

Instance groups (CreateCluster and new groups of UpdateCluster; ``ValidationException``)
-----------------------------------------------------------------------------------------

* ``InstanceGroups`` is required (the RestrictedInstanceGroups alternative is not emulated), at most
  20 per cluster ("up to 20 instance groups", DG "Creating a SageMaker HyperPod cluster" for EKS;
  the model allows 100); names unique in the request and the cluster.
* ``InstanceType`` is required (``InstanceRequirements`` is the documented alternative, mutually
  exclusive with it, [API]; not emulated).
* ``LifeCycleConfig`` with ``SourceS3Uri`` and ``OnCreate`` is required (API Reference
  ``ClusterLifeCycleConfig``: both "Required: Yes"; botocore 1.44.5 marks them optional and
  whether AWS now accepts an EKS group without lifecycle scripts is unverified, so the stricter
  rule stays). A ``SourceS3Uri`` bucket not named ``sagemaker-*`` is accepted: moto refused it,
  but the API Reference's "Make sure that the S3 bucket path starts with s3://sagemaker-" is
  advice about the managed ``AmazonSageMakerClusterInstanceRolePolicy`` (it only reads
  ``arn:aws:s3:::sagemaker-*``), and AWS's own samples take any bucket name and grant the
  execution role access to it (awsome-distributed-training ``sagemaker-iam-role-stack.yaml``
  ``S3BucketName``).
* ``ExecutionRole`` must be an existing IAM role of the account (unverified that AWS checks it at
  the API; PassRole needs it to exist).
* ``ThreadsPerCore`` optional; ``OnStartDeepHealthChecks`` only on GPU or Trainium types
  (``ml.p*``, ``ml.g*``, ``ml.trn*``: "The HyperPod deep health check and health monitoring agent
  supports GPU and Trn instances", [DG-eks]) and never with ``KubernetesConfig.Taints`` ("You
  cannot add custom taints to nodes in instance groups with DeepHealthChecks turned on",
  [DG-eks]).
* ``InstanceStorageConfigs``: an ``EbsVolumeConfig`` with ``RootVolume`` true must not give
  ``VolumeSizeInGB`` and must give ``VolumeKmsKeyId``; otherwise ``VolumeSizeInGB`` is required
  (API Reference ``ClusterEbsVolumeConfig``).
* ``KubernetesConfig`` (Labels, Taints) only on an EKS cluster (unverified); label and taint keys
  under the reserved prefixes ``kubernetes.io/``, ``k8s.io/``, ``sagemaker.amazonaws.com/``,
  ``eks.amazonaws.com/``, ``k8s.aws/``, ``karpenter.sh/`` (and their subdomains, e.g.
  ``node.kubernetes.io/``) are refused ([DG-taints]; wording unverified). Stored and answered as
  ``DesiredLabels``/``DesiredTaints`` at once and ``CurrentLabels``/``CurrentTaints`` once the
  group is InService (declarative: an update replaces the whole set, [DG-taints]).
* ``TrainingPlanArn``: the plan must exist in this account and region, be ``Scheduled`` or
  ``Active`` ("The training plan you use with a HyperPod cluster must have a status of Scheduled
  or Active", [DG-tp]), target ``hyperpod-cluster`` ("A training plan for HyperPod clusters can be
  used exclusively to provide compute resources to a cluster's instance group", API Reference
  ``TrainingPlanOffering``), have the group's instance type, have room for the group's count
  (total minus what other instance groups use), and its Availability Zone must be the AZ of every one
  of the group's subnets (``OverrideVpcConfig``, else the cluster's ``VpcConfig``) ("Make sure
  your cluster's configuration matches the Availability Zone (AZ) specified in the training plan",
  [DG-tp]; HyperPod "selects a subnet from the provided VpcConfig's subnet list. All instance
  groups inherit the subnet's AZ", [DG-prereq], and which one it picks is undocumented, so the
  emulator refuses subnets in several zones with a plan: stricter than "one of them").
  Wordings unverified.
* Quotas (``ResourceLimitExceeded``, SageMaker's job-quota wording "The account-level service limit
  '<name>' is N Instances, with current utilization of U Instances and a request delta of D
  Instances. ...", unverified for clusters), applied values from service_quotas.py: "ml.<type> for
  cluster usage" across every cluster of the account and region (training-plan groups included),
  "Maximum number instances allowed per SageMaker HyperPod cluster", "Total number of instances
  allowed across SageMaker HyperPod clusters", and "Maximum size of EBS volume in GB for a SageMaker
  HyperPod cluster instance" ([DG-prereq] "SageMaker HyperPod quotas"). A request that does not
  raise a total is not refused. Types without a "for cluster usage" row in service_quotas.py are
  not limited.

UpdateCluster
-------------

* The cluster must be ``InService``: ``ConflictException`` "Cluster <name> is in <status> status;
  it must be InService to be updated." (the model lists ConflictException; wording unverified).
* ``InstanceGroups``: a name the cluster has updates that group, a new name adds one ([DG-update]).
  For an existing group ``InstanceType``, ``ExecutionRole`` and ``ThreadsPerCore`` must stay as
  created ("you must match the instance type you initially specified", "keep using the same IAM
  role", "keep using the same value you specified during cluster creation", [DG-update]) and
  ``OverrideVpcConfig`` too ("Cannot be modified after the instance group is created",
  [DG-prereq]); ``InstanceCount`` may go up or down to 0, ``LifeCycleConfig``,
  ``KubernetesConfig``, ``InstanceStorageConfigs``, ``OnStartDeepHealthChecks`` and
  ``TrainingPlanArn`` may change (with the checks above; "You can add, update, or remove a training
  plan by updating the instance group of an existing cluster", DG
  use-training-plan-for-hyperpod-update-using-api-cli-sdk). A new group needs ``InstanceCount`` >= 1
  ("To add a new instance group, specify an integer greater or equal to 1", [DG-update]). Groups
  the request does not name stay as they are.
* ``InstanceGroupsToDelete``: existing groups only, not also listed in ``InstanceGroups`` ("ensure
  that the specifications of the instance groups you are removing are no longer listed"), and not
  every group ("Your SageMaker HyperPod cluster must always maintain at least one instance group",
  [DG-scale]). An update that changes nothing is ``ValidationException``.
* The cluster is ``Updating`` for ``cluster_update_ms``; changed groups ``Updating`` (their
  ``CurrentCount`` and current labels/taints stay at the old values until then), new ones
  ``Creating``, deleted ones ``Deleting`` and then gone.

DeleteCluster
-------------

``Deleting`` for ``cluster_delete_ms``, then gone. While the cluster is ``Creating``, ``Updating``
or already ``Deleting`` it is ``ConflictException`` (the model lists it; whether AWS refuses
deleting a Creating cluster is unverified, the emulator takes the strict side).

Instance counts
---------------

A group's ``TargetCount`` is its asked count; ``CurrentCount`` is 0 while it is Creating, the old
target while Updating/Deleting, else the target; for a group on a training plan it is 0 unless the
plan is ``Active`` ("the instance group status appears as InService once created", [DG-details];
instances run from the plan's start). ``TrainingPlanStatus`` is the plan's status. ListClusterNodes
lists ``CurrentCount`` nodes per group (``i-`` + 17 hex digits, stable per cluster/group/index,
``Running``), filters ``InstanceGroupNameContains``, ``CreationTimeAfter``/``Before``, sorts
``CREATION_TIME`` | ``NAME`` ("The default value is CREATION_TIME", ``SortOrder`` "The default
value is Ascending", [API]), pages with ``MaxResults``/``NextToken``; DescribeClusterNode finds
them by ``NodeId`` (unknown: ``ResourceNotFound``; by ``NodeLogicalId``: 501).

ListClusters: ``NameContains``, ``CreationTimeAfter``/``Before``, ``TrainingPlanArn``, ``SortBy``
``CREATION_TIME`` | ``NAME`` and ``SortOrder`` with the same documented defaults, ``MaxResults``
1-100 / ``NextToken`` (a page holds up to MaxResults matching clusters; AWS's MaxResults counts
clusters evaluated, "not necessarily the number of matching items"); summaries carry
``TrainingPlanArns``.

Tags (AddTags / DeleteTags / ListTags, this module's handlers for every SageMaker ARN): a cluster
or training-plan ARN of this account and region is answered here ("Adds or overwrites", at most 50
tags, ``aws:`` keys refused; AddTags answers the tags it was given; an unknown cluster or
training-plan ARN is ``ValidationException`` "Could not find resource <arn>."); any other ARN goes
to moto.

Control endpoint (JSON; global; ``POST /moto-api/reset`` restores the defaults):
``POST /_gpustack/sagemaker?cluster_create_ms=N&cluster_update_ms=N&cluster_delete_ms=N&omit_target_count=0|1``
sets any subset and answers all four (defaults 1500, 500, 500, 0); ``GET`` reads them.
``omit_target_count=1`` makes DescribeCluster leave ``TargetCount`` out of every group (botocore
``ClusterInstanceGroupDetails`` marks no member required, so clients must cope). An unknown
name or a value that is not an integer >= 0 is ``400 {"error": ...}``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import secrets
import string
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable
from urllib.parse import urlsplit

from moto.core.responses import ActionResult, BaseResponse, EmptyResult
from moto.eks.models import eks_backends
from moto.iam.models import iam_backends

from . import capacity_control
from . import eks as eks_ext
from . import sagemaker_training_plans as tp
from . import service_quotas as sq
from ._sagemaker import (
    LOCK,
    Conflict,
    InUse,
    Invalid,
    LimitExceeded,
    NotFound,
    SageMakerResponse,
    backend_of,
    ec2_of,
    int_settings,
    page,
    partition_of,
    sagemaker_action,
    state,
    tag_dict,
    tag_list,
    to_utc,
    utcnow,
)
from . import eks_access
from .eks_access import principal_exists

HYPERPOD_KUBERNETES = ("1.30", "1.31", "1.32", "1.33", "1.34", "1.35")
API_MODES = ("API", "API_AND_CONFIG_MAP")
ACCELERATED = re.compile(r"^ml\.(p|g|trn)[0-9]")
EKS_ARN = re.compile(r"^arn:(aws[a-z-]*):eks:([a-z0-9-]*):(\d{12}):cluster/(.+)$")
RESOURCE_ARN = re.compile(r"^arn:(aws[a-z-]*):sagemaker:([a-z0-9-]*):(\d{12}):(cluster|training-plan)/(.+)$")
MAX_TAGS = 50
SLR_SERVICE = "hyperpod.sagemaker.amazonaws.com"
SLR_NAME = "AWSServiceRoleForSageMakerHyperPod"
SLR_POLICY = "AmazonSagemakerHyperpodClusterPolicy"
MAX_GROUPS = 20  # "up to 20 instance groups" (DG create-cluster page; the model allows 100)
# Label/taint key domains HyperPod and Kubernetes keep ([DG-taints]); subdomains included.
RESERVED_DOMAINS = ("kubernetes.io", "k8s.io", "sagemaker.amazonaws.com", "eks.amazonaws.com", "k8s.aws", "karpenter.sh")

# Members accepted by the model that this emulator does not model (501 NotImplemented).
CLUSTER_NOT_EMULATED = (
    "RestrictedInstanceGroups",
    "RestrictedInstanceGroupsConfig",
    "NodeProvisioningMode",
    "AutoScaling",
    "ClusterRole",
    "TieredStorageConfig",
)
GROUP_NOT_EMULATED = (
    "CapacityRequirements",
    "MinInstanceCount",
    "ScheduledUpdateConfig",
    "ImageId",
    "ImageReleaseVersion",
    "AutoPatchConfig",
    "SlurmConfig",
    "NetworkInterface",
)
# Fields of an existing instance group UpdateCluster must leave as they are.
FROZEN = ("InstanceType", "ExecutionRole", "ThreadsPerCore", "OverrideVpcConfig")


# --- timing and the control endpoint -------------------------------------------------------------


@dataclass
class Timing:
    cluster_create_ms: int = 1500
    cluster_update_ms: int = 500
    cluster_delete_ms: int = 500
    # 1: DescribeCluster leaves ``TargetCount`` out of every group (botocore 1.44.8
    # ``ClusterInstanceGroupDetails`` has no required member, so a client must not depend on it).
    omit_target_count: int = 0


TIMING = Timing()


def _control_get(query: dict[str, str]) -> tuple[int, Any]:
    with LOCK:
        return 200, asdict(TIMING)


def _control(query: dict[str, str]) -> tuple[int, Any]:
    changes = int_settings(query, asdict(TIMING))
    with LOCK:
        for name, value in changes.items():
            setattr(TIMING, name, value)
        return 200, asdict(TIMING)


def _reset_timing() -> None:
    with LOCK:
        for name, value in asdict(Timing()).items():
            setattr(TIMING, name, value)


# --- model ---------------------------------------------------------------------------------------


@dataclass
class Group:
    name: str
    spec: dict[str, Any]  # the request's ClusterInstanceGroupSpecification, InstanceCount removed
    target: int
    launched: Any  # naive UTC datetime the group was added
    pending: str | None = None  # Creating | Updating | Deleting while the cluster's phase runs
    old_spec: dict[str, Any] | None = None  # before the pending update (None: new group)
    old_target: int = 0


@dataclass
class Phase:
    status: str  # Creating | Updating | Deleting
    until: float  # time.monotonic() deadline


@dataclass
class HyperPodCluster:
    name: str
    cluster_id: str
    arn: str
    account_id: str
    region: str
    created: Any
    orchestrator: dict[str, Any] | None
    vpc_config: dict[str, Any] | None
    node_recovery: str
    tags: dict[str, str]
    groups: dict[str, Group] = field(default_factory=dict)
    phase: Phase | None = None
    access_entries: list[str] = field(default_factory=list)  # principals whose EKS entry HyperPod made

    @property
    def eks(self) -> bool:
        return bool(self.orchestrator and "Eks" in self.orchestrator)

    def status(self) -> str:
        if self.phase is not None and (self.phase.status == "Deleting" or time.monotonic() < self.phase.until):
            return self.phase.status
        return "InService"


def clusters_of(backend: Any) -> dict[str, HyperPodCluster]:
    """name -> cluster of an account and region."""
    return state(backend, "hyperpod_clusters", dict)


def _settle(backend: Any) -> None:
    """Applies every phase whose time is over (this is where the lazy statuses take effect)."""
    clusters = clusters_of(backend)
    now = time.monotonic()
    for name, cluster in list(clusters.items()):
        phase = cluster.phase
        if phase is None or now < phase.until:
            continue
        if phase.status == "Deleting":
            del clusters[name]
            _drop_access_entries(backend, cluster)
            continue
        for group_name, group in list(cluster.groups.items()):
            if group.pending == "Deleting":
                del cluster.groups[group_name]
                continue
            group.pending = None
            group.old_spec = None
            group.old_target = group.target
        cluster.phase = None


def _begin(cluster: HyperPodCluster, status: str, ms: int) -> None:
    cluster.phase = Phase(status, time.monotonic() + ms / 1000.0)


def _new_id() -> str:
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(12))


def find_cluster(backend: Any, name_or_arn: str) -> HyperPodCluster:
    clusters = clusters_of(backend)
    if name_or_arn.startswith("arn:"):
        found = next((c for c in clusters.values() if c.arn == name_or_arn), None)
    else:
        found = clusters.get(name_or_arn)
    if found is None:
        raise NotFound(f"Cluster {name_or_arn} not found.")
    return found


# --- training plans: who uses them ---------------------------------------------------------------


def _plan_usage(backend: Any, plan_arn: str, exclude: tuple[str, str] | None) -> int:
    total = 0
    for cluster in clusters_of(backend).values():
        for group in cluster.groups.values():
            if group.spec.get("TrainingPlanArn") == plan_arn and (cluster.name, group.name) != exclude:
                total += group.target
    return total


def _plan_of(backend: Any, spec: dict[str, Any] | None) -> tp.Plan | None:
    arn = (spec or {}).get("TrainingPlanArn")
    return tp.plan_by_arn(backend, arn) if arn else None


def _effective(backend: Any, count: int, spec: dict[str, Any] | None) -> int:
    """Instances running for ``count`` under ``spec``: none while its training plan is not Active."""
    if spec and spec.get("TrainingPlanArn"):
        plan = _plan_of(backend, spec)
        return count if plan is not None and plan.status() == "Active" else 0
    return count


# --- the EKS side: HyperPod's access entries ------------------------------------------------------


def _eks_cluster(cluster: HyperPodCluster) -> Any:
    if not cluster.eks:
        return None
    match = EKS_ARN.match(cluster.orchestrator["Eks"]["ClusterArn"])  # type: ignore[index]
    if match is None:
        return None
    _, region, account, name = match.groups()
    return eks_backends[account][region].clusters.get(name)


def _service_linked_role(backend: Any) -> str:
    """HyperPod's service-linked role (made on first use, as IAM's CreateServiceLinkedRole would)."""
    iam = iam_backends[backend.account_id][partition_of(backend)]
    for role in iam.roles.values():
        if role.name == SLR_NAME:
            return str(role.arn)
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": [SLR_SERVICE]}, "Action": ["sts:AssumeRole"]}],
    }
    role = iam.create_role(
        SLR_NAME,
        json.dumps(trust),
        f"/aws-service-role/{SLR_SERVICE}/",
        permissions_boundary=None,
        description="SageMaker HyperPod service-linked role",
        tags=[],
        max_session_duration="3600",
        linked_service=SLR_SERVICE,
    )
    return str(role.arn)


def _add_access_entries(backend: Any, cluster: HyperPodCluster) -> None:
    """The EKS access entries HyperPod makes "on your behalf" (botocore ``ClusterMetadata``
    ``SlrAccessEntry`` / ``EksRoleAccessEntries``): its service-linked role (STANDARD with
    AmazonSagemakerHyperpodClusterPolicy at cluster scope, UNVERIFIED) and every execution role
    (HYPERPOD_LINUX, UNVERIFIED). A principal that already has an entry keeps it."""
    eks_cluster = _eks_cluster(cluster)
    if eks_cluster is None:
        return
    entries = eks_access.entries_of(eks_cluster)
    slr = _service_linked_role(backend)
    wanted = [(slr, "STANDARD")] + [(g.spec["ExecutionRole"], "HYPERPOD_LINUX") for g in cluster.groups.values()]
    for principal, kind in wanted:
        if principal in entries:
            if principal not in cluster.access_entries and _made_by_hyperpod(backend, eks_cluster, principal):
                cluster.access_entries.append(principal)
            continue
        entry = eks_access.add_entry(eks_cluster, principal, kind)
        if kind == "STANDARD":
            policy = eks_access.policy_arn(SLR_POLICY, partition_of(backend))
            now = utcnow()
            entry.policies[policy] = {
                "policyArn": policy,
                "accessScope": {"type": "cluster", "namespaces": []},
                "associatedAt": now,
                "modifiedAt": now,
            }
        cluster.access_entries.append(principal)


def _made_by_hyperpod(backend: Any, eks_cluster: Any, principal: str) -> bool:
    return any(principal in c.access_entries for c in clusters_of(backend).values() if _eks_cluster(c) is eks_cluster)


def _drop_access_entries(backend: Any, cluster: HyperPodCluster) -> None:
    """A deleted cluster's entries go unless another HyperPod cluster on the EKS cluster uses the
    principal (UNVERIFIED: the docs do not say what HyperPod does with them)."""
    eks_cluster = _eks_cluster(cluster)
    if eks_cluster is None:
        return
    entries = eks_access.entries_of(eks_cluster)
    for principal in cluster.access_entries:
        if not _made_by_hyperpod(backend, eks_cluster, principal):
            entries.pop(principal, None)


# --- checks --------------------------------------------------------------------------------------


def _not_emulated(where: str, params: dict[str, Any], names: Iterable[str]) -> None:
    for name in names:
        if params.get(name) is not None:
            raise NotImplementedError(f"{where} {name} is not emulated")


def _check_orchestrator(backend: Any, orchestrator: dict[str, Any] | None) -> dict[str, Any] | None:
    if orchestrator is None:
        return None
    eks, slurm = orchestrator.get("Eks"), orchestrator.get("Slurm")
    if (eks is None) == (slurm is None):
        raise Invalid(
            "The Orchestrator must contain exactly one orchestrator configuration: Eks or Slurm. Specifying "
            "both or providing an empty configuration is not supported."
        )
    if slurm is not None:
        raise NotImplementedError("CreateCluster Orchestrator.Slurm is not emulated")
    arn = eks["ClusterArn"]
    match = EKS_ARN.match(arn)
    if match is None:
        raise Invalid(f"Invalid Amazon EKS cluster ARN {arn}.")
    _, region, account, eks_name = match.groups()
    if account != backend.account_id or region != backend.region_name:
        raise Invalid(
            f"The Amazon EKS cluster {arn} must be in the account and Region of the SageMaker HyperPod cluster "
            f"({backend.account_id}, {backend.region_name})."
        )
    eks_cluster = eks_backends[account][region].clusters.get(eks_name)
    if eks_cluster is None:
        raise Invalid(f"The Amazon EKS cluster {arn} does not exist.")
    status = eks_ext.status_of(eks_cluster)
    if status != eks_ext.ACTIVE:
        raise Invalid(f"The Amazon EKS cluster {eks_name} is {status}; it must be ACTIVE.")
    mode = (eks_cluster.access_config or {}).get("authenticationMode", "CONFIG_MAP")
    if mode not in API_MODES:
        raise Invalid(
            f"The Amazon EKS cluster {eks_name} uses authentication mode {mode}. SageMaker HyperPod supports "
            "the authentication modes API and API_AND_CONFIG_MAP."
        )
    if eks_cluster.version not in HYPERPOD_KUBERNETES:
        raise Invalid(
            f"The Amazon EKS cluster {eks_name} runs Kubernetes {eks_cluster.version}. SageMaker HyperPod "
            f"supports Kubernetes versions {', '.join(HYPERPOD_KUBERNETES)}."
        )
    return {"Eks": {"ClusterArn": arn}}


def _check_vpc(ec2: Any, vpc: dict[str, Any], where: str) -> set[str]:
    """The Availability Zones of ``vpc``'s subnets, which must exist and share one VPC that its
    security groups are in."""
    subnets = []
    for subnet_id in vpc["Subnets"]:
        try:
            subnets.append(ec2.get_subnet(subnet_id))
        except Exception:  # moto's InvalidSubnetIdError
            raise Invalid(f"{where}: the subnet {subnet_id} does not exist.") from None
    vpcs = {s.vpc_id for s in subnets}
    if len(vpcs) != 1:
        raise Invalid(f"{where}: the subnets {', '.join(vpc['Subnets'])} must all be in the same VPC.")
    vpc_id = vpcs.pop()
    for group_id in vpc["SecurityGroupIds"]:
        group = ec2.get_security_group_from_id(group_id)
        if group is None:
            raise Invalid(f"{where}: the security group {group_id} does not exist.")
        if group.vpc_id != vpc_id:
            raise Invalid(f"{where}: the security group {group_id} is not in the VPC {vpc_id} of the subnets.")
    return {s.availability_zone for s in subnets}


def _quota(name: str) -> sq.Quota | None:
    return sq.quota_named("sagemaker", name)


def _limit(quota: sq.Quota, current: int, delta: int, unit: str = "Instances") -> Exception:
    value = int(sq.applied(quota))
    return LimitExceeded(
        f"The account-level service limit '{quota.name}' is {value} {unit}, with current utilization of "
        f"{current} {unit} and a request delta of {delta} {unit}. Please use AWS Service Quotas to request an "
        "increase for this quota."
    )


def _check_quotas(backend: Any, cluster_name: str, proposed: dict[str, tuple[str, int]]) -> None:
    """``proposed``: group name -> (instance type, count) of ``cluster_name`` after the request."""
    before_types: dict[str, int] = {}
    others_types: dict[str, int] = {}
    before_cluster = 0
    others_total = 0
    for cluster in clusters_of(backend).values():
        for group in cluster.groups.values():
            kind = group.spec["InstanceType"]
            if cluster.name == cluster_name:
                before_types[kind] = before_types.get(kind, 0) + group.target
                before_cluster += group.target
            else:
                others_types[kind] = others_types.get(kind, 0) + group.target
                others_total += group.target
    after_types: dict[str, int] = {}
    for kind, count in proposed.values():
        after_types[kind] = after_types.get(kind, 0) + count
    after_cluster = sum(count for _, count in proposed.values())
    for kind, count in sorted(after_types.items()):
        quota = _quota(sq.CLUSTER_USAGE.format(kind))
        current = others_types.get(kind, 0) + before_types.get(kind, 0)
        total = others_types.get(kind, 0) + count
        if quota is not None and total > current and total > sq.applied(quota):
            raise _limit(quota, current, total - current)
    per_cluster = _quota(sq.PER_CLUSTER)
    if per_cluster is not None and after_cluster > before_cluster and after_cluster > sq.applied(per_cluster):
        raise _limit(per_cluster, before_cluster, after_cluster - before_cluster)
    across = _quota(sq.ACROSS_CLUSTERS)
    current = others_total + before_cluster
    total = others_total + after_cluster
    if across is not None and total > current and total > sq.applied(across):
        raise _limit(across, current, total - current)


def _check_plan(backend: Any, cluster_name: str, spec: dict[str, Any], count: int, azs: set[str]) -> None:
    arn = spec["TrainingPlanArn"]
    group = spec["InstanceGroupName"]
    plan = tp.plan_by_arn(backend, arn)
    if plan is None:
        raise Invalid(f"Instance group {group}: the training plan {arn} does not exist.")
    status = plan.status()
    if status not in ("Scheduled", "Active"):
        raise Invalid(
            f"Instance group {group}: the training plan {plan.name} is {status}; only training plans in "
            "Scheduled or Active status can be used."
        )
    if "hyperpod-cluster" not in plan.target_resources:
        raise Invalid(
            f"Instance group {group}: the training plan {plan.name} targets {', '.join(plan.target_resources)}, "
            "not hyperpod-cluster."
        )
    if plan.instance_type != spec["InstanceType"]:
        raise Invalid(
            f"Instance group {group}: the instance type {spec['InstanceType']} does not match the instance type "
            f"{plan.instance_type} of the training plan {plan.name}."
        )
    # Every subnet, not one of them: HyperPod "selects a subnet from the provided VpcConfig's
    # subnet list. All instance groups inherit the subnet's AZ" ([DG-prereq], multiple AZs), and
    # which one it picks is not documented, so a subnet in another zone may be the one it uses.
    if azs != {plan.zone_name}:
        raise Invalid(
            f"Instance group {group}: the training plan {plan.name} is in the Availability Zone {plan.zone_name}, "
            f"but the instance group's subnets are in {', '.join(sorted(azs))}."
        )
    available = plan.total - tp.in_use(backend, plan, exclude=(cluster_name, group))
    if count > available:
        raise Invalid(
            f"Instance group {group}: InstanceCount {count} exceeds the {max(0, available)} available instances "
            f"of the training plan {plan.name}."
        )


def reserved_key(key: str) -> bool:
    """A label or taint key whose prefix is (a subdomain of) a reserved domain."""
    prefix, slash, _ = key.partition("/")
    return bool(slash) and any(prefix == d or prefix.endswith("." + d) for d in RESERVED_DOMAINS)


def _check_kubernetes(name: str, config: dict[str, Any]) -> None:
    keys = [*(config.get("Labels") or {}), *(t.get("Key", "") for t in config.get("Taints") or [])]
    for key in keys:
        if reserved_key(key):
            raise Invalid(
                f"Instance group {name}: the label or taint key {key} uses a reserved prefix "
                f"({', '.join(d + '/' for d in RESERVED_DOMAINS)})."
            )


def _check_storage(spec: dict[str, Any]) -> None:
    group = spec["InstanceGroupName"]
    ebs_quota = _quota(sq.EBS_VOLUME)
    for config in spec.get("InstanceStorageConfigs") or []:
        ebs = config.get("EbsVolumeConfig")
        if ebs is None:
            continue
        size = ebs.get("VolumeSizeInGB")
        if ebs.get("RootVolume"):
            if size is not None:
                raise Invalid(f"Instance group {group}: VolumeSizeInGB cannot be specified for the root volume (RootVolume true).")
            if not ebs.get("VolumeKmsKeyId"):
                raise Invalid(f"Instance group {group}: VolumeKmsKeyId is required for the root volume (RootVolume true).")
        else:
            if size is None:
                raise Invalid(f"Instance group {group}: VolumeSizeInGB is required for a secondary EBS volume.")
            if ebs_quota is not None and size > sq.applied(ebs_quota):
                raise _limit(ebs_quota, 0, size, "GB")


def _check_group(
    self: SageMakerResponse,
    backend: Any,
    cluster_name: str,
    eks: bool,
    cluster_vpc: dict[str, Any] | None,
    spec: dict[str, Any],
    existing: Group | None = None,
) -> None:
    """Every rule of a group as it will be (new or updated); ``spec`` still holds InstanceCount.
    The training-plan rules apply to a new group, a changed plan or a larger count only (a group on
    an expired plan can still be scaled down)."""
    name = spec["InstanceGroupName"]
    if spec.get("InstanceRequirements") is not None:
        if spec.get("InstanceType") is not None:
            raise Invalid(f"Instance group {name}: InstanceType and InstanceRequirements are mutually exclusive.")
        raise NotImplementedError("instance group InstanceRequirements is not emulated")
    _not_emulated("instance group", spec, GROUP_NOT_EMULATED)
    kind = spec.get("InstanceType")
    if kind is None:
        raise Invalid(f"Instance group {name}: InstanceType is required.")
    lifecycle = spec.get("LifeCycleConfig") or {}
    for member in ("SourceS3Uri", "OnCreate"):
        if not lifecycle.get(member):
            raise Invalid(f"Instance group {name}: LifeCycleConfig.{member} is required.")
    role = spec["ExecutionRole"]
    if not role.split(":")[4:5] == [backend.account_id] or not principal_exists(role):
        raise Invalid(f"Instance group {name}: the execution role {role} does not exist in account {backend.account_id}.")
    checks = spec.get("OnStartDeepHealthChecks") or []
    taints = (spec.get("KubernetesConfig") or {}).get("Taints") or []
    if checks and not ACCELERATED.match(kind):
        raise Invalid(
            f"Instance group {name}: deep health checks are supported on GPU and Trainium instance types only, "
            f"not {kind}."
        )
    if checks and taints:
        raise Invalid(f"Instance group {name}: custom taints cannot be added to an instance group with deep health checks.")
    if spec.get("KubernetesConfig") is not None:
        if not eks:
            raise Invalid(f"Instance group {name}: KubernetesConfig requires an Amazon EKS orchestrator.")
        _check_kubernetes(name, spec["KubernetesConfig"])
    _check_storage(spec)
    ec2 = ec2_of(backend)
    override = spec.get("OverrideVpcConfig")
    if override is not None:
        if not eks and cluster_vpc is None:
            raise Invalid(f"Instance group {name}: OverrideVpcConfig can only be used when the cluster has a VpcConfig.")
        azs = _check_vpc(ec2, override, f"Instance group {name} OverrideVpcConfig")
    elif cluster_vpc is not None:
        azs = {ec2.get_subnet(s).availability_zone for s in cluster_vpc["Subnets"]}
    else:
        azs = set()
    plan_arn = spec.get("TrainingPlanArn")
    if plan_arn and (
        existing is None
        or existing.spec.get("TrainingPlanArn") != plan_arn
        or int(spec["InstanceCount"]) > existing.target
    ):
        _check_plan(backend, cluster_name, spec, int(spec["InstanceCount"]), azs)


def _normalised(spec: dict[str, Any]) -> tuple[dict[str, Any], int]:
    stored = copy.deepcopy(spec)
    count = int(stored.pop("InstanceCount"))
    return stored, count


# --- shapes --------------------------------------------------------------------------------------


def _kubernetes_shape(current: dict[str, Any] | None, desired: dict[str, Any] | None) -> dict[str, Any]:
    current = (current or {}).get("KubernetesConfig") or {}
    desired = (desired or {}).get("KubernetesConfig") or {}
    return {
        "CurrentLabels": dict(current.get("Labels") or {}),
        "DesiredLabels": dict(desired.get("Labels") or {}),
        "CurrentTaints": list(current.get("Taints") or []),
        "DesiredTaints": list(desired.get("Taints") or []),
    }


def _group_shape(backend: Any, cluster: HyperPodCluster, group: Group) -> dict[str, Any]:
    spec = group.spec
    if group.pending == "Creating":
        status, current, current_spec = "Creating", 0, None
    elif group.pending in ("Updating", "Deleting"):
        status = group.pending
        current_spec = group.old_spec if group.old_spec is not None else spec
        current = _effective(backend, group.old_target, current_spec)
    else:
        status, current_spec = "InService", spec
        current = _effective(backend, group.target, spec)
    out: dict[str, Any] = {
        "CurrentCount": current,
        "InstanceGroupName": group.name,
        "InstanceType": spec["InstanceType"],
        "LifeCycleConfig": spec.get("LifeCycleConfig"),
        "ExecutionRole": spec["ExecutionRole"],
        "Status": status,
    }
    if not TIMING.omit_target_count:
        out["TargetCount"] = group.target
    for member in ("ThreadsPerCore", "InstanceStorageConfigs", "OnStartDeepHealthChecks", "OverrideVpcConfig"):
        if spec.get(member) is not None:
            out[member] = spec[member]
    plan = _plan_of(backend, spec)
    if spec.get("TrainingPlanArn"):
        out["TrainingPlanArn"] = spec["TrainingPlanArn"]
        if plan is not None:
            out["TrainingPlanStatus"] = plan.status()
    if cluster.eks and (spec.get("KubernetesConfig") is not None or (current_spec or {}).get("KubernetesConfig") is not None):
        out["KubernetesConfig"] = _kubernetes_shape(current_spec, spec)
    return out


def _describe_shape(backend: Any, cluster: HyperPodCluster) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ClusterArn": cluster.arn,
        "ClusterName": cluster.name,
        "ClusterStatus": cluster.status(),
        "CreationTime": cluster.created,
        "InstanceGroups": [_group_shape(backend, cluster, g) for g in cluster.groups.values()],
        "NodeRecovery": cluster.node_recovery,
    }
    if cluster.vpc_config is not None:
        out["VpcConfig"] = cluster.vpc_config
    if cluster.orchestrator is not None:
        out["Orchestrator"] = cluster.orchestrator
    return out


def _plan_arns(cluster: HyperPodCluster) -> list[str]:
    arns = []
    for group in cluster.groups.values():
        arn = group.spec.get("TrainingPlanArn")
        if arn and arn not in arns:
            arns.append(arn)
    return arns


def _summary(cluster: HyperPodCluster) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ClusterArn": cluster.arn,
        "ClusterName": cluster.name,
        "CreationTime": cluster.created,
        "ClusterStatus": cluster.status(),
    }
    arns = _plan_arns(cluster)
    if arns:
        out["TrainingPlanArns"] = arns
    return out


# --- actions -------------------------------------------------------------------------------------


def _params(self: SageMakerResponse, *names: str) -> dict[str, Any]:
    return {name: self._get_param(name) for name in names}


def _create_cluster(self: SageMakerResponse) -> ActionResult:
    p = _params(self, "ClusterName", "InstanceGroups", "VpcConfig", "Tags", "Orchestrator", "NodeRecovery", *CLUSTER_NOT_EMULATED)
    _not_emulated("CreateCluster", p, CLUSTER_NOT_EMULATED)
    name = p["ClusterName"]
    tags = tag_dict(p["Tags"])
    if len(tags) > MAX_TAGS:
        raise Invalid(f"A cluster can have at most {MAX_TAGS} tags.")
    backend = backend_of(self)
    with LOCK:
        clusters = clusters_of(backend)
        if name in clusters:
            raise InUse(
                f"Resource Already Exists: Cluster with name {name} already exists. Choose a different name."
            )
        orchestrator = _check_orchestrator(backend, p["Orchestrator"])
        eks = orchestrator is not None
        vpc = p["VpcConfig"]
        if eks and vpc is None:
            raise Invalid("VpcConfig is required for a cluster with an Amazon EKS orchestrator.")
        if vpc is not None:
            _check_vpc(ec2_of(backend), vpc, "VpcConfig")
        specs = p["InstanceGroups"] or []
        if not specs:
            raise Invalid("InstanceGroups must contain at least one instance group.")
        if len(specs) > MAX_GROUPS:
            raise Invalid(f"A cluster can have up to {MAX_GROUPS} instance groups; the request has {len(specs)}.")
        seen: set[str] = set()
        for spec in specs:
            if spec["InstanceGroupName"] in seen:
                raise Invalid(f"Instance group name {spec['InstanceGroupName']} is used more than once.")
            seen.add(spec["InstanceGroupName"])
            _check_group(self, backend, name, eks, vpc, spec)
        _check_quotas(backend, name, {s["InstanceGroupName"]: (s["InstanceType"], int(s["InstanceCount"])) for s in specs})
        _check_plan_totals(backend, name, specs)
        cluster_id = _new_id()
        now = utcnow()
        cluster = HyperPodCluster(
            name=name,
            cluster_id=cluster_id,
            arn=f"arn:{partition_of(backend)}:sagemaker:{backend.region_name}:{backend.account_id}:cluster/{cluster_id}",
            account_id=backend.account_id,
            region=backend.region_name,
            created=now,
            orchestrator=orchestrator,
            vpc_config=copy.deepcopy(vpc),
            node_recovery=p["NodeRecovery"] or "Automatic",
            tags=tags,
        )
        for spec in specs:
            stored, count = _normalised(spec)
            cluster.groups[stored["InstanceGroupName"]] = Group(stored["InstanceGroupName"], stored, count, now, pending="Creating")
        _begin(cluster, "Creating", TIMING.cluster_create_ms)
        clusters[name] = cluster
        _add_access_entries(backend, cluster)
    return ActionResult({"ClusterArn": cluster.arn})


def _check_plan_totals(backend: Any, cluster_name: str, specs: list[dict[str, Any]]) -> None:
    """Two groups of one request on one plan must fit in it together."""
    wanted: dict[str, int] = {}
    for spec in specs:
        arn = spec.get("TrainingPlanArn")
        if arn:
            wanted[arn] = wanted.get(arn, 0) + int(spec["InstanceCount"])
    for arn, count in wanted.items():
        plan = tp.plan_by_arn(backend, arn)
        if plan is None:
            continue
        mine = {s["InstanceGroupName"] for s in specs if s.get("TrainingPlanArn") == arn}
        others = sum(
            g.target
            for c in clusters_of(backend).values()
            for g in c.groups.values()
            if g.spec.get("TrainingPlanArn") == arn and not (c.name == cluster_name and g.name in mine)
        )
        if others + count > plan.total:
            raise Invalid(
                f"The instance groups using the training plan {plan.name} ask for {count} instances; "
                f"{max(0, plan.total - others)} are available."
            )


def _describe_cluster(self: SageMakerResponse) -> ActionResult:
    backend = backend_of(self)
    with LOCK:
        cluster = find_cluster(backend, self._get_param("ClusterName"))
        return ActionResult(_describe_shape(backend, cluster))


def _update_cluster(self: SageMakerResponse) -> ActionResult:
    p = _params(
        self,
        "ClusterName",
        "InstanceGroups",
        "InstanceGroupsToDelete",
        "NodeRecovery",
        "Orchestrator",
        *CLUSTER_NOT_EMULATED,
    )
    _not_emulated("UpdateCluster", p, CLUSTER_NOT_EMULATED)
    backend = backend_of(self)
    with LOCK:
        cluster = find_cluster(backend, p["ClusterName"])
        status = cluster.status()
        if status != "InService":
            raise Conflict(f"Cluster {cluster.name} is in {status} status; it must be InService to be updated.")
        if p["Orchestrator"] is not None and p["Orchestrator"] != cluster.orchestrator:
            raise Invalid("The orchestrator (Amazon EKS cluster) of a SageMaker HyperPod cluster cannot be changed.")
        specs = p["InstanceGroups"] or []
        to_delete = list(p["InstanceGroupsToDelete"] or [])
        seen: set[str] = set()
        for spec in specs:
            if spec["InstanceGroupName"] in seen:
                raise Invalid(f"Instance group name {spec['InstanceGroupName']} is used more than once.")
            seen.add(spec["InstanceGroupName"])
        for name in to_delete:
            if name not in cluster.groups:
                raise Invalid(f"InstanceGroupsToDelete: the cluster has no instance group {name}.")
            if name in seen:
                raise Invalid(f"Instance group {name} is both in InstanceGroups and in InstanceGroupsToDelete.")
        if to_delete and set(cluster.groups) <= set(to_delete):
            raise Invalid("A SageMaker HyperPod cluster must keep at least one instance group.")
        changed: dict[str, tuple[dict[str, Any], int]] = {}
        for spec in specs:
            name = spec["InstanceGroupName"]
            stored, count = _normalised(spec)
            existing = cluster.groups.get(name)
            if existing is None:
                if count < 1:
                    raise Invalid(f"Instance group {name}: a new instance group needs an InstanceCount of at least 1.")
            else:
                for member in FROZEN:
                    if stored.get(member) != existing.spec.get(member):
                        raise Invalid(
                            f"Instance group {name}: {member} cannot be changed after the instance group is created "
                            f"(from {existing.spec.get(member)!r} to {stored.get(member)!r})."
                        )
                if stored == existing.spec and count == existing.target:
                    continue
            _check_group(self, backend, cluster.name, cluster.eks, cluster.vpc_config, spec, existing)
            changed[name] = (stored, count)
        kept = (set(cluster.groups) - set(to_delete)) | set(changed)
        if len(kept) > MAX_GROUPS:
            raise Invalid(f"A cluster can have up to {MAX_GROUPS} instance groups; the update would give it {len(kept)}.")
        recovery = p["NodeRecovery"]
        if not changed and not to_delete and (recovery is None or recovery == cluster.node_recovery):
            raise Invalid(f"The update request does not change the cluster {cluster.name}.")
        proposed = {
            name: (g.spec["InstanceType"], g.target) for name, g in cluster.groups.items() if name not in to_delete
        }
        for name, (stored, count) in changed.items():
            proposed[name] = (stored["InstanceType"], count)
        _check_quotas(backend, cluster.name, proposed)
        _check_plan_totals(backend, cluster.name, [{**s, "InstanceCount": c} for s, c in changed.values()])
        now = utcnow()
        for name, (stored, count) in changed.items():
            existing = cluster.groups.get(name)
            if existing is None:
                cluster.groups[name] = Group(name, stored, count, now, pending="Creating")
            else:
                existing.old_spec, existing.old_target = existing.spec, existing.target
                existing.spec, existing.target, existing.pending = stored, count, "Updating"
        for name in to_delete:
            group = cluster.groups[name]
            group.old_spec, group.old_target, group.pending = group.spec, group.target, "Deleting"
        if recovery is not None:
            cluster.node_recovery = recovery
        _begin(cluster, "Updating", TIMING.cluster_update_ms)
        _add_access_entries(backend, cluster)
        return ActionResult({"ClusterArn": cluster.arn})


def _delete_cluster(self: SageMakerResponse) -> ActionResult:
    backend = backend_of(self)
    with LOCK:
        cluster = find_cluster(backend, self._get_param("ClusterName"))
        status = cluster.status()
        if status in ("Creating", "Updating", "Deleting"):
            raise Conflict(f"Cluster {cluster.name} is in {status} status and cannot be deleted now.")
        _begin(cluster, "Deleting", TIMING.cluster_delete_ms)
        return ActionResult({"ClusterArn": cluster.arn})


def _list_clusters(self: SageMakerResponse) -> ActionResult:
    backend = backend_of(self)
    after = to_utc(self._get_param("CreationTimeAfter"))
    before = to_utc(self._get_param("CreationTimeBefore"))
    contains = self._get_param("NameContains")
    plan = self._get_param("TrainingPlanArn")
    by_name = self._get_param("SortBy") == "NAME"
    descending = self._get_param("SortOrder") == "Descending"
    with LOCK:
        clusters = [
            c
            for c in clusters_of(backend).values()
            if (contains is None or contains in c.name)
            and (after is None or c.created > after)
            and (before is None or c.created < before)
            and (plan is None or plan in _plan_arns(c))
        ]
        clusters.sort(key=lambda c: (c.name,) if by_name else (c.created, c.name), reverse=descending)
        chunk, token = page(clusters, self._get_param("MaxResults"), self._get_param("NextToken"))
        out: dict[str, Any] = {"ClusterSummaries": [_summary(c) for c in chunk]}
    if token:
        out["NextToken"] = token
    return ActionResult(out)


def _nodes(backend: Any, cluster: HyperPodCluster) -> list[dict[str, Any]]:
    nodes = []
    for group in cluster.groups.values():
        shape = _group_shape(backend, cluster, group)
        for index in range(shape["CurrentCount"]):
            digest = hashlib.sha256(f"{cluster.cluster_id}|{group.name}|{index}".encode()).hexdigest()
            nodes.append(
                {
                    "group": group,
                    "InstanceGroupName": group.name,
                    "InstanceId": "i-" + digest[:17],
                    "InstanceType": group.spec["InstanceType"],
                    "LaunchTime": group.launched,
                    "InstanceStatus": {"Status": "Running", "Message": ""},
                }
            )
    return nodes


def _list_cluster_nodes(self: SageMakerResponse) -> ActionResult:
    backend = backend_of(self)
    after = to_utc(self._get_param("CreationTimeAfter"))
    before = to_utc(self._get_param("CreationTimeBefore"))
    contains = self._get_param("InstanceGroupNameContains")
    by_name = self._get_param("SortBy") == "NAME"
    descending = self._get_param("SortOrder") == "Descending"
    with LOCK:
        cluster = find_cluster(backend, self._get_param("ClusterName"))
        nodes = [
            n
            for n in _nodes(backend, cluster)
            if (contains is None or contains in n["InstanceGroupName"])
            and (after is None or n["LaunchTime"] > after)
            and (before is None or n["LaunchTime"] < before)
        ]
        nodes.sort(
            key=lambda n: (n["InstanceGroupName"], n["InstanceId"]) if by_name else (n["LaunchTime"], n["InstanceId"]),
            reverse=descending,
        )
        chunk, token = page(nodes, self._get_param("MaxResults"), self._get_param("NextToken"))
        out: dict[str, Any] = {"ClusterNodeSummaries": [{k: v for k, v in n.items() if k != "group"} for n in chunk]}
    if token:
        out["NextToken"] = token
    return ActionResult(out)


def _describe_cluster_node(self: SageMakerResponse) -> ActionResult:
    backend = backend_of(self)
    node_id = self._get_param("NodeId")
    if node_id is None:
        raise NotImplementedError("DescribeClusterNode by NodeLogicalId is not emulated")
    with LOCK:
        cluster = find_cluster(backend, self._get_param("ClusterName"))
        node = next((n for n in _nodes(backend, cluster) if n["InstanceId"] == node_id), None)
        if node is None:
            raise NotFound(f"Node {node_id} not found in cluster {cluster.name}.")
        group: Group = node.pop("group")
        details = dict(node)
        details["LifeCycleConfig"] = group.spec.get("LifeCycleConfig")
        for member in ("ThreadsPerCore", "InstanceStorageConfigs", "OverrideVpcConfig"):
            if group.spec.get(member) is not None:
                details[member] = group.spec[member]
        return ActionResult({"NodeDetails": details})


# --- tags ----------------------------------------------------------------------------------------

_moto_add_tags = SageMakerResponse.add_tags
_moto_delete_tags = SageMakerResponse.delete_tags
_moto_list_tags = SageMakerResponse.list_tags


def _taggable(backend: Any, arn: str) -> Any | None:
    """The cluster or training plan of ``arn``; None when the ARN is another kind (moto's)."""
    match = RESOURCE_ARN.match(arn or "")
    if match is None:
        return None
    _, region, account, kind, _ = match.groups()
    found: Any = None
    if account == backend.account_id and region == backend.region_name:
        if kind == "cluster":
            found = next((c for c in clusters_of(backend).values() if c.arn == arn), None)
        else:
            found = tp.plan_by_arn(backend, arn)
    if found is None:
        raise Invalid(f"Could not find resource {arn}.")
    return found


def _add_tags(self: SageMakerResponse) -> Any:
    backend = backend_of(self)
    with LOCK:
        target = _taggable(backend, self._get_param("ResourceArn"))
        if target is None:
            return _moto_add_tags(self)
        tags = self._get_param("Tags") or []
        tp.add_tags(target, tags)
        return ActionResult({"Tags": tag_list(tag_dict(tags))})


def _delete_tags(self: SageMakerResponse) -> Any:
    backend = backend_of(self)
    with LOCK:
        target = _taggable(backend, self._get_param("ResourceArn"))
        if target is None:
            return _moto_delete_tags(self)
        for key in self._get_param("TagKeys") or []:
            target.tags.pop(key, None)
        return EmptyResult()


def _list_tags(self: SageMakerResponse) -> Any:
    backend = backend_of(self)
    with LOCK:
        target = _taggable(backend, self._get_param("ResourceArn"))
        if target is None:
            return _moto_list_tags(self)
        return ActionResult({"Tags": tag_list(target.tags)})


# --- install -------------------------------------------------------------------------------------

_orig_call_action = SageMakerResponse.call_action
_orig_region_from_url = BaseResponse.get_region_from_url


def _region_from_url(self: BaseResponse, request: Any, full_url: str) -> str:
    """moto takes the region from the first ``.<x>.amazonaws.com`` anywhere in the URL, path
    included, so an EKS access-entry URL naming HyperPod's service-linked role
    (``.../role/aws-service-role/hyperpod.sagemaker.amazonaws.com/...``) ran in region
    ``sagemaker`` (500). Only the host may name the region; else moto's fallbacks (User-Agent, the
    SigV4 credential scope) apply."""
    return _orig_region_from_url(self, request, urlsplit(full_url)._replace(path="", query="").geturl())


def _call_action(self: SageMakerResponse) -> Any:
    with LOCK:
        _settle(backend_of(self))
    return _orig_call_action(self)


def install() -> None:
    BaseResponse.get_region_from_url = _region_from_url  # type: ignore[method-assign]
    SageMakerResponse.call_action = _call_action  # type: ignore[method-assign]
    sagemaker_action("CreateCluster", override=True)(_create_cluster)
    sagemaker_action("DescribeCluster", override=True)(_describe_cluster)
    sagemaker_action("UpdateCluster")(_update_cluster)
    sagemaker_action("DeleteCluster", override=True)(_delete_cluster)
    sagemaker_action("ListClusters", override=True)(_list_clusters)
    sagemaker_action("ListClusterNodes", override=True)(_list_cluster_nodes)
    sagemaker_action("DescribeClusterNode", override=True)(_describe_cluster_node)
    sagemaker_action("AddTags", override=True)(_add_tags)
    sagemaker_action("DeleteTags", override=True)(_delete_tags)
    sagemaker_action("ListTags", override=True)(_list_tags)
    tp.register_usage(_plan_usage)
    capacity_control.route("GET", "/_gpustack/sagemaker")(_control_get)
    capacity_control.route("POST", "/_gpustack/sagemaker")(_control)
    capacity_control.on_reset(_reset_timing)
