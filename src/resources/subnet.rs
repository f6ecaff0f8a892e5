//! `subnet`: a subnet in one availability zone. `public = true` maps public IPs
//! on launch and associates the VPC's public route table (from `vpc.internet_gateway`).
//! `nat_gateway` gives a private subnet a route table of its own with 0.0.0.0/0 through
//! that gateway (changing it is an in-place route change). Everything else but tags
//! replaces, deleting the old subnet first (its CIDR is taken).

use async_trait::async_trait;
use aws_sdk_ec2::types::{AttributeBooleanValue, Filter, ResourceType};

use super::import_ec2::{default_route, extra_routes, imported, is_main, note, subnets_of, tag, vpc_route_tables};
use super::{
    Create, Imported, Kind, Observed, Recorded, ReplaceOrder, Result, Schema, TAGS, bool_attr, existing, str_attr,
};
use crate::aws::{Absent, AwsError, Ctx, Service, tags};
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::value::{Attrs, Value};

pub struct Subnet;

const ATTRS: &[Attr] = &[
    Attr::req("vpc", Ty::Str, OnChange::Replace),
    Attr::req("cidr_block", Ty::Str, OnChange::Replace),
    Attr::req("availability_zone", Ty::Str, OnChange::Replace),
    Attr::opt("public", Ty::Bool, Default::Bool(false), OnChange::Replace),
    // A NAT gateway id: the subnet gets a route table of its own with 0.0.0.0/0 through it.
    Attr::opt("nat_gateway", Ty::Str, Default::None, OnChange::Update),
    TAGS,
    existing::EXISTING,
];

/// Tag on a subnet's own route table (its NAT route): the subnet id it serves.
pub const ROUTES_FOR: &str = "gpustack:routes-for";

impl Schema for Subnet {
    fn name(&self) -> &'static str {
        "subnet"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[("id", Ty::Str), ("availability_zone", Ty::Str), ("cidr_block", Ty::Str), ("vpc_id", Ty::Str)]
    }
}

