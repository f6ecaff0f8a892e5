"""EKS add-ons: CreateAddon, DescribeAddon, UpdateAddon, DeleteAddon, ListAddons,
DescribeAddonVersions (moto 5.2.5 has none of them: its REST routes answer 404).

The catalog holds vpc-cni, coredns, kube-proxy, eks-pod-identity-agent, aws-ebs-csi-driver,
aws-efs-csi-driver, amazon-cloudwatch-observability and amazon-sagemaker-hyperpod-taskgovernance,
each with versions compatible with some of Kubernetes 1.28-1.34 and one default per Kubernetes
version (for 1.31: vpc-cni v1.19.5-eksbuild.1, coredns v1.11.4-eksbuild.14, kube-proxy
v1.31.13-eksbuild.2, eks-pod-identity-agent v1.3.8-eksbuild.2, aws-ebs-csi-driver
v1.48.0-eksbuild.2). Add-ons live on their cluster (per account and region, dropped by
``POST /moto-api/reset``), go CREATING -> ACTIVE, UPDATING -> ACTIVE and DELETING -> gone on
``eks.py``'s clock (``addon_create_ms``, ``update_ms``, ``delete_ms``), go with their cluster,
and take tags by ARN (``arn:aws:eks:<region>:<account>:addon/<cluster>/<addon>/<uuid>``) through
TagResource/UntagResource/ListTagsForResource.

Errors as EKS answers them:

* ``ResourceNotFoundException`` (404): unknown cluster or add-on.
* ``ResourceInUseException`` (409): CreateAddon of an add-on the cluster has (unless it repeats
  the ``clientRequestToken`` that created it: then the add-on is returned); UpdateAddon of an
  add-on that is not ACTIVE.
* ``InvalidParameterException`` (400): an add-on name not in the catalog, a version not
  compatible with the cluster's Kubernetes version, ``configurationValues`` that are not a JSON
  object (EKS also takes YAML; the emulator does not), a malformed role ARN, ``maxResults``
  outside 1..100.
* ``InvalidRequestException`` (400): CreateAddon on a cluster that is not ACTIVE.
* ``InvalidParameterException`` "Resolve conflicts option PRESERVE is not supported for operation
  CreateAddon": CreateAddon with ``resolveConflicts`` PRESERVE (the message EKS answered in
  hashicorp/terraform-provider-aws#27481 and eksctl-io/eksctl#5880; UpdateAddon takes it).

Pod Identity for add-ons (``podIdentityAssociations``, botocore ``AddonPodIdentityAssociations``:
``serviceAccount`` and ``roleArn`` required): CreateAddon makes one association per entry in
the add-on's namespace, owned by the add-on (``ownerArn``), with the same role checks as
CreatePodIdentityAssociation (``eks_pod_identity._role``: same account, the role exists and
trusts ``pods.eks.amazonaws.com``) and the same one-per-service-account rule; the add-on lists
their ARNs in ``podIdentityAssociations``. UpdateAddon with the member replaces them ("all
previous pod identity associations are overwritten", EKS UG ``update-addon-role``; an empty
list deletes them, botocore ``UpdateAddonRequest``); without it they stay. DeleteAddon deletes
them unless ``preserve`` is true. UNVERIFIED: what ``preserve`` does to add-on-owned
associations; botocore ``DeleteAddonRequest.preserve`` says only "If an IAM account is
associated with the add-on, it isn't removed", which is about the IRSA role. The emulator keeps
them (the cautious reading for a client: it must not assume they are gone).

Each add-on names the service accounts its Pod Identity configuration supports
(``AddonProduct.pod_identity_accounts``, as DescribeAddonConfiguration's
``podIdentityConfiguration`` reports them): vpc-cni ``aws-node`` (EKS UG ``cni-iam-role``), EBS
CSI ``ebs-csi-controller-sa`` (EKS UG ``ebs-csi``), EFS CSI ``efs-csi-controller-sa`` and
``efs-csi-node-sa`` (EKS UG ``efs-csi``; whether EKS takes the node account is unverified).
CreateAddon / UpdateAddon refuse, as EKS does:

* an entry naming another service account: ``InvalidParameterException`` "Service account
  <sa> in pod identity configuration is not supported for addon <addon>" (EKS's answer quoted in
  terraform-aws-modules/terraform-aws-eks#3520);
* any entry for an add-on (version) without Pod Identity support (coredns, kube-proxy,
  eks-pod-identity-agent: ``requiresIamPermissions`` false, no ``podIdentityConfiguration``):
  ``InvalidParameterException`` "Pod Identity feature is not supported for addon version:
  <version>" (EKS's answer quoted in aws/containers-roadmap#2712).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from moto.core.responses import ActionResult
from moto.core.utils import utcnow
from moto.eks.exceptions import InvalidRequestException
from moto.eks.responses import EKSResponse
from moto.eks.utils import validate_role_arn

from . import eks_catalog as cat
from . import iam_propagation
from ._ec2 import LOCK
from .eks import (
    ACTIVE,
    TIMING,
    addons_of,
    begin,
    eks_action,
    in_use,
    invalid,
    not_found,
    page,
    param,
    require_active,
    start_update,
    status_of,
)


@dataclass(frozen=True)
class AddonRelease:
    version: str
    clusters: tuple[str, ...]  # compatible Kubernetes versions
    default_for: tuple[str, ...]  # Kubernetes versions whose default this is


@dataclass(frozen=True)
class AddonProduct:
    name: str
    type: str
    requires_iam: bool
    releases: tuple[AddonRelease, ...]  # newest first
    # The service accounts its podIdentityAssociations may name (what DescribeAddonConfiguration
    # reports as ``podIdentityConfiguration[].serviceAccount``); empty: no Pod Identity support.
    pod_identity_accounts: tuple[str, ...] = ()

    def release(self, version: str) -> AddonRelease | None:
        return next((r for r in self.releases if r.version == version), None)

    def default(self, k8s: str) -> str | None:
        return next((r.version for r in self.releases if k8s in r.default_for), None)


def _versions(first: str, last: str) -> tuple[str, ...]:
    lo, hi = cat.KUBERNETES_VERSIONS.index(first), cat.KUBERNETES_VERSIONS.index(last)
    return cat.KUBERNETES_VERSIONS[lo : hi + 1]


ALL = cat.KUBERNETES_VERSIONS

CATALOG: dict[str, AddonProduct] = {
    p.name: p
    for p in (
        AddonProduct(
            "vpc-cni",
            "networking",
            True,
            (
                AddonRelease("v1.20.4-eksbuild.1", ALL, _versions("1.33", "1.34")),
                AddonRelease("v1.19.5-eksbuild.1", ALL, _versions("1.28", "1.32")),
                AddonRelease("v1.18.6-eksbuild.1", _versions("1.28", "1.31"), ()),
            ),
            ("aws-node",),
        ),
        AddonProduct(
            "coredns",
            "networking",
            False,
            (
                AddonRelease("v1.12.2-eksbuild.4", _versions("1.33", "1.34"), _versions("1.33", "1.34")),
                AddonRelease("v1.11.4-eksbuild.14", _versions("1.29", "1.32"), _versions("1.29", "1.32")),
                AddonRelease("v1.11.3-eksbuild.1", _versions("1.29", "1.32"), ()),
                AddonRelease("v1.10.1-eksbuild.18", ("1.28",), ("1.28",)),
            ),
        ),
        # kube-proxy follows the Kubernetes patch release: two builds per minor version.
        AddonProduct(
            "kube-proxy",
            "networking",
            False,
            tuple(
                release
                for k8s in reversed(ALL)
                for release in (
                    AddonRelease(f"v{cat.KUBERNETES_PATCH[k8s]}-eksbuild.2", (k8s,), (k8s,)),
                    AddonRelease(f"v{k8s}.0-eksbuild.1", (k8s,), ()),
                )
            ),
        ),
        AddonProduct(
            "eks-pod-identity-agent",
            "security",
            False,
            (
                AddonRelease("v1.3.8-eksbuild.2", ALL, ALL),
                AddonRelease("v1.3.4-eksbuild.1", _versions("1.28", "1.32"), ()),
            ),
        ),
        AddonProduct(
            "aws-ebs-csi-driver",
            "storage",
            True,
            (
                AddonRelease("v1.48.0-eksbuild.2", ALL, ALL),
                AddonRelease("v1.45.0-eksbuild.2", _versions("1.28", "1.33"), ()),
            ),
            ("ebs-csi-controller-sa",),
        ),
        AddonProduct(
            "aws-efs-csi-driver",
            "storage",
            True,
            (
                AddonRelease("v2.1.4-eksbuild.1", ALL, ALL),
                AddonRelease("v2.0.9-eksbuild.1", _versions("1.28", "1.33"), ()),
            ),
            ("efs-csi-controller-sa", "efs-csi-node-sa"),
        ),
        # Container Insights with NVIDIA GPU metrics: EKS UG `amazon-cloudwatch-observability`;
        # v6.2.0-eksbuild.1 is named by CloudWatch UG `install-CloudWatch-Observability-EKS-addon`
        # (OTel metrics from that version), v3.1.0 is the first with EKS Pod Identity
        # (CloudWatch UG `Container-Insights-setup-EKS-addon`). The exact build suffix of
        # v3.1.0 and the compatibility matrix are not verified here.
        AddonProduct(
            "amazon-cloudwatch-observability",
            "observability",
            True,
            (
                AddonRelease("v6.2.0-eksbuild.1", ALL, ALL),
                AddonRelease("v3.1.0-eksbuild.1", _versions("1.28", "1.32"), ()),
            ),
            # The agent's account takes a Pod Identity role from v3.1.0 (CloudWatch UG
            # `Container-Insights-setup-EKS-addon`); both releases here are v3.1.0 or newer.
            ("cloudwatch-agent",),
        ),
        # HyperPod task governance (Kueue inside): SageMaker DG
        # `sagemaker-hyperpod-eks-operate-console-ui-governance-upgrade` names
        # v1.6.0-eksbuild.1 (Kueue v0.19.2); HyperPod supports Kubernetes 1.28-1.34
        # (SageMaker DG `sagemaker-hyperpod-eks-prerequisites`).
        AddonProduct(
            "amazon-sagemaker-hyperpod-taskgovernance",
            "machine-learning",
            False,
            (AddonRelease("v1.6.0-eksbuild.1", ALL, ALL),),
        ),
    )
}


def _addon_info(product: AddonProduct, k8s: str | None) -> dict[str, Any]:
    """The botocore ``AddonInfo`` shape; with ``k8s``, only what runs on that version."""
    versions = []
    for release in product.releases:
        clusters = [c for c in release.clusters if k8s is None or c == k8s]
        if not clusters:
            continue
        versions.append(
            {
                "addonVersion": release.version,
                "architecture": ["amd64", "arm64"],
                "computeTypes": ["ec2"],
                "compatibilities": [
                    {
                        "clusterVersion": c,
                        "platformVersions": ["*"],
                        "defaultVersion": c in release.default_for,
                    }
                    for c in clusters
                ],
                "requiresConfiguration": False,
                "requiresIamPermissions": product.requires_iam,
            }
        )
    return {
        "addonName": product.name,
        "type": product.type,
        "addonVersions": versions,
        "publisher": "eks",
        "owner": "aws",
        "defaultNamespace": "kube-system",
    }


class Addon:
    def __init__(
        self,
        cluster: Any,
        name: str,
        version: str,
        role_arn: str | None,
        configuration: str | None,
        tags: dict[str, str],
        token: str | None,
    ) -> None:
        self.cluster_name = cluster.name
        self._cluster = cluster
        self.name = name
        self.version = version
        self.role_arn = role_arn
        self.configuration = configuration
        self.tags = tags
        self.client_request_token = token
        # The cluster ARN is arn:<partition>:eks:<region>:<account>:cluster/<name>.
        prefix = cluster.arn.rsplit(":", 1)[0]
        self.arn = f"{prefix}:addon/{cluster.name}/{name}/{uuid.uuid4()}"
        self.created_at = self.modified_at = utcnow()
        self.associations: list[str] = []  # ids of the Pod Identity associations it owns
        self.preserved = False

    @property
    def status(self) -> str:
        return status_of(self)

    def shape(self) -> dict[str, Any]:
        """The botocore ``Addon`` shape."""
        return {
            "addonName": self.name,
            "clusterName": self.cluster_name,
            "status": self.status,
            "addonVersion": self.version,
            "health": {"issues": []},
            "addonArn": self.arn,
            "createdAt": self.created_at,
            "modifiedAt": self.modified_at,
            "serviceAccountRoleArn": self.role_arn,
            "tags": self.tags,
            "publisher": "eks",
            "owner": "aws",
            "configurationValues": self.configuration,
            "podIdentityAssociations": [
                a.arn for i, a in _pi().associations_of(self._cluster).items() if i in self.associations
            ],
        }


def _product(name: str, cluster: str) -> AddonProduct:
    product = CATALOG.get(name)
    if product is None:
        raise invalid(f"Addon {name} specified is not supported", cluster, addon=name)
    return product


def _check_version(product: AddonProduct, version: str, k8s: str, cluster: str) -> None:
    release = product.release(version)
    if release is None or k8s not in release.clusters:
        raise invalid(
            f"Addon version {version} of {product.name} is not supported on Kubernetes {k8s}",
            cluster,
            addon=product.name,
        )


def _configuration(raw: str, cluster: str, addon: str) -> str | None:
    """Validated ``configurationValues``; "" clears them."""
    if raw == "":
        return None
    try:
        value = json.loads(raw)
    except ValueError as e:
        raise invalid(
            f"ConfigurationValue provided in request is not supported: {e}", cluster, addon=addon
        ) from None
    if not isinstance(value, dict):
        raise invalid(
            "ConfigurationValue provided in request is not supported: it must be a JSON object",
            cluster,
            addon=addon,
        )
    return raw


def _pi() -> Any:
    from . import eks_pod_identity  # imported late: it imports eks.py's helpers as this does

    return eks_pod_identity


def _associate(self: EKSResponse, cluster: Any, addon: Addon, entries: Any) -> None:
    """Replaces the add-on's Pod Identity associations with ``entries`` (all checked first)."""
    pi = _pi()
    if not isinstance(entries, list):
        raise invalid("podIdentityAssociations must be a list", cluster.name, addon=addon.name)
    product = CATALOG[addon.name]
    if entries and not product.pod_identity_accounts:
        # containers-roadmap#2712 (EKS's answer for an add-on version without Pod Identity).
        raise invalid(
            f"Pod Identity feature is not supported for addon version: {addon.version}", cluster.name, addon=addon.name
        )
    wanted = []
    for entry in entries:
        account = entry.get("serviceAccount") if isinstance(entry, dict) else None
        role = entry.get("roleArn") if isinstance(entry, dict) else None
        if not isinstance(account, str) or not pi.DNS_SUBDOMAIN.match(account) or len(account) > 253:
            raise invalid(f"Invalid service account {account}", cluster.name, addon=addon.name)
        if account not in product.pod_identity_accounts:
            # terraform-aws-modules/terraform-aws-eks#3520 (EKS's answer, verbatim).
            raise invalid(
                f"Service account {account} in pod identity configuration is not supported for addon {addon.name}",
                cluster.name,
                addon=addon.name,
            )
        wanted.append((account, pi._role(role, self.current_account, cluster.name)))
    if len({a for a, _ in wanted}) != len(wanted):
        raise invalid("A service account appears twice in podIdentityAssociations", cluster.name, addon=addon.name)
    owned = pi.associations_of(cluster)
    for account, _ in wanted:
        for other in owned.values():
            if (other.namespace, other.service_account) == (NAMESPACE, account) and other.id not in addon.associations:
                raise in_use(f"Association already exists: {other.id}", cluster.name, addon=addon.name)
    for association_id in addon.associations:
        owned.pop(association_id, None)
    addon.associations = []
    for account, role in wanted:
        association = pi.Association(cluster, NAMESPACE, account, role, {}, None)
        association.owner_arn = addon.arn
        owned[association.id] = association
        addon.associations.append(association.id)


