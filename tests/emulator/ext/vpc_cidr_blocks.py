"""Secondary IPv4 blocks of a VPC (AssociateVpcCidrBlock) as AWS restricts them.

moto 5.2.5 associates any block up to its limit of 5 (AWS's default quota "IPv4 CIDR blocks per
VPC", VPC UG ``amazon-vpc-limits``). What AWS also refuses, added here:

* A block from a range the primary block excludes: the VPC UG's "IPv4 CIDR block association
  restrictions" (``vpc-cidr-blocks``): a primary in 10.0.0.0/8 excludes 172.16.0.0/12,
  192.168.0.0/16 and 198.19.0.0/16; one in 172.16.0.0/12 excludes 10.0.0.0/8, 192.168.0.0/16 and
  198.19.0.0/16; one in 192.168.0.0/16 excludes 10.0.0.0/8, 172.16.0.0/12 and 198.19.0.0/16; one in
  198.19.0.0/16 excludes the three RFC 1918 ranges; a publicly routable primary, or one in
  100.64.0.0/10, excludes all four. Also: "If your primary CIDR falls within the 10.0.0.0/15 range,
  you cannot add a CIDR block from the 10.0.0.0/16 range", and a primary in 172.16.0.0/12 excludes
  172.31.0.0/16 (``awsdocs/amazon-vpc-user-guide`` ``doc_source/VPC_Subnets.md``, the table).
  100.64.0.0/10 is allowed with every primary.
* A block that overlaps one the VPC already has, or is outside /16 to /28 (same page: "The allowed
  block size is between a /28 netmask and /16 netmask"; "The CIDR block must not overlap with any
  existing CIDR block that's associated with the VPC").

Both answer ``InvalidVpc.Range`` (the code EC2 uses for an unacceptable VPC block; the exact
message AWS sends for these two cases is UNVERIFIED here: "The CIDR '<cidr>' is restricted…" /
"…conflicts with another CIDR block of the VPC" are this emulator's wording).
"""

from __future__ import annotations

import ipaddress
from typing import Any

from moto.ec2.exceptions import EC2ClientError
from moto.ec2.models.subnets import SubnetBackend
from moto.ec2.models.vpcs import VPCBackend

_RANGES = [ipaddress.ip_network(c) for c in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "198.19.0.0/16")]
_SHARED = ipaddress.ip_network("100.64.0.0/10")


def restricted(primary: Any) -> list[Any]:
    """The ranges a secondary block may not come from, given the primary block."""
    for i, r in enumerate(_RANGES):
        if primary.subnet_of(r):
            out = [x for j, x in enumerate(_RANGES) if j != i]
            if primary.subnet_of(ipaddress.ip_network("10.0.0.0/15")):
                out.append(ipaddress.ip_network("10.0.0.0/16"))
            if i == 1:
                out.append(ipaddress.ip_network("172.31.0.0/16"))
            return out
    # A publicly routable primary, or one in 100.64.0.0/10 (_SHARED): all four.
    return list(_RANGES)


_associate = VPCBackend.associate_vpc_cidr_block


def _associate_checked(self: Any, vpc_id: str, cidr_block: str, amazon_provided_ipv6_cidr_block: bool) -> Any:
    if cidr_block and not amazon_provided_ipv6_cidr_block:
        vpc = self.get_vpc(vpc_id)
        net = ipaddress.ip_network(cidr_block, strict=False)
        if not 16 <= net.prefixlen <= 28:
            raise EC2ClientError("InvalidVpc.Range", f"The CIDR '{cidr_block}' is invalid.")
        primary = ipaddress.ip_network(vpc.cidr_block)
        for r in restricted(primary):
            if net.overlaps(r):
                raise EC2ClientError(
                    "InvalidVpc.Range",
                    f"The CIDR '{cidr_block}' is restricted. Use a CIDR from the same private address range as the current VPC CIDR, or use a publicly-routable CIDR.",
                )
        for a in vpc.get_cidr_block_association_set():
            if a.get("cidr_block_state", {}).get("state") == "disassociated":
                continue
            other = ipaddress.ip_network(a["cidr_block"])
            if other.version == 4 and net.overlaps(other):
                raise EC2ClientError(
                    "InvalidVpc.Range", f"The CIDR '{cidr_block}' conflicts with another CIDR block of the VPC."
                )
    out = _associate(self, vpc_id, cidr_block, amazon_provided_ipv6_cidr_block)
    if cidr_block and not amazon_provided_ipv6_cidr_block:
        # Not usable at once: `associating` until a later DescribeVpcs shows it `associated`.
        out["cidr_block_state"]["state"] = "associating"
        _ASSOCIATING[out["association_id"]] = 0
    return out


