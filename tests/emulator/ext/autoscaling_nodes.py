"""Whether a self-managed node group's (Auto Scaling group's) instances would join their cluster,
and the instance-profile propagation refusal of CreateAutoScalingGroup / UpdateAutoScalingGroup.

Auto Scaling accepts a group whose instances can never join EKS: they boot and never register,
and nothing in the Auto Scaling API says so (the Kubernetes node list does). The emulator decides
it when the group is created or its template changes, from the template version it then names, and
answers ``GET /_gpustack/autoscaling/nodes?name=<group>`` with ``{"joined": bool, "reasons":
[...]}`` (404 for a group it never saw), the stand-in for ``kubectl get nodes``.

Why the nodes do not join, as modelled:

* The cluster is found from the user data (nodeadm ``spec.cluster.name`` or Bottlerocket
  ``settings.kubernetes.cluster-name``), else from the ``kubernetes.io/cluster/<name>`` tag.
  No user data naming a cluster that exists: the nodes join nothing.
* Security groups: the EKS cluster security group admits inbound traffic only from itself (EKS UG
  ``sec-group-reqs``, "Default cluster security group": Inbound All / All / Self) and the control
  plane's ENIs carry it; the nodes carry the template's ``SecurityGroupIds`` (or the groups of its
  network interfaces), else the VPC's default group (EC2 UG, "Default security groups": a
  launch without groups gets the default group). The nodes reach the API server and the control
  plane reaches their kubelet (port 10250) when they carry the cluster security group, or the
  cluster security group has an ingress rule whose source is one of their groups. Simplification,
  stricter than AWS in one case: a public endpoint open to the nodes' egress address would let
  nodes register without either, but kubectl logs/exec and webhooks would still fail, so it is
  refused here too.
* Access: the nodes' role (their template's instance profile's) needs an ``EC2_LINUX`` access
  entry in the cluster (EKS UG ``creating-access-entries``: nodes outside managed node groups
  need one; a CONFIG_MAP-mode cluster's aws-auth is not modelled). Checked when asked, not at create: kubelet retries its registration, so an entry
  made later still lets the nodes join.
* The user data: the same checks as a managed group's (``node_join``: nodeadm NodeConfig parts,
  Bottlerocket TOML types).

Instance profile propagation (``iam_propagation`` settings, same switch ``POST
/_gpustack/iam-propagation?seconds=N``): Auto Scaling validates the template's instance profile at
CreateAutoScalingGroup and UpdateAutoScalingGroup, and a profile IAM has not propagated yet is
``ValidationError`` "You must use a valid fully-formed launch template. Value (<name>) for
parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name"
(hashicorp/terraform-provider-aws#5633, which added a retry for it; eksctl-io/eksctl#8039). As for
RunInstances: once per profile younger than the setting; the next call goes through.
"""

from __future__ import annotations

import base64
import binascii
import email
import tomllib
from typing import Any, Callable

from moto.autoscaling.exceptions import ValidationError
from moto.autoscaling.models import autoscaling_backends
from moto.autoscaling.responses import AutoScalingResponse
from moto.ec2.models import ec2_backends
from moto.eks.models import eks_backends

from . import iam_propagation, node_join
from ._ec2 import LOCK
from .capacity_control import ControlError, on_reset, route

# (account, region, group name) -> reasons the nodes do not join ([]: they join), decided when
# the group or its template changes
_joins: dict[tuple[str, str, str], list[str]] = {}
# (account, region, group name) -> (cluster name, instance profile name), for the access check
_who: dict[tuple[str, str, str], tuple[str | None, str | None]] = {}


@route("GET", "/_gpustack/autoscaling/nodes")
def _nodes(query: dict[str, str]) -> tuple[int, Any]:
    name = query.get("name")
    if not name:
        raise ControlError("name is required")
    with LOCK:
        found = [(key, reasons) for key, reasons in _joins.items() if key[2] == name]
        if not found:
            return 404, {"error": f"no Auto Scaling group {name} seen"}
        key, reasons = found[-1]
        reasons = reasons + _access_reasons(key)
    return 200, {"joined": not reasons, "reasons": reasons}


