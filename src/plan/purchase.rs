//! The plan's purchases (DESIGN.md: money): the offerings a plan proposes for every kind
//! that buys (Capacity Blocks, training plans), searched with the refresh, the cheapest
//! long-enough one in a zone the resource's users run in chosen, and refused above
//! `max_upfront_usd`. Offline, a purchase says what a refreshing plan will search for.

use std::collections::{BTreeSet, HashMap};

use super::{Action, Offer, Plan};
use crate::aws::{AwsError, Ctx};
use crate::resources::offering::{Purchase, choose};
use crate::rules::{hyperpod, lit, node_groups, referenced, span, subnet_zones};
use crate::stack::{Diagnostic, Resource, Stack};
use crate::state::State;
use crate::value::{Attrs, Value};

/// Where an offering search for the purchase `r` looks, from `inputs` (its attributes): the
/// zones of the resources that will use it (a block's node groups, a training plan's
/// HyperPod cluster), since capacity helps only where its users run. A block with one such
/// zone is searched there; any offering outside these zones is dropped. Returns the search
/// inputs, the zones (empty: anywhere) and a note saying where it searched.
fn search_scope(
    stack: &Stack,
    r: &Resource,
    mut inputs: Attrs,
    known: &SubnetZones,
) -> (Attrs, BTreeSet<String>, String) {
    let (users, zones): (Vec<&Resource>, BTreeSet<String>) = match r.kind.name() {
        "training_plan" => {
            let users = hyperpod::clusters_on_plan(stack, &r.address);
            let zones = users
                .iter()
                .flat_map(|c| {
                    let literal = literal_subnets(c).into_iter().filter_map(|s| known.get(&s).cloned());
                    subnet_zones(stack, c).into_iter().chain(literal)
                })
                .collect();
            (users, zones)
        }
        _ => {
            let users: Vec<&Resource> = node_groups(stack)
                .filter(|ng| {
                    referenced(stack, ng, "launch_template", "launch_template")
                        .and_then(|lt| referenced(stack, lt, "capacity_reservation", "capacity_block"))
                        .is_some_and(|b| b.address == r.address)
                })
                .collect();
            let zones = users.iter().flat_map(|ng| subnet_zones(stack, ng)).collect();
            (users, zones)
        }
    };
    if let Some(z) = inputs.get("availability_zone").and_then(Value::as_str) {
        return (inputs.clone(), BTreeSet::from([z.to_string()]), String::new());
    }
    if zones.is_empty() {
        return (inputs, zones, String::new());
    }
    let names = users.iter().map(|u| u.address.as_str()).collect::<Vec<_>>().join(", ");
    let listed = zones.iter().cloned().collect::<Vec<_>>().join(", ");
    let zone_note = format!(" (searched in {listed}, the zone{} of {names})", if zones.len() == 1 { "" } else { "s" });
    if zones.len() == 1 && r.kind.name() == "capacity_block" {
        inputs.insert("availability_zone".into(), Value::str(listed));
    }
    (inputs, zones, zone_note)
}

/// The zones a HyperPod cluster's subnets are in, as far as they can be known before it
/// exists: a stack subnet's literal `availability_zone`, a literal subnet id's zone from
/// `DescribeSubnets` (`known`). Also returns the subnets whose zone is unknown (a variable,
/// another resource's output, a subnet written without its zone).
fn cluster_zones(stack: &Stack, c: &Resource, known: &SubnetZones) -> (BTreeSet<String>, Vec<String>) {
    let mut zones = BTreeSet::new();
    let mut unknown = vec![];
    let literal = |id: &str, zones: &mut BTreeSet<String>, unknown: &mut Vec<String>| match known.get(id) {
        Some(z) => {
            zones.insert(z.clone());
        }
        None => unknown.push(id.to_string()),
    };
    match (crate::rules::lit(c, "subnets"), c.attrs.get("subnets").map(|e| &e.kind)) {
        (Some(v), _) => {
            for id in crate::rules::strings(Some(v)) {
                literal(&id, &mut zones, &mut unknown);
            }
        }
        (None, Some(crate::stack::expr::ExprKind::List(items))) => {
            for e in items {
                if let Some(x) = e.as_single_ref() {
                    let zone = stack
                        .get(&x.address)
                        .filter(|s| s.kind.name() == "subnet")
                        .and_then(|s| crate::rules::lit_str(s, "availability_zone"));
                    match zone {
                        Some(z) => {
                            zones.insert(z);
                        }
                        None => unknown.push(x.address.clone()),
                    }
                } else if let Some(id) = e.as_literal().and_then(Value::as_str) {
                    literal(id, &mut zones, &mut unknown);
                } else {
                    unknown.push("a computed subnet".into());
                }
            }
        }
        _ => unknown.push("subnets not written as a list".into()),
    }
    (zones, unknown)
}

