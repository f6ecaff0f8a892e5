"""DescribeNatGateways' tag filters, which moto 5.2.5 accepts and ignores.

The EC2 API Reference (botocore 1.44.5 ``ec2/2016-11-15`` ``DescribeNatGatewaysRequest.Filter``
documentation) lists ``tag:<key>`` ("the key/value combination of a tag assigned to the
resource") and ``tag-key`` ("the key of a tag assigned to the resource ... regardless of the tag
value") among the filters. moto's ``NatGatewayBackend.describe_nat_gateways`` applies only
``nat-gateway-id``, ``vpc-id``, ``subnet-id`` and ``state``, so a search by tag answered every
gateway of the region: a stack's refresh then took gateways it never made (a cluster's NAT
gateway built by eksctl, or another stack's) for its own strays. Here both tag filters narrow
the answer as EC2 does, with moto's own tag matching (``moto.ec2.utils.tag_filter_matches``:
exact values and ``*``/``?`` wildcards, any of the values). Which names are accepted at all is
``ec2_filters``' table; this only makes the accepted ones work.
"""

from __future__ import annotations

from typing import Any

from moto.ec2.models.nat_gateways import NatGatewayBackend
from moto.ec2.utils import tag_filter_matches

_moto_describe = NatGatewayBackend.describe_nat_gateways


def _describe(self: Any, filters: Any, nat_gateway_ids: list[str] | None) -> list[Any]:
    found = _moto_describe(self, filters, nat_gateway_ids)
    for name, values in (filters or {}).items():
        if name == "tag-key" or name.startswith("tag:"):
            found = [n for n in found if tag_filter_matches(n, name, list(values))]
    return found


def install() -> None:
    NatGatewayBackend.describe_nat_gateways = _describe  # type: ignore[method-assign]