# The add-ons the catalog holds run in kube-system (``AddonInfo.defaultNamespace``).
NAMESPACE = "kube-system"


def _role(arn: str | None, account: str, cluster: str) -> str | None:
    if arn:
        validate_role_arn(arn)
        # A role IAM has not propagated to EKS yet (iam_propagation.py, ``roles`` setting).
        if iam_propagation.role_unseen_by_eks(account, arn):
            raise invalid(f"{iam_propagation.ROLE_UNSEEN}: {arn}", cluster)
    return arn


def _find(response: EKSResponse) -> tuple[Any, Addon]:
    cluster_name = response._get_param("name")
    addon_name = response._get_param("addonName")
    cluster = response.eks_backend.describe_cluster(cluster_name)
    addon = addons_of(cluster).get(addon_name)
    if addon is None:
        raise not_found(
            f"No addon: {addon_name} found in cluster: {cluster_name}", cluster_name, addon=addon_name
        )
    return cluster, addon


def _create_addon(self: EKSResponse) -> ActionResult:
    cluster_name = self._get_param("name")
    name = self._get_param("addonName")
    token = self._get_param("clientRequestToken")
    configuration = self._get_param("configurationValues")
    if self._get_param("resolveConflicts") == "PRESERVE":
        raise invalid(
            "Resolve conflicts option PRESERVE is not supported for operation CreateAddon", cluster_name, addon=name
        )
    with LOCK:
        cluster = self.eks_backend.describe_cluster(cluster_name)
        addons = addons_of(cluster)
        existing = addons.get(name)
        if existing is not None:
            if token and existing.client_request_token == token:
                return ActionResult({"addon": existing.shape()})
            raise in_use(f"Addon already exists with name: {name}", cluster_name, addon=name)
        product = _product(name, cluster_name)
        if status_of(cluster) != ACTIVE:
            raise InvalidRequestException(
                message=f"Cluster '{cluster_name}' is not in ACTIVE status",
                clusterName=cluster_name,
                addonName=name,
            )
        version = self._get_param("addonVersion") or product.default(cluster.version)
        _check_version(product, version, cluster.version, cluster_name)
        addon = Addon(
            cluster,
            name,
            version,
            _role(self._get_param("serviceAccountRoleArn"), self.current_account, cluster_name),
            None if configuration is None else _configuration(configuration, cluster_name, name),
            self._get_param("tags") or {},
            token,
        )
        entries = self._get_param("podIdentityAssociations")
        if entries:
            _associate(self, cluster, addon, entries)
        addons[name] = addon
        begin(addon, "CREATING", TIMING.addon_create_ms)
        return ActionResult({"addon": addon.shape()})


