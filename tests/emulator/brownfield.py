"""Brownfield clusters for `gpustack import generate` tests: built with boto3 directly, the way
eksctl and terraform-aws-eks lay them out, never through gpustack.

    python brownfield.py --endpoint http://127.0.0.1:PORT --scenario eksctl|terraform --cluster NAME

Prints one JSON object: the ids of everything made, by kind, plus ``outside`` (objects the
generated stack must NOT own: an operator's role named only by an access entry). Waits for the
cluster, node groups and add-ons to be ACTIVE (the emulator's timers are set to 0 first).

Layouts (sources: eksctl's VPC, `eksctl.io/usage/vpc-networking` "by default eksctl creates a
dedicated VPC ... 3 public and 3 private subnets ... a single NAT gateway"; terraform-aws-modules
vpc `single_nat_gateway`, eks `eks_managed_node_groups` with a launch template it makes):

* eksctl: 192.168.0.0/16 with DNS on, an internet gateway and one public route table for the
  three public subnets (MapPublicIpOnLaunch), one NAT gateway in the first public subnet, one
  private route table per private subnet with 0.0.0.0/0 through it; a control-plane security
  group passed to the cluster; cluster role and node role; the cluster on all six subnets with
  access entries on (API_AND_CONFIG_MAP); an ODCR (targeted) in the first zone; a GPU managed
  node group on a launch template that targets the ODCR with AL2023 NodeConfig MIME user data,
  labels and a taint; add-ons vpc-cni, coredns, kube-proxy, eks-pod-identity-agent; an access
  entry for an operator role (with the cluster-admin policy); a Pod Identity association.
* terraform: 10.0.0.0/16 with two public and two private subnets (public ones without
  MapPublicIpOnLaunch) and a single NAT gateway behind ONE shared private route table
  (``terraform-per-az``: a NAT gateway and private table per zone); the
  IAM OIDC provider of the cluster's issuer; a Capacity Block bought in the first zone; a
  Bottlerocket NVIDIA node group (CAPACITY_BLOCK) on a launch template that targets the block
  with Bottlerocket TOML user data; add-ons vpc-cni, coredns, kube-proxy.
"""

from __future__ import annotations

import argparse
import base64
import json
import time
import urllib.request
from datetime import datetime, timedelta, timezone

import boto3

REGION = "us-west-2"
ACCOUNT = "123456789012"


