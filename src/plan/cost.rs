//! What the stack costs once the plan is applied (issue 22, "cost in every plan"): each node
//! group, self-managed group and Karpenter pool at its desired and at its max size, each
//! On-Demand Capacity Reservation (billed whether used or not: its idle part said plainly),
//! each purchase up front, and the totals. Prices come from a [`PriceBook`]; a price the book
//! lacks is unpriced (`None`), never 0, and the totals say so. Pure: no AWS call.
//!
//! Billing facts relied on:
//! - On-Demand Capacity Reservations "are charged at the equivalent On-Demand rate whether you
//!   run instances in reserved capacity or not", and an instance running in one is not billed
//!   again (EC2 UG "Capacity Reservation pricing and billing"). So a group on an ODCR is priced
//!   in its own line and the reservation adds only its idle instances.
//! - A Capacity Block's price is paid up front when bought; its instances add no hourly
//!   instance charge (EC2 Capacity Blocks pricing page: "a reservation fee and an operating
//!   system fee"; the Linux OS fee is not priced here). A training plan is paid up front too
//!   (SageMaker DG "Reserve training plans"). Groups on them are "covered".
//! - A managed node group's On-Demand instances use the `prioritized` allocation strategy, the
//!   order of `instance_types` (EKS UG "Managed node group capacity types"): the first type is
//!   priced. Spot uses `price-capacity-optimized` across types and zones: the highest Spot
//!   price of its types in its zones is used, so the estimate does not understate.
//! - Karpenter pools have no desired size: "now" is 0 (nodes start for pending pods) and the
//!   max is what `gpu_limit` / `limits` (`nodes`, `cpu`) allow, at the dearest listed type.

use std::collections::BTreeSet;

use serde::Serialize;

use super::{Action, Offer, Plan};
use crate::price::{PriceBook, Usd};
use crate::stack::query::{lit, lit_str, referenced, strings};
use crate::stack::{Resource, Stack};
use crate::value::Value;

/// The plan's cost: its lines and totals, and where the prices came from.
#[derive(Clone, Debug, Serialize)]
pub struct Cost {
    /// "AWS Price List …, fetched <time>" or "embedded snapshot <date> from <source>".
    pub source: String,
    /// The region whose On-Demand list prices are used: the stack's, or us-east-1 when an
    /// offline plan's snapshot lacks the stack's region (`PriceBook::embedded_for`).
    pub on_demand_prices_of: String,
    pub items: Vec<Item>,
    /// USD per hour of what runs at the desired sizes; null when an item is unpriced now (a
    /// price that cannot be found is never 0: `priced_now_usd_per_hour` has the priced part).
    pub now_usd_per_hour: Option<Usd>,
    /// USD per hour with every group and pool at its max; null when an item is unpriced at max.
    pub max_usd_per_hour: Option<Usd>,
    /// USD the plan's purchases cost up front, non-refundable; null when one is unpriced.
    pub upfront_usd: Option<Usd>,
    /// The sums of the priced parts only: a lower bound when `complete` is false.
    pub priced_now_usd_per_hour: Usd,
    pub priced_max_usd_per_hour: Usd,
    pub priced_upfront_usd: Usd,
    /// Whether every item is priced (else the totals above are null and `unpriced` names why).
    pub complete: bool,
    /// Addresses with a part the book could not price: the totals leave them out.
    pub unpriced: Vec<String>,
    /// Reads of prices that failed (their prices are unpriced).
    pub problems: Vec<String>,
}

/// One priced object.
#[derive(Clone, Debug, Serialize)]
pub struct Item {
    pub address: String,
    pub kind: &'static str,
    /// "on-demand", "spot", "mixed", "capacity-block", "training-plan", "reserved" (a pool on
    /// reservations), "capacity-reservation" (an ODCR) or "purchase".
    pub market: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    /// The price of one instance-hour used, when one price applies.
    pub unit_usd_per_hour: Option<Usd>,
    /// Instances now (desired) and at max; for an ODCR, reserved instances.
    pub count_now: Option<u64>,
    pub count_max: Option<u64>,
    /// USD per hour at the desired size / at max; for an ODCR, its idle part only (its users'
    /// lines price the used part). None: unpriced.
    pub now_usd_per_hour: Option<Usd>,
    pub max_usd_per_hour: Option<Usd>,
    /// A purchase's price up front.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upfront_usd: Option<Usd>,
    /// Why a price is missing, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unpriced: Option<String>,
    /// What the numbers mean, in words.
    pub note: String,
}

impl Item {
    fn new(r: &Resource, market: &'static str) -> Item {
        Item {
            address: r.address.clone(),
            kind: r.kind.name(),
            market,
            instance_type: None,
            unit_usd_per_hour: None,
            count_now: None,
            count_max: None,
            now_usd_per_hour: None,
            max_usd_per_hour: None,
            upfront_usd: None,
            unpriced: None,
            note: String::new(),
        }
    }

