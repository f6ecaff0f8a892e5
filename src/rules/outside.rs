//! Facts about network objects the stack names but does not define: subnets read with
//! `existing` and literal `subnet-…` ids in `subnets`/`subnet`, literal `cr-…` reservations.
//! A refreshing plan reads them in one batched call per EC2 API ([`read`]); the rules then
//! see them through [`Net`], the one view that the stack's own subnets also feed, so each
//! network rule has one decision path for both. Offline the view holds only the stack's
//! subnets and each rule family says once what it did not check.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use anyhow::{Context, Result};

use super::{lit_str, referenced};
use crate::aws::Ctx;
use crate::stack::expr::{Expr, ExprKind};
use crate::stack::{Resource, Stack};
use crate::value::Value;

/// The offline notes of the network rules (what they could not check without AWS), which a
/// refreshing plan replaces with the checks themselves.
pub fn is_offline_note(d: &crate::stack::Diagnostic) -> bool {
    !d.is_error()
        && (d.message.starts_with("the egress rule did not check")
            || d.message.starts_with("the reservation-zone check did not check"))
}

/// Where a subnet's route table sends 0.0.0.0/0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DefaultRoute {
    None,
    InternetGateway,
    Nat,
    /// A transit gateway, peering, instance or appliance: a way out gpustack cannot follow.
    Other(String),
}

/// What EC2 says of a subnet outside the stack.
#[derive(Clone, Debug)]
pub struct SubnetFacts {
    pub id: String,
    pub zone: String,
    pub cidr: String,
    pub vpc: String,
    /// `MapPublicIpOnLaunch`: instances get a public IPv4 address.
    pub map_public: bool,
    pub default_route: DefaultRoute,
    /// Services VPC endpoints serve in this subnet ("ecr.api", "s3", …).
    pub services: BTreeSet<String>,
}

/// What a refreshing plan read about objects the stack does not define. Empty offline.
#[derive(Clone, Debug, Default)]
pub struct Outside {
    /// By subnet id.
    pub subnets: HashMap<String, SubnetFacts>,
    /// Ids of the `existing` resources refresh read, by address.
    pub ids: HashMap<String, String>,
    /// Zones of reservations by id (literal `cr-…`) or by address (`existing`).
    pub reservation_zones: HashMap<String, String>,
    /// True once [`read`] ran: the view is complete, no note is needed.
    pub read: bool,
    /// Literal ids EC2 did not show (a typo, another region, a reservation not shared here).
    pub missing: BTreeSet<String>,
}

/// A subnet as a rule sees it: the stack's own (`Stack`), or one EC2 described (`Facts`), or
/// one nobody could read (offline: `Unknown`, named by its id or address).
pub enum SubnetView<'a> {
    Stack(&'a Resource),
    Facts(&'a SubnetFacts),
    Unknown(String),
}

impl SubnetView<'_> {
    /// The name a diagnostic gives it: its address, or its id.
    pub fn name(&self) -> String {
        match self {
            SubnetView::Stack(r) => r.address.clone(),
            SubnetView::Facts(f) => f.id.clone(),
            SubnetView::Unknown(n) => n.clone(),
        }
    }

    pub fn zone(&self) -> Option<String> {
        match self {
            SubnetView::Stack(r) => lit_str(r, "availability_zone"),
            SubnetView::Facts(f) => Some(f.zone.clone()),
            SubnetView::Unknown(_) => None,
        }
    }
}

/// The one network view the rules read: the stack, plus what was read of the rest.
pub struct Net<'a> {
    pub stack: &'a Stack,
    pub outside: &'a Outside,
}

