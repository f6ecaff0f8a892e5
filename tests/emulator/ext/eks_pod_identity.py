"""EKS Pod Identity associations: CreatePodIdentityAssociation, DescribePodIdentityAssociation,
ListPodIdentityAssociations, UpdatePodIdentityAssociation, DeletePodIdentityAssociation (moto 5.2.5
has none: its EKS routes answer 404). Wire shapes are botocore's (``PodIdentityAssociation``,
``PodIdentityAssociationSummary``, eks 2017-11-01 in botocore 1.44.5).

Sources: [UG] EKS User Guide "EKS Pod Identity considerations", "Assign an IAM role to a Kubernetes
service account" (awsdocs/amazon-eks-user-guide @4d52b4d
``latest/ug/manage-access/aws-access/service-accounts.adoc``); [API] the botocore model's member
and operation documentation; [CLI] aws-cli ``awscli/examples/eks/create-pod-identity-association.rst``;
EKS error messages quoted in public issues, named where used.

Associations live on moto's cluster object (``_gpustack_pod_identity``): they go with the cluster
and ``POST /moto-api/reset`` drops them. Behaviour:

* Every call needs the cluster (``ResourceNotFoundException`` 404). Pod Identity works in any
  authentication mode. The ``eks-pod-identity-agent`` add-on is needed for pods to get
  credentials [UG "The EKS Pod Identity Agent is required"], but EKS does not check it when an
  association is created ("you can specify a namespace and service account by name that doesn't
  exist in the cluster" [UG]); nor does the emulator.
* CreatePodIdentityAssociation:
  - ``roleArn`` must be an IAM role of the cluster's account ("You can only associate roles that
    are in the same AWS account as the cluster" [UG]) that exists (wording unverified), and its
    trust policy must allow the service principal ``pods.eks.amazonaws.com`` the actions
    ``sts:AssumeRole`` and ``sts:TagSession`` [UG: the trust policy EKS Pod Identity needs; "EKS
    Pod Identity uses AssumeRole ... uses TagSession"]. EKS refuses a role without it:
    ``InvalidParameterException`` "Trust policy of the role provided is invalid"
    (hashicorp/terraform-provider-aws#41483, a role trusting only an OIDC provider; the full
    sentence "... Follow the official documentation to resolve the issue." is aws/aws-cdk#31522).
    The emulator accepts the two actions in one or several Allow statements naming that
    principal (``sts:*`` and ``*`` cover them).
  - One association per service account and namespace [UG "You can associate one IAM role to each
    Kubernetes service account in each cluster"]: a second is ``ResourceInUseException`` (409)
    "Association already exists: a-..." (awslabs/crossplane-on-eks#168, eksctl-io/eksctl#7753),
    unless the request repeats the ``clientRequestToken`` that created it (botocore
    ``idempotencyToken``): then that association.
  - ``namespace`` must be a DNS-1123 label and ``serviceAccount`` a DNS-1123 subdomain (the
    Kubernetes object name rules; ``InvalidParameterException``, wording unverified).
  - ``policy`` needs ``disableSessionTags`` true ("When using this policy, disableSessionTags must
    be set to true" [API]) and must be a JSON object; ``targetRoleArn`` must be a role ARN and
    gets an ``externalId`` [API].
  - The id is ``a-`` and 17 lowercase letters/digits, the ARN
    ``arn:aws:eks:<region>:<acct>:podidentityassociation/<cluster>/<id>`` [CLI].
* UpdatePodIdentityAssociation: ``roleArn`` (same checks), ``targetRoleArn`` ("" removes it),
  ``disableSessionTags``, ``policy`` ("" removes it); "You must change at least one of these in an
  update" [API]: a request that changes nothing is ``InvalidParameterException`` (wording
  unverified). Namespace and service account cannot change [API].
* DeletePodIdentityAssociation answers the deleted association [API shape].
* Associations an add-on makes (``eks_addons.py``) carry the add-on's ARN as ``ownerArn`` ("If
  defined, the EKS Pod Identity association is owned by an Amazon EKS add-on" [API]).
* Unknown id: ``ResourceNotFoundException`` (404; wording unverified).
* ListPodIdentityAssociations: summaries (no ``roleArn``, times or tags [API]), sorted by id,
  ``namespace`` and ``serviceAccount`` filters, ``maxResults`` 1-100 / ``nextToken``.
* Tags by ARN through TagResource/UntagResource/ListTagsForResource (``eks._taggable``); tag keys
  starting ``aws:`` are refused ([API] ``tags`` doc).
"""