    /// The item in one line for people: counts, type, unit price and the hourly cost now and
    /// at max, or what it costs up front, or why it is unpriced.
    pub fn line(&self) -> String {
        let of = |n: Option<u64>| {
            let n = n.map_or("?".to_string(), |n| n.to_string());
            match &self.instance_type {
                Some(t) => format!("{n} × {t}"),
                None => format!("{n} instance{}", if n == "1" { "" } else { "s" }),
            }
        };
        let unit = self.unit_usd_per_hour.map_or(String::new(), |u| format!(" at ${u:.4}/h"));
        let hourly = |v: Option<Usd>| v.map_or("unpriced".to_string(), |v| format!("{}/h", usd(v)));
        if let Some(up) = self.upfront_usd {
            return format!("{} up front, non-refundable ({})", usd(up), of(self.count_now));
        }
        let head = match self.market {
            "capacity-reservation" => {
                format!("{} reserved{unit}: idle {} now", of(self.count_now), hourly(self.now_usd_per_hour))
            }
            "reserved" => {
                return format!("{} now ({}): {}", of(self.count_now), self.market, hourly(self.max_usd_per_hour));
            }
            "capacity-block" | "training-plan" => {
                format!("{} ({}): {} now", of(self.count_now), self.market, hourly(self.now_usd_per_hour))
            }
            "purchase" => return format!("up front: unpriced ({})", self.unpriced.as_deref().unwrap_or_default()),
            m => format!("{} ({m}){unit}: {} now", of(self.count_now), hourly(self.now_usd_per_hour)),
        };
        let max = match self.market {
            "capacity-reservation" => format!("idle {} at max", hourly(self.max_usd_per_hour)),
            "purchase" => String::new(),
            _ => format!(
                "{} at max: {}",
                self.count_max.map_or("?".into(), |n| n.to_string()),
                hourly(self.max_usd_per_hour)
            ),
        };
        match &self.unpriced {
            // Nothing priced: the counts and why.
            Some(why) if self.now_usd_per_hour.is_none() => {
                let max = match self.count_max {
                    Some(n) if self.market != "capacity-reservation" => format!(", {n} at max"),
                    _ => String::new(),
                };
                format!("{}{max} ({}): unpriced, {why}", of(self.count_now), self.market)
            }
            Some(why) => format!("{head}; at max unpriced, {why}"),
            None => format!("{head}; {max}"),
        }
    }

    fn covered(mut self, by: &str) -> Item {
        self.now_usd_per_hour = Some(0.0);
        self.max_usd_per_hour = Some(0.0);
        self.note = format!("runs on {by}, paid up front: no hourly instance charge");
        self
    }
}

/// Every instance type the stack's priced objects run or reserve, for the one batch of price
/// reads a plan makes.
pub fn instance_types(stack: &Stack) -> Vec<String> {
    let mut out = BTreeSet::new();
    for r in &stack.resources {
        match r.kind.name() {
            "node_group" | "self_managed_node_group" => out.extend(group_types(stack, r)),
            "karpenter_pool" => out.extend(strings(lit(r, "instance_types"))),
            "capacity_reservation" if !r.attrs.contains_key("existing") => out.extend(lit_str(r, "instance_type")),
            _ => {}
        }
    }
    out.into_iter().collect()
}

/// Whether the stack has anything the plan prices (so its policy needs the price reads).
pub fn prices_anything(stack: &Stack) -> bool {
    stack.resources.iter().any(|r| {
        matches!(r.kind.name(), "node_group" | "self_managed_node_group" | "karpenter_pool")
            || (r.kind.name() == "capacity_reservation" && !r.attrs.contains_key("existing"))
    })
}

/// A group's instance types: its `instance_types`, else its launch template's `instance_type`.
fn group_types(stack: &Stack, r: &Resource) -> Vec<String> {
    let listed = strings(lit(r, "instance_types"));
    if !listed.is_empty() {
        return listed;
    }
    referenced(stack, r, "launch_template", "launch_template")
        .and_then(|lt| lit_str(lt, "instance_type"))
        .into_iter()
        .collect()
}

/// `(min, desired, max)` of a group's `scaling` (absent: 1, 1, 1; desired defaults to min).
fn scaling(r: &Resource) -> Option<(u64, u64, u64)> {
    let Some(expr) = r.attrs.get("scaling") else { return Some((1, 1, 1)) };
    let v = expr.resolve(&|_| Value::Unknown);
    let t = v.as_table()?;
    let n = |k: &str| t.get(k).and_then(Value::as_int).and_then(|i| u64::try_from(i).ok());
    let min = n("min")?;
    let max = n("max")?;
    Some((min, n("desired").unwrap_or(min), max))
}

/// The highest Spot price of `types` in `zones` (any zone of the region when none is known),
/// and the `type in zone` pairs with no price. DescribeSpotPriceHistory has no row for a type in
/// a zone that does not offer it (GPU types are often not in every zone), and Auto Scaling and
/// Karpenter launch only where a type is offered: such a pair is left out, not unpriced. A type
/// with no price in any of the zones makes the estimate unpriced (None), never 0.
fn spot_price(book: &PriceBook, region: &str, zones: &[String], types: &[String]) -> Option<(Usd, Vec<String>)> {
    let mut best: Option<Usd> = None;
    let mut missing = vec![];
    for t in types {
        let prices: Vec<(Option<&String>, Option<Usd>)> = if zones.is_empty() {
            vec![(None, book.spot_hourly(region, None, t))]
        } else {
            zones.iter().map(|z| (Some(z), book.spot_hourly(region, Some(z), t))).collect()
        };
        let mut priced = false;
        for (z, p) in prices {
            match p {
                Some(p) => {
                    priced = true;
                    best = Some(best.map_or(p, |b| b.max(p)));
                }
                None => missing.extend(z.map(|z| format!("{t} in {z}"))),
            }
        }
        if !priced {
            return None;
        }
    }
    best.map(|b| (b, missing))
}

/// The note's words for Spot pairs with no price: "; no Spot offering of g5.xlarge in us-west-2c".
fn no_offering(missing: &[String]) -> String {
    if missing.is_empty() {
        String::new()
    } else {
        format!(" (no Spot price, so no offering, of {}: left out)", missing.join(", "))
    }
}