impl<'a> Net<'a> {
    /// Every subnet `attr` of `r` names, in the stack or not.
    pub fn subnets(&self, r: &Resource, attr: &str) -> Vec<SubnetView<'a>> {
        items(r, attr).iter().filter_map(|e| self.subnet(e)).collect()
    }

    fn subnet(&self, e: &Expr) -> Option<SubnetView<'a>> {
        let id = match e.as_single_ref() {
            Some(x) => {
                let s = self.stack.get(&x.address).filter(|s| s.kind.name() == "subnet")?;
                // An imported subnet is judged by what EC2 says of it, like an `existing` one:
                // its file attributes (`public`, `nat_gateway`) cannot say every live layout
                // (a private route table shared by many subnets, a public subnet without
                // MapPublicIpOnLaunch whose NAT gateway still reaches the internet gateway).
                if let Some(import) = self.stack.import_of(&s.address) {
                    return Some(match self.outside.subnets.get(&import.id) {
                        Some(f) => SubnetView::Facts(f),
                        None => SubnetView::Unknown(s.address.clone()),
                    });
                }
                if !crate::resources::existing::is_existing(s) {
                    return Some(SubnetView::Stack(s));
                }
                match self.outside.ids.get(&s.address) {
                    Some(id) => id.clone(),
                    None => return Some(SubnetView::Unknown(s.address.clone())),
                }
            }
            None => e.as_literal().and_then(Value::as_str).filter(|s| s.starts_with("subnet-"))?.to_string(),
        };
        Some(match self.outside.subnets.get(&id) {
            Some(f) => SubnetView::Facts(f),
            None => SubnetView::Unknown(id),
        })
    }

    /// The zone of the reservation `e` names (a stack `capacity_block`/`capacity_reservation`
    /// with a literal zone, one read with `existing`, or a literal `cr-…`), with its name.
    pub fn reservation_zone(&self, e: &Expr) -> Option<(String, Option<String>, bool)> {
        match e.as_single_ref() {
            Some(x) => {
                let r = self.stack.get(&x.address)?;
                if !matches!(r.kind.name(), "capacity_block" | "capacity_reservation") {
                    return None;
                }
                if crate::resources::existing::is_existing(r) {
                    return Some((r.address.clone(), self.outside.reservation_zones.get(&r.address).cloned(), true));
                }
                Some((r.address.clone(), lit_str(r, "availability_zone"), false))
            }
            None => {
                let id = e.as_literal().and_then(Value::as_str).filter(|s| s.starts_with("cr-"))?.to_string();
                let zone = self.outside.reservation_zones.get(&id).cloned();
                Some((id, zone, true))
            }
        }
    }
}

/// The expressions of `attr`: a list's items, or the one value.
fn items(r: &Resource, attr: &str) -> Vec<Expr> {
    let Some(e) = r.attrs.get(attr) else { return vec![] };
    match &e.kind {
        ExprKind::List(items) => items.clone(),
        ExprKind::Value(Value::List(items)) => items.iter().map(|v| Expr::value(v.clone(), e.span.clone())).collect(),
        _ => vec![e.clone()],
    }
}

/// Resources whose nodes live in subnets, with the attribute naming them.
pub(crate) fn subnet_users(stack: &Stack) -> impl Iterator<Item = (&Resource, &'static str)> {
    stack.resources.iter().filter_map(|r| match r.kind.name() {
        "node_group" | "karpenter_pool" | "auto_mode_pool" | "hyperpod_cluster" | "eks_cluster" => Some((r, "subnets")),
        "image_cache" => Some((r, "subnet")),
        _ => None,
    })
}

/// The literal ids (starting with `prefix`) that `attr` names.
fn literal_ids(r: &Resource, attr: &str, prefix: &str) -> Vec<String> {
    items(r, attr)
        .iter()
        .filter_map(|e| e.as_literal().and_then(Value::as_str).map(str::to_string))
        .filter(|s| s.starts_with(prefix))
        .collect()
}