def _access_reasons(key: tuple[str, str, str]) -> list[str]:
    """Checked when asked (kubelet retries its registration until the entry exists): the nodes'
    role (their instance profile's) needs an access entry of type EC2_LINUX in the cluster
    (EKS UG creating-access-entries: nodes outside managed node groups need one)."""
    from moto.iam.models import iam_backends
    from moto.utilities.utils import get_partition

    from . import eks_access

    account, region, _ = key
    cluster_name, profile_name = _who.get(key, (None, None))
    cluster = eks_backends[account][region].clusters.get(cluster_name) if cluster_name else None
    if cluster is None:
        return []  # already a reason
    if (cluster.access_config or {}).get("authenticationMode") == "CONFIG_MAP":
        return []  # aws-auth ConfigMap mappings are not modelled
    if not profile_name:
        return ["the template names no instance profile: the nodes have no role to authenticate as"]
    profile = next(
        (p for p in iam_backends[account][get_partition(region)].get_instance_profiles() if p.name == profile_name),
        None,
    )
    roles = [r.arn for r in (profile.roles if profile else [])]
    entries = eks_access.entries_of(cluster)
    if not any(getattr(entries.get(arn), "type", None) == "EC2_LINUX" for arn in roles):
        return [f"the nodes' role {roles or '(none)'} has no EC2_LINUX access entry in {cluster.name}: registration is refused"]
    return []


def _reset() -> None:
    with LOCK:
        _joins.clear()
        _who.clear()


