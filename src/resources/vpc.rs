//! `vpc`: a VPC with DNS support and DNS hostnames on (EKS needs both), optionally with an
//! internet gateway and a public route table (a default route to the gateway) that public
//! subnets associate with.

use async_trait::async_trait;
use aws_sdk_ec2::types::{AttributeBooleanValue, Filter, InternetGateway, ResourceType, RouteTable, VpcAttributeName};

use super::import_ec2::{extra_routes, imported, is_main, note, subnets_of, tag, vpc_route_tables};
use super::{
    Create, Imported, Kind, Observed, Recorded, Result, Schema, TAGS, bool_attr, existing, str_attr, strings_attr,
};
use crate::aws::{Absent, Ctx, Service, tags};
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::value::{Attrs, Value};

pub struct Vpc;

const ATTRS: &[Attr] = &[
    Attr::req("cidr_block", Ty::Str, OnChange::Replace),
    Attr::opt("internet_gateway", Ty::Bool, Default::Bool(false), OnChange::Update),
    // More IPv4 blocks (AssociateVpcCidrBlock), e.g. 100.64.0.0/16 for pod subnets: added and
    // removed in place. Checked offline against the VPC UG's restrictions (`cidr.rs`).
    Attr::opt("secondary_cidr_blocks", Ty::List(&Ty::Str), Default::EmptyList, OnChange::Update),
    // DNS support and DNS hostnames (observed as both on). Default true, as EKS needs; `false`
    // keeps hostnames off, which is what `import generate` writes for a VPC made by plain
    // CreateVpc (it leaves hostnames off: EC2 API reference `CreateVpc`/`ModifyVpcAttribute`,
    // VPC UG "DNS attributes"), so the generated plan changes nothing (review imp-net M5).
    Attr::opt("dns", Ty::Bool, Default::Bool(true), OnChange::Update),
    TAGS,
    existing::EXISTING,
];

/// Tag on the route table that public subnets use.
pub const PUBLIC_ROUTES: &str = "gpustack:public-routes";

impl Schema for Vpc {
    fn name(&self) -> &'static str {
        "vpc"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("id", Ty::Str), ("cidr_block", Ty::Str)]
    }
}

