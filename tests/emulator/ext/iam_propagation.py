"""IAM instance profile propagation delay, as EC2 RunInstances sees it.

An instance profile is not usable by EC2 at once: RunInstances naming a profile created moments
ago fails with HTTP 400 ``InvalidParameterValue`` "Value (<name>) for parameter
iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name" until IAM's change has
propagated (aws/karpenter-provider-aws#5018, hashicorp/packer#9810; IAM User Guide,
"Troubleshoot IAM": changes are eventually consistent). Callers are expected to retry.

Here: RunInstances with ``IamInstanceProfile.Name`` or ``.Arn`` naming a profile of the account
created less than ``seconds`` ago (default 3) fails ONCE per profile with that error (the message
names the profile's name and ``iamInstanceProfile.name`` whichever way it was given; AWS's
wording for the ARN form was not verified); the next call goes through. An unknown profile is
left to moto.

Roles and OIDC providers, as EKS and IAM's own policy checks see them (off unless ``roles`` is
set, so each test that wants it turns it on for its own emulator):

* CreatePodIdentityAssociation / UpdatePodIdentityAssociation (``roleArn``) and CreateAddon /
  UpdateAddon (``serviceAccountRoleArn``, ``podIdentityAssociations[].roleArn``) naming a role
  of the account created less than ``roles`` seconds ago fail ONCE per role with HTTP 400
  ``InvalidParameterException`` "Role provided in the request does not exist" (the answer EKS
  gave in hashicorp/terraform-provider-aws#34711, which PR #34717 retries on; terraform's
  ``internal/service/eks/addon.go`` retries CreateAddon on "does not exist" too).
* CreateRole / UpdateAssumeRolePolicy whose trust names (``Principal.AWS`` or
  ``Principal.Federated``) a role or OIDC provider of the account created less than ``roles``
  seconds ago fail ONCE per principal with ``MalformedPolicyDocument`` "Invalid principal in
  policy: "AWS":"<arn>"" (terraform-provider-aws ``internal/service/iam/role.go``
  ``retryCreateRole`` retries that message; that IAM also refuses a brand-new OIDC provider so
  is not verified: terraform retries the message for any principal).

Control endpoint (JSON; global; ``POST /moto-api/reset`` restores the defaults and forgets which
profiles and roles already failed): ``POST /_gpustack/iam-propagation?seconds=N&roles=M`` (numbers
>= 0; 0 turns each off; either may be left out) answers the settings; ``GET`` answers them.
"""

from __future__ import annotations

from typing import Any, Callable

import json

from moto.core.utils import utcnow
from moto.iam.exceptions import MalformedPolicyDocument
from moto.iam.models import IAMBackend
from moto.iam.models import iam_backends
from moto.utilities.utils import get_partition

from ._ec2 import LOCK, EC2Response, ec2_action, ec2_error
from .capacity_control import ControlError, float_arg, on_reset, route

DEFAULT_SECONDS = 3.0
_settings = {"seconds": DEFAULT_SECONDS, "roles": 0.0}
_failed: set[tuple[str, str]] = set()  # (account, profile ARN) that already failed once
_failed_principals: set[tuple[str, str, str]] = set()  # (account, ARN, "eks" or "iam")


@route("POST", "/_gpustack/iam-propagation")
def _set(query: dict[str, str]) -> tuple[int, Any]:
    new = {}
    for key in ("seconds", "roles"):
        if key in query:
            value = float_arg(query, key)
            if value < 0:
                raise ControlError(f"{key} must be >= 0")
            new[key] = value
    if not new:
        raise ControlError("give seconds or roles")
    with LOCK:
        _settings.update(new)
    return 200, dict(_settings)


@route("GET", "/_gpustack/iam-propagation")
def _get(query: dict[str, str]) -> tuple[int, Any]:
    return 200, dict(_settings)


def _reset() -> None:
    with LOCK:
        _settings["seconds"] = DEFAULT_SECONDS
        _settings["roles"] = 0.0
        _failed.clear()
        _failed_principals.clear()


