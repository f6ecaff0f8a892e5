//! `[import]` of a launch template (`lt-…`): its default version's data (EC2
//! `DescribeLaunchTemplateVersions`, `$Default`: the version gpustack makes the default on
//! every change, and the one its `version` output names) mapped back to the kind's inputs —
//! the inverse of `data::template_data` — and its user data read back by `parse`.
//!
//! What the inputs cannot say is `unexpressed`. Since every update writes a whole new version
//! from the inputs, what an update would silently drop and the nodes may need (a custom AMI,
//! an instance profile, user-data parts such as a bootstrap script or `spec.cluster`, other
//! block devices or interface settings) is also kept under [`KEPT`] in the current inputs:
//! `check_update` then refuses any change to the template instead of breaking its nodes.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{LaunchTemplateHttpTokensState, ResponseLaunchTemplateData};

use super::parse;
use crate::aws::catalog::{InstanceInfo, InterfaceKind};
use crate::aws::{Absent, Ctx, Service, tags};
use crate::resources::{Imported, Observed, Result};
use crate::stack::schema::Default;
use crate::value::{Attrs, Value};

/// Not an attribute: what an update of an imported template would drop (see the module doc).
pub const KEPT: &str = "~kept";

pub async fn import(ctx: &Ctx, id: &str) -> Result<Option<Imported>> {
    let request = ctx.ec2.describe_launch_templates().launch_template_ids(id);
    // EC2 answers an unknown id with InvalidLaunchTemplateId.NotFound (or .Malformed).
    let found = match ctx.call(Service::Ec2, "DescribeLaunchTemplates", request.send()).await {
        Err(e) if e.code.as_deref().is_some_and(|c| c.starts_with("InvalidLaunchTemplateId")) => None,
        other => other.absent_ok()?,
    };
    let Some(t) = found.and_then(|o| o.launch_templates.unwrap_or_default().into_iter().next()) else {
        return Ok(None);
    };
    let request = ctx.ec2.describe_launch_template_versions().launch_template_id(id).versions("$Default");
    let out = ctx.call(Service::Ec2, "DescribeLaunchTemplateVersions", request.send()).await?;
    let Some(data) = out.launch_template_versions().first().and_then(|v| v.launch_template_data()).cloned() else {
        return Ok(None);
    };
    let info = match data.instance_type() {
        Some(it) if has_efa(&data) => ctx.catalog.get(ctx, it.as_str()).await?,
        _ => None,
    };
    let all = tags::ec2_map(t.tags());
    let (mut attrs, unexpressed, kept) = from_data(&data, info.as_ref());
    attrs.insert("name".into(), Value::str(t.launch_template_name().unwrap_or_default()));
    attrs.insert("tags".into(), tags::observed(&all));
    // The AMI type is the node group's, not the template's: the file's word (`settle`).
    attrs.insert("ami_type".into(), Value::Unknown);
    if !kept.is_empty() {
        attrs.insert(KEPT.into(), Value::List(kept.into_iter().map(Value::str).collect()));
    }
    let rec = super::recorded(Some(&t));
    Ok(Some(Imported {
        observed: Observed { address: None, id: rec.id, attrs, outputs: rec.outputs, retained: false },
        unexpressed,
    }))
}

fn has_efa(d: &ResponseLaunchTemplateData) -> bool {
    d.network_interfaces().iter().any(|n| n.interface_type().is_some_and(|t| t.starts_with("efa")))
}

