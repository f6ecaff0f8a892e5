"""Selftest of the emulator's strictness rules and AWS behaviours (param_validation, ec2_filters,
vpc_network, node_join, iam_propagation, and the capacity/quota/catalog/SSM additions), through
boto3 against a running emulator (starts nothing itself):

    tests/emulator/.venv/bin/python tests/emulator/selftest_strict.py --endpoint http://127.0.0.1:PORT

Every check names its source. boto3's own client-side validation is off, so the emulator's is
what answers. Exits non-zero on the first failure; ends with a moto reset.
"""

from __future__ import annotations

import argparse
import base64
import datetime
import json
import sys
import time
import urllib.error
import urllib.request
import uuid
from typing import Any, Callable

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

REGION = "us-west-2"
NO_CLIENT_VALIDATION = Config(parameter_validation=False, retries={"max_attempts": 1})


def check(cond: bool, what: str) -> None:
    if not cond:
        raise AssertionError(what)
    print(f"ok   {what}")


def error(call: Callable[..., Any], **kwargs: Any) -> tuple[str | None, int | None, str]:
    """(code, HTTP status, message) of a call that fails; (None, None, "") if it succeeds."""
    try:
        call(**kwargs)
    except ClientError as e:
        return (
            e.response["Error"].get("Code"),
            e.response["ResponseMetadata"]["HTTPStatusCode"],
            e.response["Error"].get("Message", ""),
        )
    return None, None, ""