def _user_data_text(data: dict[str, Any]) -> str:
    raw = data.get("UserData")
    if hasattr(raw, "as_bytes"):
        raw = raw.as_bytes()
    if not raw:
        return ""
    try:
        return base64.b64decode(raw, validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ""


def _cluster_name(data: dict[str, Any], tags: list[dict[str, Any]]) -> str | None:
    import yaml

    text = _user_data_text(data)
    message = email.message_from_string(text)
    if message.is_multipart():
        for part in message.walk():
            if part.get_content_type() != "application/node.eks.aws":
                continue
            try:
                for doc in yaml.safe_load_all(part.get_payload(decode=True) or b""):
                    name = (((doc or {}).get("spec") or {}).get("cluster") or {}).get("name")
                    if name:
                        return str(name)
            except yaml.YAMLError:
                continue
    else:
        try:
            name = tomllib.loads(text).get("settings", {}).get("kubernetes", {}).get("cluster-name")
            if name:
                return str(name)
        except tomllib.TOMLDecodeError:
            pass
    for tag in tags:
        key = str(tag.get("Key") or tag.get("key") or "")
        if key.startswith("kubernetes.io/cluster/"):
            return key.removeprefix("kubernetes.io/cluster/")
    return None


def _node_groups(ec2: Any, data: dict[str, Any], subnet_ids: list[str]) -> list[str]:
    groups = list(data.get("SecurityGroupIds") or data.get("SecurityGroupId") or [])
    for interface in data.get("NetworkInterfaces") or []:
        groups += list(interface.get("Groups") or interface.get("SecurityGroupId") or [])
    if groups:
        return groups
    # None named: the instances get their VPC's default group (EC2 UG, default security groups).
    for subnet_id in subnet_ids:
        try:
            vpc_id = ec2.get_subnet(subnet_id).vpc_id
        except Exception:  # noqa: BLE001 - moto raises its own client errors
            continue
        for group in ec2.describe_security_groups(filters={"vpc-id": [vpc_id], "group-name": ["default"]}):
            return [group.id]
    return []


def _admits(cluster_group: Any, node_groups: list[str]) -> bool:
    for rule in getattr(cluster_group, "ingress_rules", []) or []:
        # moto keeps one source group per rule (``SecurityRule.source_group``).
        pairs = list(getattr(rule, "source_groups", None) or []) + [getattr(rule, "source_group", None) or {}]
        sources = [g.get("GroupId") for g in pairs if g]
        if not any(s in node_groups for s in sources):
            continue
        proto = str(getattr(rule, "ip_protocol", ""))
        low, high = getattr(rule, "from_port", None), getattr(rule, "to_port", None)
        if proto == "-1" or (low is not None and high is not None and int(low) <= 443 <= int(high)):
            return True
    return False


def join_reasons(account: str, region: str, group: Any) -> list[str]:
    ec2 = ec2_backends[account][region]
    template = getattr(group, "ec2_launch_template", None)
    if template is None:
        return ["the group has no launch template"]
    try:
        version = template.get_version(getattr(group, "launch_template_version", None) or "$Default")
    except Exception:  # noqa: BLE001
        version = template.default_version()
    data = dict(version.data)
    subnet_ids = [s for s in str(getattr(group, "vpc_zone_identifier", "") or "").split(",") if s]
    tags = list(getattr(group, "tags", []) or [])
    name = _cluster_name(data, tags)
    cluster = eks_backends[account][region].clusters.get(name) if name else None
    profile = (data.get("IamInstanceProfile") or {}).get("Name")
    with LOCK:
        _who[(account, region, group.name)] = (name, profile)
    if cluster is None:
        return [f"the user data joins no cluster of this account (found {name!r})"]
    reasons: list[str] = []
    cluster_group_id = (cluster.resources_vpc_config or {}).get("clusterSecurityGroupId")
    node_groups = _node_groups(ec2, data, subnet_ids)
    if cluster_group_id and cluster_group_id not in node_groups:
        try:
            cluster_group = ec2.get_security_group_from_id(cluster_group_id)
        except Exception:  # noqa: BLE001
            cluster_group = None
        if cluster_group is None or not _admits(cluster_group, node_groups):
            reasons.append(
                f"the nodes' security groups {node_groups} are not the cluster security group "
                f"{cluster_group_id}, which admits only itself: they cannot reach the API server"
            )
    ami_type = "BOTTLEROCKET_x86_64" if not _user_data_text(data).lstrip().lower().startswith(
        ("mime-version", "content-type")
    ) else "AL2023_x86_64_STANDARD"
    failure = node_join.join_failure(ec2, cluster, subnet_ids, ami_type, data)
    if failure:
        reasons.append(failure.removeprefix(f"{node_join.JOIN_FAILED}: "))
    return reasons


def _check_profile(self: AutoScalingResponse, account: str, region: str) -> None:
    """The propagation refusal (see the module docstring), before moto acts."""
    seconds = iam_propagation._settings["seconds"]
    if seconds <= 0:
        return
    spec = self._get_param("LaunchTemplate", {}) or (
        ((self._get_params().get("MixedInstancesPolicy") or {}).get("LaunchTemplate") or {}).get(
            "LaunchTemplateSpecification"
        )
        or {}
    )
    if not spec:
        return
    ec2 = ec2_backends[account][region]
    try:
        template = (
            ec2.get_launch_template(spec["LaunchTemplateId"])
            if spec.get("LaunchTemplateId")
            else ec2.get_launch_template_by_name(spec.get("LaunchTemplateName"))
        )
        data = template.get_version(spec.get("Version") or "$Default").data
    except Exception:  # noqa: BLE001 - moto reports a bad template itself
        return
    profile_spec = data.get("IamInstanceProfile") or {}
    name, arn = profile_spec.get("Name"), profile_spec.get("Arn")
    if not (name or arn):
        return
    from moto.core.utils import utcnow

    with LOCK:
        profile = iam_propagation._profile(account, region, name, arn)
        if profile is None:
            return
        key = (account, profile.arn)
        young = (utcnow() - profile.create_date).total_seconds() < seconds
        if young and key not in iam_propagation._failed:
            iam_propagation._failed.add(key)
            raise ValidationError(
                f"You must use a valid fully-formed launch template. Value ({profile.name}) for parameter "
                "iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name"
            )


def _wrap(original: Callable[[AutoScalingResponse], Any]) -> Callable[[AutoScalingResponse], Any]:
    def action(self: AutoScalingResponse) -> Any:
        account, region = self.current_account, self.region
        _check_profile(self, account, region)
        result = original(self)
        name = self._get_param("AutoScalingGroupName")
        group = autoscaling_backends[account][region].autoscaling_groups.get(name)
        if group is not None:
            reasons = join_reasons(account, region, group)
            with LOCK:
                _joins[(account, region, name)] = reasons
        return result

    return action


def install() -> None:
    AutoScalingResponse.create_auto_scaling_group = _wrap(AutoScalingResponse.create_auto_scaling_group)
    AutoScalingResponse.update_auto_scaling_group = _wrap(AutoScalingResponse.update_auto_scaling_group)
    on_reset(_reset)
