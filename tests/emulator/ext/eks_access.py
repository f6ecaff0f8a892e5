"""EKS access entries and access policies: CreateAccessEntry, DescribeAccessEntry,
ListAccessEntries, UpdateAccessEntry, DeleteAccessEntry, AssociateAccessPolicy,
DisassociateAccessPolicy, ListAssociatedAccessPolicies, ListAccessPolicies. moto 5.2.5 has none of
them (its EKS routes answer 404). Wire shapes are botocore's (``AccessEntry``,
``AssociatedAccessPolicy``, ``AccessPolicy``, eks 2017-11-01 in botocore 1.44.5).

Sources: [UG] EKS User Guide, "Grant IAM users access to Kubernetes with EKS access entries",
"Create access entries", "Update access entries", "Delete access entries", "Associate access
policies with access entries" (awsdocs/amazon-eks-user-guide @4d52b4d
``latest/ug/manage-access/k8s-access/grant-k8s-access.adoc``); [API] the botocore model's member
documentation; [CLI] aws-cli ``awscli/examples/eks/*-access-*.rst`` (response examples); and the
EKS error messages quoted in public issues, named where used.

State lives on moto's cluster object (``_gpustack_access_entries``), so entries go with their
cluster and ``POST /moto-api/reset`` drops them. Behaviour:

* Every operation but ListAccessPolicies needs the cluster (``ResourceNotFoundException`` 404) and
  an authentication mode that includes the API: on a ``CONFIG_MAP`` cluster it is
  ``InvalidRequestException`` "The cluster's authentication mode must be set to one of [API,
  API_AND_CONFIG_MAP] to perform this operation." (quoted from EKS in upbound/configuration-aws-eks
  #122 for DescribeAccessEntry and eksctl#7695 for CreateAccessEntry). Create/Update/Associate on
  a cluster that is CREATING or DELETING: ``InvalidRequestException`` (wording unverified).
* CreateAccessEntry:
  - ``type`` STANDARD (default), EC2_LINUX, EC2_WINDOWS, FARGATE_LINUX, HYBRID_LINUX, EC2,
    HYPERPOD_LINUX [API]; another value ``InvalidParameterException``.
  - ``principalArn`` must be the ARN of an existing IAM role or user ("one, and only one, existing
    IAM principal" [UG]); a malformed ARN, an STS session ARN ("You can't use the STS session
    principal type" [API]) or a principal that does not exist is ``InvalidParameterException``
    "The specified principalArn is invalid: invalid principal." (EKS's answer for a role ARN that
    names no role, terraform-aws-modules/terraform-aws-eks#2969). Node types (anything but
    STANDARD) take only IAM roles [API] of the cluster's account [UG].
  - A principal that already has an entry in the cluster: ``ResourceInUseException`` (409) "The
    specified access entry resource is already in use on this cluster."
    (terraform-aws-modules/terraform-aws-eks#3293), unless the request repeats the
    ``clientRequestToken`` that created it (botocore ``idempotencyToken``): then that entry.
  - Only STANDARD entries take ``kubernetesGroups`` or ``username`` ("You can't use the
    --kubernetes-groups option when you specify a type other than STANDARD" [UG];
    "If the type of the access entry is STANDARD, you can specify a username" [UG]): else
    ``InvalidParameterException`` (wording unverified).
  - A group name starting ``system:`` is ``InvalidParameterException`` "The kubernetes group name
    system:nodes is invalid, it cannot start with system:" (aws/karpenter-provider-aws#7558).
  - A username starting with ``system:``, ``eks:``, ``aws:``, ``amazon:`` or ``iam:``, or with
    ``{{SessionName}}`` not preceded somewhere by a colon, is ``InvalidParameterException`` [UG]
    (wording unverified).
  - Defaults [UG table; CLI]: username the user ARN (STANDARD user),
    ``arn:aws:sts::<acct>:assumed-role/<role name>/{{SessionName}}`` (STANDARD role, path
    dropped), ``system:node:{{EC2PrivateDNSName}}`` (EC2_LINUX, EC2_WINDOWS),
    ``system:node:{{SessionName}}`` (FARGATE_LINUX, HYBRID_LINUX); EC2_LINUX/EC2_WINDOWS get
    ``kubernetesGroups`` ``["system:nodes"]`` [CLI example 2]. EC2 and HYPERPOD_LINUX defaults are
    unverified (node username, no groups).
  - ARN ``arn:aws:eks:<region>:<acct>:access-entry/<cluster>/<role|user>/<acct>/<name>/<uuid>``
    [CLI]. Tag keys starting ``aws:`` are refused (EKS tag rules in the model's ``tags`` doc).
* UpdateAccessEntry: ``kubernetesGroups`` (replaces) and ``username``; on a non-STANDARD entry
  either is ``InvalidParameterException`` "This operation can only be performed on Access
  Entries with a type of "STANDARD"." [UG "You can't use the --kubernetes-groups option if the type
  ... is a value other than STANDARD"; the message is EKS's, below].
* AssociateAccessPolicy / DisassociateAccessPolicy / ListAssociatedAccessPolicies on an entry that
  is not STANDARD: ``InvalidParameterException`` 'This operation can only be performed on Access
  Entries with a type of "STANDARD".' (EKS's answer to ListAssociatedAccessPolicies on a Karpenter
  EC2_LINUX entry, aws-controllers-k8s/community#2144, whose read path calls it:
  eks-controller ``pkg/resource/access_entry/hooks.go``; [UG] "You can't associate an access
  policy to this access entry, because its type is a value other than STANDARD").
* AssociateAccessPolicy: ``policyArn`` must be one of ``ListAccessPolicies`` (else
  ``InvalidParameterException``, wording unverified); ``accessScope.type`` ``namespace`` needs
  ``namespaces`` [API], ``cluster`` takes none (unverified); associating a policy the entry has
  replaces its scope ("You can change the access scope ... after you associate it", "you can only
  associate each policy to an access entry once" [UG]). A cluster scope is reported with
  ``namespaces: []`` [CLI list-associated-access-policies].
* DisassociateAccessPolicy of a policy the entry does not have: ``ResourceNotFoundException``
  (wording unverified). DeleteAccessEntry takes the associations along [UG].
* Unknown entry: ``ResourceNotFoundException`` (404) "The specified principalArn could not be
  found. You can view your available access entries with 'list-access-entries'."
  (terraform-aws-modules/terraform-aws-eks#3024).
* ListAccessEntries: principal ARNs, sorted, ``maxResults`` 1-100 / ``nextToken``;
  ``associatedPolicyArn`` keeps the entries with that policy. ListAccessPolicies: the AWS-managed
  policies (``POLICIES``), paged the same way.
* Entries EKS makes itself: CreateCluster with ``bootstrapClusterCreatorAdminPermissions`` (default
  true, [API] ``CreateAccessConfigRequest``) in API or API_AND_CONFIG_MAP mode gives the caller a
  STANDARD entry with AmazonEKSClusterAdminPolicy at cluster scope ([API]: "the cluster creator IAM
  principal was set as a cluster admin access entry"); the caller is STS GetCallerIdentity's
  principal (an assumed role -> its role ARN). CreateNodegroup in those modes gives the node role
  an EC2_LINUX entry (EC2_WINDOWS for Windows AMI types) unless it has one (third-party reports:
  terraform-aws-modules/terraform-aws-eks#3286 "AWS EKS is creating this access entry
  automatically", and that module's docs; not in the EKS UG). Such an entry stays when the node
  group is deleted (unverified). So a later CreateAccessEntry for the same role is
  ``ResourceInUseException``, as on AWS.
* Tags by ARN through TagResource/UntagResource/ListTagsForResource (``eks._taggable``).
"""

