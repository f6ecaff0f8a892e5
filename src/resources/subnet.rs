//! `subnet`: a subnet in one availability zone. `public = true` maps public IPs
//! on launch and associates the VPC's public route table (from `vpc.internet_gateway`).
//! Everything but tags replaces, deleting the old subnet first (its CIDR is taken).

use async_trait::async_trait;
use aws_sdk_ec2::types::{AttributeBooleanValue, Filter, ResourceType};

use super::{Create, Kind, Observed, Recorded, ReplaceOrder, Result, TAGS, b, s};
use crate::aws::{AwsError, Ctx, Service, err, gone_is_ok, tags};
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::value::{Attrs, Value};

pub struct Subnet;

const ATTRS: &[Attr] = &[
    Attr::req("vpc", Ty::Str, OnChange::Replace),
    Attr::req("cidr_block", Ty::Str, OnChange::Replace),
    Attr::req("availability_zone", Ty::Str, OnChange::Replace),
    Attr::opt("public", Ty::Bool, Default::Bool(false), OnChange::Replace),
    TAGS,
];

#[async_trait]
impl Kind for Subnet {
    fn name(&self) -> &'static str {
        "subnet"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("id", Ty::Str), ("availability_zone", Ty::Str)]
    }
    fn replace_order(&self) -> ReplaceOrder {
        ReplaceOrder::DeleteBeforeCreate
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let vpc = s(req.inputs, "vpc");
        let cidr = s(req.inputs, "cidr_block");
        let _p = ctx.permit(Service::Ec2).await;
        let created = ctx
            .ec2
            .create_subnet()
            .vpc_id(vpc)
            .cidr_block(cidr)
            .availability_zone(s(req.inputs, "availability_zone"))
            .tag_specifications(tags::ec2_spec(ctx, ResourceType::Subnet, req.address, req.inputs))
            .send()
            .await
            .map_err(err("CreateSubnet"));
        let (id, az) = match created {
            Ok(out) => {
                let sub = out.subnet();
                (
                    sub.and_then(|x| x.subnet_id()).unwrap_or_default().to_string(),
                    sub.and_then(|x| x.availability_zone()).unwrap_or_default().to_string(),
                )
            }
            // The CIDR is taken: by this very resource (a create that raced a crash) it is adopted.
            Err(e) if e.code.as_deref() == Some("InvalidSubnet.Conflict") => {
                let found = ctx
                    .ec2
                    .describe_subnets()
                    .filters(Filter::builder().name("vpc-id").values(vpc).build())
                    .filters(Filter::builder().name("cidr-block").values(cidr).build())
                    .send()
                    .await
                    .map_err(err("DescribeSubnets"))?;
                let Some(sn) = found.subnets().iter().find(|sn| tags::is_ours(ctx, sn.tags(), req.address)) else {
                    return Err(e.taken_by_other("choose a CIDR no other subnet of the VPC uses"));
                };
                (sn.subnet_id().unwrap_or_default().to_string(), sn.availability_zone().unwrap_or_default().to_string())
            }
            Err(e) => return Err(e),
        };
        if b(req.inputs, "public") {
            ctx.ec2
                .modify_subnet_attribute()
                .subnet_id(&id)
                .map_public_ip_on_launch(AttributeBooleanValue::builder().value(true).build())
                .send()
                .await
                .map_err(err("ModifySubnetAttribute"))?;
            let rts = super::vpc::public_route_tables(ctx, vpc).await?;
            let Some(rt) = rts.first().and_then(|r| r.route_table_id()) else {
                return Err(AwsError {
                    operation: "AssociateRouteTable",
                    code: None,
                    detail: format!("VPC {vpc} has no public route table; set internet_gateway = true on its vpc"),
                });
            };
            let associated = rts.iter().flat_map(|r| r.associations()).any(|a| a.subnet_id() == Some(id.as_str()));
            if !associated {
                ctx.ec2
                    .associate_route_table()
                    .route_table_id(rt)
                    .subnet_id(&id)
                    .send()
                    .await
                    .map_err(err("AssociateRouteTable"))?;
            }
        }
        Ok(recorded(id, az))
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        let mut found = vec![];
        let mut pages = ctx.ec2.describe_subnets().filters(tags::stack_filter(ctx)).into_paginator().send();
        while let Some(page) = {
            let _p = ctx.permit(Service::Ec2).await;
            pages.next().await
        } {
            for sn in page.map_err(err("DescribeSubnets"))?.subnets() {
                let all = tags::ec2_map(sn.tags());
                let id = sn.subnet_id().unwrap_or_default().to_string();
                let az = sn.availability_zone().unwrap_or_default().to_string();
                let attrs = Attrs::from([
                    ("vpc".into(), Value::str(sn.vpc_id().unwrap_or_default())),
                    ("cidr_block".into(), Value::str(sn.cidr_block().unwrap_or_default())),
                    ("availability_zone".into(), Value::str(az.clone())),
                    ("public".into(), Value::Bool(sn.map_public_ip_on_launch().unwrap_or(false))),
                    ("tags".into(), tags::observed(&all)),
                ]);
                found.push(Observed {
                    address: all.get(tags::ADDRESS).cloned(),
                    id: id.clone(),
                    attrs,
                    outputs: recorded(id, az).outputs,
                    retained: false,
                });
            }
        }
        Ok(found)
    }

    async fn update(
        &self,
        ctx: &Ctx,
        _address: &str,
        id: &str,
        old: &Attrs,
        new: &Attrs,
        _changed: &[String],
    ) -> Result<Recorded> {
        tags::sync_ec2(ctx, id, old, new).await?;
        Ok(recorded(id.to_string(), s(new, "availability_zone").to_string()))
    }

    async fn delete(&self, ctx: &Ctx, _address: &str, id: &str, _inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        let _p = ctx.permit(Service::Ec2).await;
        gone_is_ok(ctx.ec2.delete_subnet().subnet_id(id).send().await.map(|_| ()).map_err(err("DeleteSubnet")))
    }
}

fn recorded(id: String, az: String) -> Recorded {
    Recorded {
        outputs: Attrs::from([("id".into(), Value::str(id.clone())), ("availability_zone".into(), Value::str(az))]),
        id,
    }
}