#[async_trait]
impl Kind for Vpc {
    fn actions(&self) -> &'static [&'static str] {
        &[
            "ec2:CreateVpc",
            "ec2:DeleteVpc",
            "ec2:DescribeVpcs",
            "ec2:ModifyVpcAttribute",
            "ec2:DescribeVpcAttribute",
            "ec2:CreateInternetGateway",
            "ec2:AttachInternetGateway",
            "ec2:DetachInternetGateway",
            "ec2:DeleteInternetGateway",
            "ec2:DescribeInternetGateways",
            "ec2:CreateRouteTable",
            "ec2:CreateRoute",
            "ec2:ReplaceRoute",
            "ec2:DeleteRouteTable",
            "ec2:DescribeRouteTables",
            "ec2:DisassociateRouteTable",
            // Delete: route tables no subnet owns go once no subnet is left.
            "ec2:DescribeSubnets",
            "ec2:AssociateVpcCidrBlock",
            "ec2:DisassociateVpcCidrBlock",
            // `[import]`: custom network ACLs are reported as what the language cannot say.
            "ec2:DescribeNetworkAcls",
            // Delete checks what would keep DeleteVpc from succeeding first (review M2).
            "ec2:DescribeSubnets",
            "ec2:DescribeSecurityGroups",
        ]
    }
    fn normalize(&self, inputs: &mut Attrs) {
        inputs.entry("dns".into()).or_insert(Value::Bool(true));
        // A set: the order blocks are written in means nothing to AWS. None is no list at all,
        // so state recorded before the attribute existed compares equal.
        match inputs.get_mut("secondary_cidr_blocks") {
            Some(Value::List(blocks)) if blocks.is_empty() => {
                inputs.remove("secondary_cidr_blocks");
            }
            Some(Value::List(blocks)) => {
                blocks.sort_by_key(|b| b.to_string());
                blocks.dedup();
            }
            _ => {}
        }
    }

    fn validate(&self, r: &crate::stack::Resource, diags: &mut Vec<crate::stack::Diagnostic>) {
        existing::validate(r, "vpc-", false, diags);
    }

    async fn read_existing(
        &self,
        ctx: &Ctx,
        lookups: &[existing::Lookup],
    ) -> Result<Vec<std::result::Result<Recorded, String>>> {
        existing::resolve(lookups, "VPC", "vpc-id", |filters| async move {
            let pages = ctx.ec2.describe_vpcs().set_filters(Some(filters)).into_paginator().send();
            let vpcs = ctx.all_pages(Service::Ec2, "DescribeVpcs", pages, |p| p.vpcs.unwrap_or_default()).await?;
            Ok(vpcs
                .iter()
                .map(|v| recorded(v.vpc_id().unwrap_or_default().to_string(), v.cidr_block().unwrap_or_default()))
                .collect())
        })
        .await
    }

    fn import_id(&self) -> Option<&'static str> {
        Some("vpc-…")
    }

    /// The VPC as the language says it: its primary and associated secondary IPv4 blocks,
    /// DNS (both attributes on, as refresh reads them), and `internet_gateway` when an
    /// attached gateway is the 0.0.0.0/0 target of a route table other than the main one —
    /// that table becomes the VPC's public route table (`tag_imported` marks it
    /// `gpustack:public-routes`, so public subnets and later updates find it instead of making
    /// another, and the VPC's delete removes it with the gateway, as for one gpustack made).
    /// Several such tables (one is chosen: the one most subnets use), extra routes on it, a
    /// gateway routed only from the main table (never deleted by gpustack: "You can't delete
    /// the main route table", VPC UG "Route tables"), IPv6 blocks, dedicated tenancy and
    /// custom network ACLs go to `unexpressed`.
    async fn import(&self, ctx: &Ctx, id: &str) -> Result<Option<Imported>> {
        let request = ctx.ec2.describe_vpcs().filters(Filter::builder().name("vpc-id").values(id).build());
        let out = ctx.call(Service::Ec2, "DescribeVpcs", request.send()).await?;
        let Some(v) = out.vpcs().iter().find(|v| v.vpc_id() == Some(id)).cloned() else { return Ok(None) };
        let layout = Layout::read(ctx, id).await?;
        let all = tags::ec2_map(v.tags());
        let secondary = secondary_blocks(&v).into_iter().map(|(cidr, _)| Value::str(cidr)).collect();
        let mut attrs = Attrs::from([
            ("cidr_block".into(), Value::str(v.cidr_block().unwrap_or_default())),
            ("secondary_cidr_blocks".into(), Value::List(secondary)),
            ("dns".into(), Value::Bool(dns_enabled(ctx, id).await?)),
            ("internet_gateway".into(), Value::Bool(layout.public.is_some())),
            ("tags".into(), tags::observed(&all)),
        ]);
        self.normalize(&mut attrs);
        let mut unexpressed = layout.unexpressed;
        unexpressed.extend(super::import_ec2::cloudformation_note(&all));
        for b in v.ipv6_cidr_block_association_set() {
            unexpressed.push(note("ipv6_cidr_block", b.ipv6_cidr_block().unwrap_or_default()));
        }
        if let Some(t) = v.instance_tenancy().filter(|t| t.as_str() != "default") {
            unexpressed.push(note("instance_tenancy", t.as_str()));
        }
        let request = ctx.ec2.describe_network_acls().filters(Filter::builder().name("vpc-id").values(id).build());
        let acls = ctx.call(Service::Ec2, "DescribeNetworkAcls", request.send()).await?;
        for acl in acls.network_acls().iter().filter(|a| a.is_default() != Some(true)) {
            let subnets: Vec<&str> = acl.associations().iter().filter_map(|a| a.subnet_id()).collect();
            let acl_id = acl.network_acl_id().unwrap_or_default();
            unexpressed.push(note("network_acl", format!("{acl_id} (subnets: {})", subnets.join(", "))));
        }
        let rec = recorded(id.to_string(), v.cidr_block().unwrap_or_default());
        Ok(Some(imported(rec, attrs, unexpressed)))
    }

    /// Tags the VPC, its attached internet gateway and the route table [`Vpc::import`] took as
    /// the public one (with the `gpustack:public-routes` marker): refresh then sees the VPC's
    /// gateway as complete, and delete removes gateway and table before the VPC.
    async fn tag_imported(&self, ctx: &Ctx, address: &str, id: &str, _outputs: &Attrs) -> Result<()> {
        let layout = Layout::read(ctx, id).await?;
        let mut ids = vec![id.to_string()];
        // The gateway only when the file says `internet_gateway = true` (a public table routes
        // to it): one routed only from the main table stays foreign, and destroy never deletes
        // it (review imp-net m2).
        if layout.public.is_some() {
            ids.extend(layout.gateway.clone());
        }
        tag(ctx, &ids, address, &[]).await?;
        if let Some(rt) = &layout.public {
            tag(ctx, std::slice::from_ref(rt), address, &[(PUBLIC_ROUTES, "true")]).await?;
        }
        Ok(())
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let request = ctx
            .ec2
            .create_vpc()
            .cidr_block(str_attr(req.inputs, "cidr_block"))
            .tag_specifications(tags::ec2_spec(ctx, ResourceType::Vpc, req.address, req.inputs));
        let out = ctx.call(Service::Ec2, "CreateVpc", request.send()).await?;
        let id = out.vpc().and_then(|v| v.vpc_id()).unwrap_or_default().to_string();
        // `dns = false`: CreateVpc already leaves hostnames off.
        if bool_attr(req.inputs, "dns") {
            enable_dns(ctx, &id).await?;
        }
        sync_secondary(ctx, &id, &strings_attr(req.inputs, "secondary_cidr_blocks")).await?;
        if bool_attr(req.inputs, "internet_gateway") {
            attach_gateway(ctx, req.address, &id, req.inputs, req.token).await?;
        }
        Ok(recorded(id, str_attr(req.inputs, "cidr_block")))
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        // A VPC has its internet gateway when the gateway is attached and the public route
        // table exists: an interrupted create can leave one without the other, and then the
        // plan shows an update that finishes the job. One paged call each for the whole stack,
        // all three at once.
        let (mut found, gateways, routed) =
            tokio::try_join!(stack_vpcs(ctx), stack_gateways(ctx), stack_public_route_vpcs(ctx))?;
        // DescribeVpcs does not carry the DNS attributes: two reads per VPC (stacks have one
        // or two VPCs), so a VPC whose DNS was turned off outside gpustack shows as drift. Every
        // VPC's at once.
        let mut dns = tokio::task::JoinSet::new();
        for (i, o) in found.iter().enumerate() {
            let (ctx, id) = (ctx.clone(), o.id.clone());
            dns.spawn(async move { (i, dns_enabled(&ctx, &id).await) });
        }
        while let Some(joined) = dns.join_next().await {
            let (i, on) = joined.map_err(|e| crate::aws::AwsError {
                operation: "DescribeVpcAttribute",
                code: None,
                detail: format!("the read stopped: {e}"),
            })?;
            found[i].attrs.insert("dns".into(), Value::Bool(on?));
        }
        for o in &mut found {
            // Complete: a gateway attached to this VPC, and a public table routing 0.0.0.0/0
            // to it (a run killed between CreateRouteTable and CreateRoute leaves none).
            let complete = gateways.iter().any(|(igw, vpc)| {
                vpc.as_deref() == Some(o.id.as_str()) && routed.iter().any(|(v, to)| *v == o.id && to == igw)
            });
            o.attrs.insert("internet_gateway".into(), Value::Bool(complete));
        }
        Ok(found)
    }

    async fn update(
        &self,
        ctx: &Ctx,
        address: &str,
        id: &str,
        old: &Attrs,
        new: &Attrs,
        changed: &[String],
    ) -> Result<Recorded> {
        if changed.iter().any(|c| c == "dns") {
            if bool_attr(new, "dns") {
                enable_dns(ctx, id).await?;
            } else {
                disable_hostnames(ctx, id).await?;
            }
        }
        if changed.iter().any(|c| c == "secondary_cidr_blocks") {
            sync_secondary(ctx, id, &strings_attr(new, "secondary_cidr_blocks")).await?;
        }
        if changed.iter().any(|c| c == "internet_gateway") {
            if bool_attr(new, "internet_gateway") {
                attach_gateway(ctx, address, id, new, &uuid::Uuid::new_v4().to_string()).await?;
            } else {
                remove_gateways(ctx, address, id).await?;
            }
        }
        if changed.iter().any(|c| c == "tags") {
            tags::sync_ec2(ctx, id, old, new).await?;
        }
        Ok(recorded(id.to_string(), str_attr(new, "cidr_block")))
    }

    async fn delete(&self, ctx: &Ctx, address: &str, id: &str, _inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        // Review imp-net M2: check first, so a VPC that still holds what the stack does not
        // own (an imported VPC's other subnets, tables or groups) keeps its gateway and public
        // table instead of losing them before DeleteVpc refuses.
        let blockers = foreign_dependencies(ctx, id).await?;
        if !blockers.is_empty() {
            return Err(crate::aws::AwsError {
                operation: "DeleteVpc",
                code: Some("DependencyViolation".into()),
                detail: format!(
                    "{id} still holds {} that this stack does not own; AWS deletes a VPC only once its subnets, \
                     route tables (but the main one) and security groups (but `default`) are gone (EC2 API \
                     reference `DeleteVpc`). Delete them, or import them into the stack and apply, then destroy \
                     again; `{address}` and its internet gateway were not changed",
                    blockers.join(", ")
                ),
            });
        }
        remove_gateways(ctx, address, id).await?;
        remove_orphan_tables(ctx, id).await?;
        ctx.call(Service::Ec2, "DeleteVpc", ctx.ec2.delete_vpc().vpc_id(id).send()).await.absent_ok()?;
        Ok(())
    }
}