from __future__ import annotations

import re
import uuid
from typing import Any, Callable

from moto.core.responses import ActionResult, EmptyResult
from moto.core.utils import utcnow
from moto.eks.exceptions import InvalidRequestException
from moto.eks.models import Cluster, EKSBackend
from moto.eks.responses import EKSResponse
from moto.eks import urls as eks_urls
from moto.iam.models import iam_backends
from moto.sts.models import sts_backends
from moto.utilities.utils import get_partition

from . import eks as eks_ext
from ._ec2 import LOCK
from .eks import eks_action, in_use, invalid, not_found, page, status_of

TYPES = ("STANDARD", "FARGATE_LINUX", "EC2_LINUX", "EC2_WINDOWS", "EC2", "HYBRID_LINUX", "HYPERPOD_LINUX")
NODE_USERNAMES = {
    "EC2_LINUX": "system:node:{{EC2PrivateDNSName}}",
    "EC2_WINDOWS": "system:node:{{EC2PrivateDNSName}}",
    "FARGATE_LINUX": "system:node:{{SessionName}}",
    "HYBRID_LINUX": "system:node:{{SessionName}}",
    "EC2": "system:node:{{EC2PrivateDNSName}}",  # unverified
    "HYPERPOD_LINUX": "system:node:{{SessionName}}",  # unverified
}
NODE_GROUPS = {"EC2_LINUX": ["system:nodes"], "EC2_WINDOWS": ["system:nodes"]}
USERNAME_PREFIXES = ("system:", "eks:", "aws:", "amazon:", "iam:")
# aws-cli awscli/examples/eks/list-access-policies.rst (2025) plus the two the EKS UG page
# "Review access policy permissions" lists first today (AmazonAIOpsAssistantPolicy,
# AmazonARCRegionSwitchScalingPolicy). EKS may have more.
POLICY_NAMES = (
    "AmazonAIOpsAssistantPolicy",
    "AmazonARCRegionSwitchScalingPolicy",
    "AmazonEKSAdminPolicy",
    "AmazonEKSAdminViewPolicy",
    "AmazonEKSAutoNodePolicy",
    "AmazonEKSBlockStorageClusterPolicy",
    "AmazonEKSBlockStoragePolicy",
    "AmazonEKSClusterAdminPolicy",
    "AmazonEKSComputeClusterPolicy",
    "AmazonEKSComputePolicy",
    "AmazonEKSEditPolicy",
    "AmazonEKSHybridPolicy",
    "AmazonEKSLoadBalancingClusterPolicy",
    "AmazonEKSLoadBalancingPolicy",
    "AmazonEKSNetworkingClusterPolicy",
    "AmazonEKSNetworkingPolicy",
    "AmazonEKSViewPolicy",
    "AmazonEMRJobPolicy",
    "AmazonSagemakerHyperpodClusterPolicy",
    "AmazonSagemakerHyperpodControllerPolicy",
    "AmazonSagemakerHyperpodSystemNamespacePolicy",
)
CLUSTER_ADMIN = "AmazonEKSClusterAdminPolicy"
WINDOWS_AMI = re.compile(r"^WINDOWS_")