def _describe_addon(self: EKSResponse) -> ActionResult:
    with LOCK:
        _, addon = _find(self)
        return ActionResult({"addon": addon.shape()})


def _update_addon(self: EKSResponse) -> ActionResult:
    version = self._get_param("addonVersion")
    configuration = self._get_param("configurationValues")
    role_arn = self._get_param("serviceAccountRoleArn")
    resolve = self._get_param("resolveConflicts")
    entries = self._get_param("podIdentityAssociations")
    with LOCK:
        cluster, addon = _find(self)
        require_active(addon, f"Addon {addon.name}", cluster=cluster.name, addon=addon.name)
        params = []
        if entries is not None:
            _associate(self, cluster, addon, entries)
            params.append(param("PodIdentityAssociations", entries))
        if version is not None:
            _check_version(CATALOG[addon.name], version, cluster.version, cluster.name)
            addon.version = version
            params.append(param("AddonVersion", version))
        if configuration is not None:
            addon.configuration = _configuration(configuration, cluster.name, addon.name)
            params.append(param("ConfigurationValues", configuration))
        if role_arn is not None:
            addon.role_arn = _role(role_arn, self.current_account, cluster.name) or None
            params.append(param("ServiceAccountRoleArn", role_arn))
        if resolve is not None:
            params.append(param("ResolveConflicts", resolve))
        addon.modified_at = utcnow()
        update = start_update(cluster, addon, "AddonUpdate", params, addon=addon.name)
        return ActionResult({"update": update.shape()})