/// Turns on DNS support and DNS hostnames: EKS's private endpoint and interface endpoints
/// with private DNS need both (EKS UG `cluster-endpoint`; VPC UG "DNS attributes"), and
/// CreateVpc leaves hostnames off. ModifyVpcAttribute takes one attribute per call
/// (EC2 API reference), support first (hostnames need it).
async fn enable_dns(ctx: &Ctx, vpc: &str) -> Result<()> {
    let on = || AttributeBooleanValue::builder().value(true).build();
    for hostnames in [false, true] {
        let call = ctx.ec2.modify_vpc_attribute().vpc_id(vpc);
        let call = if hostnames { call.enable_dns_hostnames(on()) } else { call.enable_dns_support(on()) };
        ctx.call(Service::Ec2, "ModifyVpcAttribute", call.send()).await?;
    }
    Ok(())
}

/// `dns = false`: turns DNS hostnames off and leaves DNS support as it is (observed `dns` is
/// both on, so hostnames off is enough to read false).
async fn disable_hostnames(ctx: &Ctx, vpc: &str) -> Result<()> {
    let off = AttributeBooleanValue::builder().value(false).build();
    let call = ctx.ec2.modify_vpc_attribute().vpc_id(vpc).enable_dns_hostnames(off);
    ctx.call(Service::Ec2, "ModifyVpcAttribute", call.send()).await?;
    Ok(())
}