MODE_MESSAGE = (
    "The cluster's authentication mode must be set to one of [API, API_AND_CONFIG_MAP] to perform "
    "this operation."
)
INVALID_PRINCIPAL = "The specified principalArn is invalid: invalid principal."
IN_USE = "The specified access entry resource is already in use on this cluster."
NOT_FOUND = (
    "The specified principalArn could not be found. You can view your available access entries "
    "with 'list-access-entries'."
)
STANDARD_ONLY = 'This operation can only be performed on Access Entries with a type of "STANDARD".'

# arn:<partition>:iam::<account>:(role|user)/<path/>name
PRINCIPAL = re.compile(r"^arn:(aws[a-z-]*):iam::(\d{12}):(role|user)/(?:[\w+=,.@/-]*/)?([\w+=,.@-]{1,128})$")

# REST routes moto 5.2.5 does not map. An ARN label arrives percent-decoded here, so it may hold
# "/": ``.+`` (moto's own router reads the raw path for the labels).
ROUTES = (
    "{0}/access-policies$",
    "{0}/clusters/(?P<name>[^/]+)/access-entries$",
    "{0}/clusters/(?P<name>[^/]+)/access-entries/(?P<principalArn>.+)$",
)


def policy_arn(name: str, partition: str = "aws") -> str:
    return f"arn:{partition}:eks::aws:cluster-access-policy/{name}"


