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
        self.asg = client("autoscaling")
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
        # DescribeSecurityGroupRulesRequest.Filters (group-id is checked by its id form in moto).
        "describe_security_group_rules": ("security-group-rule-id", "tag:k"),
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
    # ... and the tag filters narrow the answer (nat_tag_filters.py; moto ignored them).
    vpc = ec2.create_vpc(CidrBlock="10.77.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.77.0.0/24")["Subnet"]["SubnetId"]
    nats = []
    for owner in ("a", "b"):
        eip = ec2.allocate_address(Domain="vpc")["AllocationId"]
        nats.append(ec2.create_nat_gateway(
            SubnetId=subnet, AllocationId=eip,
            TagSpecifications=[{"ResourceType": "natgateway", "Tags": [{"Key": "owner", "Value": owner}]}],
        )["NatGateway"]["NatGatewayId"])
    by_tag = ec2.describe_nat_gateways(Filter=[{"Name": "tag:owner", "Values": ["b"]}])["NatGateways"]
    check([n["NatGatewayId"] for n in by_tag] == [nats[1]], "NAT tag:<k> filter selects by tag value")
    by_key = ec2.describe_nat_gateways(Filter=[{"Name": "tag-key", "Values": ["nobody"]}])["NatGateways"]
    check(by_key == [], "NAT tag-key filter selects by tag key")
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


