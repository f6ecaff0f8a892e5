//! What `auto` resolves to for a node group: the AMI type and the update strategy, from
//! the instance catalog and what the launch template says (the instance type it runs, and
//! whether it launches into a reservation). The GPU rules show the same choice in the plan.

use super::{strings, template_spec};
use crate::aws::catalog::InstanceInfo;
use crate::aws::{Ctx, Service};
use crate::resources::{Result, str_attr};
use crate::value::Attrs;

/// What a node group's launch template decides: the instance type it runs (the first of
/// `instance_types`, else the template's) and whether it launches into a reservation.
pub struct TemplateFacts {
    pub instance_type: Option<String>,
    pub reserved: bool,
    /// The template's user data is a nodeadm NodeConfig (MIME part `application/node.eks.aws`):
    /// `ami_type = "auto"` then means AL2023, which reads it.
    pub al2023: bool,
}

pub async fn template_facts(ctx: &Ctx, inp: &Attrs) -> Result<TemplateFacts> {
    let listed = strings(inp.get("instance_types")).into_iter().next();
    let block = str_attr(inp, "capacity_type") == "CAPACITY_BLOCK";
    let Some(spec) = template_spec(inp) else {
        return Ok(TemplateFacts { instance_type: listed, reserved: block, al2023: false });
    };
    let request = ctx
        .ec2
        .describe_launch_template_versions()
        .launch_template_id(spec.id().unwrap_or_default())
        .versions(spec.version().unwrap_or("$Default"));
    let out = ctx.call(Service::Ec2, "DescribeLaunchTemplateVersions", request.send()).await?;
    let data = out.launch_template_versions().first().and_then(|v| v.launch_template_data());
    let targeted = data
        .and_then(|d| d.capacity_reservation_specification())
        .and_then(|c| c.capacity_reservation_target())
        .is_some_and(|t| {
            t.capacity_reservation_id().is_some() || t.capacity_reservation_resource_group_arn().is_some()
        });
    let al2023 = data
        .and_then(|d| d.user_data())
        .and_then(|u| aws_smithy_types::base64::decode(u).ok())
        .is_some_and(|b| String::from_utf8_lossy(&b).contains("Content-Type: application/node.eks.aws"));
    Ok(TemplateFacts {
        instance_type: listed.or_else(|| data.and_then(|d| d.instance_type()).map(|t| t.as_str().to_string())),
        reserved: block || targeted,
        al2023,
    })
}

/// The update strategy to send, and why (for the plan): `update_strategy = "auto"` is MINIMAL
/// where there is no spare capacity to surge into — GPU types, and groups on a reservation
/// sized to the pool (a surge there fails with NodeCreationFailure; EKS UG
/// `managed-node-update-behavior`) — and DEFAULT otherwise. MINIMAL "terminates the old
/// instances before launching the new instances" (EKS API reference, NodegroupUpdateConfig).
pub fn update_strategy(inp: &Attrs, info: Option<&InstanceInfo>, reserved: bool) -> (&'static str, &'static str) {
    match str_attr(inp, "update_strategy") {
        "MINIMAL" => ("MINIMAL", "as set"),
        "DEFAULT" => ("DEFAULT", "as set"),
        _ if reserved => ("MINIMAL", "the group runs on a reservation with no spare instances to surge into"),
        _ if info.is_some_and(|i| i.gpus > 0) => ("MINIMAL", "GPU type: no surge where there are no spare GPUs"),
        _ => ("DEFAULT", "surge new nodes first"),
    }
}

/// `ami_type = "auto"`: Bottlerocket, NVIDIA for NVIDIA GPU types, for the type's architecture.
/// Except the Grace Blackwell types (p6e-gb200, p6e-gb300): EKS UG `ml-eks-optimized-ami`
/// lists them under "AL2023 ARM NVIDIA" only; Bottlerocket's arm64 NVIDIA variant supports
/// G5g alone ("Bottlerocket aarch64/arm64 aws-k8s-nvidia | G5g").
pub fn auto_ami_type(info: Option<&InstanceInfo>) -> String {
    if info.is_some_and(|i| i.name.starts_with("p6e-gb")) {
        return "AL2023_ARM_64_NVIDIA".into();
    }
    let arch = if info.is_some_and(|i| i.arch() == "arm64") { "ARM_64" } else { "x86_64" };
    let nvidia = if info.is_some_and(|i| i.is_nvidia()) { "_NVIDIA" } else { "" };
    format!("BOTTLEROCKET_{arch}{nvidia}")
}