class AccessEntry:
    def __init__(
        self,
        cluster: Cluster,
        principal: str,
        kind: str,
        username: str,
        groups: list[str],
        tags: dict[str, str],
        token: str | None,
    ) -> None:
        match = PRINCIPAL.match(principal)
        assert match is not None
        _, account, principal_type, name = match.groups()
        self.cluster_name = cluster.name
        self.principal_arn = principal
        self.type = kind
        self.username = username
        self.kubernetes_groups = groups
        self.tags = tags
        self.client_request_token = token
        prefix = cluster.arn.rsplit(":", 1)[0]  # arn:<partition>:eks:<region>:<account>
        self.arn = f"{prefix}:access-entry/{cluster.name}/{principal_type}/{account}/{name}/{uuid.uuid4()}"
        self.created_at = self.modified_at = utcnow()
        self.policies: dict[str, dict[str, Any]] = {}

    def shape(self) -> dict[str, Any]:
        """The botocore ``AccessEntry`` shape."""
        return {
            "clusterName": self.cluster_name,
            "principalArn": self.principal_arn,
            "kubernetesGroups": list(self.kubernetes_groups),
            "accessEntryArn": self.arn,
            "createdAt": self.created_at,
            "modifiedAt": self.modified_at,
            "tags": dict(self.tags),
            "username": self.username,
            "type": self.type,
        }


def entries_of(cluster: Cluster) -> dict[str, AccessEntry]:
    """principal ARN -> entry (kept on moto's cluster object, so it goes with the cluster)."""
    return cluster.__dict__.setdefault("_gpustack_access_entries", {})


def _cluster(response: EKSResponse, writes: bool = False) -> Cluster:
    name = response._get_param("name")
    cluster = response.eks_backend.describe_cluster(name)
    if cluster.access_config.get("authenticationMode") == "CONFIG_MAP":
        raise InvalidRequestException(message=MODE_MESSAGE, clusterName=name)
    if writes and status_of(cluster) in ("CREATING", "DELETING"):
        raise InvalidRequestException(
            message=f"Cluster '{name}' is in {status_of(cluster)} status", clusterName=name
        )
    return cluster


def _entry(cluster: Cluster, principal: str) -> AccessEntry:
    entry = entries_of(cluster).get(principal)
    if entry is None:
        raise not_found(NOT_FOUND, cluster.name)
    return entry


def _standard(entry: AccessEntry) -> None:
    if entry.type != "STANDARD":
        raise invalid(STANDARD_ONLY, entry.cluster_name)


def principal_exists(principal: str) -> bool:
    """Whether ``principal`` names an IAM role or user that exists (in its own account)."""
    match = PRINCIPAL.match(principal)
    if match is None:
        return False
    partition, account, kind, name = match.groups()
    backend = iam_backends[account][partition]
    if kind == "role":
        return any(role.arn == principal for role in backend.roles.values())
    user = backend.users.get(name)
    return user is not None and user.arn == principal


def _groups(groups: list[str] | None, cluster: str) -> list[str]:
    for group in groups or []:
        if group.startswith("system:"):
            raise invalid(f"The kubernetes group name {group} is invalid, it cannot start with system:", cluster)
    return list(groups or [])


def _username(username: str, cluster: str) -> str:
    if username.startswith(USERNAME_PREFIXES):
        raise invalid(
            f"The username {username} is invalid, it cannot start with "
            + ", ".join(USERNAME_PREFIXES),
            cluster,
        )
    at = username.find("{{SessionName}}")
    if at >= 0 and ":" not in username[:at]:
        raise invalid(
            f"The username {username} is invalid, it must include a colon before {{{{SessionName}}}}",
            cluster,
        )
    return username