#[async_trait]
impl Kind for Subnet {
    fn actions(&self) -> &'static [&'static str] {
        &[
            "ec2:CreateSubnet",
            "ec2:DeleteSubnet",
            "ec2:DescribeSubnets",
            "ec2:ModifySubnetAttribute",
            "ec2:AssociateRouteTable",
            "ec2:DisassociateRouteTable",
            "ec2:CreateRouteTable",
            "ec2:DeleteRouteTable",
            "ec2:CreateRoute",
            "ec2:ReplaceRoute",
            // Removing `nat_gateway` from an imported table that keeps other routes (review M7).
            "ec2:DeleteRoute",
            "ec2:DescribeRouteTables",
        ]
    }
    fn replace_order(&self) -> ReplaceOrder {
        ReplaceOrder::DeleteBeforeCreate
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        let vpc = str_attr(req.inputs, "vpc");
        let cidr = str_attr(req.inputs, "cidr_block");
        let request = ctx
            .ec2
            .create_subnet()
            .vpc_id(vpc)
            .cidr_block(cidr)
            .availability_zone(str_attr(req.inputs, "availability_zone"))
            .tag_specifications(tags::ec2_spec(ctx, ResourceType::Subnet, req.address, req.inputs));
        let (id, az) = match ctx.call(Service::Ec2, "CreateSubnet", request.send()).await {
            Ok(out) => {
                let sub = out.subnet();
                (
                    sub.and_then(|x| x.subnet_id()).unwrap_or_default().to_string(),
                    sub.and_then(|x| x.availability_zone()).unwrap_or_default().to_string(),
                )
            }
            // The CIDR is taken: by this very resource (a create that raced a crash) it is adopted.
            Err(e) if e.has_code("InvalidSubnet.Conflict") => {
                let request = ctx
                    .ec2
                    .describe_subnets()
                    .filters(Filter::builder().name("vpc-id").values(vpc).build())
                    .filters(Filter::builder().name("cidr-block").values(cidr).build());
                let found = ctx.call(Service::Ec2, "DescribeSubnets", request.send()).await?;
                let Some(sn) = found.subnets().iter().find(|sn| tags::is_ours(ctx, sn.tags(), req.address)) else {
                    return Err(e.taken_by_other("choose a CIDR no other subnet of the VPC uses"));
                };
                (sn.subnet_id().unwrap_or_default().to_string(), sn.availability_zone().unwrap_or_default().to_string())
            }
            Err(e) => return Err(e),
        };
        let nat = str_attr(req.inputs, "nat_gateway");
        if !nat.is_empty() {
            route_through_nat(ctx, req.address, vpc, &id, nat, req.inputs).await?;
        }
        if bool_attr(req.inputs, "public") {
            let request = ctx
                .ec2
                .modify_subnet_attribute()
                .subnet_id(&id)
                .map_public_ip_on_launch(AttributeBooleanValue::builder().value(true).build());
            ctx.call(Service::Ec2, "ModifySubnetAttribute", request.send()).await?;
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
                let request = ctx.ec2.associate_route_table().route_table_id(rt).subnet_id(&id);
                ctx.call(Service::Ec2, "AssociateRouteTable", request.send()).await?;
            }
        }
        Ok(recorded(id, az, cidr, vpc))
    }

    async fn read_existing(
        &self,
        ctx: &Ctx,
        lookups: &[existing::Lookup],
    ) -> Result<Vec<std::result::Result<Recorded, String>>> {
        existing::resolve(lookups, "subnet", "subnet-id", |filters| async move {
            let pages = ctx.ec2.describe_subnets().set_filters(Some(filters)).into_paginator().send();
            let found =
                ctx.all_pages(Service::Ec2, "DescribeSubnets", pages, |p| p.subnets.unwrap_or_default()).await?;
            Ok(found.iter().map(recorded_of).collect())
        })
        .await
    }

    fn import_id(&self) -> Option<&'static str> {
        Some("subnet-…")
    }

    /// The subnet's inputs as refresh reads them (`public` is MapPublicIpOnLaunch), and its
    /// route table mapped onto gpustack's model ([`Routing`]): a table of its own (no other
    /// subnet associated) whose 0.0.0.0/0 goes to a NAT gateway is `nat_gateway`, and
    /// `tag_imported` marks it `gpustack:routes-for` so that a later `nat_gateway` change
    /// replaces the route in that very table and deleting the subnet removes it. Any other
    /// layout (a table shared with other subnets, the main table, a default route to a transit
    /// gateway, extra routes, IPv6) is reported in `unexpressed` and left alone: no
    /// `nat_gateway` is observed, gpustack never deletes a table it did not mark, and a later
    /// `nat_gateway` on such a subnet is refused with a message instead of moving it off its
    /// table ([`route_through_nat`]).
    async fn import(&self, ctx: &Ctx, id: &str) -> Result<Option<Imported>> {
        let request = ctx.ec2.describe_subnets().filters(Filter::builder().name("subnet-id").values(id).build());
        let out = ctx.call(Service::Ec2, "DescribeSubnets", request.send()).await?;
        let Some(sn) = out.subnets().iter().find(|s| s.subnet_id() == Some(id)).cloned() else { return Ok(None) };
        let all = tags::ec2_map(sn.tags());
        let public = sn.map_public_ip_on_launch().unwrap_or(false);
        let mut attrs = Attrs::from([
            ("vpc".into(), Value::str(sn.vpc_id().unwrap_or_default())),
            ("cidr_block".into(), Value::str(sn.cidr_block().unwrap_or_default())),
            ("availability_zone".into(), Value::str(sn.availability_zone().unwrap_or_default())),
            ("public".into(), Value::Bool(public)),
            ("tags".into(), tags::observed(&all)),
        ]);
        let routing = Routing::read(ctx, sn.vpc_id().unwrap_or_default(), id, public).await?;
        if let Some(nat) = &routing.nat {
            attrs.insert("nat_gateway".into(), Value::str(nat));
        }
        let mut unexpressed = routing.unexpressed;
        unexpressed.extend(super::import_ec2::cloudformation_note(&all));
        for b in sn.ipv6_cidr_block_association_set() {
            unexpressed.push(note("ipv6_cidr_block", b.ipv6_cidr_block().unwrap_or_default()));
        }
        // Settings gpustack never sets (botocore ec2 `Subnet`): resource-name hostnames change
        // the nodes' names, DNS64 their resolution of IPv4-only names (review imp-net m3).
        let hostnames = sn.private_dns_name_options_on_launch().and_then(|o| o.hostname_type());
        if let Some(h) = hostnames.filter(|h| h.as_str() != "ip-name") {
            unexpressed.push(note("private_dns_hostname_type_on_launch", h.as_str()));
        }
        if sn.enable_dns64() == Some(true) {
            unexpressed.push(note("enable_dns64", "true"));
        }
        Ok(Some(imported(recorded_of(&sn), attrs, unexpressed)))
    }

    /// Tags the subnet, and its own NAT route table (with `gpustack:routes-for`) when
    /// [`Subnet::import`] found one.
    async fn tag_imported(&self, ctx: &Ctx, address: &str, id: &str, outputs: &Attrs) -> Result<()> {
        tag(ctx, &[id.to_string()], address, &[]).await?;
        let request = ctx.ec2.describe_subnets().filters(Filter::builder().name("subnet-id").values(id).build());
        let out = ctx.call(Service::Ec2, "DescribeSubnets", request.send()).await?;
        let public = out.subnets().iter().any(|s| s.map_public_ip_on_launch() == Some(true));
        let routing = Routing::read(ctx, str_attr(outputs, "vpc_id"), id, public).await?;
        if let (Some(table), Some(_)) = (&routing.table, &routing.nat) {
            tag(ctx, std::slice::from_ref(table), address, &[(ROUTES_FOR, id)]).await?;
        }
        Ok(())
    }

    fn validate(&self, r: &crate::stack::Resource, diags: &mut Vec<crate::stack::Diagnostic>) {
        existing::validate(r, "subnet-", true, diags);
        let public = r.attrs.get("public").and_then(|e| e.as_literal()).and_then(Value::as_bool) == Some(true);
        if public && let Some(e) = r.attrs.get("nat_gateway") {
            diags.push(
                crate::stack::Diagnostic::error(
                    format!("`{}` is public and routes through a NAT gateway: a subnet has one way out", r.address),
                    e.span.clone(),
                )
                .help("public subnets route through the VPC's internet gateway; put nat_gateway on private subnets"),
            );
        }
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        let nat_routes = stack_nat_routes(ctx).await?;
        let pages = ctx.ec2.describe_subnets().filters(tags::stack_filter(ctx)).into_paginator().send();
        let subnets = ctx.all_pages(Service::Ec2, "DescribeSubnets", pages, |p| p.subnets.unwrap_or_default()).await?;
        Ok(subnets
            .iter()
            .map(|sn| {
                let all = tags::ec2_map(sn.tags());
                let id = sn.subnet_id().unwrap_or_default().to_string();
                let az = sn.availability_zone().unwrap_or_default().to_string();
                let mut attrs = Attrs::from([
                    ("vpc".into(), Value::str(sn.vpc_id().unwrap_or_default())),
                    ("cidr_block".into(), Value::str(sn.cidr_block().unwrap_or_default())),
                    ("availability_zone".into(), Value::str(az.clone())),
                    ("public".into(), Value::Bool(sn.map_public_ip_on_launch().unwrap_or(false))),
                    ("tags".into(), tags::observed(&all)),
                ]);
                if let Some(nat) = nat_routes.iter().find(|r| r.subnet == id).and_then(|r| r.nat.clone()) {
                    attrs.insert("nat_gateway".into(), Value::str(nat));
                }
                Observed::tagged(&all, recorded_of(sn), attrs)
            })
            .collect())
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
        if changed.iter().any(|c| c == "nat_gateway") {
            match str_attr(new, "nat_gateway") {
                "" => remove_own_routes(ctx, id, false).await?,
                nat => route_through_nat(ctx, address, str_attr(new, "vpc"), id, nat, new).await?,
            }
        }
        tags::sync_ec2(ctx, id, old, new).await?;
        Ok(recorded(
            id.to_string(),
            str_attr(new, "availability_zone").to_string(),
            str_attr(new, "cidr_block"),
            str_attr(new, "vpc"),
        ))
    }

    async fn delete(&self, ctx: &Ctx, _address: &str, id: &str, _inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        remove_own_routes(ctx, id, true).await?;
        ctx.call(Service::Ec2, "DeleteSubnet", ctx.ec2.delete_subnet().subnet_id(id).send()).await.absent_ok()?;
        Ok(())
    }
}

