"""VPC egress pieces as AWS has them: VPC DNS attributes, Elastic IPs, NAT gateways, VPC endpoints.

moto 5.2.5 already has CreateNatGateway/DescribeNatGateways (``Filter``, tags)/DeleteNatGateway
(state ``deleted``, still listed as in AWS), AllocateAddress (``Domain=vpc``, TagSpecifications),
DescribeAddresses (tag filters), routes to ``nat-`` gateways, DescribeVpcAttribute and the VPC
endpoint actions; the answers parse with botocore's output shapes (selftest_strict). What it does
differently from AWS, fixed here:

* ``ModifyVpcAttribute`` with more than one attribute: AWS modifies one per call and answers
  ``InvalidParameterCombination`` "Fields for multiple attribute types specified: enableDnsSupport,
  enableDnsHostnames" (aws/aws-sdk-go#415, kubernetes-sigs/cluster-api-provider-aws#783; the
  ModifyVpcAttribute reference: "You can only enable DNS hostnames if you've enabled DNS
  support"... one attribute per request). moto applied both.
* ``ReleaseAddress`` of an Elastic IP still used by a NAT gateway that is not ``deleted``: AWS
  refuses with ``AuthFailure`` "You do not have permission to access the specified resource."
  (the confusing code AWS really sends: kubernetes/kops#1604, eformat/sno-for-100#5). moto
  released it from under the gateway.
* ``CreateVpcEndpoint`` (interface) with private DNS (``PrivateDnsEnabled`` true, the default for
  AWS services) in a VPC without both ``enableDnsSupport`` and ``enableDnsHostnames``: AWS refuses
  (PrivateLink guide, "Private DNS": "you must enable both DNS hostnames and DNS resolution for
  your VPC"). AWS's exact error text was not found; this answers ``InvalidParameter`` "Enabling
  private DNS requires both enableDnsSupport and enableDnsHostnames VPC attributes set to true for
  <vpc>" (UNVERIFIED wording). The same for ``ModifyVpcEndpoint PrivateDnsEnabled=true``.
  Two subnets of one Availability Zone for one interface endpoint: ``DuplicateSubnetsInSameZone``
  (EC2 error-code reference). A gateway endpoint reports ``PrivateDnsEnabled`` false.
* ``ModifyVpcEndpoint``: ``AddRouteTableIds``/``RemoveRouteTableIds`` of a gateway endpoint add and
  remove its prefix-list route in those tables (moto only changed the list), ``AddSubnetIds``/
  ``RemoveSubnetIds`` of an interface endpoint create/delete its network interface there, and
  ``PrivateDnsEnabled`` is kept.

* NAT gateway lifecycle: ``DeleteNatGateway`` leaves the gateway ``deleting`` for a while before
  ``deleted`` (EC2 API ``NatGateway.State``: "deleting: The NAT gateway is in the process of being
  terminated and may still be processing traffic"; its Elastic IP stays associated, so
  ``ReleaseAddress`` keeps refusing it until then). moto deleted at once. How long is set per test
  (below; default 0, moto's behaviour). A ``failed`` gateway (``NatGateway.State``: "failed: The
  NAT gateway could not be created", with ``FailureCode``/``FailureMessage``) is produced on demand
  for the next creates, with failure code ``InternalError`` and the message the API reference
  gives for it.
* A NAT gateway is a way out (``egress``) only when its own subnet routes 0.0.0.0/0 to an internet
  gateway attached to the VPC: "the route table associated with the subnet in which your NAT
  gateway resides must include a route that points internet traffic to an internet gateway" (VPC
  UG ``vpc-nat-gateway``). moto-based egress counted any available gateway.

Control endpoint (JSON; global; ``POST /moto-api/reset`` restores the defaults):
``POST /_gpustack/nat?delete_ms=N&fail_next=N`` (both optional, integers >= 0) answers the settings.

``egress(...)`` (used by ``node_join``) answers whether a subnet has a way out; see there.
"""

from __future__ import annotations

import time
from typing import Any

from moto.ec2.utils import random_private_ip

from ._ec2 import LOCK, ActionResult, EC2Response, backend_for, ec2_action, ec2_error
from .capacity_control import ControlError, on_reset, route

ATTRIBUTES = ("EnableDnsSupport", "EnableDnsHostnames", "EnableNetworkAddressUsageMetrics")


def truthy(value: Any) -> bool:
    return str(value).lower() == "true"


def dns_ok(vpc: Any) -> bool:
    """Both VPC DNS attributes on (what private DNS and private cluster endpoints need)."""
    return truthy(vpc.enable_dns_support) and truthy(vpc.enable_dns_hostnames)