/// The inputs a version's data stands for, what they cannot say (field, value), and the
/// fields of that an update would drop (see the module doc). `info` is the instance type's
/// catalog entry, for an EFA layout.
pub fn from_data(
    d: &ResponseLaunchTemplateData,
    info: Option<&InstanceInfo>,
) -> (Attrs, Vec<(String, String)>, Vec<String>) {
    let mut a = Attrs::new();
    let mut un: Vec<(String, String)> = vec![];
    let mut kept: Vec<String> = vec![];
    let mut keep = |un: &mut Vec<(String, String)>, field: &str, value: String| {
        un.push((field.to_string(), value));
        kept.push(field.to_string());
    };
    if let Some(t) = d.instance_type() {
        a.insert("instance_type".into(), Value::str(t.as_str()));
    }
    let strs = |v: &[String]| Value::List(v.iter().map(|s| Value::str(s.clone())).collect());
    if !d.security_group_ids().is_empty() {
        a.insert("security_groups".into(), strs(d.security_group_ids()));
    }
    if !d.security_groups().is_empty() {
        keep(&mut un, "SecurityGroups (by name)", d.security_groups().join(","));
    }
    // Network interfaces: an EFA layout as `efa`, one plain primary interface as its groups.
    let nics = d.network_interfaces();
    if has_efa(d) {
        let efa_count = nics.iter().filter(|n| n.interface_type().is_some_and(|t| t.starts_with("efa"))).count();
        let mut groups: Vec<String> = nics.first().map(|n| n.groups().to_vec()).unwrap_or_default();
        groups.sort();
        let max = info.map(|i| i.max_efa_interfaces as usize);
        let interfaces = if max == Some(efa_count) { Value::str("max") } else { Value::Int(efa_count as i64) };
        let efa =
            BTreeMap::from([("security_groups".to_string(), strs(&groups)), ("interfaces".to_string(), interfaces)]);
        a.insert("efa".into(), Value::Table(efa));
        let seen: Vec<(i32, i32, String)> = nics
            .iter()
            .map(|n| {
                (
                    n.network_card_index().unwrap_or(0),
                    n.device_index().unwrap_or(0),
                    n.interface_type().unwrap_or("interface").to_string(),
                )
            })
            .collect();
        let wanted = if max == Some(efa_count) { None } else { Some(efa_count as i64) };
        let layout: Option<Vec<(i32, i32, String)>> = info.and_then(|i| i.efa_interfaces(wanted).ok()).map(|l| {
            l.interfaces
                .iter()
                .map(|n| {
                    let kind = match n.kind {
                        InterfaceKind::Ena => "interface",
                        InterfaceKind::Efa => "efa",
                        InterfaceKind::EfaOnly => "efa-only",
                    };
                    (n.card as i32, n.device as i32, kind.to_string())
                })
                .collect()
        });
        if layout.as_ref() != Some(&seen) {
            keep(&mut un, "NetworkInterfaces", format!("{seen:?} (not the layout gpustack writes for this type)"));
        }
        if nics.iter().any(|n| n.groups() != nics[0].groups()) {
            keep(&mut un, "NetworkInterfaces.Groups", "differ between interfaces".into());
        }
    } else if let [n] = nics {
        if !n.groups().is_empty() {
            a.insert("security_groups".into(), strs(n.groups()));
        }
        // Anything on the interface but its groups (botocore ec2
        // `LaunchTemplateInstanceNetworkInterfaceSpecification`): the next version would drop it.
        let mut rest = n.clone();
        rest.groups = None;
        rest.device_index = rest.device_index.filter(|i| *i != 0);
        // `DeleteOnTermination = true` is what the primary interface EC2 makes for top-level
        // SecurityGroupIds has (the one gpustack's next version gets): no loss. (EC2 UG
        // `network-interfaces`, from memory: not re-read in this session.)
        rest.delete_on_termination = rest.delete_on_termination.filter(|d| !*d);
        let extra = rest != aws_sdk_ec2::types::LaunchTemplateInstanceNetworkInterfaceSpecification::builder().build();
        if extra {
            keep(&mut un, "NetworkInterfaces[0]", format!("{n:?}"));
        }
    } else if !nics.is_empty() {
        keep(&mut un, "NetworkInterfaces", format!("{} interfaces without EFA", nics.len()));
    }
    for m in d.block_device_mappings() {
        let dev = m.device_name().unwrap_or_default();
        let Some(ebs) = m.ebs().filter(|_| matches!(dev, "/dev/xvda" | "/dev/xvdb")) else {
            keep(&mut un, &format!("BlockDeviceMappings {dev}"), format!("{m:?}"));
            continue;
        };
        let mut v = BTreeMap::new();
        let Some(size) = ebs.volume_size() else {
            keep(&mut un, &format!("BlockDeviceMappings {dev}"), "no VolumeSize (the AMI's snapshot size)".into());
            continue;
        };
        v.insert("size_gib".to_string(), Value::Int(size.into()));
        if let Some(n) = ebs.iops() {
            v.insert("iops".into(), Value::Int(n.into()));
        }
        if let Some(n) = ebs.throughput() {
            v.insert("throughput".into(), Value::Int(n.into()));
        }
        if ebs.delete_on_termination() == Some(false) {
            keep(&mut un, &format!("BlockDeviceMappings {dev} DeleteOnTermination"), "false".into());
        }
        let ty = ebs.volume_type().map_or("gp3", |t| t.as_str()).to_string();
        if dev == "/dev/xvda" {
            if super::VOLUME_TYPES.contains(&ty.as_str()) {
                v.insert("type".into(), Value::str(&ty));
            } else {
                keep(&mut un, "BlockDeviceMappings /dev/xvda VolumeType", ty.clone());
            }
            // Unset, the volume follows the account's EBS encryption default; gpustack always says.
            v.insert("encrypted".into(), Value::Bool(ebs.encrypted() == Some(true)));
            if let Some(k) = ebs.kms_key_id() {
                v.insert("kms_key".into(), Value::str(k));
            }
            let root_rest = [
                ("SnapshotId", ebs.snapshot_id().map(str::to_string)),
                ("VolumeInitializationRate", ebs.volume_initialization_rate().map(|r| r.to_string())),
                ("EbsCardIndex", ebs.ebs_card_index().map(|r| r.to_string())),
            ];
            for (field, val) in root_rest {
                if let Some(val) = val {
                    keep(&mut un, &format!("BlockDeviceMappings /dev/xvda {field}"), val);
                }
            }
            a.insert("root_volume".into(), Value::Table(v));
        } else {
            // gpustack's data volume is always gp3 and encrypted with the default key.
            if ty != "gp3" || ebs.encrypted() != Some(true) || ebs.kms_key_id().is_some() {
                keep(
                    &mut un,
                    "BlockDeviceMappings /dev/xvdb",
                    format!("{ty}, encrypted {:?}, kms {:?}", ebs.encrypted(), ebs.kms_key_id()),
                );
            }
            if let Some(s) = ebs.snapshot_id() {
                v.insert("snapshot".into(), Value::str(s));
            }
            if let Some(r) = ebs.volume_initialization_rate() {
                v.insert("initialization_rate_mibps".into(), Value::Int(r.into()));
            }
            a.insert("data_volume".into(), Value::Table(v));
        }
    }
    if let Some(cr) = d.capacity_reservation_specification() {
        match cr.capacity_reservation_target().and_then(|t| t.capacity_reservation_id()) {
            Some(id) => {
                a.insert("capacity_reservation".into(), Value::str(id));
            }
            None => {
                if let Some(arn) =
                    cr.capacity_reservation_target().and_then(|t| t.capacity_reservation_resource_group_arn())
                {
                    keep(
                        &mut un,
                        "CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationResourceGroupArn",
                        arn.into(),
                    );
                }
                if let Some(p) = cr.capacity_reservation_preference() {
                    keep(&mut un, "CapacityReservationSpecification.CapacityReservationPreference", p.as_str().into());
                }
            }
        }
    }
    if let Some(m) = d.instance_market_options() {
        match m.market_type().map(|t| t.as_str()) {
            Some("capacity-block") => {
                a.insert("market".into(), Value::str("capacity-block"));
            }
            other => keep(&mut un, "InstanceMarketOptions", format!("{other:?} {:?}", m.spot_options())),
        }
    }
    if let Some(p) = d.placement() {
        if let Some(g) = p.group_name() {
            a.insert("placement_group".into(), Value::str(g));
        }
        let other = p.availability_zone().is_some()
            || p.tenancy().is_some_and(|t| t.as_str() != "default")
            || p.partition_number().is_some()
            || p.host_id().is_some()
            || p.host_resource_group_arn().is_some()
            || (p.group_id().is_some() && p.group_name().is_none());
        if other {
            keep(&mut un, "Placement", format!("{p:?}"));
        }
    }
    // A template without a hop limit is the template API's default, 1 (botocore ec2
    // `LaunchTemplateInstanceMetadataOptionsRequest.HttpPutResponseHopLimit`: "Default: 1"),
    // which is also the file's default: no diff. What an instance then really gets can come
    // from the account's IMDS defaults or the AMI's `ImdsSupport` first (EC2 UG
    // `configuring-instance-metadata-options`, order of precedence), so the note says so.
    let unset = "unset: the instance takes the account's IMDS defaults (GetInstanceMetadataDefaults), else the AMI's ImdsSupport, else the API's (HttpTokens optional, hop limit 1); gpustack's next version writes HttpTokens required, hop limit imds_hop_limit";
    match d.metadata_options() {
        Some(m) => {
            match m.http_put_response_hop_limit() {
                Some(h) => a.insert("imds_hop_limit".into(), Value::Int(h.into())),
                None => {
                    un.push(("MetadataOptions.HttpPutResponseHopLimit".into(), unset.into()));
                    a.insert("imds_hop_limit".into(), Value::Int(1))
                }
            };
            if m.http_tokens() != Some(&LaunchTemplateHttpTokensState::Required) {
                // gpustack always requires IMDSv2: the next version would too.
                un.push(("MetadataOptions.HttpTokens".into(), format!("{:?}", m.http_tokens().map(|t| t.as_str()))));
            }
            if let Some(t) = m.instance_metadata_tags() {
                un.push(("MetadataOptions.InstanceMetadataTags".into(), t.as_str().into()));
            }
            // gpustack writes the endpoint enabled and no IPv6 endpoint: a template that says
            // otherwise is kept (review imp-eks M3).
            if let Some(e) = m.http_endpoint().filter(|e| e.as_str() == "disabled") {
                keep(&mut un, "MetadataOptions.HttpEndpoint", e.as_str().into());
            }
            if let Some(e) = m.http_protocol_ipv6().filter(|e| e.as_str() == "enabled") {
                keep(&mut un, "MetadataOptions.HttpProtocolIpv6", e.as_str().into());
            }
        }
        None => {
            un.push(("MetadataOptions".into(), unset.into()));
            a.insert("imds_hop_limit".into(), Value::Int(1));
        }
    }
    if let Some(img) = d.image_id() {
        keep(&mut un, "ImageId", format!("{img} (a custom AMI: the node group's amiType is CUSTOM)"));
    }
    if let Some(p) = d.iam_instance_profile() {
        keep(&mut un, "IamInstanceProfile", format!("{:?}", p.arn().or(p.name())));
    }
    if let Some(k) = d.key_name() {
        keep(&mut un, "KeyName", k.into());
    }
    let flags: [(&str, Option<String>); 19] = [
        // botocore ec2 `ResponseLaunchTemplateData` members gpustack never writes (review
        // imp-eks M3): reported and kept, never dropped by the next version.
        ("RamDiskId", d.ram_disk_id().map(str::to_string)),
        ("DisableApiTermination", d.disable_api_termination().filter(|b| *b).map(|b| b.to_string())),
        ("DisableApiStop", d.disable_api_stop().filter(|b| *b).map(|b| b.to_string())),
        (
            "InstanceInitiatedShutdownBehavior",
            d.instance_initiated_shutdown_behavior().filter(|b| b.as_str() != "stop").map(|b| b.as_str().to_string()),
        ),
        ("PrivateDnsNameOptions", d.private_dns_name_options().map(|o| format!("{o:?}"))),
        ("MaintenanceOptions", d.maintenance_options().map(|o| format!("{o:?}"))),
        ("NetworkPerformanceOptions", d.network_performance_options().map(|o| format!("{o:?}"))),
        ("LicenseSpecifications", Some(d.license_specifications()).filter(|l| !l.is_empty()).map(|l| format!("{l:?}"))),
        (
            "ElasticGpuSpecifications",
            Some(d.elastic_gpu_specifications()).filter(|l| !l.is_empty()).map(|l| format!("{l:?}")),
        ),
        (
            "ElasticInferenceAccelerators",
            Some(d.elastic_inference_accelerators()).filter(|l| !l.is_empty()).map(|l| format!("{l:?}")),
        ),
        ("Operator", d.operator().map(|o| format!("{o:?}"))),
        ("EbsOptimized", d.ebs_optimized().map(|b| b.to_string())),
        ("Monitoring.Enabled", d.monitoring().and_then(|m| m.enabled()).filter(|e| *e).map(|e| e.to_string())),
        ("CpuOptions", d.cpu_options().map(|c| format!("{c:?}"))),
        ("CreditSpecification", d.credit_specification().map(|c| format!("{c:?}"))),
        ("InstanceRequirements", d.instance_requirements().map(|c| format!("{c:?}"))),
        ("KernelId", d.kernel_id().map(str::to_string)),
        ("EnclaveOptions", d.enclave_options().filter(|e| e.enabled() == Some(true)).map(|e| format!("{e:?}"))),
        (
            "HibernationOptions",
            d.hibernation_options().filter(|h| h.configured() == Some(true)).map(|h| format!("{h:?}")),
        ),
    ];
    for (field, v) in flags {
        if let Some(v) = v {
            keep(&mut un, field, v);
        }
    }
    // The tags of what the template launches: gpustack writes the stack's and the user's.
    let launched: Vec<String> = d
        .tag_specifications()
        .iter()
        .flat_map(|s| {
            s.tags().iter().map(move |t| {
                format!(
                    "{}:{}={}",
                    s.resource_type().map_or("", |r| r.as_str()),
                    t.key().unwrap_or_default(),
                    t.value().unwrap_or_default()
                )
            })
        })
        .filter(|t| !t.contains(tags::STACK))
        .collect();
    if !launched.is_empty() {
        un.push(("TagSpecifications".into(), launched.join(", ")));
    }
    let text = d
        .user_data()
        .and_then(|u| aws_smithy_types::base64::decode(u).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let parsed = parse::parse(&text);
    a.extend(parsed.attrs);
    for (field, value) in parsed.unexpressed {
        keep(&mut un, &field, value);
    }
    a.insert("user_data".into(), Value::str(text));
    // An empty list or table the data does not hold is the attribute's default, as the file
    // resolves it (`security_groups = []`, `node_taints = []`, `bottlerocket_settings = {}`).
    for attr in super::ATTRS {
        if matches!(attr.default, Default::EmptyList | Default::EmptyMap)
            && !a.contains_key(attr.name)
            && let Some(v) = attr.default.value()
        {
            a.insert(attr.name.into(), v);
        }
    }
    (a, un, kept)
}

/// For an import: a user data that reads back to the same inputs as the file's is no change
/// (the text differs only in spelling: eksctl's MIME vs gpustack's); anything it holds that
/// the inputs cannot say is guarded by [`KEPT`].
pub fn settle(current: &mut Attrs, desired: &Attrs) {
    let text = |a: &Attrs| a.get("user_data").and_then(Value::as_str).map(str::to_string);
    if let (Some(c), Some(d)) = (text(current), text(desired))
        && c != d
    {
        let (pc, pd) = (parse::parse(&c), parse::parse(&d));
        if pc.attrs == pd.attrs {
            current.insert("user_data".into(), Value::str(d));
        }
    }
}

/// Refuses any change to an imported template holding what an update would drop.
pub fn refusals(old: &Attrs, new: &Attrs) -> Vec<(&'static str, String, String)> {
    let Some(Value::List(kept)) = old.get(KEPT) else { return vec![] };
    let changed = super::ATTRS.iter().any(|a| old.get(a.name) != new.get(a.name));
    if !changed {
        return vec![];
    }
    let fields: Vec<String> = kept.iter().map(Value::interpolate).collect();
    vec![(
        "user_data",
        format!(
            "this imported launch template holds what gpustack cannot write ({}); a new version made from the stack would drop it and could break the nodes",
            fields.join("; ")
        ),
        "change the template outside gpustack, or move its node group to a launch template the stack writes (a new launch_template resource) and remove the imported one".into(),
    )]
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::{
        LaunchTemplateBlockDeviceMapping, LaunchTemplateEbsBlockDevice, LaunchTemplateInstanceMetadataOptions,
        LaunchTemplatePlacement, VolumeType,
    };

    fn gpustack_like(user_data: &str) -> ResponseLaunchTemplateData {
        ResponseLaunchTemplateData::builder()
            .instance_type("g6.12xlarge".into())
            .security_group_ids("sg-b")
            .security_group_ids("sg-a")
            .block_device_mappings(
                LaunchTemplateBlockDeviceMapping::builder()
                    .device_name("/dev/xvda")
                    .ebs(
                        LaunchTemplateEbsBlockDevice::builder()
                            .volume_size(200)
                            .volume_type(VolumeType::Gp3)
                            .encrypted(true)
                            .delete_on_termination(true)
                            .build(),
                    )
                    .build(),
            )
            .placement(LaunchTemplatePlacement::builder().group_name("train").build())
            .metadata_options(
                LaunchTemplateInstanceMetadataOptions::builder()
                    .http_tokens(LaunchTemplateHttpTokensState::Required)
                    .http_put_response_hop_limit(1)
                    .build(),
            )
            .user_data(aws_smithy_types::base64::encode(user_data))
            .build()
    }

    /// Data gpustack would write maps back to the inputs that write it, with nothing kept.
    #[test]
    fn gpustack_data_maps_back_to_its_inputs() {
        let ud = "[settings.kubernetes.node-labels]\n\"pool\" = \"a\"\n";
        let (a, un, kept) = from_data(&gpustack_like(ud), None);
        assert!(un.is_empty() && kept.is_empty(), "{un:?}");
        assert_eq!(a["instance_type"], Value::str("g6.12xlarge"));
        assert_eq!(a["placement_group"], Value::str("train"));
        assert_eq!(a["imds_hop_limit"], Value::Int(1));
        assert_eq!(a["root_volume"].as_table().unwrap()["size_gib"], Value::Int(200));
        assert_eq!(a["node_labels"], Value::Table(BTreeMap::from([("pool".to_string(), Value::str("a"))])));
        assert_eq!(a["user_data"], Value::str(ud));
    }

    /// M3 (review imp-eks): members gpustack never writes are reported and kept.
    #[test]
    fn members_gpustack_never_writes_are_kept() {
        use aws_sdk_ec2::types::{LaunchTemplateInstanceNetworkInterfaceSpecification, ShutdownBehavior};
        let mut d = gpustack_like("");
        d.disable_api_termination = Some(true);
        d.instance_initiated_shutdown_behavior = Some(ShutdownBehavior::Terminate);
        d.ram_disk_id = Some("ari-1".into());
        d.network_interfaces = Some(vec![
            LaunchTemplateInstanceNetworkInterfaceSpecification::builder()
                .device_index(0)
                .groups("sg-a")
                .ipv6_address_count(1)
                .build(),
        ]);
        let (_, _, kept) = from_data(&d, None);
        for f in ["RamDiskId", "DisableApiTermination", "InstanceInitiatedShutdownBehavior", "NetworkInterfaces[0]"] {
            assert!(kept.iter().any(|k| k == f), "{f}: {kept:?}");
        }
        d.network_interfaces = Some(vec![
            LaunchTemplateInstanceNetworkInterfaceSpecification::builder()
                .device_index(0)
                .groups("sg-a")
                .delete_on_termination(true)
                .build(),
        ]);
        d.disable_api_termination = Some(false);
        d.instance_initiated_shutdown_behavior = None;
        d.ram_disk_id = None;
        let (_, _, kept) = from_data(&d, None);
        assert!(kept.is_empty(), "{kept:?}");
    }

    /// No metadata options (or no hop limit) is the API's default hop limit 1, the file's
    /// default too: no diff, and the note says what the instance really takes.
    #[test]
    fn an_unset_hop_limit_is_the_api_default_and_said() {
        let mut d = gpustack_like("");
        d.metadata_options = None;
        let (a, un, _) = from_data(&d, None);
        assert_eq!(a["imds_hop_limit"], Value::Int(1));
        let m = un.iter().find(|(f, _)| f == "MetadataOptions").expect("reported");
        assert!(m.1.contains("account's IMDS defaults") && m.1.contains("ImdsSupport"), "{m:?}");
        d.metadata_options = Some(
            LaunchTemplateInstanceMetadataOptions::builder()
                .http_tokens(LaunchTemplateHttpTokensState::Required)
                .build(),
        );
        let (a, un, _) = from_data(&d, None);
        assert_eq!(a["imds_hop_limit"], Value::Int(1));
        assert!(un.iter().any(|(f, _)| f == "MetadataOptions.HttpPutResponseHopLimit"), "{un:?}");
    }

    /// A custom AMI and a shell part are unexpressed and guard the template against updates.
    #[test]
    fn a_custom_ami_and_a_script_refuse_updates() {
        let ud = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n--//\nContent-Type: text/x-shellscript\n\n#!/bin/bash\necho hi\n--//--\n";
        let mut d = gpustack_like(ud);
        d.image_id = Some("ami-123".into());
        let (mut a, un, kept) = from_data(&d, None);
        assert_eq!(kept, ["ImageId", "user_data part text/x-shellscript"], "{un:?}");
        a.insert(KEPT.into(), Value::List(kept.iter().map(Value::str).collect()));
        let same = a.clone();
        assert!(refusals(&a, &same).is_empty(), "no change, nothing refused");
        let mut new = a.clone();
        new.insert("instance_type".into(), Value::str("g6.48xlarge"));
        let r = refusals(&a, &new);
        assert!(r[0].1.contains("ImageId"), "{r:?}");
    }

    /// The same inputs spelled by another tool are no change; other inputs are.
    #[test]
    fn user_data_spelled_differently_settles() {
        let eksctl = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=//\n\n--//\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags:\n    - --node-labels=pool=a\n--//--\n";
        let inputs = Attrs::from([
            ("nodeadm".to_string(), Value::Table(BTreeMap::new())),
            ("node_labels".to_string(), Value::Table(BTreeMap::from([("pool".to_string(), Value::str("a"))]))),
        ]);
        let ours = super::super::nodeadm::render(&inputs, None).unwrap();
        assert_ne!(ours, eksctl);
        let mut cur = Attrs::from([("user_data".to_string(), Value::str(eksctl))]);
        let desired = Attrs::from([("user_data".to_string(), Value::str(ours.clone()))]);
        settle(&mut cur, &desired);
        assert_eq!(cur["user_data"], Value::str(ours));
        let mut cur = Attrs::from([("user_data".to_string(), Value::str(eksctl.replace("pool=a", "pool=b")))]);
        settle(&mut cur, &desired);
        assert_ne!(cur["user_data"], desired["user_data"]);
    }
}