fn recorded(id: String, az: String, cidr_block: &str, vpc: &str) -> Recorded {
    Recorded {
        outputs: Attrs::from([
            ("id".into(), Value::str(id.clone())),
            ("availability_zone".into(), Value::str(az)),
            ("cidr_block".into(), Value::str(cidr_block)),
            ("vpc_id".into(), Value::str(vpc)),
        ]),
        id,
    }
}

/// A subnet's outputs as DescribeSubnets shows it.
fn recorded_of(sn: &aws_sdk_ec2::types::Subnet) -> Recorded {
    recorded(
        sn.subnet_id().unwrap_or_default().to_string(),
        sn.availability_zone().unwrap_or_default().to_string(),
        sn.cidr_block().unwrap_or_default(),
        sn.vpc_id().unwrap_or_default(),
    )
}

/// A subnet's own route table, as refresh sees it.
struct OwnRoutes {
    table: String,
    subnet: String,
    /// The NAT gateway of its 0.0.0.0/0 route.
    nat: Option<String>,
    associations: Vec<String>,
    /// The subnets of those associations (an association without one, a gateway's, counts
    /// as another's).
    associated: Vec<Option<String>>,
    /// Routes besides `local` and 0.0.0.0/0 (an imported table's TGW, peering or endpoint routes).
    extra: bool,
}

