//! The network interfaces of an EFA launch template. How many, on which network cards and
//! of which kind is the instance catalog's answer (`InstanceInfo::efa_interfaces`, DESIGN.md
//! §2); here it becomes EC2's request: every interface has the security groups and none has
//! a subnet (EKS picks it).

use aws_sdk_ec2::types::LaunchTemplateInstanceNetworkInterfaceSpecificationRequest as Nic;

use crate::aws::catalog::{EfaLayout, EfaRefusal};
use crate::aws::{AwsError, Ctx};
use crate::resources::{Result, i32_of};
use crate::value::{Attrs, Value};

/// The interfaces the `efa` table asks for on `instance_type`, checked against the catalog
/// (a type without EFA, or more interfaces than it has, is refused before any create).
pub async fn efa_interfaces(ctx: &Ctx, instance_type: &str, efa: &Attrs, groups: &[String]) -> Result<Vec<Nic>> {
    let info = ctx.catalog.get(ctx, instance_type).await?;
    let wanted = match efa.get("interfaces") {
        Some(Value::Int(n)) => Some(*n),
        _ => None, // "max"
    };
    let layout = info.map_or(Err(EfaRefusal::Unsupported), |i| i.efa_interfaces(wanted));
    let layout = layout.map_err(|refusal| AwsError {
        operation: "DescribeInstanceTypes",
        code: Some("EfaUnsupported".into()),
        detail: match refusal {
            EfaRefusal::Unsupported => format!("{instance_type} does not support EFA"),
            EfaRefusal::TooMany { max, asked } => {
                format!("{instance_type} has at most {max} EFA interfaces, {asked} were asked for")
            }
        },
    })?;
    Ok(nics(&layout, groups))
}

/// The layout as launch template interfaces, each with `groups`.
fn nics(layout: &EfaLayout, groups: &[String]) -> Vec<Nic> {
    layout
        .interfaces
        .iter()
        .map(|n| {
            Nic::builder()
                .network_card_index(i32_of(n.card.into()))
                .device_index(i32_of(n.device.into()))
                .interface_type(n.kind.as_str())
                .set_groups(Some(groups.to_vec()))
                .delete_on_termination(true)
                .build()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::catalog::{InterfaceKind, NetworkInterface};

    #[test]
    fn every_interface_gets_the_groups_and_no_subnet() {
        let layout = EfaLayout {
            interfaces: vec![
                NetworkInterface { card: 0, device: 0, kind: InterfaceKind::Ena },
                NetworkInterface { card: 1, device: 0, kind: InterfaceKind::EfaOnly },
            ],
        };
        let nics = nics(&layout, &["sg-efa".into(), "sg-node".into()]);
        let seen: Vec<_> = nics
            .iter()
            .map(|n| (n.network_card_index, n.device_index, n.interface_type.as_deref(), n.delete_on_termination))
            .collect();
        assert_eq!(
            seen,
            vec![(Some(0), Some(0), Some("interface"), Some(true)), (Some(1), Some(0), Some("efa-only"), Some(true))]
        );
        assert!(nics.iter().all(|n| n.subnet_id.is_none()
            && n.groups.as_deref() == Some(&["sg-efa".to_string(), "sg-node".to_string()][..])));
    }
}