def clients(endpoint: str):
    kw = dict(
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    return boto3.client("ec2", **kw), boto3.client("iam", **kw), boto3.client("eks", **kw)


def tags(kind: str, **kv: str) -> list[dict]:
    return [{"ResourceType": kind, "Tags": [{"Key": k, "Value": v} for k, v in kv.items()]}]


def role(iam, name: str, service: str, policies: list[str], path: str = "/") -> str:
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}],
    }
    if service == "pods.eks.amazonaws.com":
        trust["Statement"][0]["Action"] = ["sts:AssumeRole", "sts:TagSession"]
    arn = iam.create_role(RoleName=name, Path=path, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
    for p in policies:
        iam.attach_role_policy(RoleName=name, PolicyArn=f"arn:aws:iam::aws:policy/{p}")
    return arn


def network(
    ec2, name: str, cidr: str, public: list[str], private: list[str], zones: list[str], layout: str = "eksctl"
) -> dict:
    """``layout``: "eksctl" (public subnets MapPublicIpOnLaunch, one NAT, one private table per
    private subnet); "single" (terraform-aws-modules/vpc ``single_nat_gateway = true``: ONE
    private table ``{name}-private`` shared by every private subnet, "There are as many routing
    tables as the number of NAT gateways", vpc main.tf "Private routes"); "per_az"
    (``one_nat_gateway_per_az = true``: a NAT and a private table per zone). terraform-aws-modules
    public subnets leave ``map_public_ip_on_launch`` at its default ``false`` (vpc variables.tf)."""
    vpc = ec2.create_vpc(CidrBlock=cidr, TagSpecifications=tags("vpc", Name=f"{name}-vpc"))["Vpc"]["VpcId"]
    ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsSupport={"Value": True})
    ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": True})
    igw = ec2.create_internet_gateway(TagSpecifications=tags("internet-gateway", Name=f"{name}-igw"))
    igw = igw["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=igw, VpcId=vpc)
    public_rt = ec2.create_route_table(VpcId=vpc, TagSpecifications=tags("route-table", Name=f"{name}-public"))
    public_rt = public_rt["RouteTable"]["RouteTableId"]
    ec2.create_route(RouteTableId=public_rt, DestinationCidrBlock="0.0.0.0/0", GatewayId=igw)
    out = {"vpc": vpc, "igw": igw, "public": [], "private": [], "route_tables": [public_rt]}
    for i, block in enumerate(public):
        s = ec2.create_subnet(
            VpcId=vpc,
            CidrBlock=block,
            AvailabilityZone=zones[i],
            TagSpecifications=tags("subnet", Name=f"{name}-public-{zones[i][-1]}", **{"kubernetes.io/role/elb": "1"}),
        )["Subnet"]["SubnetId"]
        if layout == "eksctl":
            ec2.modify_subnet_attribute(SubnetId=s, MapPublicIpOnLaunch={"Value": True})
        ec2.associate_route_table(RouteTableId=public_rt, SubnetId=s)
        out["public"].append(s)
    nats = []
    for i in range(len(public) if layout == "per_az" else 1):
        suffix = f"-{zones[i]}" if layout != "eksctl" else ""
        eip = ec2.allocate_address(Domain="vpc", TagSpecifications=tags("elastic-ip", Name=f"{name}{suffix}-nat"))
        nats.append(
            ec2.create_nat_gateway(
                SubnetId=out["public"][i],
                AllocationId=eip["AllocationId"],
                TagSpecifications=tags("natgateway", Name=f"{name}{suffix}-nat"),
            )["NatGateway"]["NatGatewayId"]
        )
    out["nat"] = nats
    shared = None
    for i, block in enumerate(private):
        s = ec2.create_subnet(
            VpcId=vpc,
            CidrBlock=block,
            AvailabilityZone=zones[i],
            TagSpecifications=tags(
                "subnet", Name=f"{name}-private-{zones[i][-1]}", **{"kubernetes.io/role/internal-elb": "1"}
            ),
        )["Subnet"]["SubnetId"]
        if layout == "single" and shared is not None:
            rt = shared
        else:
            rt_name = f"{name}-private" if layout == "single" else f"{name}-private-{zones[i]}"
            rt = ec2.create_route_table(VpcId=vpc, TagSpecifications=tags("route-table", Name=rt_name))
            rt = rt["RouteTable"]["RouteTableId"]
            nat = nats[i] if layout == "per_az" else nats[0]
            ec2.create_route(RouteTableId=rt, DestinationCidrBlock="0.0.0.0/0", NatGatewayId=nat)
            out["route_tables"].append(rt)
            shared = rt
        ec2.associate_route_table(RouteTableId=rt, SubnetId=s)
        out["private"].append(s)
    return out


def wait(eks, what: str, check) -> None:
    for _ in range(200):
        if check() == "ACTIVE":
            return
        time.sleep(0.05)
    raise SystemExit(f"{what} never became ACTIVE")


def mime(nodeconfig: str) -> str:
    return (
        'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="BOUNDARY"\n\n'
        "--BOUNDARY\nContent-Type: application/node.eks.aws\n\n" + nodeconfig + "\n--BOUNDARY--\n"
    )


def cluster(eks, name: str, role_arn: str, subnets: list[str], sgs: list[str]) -> dict:
    c = eks.create_cluster(
        name=name,
        version="1.33",
        roleArn=role_arn,
        resourcesVpcConfig={"subnetIds": subnets, "securityGroupIds": sgs},
        accessConfig={"authenticationMode": "API_AND_CONFIG_MAP", "bootstrapClusterCreatorAdminPermissions": False},
        tags={"owner": "platform"},
    )["cluster"]
    wait(eks, name, lambda: eks.describe_cluster(name=name)["cluster"]["status"])
    return eks.describe_cluster(name=name)["cluster"]


def addons(eks, name: str, names: list[str]) -> None:
    for a in names:
        eks.create_addon(clusterName=name, addonName=a)
    for a in names:
        wait(eks, a, lambda a=a: eks.describe_addon(clusterName=name, addonName=a)["addon"]["status"])


def eksctl(ec2, iam, eks, name: str) -> dict:
    zones = ["us-west-2a", "us-west-2b", "us-west-2c"]
    net = network(
        ec2,
        name,
        "192.168.0.0/16",
        ["192.168.0.0/19", "192.168.32.0/19", "192.168.64.0/19"],
        ["192.168.96.0/19", "192.168.128.0/19", "192.168.160.0/19"],
        zones,
    )
    cp_sg = ec2.create_security_group(
        GroupName=f"eksctl-{name}-cluster-ControlPlaneSecurityGroup",
        Description="Communication between the control plane and worker nodegroups",
        VpcId=net["vpc"],
        TagSpecifications=tags("security-group", Name=f"eksctl-{name}-cluster/ControlPlaneSecurityGroup"),
    )["GroupId"]
    cluster_role = role(iam, f"eksctl-{name}-cluster-ServiceRole", "eks.amazonaws.com", ["AmazonEKSClusterPolicy"])
    node_role = role(
        iam,
        f"eksctl-{name}-nodegroup-gpu-NodeInstanceRole",
        "ec2.amazonaws.com",
        ["AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryReadOnly", "AmazonEKS_CNI_Policy"],
    )
    c = cluster(eks, name, cluster_role, net["public"] + net["private"], [cp_sg])
    odcr = ec2.create_capacity_reservation(
        InstanceType="g6e.2xlarge",
        InstancePlatform="Linux/UNIX",
        AvailabilityZone=zones[0],
        InstanceCount=2,
        InstanceMatchCriteria="targeted",
        EndDateType="unlimited",
        TagSpecifications=tags("capacity-reservation", Name=f"{name}-gpu-odcr"),
    )["CapacityReservation"]["CapacityReservationId"]
    nodeconfig = (
        "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n"
        "      maxPods: 58\n"
    )
    lt = ec2.create_launch_template(
        LaunchTemplateName=f"eksctl-{name}-nodegroup-gpu",
        LaunchTemplateData={
            "InstanceType": "g6e.2xlarge",
            "CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": odcr}},
            "UserData": base64.b64encode(mime(nodeconfig).encode()).decode(),
            "MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 2},
        },
    )["LaunchTemplate"]["LaunchTemplateId"]
    eks.create_nodegroup(
        clusterName=name,
        nodegroupName="gpu",
        nodeRole=node_role,
        subnets=[net["private"][0]],
        launchTemplate={"id": lt},
        amiType="AL2023_x86_64_NVIDIA",
        scalingConfig={"minSize": 1, "desiredSize": 1, "maxSize": 2},
        labels={"workload": "gpu"},
        taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}],
    )
    wait(eks, "gpu", lambda: eks.describe_nodegroup(clusterName=name, nodegroupName="gpu")["nodegroup"]["status"])
    addons(eks, name, ["vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent"])
    # EKS (and the emulator) made an EC2_LINUX access entry for the node role with the node
    # group (EKS UG access-entries): import generate leaves that one out.
    entries = eks.list_access_entries(clusterName=name)["accessEntries"]
    assert node_role in entries, entries
    ops = role(iam, f"{name}-ops", "ec2.amazonaws.com", [])
    eks.create_access_entry(clusterName=name, principalArn=ops, type="STANDARD")
    eks.associate_access_policy(
        clusterName=name,
        principalArn=ops,
        policyArn="arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy",
        accessScope={"type": "cluster"},
    )
    reader = role(iam, f"{name}-s3-reader", "pods.eks.amazonaws.com", ["AmazonS3ReadOnlyAccess"])
    assoc = eks.create_pod_identity_association(
        clusterName=name, namespace="ml", serviceAccount="s3-reader", roleArn=reader
    )["association"]["associationId"]
    return {
        **net,
        "cluster": name,
        "cluster_sg": c["resourcesVpcConfig"]["clusterSecurityGroupId"],
        "security_groups": [cp_sg],
        "roles": [cluster_role.split("/")[-1], node_role.split("/")[-1], reader.split("/")[-1]],
        "capacity_reservations": [odcr],
        "launch_templates": [lt],
        "nodegroups": ["gpu"],
        "pod_identity": [assoc],
        "outside": {"roles": [ops.split("/")[-1]]},
    }


