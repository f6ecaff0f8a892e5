"""IAM policy size and count quotas, which moto 5.2.5 lists in GetAccountSummary but never enforces.

Source: IAM User Guide, "IAM and AWS STS quotas" (reference_iam-quotas.html), "IAM and STS
character limits": the size of each managed policy can't exceed 6,144 characters; the aggregate
size of a role's inline policies can't exceed 10,240 characters; a role trust policy can't exceed
2,048 characters (adjustable); a role can have 10 managed policies attached (adjustable); "IAM
doesn't count white space when calculating the size of a policy against these quotas" (quoted
in thinkinglabs/aws-iam-policy#6, salesforce/policy_sentry#67, hashicorp/terraform-provider-aws
#45533). IAM answers ``LimitExceeded`` (HTTP 409, botocore ``LimitExceededException``):

* CreatePolicy / CreatePolicyVersion past 6,144: "Cannot exceed quota for PolicySize: 6144"
  (terraform-aws-modules/terraform-aws-ecs#108, ministryofjustice/analytical-platform#6873).
* CreateRole / UpdateAssumeRolePolicy past 2,048: "Cannot exceed quota for ACLSizePerRole: 2048"
  (the wording kubernetes-sigs/aws-load-balancer-controller#2718 quotes with the raised 4,096).
* PutRolePolicy that would take the role's inline policies past 10,240: "Maximum policy size of
  10240 bytes exceeded for role <name>" (wording unverified).
* AttachRolePolicy of an 11th managed policy: "Cannot exceed quota for PoliciesPerRole: 10"
  (wording unverified; the default quota is 10).

Why here: Karpenter's v1.6-v1.8 controller policy is one managed policy of about 5,900
characters for a 30-character cluster name, and the name occurs 17 times in it; a longer name
crosses 6,144 (aws-facts.md §8). gpustack must learn that from the emulator, not from AWS.
"""

from __future__ import annotations

import re
from typing import Any

from moto.iam.exceptions import LimitExceededException
from moto.iam.models import IAMBackend

MANAGED_POLICY_SIZE = 6144
ROLE_INLINE_SIZE = 10240
TRUST_POLICY_SIZE = 2048
POLICIES_PER_ROLE = 10


def size(document: str | None) -> int:
    """IAM's size of a policy document: its characters without white space."""
    return len(re.sub(r"\s", "", document or ""))


_orig_create_policy = IAMBackend.create_policy
_orig_create_policy_version = IAMBackend.create_policy_version
_orig_create_role = IAMBackend.create_role
_orig_update_assume_role_policy = IAMBackend.update_assume_role_policy
_orig_put_role_policy = IAMBackend.put_role_policy
_orig_attach_role_policy = IAMBackend.attach_role_policy


def _managed(document: str) -> None:
    if size(document) > MANAGED_POLICY_SIZE:
        raise LimitExceededException(f"Cannot exceed quota for PolicySize: {MANAGED_POLICY_SIZE}")


def _trust(document: str) -> None:
    if size(document) > TRUST_POLICY_SIZE:
        raise LimitExceededException(f"Cannot exceed quota for ACLSizePerRole: {TRUST_POLICY_SIZE}")


def _create_policy(self: IAMBackend, description: str, path: str, policy_document: str, *args: Any, **kwargs: Any) -> Any:
    _managed(policy_document)
    return _orig_create_policy(self, description, path, policy_document, *args, **kwargs)


def _create_policy_version(self: IAMBackend, policy_arn: str, policy_document: str, *args: Any, **kwargs: Any) -> Any:
    _managed(policy_document)
    return _orig_create_policy_version(self, policy_arn, policy_document, *args, **kwargs)


def _create_role(self: IAMBackend, role_name: str, assume_role_policy_document: str, *args: Any, **kwargs: Any) -> Any:
    _trust(assume_role_policy_document)
    return _orig_create_role(self, role_name, assume_role_policy_document, *args, **kwargs)


def _update_assume_role_policy(self: IAMBackend, role_name: str, policy_document: str) -> None:
    _trust(policy_document)
    _orig_update_assume_role_policy(self, role_name, policy_document)


def _put_role_policy(self: IAMBackend, role_name: str, policy_name: str, policy_json: str) -> None:
    role = self.get_role(role_name)
    others = sum(size(doc) for name, doc in role.policies.items() if name != policy_name)
    if others + size(policy_json) > ROLE_INLINE_SIZE:
        raise LimitExceededException(
            f"Maximum policy size of {ROLE_INLINE_SIZE} bytes exceeded for role {role_name}"
        )
    _orig_put_role_policy(self, role_name, policy_name, policy_json)


def _attach_role_policy(self: IAMBackend, policy_arn: str, role_name: str) -> None:
    role = self.get_role(role_name)
    if policy_arn not in role.managed_policies and len(role.managed_policies) >= POLICIES_PER_ROLE:
        raise LimitExceededException(f"Cannot exceed quota for PoliciesPerRole: {POLICIES_PER_ROLE}")
    _orig_attach_role_policy(self, policy_arn, role_name)


def install() -> None:
    IAMBackend.create_policy = _create_policy  # type: ignore[method-assign]
    IAMBackend.create_policy_version = _create_policy_version  # type: ignore[method-assign]
    IAMBackend.create_role = _create_role  # type: ignore[method-assign]
    IAMBackend.update_assume_role_policy = _update_assume_role_policy  # type: ignore[method-assign]
    IAMBackend.put_role_policy = _put_role_policy  # type: ignore[method-assign]
    IAMBackend.attach_role_policy = _attach_role_policy  # type: ignore[method-assign]
