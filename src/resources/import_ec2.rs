//! What the network kinds share for `[import]` (issue 20): the tag call that makes an
//! imported EC2 object (and the parts of it gpustack manages with it: a VPC's internet
//! gateway and public route table, a subnet's own route table, a NAT gateway's Elastic IP)
//! findable by refresh, and the `Imported` value the kinds return.
//!
//! `CreateTags` takes several resource ids of any EC2 type in one call and only adds or
//! overwrites the tags given ("Adds or overwrites only the specified tags for the specified
//! Amazon EC2 resource or resources", botocore ec2 2016-11-15 `CreateTags`), so tagging never
//! touches the object's own tags or configuration. "Each resource can have a maximum of 50
//! tags" (same): an object with 49 user tags or more cannot take gpustack's two, and the
//! apply of its import fails with AWS's message.

use aws_sdk_ec2::types::{Filter, RouteTable, Tag};

use super::{Imported, Observed, Recorded, Result};
use crate::aws::{Ctx, Service, tags};
use crate::value::Attrs;

/// Puts `gpustack:stack` and `gpustack:address` (and the `marks`, gpustack's own markers such
/// as `gpustack:public-routes`) on every id in `ids`, in one `CreateTags` call.
pub async fn tag(ctx: &Ctx, ids: &[String], address: &str, marks: &[(&str, &str)]) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let mut all = vec![
        Tag::builder().key(tags::STACK).value(&ctx.stack).build(),
        Tag::builder().key(tags::ADDRESS).value(address).build(),
    ];
    all.extend(marks.iter().map(|(k, v)| Tag::builder().key(*k).value(*v).build()));
    let request = ctx.ec2.create_tags().set_resources(Some(ids.to_vec())).set_tags(Some(all));
    ctx.call(Service::Ec2, "CreateTags", request.send()).await?;
    Ok(())
}

/// An imported object: no address yet, the inputs as AWS shows them, the outputs `create`
/// would have recorded, and what the language cannot say.
pub fn imported(rec: Recorded, attrs: Attrs, unexpressed: Vec<(String, String)>) -> Imported {
    Imported {
        observed: Observed { address: None, id: rec.id, attrs, outputs: rec.outputs, retained: false },
        unexpressed,
    }
}

/// The CloudFormation stack that made an object (eksctl's, or any template's), as a note:
/// `tags` drops the `aws:` tags as the language must, but the object stays that stack's, and
/// deleting the stack later deletes it (CloudFormation UG "Resource tags": every resource of a
/// stack carries `aws:cloudformation:stack-name`). Review imp-net m3.
pub fn cloudformation_note(all: &std::collections::BTreeMap<String, String>) -> Option<(String, String)> {
    all.get("aws:cloudformation:stack-name").map(|s| {
        note(
            "cloudformation_stack",
            format!(
                "{s} made it: deleting that stack deletes it; remove it from the template (DeletionPolicy Retain) first"
            ),
        )
    })
}

/// A (field, value) pair for `Imported::unexpressed`.
pub fn note(field: &str, value: impl Into<String>) -> (String, String) {
    (field.to_string(), value.into())
}

/// Every route table of `vpc` (DescribeRouteTables, `vpc-id` filter, paged).
pub async fn vpc_route_tables(ctx: &Ctx, vpc: &str) -> Result<Vec<RouteTable>> {
    let pages = ctx
        .ec2
        .describe_route_tables()
        .filters(Filter::builder().name("vpc-id").values(vpc).build())
        .into_paginator()
        .send();
    ctx.all_pages(Service::Ec2, "DescribeRouteTables", pages, |p| p.route_tables.unwrap_or_default()).await
}

/// The VPC's main route table: the one whose association says `main` (EC2 API
/// `RouteTableAssociation.Main`).
pub fn is_main(rt: &RouteTable) -> bool {
    rt.associations().iter().any(|a| a.main() == Some(true))
}

/// The subnets explicitly associated with `rt`.
pub fn subnets_of(rt: &RouteTable) -> Vec<String> {
    rt.associations().iter().filter_map(|a| a.subnet_id().map(str::to_string)).collect()
}

/// Where the route goes, for messages: the gateway, NAT gateway, transit gateway, peering,
/// endpoint, interface or instance id it names.
pub fn target(r: &aws_sdk_ec2::types::Route) -> String {
    r.gateway_id()
        .or(r.nat_gateway_id())
        .or(r.transit_gateway_id())
        .or(r.vpc_peering_connection_id())
        .or(r.network_interface_id())
        .or(r.instance_id())
        .or(r.egress_only_internet_gateway_id())
        .or(r.carrier_gateway_id())
        .or(r.local_gateway_id())
        .or(r.core_network_arn())
        .unwrap_or("?")
        .to_string()
}

/// The destination of a route, for messages.
pub fn destination(r: &aws_sdk_ec2::types::Route) -> String {
    r.destination_cidr_block()
        .or(r.destination_ipv6_cidr_block())
        .or(r.destination_prefix_list_id())
        .unwrap_or("?")
        .to_string()
}

/// The routes of `rt` beyond the VPC's own `local` ones and those in `except` (destinations
/// gpustack manages, such as 0.0.0.0/0), as "destination via target".
pub fn extra_routes(rt: &RouteTable, except: &[&str]) -> Vec<String> {
    rt.routes()
        .iter()
        .filter(|r| r.gateway_id() != Some("local"))
        .filter(|r| !except.contains(&destination(r).as_str()))
        .map(|r| format!("{} via {}", destination(r), target(r)))
        .collect()
}

/// The 0.0.0.0/0 route of `rt`, if any.
pub fn default_route(rt: &RouteTable) -> Option<&aws_sdk_ec2::types::Route> {
    rt.routes().iter().find(|r| r.destination_cidr_block() == Some("0.0.0.0/0"))
}

#[cfg(test)]
mod cloudformation_tests {
    use super::*;

    /// Review imp-net m3: an object a CloudFormation stack made says so, since `tags` drops it.
    #[test]
    fn an_object_of_a_cloudformation_stack_is_reported() {
        let mut all = std::collections::BTreeMap::from([("Name".to_string(), "x".to_string())]);
        assert_eq!(cloudformation_note(&all), None);
        all.insert("aws:cloudformation:stack-name".into(), "eksctl-prod-cluster".into());
        let (field, value) = cloudformation_note(&all).expect("reported");
        assert_eq!(field, "cloudformation_stack");
        assert!(value.contains("eksctl-prod-cluster"), "{value}");
    }
}