/// Reads the outside objects the stack names: `DescribeSubnets` (by `subnet-id`),
/// `DescribeRouteTables` and `DescribeVpcEndpoints` (by `vpc-id`) for the subnets,
/// `DescribeCapacityReservations` (by id) for literal reservations. One call each, none when
/// there is nothing to read. `existing` maps the addresses refresh read to their ids and
/// outputs. Filters from the EC2 API reference's lists for each call (`DescribeSubnets`:
/// `subnet-id`; `DescribeRouteTables`: `vpc-id`; `DescribeVpcEndpoints`: `vpc-id`).
pub async fn read(
    ctx: &Ctx,
    stack: &Stack,
    existing: &HashMap<String, (String, crate::value::Attrs)>,
) -> Result<Outside> {
    let mut out = Outside { read: true, ..Default::default() };
    for (address, (id, outputs)) in existing {
        out.ids.insert(address.clone(), id.clone());
        if stack.get(address).is_some_and(|r| r.kind.name() == "capacity_reservation")
            && let Some(Value::Str(z)) = outputs.get("availability_zone")
        {
            out.reservation_zones.insert(address.clone(), z.clone());
        }
    }
    let mut subnet_ids: BTreeSet<String> = BTreeSet::new();
    for (r, attr) in subnet_users(stack) {
        subnet_ids.extend(literal_ids(r, attr, "subnet-"));
        for e in &items(r, attr) {
            let id = e
                .as_single_ref()
                .and_then(|x| out.ids.get(&x.address).or_else(|| stack.import_of(&x.address).map(|i| &i.id)));
            if let Some(id) = id
                && id.starts_with("subnet-")
            {
                subnet_ids.insert(id.clone());
            }
        }
    }
    let reservations: BTreeSet<String> = stack
        .resources
        .iter()
        .flat_map(|r| match r.kind.name() {
            "launch_template" => literal_ids(r, "capacity_reservation", "cr-"),
            "karpenter_pool" => literal_ids(r, "capacity_reservations", "cr-"),
            _ => vec![],
        })
        .collect();
    if !reservations.is_empty() {
        // The ids parameter fails the whole call on one unknown id
        // (`InvalidCapacityReservationId.NotFound`, EC2 API error codes), and the request has
        // no id filter: on a failure, each id is asked alone so one bad id hides no other.
        let ask = |ids: Vec<String>| async move {
            let call = ctx.ec2.describe_capacity_reservations().set_capacity_reservation_ids(Some(ids));
            ctx.call(crate::aws::Service::Ec2, "DescribeCapacityReservations", call.send()).await
        };
        let all: Vec<String> = reservations.iter().cloned().collect();
        let answers = match ask(all.clone()).await {
            Ok(got) => vec![got],
            Err(_) => {
                let mut each = vec![];
                for id in all {
                    if let Ok(got) = ask(vec![id]).await {
                        each.push(got);
                    }
                }
                each
            }
        };
        for got in answers {
            for c in got.capacity_reservations() {
                if let (Some(id), Some(z)) = (c.capacity_reservation_id(), c.availability_zone()) {
                    out.reservation_zones.insert(id.to_string(), z.to_string());
                }
            }
        }
        out.missing.extend(reservations.into_iter().filter(|id| !out.reservation_zones.contains_key(id)));
    }
    if subnet_ids.is_empty() {
        return Ok(out);
    }
    let filter = |name: &str, values: Vec<String>| {
        aws_sdk_ec2::types::Filter::builder().name(name).set_values(Some(values)).build()
    };
    let call = ctx.ec2.describe_subnets().filters(filter("subnet-id", subnet_ids.iter().cloned().collect()));
    let subnets = ctx
        .call(crate::aws::Service::Ec2, "DescribeSubnets", call.send())
        .await
        .context("reading the subnets the stack does not define")?;
    let mut found: Vec<SubnetFacts> = subnets
        .subnets()
        .iter()
        .filter_map(|s| {
            Some(SubnetFacts {
                id: s.subnet_id()?.to_string(),
                zone: s.availability_zone()?.to_string(),
                cidr: s.cidr_block().unwrap_or_default().to_string(),
                vpc: s.vpc_id()?.to_string(),
                map_public: s.map_public_ip_on_launch() == Some(true),
                default_route: DefaultRoute::None,
                services: BTreeSet::new(),
            })
        })
        .collect();
    let vpcs: Vec<String> = found.iter().map(|s| s.vpc.clone()).collect::<BTreeSet<_>>().into_iter().collect();
    if vpcs.is_empty() {
        return Ok(out);
    }
    let call = ctx.ec2.describe_route_tables().filters(filter("vpc-id", vpcs.clone()));
    let tables = ctx
        .call(crate::aws::Service::Ec2, "DescribeRouteTables", call.send())
        .await
        .context("reading the route tables of the VPCs the stack does not define")?;
    let call = ctx.ec2.describe_vpc_endpoints().filters(filter("vpc-id", vpcs));
    let endpoints = ctx
        .call(crate::aws::Service::Ec2, "DescribeVpcEndpoints", call.send())
        .await
        .context("reading the VPC endpoints of the VPCs the stack does not define")?;
    // A subnet without an explicit association uses its VPC's main route table: "If a subnet is
    // not explicitly associated with any route table, it is implicitly associated with the main
    // route table" (EC2 API `DescribeRouteTables`; the main table's association has `Main`).
    let mut explicit: HashMap<String, String> = HashMap::new();
    let mut main: HashMap<String, String> = HashMap::new();
    let mut default: HashMap<String, DefaultRoute> = HashMap::new();
    for t in tables.route_tables() {
        let Some(rt) = t.route_table_id() else { continue };
        for a in t.associations() {
            if a.main() == Some(true) {
                main.insert(t.vpc_id().unwrap_or_default().to_string(), rt.to_string());
            } else if let Some(s) = a.subnet_id() {
                explicit.insert(s.to_string(), rt.to_string());
            }
        }
        let route = t
            .routes()
            .iter()
            .filter(|r| r.destination_cidr_block() == Some("0.0.0.0/0"))
            // A blackhole route (its target deleted) carries nothing (EC2 API `Route.State`).
            .find(|r| r.state().is_none_or(|s| s.as_str() != "blackhole"))
            .map(|r| {
                if r.nat_gateway_id().is_some() {
                    DefaultRoute::Nat
                } else if r.gateway_id().is_some_and(|g| g.starts_with("igw-")) {
                    DefaultRoute::InternetGateway
                } else {
                    let target = r
                        .transit_gateway_id()
                        .or(r.vpc_peering_connection_id())
                        .or(r.network_interface_id())
                        .or(r.instance_id())
                        .or(r.gateway_id())
                        .unwrap_or("an unknown target");
                    DefaultRoute::Other(target.to_string())
                }
            })
            .unwrap_or(DefaultRoute::None);
        default.insert(rt.to_string(), route);
    }
    let prefix = format!("com.amazonaws.{}.", stack.region);
    for s in &mut found {
        let table = explicit.get(&s.id).or_else(|| main.get(&s.vpc)).cloned();
        s.default_route = table.as_ref().and_then(|t| default.get(t)).cloned().unwrap_or(DefaultRoute::None);
        for e in endpoints.vpc_endpoints() {
            if e.vpc_id() != Some(s.vpc.as_str())
                || e.state().is_some_and(|st| !matches!(st.as_str(), "available" | "Available" | "pending" | "Pending"))
            {
                continue;
            }
            let Some(service) = e.service_name().and_then(|n| n.strip_prefix(&prefix)) else { continue };
            let serves = match e.vpc_endpoint_type().map(|t| t.as_str()) {
                // A gateway endpoint is a route in the route tables it is attached to.
                Some("Gateway") => table.as_ref().is_some_and(|t| e.route_table_ids().iter().any(|x| x == t)),
                // An interface endpoint with private DNS answers the service's name for the
                // whole VPC (PrivateLink guide, `privatelink-access-aws-services`, "Private DNS").
                _ => e.private_dns_enabled() == Some(true),
            };
            if serves {
                s.services.insert(service.to_string());
            }
        }
    }
    out.missing.extend(subnet_ids.into_iter().filter(|id| !found.iter().any(|s| s.id == *id)));
    out.subnets = found.into_iter().map(|s| (s.id.clone(), s)).collect();
    Ok(out)
}