/// Before a training plan is priced or bought: the zone it would be bought in is the one
/// zone its HyperPod clusters will run in. HyperPod "selects a subnet from the provided
/// `VpcConfig`'s subnet list. All instance groups inherit the subnet's AZ" (SageMaker DG
/// `sagemaker-hyperpod-prerequisites`, multiple AZs), the cluster must match the plan's zone
/// (DG `training-plan-utilization-for-hyperpod`) and a plan "cannot be modified once
/// purchased" (DG `reserve-capacity-with-training-plans`). So subnets in several zones, a
/// pinned `availability_zone` other than the subnets' zone, or no zone known at all (and
/// none pinned) refuse the purchase: an unknown zone never means "anywhere".
fn plan_zone_errors(stack: &Stack, r: &Resource, pinned: Option<&str>, known: &SubnetZones) -> Vec<Diagnostic> {
    let mut d = vec![];
    for c in hyperpod::clusters_on_plan(stack, &r.address) {
        let (zones, unknown) = cluster_zones(stack, c, known);
        let listed = zones.iter().cloned().collect::<Vec<_>>().join(" and ");
        if zones.len() > 1 {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}`: not bought, its cluster `{}` has subnets in {listed}: HyperPod picks one of them and every group inherits its zone, which may not be the plan's",
                        r.address, c.address
                    ),
                    span(c, "subnets"),
                )
                .help("list subnets of one zone only for the cluster, the zone the training plan is bought in"),
            );
        } else if let (Some(p), Some(z)) = (pinned, zones.first())
            && p != z
        {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}`: not bought, it is pinned to {p} but its cluster `{}` has its subnets in {z}",
                        r.address, c.address
                    ),
                    span(r, "availability_zone"),
                )
                .help(format!("set availability_zone = \"{z}\" on the plan, or use subnets in {p}")),
            );
        } else if pinned.is_none() && !unknown.is_empty() {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}`: not bought, the zone of its cluster `{}` is not known before apply ({}), so the plan could be bought in a zone the cluster does not run in",
                        r.address,
                        c.address,
                        unknown.join(", ")
                    ),
                    r.span.clone(),
                )
                .help("pin availability_zone on the training plan to the zone of the cluster's subnets"),
            );
        }
    }
    d
}

/// Subnet ids written literally in the stack (an existing VPC's), with their zones.
pub type SubnetZones = HashMap<String, String>;

/// The subnet ids a HyperPod cluster names literally (not `${subnet.…}` references).
fn literal_subnets(c: &Resource) -> Vec<String> {
    match crate::rules::lit(c, "subnets") {
        Some(v) => crate::rules::strings(Some(v)),
        None => match c.attrs.get("subnets").map(|e| &e.kind) {
            Some(crate::stack::expr::ExprKind::List(items)) => {
                items.iter().filter_map(|e| e.as_literal()?.as_str().map(str::to_string)).collect()
            }
            _ => vec![],
        },
    }
}

/// The zones of the literal subnets of every HyperPod cluster on a training plan, read with
/// one `DescribeSubnets`: a plan is bought in the zone its cluster will run in, and a literal
/// subnet says its zone only to EC2. No call when there are none.
pub async fn literal_subnet_zones(ctx: &Ctx, stack: &Stack) -> Result<SubnetZones, AwsError> {
    let ids: BTreeSet<String> = hyperpod::clusters(stack)
        .filter(|c| !hyperpod::plans_of(stack, c).is_empty())
        .flat_map(literal_subnets)
        .collect();
    if ids.is_empty() {
        return Ok(SubnetZones::new());
    }
    let call = ctx.ec2.describe_subnets().set_subnet_ids(Some(ids.into_iter().collect()));
    let out = ctx.call(crate::aws::Service::Ec2, "DescribeSubnets", call.send()).await?;
    Ok(out
        .subnets()
        .iter()
        .filter_map(|s| Some((s.subnet_id()?.to_string(), s.availability_zone()?.to_string())))
        .collect())
}

/// A HyperPod cluster on a training plan the state says is bought: every subnet of the
/// cluster (a stack subnet's zone, from the stack or the state, or a literal one's from
/// EC2) is in the plan's zone, since the cluster "must match" it (SageMaker DG
/// `training-plan-utilization-for-hyperpod`) and a bought plan cannot move.
pub async fn bought_plan_zones(ctx: &Ctx, stack: &Stack, state: Option<&State>) -> Result<Vec<Diagnostic>, AwsError> {
    let Some(st) = state else { return Ok(vec![]) };
    let output = |address: &str, k: &str| {
        st.resources.get(address).and_then(|e| e.outputs.get(k)).and_then(|v| v.as_str()).map(str::to_string)
    };
    let known = literal_subnet_zones(ctx, stack).await?;
    let mut d = ended_plan_warnings(stack, &output, jiff::Timestamp::now());
    for c in hyperpod::clusters(stack) {
        let mut subnets: Vec<(String, String)> = crate::rules::subnet_resources(stack, c)
            .into_iter()
            .filter_map(|s| {
                let zone = crate::rules::lit_str(s, "availability_zone")
                    .or_else(|| output(&s.address, "availability_zone"))?;
                Some((s.address.clone(), zone))
            })
            .collect();
        subnets.extend(literal_subnets(c).into_iter().filter_map(|s| Some((s.clone(), known.get(&s)?.clone()))));
        for p in hyperpod::plans_of(stack, c) {
            let Some(zone) = output(&p.address, "availability_zone").filter(|z| !z.is_empty()) else { continue };
            for (subnet, z) in subnets.iter().filter(|(_, z)| *z != zone) {
                d.push(
                    Diagnostic::error(
                        format!(
                            "`{}` runs on `{}`, bought in {zone}, but its subnet {subnet} is in {z}: the plan's capacity cannot serve it",
                            c.address, p.address
                        ),
                        span(c, "subnets"),
                    )
                    .help(format!("use subnets in {zone} only; a bought training plan cannot move")),
                );
            }
        }
    }
    Ok(d)
}

/// A HyperPod cluster on a training plan the state says is bought and has ended: its recorded
/// `state` is `Expired` or its recorded `end_date` has passed (`output(address, key)` reads
/// the state's outputs). A warning, since an ended plan must not stop a destroy. The stack
/// rule (`rules::hyperpod`) warns only after the latest end the window allows
/// (`start_before + duration_hours`), so this says it from the real end until then. A plan
/// HyperPod uses "must have a status of Scheduled or Active" (SageMaker DG
/// `training-plan-utilization-for-hyperpod`), and every UpdateCluster names each group's plan.
pub(crate) fn ended_plan_warnings(
    stack: &Stack,
    output: &dyn Fn(&str, &str) -> Option<String>,
    now: jiff::Timestamp,
) -> Vec<Diagnostic> {
    let mut d = vec![];
    for c in hyperpod::clusters(stack) {
        for p in hyperpod::plans_of(stack, c) {
            let end = output(&p.address, "end_date").and_then(|e| e.parse::<jiff::Timestamp>().ok());
            let expired = output(&p.address, "state").is_some_and(|s| s == "Expired");
            if !(expired || end.is_some_and(|e| e <= now)) {
                continue;
            }
            let latest = crate::rules::lit_str(p, "start_before")
                .and_then(|v| v.parse::<jiff::Timestamp>().ok())
                .zip(lit(p, "duration_hours").and_then(|v| v.as_int()))
                .map(|(b, h)| b + jiff::SignedDuration::from_hours(h));
            if latest.is_some_and(|l| l < now) {
                continue; // the stack rule says it
            }
            let when = match end {
                Some(e) => format!("ended {e}"),
                None => "is Expired".into(),
            };
            d.push(
                Diagnostic::warning(
                    format!("`{}` runs on `{}`, which {when} (recorded in state)", c.address, p.address),
                    span(c, "instance_groups").or(c.span.clone()),
                )
                .help(
                    "a bought plan cannot change: scale its groups to instance_count = 0, or remove their training_plan to run On-Demand (billed per hour), and add a new training_plan for more reserved capacity",
                ),
            );
        }
    }
    d
}

/// Offering searches already made, by what they asked ([`search_key`]).
pub type Offers = HashMap<String, Vec<Purchase>>;

/// The kind and the attributes an offering search depends on, as one key.
fn search_key(kind: &str, inputs: &Attrs) -> String {
    let mut key = kind.to_string();
    for k in [
        "instance_type",
        "instance_count",
        "duration_hours",
        "start_after",
        "start_before",
        "availability_zone",
        "target",
        // `allow_split` widens a training plan search's `EndTimeBefore`.
        "allow_split",
    ] {
        key.push('|');
        key.push_str(&inputs.get(k).map(Value::interpolate).unwrap_or_default());
    }
    key
}

/// Searches the offerings of every purchase the stack declares and `known` does not (the
/// state has no object for it, so the plan will likely buy it), all at once: run together
/// with the refresh, so `price` finds them ready.
pub async fn prefetch_offers(ctx: &Ctx, stack: &Stack, known: &dyn Fn(&str) -> bool) -> Result<Offers, AwsError> {
    let subnets = literal_subnet_zones(ctx, stack).await?;
    let mut tasks = tokio::task::JoinSet::new();
    for r in stack.resources.iter().filter(|r| crate::resources::of(r).buys() && !known(&r.address)) {
        let attrs: Attrs = r.attrs.keys().filter_map(|k| Some((k.clone(), lit(r, k)?))).collect();
        let (inputs, _, _) = search_scope(stack, r, attrs, &subnets);
        let ctx = ctx.clone();
        let kind = crate::resources::of(r);
        tasks.spawn(async move {
            let found = kind.offerings(&ctx, &inputs).await;
            (search_key(kind.name(), &inputs), found)
        });
    }
    let mut offers = Offers::new();
    while let Some(joined) = tasks.join_next().await {
        // A search task only fails by panicking; the price step then searches again.
        let Ok((key, found)) = joined else { continue };
        offers.insert(key, found?);
    }
    Ok(offers)
}

/// Without AWS (`plan --refresh=false`): each block the plan creates is shown as a
/// purchase whose offering and price a refreshing plan looks up.
pub fn price_offline(stack: &Stack, plan: &mut Plan) {
    for c in plan.changes.iter_mut().filter(|c| matches!(c.action, Action::Purchase(_))) {
        let Some(r) = stack.get(&c.address) else { continue };
        let fields: Attrs = c.fields.iter().filter_map(|f| Some((f.path.clone(), f.new.clone()?))).collect();
        let (inputs, zones, _) = search_scope(stack, r, fields, &SubnetZones::new());
        let s = |k: &str| inputs.get(k).map(Value::interpolate).unwrap_or_else(|| "?".into());
        let zones = if zones.is_empty() {
            String::new()
        } else {
            format!(" in {}", zones.into_iter().collect::<Vec<_>>().join(" or "))
        };
        c.action = Action::Purchase(Offer::Offline(format!(
            "{}× {}{}, {} h starting between {} and {}: offering and price not looked up (--refresh=false); a refreshing plan searches them (max {} USD)",
            s("instance_count"),
            s("instance_type"),
            zones,
            s("duration_hours"),
            s("start_after"),
            s("start_before"),
            s("max_upfront_usd"),
        )));
    }
}

/// Proposes an offering for every purchase the plan makes: the cheapest, then the
/// earliest, in a zone of the resources that will use it. No offering, or one dearer than
/// `max_upfront_usd`, is an error. Searches `offers` lacks are made here.
pub async fn price(ctx: &Ctx, stack: &Stack, plan: &mut Plan, offers: &Offers) -> Result<Vec<Diagnostic>, AwsError> {
    let mut d = vec![];
    let subnets = if plan.changes.iter().any(|c| c.kind == "training_plan" && matches!(c.action, Action::Purchase(_))) {
        literal_subnet_zones(ctx, stack).await?
    } else {
        SubnetZones::new()
    };
    for c in plan.changes.iter_mut().filter(|c| matches!(c.action, Action::Purchase(_))) {
        let Some(r) = stack.get(&c.address) else { continue };
        let fields: Attrs = c.fields.iter().filter_map(|f| Some((f.path.clone(), f.new.clone()?))).collect();
        if r.kind.name() == "training_plan" {
            let pinned = fields.get("availability_zone").and_then(Value::as_str);
            let refused = plan_zone_errors(stack, r, pinned, &subnets);
            if !refused.is_empty() {
                d.extend(refused);
                continue;
            }
        }
        // Capacity is only useful in the zones its users run in.
        let (inputs, zones, zone_note) = search_scope(stack, r, fields, &subnets);
        let kind = crate::resources::of(r);
        let mut offers = match offers.get(&search_key(kind.name(), &inputs)) {
            Some(found) => found.clone(),
            None => kind.offerings(ctx, &inputs).await?,
        };
        offers.retain(|o| zones.is_empty() || zones.contains(&o.availability_zone));
        let s = |k: &str| inputs.get(k).map(Value::interpolate).unwrap_or_default();
        let hours = inputs.get("duration_hours").and_then(Value::as_int).unwrap_or(0);
        let Some(best) = choose(&offers, hours) else {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}`: no {} offering for {}× {} for at least {} h starting between {} and {}{}",
                        c.address, kind.purchase_noun(), s("instance_count"), s("instance_type"), s("duration_hours"), s("start_after"), s("start_before"),
                        if zones.is_empty() { String::new() } else { format!(" in {}", zones.iter().cloned().collect::<Vec<_>>().join(" or ")) }
                    ),
                    r.span.clone(),
                )
                .help(if kind.name() == "training_plan" {
                    "widen the window (start_before), try another length or count, or another zone; two-block (split) offerings are left out unless allow_split = true; offerings come and go"
                } else {
                    "widen the window (start_before), try another length or count, or another zone; offerings come and go"
                }),
            );
            continue;
        };
        let p = best.clone();
        if p.upfront_usd > p.max_upfront_usd {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}`: the cheapest offering ({} in {}, starting {}) costs ${:.2} up front, more than max_upfront_usd = {}",
                        c.address, p.offering_id, p.availability_zone, p.start, p.upfront_usd, p.max_upfront_usd
                    ),
                    span(r, "max_upfront_usd"),
                )
                .help("nothing was bought; raise max_upfront_usd if the price is acceptable, or change the window"),
            );
            continue;
        }
        c.note = Some(format!(
            "{} offering(s) matched; the cheapest at least {hours} h long, then the earliest, is proposed{zone_note}; bought last, once every change it does not depend on has succeeded (a failing apply buys nothing)",
            offers.len()
        ));
        c.action = Action::Purchase(Offer::Found(p));
    }
    Ok(d)
}

#[cfg(test)]
mod tests;