# An added block goes through `associating` before `associated` ("The CIDR block is ready for you
# to use when it's in the associated state": VPC UG, "Adding IPv4 CIDR blocks to a VPC",
# awsdocs/amazon-vpc-user-guide doc_source/VPC_Subnets.md). moto associates at once; here the
# first DescribeVpcs after the call still shows `associating`, the next one `associated`.
_ASSOCIATING: dict[str, int] = {}
_describe_vpcs = VPCBackend.describe_vpcs


def _settle(self: Any) -> None:
    for vpc in self.vpcs.values():
        for a in vpc.get_cidr_block_association_set():
            aid = a.get("association_id")
            if aid in _ASSOCIATING:
                if _ASSOCIATING[aid] >= 1:
                    a["cidr_block_state"]["state"] = "associated"
                    del _ASSOCIATING[aid]
                else:
                    _ASSOCIATING[aid] += 1


def _describe_vpcs_settling(self: Any, *args: Any, **kwargs: Any) -> Any:
    _settle(self)
    return _describe_vpcs(self, *args, **kwargs)


def _associated_blocks(vpc: Any) -> list[Any]:
    return [
        ipaddress.ip_network(a["cidr_block"])
        for a in vpc.get_cidr_block_association_set()
        if a.get("cidr_block_state", {}).get("state") == "associated"
    ]


_create_subnet = SubnetBackend.create_subnet


def _create_subnet_checked(self: Any, vpc_id: str, cidr_block: str, *args: Any, **kwargs: Any) -> Any:
    """A subnet must lie in a block that is `associated` (not associating, not disassociated).
    The code is moto's for a subnet outside the VPC's blocks (``InvalidSubnet.Range``); what AWS
    answers for a block still associating is UNVERIFIED here."""
    if cidr_block:
        vpc = self.get_vpc(vpc_id)
        net = ipaddress.ip_network(cidr_block, strict=False)
        if not any(net.version == b.version and net.subnet_of(b) for b in _associated_blocks(vpc)):
            raise EC2ClientError("InvalidSubnet.Range", f"The CIDR '{cidr_block}' is invalid.")
    return _create_subnet(self, vpc_id, cidr_block, *args, **kwargs)


_disassociate = VPCBackend.disassociate_vpc_cidr_block


def _disassociate_checked(self: Any, association_id: str) -> Any:
    """botocore ``DisassociateVpcCidrBlock``: "You must detach or delete all gateways and
    resources that are associated with the CIDR block before you can disassociate it." A block
    that still holds a subnet is refused with ``InvalidCidrBlock.InUse``, the code EC2 uses for a
    subnet's IPv6 block in use (hashicorp/terraform-provider-aws#3562); the exact code and
    message for a VPC block with subnets are UNVERIFIED here."""
    for vpc in self.vpcs.values():
        for a in vpc.get_cidr_block_association_set():
            if a.get("association_id") != association_id:
                continue
            block = ipaddress.ip_network(a["cidr_block"])
            for subnet in self.describe_subnets(filters={"vpc-id": vpc.id}):
                net = ipaddress.ip_network(subnet.cidr_block)
                if net.version == block.version and net.subnet_of(block):
                    raise EC2ClientError(
                        "InvalidCidrBlock.InUse",
                        f"The vpc CIDR block with association ID {association_id} may not be disassociated. "
                        f"It is in use by subnet {subnet.id}.",
                    )
    return _disassociate(self, association_id)


def install() -> None:
    VPCBackend.associate_vpc_cidr_block = _associate_checked  # type: ignore[method-assign]
    VPCBackend.describe_vpcs = _describe_vpcs_settling  # type: ignore[method-assign]
    VPCBackend.disassociate_vpc_cidr_block = _disassociate_checked  # type: ignore[method-assign]
    SubnetBackend.create_subnet = _create_subnet_checked  # type: ignore[method-assign]