def security_group_rules(c: Clients) -> None:
    """ext/security_group_rules.py: a group-to-group rule's description, in both answers and
    after ModifySecurityGroupRules (EC2 API reference, SecurityGroupRule.Description)."""
    ec2 = c.ec2
    vpc = ec2.create_vpc(CidrBlock="10.99.0.0/16")["Vpc"]["VpcId"]
    a = ec2.create_security_group(GroupName="sgr-a", Description="a", VpcId=vpc)["GroupId"]
    b = ec2.create_security_group(GroupName="sgr-b", Description="b", VpcId=vpc)["GroupId"]
    out = ec2.authorize_security_group_ingress(
        GroupId=a,
        IpPermissions=[
            {"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443,
             "UserIdGroupPairs": [{"GroupId": b, "Description": "from b"}]}
        ],
        TagSpecifications=[{"ResourceType": "security-group-rule", "Tags": [{"Key": "k", "Value": "v"}]}],
    )
    rule = out["SecurityGroupRules"][0]
    check(rule["SecurityGroupRuleId"].startswith("sgr-"), "Authorize answers the new rule's sgr- id")
    check(rule.get("Description") == "from b", "Authorize answers a group rule's description")
    found = ec2.describe_security_group_rules(Filters=[{"Name": "tag:k", "Values": ["v"]}])["SecurityGroupRules"]
    check([r.get("Description") for r in found] == ["from b"], "DescribeSecurityGroupRules shows a group rule's description")
    ec2.modify_security_group_rules(
        GroupId=a,
        SecurityGroupRules=[{"SecurityGroupRuleId": rule["SecurityGroupRuleId"], "SecurityGroupRule": {
            "IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "ReferencedGroupId": b, "Description": "new"}}],
    )
    pairs = ec2.describe_security_groups(GroupIds=[a])["SecurityGroups"][0]["IpPermissions"][0]
    check([p.get("Description") for p in pairs["UserIdGroupPairs"]] == ["new"] and not pairs["IpRanges"],
          "ModifySecurityGroupRules description shows in UserIdGroupPairs, no stray IP range")
    found = ec2.describe_security_group_rules(SecurityGroupRuleIds=[rule["SecurityGroupRuleId"]])["SecurityGroupRules"]
    check(found[0].get("Description") == "new", "ModifySecurityGroupRules keeps the rule id")


def vpc_blocks(c: Clients) -> None:
    """ext/vpc_cidr_blocks.py: the VPC UG's association restrictions and overlaps."""
    ec2 = c.ec2
    vpc = ec2.create_vpc(CidrBlock="10.98.0.0/16")["Vpc"]["VpcId"]
    check(error(ec2.associate_vpc_cidr_block, VpcId=vpc, CidrBlock="100.64.0.0/16")[0] is None,
          "100.64.0.0/16 next to a 10/8 primary is allowed")
    for cidr in ("192.168.0.0/16", "172.16.0.0/16", "198.19.0.0/16"):
        check(error(ec2.associate_vpc_cidr_block, VpcId=vpc, CidrBlock=cidr)[0] == "InvalidVpc.Range",
              f"{cidr} next to a 10/8 primary -> InvalidVpc.Range")
    check(error(ec2.associate_vpc_cidr_block, VpcId=vpc, CidrBlock="10.98.128.0/17")[0] == "InvalidVpc.Range",
          "a block overlapping the primary -> InvalidVpc.Range")
    check(error(ec2.associate_vpc_cidr_block, VpcId=vpc, CidrBlock="10.99.0.0/29")[0] == "InvalidVpc.Range",
          "a /29 block -> InvalidVpc.Range")
    # The three rows the first version missed (VPC UG table, doc_source/VPC_Subnets.md).
    shared = ec2.create_vpc(CidrBlock="100.64.0.0/16")["Vpc"]["VpcId"]
    check(error(ec2.associate_vpc_cidr_block, VpcId=shared, CidrBlock="10.5.0.0/16")[0] == "InvalidVpc.Range",
          "10.x next to a 100.64/10 primary -> InvalidVpc.Range")
    check(error(ec2.associate_vpc_cidr_block, VpcId=shared, CidrBlock="100.65.0.0/16")[0] is None,
          "100.65.0.0/16 next to a 100.64/10 primary is allowed")
    low = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    check(error(ec2.associate_vpc_cidr_block, VpcId=low, CidrBlock="10.0.0.0/16")[0] == "InvalidVpc.Range",
          "10.0.0.0/16 next to a primary in 10.0.0.0/15 -> InvalidVpc.Range")
    rfc172 = ec2.create_vpc(CidrBlock="172.16.0.0/16")["Vpc"]["VpcId"]
    check(error(ec2.associate_vpc_cidr_block, VpcId=rfc172, CidrBlock="172.31.0.0/16")[0] == "InvalidVpc.Range",
          "172.31.0.0/16 next to a 172.16/12 primary -> InvalidVpc.Range")
    # A block is `associating` first and usable only once `associated`; a block with a subnet
    # cannot be disassociated.
    pods = ec2.create_vpc(CidrBlock="10.97.0.0/16")["Vpc"]["VpcId"]
    assoc = ec2.associate_vpc_cidr_block(VpcId=pods, CidrBlock="100.64.0.0/16")["CidrBlockAssociation"]
    subnet = dict(VpcId=pods, CidrBlock="100.64.0.0/19", AvailabilityZone="us-west-2a")
    check(error(ec2.create_subnet, **subnet)[0] == "InvalidSubnet.Range",
          "a subnet in a block still associating -> InvalidSubnet.Range")

    def state() -> str:
        sets = ec2.describe_vpcs(VpcIds=[pods])["Vpcs"][0]["CidrBlockAssociationSet"]
        return next(a["CidrBlockState"]["State"] for a in sets if a["AssociationId"] == assoc["AssociationId"])

    first, second = state(), state()
    check((first, second) == ("associating", "associated"), f"associating, then associated ({first}, {second})")
    sid = ec2.create_subnet(**subnet)["Subnet"]["SubnetId"]
    check(error(ec2.disassociate_vpc_cidr_block, AssociationId=assoc["AssociationId"])[0] == "InvalidCidrBlock.InUse",
          "disassociating a block that holds a subnet -> InvalidCidrBlock.InUse")
    ec2.delete_subnet(SubnetId=sid)
    check(error(ec2.disassociate_vpc_cidr_block, AssociationId=assoc["AssociationId"])[0] is None,
          "a block without subnets is disassociated")


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
    # EC2 Auto Scaling: SpotAllocationStrategy and CapacityReservationPreference are enums of
    # the botocore autoscaling model; moto takes anything. AWS answers ValidationError (query).
    code, status, _ = error(
        c.asg.create_auto_scaling_group,
        AutoScalingGroupName="g",
        MinSize=0,
        MaxSize=1,
        CapacityReservationSpecification={"CapacityReservationPreference": "reservations-only"},
    )
    check(code == "ValidationError" and status == 400, "Auto Scaling preference enum -> 400 ValidationError")
    code, _, _ = error(
        c.asg.create_auto_scaling_group,
        AutoScalingGroupName="g",
        MinSize=0,
        MaxSize=1,
        MixedInstancesPolicy={
            "LaunchTemplate": {"LaunchTemplateSpecification": {"LaunchTemplateId": "lt-1"}},
            "InstancesDistribution": {"SpotAllocationStrategy": "cheapest"},
        },
    )
    check(code == "ValidationError", "Auto Scaling spot allocation strategy enum -> ValidationError")
    check(
        error(c.asg.create_auto_scaling_group, AutoScalingGroupName="g", MinSize=0)[0] == "ValidationError",
        "Auto Scaling missing MaxSize -> ValidationError",
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
    # A gateway deletes through `deleting`, holding its address (EC2 API NatGateway.State).
    http(c.endpoint, "POST", "/_gpustack/nat?delete_ms=300")
    eip2 = ec2.allocate_address(Domain="vpc")["AllocationId"]
    nat2 = ec2.create_nat_gateway(SubnetId=subnet, AllocationId=eip2)["NatGateway"]["NatGatewayId"]
    ec2.delete_nat_gateway(NatGatewayId=nat2)
    state = lambda: ec2.describe_nat_gateways(NatGatewayIds=[nat2])["NatGateways"][0]["State"]  # noqa: E731
    check(state() == "deleting", "DeleteNatGateway with delete_ms -> deleting first")
    check(error(ec2.release_address, AllocationId=eip2)[0] == "AuthFailure", "ReleaseAddress while deleting -> AuthFailure")
    wait("NAT gateway deleted", lambda: state() == "deleted")
    check(error(ec2.release_address, AllocationId=eip2)[0] is None, "ReleaseAddress once deleting is over")
    check(
        error(ec2.delete_nat_gateway, NatGatewayId="nat-0123456789abcdef0")[0] == "NatGatewayNotFound",
        "DeleteNatGateway of an unknown gateway -> NatGatewayNotFound",
    )
    # A failed create on demand (EC2 API NatGateway.State "failed", FailureCode/FailureMessage).
    http(c.endpoint, "POST", "/_gpustack/nat?delete_ms=0&fail_next=1")
    eip3 = ec2.allocate_address(Domain="vpc")["AllocationId"]
    nat3 = ec2.create_nat_gateway(SubnetId=subnet, AllocationId=eip3)["NatGateway"]["NatGatewayId"]
    got = ec2.describe_nat_gateways(NatGatewayIds=[nat3])["NatGateways"][0]
    check(
        got["State"] == "failed" and got.get("FailureCode") == "InternalError" and "invalid state" in got.get("FailureMessage", ""),
        "fail_next -> the next CreateNatGateway reads failed with InternalError",
    )
    ec2.delete_nat_gateway(NatGatewayId=nat3)
    ec2.release_address(AllocationId=eip3)


# --- 3a-c. node groups that cannot join, Capacity Block upgrades ----------------------------------

ROLE = "arn:aws:iam::123456789012:role/eks"


def user_data(toml: str) -> str:
    return base64.b64encode(toml.encode()).decode()


class NodeGroups:
    def __init__(self, c: Clients, private_endpoint: bool = False, dns: bool = True, **cluster: Any) -> None:
        self.c = c
        self.net = vpc(c, dns=dns)
        self.igw = c.ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
        c.ec2.attach_internet_gateway(InternetGatewayId=self.igw, VpcId=self.net["vpc"])
        self.cluster = f"strict-{uuid.uuid4().hex[:6]}"
        c.eks.create_cluster(
            name=self.cluster,
            roleArn=ROLE,
            resourcesVpcConfig={"subnetIds": self.net["subnets"], "endpointPrivateAccess": private_endpoint},
            **cluster,
        )
        wait(
            "cluster ACTIVE",
            lambda: c.eks.describe_cluster(name=self.cluster)["cluster"]["status"] == "ACTIVE",
        )
        self.n = 0

    def subnet(self, public: bool = False, route: str | None = None) -> tuple[str, str]:
        """A new subnet with its own route table; ``route`` igw/nat-... target for 0.0.0.0/0."""
        ec2 = self.c.ec2
        self.n += 1
        subnet = ec2.create_subnet(
            VpcId=self.net["vpc"], CidrBlock=f"10.9.{100 + self.n}.0/24", AvailabilityZone=f"{REGION}c"
        )["Subnet"]["SubnetId"]
        if public:
            ec2.modify_subnet_attribute(SubnetId=subnet, MapPublicIpOnLaunch={"Value": True})
        table = ec2.create_route_table(VpcId=self.net["vpc"])["RouteTable"]["RouteTableId"]
        ec2.associate_route_table(RouteTableId=table, SubnetId=subnet)
        if route == "igw":
            ec2.create_route(RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", GatewayId=self.igw)
        elif route:
            ec2.create_route(RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", NatGatewayId=route)
        return subnet, table

    def template(self, **data: Any) -> str:
        name = f"{self.cluster}-lt-{uuid.uuid4().hex[:6]}"
        return self.c.ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData=data)[
            "LaunchTemplate"
        ]["LaunchTemplateId"]

    def create(self, subnets: list[str], **extra: Any) -> dict[str, Any]:
        """Creates a node group and waits for the end of its CREATING; returns it."""
        name = f"ng-{uuid.uuid4().hex[:6]}"
        self.c.eks.create_nodegroup(
            clusterName=self.cluster, nodegroupName=name, subnets=subnets, nodeRole=ROLE, **extra
        )
        return self.settle(name, "CREATING")

    def settle(self, name: str, phase: str) -> dict[str, Any]:
        got: dict[str, Any] = {}

        def done() -> bool:
            got.update(
                self.c.eks.describe_nodegroup(clusterName=self.cluster, nodegroupName=name)["nodegroup"]
            )
            return got["status"] != phase

        wait(f"node group {name} past {phase}", done)
        return got


def failed(ng: dict[str, Any], *words: str) -> bool:
    issues = ng.get("health", {}).get("issues", [])
    return (
        ng["status"] == "CREATE_FAILED"
        and len(issues) == 1
        and issues[0]["code"] == "NodeCreationFailure"
        and issues[0]["message"].startswith("Instances failed to join the kubernetes cluster")
        and all(w in issues[0]["message"] for w in words)
    )


def node_groups(c: Clients) -> None:
    http(
        c.endpoint,
        "POST",
        "/_gpustack/eks?cluster_create_ms=50&nodegroup_create_ms=100&update_ms=100&delete_ms=50",
    )
    g = NodeGroups(c)
    ec2 = c.ec2
    # 3c egress (EKS UG; node_join.py). No route out, no endpoints -> CREATE_FAILED.
    closed, closed_table = g.subnet()
    check(
        failed(g.create([closed]), "has no egress"),
        "node group in a subnet without egress -> CREATE_FAILED NodeCreationFailure",
    )
    # (i) internet gateway + public IPv4 on launch -> ACTIVE.
    public, _ = g.subnet(public=True, route="igw")
    check(g.create([public])["status"] == "ACTIVE", "IGW route + MapPublicIpOnLaunch -> ACTIVE")
    # ... but not without MapPublicIpOnLaunch,
    no_ip, _ = g.subnet(public=False, route="igw")
    check(failed(g.create([no_ip]), "MapPublicIpOnLaunch"), "IGW route without public IPv4 -> CREATE_FAILED")
    # ... nor with a launch template of several interfaces (EC2 UG efa-acc-inst-types: no public IPv4).
    efa = g.template(
        NetworkInterfaces=[
            {"DeviceIndex": 0, "NetworkCardIndex": 0, "InterfaceType": "efa"},
            {"DeviceIndex": 1, "NetworkCardIndex": 1, "InterfaceType": "efa-only"},
        ]
    )
    check(
        failed(g.create([public], launchTemplate={"id": efa}), "2 network interfaces"),
        "IGW + public IP but a 2-interface launch template -> CREATE_FAILED",
    )
    # (ii) NAT gateway -> ACTIVE, also with several interfaces.
    eip = ec2.allocate_address(Domain="vpc")["AllocationId"]
    nat = ec2.create_nat_gateway(SubnetId=public, AllocationId=eip)["NatGateway"]["NatGatewayId"]
    private, _ = g.subnet(route=nat)
    check(
        g.create([private], launchTemplate={"id": efa})["status"] == "ACTIVE",
        "0.0.0.0/0 to a NAT gateway -> ACTIVE",
    )
    # A NAT gateway in a subnet with no route to the internet gateway is no way out (VPC UG
    # vpc-nat-gateway: its subnet's table "must include a route ... to an internet gateway").
    eip_p = ec2.allocate_address(Domain="vpc")["AllocationId"]
    nat_p = ec2.create_nat_gateway(SubnetId=closed, AllocationId=eip_p)["NatGateway"]["NatGatewayId"]
    behind, _ = g.subnet(route=nat_p)
    check(failed(g.create([behind]), "has no egress"), "0.0.0.0/0 to a NAT gateway in a private subnet -> CREATE_FAILED")
    # (iii) endpoints: ecr.api, ecr.dkr, ec2, sts interface (private DNS, in the subnet) + s3 gateway.
    for service in ("ecr.api", "ecr.dkr", "ec2"):
        ec2.create_vpc_endpoint(
            VpcId=g.net["vpc"],
            ServiceName=f"com.amazonaws.{REGION}.{service}",
            VpcEndpointType="Interface",
            SubnetIds=[closed],
        )
    ec2.create_vpc_endpoint(
        VpcId=g.net["vpc"],
        ServiceName=f"com.amazonaws.{REGION}.s3",
        VpcEndpointType="Gateway",
        RouteTableIds=[closed_table],
    )
    check(failed(g.create([closed]), "sts"), "endpoints without sts -> CREATE_FAILED naming sts")
    ec2.create_vpc_endpoint(
        VpcId=g.net["vpc"],
        ServiceName=f"com.amazonaws.{REGION}.sts",
        VpcEndpointType="Interface",
        SubnetIds=[closed],
    )
    check(
        g.create([closed])["status"] == "ACTIVE",
        "ecr.api/ecr.dkr/ec2/sts interface + s3 gateway endpoints -> ACTIVE",
    )

    # 3b Bottlerocket user data (Bottlerocket settings reference; node_join.py).
    good = (
        '[settings.kubelet-device-plugins.nvidia]\ndevice-partitioning-strategy = "mig"\n'
        '[settings.kubelet-device-plugins.nvidia.mig.profile]\n"h100.80gb" = "1g.10gb"\n"a100.40gb" = "4"\n'
        '[settings.kubernetes.node-labels]\n"gpustack.io/pool" = "train"\n'
        '[settings.kubernetes.node-taints]\n"nvidia.com/gpu" = ["true:NoSchedule"]\n'
    )
    ok_lt = g.template(UserData=user_data(good))
    check(
        g.create([public], amiType="BOTTLEROCKET_x86_64_NVIDIA", launchTemplate={"id": ok_lt})["status"]
        == "ACTIVE",
        "Bottlerocket user data with string MIG profiles, labels, taints -> ACTIVE",
    )
    bad = {
        "MIG profile as an integer": '[settings.kubelet-device-plugins.nvidia.mig.profile]\n"h100.80gb" = 4\n',
        "time-slicing replicas 1": "[settings.kubelet-device-plugins.nvidia.time-slicing]\nreplicas = 1\n",
        "mps replicas 49": "[settings.kubelet-device-plugins.nvidia.mps]\nreplicas = 49\n",
        "sharing strategy": '[settings.kubelet-device-plugins.nvidia]\ndevice-sharing-strategy = "mig"\n',
        "partitioning strategy": '[settings.kubelet-device-plugins.nvidia]\ndevice-partitioning-strategy = "mps"\n',
        "node-label integer": '[settings.kubernetes.node-labels]\n"a" = 1\n',
        "node-taint not a list": '[settings.kubernetes.node-taints]\n"a" = "b:NoSchedule"\n',
        "node-taint effect": '[settings.kubernetes.node-taints]\n"a" = ["b:Never"]\n',
        "not TOML": "settings = [\n",
        "MIME multipart": 'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="//"\n\n--//\n',
    }
    for what, toml in bad.items():
        lt = g.template(UserData=user_data(toml))
        check(
            failed(
                g.create([public], amiType="BOTTLEROCKET_x86_64_NVIDIA", launchTemplate={"id": lt}),
                "Bottlerocket",
            ),
            f"Bottlerocket user data with {what} -> CREATE_FAILED NodeCreationFailure",
        )
    # AL2023 takes MIME multi-part user data whose node.eks.aws parts are NodeConfigs (EKS UG
    # launch-templates; nodeadm doc/api.md): Bottlerocket's TOML is refused there.
    lt = g.template(UserData=user_data(bad["MIG profile as an integer"]))
    check(
        failed(g.create([public], amiType="AL2023_x86_64_STANDARD", launchTemplate={"id": lt}), "nodeadm"),
        "AL2023 with TOML user data -> CREATE_FAILED (not MIME)",
    )

    def node_config(strategy: str) -> str:
        return (
            'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="//"\n\n--//\n'
            "Content-Type: application/node.eks.aws\n\n---\napiVersion: node.eks.aws/v1alpha1\n"
            f"kind: NodeConfig\nspec:\n  instance:\n    localStorage:\n      strategy: {strategy}\n\n--//--\n"
        )

    lt = g.template(UserData=user_data(node_config("RAID0")))
    check(
        g.create([public], amiType="AL2023_x86_64_NVIDIA", launchTemplate={"id": lt})["status"] == "ACTIVE",
        "AL2023 with a NodeConfig (RAID0) -> ACTIVE",
    )
    lt = g.template(UserData=user_data(node_config("RAID5")))
    check(
        failed(g.create([public], amiType="AL2023_x86_64_NVIDIA", launchTemplate={"id": lt}), "localStorage"),
        "AL2023 NodeConfig with localStorage RAID5 -> CREATE_FAILED",
    )
    # A version update to a template version with bad user data -> DEGRADED, update Failed.
    ng = g.create([public], amiType="BOTTLEROCKET_x86_64_NVIDIA", launchTemplate={"id": ok_lt})
    ec2.create_launch_template_version(
        LaunchTemplateId=ok_lt,
        SourceVersion="1",
        LaunchTemplateData={"UserData": user_data(bad["MIG profile as an integer"])},
    )
    update = c.eks.update_nodegroup_version(
        clusterName=g.cluster, nodegroupName=ng["nodegroupName"], launchTemplate={"id": ok_lt, "version": "2"}
    )["update"]
    after = g.settle(ng["nodegroupName"], "UPDATING")
    final = c.eks.describe_update(name=g.cluster, updateId=update["id"], nodegroupName=ng["nodegroupName"])[
        "update"
    ]
    check(
        after["status"] == "DEGRADED"
        and after["health"]["issues"][0]["code"] == "NodeCreationFailure"
        and final["status"] == "Failed"
        and final["errors"][0]["errorCode"] == "NodeCreationFailure",
        "version update to bad Bottlerocket user data -> DEGRADED, update Failed",
    )

    # 3a EKS UG capacity-blocks-mng: upgrade a CAPACITY_BLOCK group at desired size 0 only.
    cb = g.create(
        [public], capacityType="CAPACITY_BLOCK", scalingConfig={"minSize": 0, "maxSize": 2, "desiredSize": 1}
    )
    code, status, _ = error(
        c.eks.update_nodegroup_version, clusterName=g.cluster, nodegroupName=cb["nodegroupName"]
    )
    check(
        (code, status) == ("InvalidRequestException", 400),
        "UpdateNodegroupVersion CAPACITY_BLOCK desiredSize 1 -> InvalidRequestException",
    )
    c.eks.update_nodegroup_config(
        clusterName=g.cluster,
        nodegroupName=cb["nodegroupName"],
        scalingConfig={"minSize": 0, "maxSize": 2, "desiredSize": 0},
    )
    g.settle(cb["nodegroupName"], "UPDATING")
    check(
        error(c.eks.update_nodegroup_version, clusterName=g.cluster, nodegroupName=cb["nodegroupName"])[0]
        is None,
        "... and goes through at desired size 0",
    )

    # DNS: private endpoint in a VPC without DNS hostnames (EKS UG cluster-endpoint).
    p = NodeGroups(c, private_endpoint=True, dns=False)
    subnet, _ = p.subnet(public=True, route="igw")
    check(
        failed(p.create([subnet]), "enableDnsHostnames"),
        "private endpoint, VPC without DNS hostnames -> CREATE_FAILED",
    )
    c.ec2.modify_vpc_attribute(VpcId=p.net["vpc"], EnableDnsHostnames={"Value": True})
    check(p.create([subnet])["status"] == "ACTIVE", "... ACTIVE once the VPC has DNS hostnames")


# --- 3d, 3e: image-cache builder on the wrong variant, instance profile propagation --------------


def builders(c: Clients) -> None:
    http(c.endpoint, "POST", "/_gpustack/ssm/timing?online_ms=100")
    net = vpc(c)
    role = f"strict-{uuid.uuid4().hex[:6]}"
    c.iam.create_role(
        RoleName=role, AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []})
    )
    c.iam.create_instance_profile(InstanceProfileName=role)
    c.iam.add_role_to_instance_profile(InstanceProfileName=role, RoleName=role)
    nvidia = c.ssm.get_parameter(Name="/aws/service/bottlerocket/aws-k8s-1.31-nvidia/x86_64/latest/image_id")[
        "Parameter"
    ]["Value"]
    plain = c.ssm.get_parameter(Name="/aws/service/bottlerocket/aws-k8s-1.31/x86_64/latest/image_id")[
        "Parameter"
    ]["Value"]

    def launch(image: str, instance_type: str, profile: dict[str, str]) -> str:
        return c.ec2.run_instances(
            ImageId=image,
            InstanceType=instance_type,
            MinCount=1,
            MaxCount=1,
            SubnetId=net["subnets"][0],
            IamInstanceProfile=profile,
        )["Instances"][0]["InstanceId"]

    # 3e: a profile created moments ago fails RunInstances once (karpenter-provider-aws#5018).
    code, status, message = error(
        c.ec2.run_instances,
        ImageId=plain,
        InstanceType="m6i.large",
        MinCount=1,
        MaxCount=1,
        IamInstanceProfile={"Name": role},
    )
    check(
        (code, status, message)
        == (
            "InvalidParameterValue",
            400,
            f"Value ({role}) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name",
        ),
        "RunInstances with a new instance profile -> InvalidParameterValue once",
    )
    plain_id = launch(plain, "m6i.large", {"Name": role})
    check(plain_id.startswith("i-"), "... and the retry launches")
    arn = c.iam.get_instance_profile(InstanceProfileName=role)["InstanceProfile"]["Arn"]
    check(launch(nvidia, "m6i.large", {"Arn": arn}).startswith("i-"), "... once per profile (by ARN too)")
    cpu_nvidia = c.ec2.describe_instances(Filters=[{"Name": "image-id", "Values": [nvidia]}])["Reservations"][
        0
    ]["Instances"][0]["InstanceId"]
    gpu_nvidia = launch(nvidia, "g5.xlarge", {"Name": role})
    other = f"strict-{uuid.uuid4().hex[:6]}"
    c.iam.create_instance_profile(InstanceProfileName=other)
    check(
        http(c.endpoint, "POST", "/_gpustack/iam-propagation?seconds=0")["seconds"] == 0.0,
        "propagation control endpoint",
    )
    check(launch(plain, "m6i.large", {"Name": other}).startswith("i-"), "seconds=0: no propagation failure")
    http(c.endpoint, "POST", "/_gpustack/iam-propagation?seconds=3")

    # 3d: NVIDIA variant without an NVIDIA GPU never comes Online (bottlerocket#4218).
    time.sleep(0.5)

    def online(instance: str) -> bool:
        info = c.ssm.describe_instance_information(Filters=[{"Key": "InstanceIds", "Values": [instance]}])
        return [i["PingStatus"] for i in info["InstanceInformationList"]] == ["Online"]

    check(online(plain_id), "standard variant on m6i.large -> Online")
    check(online(gpu_nvidia), "NVIDIA variant on g5.xlarge (NVIDIA A10G) -> Online")
    check(not online(cpu_nvidia), "NVIDIA variant on m6i.large (no GPU) never Online")


# --- 3g-j: capacity, quotas, catalog -------------------------------------------------------------


def capacity(c: Clients) -> None:
    ec2 = c.ec2
    cr = ec2.create_capacity_reservation(
        InstanceType="p5.48xlarge",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=f"{REGION}a",
        InstanceCount=2,
    )["CapacityReservation"]["CapacityReservationId"]
    used = http(c.endpoint, "POST", f"/_gpustack/capacity/used?id={cr}&count=1")
    check(used == {"id": cr, "used": 1, "total": 2}, "capacity used control endpoint")
    got = ec2.describe_capacity_reservations(CapacityReservationIds=[cr])["CapacityReservations"][0]
    check(got["AvailableInstanceCount"] == 1, "AvailableInstanceCount = total - used")
    # EC2 UG capacity-reservations-modify: eligibility changes need an idle reservation.
    check(
        error(ec2.modify_capacity_reservation, CapacityReservationId=cr, InstanceMatchCriteria="targeted")[0]
        == "IncorrectState",
        "ModifyCapacityReservation InstanceMatchCriteria with a running instance -> IncorrectState",
    )
    check(
        error(ec2.modify_capacity_reservation, CapacityReservationId=cr, InstanceCount=3)[0] is None,
        "... other changes still go",
    )
    http(c.endpoint, "POST", f"/_gpustack/capacity/used?id={cr}&count=0")
    check(
        error(ec2.modify_capacity_reservation, CapacityReservationId=cr, InstanceMatchCriteria="targeted")[0]
        is None,
        "... and the eligibility once idle",
    )
    # The window control (a test's stand-in for time passing): state follows the dates.
    moved = http(c.endpoint, "POST", f"/_gpustack/capacity/window?id={cr}&start=2020-01-01T11:30:00Z&end=2099-01-01T11:30:00Z")
    got = ec2.describe_capacity_reservations(CapacityReservationIds=[cr])["CapacityReservations"][0]
    check(
        moved == {"id": cr, "state": "active"} and got["EndDate"].year == 2099 and got["EndDateType"] == "limited",
        "capacity window control moves StartDate/EndDate",
    )
    http(c.endpoint, "POST", f"/_gpustack/capacity/window?id={cr}&start=2020-01-01T00:00:00Z&end=2020-01-02T00:00:00Z")
    got = ec2.describe_capacity_reservations(CapacityReservationIds=[cr])["CapacityReservations"][0]
    check(got["State"] == "expired", "... a window in the past is expired")
    http(c.endpoint, "POST", f"/_gpustack/capacity/window?id={cr}&start=2020-01-01T00:00:00Z&end=none")
    # 3h EC2 UG capacity-blocks-purchase: a shorter (cheaper) and a longer offering around the ask.
    offers = ec2.describe_capacity_block_offerings(
        InstanceType="p5.48xlarge", InstanceCount=3, CapacityDurationHours=48, MaxResults=1000
    )["CapacityBlockOfferings"]
    hours = {o["CapacityBlockDurationHours"] for o in offers}
    cheapest = min(offers, key=lambda o: float(o["UpfrontFee"]))
    check(
        hours == {45, 48, 51} and cheapest["CapacityBlockDurationHours"] < 48,
        "offerings 45/48/51 h; the cheapest is shorter than asked",
    )
    check(
        error(ec2.describe_capacity_block_offerings, InstanceCount=65, CapacityDurationHours=24)[0]
        == "InvalidParameterValue",
        "count 65 refused",
    )


def quotas(c: Clients) -> None:
    # 3i: the issue's codes exist with AWS default 0 and are settable.
    codes = ("L-DA6814F2", "L-C45F30BC", "L-4F9BB70B", "L-2C8F52B3", "L-2E30FD7D", "L-64569A79", "L-2C3B7624")
    codes += (
        "L-1945791B",
        "L-6E869C2A",
        "L-6B0D517C",
        "L-B5D1601B",
        "L-85EED4F7",
        "L-DB2E81BA",
        "L-3819A6DF",
    )
    for code in codes:
        default = c.sq.get_aws_default_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"]
        check(default == 0.0, f"quota {code}: AWS default 0")
    http(c.endpoint, "POST", "/_gpustack/quotas?code=L-2C3B7624&value=512")
    check(
        c.sq.get_service_quota(ServiceCode="ec2", QuotaCode="L-2C3B7624")["Quota"]["Value"] == 512.0,
        "Trn quota settable",
    )


def catalog(c: Clients) -> None:
    # 3j: botocore 1.44.5 NetworkCardInfo.InterfaceTypes (wire interfaceTypeSet; enum interface, efa,
    # efa-only, secondary). moto 5.2.5's catalog (generated from DescribeInstanceTypes) has them.
    types = {
        t["InstanceType"]: t["NetworkInfo"]
        for t in c.ec2.describe_instance_types(
            InstanceTypes=["p5.48xlarge", "p4d.24xlarge", "p6-b300.48xlarge"]
        )["InstanceTypes"]
    }

    def efa_cards(info: dict[str, Any]) -> list[int]:
        return [
            card["NetworkCardIndex"]
            for card in info["NetworkCards"]
            if "efa" in card.get("InterfaceTypes", [])
        ]

    p5, p4d, b300 = types["p5.48xlarge"], types["p4d.24xlarge"], types["p6-b300.48xlarge"]
    check(
        p5["MaximumNetworkCards"] == 32
        and len(efa_cards(p5)) == 32
        and p5["EfaInfo"]["MaximumEfaInterfaces"] == 32,
        "p5.48xlarge: 32 cards, all EFA",
    )
    check(
        p4d["MaximumNetworkCards"] == 4
        and len(efa_cards(p4d)) == 4
        and p4d["EfaInfo"]["MaximumEfaInterfaces"] == 4,
        "p4d.24xlarge: 4 EFA cards",
    )
    # p6-b300: card 0 ENA only, 16 EFA cards (a third-party note says so; moto's catalog agrees; UNVERIFIED by AWS docs).
    check(
        b300["MaximumNetworkCards"] == 17
        and b300["EfaInfo"]["MaximumEfaInterfaces"] == 16
        and b300["NetworkCards"][0]["InterfaceTypes"] == ["interface"]
        and efa_cards(b300) == list(range(1, 17)),
        "p6-b300.48xlarge: 17 cards, card 0 ENA only, 16 EFA",
    )
    everything = c.ec2.get_paginator("describe_instance_types").paginate()
    bad = [
        t["InstanceType"]
        for page in everything
        for t in page["InstanceTypes"]
        if (t.get("GpuInfo") or t["NetworkInfo"].get("EfaSupported"))
        and (
            len(t["NetworkInfo"].get("NetworkCards", [])) != t["NetworkInfo"].get("MaximumNetworkCards")
            or any("InterfaceTypes" not in card for card in t["NetworkInfo"]["NetworkCards"])
        )
    ]
    check(bad == [], f"every GPU/EFA type has NetworkCards with InterfaceTypes ({bad[:5]})")


def self_managed(c: Clients) -> None:
    """autoscaling_nodes.py: an Auto Scaling group's nodes join only with the cluster security
    group (EKS UG sec-group-reqs); a young instance profile fails CreateAutoScalingGroup once
    (terraform-provider-aws#5633)."""
    http(c.endpoint, "POST", "/_gpustack/eks?cluster_create_ms=50")
    g = NodeGroups(c, accessConfig={"authenticationMode": "API"})
    subnet, _ = g.subnet(public=True, route="igw")
    cluster = c.eks.describe_cluster(name=g.cluster)["cluster"]
    cluster_sg = cluster["resourcesVpcConfig"]["clusterSecurityGroupId"]
    node_config = (
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="//"\n\n--//\n'
        "Content-Type: application/node.eks.aws\n\n---\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\n"
        f"spec:\n  cluster:\n    name: {g.cluster}\n\n--//--\n"
    )
    ud = base64.b64encode(node_config.encode()).decode()
    http(c.endpoint, "POST", "/_gpustack/iam-propagation?seconds=0")
    node_role = c.iam.create_role(
        RoleName=f"{g.cluster}-node", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": []})
    )["Role"]["Arn"]
    c.iam.create_instance_profile(InstanceProfileName=f"{g.cluster}-node")
    c.iam.add_role_to_instance_profile(InstanceProfileName=f"{g.cluster}-node", RoleName=f"{g.cluster}-node")

    def group(name: str, **data: Any) -> dict[str, Any]:
        data.setdefault("IamInstanceProfile", {"Name": f"{g.cluster}-node"})
        template = g.template(ImageId="ami-12c6146b", InstanceType="m6i.large", UserData=ud, **data)
        c.asg.create_auto_scaling_group(
            AutoScalingGroupName=name,
            MinSize=0,
            MaxSize=1,
            DesiredCapacity=0,
            VPCZoneIdentifier=subnet,
            LaunchTemplate={"LaunchTemplateId": template},
        )
        return http(c.endpoint, "GET", f"/_gpustack/autoscaling/nodes?name={name}")

    bare = group(f"{g.cluster}-bare")
    check(
        not bare["joined"] and "cannot reach the API server" in " ".join(bare["reasons"]),
        "ASG nodes in the VPC's default security group do not join (cluster SG admits only itself)",
    )
    unentered = group(f"{g.cluster}-unentered", SecurityGroupIds=[cluster_sg])
    check(
        not unentered["joined"] and "EC2_LINUX" in " ".join(unentered["reasons"]),
        "ASG nodes whose role has no EC2_LINUX access entry do not register (EKS UG creating-access-entries)",
    )
    c.eks.create_access_entry(clusterName=g.cluster, principalArn=node_role, type="EC2_LINUX")
    again = http(c.endpoint, "GET", f"/_gpustack/autoscaling/nodes?name={g.cluster}-unentered")
    check(again["joined"], f"... and register once the entry exists (kubelet retries) ({again})")
    joined = group(f"{g.cluster}-sg", SecurityGroupIds=[cluster_sg])
    check(joined["joined"], f"ASG nodes carrying the cluster security group join ({joined})")
    # A node security group the cluster SG admits on 443 is enough too.
    node_sg = c.ec2.create_security_group(GroupName=f"{g.cluster}-n", Description="n", VpcId=g.net["vpc"])["GroupId"]
    c.ec2.authorize_security_group_ingress(
        GroupId=cluster_sg,
        IpPermissions=[{"IpProtocol": "tcp", "FromPort": 443, "ToPort": 443, "UserIdGroupPairs": [{"GroupId": node_sg}]}],
    )
    admitted = group(f"{g.cluster}-admitted", SecurityGroupIds=[node_sg])
    check(admitted["joined"], f"ASG nodes in a group the cluster SG admits on 443 join ({admitted})")
    # Instance profile propagation: refused once with Auto Scaling's wording, then accepted.
    http(c.endpoint, "POST", "/_gpustack/iam-propagation?seconds=600")
    profile = f"{g.cluster}-p"
    c.iam.create_instance_profile(InstanceProfileName=profile)
    template = g.template(ImageId="ami-12c6146b", InstanceType="m6i.large", IamInstanceProfile={"Name": profile})
    args = dict(
        AutoScalingGroupName=f"{g.cluster}-young",
        MinSize=0,
        MaxSize=1,
        VPCZoneIdentifier=subnet,
        LaunchTemplate={"LaunchTemplateId": template},
    )
    code, _, message = error(c.asg.create_auto_scaling_group, **args)
    check(
        code == "ValidationError" and "Invalid IAM Instance Profile name" in message,
        f"CreateAutoScalingGroup with a young instance profile -> ValidationError once ({code}: {message})",
    )
    check(error(c.asg.create_auto_scaling_group, **args)[0] is None, "... and the retry goes through")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True, help="e.g. http://127.0.0.1:PORT")
    args = parser.parse_args()
    c = Clients(args.endpoint)
    try:
        filters(c)
        security_group_rules(c)
        vpc_blocks(c)
        parameters(c)
        request_log_region(c)
        egress_kinds(c)
        node_groups(c)
        builders(c)
        capacity(c)
        quotas(c)
        catalog(c)
        self_managed(c)
    except Exception as e:  # noqa: BLE001
        print(f"FAIL {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        http(args.endpoint, "POST", "/moto-api/reset")
    print("selftest_strict: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
