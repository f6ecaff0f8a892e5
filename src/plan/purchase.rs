//! The plan's purchases (DESIGN.md: money): the Capacity Block offerings a plan proposes,
//! searched with the refresh, the cheapest long-enough one chosen, and refused above
//! `max_upfront_usd`. Offline, a purchase says what a refreshing plan will search for.

use std::collections::{BTreeSet, HashMap};

use aws_sdk_ec2::types::CapacityBlockOffering;

use super::{Action, Offer, Plan};
use crate::aws::{AwsError, Ctx};
use crate::resources::capacity_block::{choose, purchase_of, search};
use crate::rules::{lit, node_groups, referenced, span, subnet_zones};
use crate::stack::{Diagnostic, Resource, Stack};
use crate::value::{Attrs, Value};

/// What an offering search for the block `r` asks, from `inputs` (the block's attributes):
/// in the zone of the node groups that will use it when the block names none. Returns the
/// search inputs and a note saying where it searched.
fn block_search(stack: &Stack, r: &Resource, mut inputs: Attrs) -> (Attrs, String) {
    let users: Vec<&Resource> = node_groups(stack)
        .filter(|ng| {
            referenced(stack, ng, "launch_template", "launch_template")
                .and_then(|lt| referenced(stack, lt, "capacity_reservation", "capacity_block"))
                .is_some_and(|b| b.address == r.address)
        })
        .collect();
    let zones: BTreeSet<String> = users.iter().flat_map(|ng| subnet_zones(stack, ng)).collect();
    let mut zone_note = String::new();
    if !inputs.contains_key("availability_zone") && zones.len() == 1 {
        let z = zones.iter().next().cloned().unwrap_or_default();
        zone_note = format!(
            " (searched in {z}, the zone of {})",
            users.iter().map(|u| u.address.as_str()).collect::<Vec<_>>().join(", ")
        );
        inputs.insert("availability_zone".into(), Value::str(z));
    }
    (inputs, zone_note)
}

/// Offering searches already made, by what they asked ([`search_key`]).
pub type Offers = HashMap<String, Vec<CapacityBlockOffering>>;

/// The attributes an offering search depends on, as one key.
fn search_key(inputs: &Attrs) -> String {
    ["instance_type", "instance_count", "duration_hours", "start_after", "start_before", "availability_zone"]
        .map(|k| inputs.get(k).map(Value::interpolate).unwrap_or_default())
        .join("|")
}

/// Searches the offerings of every Capacity Block the stack declares and `known` does not
/// (the state has no object for it, so the plan will likely buy it), all at once: run
/// together with the refresh, so `price` finds them ready.
pub async fn prefetch_offers(ctx: &Ctx, stack: &Stack, known: &dyn Fn(&str) -> bool) -> Result<Offers, AwsError> {
    let mut tasks = tokio::task::JoinSet::new();
    for r in stack.resources.iter().filter(|r| r.kind.name() == "capacity_block" && !known(&r.address)) {
        let attrs: Attrs = r.attrs.keys().filter_map(|k| Some((k.clone(), lit(r, k)?))).collect();
        let (inputs, _) = block_search(stack, r, attrs);
        let ctx = ctx.clone();
        tasks.spawn(async move {
            let found = search(&ctx, &inputs).await;
            (search_key(&inputs), found)
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
        let (inputs, _) = block_search(stack, r, fields);
        let s = |k: &str| inputs.get(k).map(Value::interpolate).unwrap_or_else(|| "?".into());
        c.action = Action::Purchase(Offer::Offline(format!(
            "{}× {}{}, {} h starting between {} and {}: offering and price not looked up (--refresh=false); a refreshing plan searches them (max {} USD)",
            s("instance_count"),
            s("instance_type"),
            inputs.get("availability_zone").map(|z| format!(" in {}", z.interpolate())).unwrap_or_default(),
            s("duration_hours"),
            s("start_after"),
            s("start_before"),
            s("max_upfront_usd"),
        )));
    }
}

/// Proposes an offering for every capacity block the plan creates: the cheapest, then
/// the earliest, in the zone of the node groups that will use it. No offering, or one
/// dearer than `max_upfront_usd`, is an error. Searches `offers` lacks are made here.
pub async fn price(ctx: &Ctx, stack: &Stack, plan: &mut Plan, offers: &Offers) -> Result<Vec<Diagnostic>, AwsError> {
    let mut d = vec![];
    for c in plan.changes.iter_mut().filter(|c| matches!(c.action, Action::Purchase(_))) {
        let Some(r) = stack.get(&c.address) else { continue };
        let fields: Attrs = c.fields.iter().filter_map(|f| Some((f.path.clone(), f.new.clone()?))).collect();
        // A block is only useful in the zone its node groups run in.
        let (inputs, zone_note) = block_search(stack, r, fields);
        let offers = match offers.get(&search_key(&inputs)) {
            Some(found) => found.clone(),
            None => search(ctx, &inputs).await?,
        };
        let s = |k: &str| inputs.get(k).map(Value::interpolate).unwrap_or_default();
        let hours = inputs.get("duration_hours").and_then(Value::as_int).unwrap_or(0);
        let Some(best) = choose(&offers, hours) else {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}`: no Capacity Block offering for {}× {} for at least {} h starting between {} and {}{}",
                        c.address, s("instance_count"), s("instance_type"), s("duration_hours"), s("start_after"), s("start_before"),
                        inputs.get("availability_zone").map(|z| format!(" in {z}")).unwrap_or_default()
                    ),
                    r.span.clone(),
                )
                .help("widen the window (start_before), try another length or count, or another zone; offerings come and go"),
            );
            continue;
        };
        let p = purchase_of(best, &inputs);
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