fn why_unpriced(book: &PriceBook, region: &str, what: &str) -> String {
    if !book.knows_region(region) {
        format!(
            "no {what} in {region}: the prices cover {} only (a refreshing plan reads them)",
            book.regions().join(", ")
        )
    } else if !book.problems().is_empty() {
        format!("no {what} in {region}: reading prices failed (see below)")
    } else {
        format!("no {what} in {region}")
    }
}

/// The cost of the stack as the plan leaves it. A destroy plan has none.
pub fn estimate(stack: &Stack, plan: &Plan, book: &PriceBook) -> Cost {
    let region = stack.region.as_str();
    let mut items = vec![];
    for r in &stack.resources {
        let item = match r.kind.name() {
            "node_group" => Some(node_group(stack, r, book, region)),
            "self_managed_node_group" => Some(self_managed(stack, r, book, region)),
            "karpenter_pool" => Some(pool(stack, r, book, region)),
            "hyperpod_cluster" => Some(hyperpod(r)),
            _ => None,
        };
        items.extend(item);
    }
    for r in
        stack.resources.iter().filter(|r| r.kind.name() == "capacity_reservation" && !r.attrs.contains_key("existing"))
    {
        items.push(reservation(stack, r, book, region, &items));
    }
    for c in &plan.changes {
        let Action::Purchase(offer) = &c.action else { continue };
        let Some(r) = stack.get(&c.address) else { continue };
        let mut item = Item::new(r, "purchase");
        match offer {
            Offer::Found(p) => {
                item.upfront_usd = Some(p.upfront_usd);
                item.instance_type = Some(p.instance_type.clone());
                item.count_now = u64::try_from(p.instance_count).ok();
                item.now_usd_per_hour = Some(0.0);
                item.max_usd_per_hour = Some(0.0);
            }
            Offer::Offline(_) | Offer::NotSearched => {
                // A purchase adds no hourly charge; only its price up front is unknown.
                item.now_usd_per_hour = Some(0.0);
                item.max_usd_per_hour = Some(0.0);
                item.unpriced = Some("offering not searched with --refresh=false; a refreshing plan prices it".into());
                item.note = "bought by this plan, non-refundable".into();
            }
        }
        items.push(item);
    }
    let list = book.list_region(region).to_string();
    if list != region {
        // Every On-Demand price here is another region's list price: each line says so.
        for i in items.iter_mut().filter(|i| match i.market {
            "spot" => false,
            "mixed" => i.now_usd_per_hour.is_some(),
            _ => i.unit_usd_per_hour.is_some(),
        }) {
            let sep = if i.note.is_empty() { "" } else { "; " };
            i.note = format!("{}{sep}{list} On-Demand list price used for {region}", i.note);
        }
    }
    let sum = |f: fn(&Item) -> Option<Usd>| items.iter().filter_map(f).fold(0.0, |a, b| a + b);
    // A total is known only when every item's part of it is.
    let total = |f: fn(&Item) -> Option<Usd>, applies: fn(&Item) -> bool| {
        items.iter().filter(|i| applies(i)).all(|i| f(i).is_some()).then(|| sum(f))
    };
    let (now, max) = (total(|i| i.now_usd_per_hour, |_| true), total(|i| i.max_usd_per_hour, |_| true));
    let upfront = total(|i| i.upfront_usd, |i| i.market == "purchase");
    let unpriced: Vec<String> = items
        .iter()
        .filter(|i| i.unpriced.is_some())
        .map(|i| i.address.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    Cost {
        source: book.source().to_string(),
        on_demand_prices_of: list,
        complete: now.is_some() && max.is_some() && upfront.is_some() && unpriced.is_empty(),
        now_usd_per_hour: now,
        max_usd_per_hour: max,
        upfront_usd: upfront,
        priced_now_usd_per_hour: sum(|i| i.now_usd_per_hour),
        priced_max_usd_per_hour: sum(|i| i.max_usd_per_hour),
        priced_upfront_usd: sum(|i| i.upfront_usd),
        unpriced,
        problems: book.problems().to_vec(),
        items,
    }
}

fn node_group(stack: &Stack, r: &Resource, book: &PriceBook, region: &str) -> Item {
    let capacity = lit_str(r, "capacity_type").unwrap_or_else(|| "ON_DEMAND".into());
    let market = match capacity.as_str() {
        "SPOT" => "spot",
        "CAPACITY_BLOCK" => "capacity-block",
        _ => "on-demand",
    };
    let mut item = Item::new(r, market);
    if let Some((_, desired, max)) = scaling(r) {
        item.count_now = Some(desired);
        item.count_max = Some(max);
    }
    if market == "capacity-block" {
        item.instance_type = group_types(stack, r).into_iter().next();
        let block = referenced(stack, r, "launch_template", "launch_template")
            .and_then(|lt| crate::stack::query::target(stack, lt, "capacity_reservation"))
            .map_or("its Capacity Block".to_string(), |b| format!("`{}`", b.address));
        return item.covered(&block);
    }
    let types = group_types(stack, r);
    let Some((_, desired, max)) = scaling(r) else {
        item.unpriced = Some("scaling not known before apply".into());
        return item;
    };
    item.count_now = Some(desired);
    item.count_max = Some(max);
    if types.is_empty() {
        item.unpriced = Some("instance type not known before apply".into());
        return item;
    }
    let unit = if market == "spot" {
        let zones = crate::rules::subnet_zones(stack, r);
        let found = spot_price(book, region, &zones, &types);
        item.note = format!(
            "Spot: the highest price of {} in {}{}",
            types.join(", "),
            if zones.is_empty() { format!("the zones of {region}") } else { zones.join(", ") },
            found.as_ref().map_or(String::new(), |(_, missing)| no_offering(missing))
        );
        found.map(|(usd, _)| usd)
    } else {
        item.instance_type = Some(types[0].clone());
        if types.len() > 1 {
            item.note = format!("On-Demand {}, the first listed type: EKS launches On-Demand types in order", types[0]);
        }
        book.on_demand_hourly(region, &types[0])
    };
    if market == "spot" && types.len() == 1 {
        item.instance_type = Some(types[0].clone());
    }
    price(&mut item, unit, desired, max, book, region, &types.join(", "));
    item
}

/// Sets a group's unit price and its hourly cost now and at max, or says it is unpriced.
fn price(item: &mut Item, unit: Option<Usd>, now: u64, max: u64, book: &PriceBook, region: &str, types: &str) {
    match unit {
        Some(u) => {
            item.unit_usd_per_hour = Some(u);
            item.now_usd_per_hour = Some(u * now as f64);
            item.max_usd_per_hour = Some(u * max as f64);
        }
        None if now == 0 && max == 0 => {
            item.now_usd_per_hour = Some(0.0);
            item.max_usd_per_hour = Some(0.0);
        }
        None => item.unpriced = Some(why_unpriced(book, region, &format!("{} price of {types}", item.market))),
    }
}

fn self_managed(stack: &Stack, r: &Resource, book: &PriceBook, region: &str) -> Item {
    let types = group_types(stack, r);
    let mixed = lit(r, "mixed_instances");
    let mixed = mixed.as_ref().and_then(Value::as_table);
    let int = |k: &str, d: i64| mixed.and_then(|t| t.get(k)).and_then(Value::as_int).unwrap_or(d).max(0) as u64;
    let (base, pct) = (int("on_demand_base_capacity", 0), int("on_demand_percentage_above_base", 100).min(100));
    let lowest =
        mixed.and_then(|t| t.get("on_demand_allocation_strategy")).and_then(Value::as_str) == Some("lowest-price");
    let market = if pct == 100 {
        "on-demand"
    } else if pct == 0 && base == 0 {
        "spot"
    } else {
        "mixed"
    };
    let mut item = Item::new(r, market);
    let Some((_, desired, max)) = scaling(r) else {
        item.unpriced = Some("scaling not known before apply".into());
        return item;
    };
    item.count_now = Some(desired);
    item.count_max = Some(max);
    if types.is_empty() {
        item.unpriced = Some("instance type not known before apply".into());
        return item;
    }
    // Auto Scaling fills the base with On-Demand, then splits the rest by the percentage;
    // the On-Demand share is rounded up here (so the estimate does not understate; AWS's
    // rounding is UNVERIFIED).
    let split = |n: u64| {
        let od = n.min(base) + (n.saturating_sub(base) * pct).div_ceil(100);
        (od, n - od)
    };
    let od_price = if lowest {
        types
            .iter()
            .map(|t| book.on_demand_hourly(region, t))
            .collect::<Option<Vec<_>>>()
            .and_then(|v| v.into_iter().reduce(Usd::min))
    } else {
        book.on_demand_hourly(region, &types[0])
    };
    let zones = crate::rules::subnet_zones(stack, r);
    let found = spot_price(book, region, &zones, &types);
    let missing = found.as_ref().map_or(String::new(), |(_, missing)| no_offering(missing));
    let spot = found.map(|(usd, _)| usd);
    let cost = |n: u64| -> Option<Usd> {
        let (od, sp) = split(n);
        let a = if od > 0 { od_price? * od as f64 } else { 0.0 };
        let b = if sp > 0 { spot? * sp as f64 } else { 0.0 };
        Some(a + b)
    };
    if types.len() == 1 || market == "on-demand" {
        item.instance_type = Some(if lowest { types.join(", ") } else { types[0].clone() });
    }
    item.unit_usd_per_hour = match market {
        "on-demand" => od_price,
        "spot" => spot,
        _ => None,
    };
    item.note = match market {
        "on-demand" if lowest => "On-Demand at the lowest-priced listed type".into(),
        "on-demand" => String::new(),
        "spot" => format!("Spot: the highest price of {}{missing}", types.join(", ")),
        _ => format!(
            "mixed: {base} On-Demand base, then {pct}% On-Demand ({} now, {} at max), the rest Spot{missing}",
            split(desired).0,
            split(max).0
        ),
    };
    match (cost(desired), cost(max)) {
        (Some(n), Some(m)) => {
            item.now_usd_per_hour = Some(n);
            item.max_usd_per_hour = Some(m);
        }
        _ => item.unpriced = Some(why_unpriced(book, region, &format!("{market} price of {}", types.join(", ")))),
    }
    item
}

/// A number from a Kubernetes quantity when it is a plain count ("1000", 1000); millicores and
/// suffixes are not read.
fn plain_count(v: &Value) -> Option<u64> {
    match v {
        Value::Int(i) => u64::try_from(*i).ok(),
        Value::Str(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn pool(stack: &Stack, r: &Resource, book: &PriceBook, region: &str) -> Item {
    let mut caps = strings(lit(r, "capacity_types"));
    let reservations = r.attrs.get("capacity_reservations").is_some_and(|e| {
        let mut refs = vec![];
        e.refs(&mut refs);
        !refs.is_empty() || lit(r, "capacity_reservations").is_some_and(|v| !v.as_list().unwrap_or_default().is_empty())
    }) || r.attrs.contains_key("capacity_reservation_tags");
    if caps.is_empty() && !r.attrs.contains_key("capacity_types") {
        // A `karpenter.sh/capacity-type In [...]` requirement, as `KarpenterPool::normalize`
        // reads it into `capacity_types`.
        use crate::resources::karpenter_pool::requirements;
        let reqs = lit(r, "requirements")
            .map(|v| requirements::parse(&[("requirements".to_string(), v)].into()))
            .unwrap_or_default();
        caps = requirements::capacity_types(&reqs).unwrap_or_default();
    }
    if caps.is_empty() {
        caps = vec![if reservations { "reserved" } else { "on-demand" }.to_string()];
    }
    let market = if caps.iter().any(|c| c == "on-demand") {
        "on-demand"
    } else if caps.iter().any(|c| c == "spot") {
        "spot"
    } else {
        "reserved"
    };
    let mut item = Item::new(r, market);
    item.count_now = Some(0);
    item.now_usd_per_hour = Some(0.0);
    if market == "reserved" {
        item.max_usd_per_hour = Some(0.0);
        item.note = "runs only on its reservations (priced in their lines): no instance charge of its own".into();
        return item;
    }
    let types = strings(lit(r, "instance_types"));
    if types.is_empty() {
        item.unpriced = Some("no instance_types: the pool may launch any type its requirements allow".into());
        item.note = "Karpenter starts nodes for pending pods: none now".into();
        return item;
    }
    let catalog = crate::aws::catalog::embedded();
    let gpu_limit = lit(r, "gpu_limit").and_then(|v| v.as_int()).and_then(|i| u64::try_from(i).ok());
    let limits = lit(r, "limits");
    let limit = |k: &str| limits.as_ref().and_then(Value::as_table).and_then(|t| t.get(k)).and_then(plain_count);
    let (nodes, cpu) = (limit("nodes"), limit("cpu"));
    let zones = crate::rules::subnet_zones(stack, r);
    let mut dearest: Option<(Usd, u64, &String)> = None;
    let mut absent = vec![];
    for t in &types {
        let info = catalog.get(t);
        let mut bound: Option<u64> = nodes;
        let mut tighten = |n: Option<u64>| {
            if let Some(n) = n {
                bound = Some(bound.map_or(n, |b| b.min(n)));
            }
        };
        tighten(gpu_limit.zip(info.map(|i| u64::from(i.gpus))).filter(|(_, g)| *g > 0).map(|(l, g)| l / g));
        tighten(cpu.zip(info.map(|i| u64::from(i.vcpus))).filter(|(_, v)| *v > 0).map(|(l, v)| l / v));
        let Some(n) = bound else {
            item.unpriced = Some(format!("no limit bounds its {t} nodes (set gpu_limit or limits.nodes)"));
            return item;
        };
        let unit = if market == "spot" {
            spot_price(book, region, &zones, std::slice::from_ref(t)).map(|(usd, missing)| {
                absent.extend(missing);
                usd
            })
        } else {
            book.on_demand_hourly(region, t)
        };
        let Some(unit) = unit else {
            item.unpriced = Some(why_unpriced(book, region, &format!("{market} price of {t}")));
            return item;
        };
        if dearest.is_none_or(|(c, _, _)| unit * n as f64 > c) {
            dearest = Some((unit * n as f64, n, t));
        }
    }
    if let Some((usd, n, t)) = dearest {
        item.count_max = Some(n);
        item.max_usd_per_hour = Some(usd);
        item.instance_type = Some(t.clone());
        item.unit_usd_per_hour = Some(if n > 0 { usd / n as f64 } else { 0.0 });
        item.note = format!(
            "Karpenter starts nodes for pending pods: none now; at its limits ≈ {n} × {t} ({}, the dearest listed type; Karpenter's limit checks may overrun a little){}",
            if market == "spot" { "Spot" } else { "On-Demand" },
            no_offering(&absent)
        );
    }
    item
}

fn hyperpod(r: &Resource) -> Item {
    let mut item = Item::new(r, "on-demand");
    // Counts are literal even where other keys (roles) are known only after apply.
    let groups = r.attrs.get("instance_groups").map(|e| e.resolve(&|_| Value::Unknown));
    let Some(groups) = groups.as_ref().and_then(Value::as_table) else {
        item.unpriced = Some("instance groups not known before apply".into());
        return item;
    };
    let mut count = 0;
    let mut on_plan = true;
    for g in groups.values().filter_map(Value::as_table) {
        count += g.get("instance_count").and_then(Value::as_int).unwrap_or(0).max(0) as u64;
        on_plan &= g.contains_key("training_plan");
    }
    item.count_now = Some(count);
    item.count_max = Some(count);
    if on_plan {
        item.market = "training-plan";
        return item.covered("its training plans");
    }
    if count == 0 {
        item.now_usd_per_hour = Some(0.0);
        item.max_usd_per_hour = Some(0.0);
        return item;
    }
    item.unpriced = Some("SageMaker HyperPod instance prices (the AmazonSageMaker price list) are not read".into());
    item
}

/// Whether an expression refers to `address` anywhere in it.
fn refers_to(e: Option<&crate::stack::Expr>, address: &str) -> bool {
    let Some(e) = e else { return false };
    let mut refs = vec![];
    e.refs(&mut refs);
    refs.iter().any(|x| x.address == address)
}

fn reservation(stack: &Stack, r: &Resource, book: &PriceBook, region: &str, groups: &[Item]) -> Item {
    let mut item = Item::new(r, "capacity-reservation");
    let count = lit(r, "instance_count").and_then(|v| v.as_int()).and_then(|i| u64::try_from(i).ok());
    let t = lit_str(r, "instance_type");
    item.instance_type = t.clone();
    item.count_now = count;
    item.count_max = count;
    let (Some(count), Some(t)) = (count, t) else {
        item.unpriced = Some("instance type or count not known before apply".into());
        return item;
    };
    // Its users: node groups through their launch template, self-managed groups through
    // capacity_reservation.ids, pools through capacity_reservations.
    let users: Vec<&Resource> = stack
        .resources
        .iter()
        .filter(|u| match u.kind.name() {
            "node_group" => referenced(stack, u, "launch_template", "launch_template")
                .is_some_and(|lt| refers_to(lt.attrs.get("capacity_reservation"), &r.address)),
            "self_managed_node_group" => refers_to(u.attrs.get("capacity_reservation"), &r.address),
            "karpenter_pool" => refers_to(u.attrs.get("capacity_reservations"), &r.address),
            _ => false,
        })
        .collect();
    let of = |u: &Resource, f: fn(&Item) -> Option<u64>| groups.iter().find(|g| g.address == u.address).and_then(f);
    let used_now: u64 = users.iter().filter_map(|u| of(u, |g| g.count_now)).sum::<u64>().min(count);
    // At max, the part of the reservation its users' lines already price: a node group's
    // instances up to its max; a pool that may also launch On-Demand or Spot, up to its max
    // (its line prices that many at its dearest type); a reserved-only pool prices nothing of
    // its own ("priced in their lines"), so the whole reservation stays in this line, which
    // bills 24×7 whether used or not.
    let used_max: u64 = users
        .iter()
        .filter_map(|u| {
            let g = groups.iter().find(|g| g.address == u.address)?;
            if g.market == "reserved" { Some(0) } else { g.count_max }
        })
        .sum::<u64>()
        .min(count);
    let (idle_now, idle_max) = (count - used_now, count - used_max);
    let Some(unit) = book.on_demand_hourly(region, &t) else {
        item.unpriced = Some(why_unpriced(book, region, &format!("On-Demand price of {t}")));
        return item;
    };
    item.unit_usd_per_hour = Some(unit);
    item.now_usd_per_hour = Some(unit * idle_now as f64);
    item.max_usd_per_hour = Some(unit * idle_max as f64);
    let names = users.iter().map(|u| format!("`{}`", u.address)).collect::<Vec<_>>().join(", ");
    let used = if users.is_empty() {
        "no group of the stack targets it".to_string()
    } else {
        let verb = if users.len() == 1 { "runs" } else { "run" };
        let own = groups.iter().any(|g| g.market == "reserved" && users.iter().any(|u| u.address == g.address));
        format!(
            "{names} {verb} {used_now} on it now, up to {used_max} at max (priced in their lines){}",
            if own { "; reserved-only pools' use of it is priced here" } else { "" }
        )
    };
    item.note = format!(
        "{count} × {t} reserved = ${:.2}/h, billed whether used or not; {used}; idle: {idle_now} now (${:.2}/h), {idle_max} at max (${:.2}/h)",
        unit * count as f64,
        unit * idle_now as f64,
        unit * idle_max as f64
    );
    if lit_str(r, "match").as_deref() == Some("open") {
        item.note.push_str("; open: other matching instances may use the idle part");
    }
    item
}

/// "$1,234.56": dollars with two decimals and thousands separators.
pub fn usd(v: Usd) -> String {
    let cents = (v * 100.0).round() as i128;
    let (whole, frac) = (cents.abs() / 100, cents.abs() % 100);
    let digits = whole.to_string();
    let mut grouped = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(ch);
    }
    format!("{}${grouped}.{frac:02}", if cents < 0 { "-" } else { "" })
}

/// The summary line: "≈ $X/h now, up to $Y/h at max; $Z up front, non-refundable". A total
/// with an unpriced part is never shown as a plain sum: "≥ $X/h" (the priced part, a lower
/// bound) or "unpriced" when nothing of it is priced, and the unpriced items are named.
pub fn summary(c: &Cost) -> String {
    let now = match c.now_usd_per_hour {
        Some(v) => format!("≈ {}/h now", usd(v)),
        None if c.priced_now_usd_per_hour > 0.0 => format!("≥ {}/h now", usd(c.priced_now_usd_per_hour)),
        None => "unpriced now".to_string(),
    };
    let max = match c.max_usd_per_hour {
        Some(v) => format!("up to {}/h at max", usd(v)),
        None if c.priced_max_usd_per_hour > 0.0 => format!("up to ≥ {}/h at max", usd(c.priced_max_usd_per_hour)),
        None => "unpriced at max".to_string(),
    };
    let mut s = format!("{now}, {max}");
    let purchases = c.items.iter().filter(|i| i.market == "purchase");
    let (priced, unpriced) =
        purchases.fold((0, 0), |(p, u), i| if i.upfront_usd.is_none() { (p, u + 1) } else { (p + 1, u) });
    match (priced, unpriced) {
        (0, 0) => {}
        (0, _) => s.push_str("; purchases up front unpriced (offerings not searched), non-refundable"),
        (_, 0) => s.push_str(&format!("; {} up front, non-refundable", usd(c.priced_upfront_usd))),
        _ => s.push_str(&format!("; ≥ {} up front, non-refundable", usd(c.priced_upfront_usd))),
    }
    if !c.unpriced.is_empty() {
        let n = c.unpriced.len();
        s.push_str(&format!(
            " (excluding {n} unpriced item{}: {})",
            if n == 1 { "" } else { "s" },
            c.unpriced.join(", ")
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(name: &str) -> Stack {
        let path = format!("{}/examples/{name}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap();
        let vars = crate::stack::VarSources { cli: &[], env: &|_| None };
        crate::load::check(crate::stack::Source::new(&path, text), &vars).unwrap_or_else(|d| panic!("{d}"))
    }

    fn no_changes(stack: &Stack) -> Plan {
        Plan {
            stack: stack.name.clone(),
            region: stack.region.clone(),
            lineage: None,
            serial: 0,
            changes: vec![],
            unchanged: 0,
            destroy: false,
            warnings: vec![],
            cost: None,
        }
    }

    fn near(a: Option<Usd>, b: Usd) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    /// examples/self-managed.toml: 1 On-Demand base, 0% above it; 1 now, 6 at max. The Spot part
    /// is priced at the highest Spot price of its three types in its two zones.
    #[test]
    fn a_mixed_group_prices_its_on_demand_base_and_the_rest_at_spot() {
        let stack = example("self-managed.toml");
        let r = "us-west-2";
        let spot = [
            (r, "us-west-2a", "g6.2xlarge", 0.30),
            (r, "us-west-2b", "g6.2xlarge", 0.31),
            (r, "us-west-2a", "g5.2xlarge", 0.40),
            (r, "us-west-2b", "g5.2xlarge", 0.20),
            (r, "us-west-2a", "g6e.2xlarge", 0.50),
            (r, "us-west-2b", "g6e.2xlarge", 0.45),
            // Another zone's price is not the group's.
            (r, "us-west-2c", "g6e.2xlarge", 9.0),
        ];
        let book = PriceBook::from_prices("test", &[(r, "g6.2xlarge", 1.0)], &spot);
        let cost = estimate(&stack, &no_changes(&stack), &book);
        let g = cost.items.iter().find(|i| i.address == "self_managed_node_group.gpu").unwrap();
        assert_eq!(g.market, "mixed");
        assert!(near(g.now_usd_per_hour, 1.0) && near(g.max_usd_per_hour, 1.0 + 5.0 * 0.50), "{g:?}");
        assert!(cost.complete && near(cost.now_usd_per_hour, 1.0), "{cost:?}");
        // A type with no Spot price in one of the zones (not offered there) is left out of that
        // zone only: the group stays priced, and the note names the pair (review cost M3).
        let book = PriceBook::from_prices("test", &[(r, "g6.2xlarge", 1.0)], &spot[1..]);
        let cost = estimate(&stack, &no_changes(&stack), &book);
        let g = cost.items.iter().find(|i| i.address == "self_managed_node_group.gpu").unwrap();
        assert!(near(g.max_usd_per_hour, 1.0 + 5.0 * 0.50) && g.unpriced.is_none(), "{g:?}");
        assert!(g.note.contains("g6.2xlarge in us-west-2a"), "{g:?}");
        // A type with no Spot price in any of its zones makes the group unpriced, never 0.
        let book = PriceBook::from_prices("test", &[(r, "g6.2xlarge", 1.0)], &spot[..4]);
        let cost = estimate(&stack, &no_changes(&stack), &book);
        let g = cost.items.iter().find(|i| i.address == "self_managed_node_group.gpu").unwrap();
        assert!(g.now_usd_per_hour.is_none() && g.unpriced.is_some(), "{g:?}");
        assert_eq!(cost.unpriced, vec!["self_managed_node_group.gpu".to_string()]);
        // The totals are then unknown, not the priced part (review cost M2).
        assert!(cost.now_usd_per_hour.is_none() && cost.max_usd_per_hour.is_none() && !cost.complete, "{cost:?}");
    }

    /// examples/karpenter.toml: `fallback` (On-Demand, gpu_limit 8, single-GPU types) is priced
    /// at 8 of its dearest type; the reserved-only pools add nothing of their own.
    #[test]
    fn a_pool_at_max_is_its_limit_of_its_dearest_type() {
        let stack = example("karpenter.toml");
        let r = "us-west-2";
        let book = PriceBook::from_prices(
            "test",
            &[(r, "g6.xlarge", 0.8), (r, "g6.2xlarge", 1.0), (r, "g5.xlarge", 1.1), (r, "m6i.large", 0.1)],
            &[],
        );
        let cost = estimate(&stack, &no_changes(&stack), &book);
        let fallback = cost.items.iter().find(|i| i.address == "karpenter_pool.fallback").unwrap();
        assert_eq!((fallback.count_now, fallback.count_max), (Some(0), Some(8)));
        assert!(near(fallback.now_usd_per_hour, 0.0) && near(fallback.max_usd_per_hour, 8.0 * 1.1), "{fallback:?}");
        assert_eq!(fallback.instance_type.as_deref(), Some("g5.xlarge"));
        let train = cost.items.iter().find(|i| i.address == "karpenter_pool.train").unwrap();
        assert_eq!(train.market, "reserved");
        assert!(near(train.max_usd_per_hour, 0.0));
        // The Spot pool has no Spot price in this book: unpriced at max, and said in the totals.
        let burst = cost.items.iter().find(|i| i.address == "karpenter_pool.burst").unwrap();
        assert!(burst.max_usd_per_hour.is_none() && cost.unpriced.contains(&burst.address), "{burst:?}");
    }

    /// Review cost M1: a reserved-only pool prices nothing of its own, so its ODCR's line keeps
    /// the whole reservation at max (it bills whether used or not); a pool that may also launch
    /// On-Demand prices up to its max of it in its own line.
    #[test]
    fn an_odcr_used_by_a_reserved_only_pool_is_billed_in_full_at_max() {
        let stack = example("karpenter.toml");
        let r = "us-west-2";
        let book = PriceBook::from_prices(
            "test",
            &[(r, "g6.xlarge", 0.8), (r, "g6.2xlarge", 1.0), (r, "g5.xlarge", 1.1), (r, "m6i.large", 0.1)],
            &[],
        );
        let cost = estimate(&stack, &no_changes(&stack), &book);
        let odcr = cost.items.iter().find(|i| i.address == "capacity_reservation.inference").unwrap();
        let count = odcr.count_now.unwrap() as f64;
        assert!(count > 0.0);
        let unit = odcr.unit_usd_per_hour.unwrap();
        assert!(near(odcr.now_usd_per_hour, count * unit) && near(odcr.max_usd_per_hour, count * unit), "{odcr:?}");
        // The same pool allowing On-Demand with a limit of 2 nodes: 2 in its line, the rest here.
        let text = std::fs::read_to_string(format!("{}/examples/karpenter.toml", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let text = text.replace(
            "[karpenter_pool.inference]\n",
            "[karpenter_pool.inference]\ncapacity_types = [\"reserved\", \"on-demand\"]\n",
        );
        let text = text.replace("gpu_limit             = 4\n", "gpu_limit             = 2\n");
        assert!(text.contains("gpu_limit             = 2\n"), "karpenter.toml's inference pool has gpu_limit 4");
        let vars = crate::stack::VarSources { cli: &[], env: &|_| None };
        let stack =
            crate::load::check(crate::stack::Source::new("k.toml", text), &vars).unwrap_or_else(|d| panic!("{d}"));
        let cost = estimate(&stack, &no_changes(&stack), &book);
        let pool = cost.items.iter().find(|i| i.address == "karpenter_pool.inference").unwrap();
        assert_eq!((pool.market, pool.count_max), ("on-demand", Some(2)), "{pool:?}");
        let odcr = cost.items.iter().find(|i| i.address == "capacity_reservation.inference").unwrap();
        assert!(near(odcr.max_usd_per_hour, (count - 2.0) * unit), "{odcr:?}");
    }

    /// Review cost minor 6: a capacity type written as a requirement is the pool's market.
    #[test]
    fn a_pools_market_follows_a_capacity_type_requirement() {
        let text = std::fs::read_to_string(format!("{}/examples/karpenter.toml", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let written =
            "capacity_types  = [\"on-demand\"]\ninstance_types  = [\"g6.xlarge\", \"g6.2xlarge\", \"g5.xlarge\"]\n";
        assert!(text.contains(written), "karpenter.toml's fallback pool");
        let text = text.replace(
            written,
            "requirements = [{ key = \"karpenter.sh/capacity-type\", operator = \"In\", values = [\"spot\"] }]\ninstance_types  = [\"g6.xlarge\", \"g6.2xlarge\", \"g5.xlarge\"]\n",
        );
        let vars = crate::stack::VarSources { cli: &[], env: &|_| None };
        let stack =
            crate::load::check(crate::stack::Source::new("k.toml", text), &vars).unwrap_or_else(|d| panic!("{d}"));
        let r = "us-west-2";
        let book = PriceBook::from_prices(
            "test",
            &[(r, "g6.xlarge", 0.8), (r, "g6.2xlarge", 1.0), (r, "g5.xlarge", 1.1)],
            &[],
        );
        let cost = estimate(&stack, &no_changes(&stack), &book);
        let fallback = cost.items.iter().find(|i| i.address == "karpenter_pool.fallback").unwrap();
        assert_eq!(fallback.market, "spot", "{fallback:?}");
        assert!(fallback.max_usd_per_hour.is_none(), "no Spot price in the book: unpriced, {fallback:?}");
    }

    /// Review cost M2: a total with an unpriced part never reads as a plain sum, let alone $0.00.
    #[test]
    fn totals_with_unpriced_items_are_lower_bounds_or_unpriced() {
        let stack = example("karpenter.toml");
        let cost = estimate(&stack, &no_changes(&stack), &PriceBook::none("nothing"));
        assert!(!cost.complete && cost.now_usd_per_hour.is_none() && cost.max_usd_per_hour.is_none());
        let line = summary(&cost);
        assert!(line.starts_with("unpriced now, unpriced at max (excluding "), "{line}");
        assert!(!line.contains("$0.00"), "{line}");
        let r = "us-west-2";
        let book = PriceBook::from_prices("test", &[(r, "m6i.large", 0.1)], &[]);
        let cost = estimate(&stack, &no_changes(&stack), &book);
        let line = summary(&cost);
        assert!(line.starts_with("≥ $"), "{line}");
        assert!(line.contains("unpriced item"), "{line}");
        let json = serde_json::to_value(&cost).unwrap();
        assert!(json["now_usd_per_hour"].is_null() && json["complete"] == false, "{json}");
        assert!(json["priced_now_usd_per_hour"].as_f64().unwrap() > 0.0, "{json}");
    }

    #[test]
    fn dollars_are_grouped_and_rounded_to_cents() {
        assert_eq!(usd(0.0), "$0.00");
        assert_eq!(usd(0.8048), "$0.80");
        assert_eq!(usd(1234.565), "$1,234.57");
        assert_eq!(usd(1_000_000.0), "$1,000,000.00");
    }
}
