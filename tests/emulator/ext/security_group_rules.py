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
* ``ModifySecurityGroupRules`` of a group-to-group rule: moto wrote the new description into the
  rule's (empty) IP range, so DescribeSecurityGroups kept showing the old one in
  ``UserIdGroupPairs`` (and an IP range with no CIDR). AWS changes the rule in place, keeping its
  id (EC2 API reference, ModifySecurityGroupRules), and both answers show the new description.
"""

from __future__ import annotations

from typing import Any

from moto.ec2.models.security_groups import SecurityGroupBackend, SecurityGroupRule


def _description(self: Any) -> str | None:
    return self.ip_range.get("Description") or (self.source_group or {}).get("Description")


_modify = SecurityGroupBackend.modify_security_group_rules


def _modify_rules(self: Any, group_id: str, rules: dict[str, dict[str, Any]]) -> None:
    _modify(self, group_id, rules)
    group = self.get_security_group_by_name_or_id(group_id)
    for rule_id in rules:
        rule = group.get_rule(rule_id) if group is not None else None
        if rule is not None and rule.source_group and "Description" in rule.ip_range:
            rule.source_group["Description"] = rule.ip_range.pop("Description")


def install() -> None:
    SecurityGroupRule.description = property(_description)  # type: ignore[assignment]
    SecurityGroupBackend.modify_security_group_rules = _modify_rules  # type: ignore[method-assign]