def _profile(account: str, region: str, name: str | None, arn: str | None) -> Any | None:
    backend = iam_backends[account][get_partition(region)]
    for profile in backend.get_instance_profiles():
        if (name and profile.name == name) or (arn and profile.arn == arn):
            return profile
    return None


_orig_run_instances: Callable[[EC2Response], Any] = EC2Response.run_instances


def _run_instances(self: EC2Response) -> Any:
    name = self._get_param("IamInstanceProfile.Name")
    arn = self._get_param("IamInstanceProfile.Arn")
    seconds = _settings["seconds"]
    if (name or arn) and seconds > 0:
        with LOCK:
            profile = _profile(self.current_account, self.region, name, arn)
            if profile is not None:
                key = (self.current_account, profile.arn)
                young = (utcnow() - profile.create_date).total_seconds() < seconds
                if young and key not in _failed:
                    _failed.add(key)
                    raise ec2_error(
                        "InvalidParameterValue",
                        f"Value ({profile.name}) for parameter iamInstanceProfile.name is invalid. "
                        "Invalid IAM Instance Profile name",
                    )
    return _orig_run_instances(self)


def _young(account: str, arn: str, created: Any, who: str) -> bool:
    """Whether ``arn`` (created at ``created``) is still unseen by ``who``: once, while young.
    The caller holds LOCK."""
    seconds = _settings["roles"]
    if seconds <= 0 or (utcnow() - created).total_seconds() >= seconds:
        return False
    key = (account, arn, who)
    if key in _failed_principals:
        return False
    _failed_principals.add(key)
    return True


def role_unseen_by_eks(account: str, arn: Any) -> bool:
    """True (once) when EKS should answer "Role provided in the request does not exist" for the
    existing role ``arn``. The caller holds LOCK."""
    if not isinstance(arn, str) or ":role/" not in arn:
        return False
    for backend in iam_backends[account].values():
        for role in backend.roles.values():
            if role.arn == arn:
                return _young(account, arn, role.create_date, "eks")
    return False


ROLE_UNSEEN = "Role provided in the request does not exist"


def _principals(document: Any) -> list[tuple[str, str]]:
    try:
        policy = json.loads(document) if isinstance(document, str) else None
    except ValueError:
        return []
    found = []
    statements = policy.get("Statement") if isinstance(policy, dict) else None
    for statement in statements if isinstance(statements, list) else [statements]:
        principal = statement.get("Principal") if isinstance(statement, dict) else None
        if not isinstance(principal, dict):
            continue
        for kind in ("AWS", "Federated"):
            values = principal.get(kind)
            for value in values if isinstance(values, list) else [values]:
                if isinstance(value, str):
                    found.append((kind, value))
    return found


def _check_trust(backend: IAMBackend, document: Any) -> None:
    if _settings["roles"] <= 0:
        return
    account = backend.account_id
    with LOCK:
        for kind, arn in _principals(document):
            role = next((r for r in backend.roles.values() if r.arn == arn), None)
            provider = backend.open_id_providers.get(arn)
            made = role or provider
            if made is not None and _young(account, arn, made.create_date, "iam"):
                raise MalformedPolicyDocument(f'Invalid principal in policy: "{kind}":"{arn}"')


def install() -> None:
    ec2_action("RunInstances", override=True)(_run_instances)
    # Wrapped as installed (iam_policy_size.py, loaded before this, wraps them too).
    create_role = IAMBackend.create_role
    update_trust = IAMBackend.update_assume_role_policy

    def _create_role(self: IAMBackend, role_name: str, assume_role_policy_document: str, *a: Any, **k: Any) -> Any:
        _check_trust(self, assume_role_policy_document)
        return create_role(self, role_name, assume_role_policy_document, *a, **k)

    def _update_trust(self: IAMBackend, role_name: str, policy_document: str) -> None:
        _check_trust(self, policy_document)
        update_trust(self, role_name, policy_document)

    IAMBackend.create_role = _create_role  # type: ignore[method-assign]
    IAMBackend.update_assume_role_policy = _update_trust  # type: ignore[method-assign]
    on_reset(_reset)
