//! The nodes' way out (EKS UG `private-clusters`): a node group, Karpenter pool or image
//! cache in a subnet that cannot reach AWS's APIs and registries never becomes Ready while
//! it bills.

use std::collections::BTreeSet;

use super::{efa_table, lit, lit_str, referenced, span, subnet_resources};
use crate::stack::expr::ExprKind;
use crate::stack::{Diagnostic, Resource, Stack};
use crate::value::Value;

/// How a subnet of the stack reaches AWS's APIs and registries, if it does.
fn way_out(stack: &Stack, subnet: &Resource, many_interfaces: bool, internet: bool) -> Result<(), String> {
    if subnet.attrs.contains_key("nat_gateway") {
        return Ok(());
    }
    let public = lit(subnet, "public").and_then(|v| v.as_bool()) == Some(true);
    let vpc = referenced(stack, subnet, "vpc", "vpc");
    let igw = vpc.is_some_and(|v| lit(v, "internet_gateway").and_then(|b| b.as_bool()) == Some(true));
    if public && igw && !many_interfaces {
        return Ok(());
    }
    if internet {
        return Err(if public && !igw {
            "is public, but its VPC has no internet gateway".to_string()
        } else {
            "has no route to the internet (the builder pulls from public registries and needs SSM), only a NAT gateway or a public subnet will do".to_string()
        });
    }
    // Endpoints in this subnet (interface) or on its route table (the s3 gateway).
    let served: BTreeSet<String> = stack
        .resources
        .iter()
        .filter(|r| r.kind.name() == "vpc_endpoint")
        .filter(|e| match e.attrs.get("subnets").map(|x| &x.kind) {
            Some(ExprKind::List(items)) => {
                items.iter().filter_map(|i| i.as_single_ref()).any(|x| x.address == subnet.address)
            }
            _ => false,
        })
        .filter_map(|e| lit_str(e, "service"))
        .collect();
    let missing: Vec<&str> =
        crate::resources::vpc_endpoint_essentials().iter().copied().filter(|s| !served.contains(*s)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(if public && igw {
        "is public, but EFA's several network interfaces get no public IP (EC2 UG efa-acc-inst-types)".to_string()
    } else if public {
        "is public, but its VPC has no internet gateway".to_string()
    } else if served.is_empty() {
        "is private with no NAT gateway and no VPC endpoints".to_string()
    } else {
        format!("is private with no NAT gateway, and VPC endpoints for {} are missing", missing.join(", "))
    })
}

/// Nodes need a way out: the VPC CNI calls the EC2 API, and images come from ECR and S3
/// (EKS UG `private-clusters`; "EKS does not check that nodes join", `capacity-blocks-mng`).
/// A node group, Karpenter pool, HyperPod cluster or image cache in a subnet with none never
/// becomes Ready while it bills (HyperPod's instances also fetch their lifecycle scripts from
/// S3: SageMaker DG `sagemaker-hyperpod-eks-prerequisites`).
pub(super) fn egress(stack: &Stack) -> Vec<Diagnostic> {
    let mut d = vec![];
    let users = stack
        .resources
        .iter()
        .filter(|r| matches!(r.kind.name(), "node_group" | "karpenter_pool" | "image_cache" | "hyperpod_cluster"));
    for r in users {
        let (attr, subnets): (&str, Vec<&Resource>) = match r.kind.name() {
            "node_group" | "karpenter_pool" | "hyperpod_cluster" => ("subnets", subnet_resources(stack, r)),
            _ => ("subnet", referenced(stack, r, "subnet", "subnet").into_iter().collect()),
        };
        // A pool carries its own `efa`; a node group's is on its launch template.
        let efa = match r.kind.name() {
            "karpenter_pool" => efa_table(r),
            _ => referenced(stack, r, "launch_template", "launch_template").and_then(efa_table),
        };
        let many = efa
            .is_some_and(|efa| efa.get("interfaces").and_then(|e| e.as_literal()).and_then(Value::as_int) != Some(1));
        // The image-cache builder pulls from registries on the internet (nvcr.io, public.ecr.aws…)
        // and talks to SSM: VPC endpoints for the node essentials are not enough for it.
        let internet = r.kind.name() == "image_cache";
        for sn in subnets {
            if let Err(why) = way_out(stack, sn, many, internet) {
                let public = sn.attrs.keys().any(|k| k == "public");
                let nat_home = stack
                    .resources
                    .iter()
                    .find(|x| x.kind.name() == "subnet" && lit(x, "public").and_then(|v| v.as_bool()) == Some(true))
                    .map_or("PUBLIC_SUBNET".to_string(), |x| x.address.replace("subnet.", ""));
                d.push(
                    Diagnostic::error(
                        format!("`{}` runs in `{}`, which {why}: its nodes could never join the cluster", r.address, sn.address),
                        span(r, attr),
                    )
                    .help(format!(
                        "give it a way out through a NAT gateway in a public subnet:\n        [nat_gateway.main]\n        subnet = \"${{subnet.{nat_home}.id}}\"\n      and in [{}]{}: nat_gateway = \"${{nat_gateway.main.id}}\"\n      (or VPC endpoints for ecr.api, ecr.dkr, s3, ec2 and sts in that subnet)",
                        sn.address,
                        if public { ", with public = false" } else { "" }
                    )),
                );
            }
        }
    }
    d
}