def _check_tags(tags: dict[str, str] | None, cluster: str) -> dict[str, str]:
    for key in tags or {}:
        if key.lower().startswith("aws:"):
            raise invalid(f"Tag keys cannot start with 'aws:': {key}", cluster)
    return dict(tags or {})


def default_username(principal: str, kind: str) -> str:
    if kind != "STANDARD":
        return NODE_USERNAMES[kind]
    match = PRINCIPAL.match(principal)
    assert match is not None
    partition, account, principal_type, name = match.groups()
    if principal_type == "user":
        return principal
    return f"arn:{partition}:sts::{account}:assumed-role/{name}/{{{{SessionName}}}}"


def add_entry(
    cluster: Cluster,
    principal: str,
    kind: str,
    username: str | None = None,
    groups: list[str] | None = None,
    tags: dict[str, str] | None = None,
    token: str | None = None,
) -> AccessEntry:
    entry = AccessEntry(
        cluster,
        principal,
        kind,
        username or default_username(principal, kind),
        list(groups) if groups is not None else list(NODE_GROUPS.get(kind, [])),
        dict(tags or {}),
        token,
    )
    entries_of(cluster)[principal] = entry
    return entry


# --- access entries ---------------------------------------------------------------------------


def _create_access_entry(self: EKSResponse) -> ActionResult:
    principal = self._get_param("principalArn")
    kind = self._get_param("type") or "STANDARD"
    groups = self._get_param("kubernetesGroups")
    username = self._get_param("username")
    token = self._get_param("clientRequestToken")
    with LOCK:
        cluster = _cluster(self, writes=True)
        name = cluster.name
        if kind not in TYPES:
            raise invalid(f"Invalid access entry type {kind}; valid: {', '.join(TYPES)}", name)
        existing = entries_of(cluster).get(principal)
        if existing is not None:
            if token and existing.client_request_token == token:
                return ActionResult({"accessEntry": existing.shape()})
            raise in_use(IN_USE, name)
        match = PRINCIPAL.match(principal or "")
        if match is None or not principal_exists(principal):
            raise invalid(INVALID_PRINCIPAL, name)
        if kind != "STANDARD":
            if match.group(3) != "role":
                raise invalid(f"Access entries of type {kind} only accept IAM role ARNs", name)
            if match.group(2) != self.current_account:
                raise invalid(
                    f"Access entries of type {kind} need a principal in the cluster's account", name
                )
            if groups:
                raise invalid(f"kubernetesGroups cannot be specified for access entries of type {kind}", name)
            if username is not None:
                raise invalid(f"username cannot be specified for access entries of type {kind}", name)
        entry = add_entry(
            cluster,
            principal,
            kind,
            _username(username, name) if username is not None else None,
            _groups(groups, name) if kind == "STANDARD" else None,
            _check_tags(self._get_param("tags"), name),
            token,
        )
        return ActionResult({"accessEntry": entry.shape()})


def _describe_access_entry(self: EKSResponse) -> ActionResult:
    with LOCK:
        cluster = _cluster(self)
        return ActionResult({"accessEntry": _entry(cluster, self._get_param("principalArn")).shape()})


def _list_access_entries(self: EKSResponse) -> ActionResult:
    wanted = self._get_param("associatedPolicyArn")
    with LOCK:
        cluster = _cluster(self)
        principals = [
            p for p, e in entries_of(cluster).items() if wanted is None or wanted in e.policies
        ]
        names, token = page(principals, self._get_int_param("maxResults"), self._get_param("nextToken"))
    return ActionResult({"accessEntries": names, "nextToken": token})