def _private_dns_refused(vpc_id: str) -> Exception:
    return ec2_error(
        "InvalidParameter",
        "Enabling private DNS requires both enableDnsSupport and enableDnsHostnames VPC attributes "
        f"set to true for {vpc_id}",
    )


_moto_modify_vpc_attribute = EC2Response.modify_vpc_attribute


def _modify_vpc_attribute(self: EC2Response) -> Any:
    given = [a for a in ATTRIBUTES if self._get_param(f"{a}.Value") is not None]
    if len(given) > 1:
        names = ", ".join(a[0].lower() + a[1:] for a in given)
        raise ec2_error(
            "InvalidParameterCombination", f"Fields for multiple attribute types specified: {names}"
        )
    return _moto_modify_vpc_attribute(self)


_moto_release_address = EC2Response.release_address


def _release_address(self: EC2Response) -> Any:
    backend = backend_for(self)
    allocation_id = self._get_param("AllocationId")
    public_ip = self._get_param("PublicIp")
    _sweep_nat(backend)
    with LOCK:
        for nat in backend.nat_gateways.values():
            if nat.state == "deleted":
                continue
            for address in nat.address_set:
                if (allocation_id and address.get("allocationId") == allocation_id) or (
                    public_ip and address.get("publicIp") == public_ip
                ):
                    raise ec2_error(
                        "AuthFailure", "You do not have permission to access the specified resource."
                    )
    return _moto_release_address(self)


# --- NAT gateway lifecycle ----------------------------------------------------------------------

# unseen_next: that many DescribeNatGateways calls naming gateway ids answer NatGatewayNotFound,
# as EC2 may right after CreateNatGateway (eventual consistency): botocore's waiter model
# ec2/2016-11-15/waiters-2.json, NatGatewayAvailable, retries on the error NatGatewayNotFound.
_nat = {"delete_ms": 0, "fail_next": 0, "unseen_next": 0}
_deleting: dict[str, float] = {}  # NAT gateway id -> monotonic time it becomes deleted

# The message EC2's API reference gives for failure code InternalError (NatGateway.FailureMessage).
FAILED_MESSAGE = "Network interface {eni}, created and used internally by this NAT gateway is in an invalid state. Please try again."


@route("POST", "/_gpustack/nat")
def _set_nat(query: dict[str, str]) -> tuple[int, Any]:
    with LOCK:
        for key in _nat:
            if key in query:
                try:
                    value = int(query[key])
                except ValueError:
                    raise ControlError(f"{key} must be an integer, not {query[key]!r}") from None
                if value < 0:
                    raise ControlError(f"{key} must be >= 0")
                _nat[key] = value
        return 200, dict(_nat)


def _reset_nat() -> None:
    with LOCK:
        _nat.update(delete_ms=0, fail_next=0, unseen_next=0)
        _deleting.clear()


def _sweep_nat(backend: Any) -> None:
    """Gateways whose deletion time has come read ``deleted``."""
    now = time.monotonic()
    with LOCK:
        for nat_id, due in list(_deleting.items()):
            nat = backend.nat_gateways.get(nat_id)
            if nat is None or now >= due:
                if nat is not None:
                    nat.state = "deleted"
                del _deleting[nat_id]


_moto_create_nat_gateway = EC2Response.create_nat_gateway


def _create_nat_gateway(self: EC2Response) -> Any:
    answer = _moto_create_nat_gateway(self)
    with LOCK:
        if _nat["fail_next"] > 0:
            _nat["fail_next"] -= 1
            backend = backend_for(self)
            nat = max(backend.nat_gateways.values(), key=lambda n: n._created_at)
            nat.state = "failed"
            nat.failure_code = "InternalError"
            nat.failure_message = FAILED_MESSAGE.format(eni=nat._eni.id)
    return answer


_moto_delete_nat_gateway = EC2Response.delete_nat_gateway


def _delete_nat_gateway(self: EC2Response) -> Any:
    backend = backend_for(self)
    nat_id = self._get_param("NatGatewayId")
    _sweep_nat(backend)
    with LOCK:
        nat = backend.nat_gateways.get(nat_id)
        if nat is None:
            # EC2 error-code reference: NatGatewayNotFound (wording UNVERIFIED). moto: KeyError, 500.
            raise ec2_error("NatGatewayNotFound", f"The Nat Gateway {nat_id} was not found")
        if nat.state == "deleting":
            # Already on its way (UNVERIFIED whether AWS answers so or refuses; gpustack does not
            # delete a gateway it sees deleting).
            return ActionResult({"NatGatewayId": nat_id})
        answer = _moto_delete_nat_gateway(self)
        if _nat["delete_ms"] > 0:
            nat.state = "deleting"
            _deleting[nat_id] = time.monotonic() + _nat["delete_ms"] / 1000
    return answer


_moto_describe_nat_gateways = EC2Response.describe_nat_gateways