fn own_routes(rt: &aws_sdk_ec2::types::RouteTable) -> Option<OwnRoutes> {
    let subnet = tags::ec2_map(rt.tags()).get(ROUTES_FOR).cloned()?;
    Some(OwnRoutes {
        table: rt.route_table_id().unwrap_or_default().to_string(),
        subnet,
        nat: rt
            .routes()
            .iter()
            .find(|r| r.destination_cidr_block() == Some("0.0.0.0/0"))
            .and_then(|r| r.nat_gateway_id().map(str::to_string)),
        associations: rt
            .associations()
            .iter()
            .filter(|a| !a.main().unwrap_or(false))
            .filter_map(|a| a.route_table_association_id().map(str::to_string))
            .collect(),
        associated: rt
            .associations()
            .iter()
            .filter(|a| !a.main().unwrap_or(false) && a.route_table_association_id().is_some())
            .map(|a| a.subnet_id().map(str::to_string))
            .collect(),
        extra: !extra_routes(rt, &["0.0.0.0/0"]).is_empty(),
    })
}

/// This stack's subnet route tables: one paged call for every subnet.
async fn stack_nat_routes(ctx: &Ctx) -> Result<Vec<OwnRoutes>> {
    let pages = ctx
        .ec2
        .describe_route_tables()
        .filters(tags::stack_filter(ctx))
        .filters(Filter::builder().name("tag-key").values(ROUTES_FOR).build())
        .into_paginator()
        .send();
    let tables =
        ctx.all_pages(Service::Ec2, "DescribeRouteTables", pages, |p| p.route_tables.unwrap_or_default()).await?;
    Ok(tables.iter().filter_map(own_routes).collect())
}

/// The route tables made for `subnet`.
async fn routes_of(ctx: &Ctx, subnet: &str) -> Result<Vec<OwnRoutes>> {
    let pages = ctx
        .ec2
        .describe_route_tables()
        .filters(Filter::builder().name(format!("tag:{ROUTES_FOR}")).values(subnet).build())
        .into_paginator()
        .send();
    let tables =
        ctx.all_pages(Service::Ec2, "DescribeRouteTables", pages, |p| p.route_tables.unwrap_or_default()).await?;
    Ok(tables.iter().filter_map(own_routes).collect())
}

