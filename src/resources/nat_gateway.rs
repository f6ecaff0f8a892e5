//! `nat_gateway`: a public NAT gateway in a public subnet, with its own tagged Elastic IP,
//! so that private subnets (`subnet.nat_gateway`) have a way out: the VPC CNI calls the EC2
//! API and nodes pull images from ECR and S3, and GPU nodes with several network interfaces
//! get no public IP (EC2 UG `efa-acc-inst-types`). The Elastic IP is allocated first and
//! released after the gateway is gone. "Deleting a public NAT gateway disassociates its
//! Elastic IP address, but does not release the address from your account" (EC2 API
//! `DeleteNatGateway`): so refresh reports every tagged address no live gateway holds (left
//! by a create or a delete that was interrupted) as an object of its own, which the plan
//! deletes as a stray, and a gateway that is deleting or `failed` is never adopted.

use async_trait::async_trait;
use aws_sdk_ec2::types::{DomainType, NatGateway, NatGatewayState, ResourceType};

use super::import_ec2::{imported, note, tag};
use super::{Create, Imported, Kind, Observed, Recorded, Result, Schema, TAGS, str_attr};
use crate::aws::wait::{Poll, Status, until, until_status};
use crate::aws::{Absent, AwsError, Ctx, Service, tags};
use crate::stack::schema::{Attr, OnChange, Ty};
use crate::value::{Attrs, Value};

pub struct NatGatewayKind;

const ATTRS: &[Attr] = &[Attr::req("subnet", Ty::Str, OnChange::Replace), TAGS];

/// A NAT gateway becomes available in a minute or two, and takes as long to delete.
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15 * 60);

impl Schema for NatGatewayKind {
    fn name(&self) -> &'static str {
        "nat_gateway"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("id", Ty::Str), ("public_ip", Ty::Str)]
    }
}