def _describe_nat_gateways(self: EC2Response) -> Any:
    _sweep_nat(backend_for(self))
    ids = self._get_param("NatGatewayIds", [])
    with LOCK:
        if ids and _nat["unseen_next"] > 0:
            _nat["unseen_next"] -= 1
            raise ec2_error("NatGatewayNotFound", f"The Nat Gateway {ids[0]} was not found")
    return _moto_describe_nat_gateways(self)


def _check_interface_subnets(backend: Any, subnet_ids: list[str]) -> None:
    zones: dict[str, str] = {}
    for subnet_id in subnet_ids:
        zone = backend.get_subnet(subnet_id).availability_zone
        if zone in zones:
            raise ec2_error(
                "DuplicateSubnetsInSameZone",
                f"Found another VPC endpoint subnet in the availability zone of {subnet_id}. VPC endpoint "
                "subnets should be in different availability zones supported by the VPC endpoint service.",
            )
        zones[zone] = subnet_id


_moto_create_vpc_endpoint = EC2Response.create_vpc_endpoint


def _create_vpc_endpoint(self: EC2Response) -> Any:
    backend = backend_for(self)
    kind = (self._get_param("VpcEndpointType") or "Gateway").lower()
    if kind == "interface":
        vpc_id = self._get_param("VpcId")
        private_dns = self._get_bool_param("PrivateDnsEnabled", if_none=True)
        with LOCK:
            vpc = backend.get_vpc(vpc_id)
            if private_dns and not dns_ok(vpc):
                raise _private_dns_refused(vpc_id)
            _check_interface_subnets(backend, self._get_param("SubnetIds", []))
    answer = _moto_create_vpc_endpoint(self)
    if kind == "gateway":
        with LOCK:
            for endpoint in backend.vpc_end_points.values():
                if (endpoint.vpc_endpoint_type or "").lower() == "gateway":
                    endpoint.private_dns_enabled = False
    return answer


_moto_modify_vpc_endpoint = EC2Response.modify_vpc_endpoint


def _modify_vpc_endpoint(self: EC2Response) -> Any:
    backend = backend_for(self)
    endpoint_id = self._get_param("VpcEndpointId")
    with LOCK:
        endpoint = backend.describe_vpc_endpoints(vpc_end_point_ids=[endpoint_id])[0]
        interface = (endpoint.vpc_endpoint_type or "").lower() == "interface"
        private_dns = self._get_bool_param("PrivateDnsEnabled")
        if interface and private_dns and not dns_ok(backend.get_vpc(endpoint.vpc_id)):
            raise _private_dns_refused(endpoint.vpc_id)
        add_subnets = [s for s in self._get_param("AddSubnetIds", []) if s not in (endpoint.subnet_ids or [])]
        remove_subnets = self._get_param("RemoveSubnetIds", [])
        if interface:
            kept = [s for s in endpoint.subnet_ids or [] if s not in remove_subnets]
            _check_interface_subnets(backend, kept + add_subnets)
        add_tables = [t for t in self._get_param("AddRouteTableIds", []) if t not in endpoint.route_table_ids]
        remove_tables = [
            t for t in self._get_param("RemoveRouteTableIds", []) if t in endpoint.route_table_ids
        ]
        for table in add_tables + remove_tables:
            backend.get_route_table(table)
        answer = _moto_modify_vpc_endpoint(self)
        prefix_list = endpoint.destination_prefix_list_id
        if not interface and prefix_list:
            for table in add_tables:
                backend.create_route(
                    table, None, gateway_id=endpoint.id, destination_prefix_list_id=prefix_list
                )
            for table in remove_tables:
                backend.delete_route(table, None, destination_prefix_list_id=prefix_list)
        if interface:
            subnet_of = {
                eni_id: backend.enis[eni_id].subnet.id
                for eni_id in endpoint.network_interface_ids
                if eni_id in backend.enis
            }
            for eni_id, subnet_id in subnet_of.items():
                if subnet_id in remove_subnets:
                    backend.enis.pop(eni_id, None)
                    endpoint.network_interface_ids.remove(eni_id)
            for subnet_id in add_subnets:
                eni = backend.create_network_interface(backend.get_subnet(subnet_id), random_private_ip())
                endpoint.network_interface_ids.append(eni.id)
        if private_dns is not None:
            endpoint.private_dns_enabled = private_dns
    return answer


# --- egress, for node_join ---------------------------------------------------------------------

# The endpoints a node in a subnet without internet access needs (EKS User Guide, "Deploy private
# clusters with limited internet access": ecr.api, ecr.dkr, ec2, sts interface endpoints and the
# s3 gateway endpoint; the list the issue gives). ssm, eks-auth and logs are optional there.
INTERFACE_SERVICES = ("ecr.api", "ecr.dkr", "ec2", "sts")
GATEWAY_SERVICES = ("s3",)


