//! What a launch template version holds (`RequestLaunchTemplateData`): IMDSv2, the instance
//! type, the network (EFA interfaces or plain security groups), the root volume `/dev/xvda`
//! and the data volume `/dev/xvdb`, the reservation and market, the placement group, the
//! user data (Bottlerocket TOML or AL2023 nodeadm MIME) and the tags of what it launches.
//! A self-managed group's template (`cluster` set) also gets the AMI, the instance profile
//! and the cluster's join settings in its user data, read from EKS at apply.

use aws_sdk_ec2::types::{
    CapacityReservationTarget, InstanceType, LaunchTemplateBlockDeviceMappingRequest,
    LaunchTemplateCapacityReservationSpecificationRequest, LaunchTemplateEbsBlockDeviceRequest,
    LaunchTemplateHttpTokensState, LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMarketOptionsRequest, LaunchTemplateInstanceMetadataEndpointState,
    LaunchTemplateInstanceMetadataOptionsRequest, LaunchTemplatePlacementRequest,
    LaunchTemplateTagSpecificationRequest, MarketType, RequestLaunchTemplateData, ResourceType, Tag, VolumeType,
};

use super::{network, nodeadm, userdata};
use crate::aws::{AwsError, Ctx, Service, ami, tags};
use crate::resources::{Result, i32_of, str_attr};
use crate::value::{Attrs, Value};

/// The template data for the inputs `i`.
pub async fn template_data(ctx: &Ctx, i: &Attrs) -> Result<RequestLaunchTemplateData> {
    let mut d = RequestLaunchTemplateData::builder().metadata_options(
        LaunchTemplateInstanceMetadataOptionsRequest::builder()
            .http_tokens(LaunchTemplateHttpTokensState::Required)
            .http_put_response_hop_limit(i32_of(i.get("imds_hop_limit").and_then(Value::as_int).unwrap_or(1)))
            .http_endpoint(LaunchTemplateInstanceMetadataEndpointState::Enabled)
            .build(),
    );
    let instance_type = str_attr(i, "instance_type");
    if !instance_type.is_empty() {
        d = d.instance_type(InstanceType::from(instance_type));
    }
    let cluster = str_attr(i, "cluster");
    let joined = if cluster.is_empty() { None } else { Some(self_managed(ctx, i, cluster).await?) };
    let mut groups = strings(i.get("security_groups"));
    // A self-managed node must carry the cluster security group (or one it admits): that group
    // admits inbound traffic only from itself and the control plane's ENIs carry it (EKS UG
    // sec-group-reqs, "Default cluster security group": Inbound All/All/Self), and EKS attaches
    // it only to managed groups' nodes. Without it the instances land in the VPC's default group
    // and never reach the API server (nor the control plane their kubelet).
    if let Some(sg) = joined.as_ref().map(|j| j.cluster_security_group.clone()).filter(|g| !g.is_empty())
        && !groups.contains(&sg)
    {
        groups.push(sg);
    }
    match i.get("efa") {
        Some(Value::Table(efa)) => {
            let mut all = strings(efa.get("security_groups"));
            all.extend(groups.iter().cloned());
            all.sort();
            all.dedup();
            d = d.set_network_interfaces(Some(network::efa_interfaces(ctx, instance_type, efa, &all).await?));
        }
        _ if !groups.is_empty() => d = d.set_security_group_ids(Some(groups)),
        _ => {}
    }
    if let Some(Value::Table(v)) = i.get("root_volume") {
        d = d.block_device_mappings(root_volume(v));
    }
    if let Some(Value::Table(v)) = i.get("data_volume") {
        d = d.block_device_mappings(data_volume(v));
    }
    let cr = str_attr(i, "capacity_reservation");
    if !cr.is_empty() {
        d = d.capacity_reservation_specification(
            LaunchTemplateCapacityReservationSpecificationRequest::builder()
                .capacity_reservation_target(CapacityReservationTarget::builder().capacity_reservation_id(cr).build())
                .build(),
        );
        if str_attr(i, "market") == "capacity-block" {
            d = d.instance_market_options(
                LaunchTemplateInstanceMarketOptionsRequest::builder().market_type(MarketType::CapacityBlock).build(),
            );
        }
    }
    let pg = str_attr(i, "placement_group");
    if !pg.is_empty() {
        d = d.placement(LaunchTemplatePlacementRequest::builder().group_name(pg).build());
    }
    if let Some(j) = &joined {
        d = d.image_id(&j.image_id).iam_instance_profile(
            LaunchTemplateIamInstanceProfileSpecificationRequest::builder()
                .name(str_attr(i, "instance_profile"))
                .build(),
        );
    }
    let ud = match &joined {
        Some(j) => Some(j.user_data.clone()),
        None => i.get("user_data").and_then(Value::as_str).filter(|u| !u.is_empty()).map(str::to_string),
    };
    if let Some(ud) = ud {
        d = d.user_data(aws_smithy_types::base64::encode(ud));
    }
    // Instances and their volumes carry the stack's tags (not the address: they are EKS's).
    let mut t: Vec<Tag> = vec![Tag::builder().key(tags::STACK).value(ctx.stack.clone()).build()];
    t.extend(tags::user_tags(i).into_iter().map(|(k, v)| Tag::builder().key(k).value(v).build()));
    for rt in [ResourceType::Instance, ResourceType::Volume, ResourceType::NetworkInterface] {
        d = d.tag_specifications(
            LaunchTemplateTagSpecificationRequest::builder().resource_type(rt).set_tags(Some(t.clone())).build(),
        );
    }
    Ok(d.build())
}