/// The VPC's secondary IPv4 blocks that are associated (or on their way): (CIDR,
/// association id). The primary block is the VPC's `CidrBlock`; a disassociated block stays
/// listed for a while with state `disassociated` (EC2 API reference, `VpcCidrBlockState`).
fn secondary_blocks(v: &aws_sdk_ec2::types::Vpc) -> Vec<(String, String)> {
    use aws_sdk_ec2::types::VpcCidrBlockStateCode as S;
    v.cidr_block_association_set()
        .iter()
        .filter(|a| a.cidr_block() != v.cidr_block())
        .filter(|a| matches!(a.cidr_block_state().and_then(|s| s.state()), Some(S::Associated | S::Associating)))
        .filter_map(|a| Some((a.cidr_block()?.to_string(), a.association_id()?.to_string())))
        .collect()
}

/// Makes the VPC's secondary IPv4 blocks exactly `want`: AssociateVpcCidrBlock for each
/// missing block, DisassociateVpcCidrBlock (by association id) for each extra one. AWS
/// refuses to remove a block that still has subnets (botocore `DisassociateVpcCidrBlock`:
/// "You must detach or delete all gateways and resources that are associated with the CIDR
/// block"): the engine deletes leaving subnets before this update (`engine::build_ops`).
/// Each call is followed by a wait for `associated` / `disassociated`: "The CIDR block is
/// ready for you to use when it's in the associated state" (VPC UG, "Adding IPv4 CIDR
/// blocks to a VPC", `awsdocs/amazon-vpc-user-guide` `doc_source/VPC_Subnets.md`); a subnet
/// created in a block still `associating` would be refused. Terraform waits the same way
/// (`vpc_ipv4_cidr_block_association.go`, 10 minutes).
async fn sync_secondary(ctx: &Ctx, vpc: &str, want: &[String]) -> Result<()> {
    let request = ctx.ec2.describe_vpcs().filters(Filter::builder().name("vpc-id").values(vpc).build());
    let found = ctx.call(Service::Ec2, "DescribeVpcs", request.send()).await?;
    let have = found.vpcs().first().map(secondary_blocks).unwrap_or_default();
    for (cidr, association) in have.iter().filter(|(c, _)| !want.contains(c)) {
        let request = ctx.ec2.disassociate_vpc_cidr_block().association_id(association);
        ctx.call(Service::Ec2, "DisassociateVpcCidrBlock", request.send()).await.absent_ok()?;
        wait_block(ctx, vpc, cidr, association, "DisassociateVpcCidrBlock").await?;
    }
    for cidr in want.iter().filter(|c| !have.iter().any(|(h, _)| h == *c)) {
        let request = ctx.ec2.associate_vpc_cidr_block().vpc_id(vpc).cidr_block(cidr);
        let out = ctx.call(Service::Ec2, "AssociateVpcCidrBlock", request.send()).await?;
        let association = out.cidr_block_association().and_then(|a| a.association_id()).unwrap_or_default();
        wait_block(ctx, vpc, cidr, association, "AssociateVpcCidrBlock").await?;
    }
    Ok(())
}