def http(endpoint: str, method: str, path: str) -> Any:
    req = urllib.request.Request(endpoint + path, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def wait(what: str, probe: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def raw_ec2(c: "Clients", params: dict[str, str]) -> tuple[int, str]:
    """A SigV4-signed EC2 query request with exactly ``params`` (boto3 drops unknown members)."""
    from urllib.parse import urlencode

    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    body = urlencode({"Version": "2016-11-15", **params})
    request = AWSRequest(
        method="POST",
        url=c.endpoint + "/",
        data=body,
        headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
    )
    SigV4Auth(Credentials("testing", "testing"), "ec2", REGION).add_auth(request)
    prepared = urllib.request.Request(
        c.endpoint + "/", data=body.encode(), headers=dict(request.headers.items()), method="POST"
    )
    try:
        with urllib.request.urlopen(prepared, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class Clients:
    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        session = boto3.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION
        )

        def client(name: str) -> Any:
            return session.client(name, endpoint_url=endpoint, config=NO_CLIENT_VALIDATION)

        self.ec2 = client("ec2")
        self.iam = client("iam")
        self.eks = client("eks")
        self.ssm = client("ssm")
        self.sq = client("service-quotas")
        self.ecr = client("ecr")
        self.ecr_east = session.client("ecr", endpoint_url=endpoint, region_name="us-east-1")


# --- 1. filters and 2. parameters ---------------------------------------------------------------


def filters(c: Clients) -> None:
    ec2 = c.ec2
    # EC2 API Reference DescribeCapacityReservations (botocore 1.44.5 Filters doc): no
    # reservation-type filter; EC2 answers InvalidParameterValue "The filter '<name>' is invalid".
    code, status, message = error(
        ec2.describe_capacity_reservations,
        Filters=[{"Name": "reservation-type", "Values": ["capacity-block"]}],
    )
    check(
        (code, status, message) == ("InvalidParameterValue", 400, "The filter 'reservation-type' is invalid"),
        "DescribeCapacityReservations reservation-type filter -> 400 InvalidParameterValue",
    )
    # Documented ones (same source) pass, tag:<key> per the project's notes.
    for name in (
        "instance-type",
        "state",
        "start-date",
        "end-date",
        "placement-group-arn",
        "tag:gpustack:stack",
    ):
        check(
            error(ec2.describe_capacity_reservations, Filters=[{"Name": name, "Values": ["x"]}])[0] is None,
            f"DescribeCapacityReservations filter {name} accepted",
        )
    # Every table entry: a documented name passes and a made-up one fails (botocore docs per op).
    samples = {
        "describe_vpcs": ("vpc-id", "tag:k", "tag-key"),
        "describe_subnets": ("vpc-id", "cidr-block", "map-public-ip-on-launch"),
        "describe_security_groups": ("group-name", "vpc-id"),
        "describe_internet_gateways": ("attachment.vpc-id",),
        "describe_route_tables": ("vpc-id", "route.nat-gateway-id", "association.subnet-id"),
        "describe_launch_templates": ("launch-template-name", "tag:k"),
        "describe_placement_groups": ("strategy", "tag:k", "tag-key"),
        "describe_instances": ("instance-state-name", "tag:k"),
        "describe_snapshots": ("status", "tag:k"),
        "describe_volumes": ("status", "tag:k"),
        "describe_images": ("name", "owner-alias"),
        "describe_addresses": ("allocation-id", "tag:k"),
        "describe_vpc_endpoints": ("vpc-id", "service-name", "vpc-endpoint-type", "tag:k"),
    }
    for op, names in samples.items():
        call = getattr(ec2, op)
        for name in names:
            check(
                error(call, Filters=[{"Name": name, "Values": ["x"]}])[0] is None,
                f"{op} filter {name} accepted",
            )
        code, _, message = error(call, Filters=[{"Name": "colour", "Values": ["x"]}])
        check(
            code == "InvalidParameterValue" and message == "The filter 'colour' is invalid",
            f"{op} unknown filter -> InvalidParameterValue",
        )
    # DescribeNatGateways' member is Filter (singular; botocore model); its docs list no tag-value.
    check(
        error(ec2.describe_nat_gateways, Filter=[{"Name": "tag:k", "Values": ["v"]}])[0] is None,
        "NAT tag:<k> filter",
    )
    check(
        error(ec2.describe_nat_gateways, Filter=[{"Name": "tag-value", "Values": ["v"]}])[0]
        == "InvalidParameterValue",
        "NAT tag-value filter not documented -> InvalidParameterValue",
    )
    # DescribePlacementGroups lists no tag-value (botocore doc), DescribeVpcs neither.
    check(
        error(ec2.describe_vpcs, Filters=[{"Name": "tag-value", "Values": ["x"]}])[0]
        == "InvalidParameterValue",
        "DescribeVpcs tag-value not documented -> InvalidParameterValue",
    )


def parameters(c: Clients) -> None:
    # botocore 1.44.5 ec2: CreatePlacementGroup.Strategy is enum PlacementStrategy.
    code, status, message = error(c.ec2.create_placement_group, GroupName="x", Strategy="tight")
    check(
        code == "InvalidParameterValue" and status == 400 and "Strategy" in message,
        "EC2 enum violation -> 400 InvalidParameterValue",
    )
    # DescribeCapacityReservationsMaxResults: max 1000 (botocore model).
    check(
        error(c.ec2.describe_capacity_reservations, MaxResults=5000)[0] == "InvalidParameterValue",
        "EC2 max violation -> InvalidParameterValue",
    )
    # RunInstancesRequest required ImageId? no: MinCount/MaxCount are required (botocore model).
    code, _, message = error(c.ec2.run_instances, ImageId="ami-12345678", MaxCount=1)
    check(
        code == "MissingParameter" and message == "The request must contain the parameter MinCount",
        "EC2 missing required member -> MissingParameter",
    )
    # Wrong type on the wire (integer member given text).
    check(
        error(c.ec2.describe_capacity_reservations, MaxResults="many")[0] == "InvalidParameterValue",
        "EC2 integer member with text -> InvalidParameterValue",
    )
    # EC2 answers UnknownParameter for a parameter the action does not have (API Reference,
    # common client errors); DescribeCapacityBlockOfferings and DescribeVpcAttribute take no Filter.
    status, body = raw_ec2(
        c,
        {
            "Action": "DescribeVpcAttribute",
            "VpcId": "vpc-1",
            "Attribute": "enableDnsSupport",
            "Filter.1.Name": "x",
        },
    )
    check(
        status == 400
        and "<Code>UnknownParameter</Code>" in body
        and "The parameter Filter.1.Name is not recognized" in body,
        "EC2 parameter the action does not have -> UnknownParameter",
    )
    # IAM: RoleName max length 64 (roleNameType); answers ValidationError (Coral wording).
    code, status, message = error(c.iam.create_role, RoleName="r" * 65, AssumeRolePolicyDocument="{}")
    check(
        code == "ValidationError"
        and status == 400
        and message.startswith("1 validation error detected: Value '")
        and "at 'roleName' failed to satisfy constraint: Member must have length less than or equal to 64"
        in message,
        "IAM length violation -> 400 ValidationError",
    )
    check(
        error(c.iam.create_role, RoleName="r")[0] == "ValidationError",
        "IAM missing AssumeRolePolicyDocument -> ValidationError",
    )
    # EKS: capacityType enum, maxResults 1-100 (botocore eks model) -> InvalidParameterException.
    code, status, message = error(
        c.eks.create_nodegroup,
        clusterName="c",
        nodegroupName="n",
        subnets=["s"],
        nodeRole="r",
        capacityType="RESERVED",
    )
    check(
        code == "InvalidParameterException" and status == 400 and "enum value set" in message,
        "EKS enum violation -> 400 InvalidParameterException",
    )
    check(error(c.eks.list_clusters, maxResults=101)[0] == "InvalidParameterException", "EKS max violation")
    check(
        error(c.eks.create_nodegroup, clusterName="c", nodegroupName="n", subnets=["s"])[0]
        == "InvalidParameterException",
        "EKS missing nodeRole -> InvalidParameterException",
    )
    check(
        error(
            c.eks.create_nodegroup,
            clusterName="c",
            nodegroupName="n",
            subnets=["s"],
            nodeRole="r",
            scalingConfig={"desiredSize": -1},
        )[0]
        == "InvalidParameterException",
        "EKS scalingConfig.desiredSize min 0",
    )
    # SSM: Name length >= 1, MaxResults 5-50 (ssm model) -> ValidationException.
    check(
        error(c.ssm.get_parameter, Name="")[0] == "ValidationException",
        "SSM length violation -> ValidationException",
    )
    check(
        error(c.ssm.describe_instance_information, MaxResults=51)[0] == "ValidationException",
        "SSM max violation -> ValidationException",
    )
    check(
        error(c.ssm.get_parameter, Name=7)[0] == "ValidationException",
        "SSM type violation -> ValidationException",
    )
    # Service Quotas: QuotaCode required (service-quotas model) -> ValidationException.
    code, status, message = error(c.sq.get_service_quota, ServiceCode="ec2")
    check(
        (code, status) == ("ValidationException", 400) and "Value null at 'quotaCode'" in message,
        "Service Quotas missing QuotaCode -> 400 ValidationException",
    )
    # Valid requests still pass.
    check(
        error(c.sq.get_service_quota, ServiceCode="ec2", QuotaCode="L-417A185B")[0] is None,
        "valid quota request passes",
    )
    check(error(c.eks.list_clusters, maxResults=100)[0] is None, "valid EKS request passes")


def request_log_region(c: Clients) -> None:
    http(c.endpoint, "POST", "/_gpustack/requests/reset")
    error(c.ecr_east.get_authorization_token)
    log = http(c.endpoint, "GET", "/_gpustack/requests")
    check(
        log[-1] == {"service": "ecr", "region": "us-east-1", "action": "GetAuthorizationToken"},
        "request log records the SigV4 scope's region",
    )


# --- 3f. egress kinds ----------------------------------------------------------------------------


def vpc(c: Clients, dns: bool = True, azs: tuple[str, ...] = ("a", "b")) -> dict[str, Any]:
    """A VPC with one subnet per AZ; DNS hostnames on if ``dns`` (support is on by default)."""
    ec2 = c.ec2
    vpc_id = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    if dns:
        ec2.modify_vpc_attribute(VpcId=vpc_id, EnableDnsHostnames={"Value": True})
    subnets = [
        ec2.create_subnet(VpcId=vpc_id, CidrBlock=f"10.9.{i}.0/24", AvailabilityZone=f"{REGION}{az}")[
            "Subnet"
        ]["SubnetId"]
        for i, az in enumerate(azs)
    ]
    return {"vpc": vpc_id, "subnets": subnets}


def egress_kinds(c: Clients) -> None:
    ec2 = c.ec2
    net = vpc(c, dns=False)
    vpc_id, subnet = net["vpc"], net["subnets"][0]
    tags = [{"Key": "gpustack:stack", "Value": "strict"}]
    # ModifyVpcAttribute: one attribute per call (aws/aws-sdk-go#415).
    code, _, message = error(
        ec2.modify_vpc_attribute,
        VpcId=vpc_id,
        EnableDnsHostnames={"Value": True},
        EnableDnsSupport={"Value": True},
    )
    check(
        code == "InvalidParameterCombination"
        and message.startswith("Fields for multiple attribute types specified"),
        "ModifyVpcAttribute with two attributes -> InvalidParameterCombination",
    )
    check(
        ec2.describe_vpc_attribute(VpcId=vpc_id, Attribute="enableDnsHostnames")["EnableDnsHostnames"][
            "Value"
        ]
        is False
        and ec2.describe_vpc_attribute(VpcId=vpc_id, Attribute="enableDnsSupport")["EnableDnsSupport"][
            "Value"
        ]
        is True,
        "DescribeVpcAttribute: new VPC has DNS support, no DNS hostnames (VPC UG defaults)",
    )
    # Interface endpoint with private DNS needs both attributes (PrivateLink guide, "Private DNS").
    check(
        error(
            ec2.create_vpc_endpoint,
            VpcId=vpc_id,
            ServiceName=f"com.amazonaws.{REGION}.ecr.api",
            VpcEndpointType="Interface",
            SubnetIds=[subnet],
            PrivateDnsEnabled=True,
        )[0]
        == "InvalidParameter",
        "interface endpoint with private DNS in a VPC without DNS hostnames -> InvalidParameter",
    )
    ec2.modify_vpc_attribute(VpcId=vpc_id, EnableDnsHostnames={"Value": True})
    check(
        ec2.describe_vpc_attribute(VpcId=vpc_id, Attribute="enableDnsHostnames")["EnableDnsHostnames"][
            "Value"
        ]
        is True,
        "ModifyVpcAttribute EnableDnsHostnames alone -> on",
    )
    # Elastic IP + NAT gateway with tags.
    eip = ec2.allocate_address(Domain="vpc", TagSpecifications=[{"ResourceType": "elastic-ip", "Tags": tags}])
    check(
        [
            a["AllocationId"]
            for a in ec2.describe_addresses(Filters=[{"Name": "tag:gpustack:stack", "Values": ["strict"]}])[
                "Addresses"
            ]
        ]
        == [eip["AllocationId"]],
        "AllocateAddress with TagSpecifications; DescribeAddresses tag filter",
    )
    nat = ec2.create_nat_gateway(
        SubnetId=subnet,
        AllocationId=eip["AllocationId"],
        TagSpecifications=[{"ResourceType": "natgateway", "Tags": tags}],
    )["NatGateway"]
    found = ec2.describe_nat_gateways(Filter=[{"Name": "tag:gpustack:stack", "Values": ["strict"]}])[
        "NatGateways"
    ]
    check(
        [n["NatGatewayId"] for n in found] == [nat["NatGatewayId"]] and found[0]["State"] == "available",
        "CreateNatGateway with TagSpecifications; DescribeNatGateways Filter tag",
    )
    # An EIP used by a NAT gateway cannot be released (AuthFailure: kubernetes/kops#1604).
    check(
        error(ec2.release_address, AllocationId=eip["AllocationId"])[0] == "AuthFailure",
        "ReleaseAddress of an EIP held by a NAT gateway -> AuthFailure",
    )
    table = ec2.create_route_table(VpcId=vpc_id)["RouteTable"]["RouteTableId"]
    ec2.create_route(RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", NatGatewayId=nat["NatGatewayId"])
    ec2.associate_route_table(RouteTableId=table, SubnetId=subnet)
    routes = ec2.describe_route_tables(RouteTableIds=[table])["RouteTables"][0]["Routes"]
    check(
        any(r.get("NatGatewayId") == nat["NatGatewayId"] for r in routes), "route 0.0.0.0/0 to a NAT gateway"
    )
    # VPC endpoints: gateway s3 on the route table, interface ones with private DNS.
    s3 = ec2.create_vpc_endpoint(
        VpcId=vpc_id,
        ServiceName=f"com.amazonaws.{REGION}.s3",
        VpcEndpointType="Gateway",
        RouteTableIds=[table],
        TagSpecifications=[{"ResourceType": "vpc-endpoint", "Tags": tags}],
    )["VpcEndpoint"]
    check(s3["PrivateDnsEnabled"] is False, "gateway endpoint reports PrivateDnsEnabled false")
    sg = ec2.create_security_group(
        GroupName=f"ep-{uuid.uuid4().hex[:6]}", Description="endpoints", VpcId=vpc_id
    )["GroupId"]
    interfaces = {}
    for service in ("ecr.api", "ecr.dkr", "ec2", "sts", "ssm", "eks-auth", "logs"):
        interfaces[service] = ec2.create_vpc_endpoint(
            VpcId=vpc_id,
            ServiceName=f"com.amazonaws.{REGION}.{service}",
            VpcEndpointType="Interface",
            SubnetIds=[subnet],
            SecurityGroupIds=[sg],
            PrivateDnsEnabled=True,
            TagSpecifications=[{"ResourceType": "vpc-endpoint", "Tags": tags}],
        )["VpcEndpoint"]
    check(
        all(e["State"] == "available" and e["PrivateDnsEnabled"] for e in interfaces.values()),
        "interface endpoints created",
    )
    listed = ec2.describe_vpc_endpoints(
        Filters=[
            {"Name": "vpc-id", "Values": [vpc_id]},
            {"Name": "vpc-endpoint-type", "Values": ["Interface"]},
        ]
    )["VpcEndpoints"]
    check(len(listed) == 7, "DescribeVpcEndpoints vpc-id + vpc-endpoint-type filters")
    # Two subnets in one AZ for one interface endpoint: DuplicateSubnetsInSameZone (EC2 error codes).
    same_az = ec2.create_subnet(VpcId=vpc_id, CidrBlock="10.9.200.0/24", AvailabilityZone=f"{REGION}a")[
        "Subnet"
    ]["SubnetId"]
    check(
        error(
            ec2.modify_vpc_endpoint,
            VpcEndpointId=interfaces["ecr.api"]["VpcEndpointId"],
            AddSubnetIds=[same_az],
        )[0]
        == "DuplicateSubnetsInSameZone",
        "ModifyVpcEndpoint: a second subnet in one AZ -> DuplicateSubnetsInSameZone",
    )
    ec2.modify_vpc_endpoint(
        VpcEndpointId=interfaces["ecr.api"]["VpcEndpointId"],
        AddSubnetIds=[net["subnets"][1]],
        AddSecurityGroupIds=[sg],
    )
    got = ec2.describe_vpc_endpoints(VpcEndpointIds=[interfaces["ecr.api"]["VpcEndpointId"]])["VpcEndpoints"][
        0
    ]
    check(
        set(got["SubnetIds"]) == set(net["subnets"]) and len(got["NetworkInterfaceIds"]) == 2,
        "ModifyVpcEndpoint AddSubnetIds",
    )
    ec2.modify_vpc_endpoint(
        VpcEndpointId=interfaces["ecr.api"]["VpcEndpointId"], RemoveSubnetIds=[net["subnets"][1]]
    )
    got = ec2.describe_vpc_endpoints(VpcEndpointIds=[interfaces["ecr.api"]["VpcEndpointId"]])["VpcEndpoints"][
        0
    ]
    check(
        got["SubnetIds"] == [subnet] and len(got["NetworkInterfaceIds"]) == 1,
        "ModifyVpcEndpoint RemoveSubnetIds",
    )
    other = ec2.create_route_table(VpcId=vpc_id)["RouteTable"]["RouteTableId"]
    ec2.modify_vpc_endpoint(VpcEndpointId=s3["VpcEndpointId"], AddRouteTableIds=[other])

    def prefix_routes(t: str) -> list[dict[str, Any]]:
        rs = ec2.describe_route_tables(RouteTableIds=[t])["RouteTables"][0]["Routes"]
        return [r for r in rs if r.get("GatewayId") == s3["VpcEndpointId"]]

    check(
        len(prefix_routes(other)) == 1, "ModifyVpcEndpoint AddRouteTableIds adds the gateway endpoint's route"
    )
    ec2.modify_vpc_endpoint(VpcEndpointId=s3["VpcEndpointId"], RemoveRouteTableIds=[other])
    check(prefix_routes(other) == [], "ModifyVpcEndpoint RemoveRouteTableIds removes it")
    ec2.delete_vpc_endpoints(
        VpcEndpointIds=[e["VpcEndpointId"] for e in interfaces.values()] + [s3["VpcEndpointId"]]
    )
    check(prefix_routes(table) == [], "DeleteVpcEndpoints removes the gateway route")
    ec2.delete_nat_gateway(NatGatewayId=nat["NatGatewayId"])
    check(
        ec2.describe_nat_gateways(NatGatewayIds=[nat["NatGatewayId"]])["NatGateways"][0]["State"]
        == "deleted",
        "DeleteNatGateway -> deleted (still listed, as AWS does for a while)",
    )
    check(
        error(ec2.release_address, AllocationId=eip["AllocationId"])[0] is None,
        "ReleaseAddress once the NAT is deleted",
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True, help="e.g. http://127.0.0.1:PORT")
    args = parser.parse_args()
    c = Clients(args.endpoint)
    try:
        filters(c)
        parameters(c)
        request_log_region(c)
        egress_kinds(c)
    except Exception as e:  # noqa: BLE001
        print(f"FAIL {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        http(args.endpoint, "POST", "/moto-api/reset")
    print("selftest_strict: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