def terraform(ec2, iam, eks, name: str, layout: str = "single") -> dict:
    zones = ["us-west-2a", "us-west-2b"]
    net = network(
        ec2, name, "10.0.0.0/16", ["10.0.0.0/20", "10.0.16.0/20"], ["10.0.64.0/18", "10.0.128.0/18"], zones, layout
    )
    cluster_role = role(iam, f"{name}-cluster-20260101", "eks.amazonaws.com", ["AmazonEKSClusterPolicy"])
    node_role = role(
        iam,
        f"gpu-eks-node-group-20260101",
        "ec2.amazonaws.com",
        ["AmazonEKSWorkerNodePolicy", "AmazonEC2ContainerRegistryReadOnly", "AmazonEKS_CNI_Policy"],
    )
    c = cluster(eks, name, cluster_role, net["private"], [])
    issuer = c["identity"]["oidc"]["issuer"]
    provider = iam.create_open_id_connect_provider(
        Url=issuer, ClientIDList=["sts.amazonaws.com"], ThumbprintList=["9e99a48a9960b14926bb7f3b02e22da2b0ab7280"]
    )["OpenIDConnectProviderArn"]
    start = datetime.now(timezone.utc) + timedelta(days=2)
    offers = ec2.describe_capacity_block_offerings(
        InstanceType="p5.48xlarge",
        InstanceCount=1,
        CapacityDurationHours=24,
        StartDateRange=start,
        EndDateRange=start + timedelta(days=3),
    )["CapacityBlockOfferings"]
    offer = next(o for o in offers if o["AvailabilityZone"] == zones[0] and o["CapacityBlockDurationHours"] == 24)
    block = ec2.purchase_capacity_block(
        CapacityBlockOfferingId=offer["CapacityBlockOfferingId"],
        InstancePlatform="Linux/UNIX",
        TagSpecifications=tags("capacity-reservation", Name=f"{name}-p5-block"),
    )["CapacityReservation"]["CapacityReservationId"]
    settings = (
        '[settings.kubernetes.node-labels]\n"nvidia.com/gpu.present" = "true"\n'
        '[settings.kubernetes.node-taints]\n"nvidia.com/gpu" = ["true:NoSchedule"]\n'
    )
    lt = ec2.create_launch_template(
        LaunchTemplateName=f"gpu-{name}",
        LaunchTemplateData={
            "InstanceType": "p5.48xlarge",
            "InstanceMarketOptions": {"MarketType": "capacity-block"},
            "CapacityReservationSpecification": {"CapacityReservationTarget": {"CapacityReservationId": block}},
            "UserData": base64.b64encode(settings.encode()).decode(),
            # terraform-aws-eks' eks-managed-node-group default metadata_options.
            "MetadataOptions": {"HttpEndpoint": "enabled", "HttpTokens": "required", "HttpPutResponseHopLimit": 2},
        },
        TagSpecifications=tags("launch-template", Name=f"gpu-{name}"),
    )["LaunchTemplate"]["LaunchTemplateId"]
    eks.create_nodegroup(
        clusterName=name,
        nodegroupName="gpu",
        nodeRole=node_role,
        subnets=[net["private"][0]],
        launchTemplate={"id": lt},
        amiType="BOTTLEROCKET_x86_64_NVIDIA",
        capacityType="CAPACITY_BLOCK",
        scalingConfig={"minSize": 0, "desiredSize": 0, "maxSize": 1},
        tags={"terraform-aws-modules": "eks"},
    )
    wait(eks, "gpu", lambda: eks.describe_nodegroup(clusterName=name, nodegroupName="gpu")["nodegroup"]["status"])
    addons(eks, name, ["vpc-cni", "coredns", "kube-proxy"])
    admin = role(iam, f"{name}-admin", "ec2.amazonaws.com", [])
    eks.create_access_entry(clusterName=name, principalArn=admin, type="STANDARD")
    return {
        **net,
        "cluster": name,
        "cluster_sg": c["resourcesVpcConfig"]["clusterSecurityGroupId"],
        "security_groups": [],
        "roles": [cluster_role.split("/")[-1], node_role.split("/")[-1]],
        "capacity_blocks": [block],
        "oidc_provider": provider,
        "launch_templates": [lt],
        "nodegroups": ["gpu"],
        "outside": {"roles": [admin.split("/")[-1]]},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--scenario", choices=["eksctl", "terraform", "terraform-per-az"], required=True)
    ap.add_argument("--cluster", required=True)
    a = ap.parse_args()
    req = urllib.request.Request(
        f"{a.endpoint}/_gpustack/eks?cluster_create_ms=0&nodegroup_create_ms=0&addon_create_ms=0", method="POST"
    )
    urllib.request.urlopen(req).read()
    ec2, iam, eks = clients(a.endpoint)
    if a.scenario == "eksctl":
        built = eksctl(ec2, iam, eks, a.cluster)
    else:
        built = terraform(ec2, iam, eks, a.cluster, "per_az" if a.scenario == "terraform-per-az" else "single")
    print(json.dumps(built))


if __name__ == "__main__":
    main()