def _delete_addon(self: EKSResponse) -> ActionResult:
    preserve = str(self._get_param("preserve") or "").lower() == "true"
    with LOCK:
        cluster, addon = _find(self)
        addon.preserved = preserve
        if not preserve:
            owned = _pi().associations_of(cluster)
            for association_id in addon.associations:
                owned.pop(association_id, None)
        if status_of(addon) != "DELETING":
            begin(addon, "DELETING", TIMING.delete_ms)
        return ActionResult({"addon": addon.shape()})


def _list_addons(self: EKSResponse) -> ActionResult:
    with LOCK:
        cluster = self.eks_backend.describe_cluster(self._get_param("name"))
        names, token = page(
            list(addons_of(cluster)), self._get_int_param("maxResults"), self._get_param("nextToken")
        )
    return ActionResult({"addons": names, "nextToken": token})


def _describe_addon_versions(self: EKSResponse) -> ActionResult:
    k8s = self._get_param("kubernetesVersion")
    name = self._get_param("addonName")
    wanted = {
        key: self.querystring.get(key)
        for key in ("types", "publishers", "owners")
        if self.querystring.get(key)
    }
    infos = {}
    for product in CATALOG.values():
        info = _addon_info(product, k8s)
        if (name and product.name != name) or not info["addonVersions"]:
            continue
        if any(info[key[:-1]] not in values for key, values in wanted.items()):
            continue
        infos[product.name] = info
    names, token = page(list(infos), self._get_int_param("maxResults"), self._get_param("nextToken"))
    return ActionResult({"addons": [infos[n] for n in names], "nextToken": token})


def install() -> None:
    eks_action("CreateAddon")(_create_addon)
    eks_action("DescribeAddon")(_describe_addon)
    eks_action("UpdateAddon")(_update_addon)
    eks_action("DeleteAddon")(_delete_addon)
    eks_action("ListAddons")(_list_addons)
    eks_action("DescribeAddonVersions")(_describe_addon_versions)