/// Waits (backing off, up to 10 minutes) until the association of `cidr` is `associated`
/// (after `AssociateVpcCidrBlock`) or `disassociated` / gone (after Disassociate); `failing`
/// or `failed` ends the wait with AWS's status message.
async fn wait_block(ctx: &Ctx, vpc: &str, cidr: &str, association: &str, operation: &'static str) -> Result<()> {
    use crate::aws::wait::{Status, until_status};
    use aws_sdk_ec2::types::VpcCidrBlockStateCode as S;
    let adding = operation == "AssociateVpcCidrBlock";
    let describe = || async {
        let request = ctx.ec2.describe_vpcs().filters(Filter::builder().name("vpc-id").values(vpc).build());
        let out = ctx.call(Service::Ec2, "DescribeVpcs", request.send()).await?;
        Ok(out
            .vpcs()
            .first()
            .and_then(|v| v.cidr_block_association_set().iter().find(|a| a.association_id() == Some(association)))
            .and_then(|a| a.cidr_block_state().cloned()))
    };
    let what = format!("block {cidr} of {vpc}");
    until_status(&what, std::time::Duration::from_secs(600), describe, |state| {
        match (state.as_ref().and_then(|s| s.state()), adding) {
            (Some(S::Associated), true) | (Some(S::Disassociated) | None, false) => Status::Reached(()),
            (Some(S::Failed | S::Failing), _) => Status::Failed(crate::aws::AwsError {
                operation,
                code: None,
                detail: format!(
                    "{what} is {}: {}",
                    state.as_ref().and_then(|s| s.state()).map_or("failed", |s| s.as_str()),
                    state.as_ref().and_then(|s| s.status_message()).unwrap_or("no message")
                ),
            }),
            (Some(other), _) => Status::Pending(other.as_str().to_string()),
            (None, true) => Status::Pending("not listed yet".into()),
        }
    })
    .await?;
    Ok(())
}

/// True when both DNS attributes are on.
/// The VPCs tagged for this stack, as refresh sees them (without `dns` and `internet_gateway`).
async fn stack_vpcs(ctx: &Ctx) -> Result<Vec<Observed>> {
    let pages = ctx.ec2.describe_vpcs().filters(tags::stack_filter(ctx)).into_paginator().send();
    let vpcs = ctx.all_pages(Service::Ec2, "DescribeVpcs", pages, |p| p.vpcs.unwrap_or_default()).await?;
    Ok(vpcs
        .iter()
        .map(|v| {
            let all = tags::ec2_map(v.tags());
            let id = v.vpc_id().unwrap_or_default().to_string();
            let secondary = secondary_blocks(v).into_iter().map(|(cidr, _)| Value::str(cidr)).collect();
            let attrs = Attrs::from([
                ("cidr_block".into(), Value::str(v.cidr_block().unwrap_or_default())),
                ("secondary_cidr_blocks".into(), Value::List(secondary)),
                ("tags".into(), tags::observed(&all)),
            ]);
            Observed::tagged(&all, recorded(id, v.cidr_block().unwrap_or_default()), attrs)
        })
        .collect())
}

/// Both DNS attributes on (read together).
async fn dns_enabled(ctx: &Ctx, vpc: &str) -> Result<bool> {
    let read = |attribute: VpcAttributeName| async move {
        let request = ctx.ec2.describe_vpc_attribute().vpc_id(vpc).attribute(attribute.clone());
        let out = ctx.call(Service::Ec2, "DescribeVpcAttribute", request.send()).await?;
        Ok(match attribute {
            VpcAttributeName::EnableDnsSupport => out.enable_dns_support().and_then(|v| v.value()),
            _ => out.enable_dns_hostnames().and_then(|v| v.value()),
        })
    };
    let (support, hostnames) =
        tokio::try_join!(read(VpcAttributeName::EnableDnsSupport), read(VpcAttributeName::EnableDnsHostnames))?;
    Ok(support == Some(true) && hostnames == Some(true))
}

fn recorded(id: String, cidr_block: &str) -> Recorded {
    Recorded {
        outputs: Attrs::from([("id".into(), Value::str(id.clone())), ("cidr_block".into(), Value::str(cidr_block))]),
        id,
    }
}