/// The AMI type of `ami`'s family without the GPU driver, for a type without a GPU (EKS `AMITypes`, aws-sdk-eks `types/_ami_types.rs`): BOTTLEROCKET_x86_64_NVIDIA_FIPS →
/// BOTTLEROCKET_x86_64_FIPS, AL2023_ARM_64_NVIDIA → AL2023_ARM_64_STANDARD. AL2_x86_64_GPU →
/// AL2023_x86_64_STANDARD: EKS publishes no AL2 AMIs after Kubernetes 1.32. The architecture
/// is kept as written.
pub fn plain_ami_type(ami: &str) -> String {
    let arch = if ami.contains("ARM_64") { "ARM_64" } else { "x86_64" };
    if ami.starts_with("BOTTLEROCKET_") {
        let fips = if ami.ends_with("_FIPS") { "_FIPS" } else { "" };
        format!("BOTTLEROCKET_{arch}{fips}")
    } else {
        format!("AL2023_{arch}_STANDARD")
    }
}

/// The AL2023 AMI type for an `AL2_*` one, keeping the driver and the architecture:
/// AL2_x86_64_GPU → AL2023_x86_64_NVIDIA, AL2_ARM_64 → AL2023_ARM_64_STANDARD.
pub fn al2023_ami_type(ami: &str) -> String {
    let arch = if ami.contains("ARM_64") { "ARM_64" } else { "x86_64" };
    let kind = if nvidia_ami(ami) { "NVIDIA" } else { "STANDARD" };
    format!("AL2023_{arch}_{kind}")
}

/// Whether `ami` carries NVIDIA's driver (the NVIDIA AMI types, and AL2's GPU AMI).
pub fn nvidia_ami(ami: &str) -> bool {
    ami.contains("NVIDIA") || ami.contains("GPU")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_blackwell_types_get_al2023_arm_nvidia() {
        // EKS UG ml-eks-optimized-ami: p6e-gb* on AL2023 ARM NVIDIA only; Bottlerocket arm64
        // NVIDIA is for G5g.
        let info = |name: &str| InstanceInfo {
            name: name.into(),
            vcpus: 144,
            gpus: 4,
            gpu_model: Some("B200".into()),
            gpu_manufacturer: Some("NVIDIA".into()),
            gpu_memory_mib: 0,
            max_efa_interfaces: 0,
            network_cards: 1,
            efa_cards: vec![],
            architectures: vec!["arm64".into()],
        };
        assert_eq!(auto_ami_type(Some(&info("p6e-gb200.36xlarge"))), "AL2023_ARM_64_NVIDIA");
        assert_eq!(auto_ami_type(Some(&info("p6e-gb300.36xlarge"))), "AL2023_ARM_64_NVIDIA");
        assert_eq!(auto_ami_type(Some(&info("g5g.xlarge"))), "BOTTLEROCKET_ARM_64_NVIDIA");
    }

    #[test]
    fn a_plain_ami_keeps_the_family_and_the_architecture() {
        for (gpu, plain) in [
            ("BOTTLEROCKET_x86_64_NVIDIA", "BOTTLEROCKET_x86_64"),
            ("BOTTLEROCKET_ARM_64_NVIDIA_FIPS", "BOTTLEROCKET_ARM_64_FIPS"),
            ("AL2023_x86_64_NVIDIA", "AL2023_x86_64_STANDARD"),
            ("AL2023_ARM_64_NVIDIA", "AL2023_ARM_64_STANDARD"),
            ("AL2_x86_64_GPU", "AL2023_x86_64_STANDARD"),
        ] {
            assert_eq!(plain_ami_type(gpu), plain, "{gpu}");
            assert!(nvidia_ami(gpu) && !nvidia_ami(plain), "{gpu}");
        }
    }
}