/// A subnet's route table as `[import]` maps it onto the language.
struct Routing {
    /// The table explicitly associated with the subnet (none: it uses the VPC's main table).
    table: Option<String>,
    /// The NAT gateway of a table of the subnet's own (no other subnet on it).
    nat: Option<String>,
    unexpressed: Vec<(String, String)>,
}

impl Routing {
    async fn read(ctx: &Ctx, vpc: &str, subnet: &str, public: bool) -> Result<Routing> {
        let tables = vpc_route_tables(ctx, vpc).await?;
        let own = tables.iter().find(|rt| subnets_of(rt).iter().any(|s| s == subnet));
        let Some(rt) = own else {
            let main = tables.iter().find(|rt| is_main(rt));
            let routes = main.map(|m| extra_routes(m, &[])).unwrap_or_default();
            let mut unexpressed = vec![];
            if !routes.is_empty() {
                let rid = main.and_then(|m| m.route_table_id()).unwrap_or_default();
                unexpressed.push(note("route_table", format!("the VPC's main table {rid}: {}", routes.join(", "))));
            }
            return Ok(Routing { table: None, nat: None, unexpressed });
        };
        let rid = rt.route_table_id().unwrap_or_default().to_string();
        let others: Vec<String> = subnets_of(rt).into_iter().filter(|s| s != subnet).collect();
        let default = default_route(rt);
        let nat = default.and_then(|r| r.nat_gateway_id()).map(str::to_string);
        let to_internet = default.and_then(|r| r.gateway_id()).is_some_and(|g| g.starts_with("igw-"));
        let mut unexpressed = vec![];
        let mut own_nat = None;
        match (&nat, others.is_empty()) {
            // The language gives a subnet one way out (`validate`): a public one is routed by
            // the VPC's public table.
            (Some(n), _) if public => unexpressed.push(note(
                "route_table",
                format!("{rid}: 0.0.0.0/0 via {n}, while the subnet maps public IPs on launch"),
            )),
            (Some(n), true) => {
                own_nat = Some(n.clone());
                let extra = extra_routes(rt, &["0.0.0.0/0"]);
                if !extra.is_empty() {
                    unexpressed.push(note("route_table", format!(
                            "{rid} also routes {} (kept: removing nat_gateway later deletes only its 0.0.0.0/0 route; deleting the subnet deletes the table)",
                            extra.join(", ")
                        )));
                }
            }
            (Some(n), false) => unexpressed
                .push(note("route_table", format!("{rid}: 0.0.0.0/0 via {n}, shared with {}", others.join(", ")))),
            // The VPC's public table: `public` and `vpc.internet_gateway` say it.
            (None, _) if to_internet => {
                if !public {
                    unexpressed.push(note(
                        "route_table",
                        format!("{rid}: 0.0.0.0/0 via the internet gateway, while the subnet does not map public IPs"),
                    ));
                }
            }
            (None, _) => {
                let routes = extra_routes(rt, &[]);
                unexpressed.push(note(
                    "route_table",
                    format!(
                        "{rid}: {}",
                        if routes.is_empty() { "local routes only".to_string() } else { routes.join(", ") }
                    ),
                ));
            }
        }
        Ok(Routing { table: Some(rid), nat: own_nat, unexpressed })
    }
}