def _update_access_entry(self: EKSResponse) -> ActionResult:
    groups = self._get_param("kubernetesGroups")
    username = self._get_param("username")
    with LOCK:
        cluster = _cluster(self, writes=True)
        entry = _entry(cluster, self._get_param("principalArn"))
        if groups is not None or username is not None:
            _standard(entry)
        if groups is not None:
            entry.kubernetes_groups = _groups(groups, cluster.name)
        if username is not None:
            entry.username = _username(username, cluster.name)
        entry.modified_at = utcnow()
        return ActionResult({"accessEntry": entry.shape()})


def _delete_access_entry(self: EKSResponse) -> ActionResult:
    with LOCK:
        cluster = _cluster(self, writes=True)
        entry = _entry(cluster, self._get_param("principalArn"))
        del entries_of(cluster)[entry.principal_arn]
    return EmptyResult()


# --- access policies --------------------------------------------------------------------------


def _scope(scope: dict[str, Any], cluster: str) -> dict[str, Any]:
    kind = scope.get("type")
    namespaces = list(scope.get("namespaces") or [])
    if kind == "namespace" and not namespaces:
        raise invalid("namespaces must be specified for an access scope of type namespace", cluster)
    if kind == "cluster" and namespaces:
        raise invalid("namespaces cannot be specified for an access scope of type cluster", cluster)
    if kind not in ("cluster", "namespace"):
        raise invalid(f"Invalid access scope type {kind}", cluster)
    return {"type": kind, "namespaces": namespaces}


def _known_policies(partition: str) -> dict[str, str]:
    return {policy_arn(n, partition): n for n in POLICY_NAMES}


def _associate_access_policy(self: EKSResponse) -> ActionResult:
    policy = self._get_param("policyArn")
    with LOCK:
        cluster = _cluster(self, writes=True)
        entry = _entry(cluster, self._get_param("principalArn"))
        _standard(entry)
        if policy not in _known_policies(get_partition(self.region)):
            raise invalid(f"The specified policyArn {policy} is not a valid access policy", cluster.name)
        scope = _scope(self._get_param("accessScope") or {}, cluster.name)
        now = utcnow()
        current = entry.policies.get(policy)
        if current is None:
            current = entry.policies[policy] = {"policyArn": policy, "associatedAt": now}
        current["accessScope"] = scope
        current["modifiedAt"] = now
        return ActionResult(
            {
                "clusterName": cluster.name,
                "principalArn": entry.principal_arn,
                "associatedAccessPolicy": dict(current),
            }
        )


def _disassociate_access_policy(self: EKSResponse) -> ActionResult:
    policy = self._get_param("policyArn")
    with LOCK:
        cluster = _cluster(self, writes=True)
        entry = _entry(cluster, self._get_param("principalArn"))
        _standard(entry)
        if entry.policies.pop(policy, None) is None:
            raise not_found(
                f"The specified policyArn {policy} is not associated with this access entry", cluster.name
            )
    return EmptyResult()


def _list_associated_access_policies(self: EKSResponse) -> ActionResult:
    with LOCK:
        cluster = _cluster(self)
        entry = _entry(cluster, self._get_param("principalArn"))
        _standard(entry)
        arns, token = page(list(entry.policies), self._get_int_param("maxResults"), self._get_param("nextToken"))
        return ActionResult(
            {
                "clusterName": cluster.name,
                "principalArn": entry.principal_arn,
                "associatedAccessPolicies": [dict(entry.policies[a]) for a in arns],
                "nextToken": token,
            }
        )


def _list_access_policies(self: EKSResponse) -> ActionResult:
    known = _known_policies(get_partition(self.region))
    arns, token = page(list(known), self._get_int_param("maxResults"), self._get_param("nextToken"))
    return ActionResult({"accessPolicies": [{"name": known[a], "arn": a} for a in arns], "nextToken": token})


# --- entries EKS creates itself ---------------------------------------------------------------


def _access_key(response: EKSResponse) -> str:
    match = re.search(r"Credential=([^/,\s]+)/", response.headers.get("Authorization") or "")
    return match.group(1) if match else ""