/// Gives the VPC an attached, tagged internet gateway and the public route table.
/// Idempotent: a gateway or table left by an interrupted run is found by its tags and reused.
async fn attach_gateway(ctx: &Ctx, address: &str, vpc: &str, inputs: &Attrs, token: &str) -> Result<()> {
    let mine = gateways(ctx, vec![tags::stack_filter(ctx), address_filter(address)]).await?;
    let existing =
        mine.iter().find(|g| g.attachments().is_empty() || g.attachments().iter().any(|a| a.vpc_id() == Some(vpc)));
    let igw_id = match existing {
        Some(g) => g.internet_gateway_id().unwrap_or_default().to_string(),
        None => {
            let request = ctx.ec2.create_internet_gateway().tag_specifications(tags::ec2_spec(
                ctx,
                ResourceType::InternetGateway,
                address,
                inputs,
            ));
            let out = ctx.call(Service::Ec2, "CreateInternetGateway", request.send()).await?;
            out.internet_gateway().and_then(|g| g.internet_gateway_id()).unwrap_or_default().to_string()
        }
    };
    if !existing.is_some_and(|g| g.attachments().iter().any(|a| a.vpc_id() == Some(vpc))) {
        let request = ctx.ec2.attach_internet_gateway().internet_gateway_id(&igw_id).vpc_id(vpc);
        ctx.call(Service::Ec2, "AttachInternetGateway", request.send()).await?;
    }
    let existing = public_route_tables(ctx, vpc).await?;
    let (rt_id, default) = match existing.first() {
        Some(rt) => (rt.route_table_id().unwrap_or_default().to_string(), default_route(rt).map(str::to_string)),
        None => {
            let mut spec = tags::ec2_spec(ctx, ResourceType::RouteTable, address, inputs);
            spec.tags
                .get_or_insert_with(Vec::new)
                .push(aws_sdk_ec2::types::Tag::builder().key(PUBLIC_ROUTES).value("true").build());
            let request = ctx.ec2.create_route_table().vpc_id(vpc).client_token(token).tag_specifications(spec);
            let rt = ctx.call(Service::Ec2, "CreateRouteTable", request.send()).await?;
            (rt.route_table().and_then(|r| r.route_table_id()).unwrap_or_default().to_string(), None)
        }
    };
    // A table that lost its route (or never got it: a run killed between the two calls) is
    // repaired; one routing elsewhere (a gateway replaced since) is pointed at this one.
    match default {
        Some(to) if to == igw_id => Ok(()),
        Some(_) => {
            let request =
                ctx.ec2.replace_route().route_table_id(&rt_id).destination_cidr_block("0.0.0.0/0").gateway_id(&igw_id);
            ctx.call(Service::Ec2, "ReplaceRoute", request.send()).await.map(|_| ())
        }
        None => {
            let request =
                ctx.ec2.create_route().route_table_id(&rt_id).destination_cidr_block("0.0.0.0/0").gateway_id(&igw_id);
            ctx.call(Service::Ec2, "CreateRoute", request.send()).await.map(|_| ())
        }
    }
}

/// Where a route table sends 0.0.0.0/0 (a gateway id), if anywhere.
fn default_route(rt: &RouteTable) -> Option<&str> {
    rt.routes().iter().find(|r| r.destination_cidr_block() == Some("0.0.0.0/0")).and_then(|r| r.gateway_id())
}

fn address_filter(address: &str) -> Filter {
    Filter::builder().name(format!("tag:{}", tags::ADDRESS)).values(address).build()
}

/// How a VPC found by `[import]` reaches the internet, in gpustack's terms.
struct Layout {
    /// The attached internet gateway.
    gateway: Option<String>,
    /// The route table that is the VPC's public one: not the main table, 0.0.0.0/0 to the gateway.
    public: Option<String>,
    unexpressed: Vec<(String, String)>,
}

impl Layout {
    async fn read(ctx: &Ctx, vpc: &str) -> Result<Layout> {
        let attached = gateways(ctx, vec![Filter::builder().name("attachment.vpc-id").values(vpc).build()]).await?;
        let gateway = attached.first().and_then(|g| g.internet_gateway_id()).map(str::to_string);
        let tables = vpc_route_tables(ctx, vpc).await?;
        let mut unexpressed = vec![];
        let to_gateway = |rt: &&RouteTable| gateway.is_some() && default_route(rt) == gateway.as_deref();
        // The public table: most subnets first, then the lowest id (a stable choice).
        let mut public: Vec<&RouteTable> = tables.iter().filter(|rt| !is_main(rt)).filter(to_gateway).collect();
        public.sort_by_key(|rt| (std::cmp::Reverse(subnets_of(rt).len()), rt.route_table_id().map(str::to_string)));
        for rt in public.iter().skip(1) {
            let rid = rt.route_table_id().unwrap_or_default();
            unexpressed.push(note(
                "route_table",
                format!(
                    "{rid}: a second public route table (0.0.0.0/0 via the internet gateway) for {}",
                    subnets_of(rt).join(", ")
                ),
            ));
        }
        if let Some(rt) = public.first() {
            let extra = extra_routes(rt, &["0.0.0.0/0"]);
            if !extra.is_empty() {
                let rid = rt.route_table_id().unwrap_or_default();
                unexpressed.push(note("route_table", format!("{rid} (public) also routes {}", extra.join(", "))));
            }
        }
        if let Some(main) = tables.iter().find(|rt| is_main(rt)) {
            let extra = extra_routes(main, &[]);
            if !extra.is_empty() {
                let rid = main.route_table_id().unwrap_or_default();
                unexpressed.push(note("main_route_table", format!("{rid} routes {}", extra.join(", "))));
            }
        }
        if gateway.is_some() && public.is_empty() {
            unexpressed.push(note(
                "internet_gateway",
                format!(
                    "{} is attached but no route table other than the main one routes 0.0.0.0/0 to it",
                    gateway.clone().unwrap_or_default()
                ),
            ));
        }
        for g in attached.iter().skip(1) {
            unexpressed.push(note("internet_gateway", g.internet_gateway_id().unwrap_or_default()));
        }
        let public = public.first().and_then(|rt| rt.route_table_id()).map(str::to_string);
        Ok(Layout { gateway, public, unexpressed })
    }
}