/// Gives the subnet its own route table with 0.0.0.0/0 through `nat`, or points the one it
/// has at `nat`. Idempotent: a table left by an interrupted run is found by its tag.
async fn route_through_nat(ctx: &Ctx, address: &str, vpc: &str, subnet: &str, nat: &str, inputs: &Attrs) -> Result<()> {
    let existing = routes_of(ctx, subnet).await?.into_iter().next();
    let own = match existing {
        Some(own) => own,
        None => {
            // A subnet imported on a table gpustack does not own (shared with other subnets,
            // or carrying routes the language cannot say) keeps it: moving it to a new table
            // would drop those routes for it.
            let associated = ctx
                .ec2
                .describe_route_tables()
                .filters(Filter::builder().name("association.subnet-id").values(subnet).build());
            let found = ctx.call(Service::Ec2, "DescribeRouteTables", associated.send()).await?;
            if let Some(rt) = found.route_tables().first() {
                return Err(AwsError {
                    operation: "CreateRoute",
                    code: None,
                    detail: format!(
                        "subnet {subnet} uses route table {}, which gpustack did not make for it (imported, or shared with other subnets); route it through {nat} in that table yourself, or disassociate it (aws ec2 disassociate-route-table) so gpustack gives the subnet a table of its own",
                        rt.route_table_id().unwrap_or_default()
                    ),
                });
            }
            let mut spec = tags::ec2_spec(ctx, ResourceType::RouteTable, address, inputs);
            spec.tags
                .get_or_insert_with(Vec::new)
                .push(aws_sdk_ec2::types::Tag::builder().key(ROUTES_FOR).value(subnet).build());
            let request = ctx.ec2.create_route_table().vpc_id(vpc).tag_specifications(spec);
            let rt = ctx.call(Service::Ec2, "CreateRouteTable", request.send()).await?;
            let table = rt.route_table().and_then(|r| r.route_table_id()).unwrap_or_default().to_string();
            OwnRoutes {
                table,
                subnet: subnet.to_string(),
                nat: None,
                associations: vec![],
                associated: vec![],
                extra: false,
            }
        }
    };
    match own.nat.as_deref() {
        Some(n) if n == nat => {}
        Some(_) => {
            let request = ctx
                .ec2
                .replace_route()
                .route_table_id(&own.table)
                .destination_cidr_block("0.0.0.0/0")
                .nat_gateway_id(nat);
            ctx.call(Service::Ec2, "ReplaceRoute", request.send()).await?;
        }
        None => {
            let request = ctx
                .ec2
                .create_route()
                .route_table_id(&own.table)
                .destination_cidr_block("0.0.0.0/0")
                .nat_gateway_id(nat);
            ctx.call(Service::Ec2, "CreateRoute", request.send()).await?;
        }
    }
    if own.associations.is_empty() {
        let request = ctx.ec2.associate_route_table().route_table_id(&own.table).subnet_id(subnet);
        ctx.call(Service::Ec2, "AssociateRouteTable", request.send()).await?;
    }
    Ok(())
}

/// Removes the subnet's own route tables (the subnet falls back to the VPC's main table).
/// Review imp-net M7: when only `nat_gateway` goes (`deleting` false) and the table carries
/// other routes (an imported table's, reported "kept" at import), only its 0.0.0.0/0 route
/// goes and the table stays with the subnet. Only the subnet's own association is removed,
/// and a table another subnet (or gateway) has since been associated with is left to it.
async fn remove_own_routes(ctx: &Ctx, subnet: &str, deleting: bool) -> Result<()> {
    for own in routes_of(ctx, subnet).await? {
        if !deleting && own.extra {
            if own.nat.is_some() {
                let request = ctx.ec2.delete_route().route_table_id(&own.table).destination_cidr_block("0.0.0.0/0");
                ctx.call(Service::Ec2, "DeleteRoute", request.send()).await.absent_ok()?;
            }
            continue;
        }
        for (a, s) in own.associations.iter().zip(&own.associated) {
            if s.as_deref() == Some(subnet) {
                let request = ctx.ec2.disassociate_route_table().association_id(a);
                ctx.call(Service::Ec2, "DisassociateRouteTable", request.send()).await.absent_ok()?;
            }
        }
        if own.associated.iter().any(|s| s.as_deref() != Some(subnet)) {
            continue;
        }
        let request = ctx.ec2.delete_route_table().route_table_id(&own.table);
        ctx.call(Service::Ec2, "DeleteRouteTable", request.send()).await.absent_ok()?;
    }
    Ok(())
}