def route_table_of(backend: Any, subnet: Any) -> Any | None:
    """The subnet's explicitly associated route table, else its VPC's main table."""
    main = None
    for table in backend.route_tables.values():
        if table.vpc_id != subnet.vpc_id:
            continue
        if subnet.id in table._associations.values():
            return table
        if table.main_association_id is not None:
            main = table
    return main


def default_route_target(table: Any) -> str | None:
    """The target id of the table's 0.0.0.0/0 route (``igw-...``, ``nat-...``), if any."""
    if table is None:
        return None
    for route in table._routes.values():
        if route.destination_cidr_block == "0.0.0.0/0":
            if route.nat_gateway is not None:
                return str(route.nat_gateway.id)
            if route.gateway is not None:
                return str(route.gateway.id)
            return "other"
    return None


def endpoints_missing(backend: Any, subnet: Any, table: Any) -> list[str]:
    """Services of INTERFACE_SERVICES/GATEWAY_SERVICES without a usable endpoint for the subnet."""
    region = backend.region_name
    missing = []
    live = [e for e in backend.vpc_end_points.values() if e.vpc_id == subnet.vpc_id and e.state != "deleted"]
    for service in INTERFACE_SERVICES:
        name = f"com.amazonaws.{region}.{service}"
        if not any(
            e.service_name == name
            and (e.vpc_endpoint_type or "").lower() == "interface"
            and subnet.id in (e.subnet_ids or [])
            and e.private_dns_enabled
            for e in live
        ):
            missing.append(f"{service} (interface endpoint with private DNS in {subnet.id})")
    for service in GATEWAY_SERVICES:
        name = f"com.amazonaws.{region}.{service}"
        if table is None or not any(
            e.service_name == name
            and (e.vpc_endpoint_type or "Gateway").lower() == "gateway"
            and table.id in e.route_table_ids
            for e in live
        ):
            missing.append(f"{service} (gateway endpoint on {table.id if table else 'its route table'})")
    return missing


def _reaches_internet(backend: Any, nat: Any) -> bool:
    """The NAT gateway's own subnet routes 0.0.0.0/0 to an internet gateway attached to its VPC
    (VPC UG ``vpc-nat-gateway``)."""
    home = backend.get_subnet(nat.subnet_id)
    target = default_route_target(route_table_of(backend, home))
    igw = backend.internet_gateways.get(target) if target and target.startswith("igw-") else None
    return igw is not None and igw.vpc is not None and igw.vpc.id == home.vpc_id


def egress(backend: Any, subnet_id: str, interfaces: int) -> str | None:
    """None if an instance with ``interfaces`` network interfaces in the subnet can reach ECR, EC2,
    STS and S3; else why not (a sentence for the health issue)."""
    subnet = backend.get_subnet(subnet_id)
    table = route_table_of(backend, subnet)
    target = default_route_target(table)
    if target and target.startswith("nat-"):
        nat = backend.nat_gateways.get(target)
        if nat is not None and nat.state == "available" and _reaches_internet(backend, nat):
            return None
    if target and target.startswith("igw-"):
        igw = backend.internet_gateways.get(target)
        if igw is None or igw.vpc is None or igw.vpc.id != subnet.vpc_id:
            public = f"internet gateway {target} is not attached to {subnet.vpc_id}"
        elif not truthy(subnet.map_public_ip_on_launch):
            public = "the subnet does not assign public IPv4 addresses (MapPublicIpOnLaunch is false)"
        elif interfaces > 1:
            # EC2 UG (efa-acc-inst-types / "Public IPv4 addressing"): no automatic public IPv4
            # address for an instance launched with several network interfaces.
            public = f"the launch template has {interfaces} network interfaces, so EC2 assigns no public IPv4 address"
        else:
            return None
    else:
        public = "its route table has no 0.0.0.0/0 route to an internet gateway or NAT gateway"
    missing = endpoints_missing(backend, subnet, table)
    if not missing:
        return None
    return f"subnet {subnet_id} has no egress: {public}, and VPC endpoints are missing: {', '.join(missing)}"


def install() -> None:
    ec2_action("ModifyVpcAttribute", override=True)(_modify_vpc_attribute)
    ec2_action("ReleaseAddress", override=True)(_release_address)
    ec2_action("CreateNatGateway", override=True)(_create_nat_gateway)
    ec2_action("DeleteNatGateway", override=True)(_delete_nat_gateway)
    ec2_action("DescribeNatGateways", override=True)(_describe_nat_gateways)
    on_reset(_reset_nat)
    ec2_action("CreateVpcEndpoint", override=True)(_create_vpc_endpoint)
    ec2_action("ModifyVpcEndpoint", override=True)(_modify_vpc_endpoint)
