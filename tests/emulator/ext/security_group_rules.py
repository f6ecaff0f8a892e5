"""Security group rules as objects (``sgr-…``), as AWS answers for them.

moto 5.2.5 already gives each rule an id, takes ``TagSpecifications`` (``security-group-rule``)
on AuthorizeSecurityGroupIngress/Egress, answers them with ``SecurityGroupRules``, revokes by
``SecurityGroupRuleIds`` and has DescribeSecurityGroupRules with the ``group-id``,
``security-group-rule-id`` and ``tag:<key>`` filters (the filter names are checked against the EC2
API reference by ``param_validation``/``ec2_filters``). What it does differently from AWS, fixed
here:

* The ``Description`` of a rule whose source is a security group: moto reads a rule's description
  only from its IP range, so DescribeSecurityGroupRules and the Authorize answers left it out for
  group-to-group rules. AWS returns it for every rule (EC2 API reference, ``SecurityGroupRule``:
  "Description: The security group rule description"; the same description DescribeSecurityGroups
  shows in ``UserIdGroupPairs[].Description``).
"""

from __future__ import annotations

from typing import Any

from moto.ec2.models.security_groups import SecurityGroupRule


def _description(self: Any) -> str | None:
    return self.ip_range.get("Description") or (self.source_group or {}).get("Description")


def install() -> None:
    SecurityGroupRule.description = property(_description)  # type: ignore[assignment]