/// The internet gateways that match every filter.
async fn gateways(ctx: &Ctx, filters: Vec<Filter>) -> Result<Vec<InternetGateway>> {
    let pages = ctx.ec2.describe_internet_gateways().set_filters(Some(filters)).into_paginator().send();
    ctx.all_pages(Service::Ec2, "DescribeInternetGateways", pages, |p| p.internet_gateways.unwrap_or_default()).await
}

/// The VPC's public route tables (those gpustack made for its internet gateway).
pub async fn public_route_tables(ctx: &Ctx, vpc: &str) -> Result<Vec<RouteTable>> {
    let pages = ctx
        .ec2
        .describe_route_tables()
        .filters(Filter::builder().name("vpc-id").values(vpc).build())
        .filters(Filter::builder().name(format!("tag:{PUBLIC_ROUTES}")).values("true").build())
        .into_paginator()
        .send();
    ctx.all_pages(Service::Ec2, "DescribeRouteTables", pages, |p| p.route_tables.unwrap_or_default()).await
}

/// What keeps DeleteVpc from succeeding once the stack's own parts are gone: "You must detach
/// or delete all gateways and resources that are associated with the VPC before you can delete
/// it. For example, you must terminate all instances running in the VPC, delete all security
/// groups associated with the VPC (except the default one), delete all route tables associated
/// with the VPC (except the default one), and so on" (botocore ec2 2016-11-15 `DeleteVpc`).
/// Subnets, internet gateways not the stack's, route tables other than the main one and the
/// `gpustack:public-routes` ones (the delete removes those), and security groups other than
/// `default`.
async fn foreign_dependencies(ctx: &Ctx, vpc: &str) -> Result<Vec<String>> {
    let by_vpc = || Filter::builder().name("vpc-id").values(vpc).build();
    let subnets = ctx.all_pages(
        Service::Ec2,
        "DescribeSubnets",
        ctx.ec2.describe_subnets().filters(by_vpc()).into_paginator().send(),
        |p| p.subnets.unwrap_or_default(),
    );
    let groups = ctx.all_pages(
        Service::Ec2,
        "DescribeSecurityGroups",
        ctx.ec2.describe_security_groups().filters(by_vpc()).into_paginator().send(),
        |p| p.security_groups.unwrap_or_default(),
    );
    let attached = gateways(ctx, vec![Filter::builder().name("attachment.vpc-id").values(vpc).build()]);
    let (subnets, tables, groups, attached) = tokio::try_join!(subnets, vpc_route_tables(ctx, vpc), groups, attached)?;
    let mut out: Vec<String> = subnets.iter().filter_map(|s| s.subnet_id()).map(str::to_string).collect();
    // An attached internet gateway not tagged for this stack (`remove_gateways` leaves it).
    out.extend(
        attached
            .iter()
            .filter(|g| tags::ec2_map(g.tags()).get(tags::STACK).map(String::as_str) != Some(ctx.stack.as_str()))
            .filter_map(|g| g.internet_gateway_id())
            .map(str::to_string),
    );
    let public = |rt: &RouteTable| {
        rt.tags().iter().any(|t| t.key() == Some(PUBLIC_ROUTES) && t.value() == Some("true"))
            && tags::ec2_map(rt.tags()).get(tags::STACK).map(String::as_str) == Some(ctx.stack.as_str())
    };
    // Tables block only while subnets are left: once none is, the VPC's leftover tables (a
    // private table shared by imported subnets, review imp-gen B1) go with it
    // (`remove_orphan_tables`).
    if !subnets.is_empty() {
        out.extend(
            tables
                .iter()
                .filter(|rt| !is_main(rt) && !public(rt))
                .filter_map(|rt| rt.route_table_id())
                .map(str::to_string),
        );
    }
    out.extend(
        groups.iter().filter(|g| g.group_name() != Some("default")).filter_map(|g| g.group_id()).map(str::to_string),
    );
    Ok(out)
}