#[async_trait]
impl Kind for NatGatewayKind {
    fn actions(&self) -> &'static [&'static str] {
        &[
            "ec2:AllocateAddress",
            "ec2:ReleaseAddress",
            "ec2:DescribeAddresses",
            "ec2:CreateNatGateway",
            "ec2:DeleteNatGateway",
            "ec2:DescribeNatGateways",
        ]
    }

    fn import_id(&self) -> Option<&'static str> {
        Some("nat-…")
    }

    /// A pending or available gateway, read with DescribeNatGateways by id. `subnet` and
    /// `tags` are its inputs; `id` and `public_ip` the outputs create records. What a
    /// gpustack gateway never is goes to `unexpressed`: a private gateway (no Elastic IP,
    /// `ConnectivityType` private: EC2 API `NatGateway`) and secondary addresses beyond
    /// the first (AssignPrivateNatGatewayAddress / AssociateNatGatewayAddress). Its Elastic
    /// IPs stay the account's (review imp-net M3): they are never tagged into the stack, so
    /// deleting or replacing the gateway only disassociates them ("Deleting a public NAT
    /// gateway disassociates its Elastic IP address, but does not release the address", EC2
    /// API `DeleteNatGateway`) and they are never released; the note says so per address.
    async fn import(&self, ctx: &Ctx, id: &str) -> Result<Option<Imported>> {
        let Some(n) = describe(ctx, id).await? else { return Ok(None) };
        if !is_live(&n) {
            return Err(AwsError {
                operation: "DescribeNatGateways",
                code: None,
                detail: format!(
                    "NAT gateway {id} is {}: only a pending or available gateway can be imported",
                    n.state().map_or("unknown", |s| s.as_str())
                ),
            });
        }
        let o = observed(&n);
        let mut unexpressed: Vec<(String, String)> =
            super::import_ec2::cloudformation_note(&tags::ec2_map(n.tags())).into_iter().collect();
        if n.connectivity_type().is_some_and(|c| c.as_str() == "private") {
            unexpressed.push(note("connectivity_type", "private"));
        }
        let ips: Vec<String> = n
            .nat_gateway_addresses()
            .iter()
            .map(|a| {
                format!(
                    "{} ({})",
                    a.public_ip().or(a.private_ip()).unwrap_or("?"),
                    a.allocation_id().unwrap_or("no allocation")
                )
            })
            .collect();
        if ips.len() > 1 {
            unexpressed.push(note("addresses", ips.join(", ")));
        }
        for ip in &ips {
            unexpressed.push(note(
                "elastic_ip",
                format!("{ip} stays yours: a destroy or replace of the gateway disassociates it and never releases it"),
            ));
        }
        Ok(Some(imported(Recorded { id: o.id, outputs: o.outputs }, o.attrs, unexpressed)))
    }

    /// Tags the gateway only: its Elastic IPs were not made by gpustack (often allowlisted
    /// egress addresses, terraform-aws-modules/vpc `external_nat_ip_ids`), so they never get
    /// the stack's tag, and neither `delete` nor the stray logic of `read_all` releases them.
    async fn tag_imported(&self, ctx: &Ctx, address: &str, id: &str, _outputs: &Attrs) -> Result<()> {
        tag(ctx, &[id.to_string()], address, &[]).await
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let allocation = elastic_ip(ctx, req).await?;
        let request = ctx
            .ec2
            .create_nat_gateway()
            .subnet_id(str_attr(req.inputs, "subnet"))
            .allocation_id(&allocation)
            // Idempotent: a retried create returns the same gateway.
            .client_token(req.token)
            .tag_specifications(tags::ec2_spec(ctx, ResourceType::Natgateway, req.address, req.inputs));
        let out = ctx.call(Service::Ec2, "CreateNatGateway", request.send()).await?;
        let id = out.nat_gateway().and_then(|n| n.nat_gateway_id()).unwrap_or_default().to_string();
        let gw = until_status(
            &format!("NAT gateway {id}"),
            TIMEOUT,
            || describe(ctx, &id),
            |n| match n {
                Some(n) if n.state() == Some(&NatGatewayState::Available) => Status::Reached(n),
                Some(n) if n.state() == Some(&NatGatewayState::Failed) => Status::Failed(AwsError {
                    operation: "CreateNatGateway",
                    code: n.failure_code().map(str::to_string),
                    detail: format!("NAT gateway {id} failed: {}", n.failure_message().unwrap_or("no reason given")),
                }),
                n => Status::Pending(
                    n.and_then(|n| n.state().map(|s| s.as_str().to_string())).unwrap_or("pending".into()),
                ),
            },
        )
        .await?;
        Ok(recorded(&gw))
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        // DescribeNatGateways names its filter parameter `Filter` (EC2 API reference).
        let pages = ctx.ec2.describe_nat_gateways().filter(tags::stack_filter(ctx)).into_paginator().send();
        let all =
            ctx.all_pages(Service::Ec2, "DescribeNatGateways", pages, |p| p.nat_gateways.unwrap_or_default()).await?;
        let mut found: Vec<Observed> =
            all.iter().filter(|n| n.state() != Some(&NatGatewayState::Deleted)).map(observed).collect();
        // Addresses held by a gateway that is pending or available stay with it; the others
        // (free, or held by a gateway on its way out) are released as strays.
        let held: Vec<&str> = all
            .iter()
            .filter(|n| is_live(n))
            .flat_map(|n| n.nat_gateway_addresses().iter().filter_map(|a| a.allocation_id()))
            .collect();
        for allocation in stack_addresses(ctx).await? {
            if !held.contains(&allocation.as_str()) {
                found.push(Observed {
                    address: None,
                    id: allocation,
                    attrs: Attrs::new(),
                    outputs: Attrs::new(),
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
        let gw = describe(ctx, id).await?;
        Ok(gw.as_ref().map(recorded).unwrap_or_else(|| Recorded::id_only(id)))
    }

    async fn delete(&self, ctx: &Ctx, _address: &str, id: &str, _inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        // An Elastic IP found by its tags with no live gateway (see `read_all`).
        if id.starts_with(ALLOCATION_PREFIX) {
            return release(ctx, id).await;
        }
        // This gateway's own address; during a replace the new gateway holds another one with
        // the same tag, which must stay.
        let (gw, mine) = tokio::try_join!(describe(ctx, id), stack_addresses(ctx))?;
        // Only addresses the stack allocated (tagged with it): an imported gateway's Elastic
        // IPs are only disassociated (review imp-net M3).
        let own: Vec<String> = gw
            .as_ref()
            .map(|n| n.nat_gateway_addresses().iter().filter_map(|a| a.allocation_id().map(str::to_string)).collect())
            .unwrap_or_else(Vec::new)
            .into_iter()
            .filter(|a| mine.contains(a))
            .collect();
        // One already deleting (an earlier delete was interrupted) is only waited for.
        if gw.is_some_and(|n| n.state() != Some(&NatGatewayState::Deleting)) {
            let request = ctx.ec2.delete_nat_gateway().nat_gateway_id(id);
            ctx.call(Service::Ec2, "DeleteNatGateway", request.send()).await.absent_ok()?;
        }
        // The Elastic IP stays associated until the gateway is deleted. A run killed from
        // here on leaves the address to the next refresh, which finds it by its tags.
        until_status(
            &format!("deletion of NAT gateway {id}"),
            TIMEOUT,
            || describe(ctx, id),
            |n| match n {
                None => Status::Reached(()),
                Some(n) if n.state() == Some(&NatGatewayState::Deleted) => Status::Reached(()),
                Some(n) => Status::Pending(n.state().map_or("deleting", |s| s.as_str()).to_string()),
            },
        )
        .await?;
        for allocation in own {
            release(ctx, &allocation).await?;
        }
        Ok(())
    }
}

/// Allocation ids (`eipalloc-…`): how a stray Elastic IP shows among the gateways' ids.
const ALLOCATION_PREFIX: &str = "eipalloc-";

/// Pending or available: a gateway that holds its address and may be adopted. One that is
/// deleting or deleted is on its way out, and a `failed` one "could not be created" (EC2 API
/// `NatGateway`): adopting it would route subnets into nothing, so it is deleted as a stray.
fn is_live(n: &NatGateway) -> bool {
    matches!(n.state(), Some(NatGatewayState::Pending | NatGatewayState::Available))
}

fn observed(n: &NatGateway) -> Observed {
    let all = tags::ec2_map(n.tags());
    let attrs = Attrs::from([
        ("subnet".into(), Value::str(n.subnet_id().unwrap_or_default())),
        ("tags".into(), tags::observed(&all)),
    ]);
    let mut o = Observed::tagged(&all, recorded(n), attrs);
    if !is_live(n) {
        // Never adopted for its address: a stray, deleted (or waited for) and its address released.
        o.address = None;
    }
    o
}

/// Releases an Elastic IP; one already released is fine.
async fn release(ctx: &Ctx, allocation: &str) -> Result<()> {
    // The address stays in use while a gateway holding it is deleting (minutes), and EC2 can
    // still count it as in use for a moment after the gateway reads `deleted`: retry that
    // refusal (AWS sends `AuthFailure` for it, the emulator's vpc_network.py cites the
    // reports) rather than leak a billed address.
    until(&format!("release of Elastic IP {allocation}"), TIMEOUT, || async {
        let request = ctx.ec2.release_address().allocation_id(allocation);
        match ctx.call(Service::Ec2, "ReleaseAddress", request.send()).await.absent_ok() {
            Ok(_) => Ok(Poll::Done(())),
            Err(e) if matches!(e.code.as_deref(), Some("AuthFailure" | "InvalidIPAddress.InUse")) => {
                Ok(Poll::Pending("in use".into()))
            }
            Err(e) => Err(e),
        }
    })
    .await
}

/// The gateway's Elastic IP, allocated and tagged on creation. One left free by an
/// interrupted create is not reused: refresh reported it as a stray, and this apply
/// releases it at the same time.
async fn elastic_ip(ctx: &Ctx, req: &Create<'_>) -> Result<String> {
    let request = ctx.ec2.allocate_address().domain(DomainType::Vpc).tag_specifications(tags::ec2_spec(
        ctx,
        ResourceType::ElasticIp,
        req.address,
        req.inputs,
    ));
    let out = ctx.call(Service::Ec2, "AllocateAddress", request.send()).await?;
    out.allocation_id().map(str::to_string).ok_or_else(|| AwsError {
        operation: "AllocateAddress",
        code: None,
        detail: "AllocateAddress answered without an allocation id".into(),
    })
}

/// The allocation ids of this stack's Elastic IPs.
async fn stack_addresses(ctx: &Ctx) -> Result<Vec<String>> {
    // DescribeAddresses is not paginated: one call returns every match.
    let request = ctx.ec2.describe_addresses().filters(tags::stack_filter(ctx));
    let out = ctx.call(Service::Ec2, "DescribeAddresses", request.send()).await?;
    Ok(out.addresses().iter().filter_map(|a| a.allocation_id().map(str::to_string)).collect())
}

async fn describe(ctx: &Ctx, id: &str) -> Result<Option<NatGateway>> {
    let request = ctx.ec2.describe_nat_gateways().nat_gateway_ids(id);
    let out = ctx.call(Service::Ec2, "DescribeNatGateways", request.send()).await.absent_ok()?;
    Ok(out.and_then(|o| o.nat_gateways().first().cloned()))
}

fn recorded(n: &NatGateway) -> Recorded {
    let id = n.nat_gateway_id().unwrap_or_default().to_string();
    let ip = n.nat_gateway_addresses().iter().find_map(|a| a.public_ip()).unwrap_or_default();
    Recorded { outputs: Attrs::from([("id".into(), Value::str(id.clone())), ("public_ip".into(), Value::str(ip))]), id }
}