def caller_principal(response: EKSResponse) -> str:
    """The IAM principal STS GetCallerIdentity reports for this request's credentials: a role ARN
    for an assumed role, else the user ARN (moto's default identity is ``user/moto``)."""
    account = response.current_account
    partition = get_partition(response.region)
    sts = sts_backends[account][partition]
    assumed = sts.get_assumed_role_from_access_key(_access_key(response))
    if assumed is not None:
        return str(assumed.role_arn)
    _, arn, _ = sts.get_caller_identity(_access_key(response), response.region)
    # arn:<p>:sts::<acct>:user/<name> (moto's default) or an IAM user ARN
    return re.sub(r"^arn:([^:]+):sts::", r"arn:\1:iam::", arn)


def _api_mode(cluster: Cluster) -> bool:
    return cluster.access_config.get("authenticationMode") in ("API", "API_AND_CONFIG_MAP")


def _after_create_cluster(self: EKSResponse, result: ActionResult) -> None:
    with LOCK:
        cluster = self.eks_backend.describe_cluster(self._get_param("name"))
        if not _api_mode(cluster) or not cluster.access_config.get("bootstrapClusterCreatorAdminPermissions"):
            return
        principal = caller_principal(self)
        if PRINCIPAL.match(principal) is None or principal in entries_of(cluster):
            return
        entry = add_entry(cluster, principal, "STANDARD")
        now = utcnow()
        arn = policy_arn(CLUSTER_ADMIN, get_partition(self.region))
        entry.policies[arn] = {
            "policyArn": arn,
            "accessScope": {"type": "cluster", "namespaces": []},
            "associatedAt": now,
            "modifiedAt": now,
        }


def _after_create_nodegroup(self: EKSResponse, result: ActionResult) -> None:
    with LOCK:
        cluster = self.eks_backend.describe_cluster(self._get_param("name"))
        role = self._get_param("nodeRole")
        if not _api_mode(cluster) or not role or PRINCIPAL.match(role) is None:
            return
        if role in entries_of(cluster):
            return
        ami_type = self._get_param("amiType") or ""
        add_entry(cluster, role, "EC2_WINDOWS" if WINDOWS_AMI.match(ami_type) else "EC2_LINUX")


def wrap(action: str, after: Callable[[EKSResponse, ActionResult], None]) -> None:
    """Runs ``after`` once ``action`` (already a handler of eks.py) has succeeded."""
    method = re.sub(r"(?<!^)(?=[A-Z])", "_", action).lower()
    inner = getattr(EKSResponse, method)

    def handler(self: EKSResponse) -> ActionResult:
        result = inner(self)
        after(self, result)
        return result

    eks_action(action, override=True)(handler)


# --- tags -------------------------------------------------------------------------------------

_previous_taggable = eks_ext._taggable


def _taggable(backend: EKSBackend, arn: str) -> Any:
    for cluster in backend.clusters.values():
        for entry in entries_of(cluster).values():
            if entry.arn == arn:
                return entry
    return _previous_taggable(backend, arn)


def install() -> None:
    global _previous_taggable
    for path in ROUTES:
        eks_urls.url_paths.setdefault(path, EKSResponse.dispatch)
    eks_action("CreateAccessEntry")(_create_access_entry)
    eks_action("DescribeAccessEntry")(_describe_access_entry)
    eks_action("ListAccessEntries")(_list_access_entries)
    eks_action("UpdateAccessEntry")(_update_access_entry)
    eks_action("DeleteAccessEntry")(_delete_access_entry)
    eks_action("AssociateAccessPolicy")(_associate_access_policy)
    eks_action("DisassociateAccessPolicy")(_disassociate_access_policy)
    eks_action("ListAssociatedAccessPolicies")(_list_associated_access_policies)
    eks_action("ListAccessPolicies")(_list_access_policies)
    wrap("CreateCluster", _after_create_cluster)
    wrap("CreateNodegroup", _after_create_nodegroup)
    _previous_taggable = eks_ext._taggable
    eks_ext._taggable = _taggable