/// Removes the VPC's public route tables and its gateways: those attached to it and
/// any unattached one tagged with its address (left by an interrupted create).
/// Route tables left with no subnet once the stack's subnets are gone (an imported VPC's
/// private table shared by several subnets, terraform-aws-modules/vpc `single_nat_gateway`:
/// no subnet owns it, review imp-gen B1): DeleteVpc refuses while any non-main table is
/// left ("you must … delete all … route tables associated with the VPC", botocore ec2
/// `DeleteVpc`). Only once the VPC has no subnet left (else it is in use and DeleteVpc says
/// so); DescribeSubnets' `MaxResults` is 5 at least (botocore).
async fn remove_orphan_tables(ctx: &Ctx, vpc: &str) -> Result<()> {
    let filter = || Filter::builder().name("vpc-id").values(vpc).build();
    let call = ctx.ec2.describe_subnets().filters(filter()).max_results(5);
    let left = ctx.call(Service::Ec2, "DescribeSubnets", call.send()).await?;
    if !left.subnets().is_empty() {
        return Ok(());
    }
    let pages = ctx.ec2.describe_route_tables().filters(filter()).into_paginator().send();
    let tables =
        ctx.all_pages(Service::Ec2, "DescribeRouteTables", pages, |p| p.route_tables.unwrap_or_default()).await?;
    for rt in tables.iter().filter(|rt| !rt.associations().iter().any(|a| a.main().unwrap_or(false))) {
        for a in rt.associations() {
            if let Some(aid) = a.route_table_association_id() {
                let request = ctx.ec2.disassociate_route_table().association_id(aid);
                ctx.call(Service::Ec2, "DisassociateRouteTable", request.send()).await.absent_ok()?;
            }
        }
        if let Some(id) = rt.route_table_id() {
            let request = ctx.ec2.delete_route_table().route_table_id(id);
            ctx.call(Service::Ec2, "DeleteRouteTable", request.send()).await.absent_ok()?;
        }
    }
    Ok(())
}

async fn remove_gateways(ctx: &Ctx, address: &str, vpc: &str) -> Result<()> {
    for rt in public_route_tables(ctx, vpc).await? {
        for a in rt.associations().iter().filter(|a| !a.main().unwrap_or(false)) {
            if let Some(aid) = a.route_table_association_id() {
                let request = ctx.ec2.disassociate_route_table().association_id(aid);
                ctx.call(Service::Ec2, "DisassociateRouteTable", request.send()).await.absent_ok()?;
            }
        }
        if let Some(id) = rt.route_table_id() {
            let request = ctx.ec2.delete_route_table().route_table_id(id);
            ctx.call(Service::Ec2, "DeleteRouteTable", request.send()).await.absent_ok()?;
        }
    }
    let mut found: Vec<InternetGateway> = vec![];
    for filter in [Filter::builder().name("attachment.vpc-id").values(vpc).build(), address_filter(address)] {
        for g in gateways(ctx, vec![filter, tags::stack_filter(ctx)]).await? {
            let attached_elsewhere = g.attachments().iter().any(|a| a.vpc_id().is_some_and(|v| v != vpc));
            if !attached_elsewhere && !found.iter().any(|x| x.internet_gateway_id() == g.internet_gateway_id()) {
                found.push(g);
            }
        }
    }
    for g in found {
        let Some(gid) = g.internet_gateway_id() else { continue };
        if !g.attachments().is_empty() {
            let request = ctx.ec2.detach_internet_gateway().internet_gateway_id(gid).vpc_id(vpc);
            ctx.call(Service::Ec2, "DetachInternetGateway", request.send()).await.absent_ok()?;
        }
        let request = ctx.ec2.delete_internet_gateway().internet_gateway_id(gid);
        ctx.call(Service::Ec2, "DeleteInternetGateway", request.send()).await.absent_ok()?;
    }
    Ok(())
}

/// This stack's internet gateways: (gateway id, attached VPC).
async fn stack_gateways(ctx: &Ctx) -> Result<Vec<(String, Option<String>)>> {
    let pages = ctx.ec2.describe_internet_gateways().filters(tags::stack_filter(ctx)).into_paginator().send();
    let all = ctx
        .all_pages(Service::Ec2, "DescribeInternetGateways", pages, |p| p.internet_gateways.unwrap_or_default())
        .await?;
    Ok(all
        .iter()
        .map(|g| {
            let vpc = g.attachments().first().and_then(|a| a.vpc_id()).map(str::to_string);
            (g.internet_gateway_id().unwrap_or_default().to_string(), vpc)
        })
        .collect())
}

/// This stack's public route tables: (VPC, the gateway its 0.0.0.0/0 route goes to, "" for none).
async fn stack_public_route_vpcs(ctx: &Ctx) -> Result<Vec<(String, String)>> {
    let pages = ctx
        .ec2
        .describe_route_tables()
        .filters(tags::stack_filter(ctx))
        .filters(Filter::builder().name(format!("tag:{PUBLIC_ROUTES}")).values("true").build())
        .into_paginator()
        .send();
    let tables =
        ctx.all_pages(Service::Ec2, "DescribeRouteTables", pages, |p| p.route_tables.unwrap_or_default()).await?;
    Ok(tables
        .iter()
        .filter_map(|r| Some((r.vpc_id()?.to_string(), default_route(r).unwrap_or_default().to_string())))
        .collect())
}