from __future__ import annotations

import json
import re
import secrets
import string
import uuid
from typing import Any
from urllib.parse import unquote

from moto.core.responses import ActionResult
from moto.core.utils import utcnow
from moto.eks import urls as eks_urls
from moto.eks.models import Cluster, EKSBackend
from moto.eks.responses import EKSResponse
from moto.iam.models import iam_backends

from . import eks as eks_ext
from . import iam_propagation
from ._ec2 import LOCK
from .eks import eks_action, in_use, invalid, not_found, page

SERVICE_PRINCIPAL = "pods.eks.amazonaws.com"
NEEDED_ACTIONS = ("sts:AssumeRole", "sts:TagSession")
TRUST_MESSAGE = "Trust policy of the role provided is invalid. Follow the official documentation to resolve the issue."
ROLE = re.compile(r"^arn:(aws[a-z-]*):iam::(\d{12}):role/(?:[\w+=,.@/-]*/)?[\w+=,.@-]{1,64}$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
ID_ALPHABET = string.ascii_lowercase + string.digits

ROUTES = (
    "{0}/clusters/(?P<name>[^/]+)/pod-identity-associations$",
    "{0}/clusters/(?P<name>[^/]+)/pod-identity-associations/(?P<associationId>[^/]+)$",
)


class Association:
    def __init__(
        self,
        cluster: Cluster,
        namespace: str,
        service_account: str,
        role_arn: str,
        tags: dict[str, str],
        token: str | None,
    ) -> None:
        self.cluster_name = cluster.name
        self.namespace = namespace
        self.service_account = service_account
        self.role_arn = role_arn
        self.tags = tags
        self.client_request_token = token
        self.id = "a-" + "".join(secrets.choice(ID_ALPHABET) for _ in range(17))
        prefix = cluster.arn.rsplit(":", 1)[0]  # arn:<partition>:eks:<region>:<account>
        self.arn = f"{prefix}:podidentityassociation/{cluster.name}/{self.id}"
        self.created_at = self.modified_at = utcnow()
        self.disable_session_tags = False
        self.target_role_arn: str | None = None
        self.external_id: str | None = None
        self.policy: str | None = None
        # The add-on that made it (CreateAddon/UpdateAddon ``podIdentityAssociations``).
        self.owner_arn: str | None = None

    def shape(self) -> dict[str, Any]:
        """The botocore ``PodIdentityAssociation`` shape."""
        return {
            "clusterName": self.cluster_name,
            "namespace": self.namespace,
            "serviceAccount": self.service_account,
            "roleArn": self.role_arn,
            "associationArn": self.arn,
            "associationId": self.id,
            "tags": dict(self.tags),
            "createdAt": self.created_at,
            "modifiedAt": self.modified_at,
            "disableSessionTags": self.disable_session_tags,
            "targetRoleArn": self.target_role_arn,
            "externalId": self.external_id,
            "policy": self.policy,
            "ownerArn": self.owner_arn,
        }

    def summary(self) -> dict[str, Any]:
        """The botocore ``PodIdentityAssociationSummary`` shape."""
        return {
            "clusterName": self.cluster_name,
            "namespace": self.namespace,
            "serviceAccount": self.service_account,
            "associationArn": self.arn,
            "associationId": self.id,
        }


def associations_of(cluster: Cluster) -> dict[str, Association]:
    """association id -> association (kept on moto's cluster object)."""
    return cluster.__dict__.setdefault("_gpustack_pod_identity", {})


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _covers(pattern: str, action: str) -> bool:
    regex = "^" + re.escape(pattern).replace("\\*", ".*").replace("\\?", ".") + "$"
    return re.match(regex, action, re.IGNORECASE) is not None


def trusts_pod_identity(document: str | None) -> bool:
    """Whether a role trust policy lets ``pods.eks.amazonaws.com`` AssumeRole and TagSession."""
    if not document:
        return False
    try:
        policy = json.loads(document)
    except ValueError:
        try:
            policy = json.loads(unquote(document))
        except ValueError:
            return False
    allowed: set[str] = set()
    for statement in _list(policy.get("Statement") if isinstance(policy, dict) else None):
        if not isinstance(statement, dict) or statement.get("Effect") != "Allow":
            continue
        principal = statement.get("Principal")
        services = _list(principal.get("Service")) if isinstance(principal, dict) else []
        if SERVICE_PRINCIPAL not in services:
            continue
        for pattern in _list(statement.get("Action") or []):
            allowed |= {a for a in NEEDED_ACTIONS if isinstance(pattern, str) and _covers(pattern, a)}
    return allowed == set(NEEDED_ACTIONS)


def _role(arn: Any, account: str, cluster: str) -> str:
    match = ROLE.match(arn) if isinstance(arn, str) else None
    if match is None:
        raise invalid(f"Invalid role ARN {arn}", cluster)
    partition, role_account = match.group(1), match.group(2)
    if role_account != account:
        raise invalid("The role must be in the same AWS account as the cluster", cluster)
    role = next((r for r in iam_backends[account][partition].roles.values() if r.arn == arn), None)
    # EKS's wording (hashicorp/terraform-provider-aws#34711); a role IAM has not propagated to
    # EKS yet is answered the same (iam_propagation.py, when its ``roles`` setting is on).
    if role is None or iam_propagation.role_unseen_by_eks(account, arn):
        raise invalid(f"{iam_propagation.ROLE_UNSEEN}: {arn}", cluster)
    if not trusts_pod_identity(role.assume_role_policy_document):
        raise invalid(TRUST_MESSAGE, cluster)
    return arn


def _target_role(arn: Any, cluster: str) -> str | None:
    if arn in (None, ""):
        return None
    if not isinstance(arn, str) or ROLE.match(arn) is None:
        raise invalid(f"Invalid target role ARN {arn}", cluster)
    return arn


def _policy(policy: Any, disable_session_tags: bool, cluster: str) -> str | None:
    if policy in (None, ""):
        return None
    if not disable_session_tags:
        raise invalid("disableSessionTags must be set to true when a policy is specified", cluster)
    try:
        document = json.loads(policy)
    except (TypeError, ValueError):
        document = None
    if not isinstance(document, dict):
        raise invalid("The policy must be a JSON policy document", cluster)
    return str(policy)


def _find(response: EKSResponse) -> tuple[Cluster, Association]:
    cluster = response.eks_backend.describe_cluster(response._get_param("name"))
    association_id = response._get_param("associationId")
    association = associations_of(cluster).get(association_id)
    if association is None:
        raise not_found(f"No Pod Identity Association found with id {association_id}", cluster.name)
    return cluster, association


def _check_tags(tags: dict[str, str] | None, cluster: str) -> dict[str, str]:
    for key in tags or {}:
        if key.lower().startswith("aws:"):
            raise invalid(f"Tag keys cannot start with 'aws:': {key}", cluster)
    return dict(tags or {})


def _create(self: EKSResponse) -> ActionResult:
    namespace = self._get_param("namespace")
    service_account = self._get_param("serviceAccount")
    token = self._get_param("clientRequestToken")
    disable = bool(self._get_param("disableSessionTags"))
    with LOCK:
        cluster = self.eks_backend.describe_cluster(self._get_param("name"))
        name = cluster.name
        for existing in associations_of(cluster).values():
            if (existing.namespace, existing.service_account) == (namespace, service_account):
                if token and existing.client_request_token == token:
                    return ActionResult({"association": existing.shape()})
                raise in_use(f"Association already exists: {existing.id}", name)
        if not isinstance(namespace, str) or len(namespace) > 63 or not DNS_LABEL.match(namespace):
            raise invalid(f"Invalid namespace {namespace}: it must be a DNS-1123 label", name)
        if (
            not isinstance(service_account, str)
            or len(service_account) > 253
            or not DNS_SUBDOMAIN.match(service_account)
        ):
            raise invalid(f"Invalid service account {service_account}: it must be a DNS-1123 subdomain", name)
        role = _role(self._get_param("roleArn"), self.current_account, name)
        target = _target_role(self._get_param("targetRoleArn"), name)
        policy = _policy(self._get_param("policy"), disable, name)
        association = Association(
            cluster, namespace, service_account, role, _check_tags(self._get_param("tags"), name), token
        )
        association.disable_session_tags = disable
        association.target_role_arn = target
        association.external_id = str(uuid.uuid4()) if target else None
        association.policy = policy
        associations_of(cluster)[association.id] = association
        return ActionResult({"association": association.shape()})


def _describe(self: EKSResponse) -> ActionResult:
    with LOCK:
        _, association = _find(self)
        return ActionResult({"association": association.shape()})


def _list_associations(self: EKSResponse) -> ActionResult:
    namespace = self._get_param("namespace")
    service_account = self._get_param("serviceAccount")
    with LOCK:
        cluster = self.eks_backend.describe_cluster(self._get_param("name"))
        found = {
            a.id: a
            for a in associations_of(cluster).values()
            if (namespace is None or a.namespace == namespace)
            and (service_account is None or a.service_account == service_account)
        }
        ids, token = page(list(found), self._get_int_param("maxResults"), self._get_param("nextToken"))
        return ActionResult({"associations": [found[i].summary() for i in ids], "nextToken": token})


def _update(self: EKSResponse) -> ActionResult:
    role = self._get_param("roleArn")
    target = self._get_param("targetRoleArn")
    disable = self._get_param("disableSessionTags")
    policy = self._get_param("policy")
    with LOCK:
        cluster, association = _find(self)
        name = cluster.name
        new_role = association.role_arn if role is None else _role(role, self.current_account, name)
        new_target = association.target_role_arn if target is None else _target_role(target, name)
        new_disable = association.disable_session_tags if disable is None else bool(disable)
        new_policy = association.policy if policy is None else _policy(policy, new_disable, name)
        if new_policy is not None and not new_disable:
            raise invalid("disableSessionTags must be set to true when a policy is specified", name)
        before = (association.role_arn, association.target_role_arn, association.disable_session_tags, association.policy)
        after = (new_role, new_target, new_disable, new_policy)
        if before == after:
            raise invalid(
                "The update must change at least one of roleArn, targetRoleArn, disableSessionTags or policy",
                name,
            )
        if new_target != association.target_role_arn:
            association.external_id = str(uuid.uuid4()) if new_target else None
        association.role_arn, association.target_role_arn = new_role, new_target
        association.disable_session_tags, association.policy = new_disable, new_policy
        association.modified_at = utcnow()
        return ActionResult({"association": association.shape()})


def _delete(self: EKSResponse) -> ActionResult:
    with LOCK:
        cluster, association = _find(self)
        del associations_of(cluster)[association.id]
        return ActionResult({"association": association.shape()})


_previous_taggable = eks_ext._taggable


def _taggable(backend: EKSBackend, arn: str) -> Any:
    for cluster in backend.clusters.values():
        for association in associations_of(cluster).values():
            if association.arn == arn:
                return association
    return _previous_taggable(backend, arn)


def install() -> None:
    global _previous_taggable
    for path in ROUTES:
        eks_urls.url_paths.setdefault(path, EKSResponse.dispatch)
    eks_action("CreatePodIdentityAssociation")(_create)
    eks_action("DescribePodIdentityAssociation")(_describe)
    eks_action("ListPodIdentityAssociations")(_list_associations)
    eks_action("UpdatePodIdentityAssociation")(_update)
    eks_action("DeletePodIdentityAssociation")(_delete)
    # eks_access.install() ran first (module order) and put its own lookup in front of eks.py's.
    _previous_taggable = eks_ext._taggable
    eks_ext._taggable = _taggable