/// The zone of every reservation a node group's launch template names, against its subnets'
/// zones, when either side is outside the stack (the stack-only case is `rules::offline`'s):
/// On-Demand Capacity Reservations and Capacity Blocks serve one zone (EC2 UG
/// `capacity-reservations-using`: "instances … must match the Availability Zone").
pub fn reservation_zones(net: &Net) -> (Vec<crate::stack::Diagnostic>, BTreeSet<String>) {
    use crate::stack::Diagnostic;
    let mut d = vec![];
    let mut unchecked = BTreeSet::new();
    for ng in super::node_groups(net.stack) {
        let Some(lt) = referenced(net.stack, ng, "launch_template", "launch_template") else { continue };
        let Some(e) = lt.attrs.get("capacity_reservation") else { continue };
        let Some((name, zone, outside_cr)) = net.reservation_zone(e) else { continue };
        let subnets = net.subnets(ng, "subnets");
        let outside_subnet = subnets.iter().any(|s| !matches!(s, SubnetView::Stack(_)));
        if !outside_cr && !outside_subnet {
            continue;
        }
        let Some(zone) = zone else {
            unchecked.insert(name);
            continue;
        };
        let mut wrong: BTreeMap<String, String> = BTreeMap::new();
        for s in &subnets {
            match s.zone() {
                Some(z) if z != zone => {
                    wrong.insert(s.name(), z);
                }
                Some(_) => {}
                None => {
                    unchecked.insert(s.name());
                }
            }
        }
        if !wrong.is_empty() {
            let list: Vec<String> = wrong.iter().map(|(s, z)| format!("{s} ({z})")).collect();
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}` reserves capacity in {zone} through `{}` ({name}), but its subnet{} {} {} in another zone: the reservation cannot serve those nodes",
                        ng.address,
                        lt.address,
                        crate::stack::diag::plural(list.len()),
                        list.join(", "),
                        if list.len() == 1 { "is" } else { "are" }
                    ),
                    super::span(ng, "subnets"),
                )
                .help(format!("list only subnets in {zone}: a reservation serves the one zone it was made in")),
            );
        }
    }
    // Karpenter launches reserved capacity in the reservation's zone, through a subnet of
    // the pool in that zone (Karpenter docs, Concepts → NodeClasses,
    // `capacityReservationSelectorTerms`; the zone comes from the reservation): a reservation
    // in no zone of the pool's subnets is never used. The stack-only case (a stack
    // reservation and stack subnets) is `rules::karpenter`'s.
    for pool in net.stack.resources.iter().filter(|r| r.kind.name() == "karpenter_pool") {
        let subnets = net.subnets(pool, "subnets");
        let all_outside = !subnets.is_empty() && subnets.iter().all(|s| !matches!(s, SubnetView::Stack(_)));
        for e in &items(pool, "capacity_reservations") {
            let Some((name, zone, outside_cr)) = net.reservation_zone(e) else { continue };
            if !outside_cr && !all_outside {
                continue;
            }
            let Some(zone) = zone else {
                unchecked.insert(name);
                continue;
            };
            let zones: BTreeSet<String> = subnets.iter().filter_map(SubnetView::zone).collect();
            let unknown: Vec<String> = subnets.iter().filter(|s| s.zone().is_none()).map(SubnetView::name).collect();
            if !unknown.is_empty() {
                unchecked.extend(unknown);
                continue;
            }
            if !zones.is_empty() && !zones.contains(&zone) {
                let zones: Vec<String> = zones.into_iter().collect();
                d.push(
                    Diagnostic::error(
                        format!(
                            "`{}` names {name}, which reserves capacity in {zone}, but its subnets are in {}: the reservation would never be used",
                            pool.address,
                            zones.join(", ")
                        ),
                        super::span(pool, "subnets"),
                    )
                    .help(format!("add a subnet in {zone} to the pool: a reservation serves one zone")),
                );
            }
        }
    }
    (d, unchecked)
}

/// The VPC a subnet is in, as far as the view knows: an outside subnet's id from EC2; a stack
/// subnet's `vpc` (the id read for an `existing` VPC, else the stack VPC's address: a VPC
/// the stack creates is never one it reads).
fn vpc_of(net: &Net, s: &SubnetView) -> Option<String> {
    match s {
        SubnetView::Facts(f) => Some(f.vpc.clone()),
        SubnetView::Unknown(_) => None,
        SubnetView::Stack(r) => {
            let x = r.attrs.get("vpc")?;
            match x.as_single_ref() {
                Some(x) => Some(
                    net.outside
                        .ids
                        .get(&x.address)
                        .or_else(|| net.stack.import_of(&x.address).map(|i| &i.id))
                        .cloned()
                        .unwrap_or_else(|| x.address.clone()),
                ),
                None => x.as_literal().and_then(Value::as_str).map(str::to_string),
            }
        }
    }
}

/// A cluster lives in one VPC ("When you create a cluster, you specify a VPC and at least two
/// subnets", EKS UG `network-reqs`), and its nodes and HyperPod instances in that VPC
/// ("deployed within the same VPC as your Amazon EKS cluster", SageMaker DG
/// `sagemaker-hyperpod-eks-prerequisites`). Checked when a subnet outside the stack is among
/// them (the stack's own subnets are checked offline, e.g. `rules::hyperpod`).
pub fn one_vpc(net: &Net) -> Vec<crate::stack::Diagnostic> {
    use crate::stack::Diagnostic;
    let mut d = vec![];
    for c in net.stack.resources.iter().filter(|r| r.kind.name() == "eks_cluster") {
        let own = net.subnets(c, "subnets");
        let home: BTreeSet<String> = own.iter().filter_map(|s| vpc_of(net, s)).collect();
        let outside = own.iter().any(|s| matches!(s, SubnetView::Facts(_)));
        if home.len() > 1 && outside {
            let names: Vec<String> =
                own.iter().map(|s| format!("{} ({})", s.name(), vpc_of(net, s).unwrap_or_default())).collect();
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}` names subnets in {} VPCs: {}; a cluster lives in one VPC",
                        c.address,
                        home.len(),
                        names.join(", ")
                    ),
                    super::span(c, "subnets"),
                )
                .help("list subnets of one VPC only"),
            );
            continue;
        }
        let Some(home) = home.into_iter().next() else { continue };
        let users = subnet_users(net.stack).filter(|(r, _)| {
            r.kind.name() != "eks_cluster"
                && (super::target(net.stack, r, "cluster").or_else(|| super::target(net.stack, r, "eks_cluster")))
                    .is_some_and(|t| t.address == c.address)
        });
        for (r, attr) in users {
            for s in net.subnets(r, attr) {
                let Some(v) = vpc_of(net, &s) else { continue };
                let any_outside =
                    matches!(s, SubnetView::Facts(_)) || own.iter().any(|o| matches!(o, SubnetView::Facts(_)));
                if v != home && any_outside {
                    d.push(
                        Diagnostic::error(
                            format!(
                                "`{}` runs in {} of {v}, but its cluster `{}` is in {home}: its nodes must be in the cluster's VPC",
                                r.address,
                                s.name(),
                                c.address
                            ),
                            super::span(r, attr),
                        )
                        .help(format!("pick subnets of {home}, the cluster's VPC")),
                    );
                }
            }
        }
    }
    d
}

/// One warning naming the literal ids EC2 did not show: the rules could not check them, and
/// whatever uses them will fail when it launches.
pub fn missing(outside: &Outside) -> Option<crate::stack::Diagnostic> {
    if outside.missing.is_empty() {
        return None;
    }
    let names: Vec<&str> = outside.missing.iter().map(String::as_str).collect();
    Some(
        crate::stack::Diagnostic::warning(
            format!(
                "EC2 shows no {} in this region and account: the network rules did not check {}",
                names.join(", "),
                if names.len() == 1 { "it" } else { "them" }
            ),
            None,
        )
        .help("check the ids (and the stack's region); a launch into a subnet or reservation EC2 does not know fails"),
    )
}