/// What a self-managed node needs that EKS gives a managed one: the AMI and user data that
/// joins the cluster.
struct Joined {
    image_id: String,
    user_data: String,
    /// DescribeCluster `resourcesVpcConfig.clusterSecurityGroupId`.
    cluster_security_group: String,
}

/// Reads the cluster (endpoint, CA, service CIDR, version: EKS `DescribeCluster`) and the AMI
/// `ami_type` names for that version, and renders user data that joins it.
async fn self_managed(ctx: &Ctx, i: &Attrs, cluster: &str) -> Result<Joined> {
    let out = ctx.call(Service::Eks, "DescribeCluster", ctx.eks.describe_cluster().name(cluster).send()).await?;
    let c = out.cluster();
    let version = c.and_then(|c| c.version()).unwrap_or_default();
    let network = c.and_then(|c| c.kubernetes_network_config());
    // An IPv6 cluster's nodes infer the DNS address from its IPv6 service CIDR.
    let ipv6 = network.and_then(|n| n.ip_family()).is_some_and(|f| f.as_str() == "ipv6");
    let cidr = network
        .and_then(|n| if ipv6 { n.service_ipv6_cidr() } else { n.service_ipv4_cidr() })
        // EKS's default when the cluster names none (EKS API reference,
        // KubernetesNetworkConfigRequest.serviceIpv4Cidr: 10.100.0.0/16 or 172.20.0.0/16).
        .unwrap_or("10.100.0.0/16");
    let join = nodeadm::Join {
        name: cluster.to_string(),
        endpoint: c.and_then(|c| c.endpoint()).unwrap_or_default().to_string(),
        certificate_authority: c
            .and_then(|c| c.certificate_authority())
            .and_then(|a| a.data())
            .unwrap_or_default()
            .to_string(),
        service_cidr: cidr.to_string(),
    };
    let ami_type = str_attr(i, "ami_type");
    let image_id = match str_attr(i, "ami_id") {
        "" => ami::eks_node(ctx, ami_type, version).await?,
        id => id.to_string(),
    };
    let user_data = if nodeadm::is_al2023(i) {
        nodeadm::render(i, Some(&join)).unwrap_or_default()
    } else {
        userdata::render_joined(i, &join).map_err(|key| AwsError {
            operation: "CreateLaunchTemplate",
            code: Some("InvalidUserData".into()),
            detail: format!("bottlerocket_settings sets `{key}`, which gpustack writes to join the cluster"),
        })?
    };
    let cluster_security_group = c
        .and_then(|c| c.resources_vpc_config())
        .and_then(|v| v.cluster_security_group_id())
        .unwrap_or_default()
        .to_string();
    Ok(Joined { image_id, user_data, cluster_security_group })
}

/// `/dev/xvda`, the root device of the EKS AL2023 and Bottlerocket AMIs, from `root_volume`.
fn root_volume(v: &Attrs) -> LaunchTemplateBlockDeviceMappingRequest {
    let mut ebs = LaunchTemplateEbsBlockDeviceRequest::builder()
        .volume_type(VolumeType::from(v.get("type").and_then(Value::as_str).unwrap_or("gp3")))
        .encrypted(v.get("encrypted").and_then(Value::as_bool).unwrap_or(true))
        .delete_on_termination(true);
    if let Some(n) = v.get("size_gib").and_then(Value::as_int) {
        ebs = ebs.volume_size(i32_of(n));
    }
    if let Some(n) = v.get("iops").and_then(Value::as_int) {
        ebs = ebs.iops(i32_of(n));
    }
    if let Some(n) = v.get("throughput").and_then(Value::as_int) {
        ebs = ebs.throughput(i32_of(n));
    }
    if let Some(k) = v.get("kms_key").and_then(Value::as_str) {
        ebs = ebs.kms_key_id(k);
    }
    LaunchTemplateBlockDeviceMappingRequest::builder().device_name("/dev/xvda").ebs(ebs.build()).build()
}

/// `/dev/xvdb`, encrypted gp3, from the `data_volume` table (optionally from a snapshot,
/// hydrated at `initialization_rate_mibps`).
fn data_volume(v: &Attrs) -> LaunchTemplateBlockDeviceMappingRequest {
    let mut ebs = LaunchTemplateEbsBlockDeviceRequest::builder()
        .volume_type(VolumeType::Gp3)
        .encrypted(true)
        .delete_on_termination(true);
    if let Some(n) = v.get("size_gib").and_then(Value::as_int) {
        ebs = ebs.volume_size(i32_of(n));
    }
    if let Some(snap) = v.get("snapshot").and_then(Value::as_str) {
        ebs = ebs.snapshot_id(snap);
        // Only with a snapshot: "supported only for volumes created from snapshots" (EC2 API
        // reference, LaunchTemplateEbsBlockDeviceRequest.VolumeInitializationRate).
        if let Some(rate) = v.get("initialization_rate_mibps").and_then(Value::as_int) {
            ebs = ebs.volume_initialization_rate(i32_of(rate));
        }
    }
    if let Some(n) = v.get("iops").and_then(Value::as_int) {
        ebs = ebs.iops(i32_of(n));
    }
    if let Some(n) = v.get("throughput").and_then(Value::as_int) {
        ebs = ebs.throughput(i32_of(n));
    }
    LaunchTemplateBlockDeviceMappingRequest::builder().device_name("/dev/xvdb").ebs(ebs.build()).build()
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_list).unwrap_or_default().iter().filter_map(|x| x.as_str().map(str::to_string)).collect()
}
