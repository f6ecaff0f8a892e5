//! The AWS side of `capacity find`: every independent read at once, in every region, within
//! each region's per-service limits (`Ctx::call`), then the answers assembled into priced
//! rows and missing options ([`super::find`]). Offerings come from the kinds that buy them
//! (`capacity_block`, `training_plan`: the same search a plan makes), prices from
//! [`crate::price::PriceBook`], quotas from Service Quotas' listings (two calls per region,
//! however many types), Spot placement scores from `GetSpotPlacementScores`.
//!
//! Round trips: the zones, prices, quotas, offerings and scores of every region do not depend
//! on each other, so they are all sent together; the wall time is the slowest chain (a
//! paged listing, or a service whose limit queues calls), not their sum.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::task::JoinSet;

use super::find::{Ask, Missing, Reason, Row, Source, TypeAsk, block_hours, per_gpu_hour, plan_count, plan_hours};
use crate::aws::{AwsError, Ctx, Service};
use crate::price::PriceBook;
use crate::resources::Kind;
use crate::resources::capacity_block::{COUNTS as BLOCK_COUNTS, CapacityBlock};
use crate::resources::offering::{Purchase, choose};
use crate::resources::training_plan::{TYPES as PLAN_TYPES, TrainingPlan};
use crate::value::{Attrs, Value};

/// What a search found: ranked later by the caller.
pub struct Found {
    pub rows: Vec<Row>,
    pub missing: Vec<Missing>,
    /// Where each region's prices came from (the price book's own words).
    pub price_sources: Vec<String>,
    /// Reads that failed without losing an option (quotas not checked, scores not read).
    pub warnings: Vec<String>,
}

/// How many reads are done, of how many; called after each answer.
pub type Progress = Arc<dyn Fn(usize, usize) + Send + Sync>;

enum Answer {
    Zones(String, Result<Vec<(String, String)>, AwsError>),
    Prices(String, Result<PriceBook, String>),
    Quotas(String, Result<BTreeMap<String, f64>, AwsError>),
    Blocks(String, String, Result<Vec<Purchase>, AwsError>),
    Plans(String, String, Result<Vec<Purchase>, AwsError>),
    Scores(String, Result<Vec<(String, i32)>, AwsError>),
}

/// Every region's answers, by region (and type).
#[derive(Default)]
struct Answers {
    zones: HashMap<String, Result<Vec<(String, String)>, AwsError>>,
    prices: HashMap<String, Result<PriceBook, String>>,
    quotas: HashMap<String, Result<BTreeMap<String, f64>, AwsError>>,
    blocks: HashMap<(String, String), Result<Vec<Purchase>, AwsError>>,
    plans: HashMap<(String, String), Result<Vec<Purchase>, AwsError>>,
    /// By region: the zone scores of all the searched types together ([`scores`]).
    scores: HashMap<String, Result<Vec<(String, i32)>, AwsError>>,
}

/// Searches every region of `ctxs` (region, its context) for `ask`.
pub async fn run(ask: &Ask, ctxs: &[(String, Ctx)], progress: Progress) -> Found {
    let mut set: JoinSet<Answer> = JoinSet::new();
    let types: Vec<String> = ask.types.iter().map(|t| t.instance_type.clone()).collect();
    let wants = |s: Source| ask.include.contains(&s);
    for (region, ctx) in ctxs {
        let (r, c) = (region.clone(), ctx.clone());
        set.spawn(async move { Answer::Zones(r, zones(&c).await) });
        if wants(Source::Spot) || wants(Source::OnDemand) {
            let (r, c, ts) = (region.clone(), ctx.clone(), types.clone());
            set.spawn(async move {
                let names: Vec<&str> = ts.iter().map(String::as_str).collect();
                let book = PriceBook::live(&c, &r, &names).await.map_err(|e| format!("{e:#}"));
                Answer::Prices(r, book)
            });
        }
        let (r, c) = (region.clone(), ctx.clone());
        set.spawn(async move { Answer::Quotas(r, ec2_quotas(&c).await) });
        for t in &ask.types {
            if wants(Source::CapacityBlocks)
                && BLOCK_COUNTS.contains(&t.count)
                && let Some(hours) = block_hours(ask.hours)
            {
                let inputs = window(ask, &t.instance_type, t.count, hours);
                let (r, c, name) = (region.clone(), ctx.clone(), t.instance_type.clone());
                set.spawn(async move { Answer::Blocks(r, name, CapacityBlock.offerings(&c, &inputs).await) });
            }
            let ml = format!("ml.{}", t.instance_type);
            if wants(Source::TrainingPlans)
                && PLAN_TYPES.contains(&ml.as_str())
                && let (Some(hours), Some(count)) = (plan_hours(ask.hours), plan_count(t.count))
            {
                let inputs = window(ask, &ml, count, hours);
                let (r, c, name) = (region.clone(), ctx.clone(), t.instance_type.clone());
                set.spawn(async move { Answer::Plans(r, name, TrainingPlan.offerings(&c, &inputs).await) });
            }
        }
        if wants(Source::Spot) {
            let (r, c, ts, count) = (region.clone(), ctx.clone(), types.clone(), score_capacity(ask));
            set.spawn(async move {
                let s = scores(&c, &r, &ts, count).await;
                Answer::Scores(r, s)
            });
        }
    }
    let total = set.len();
    let done = AtomicUsize::new(0);
    let mut a = Answers::default();
    while let Some(joined) = set.join_next().await {
        progress(done.fetch_add(1, Ordering::Relaxed) + 1, total);
        // A task panics only on a bug; its answer is then missing, and so is its option.
        let Ok(answer) = joined else { continue };
        match answer {
            Answer::Zones(r, z) => drop(a.zones.insert(r, z)),
            Answer::Prices(r, p) => drop(a.prices.insert(r, p)),
            Answer::Quotas(r, q) => drop(a.quotas.insert(r, q)),
            Answer::Blocks(r, t, o) => drop(a.blocks.insert((r, t), o)),
            Answer::Plans(r, t, o) => drop(a.plans.insert((r, t), o)),
            Answer::Scores(r, s) => drop(a.scores.insert(r, s)),
        }
    }
    assemble(ask, ctxs.iter().map(|(r, _)| r.as_str()), &a)
}

/// The inputs a buying kind searches with: the type, count and length, starting in the
/// asked window (late enough to end by its end).
fn window(ask: &Ask, instance_type: &str, count: i64, hours: i64) -> Attrs {
    let before = ask.start_before(hours).max(ask.start + jiff::SignedDuration::from_mins(1));
    Attrs::from([
        ("instance_type".into(), Value::str(instance_type)),
        ("instance_count".into(), Value::Int(count)),
        ("duration_hours".into(), Value::Int(hours)),
        ("start_after".into(), Value::str(ask.start.to_string())),
        ("start_before".into(), Value::str(before.to_string())),
    ])
}

/// The region's Availability Zones (not Local or Wavelength Zones): (name, id).
async fn zones(ctx: &Ctx) -> Result<Vec<(String, String)>, AwsError> {
    let out = ctx.call(Service::Ec2, "DescribeAvailabilityZones", ctx.ec2.describe_availability_zones().send()).await?;
    let mut z: Vec<(String, String)> = out
        .availability_zones()
        .iter()
        .filter(|z| z.zone_type().is_none_or(|t| t == "availability-zone"))
        .filter_map(|z| Some((z.zone_name()?.to_string(), z.zone_id()?.to_string())))
        .collect();
    z.sort();
    Ok(z)
}

/// The region's EC2 quotas, by code: the applied value, else AWS's default. Service Quotas
/// lists only applied values in `ListServiceQuotas` ("If the applied quota value is not
/// available for a quota, the quota is not retrieved", Service Quotas API Reference), so the
/// defaults are listed alongside; two paged listings per region, whatever the types.
async fn ec2_quotas(ctx: &Ctx) -> Result<BTreeMap<String, f64>, AwsError> {
    let applied = ctx.quotas.list_service_quotas().service_code("ec2").into_paginator().send();
    let defaults = ctx.quotas.list_aws_default_service_quotas().service_code("ec2").into_paginator().send();
    let (applied, defaults) = tokio::join!(
        ctx.all_pages(Service::Quotas, "ListServiceQuotas", applied, |p| p.quotas.unwrap_or_default()),
        ctx.all_pages(Service::Quotas, "ListAWSDefaultServiceQuotas", defaults, |p| p.quotas.unwrap_or_default()),
    );
    let mut out = BTreeMap::new();
    for q in defaults?.into_iter().chain(applied?) {
        if let (Some(code), Some(v)) = (q.quota_code(), q.value()) {
            out.insert(code.to_string(), v);
        }
    }
    Ok(out)
}

/// The instances the placement-score request asks for: the largest count of any searched type
/// (a `--gpus` ask needs more instances of a type with fewer GPUs), so the score is not
/// better than the hardest of the asks.
pub fn score_capacity(ask: &Ask) -> i64 {
    ask.types.iter().map(|t| t.count).max().unwrap_or(1).max(1)
}

/// Spot placement scores of `count` instances of any of `types` in each zone of `region`: (zone
/// id, score), one request per region for all the searched types. EC2 scores a request, not a
/// type: "If you specify instance types, you must specify at least three different instance
/// types, otherwise Amazon EC2 will return a low Spot placement score" (EC2 UG
/// `spot-placement-score`, Limitations; botocore `GetSpotPlacementScoresRequest.InstanceTypes`:
/// "will always be low"), and a score is the likelihood that the request "will succeed" with
/// any of the types (EC2 UG `how-sps-works`). So one request per region with every searched
/// type, `SingleAvailabilityZone` for a score per zone (review capfind M4), and the table says
/// the score is the set's ([`score_note`]). One region per call, as a call answers only the top
/// 10 zones ("top 10 Regions or Availability Zones", `GetSpotPlacementScoresResult`).
async fn scores(ctx: &Ctx, region: &str, types: &[String], count: i64) -> Result<Vec<(String, i32)>, AwsError> {
    let mut distinct: Vec<String> = types.to_vec();
    distinct.sort();
    distinct.dedup();
    let pages = ctx
        .ec2
        .get_spot_placement_scores()
        .set_instance_types(Some(distinct))
        .target_capacity(i32::try_from(count).unwrap_or(i32::MAX))
        .single_availability_zone(true)
        .region_names(region)
        .into_paginator()
        .send();
    let all = ctx
        .all_pages(Service::Ec2, "GetSpotPlacementScores", pages, |p| p.spot_placement_scores.unwrap_or_default())
        .await?;
    Ok(all
        .iter()
        .filter(|s| s.region() == Some(region))
        .filter_map(|s| Some((s.availability_zone_id()?.to_string(), s.score()?)))
        .collect())
}

/// What a Spot row's placement score means, for the table and `--json`: the score belongs to the
/// request of all the searched types, not to the row's type.
pub fn score_note(ask: &Ask) -> String {
    let mut distinct: Vec<&str> = ask.types.iter().map(|t| t.instance_type.as_str()).collect();
    distinct.sort();
    distinct.dedup();
    let n = score_capacity(ask);
    if distinct.len() < 3 {
        format!(
            "placement score of {n} instances of any of {} type(s) in this zone: AWS always scores fewer than 3 types low",
            distinct.len()
        )
    } else {
        format!(
            "placement score of {n} instances of any of the {} searched types in this zone, not of this type alone",
            distinct.len()
        )
    }
}

/// The quota a row needs, by code, against the region's listing: `Err` says why not enough.
fn quota_check(
    quotas: Option<&BTreeMap<String, f64>>,
    quota: Option<(&str, &str)>,
    region: &str,
    t: &TypeAsk,
) -> Result<(), String> {
    let (Some(quotas), Some((code, name))) = (quotas, quota) else { return Ok(()) };
    let need = t.count as f64 * f64::from(t.vcpus_per_instance);
    match quotas.get(code) {
        Some(value) if *value < need => Err(format!(
            "quota {code} ({name}) is {value} vCPUs in {region}; {} × {} needs {need} (request an increase: aws service-quotas request-service-quota-increase --region {region} --service-code ec2 --quota-code {code} --desired-value {need})",
            t.count, t.instance_type
        )),
        _ => Ok(()),
    }
}

fn assemble<'a>(ask: &Ask, regions: impl Iterator<Item = &'a str>, a: &Answers) -> Found {
    let mut f = Found { rows: vec![], missing: vec![], price_sources: vec![], warnings: vec![] };
    for region in regions {
        let quotas = match a.quotas.get(region) {
            Some(Ok(q)) => Some(q),
            Some(Err(e)) => {
                f.warnings.push(format!("quotas in {region} not checked: {e}"));
                None
            }
            None => None,
        };
        let zone_list = match a.zones.get(region) {
            Some(Ok(z)) => z.clone(),
            Some(Err(e)) => {
                f.warnings.push(format!("zones of {region} not read, so Spot is not searched there: {e}"));
                vec![]
            }
            None => vec![],
        };
        let book = a.prices.get(region);
        if let Some(Ok(b)) = book {
            f.price_sources.push(format!("{region}: {}", b.source()));
            f.warnings.extend(b.problems().iter().map(|p| format!("prices in {region}: {p}")));
        }
        for t in &ask.types {
            blocks(ask, region, t, quotas, a, &mut f);
            plans(ask, region, t, a, &mut f);
            spot(ask, region, t, quotas, &zone_list, book, a, &mut f);
            on_demand(ask, region, t, quotas, book, &mut f);
        }
    }
    f.price_sources.dedup();
    f
}

fn offered_rows(
    ask: &Ask,
    source: Source,
    region: &str,
    t: &TypeAsk,
    offers: &[Purchase],
    hours: i64,
    notes: Vec<String>,
) -> Vec<Row> {
    let mut by_zone: BTreeMap<&str, Vec<Purchase>> = BTreeMap::new();
    for o in offers {
        by_zone.entry(o.availability_zone.as_str()).or_default().push(o.clone());
    }
    by_zone
        .into_values()
        .filter_map(|zone_offers| choose(&zone_offers, hours).cloned())
        .map(|p| {
            let gpus = p.instance_count * i64::from(t.gpus_per_instance);
            let mut notes = notes.clone();
            if !p.blocks.is_empty() {
                notes.push(format!("{} separate blocks", p.blocks.len()));
            }
            // Ranked by the cost of the ask (its GPUs for its hours), as On-Demand and Spot are:
            // what is bought beyond it is paid for but not asked for (review capfind M1).
            let asked_gpus = t.count * i64::from(t.gpus_per_instance);
            let bought = per_gpu_hour(p.upfront_usd, gpus, p.duration_hours);
            let asked = per_gpu_hour(p.upfront_usd, asked_gpus, ask.hours);
            if let (Some(b), true) = (bought, gpus != asked_gpus || p.duration_hours != ask.hours) {
                notes.push(format!(
                    "buys {}× for {} h to cover {}× for {} h: ${b:.2} per bought GPU-h",
                    p.instance_count, p.duration_hours, t.count, ask.hours
                ));
            }
            Row {
                rank: 0,
                option: source.label(),
                source,
                instance_type: t.instance_type.clone(),
                count: p.instance_count,
                gpus,
                region: region.to_string(),
                zone: Some(p.availability_zone.clone()),
                start: p.start.clone(),
                end: p.end.clone(),
                hours: p.duration_hours,
                total_usd: p.upfront_usd,
                usd_per_gpu_hour: asked,
                usd_per_bought_gpu_hour: bought,
                offering_id: Some(p.offering_id.clone()),
                placement_score: None,
                notes,
                purchase: Some(p),
            }
        })
        .collect()
}

fn blocks(ask: &Ask, region: &str, t: &TypeAsk, quotas: Option<&BTreeMap<String, f64>>, a: &Answers, f: &mut Found) {
    let s = Source::CapacityBlocks;
    if !ask.include.contains(&s) {
        return;
    }
    let name = t.instance_type.as_str();
    if !BLOCK_COUNTS.contains(&t.count) {
        let why = format!("a Capacity Block holds 1 to 64 instances; {} are needed (buy several blocks)", t.count);
        return f.missing.push(Missing::new(s, name, region, Reason::NotSold, why));
    }
    let Some(hours) = block_hours(ask.hours) else {
        let why = format!("Capacity Blocks last at most 4368 hours (182 days), not {}", ask.hours);
        return f.missing.push(Missing::new(s, name, region, Reason::NotSold, why));
    };
    let offers = match a.blocks.get(&(region.to_string(), name.to_string())) {
        Some(Ok(o)) => o,
        Some(Err(e)) => return f.missing.push(Missing::new(s, name, region, Reason::Failed, e.to_string())),
        None => return,
    };
    if let Err(why) = quota_check(quotas, crate::quota::block_quota(name), region, t) {
        return f.missing.push(Missing::new(s, name, region, Reason::NoQuota, why));
    }
    let mut notes = vec![];
    if hours != ask.hours {
        notes.push(format!("blocks are sold in whole days: {hours} h"));
    }
    let rows = offered_rows(ask, s, region, t, offers, hours, notes);
    if rows.is_empty() {
        let why = format!(
            "no block of {}× {name} for {hours} h starts between {} and {}",
            t.count,
            ask.start,
            ask.start_before(hours)
        );
        return f.missing.push(Missing::new(s, name, region, Reason::NoOffering, why));
    }
    f.rows.extend(rows);
}

fn plans(ask: &Ask, region: &str, t: &TypeAsk, a: &Answers, f: &mut Found) {
    let s = Source::TrainingPlans;
    if !ask.include.contains(&s) {
        return;
    }
    let name = t.instance_type.as_str();
    let ml = format!("ml.{name}");
    if !PLAN_TYPES.contains(&ml.as_str()) {
        let why = format!("training plans do not sell {ml}");
        return f.missing.push(Missing::new(s, name, region, Reason::NotSold, why));
    }
    let (Some(hours), Some(count)) = (plan_hours(ask.hours), plan_count(t.count)) else {
        let why = format!(
            "training plans hold 1, 2, 4 … 64 instances for whole days up to 182; {}× for {} h is not sold",
            t.count, ask.hours
        );
        return f.missing.push(Missing::new(s, name, region, Reason::NotSold, why));
    };
    let offers = match a.plans.get(&(region.to_string(), name.to_string())) {
        Some(Ok(o)) => o,
        // SageMaker refuses a search above the account's training-plan quota for the type.
        Some(Err(e)) if e.code.as_deref() == Some("ResourceLimitExceeded") => {
            let why = format!(
                "{}; request an increase of the SageMaker quota \"Number of {ml} instances in reserved capacity across training plans per Region\"",
                e.detail
            );
            return f.missing.push(Missing::new(s, name, region, Reason::NoQuota, why));
        }
        Some(Err(e)) => return f.missing.push(Missing::new(s, name, region, Reason::Failed, e.to_string())),
        None => return,
    };
    let mut notes = vec![];
    if count != t.count {
        notes.push(format!("plans hold 1, 2, 4 … 64 instances: {count}"));
    }
    if hours != ask.hours {
        notes.push(format!("plans are sold in whole days: {hours} h"));
    }
    let rows = offered_rows(ask, s, region, t, offers, hours, notes);
    if rows.is_empty() {
        let why = format!(
            "no plan of {count}× {ml} for {hours} h starts between {} and {}",
            ask.start,
            ask.start_before(hours)
        );
        return f.missing.push(Missing::new(s, name, region, Reason::NoOffering, why));
    }
    f.rows.extend(rows);
}

fn hourly_row(source: Source, ask: &Ask, region: &str, zone: Option<&str>, t: &TypeAsk, hourly: f64) -> Row {
    let gpus = t.count * i64::from(t.gpus_per_instance);
    let total = hourly * t.count as f64 * ask.hours as f64;
    Row {
        rank: 0,
        option: source.label(),
        source,
        instance_type: t.instance_type.clone(),
        count: t.count,
        gpus,
        region: region.to_string(),
        zone: zone.map(str::to_string),
        start: ask.start.to_string(),
        end: (ask.start + jiff::SignedDuration::from_hours(ask.hours)).to_string(),
        hours: ask.hours,
        total_usd: total,
        usd_per_gpu_hour: per_gpu_hour(total, gpus, ask.hours),
        usd_per_bought_gpu_hour: per_gpu_hour(total, gpus, ask.hours),
        offering_id: None,
        placement_score: None,
        notes: vec![],
        purchase: None,
    }
}

#[allow(clippy::too_many_arguments)]
fn spot(
    ask: &Ask,
    region: &str,
    t: &TypeAsk,
    quotas: Option<&BTreeMap<String, f64>>,
    zone_list: &[(String, String)],
    book: Option<&Result<PriceBook, String>>,
    a: &Answers,
    f: &mut Found,
) {
    let s = Source::Spot;
    if !ask.include.contains(&s) {
        return;
    }
    let name = t.instance_type.as_str();
    let book = match book {
        Some(Ok(b)) => b,
        Some(Err(e)) => return f.missing.push(Missing::new(s, name, region, Reason::Unpriced, e.clone())),
        None => return,
    };
    if let Err(why) = quota_check(quotas, crate::quota::spot_quota(name), region, t) {
        return f.missing.push(Missing::new(s, name, region, Reason::NoQuota, why));
    }
    let scores = match a.scores.get(region) {
        Some(Ok(s)) => Some(s),
        Some(Err(e)) => {
            let w = format!("Spot placement scores in {region} not read: {e}");
            if !f.warnings.contains(&w) {
                f.warnings.push(w);
            }
            None
        }
        None => None,
    };
    let mut priced = 0;
    for (zone, zone_id) in zone_list {
        let Some(hourly) = book.spot_hourly(region, Some(zone), name) else { continue };
        let mut row = hourly_row(s, ask, region, Some(zone), t, hourly);
        row.placement_score = scores.and_then(|s| s.iter().find(|(id, _)| id == zone_id).map(|(_, n)| *n));
        row.notes.push("interruptible (2-minute notice)".into());
        if row.placement_score.is_some() {
            row.notes.push(score_note(ask));
        } else if scores.is_some() {
            row.notes.push("no placement score".into());
        }
        f.rows.push(row);
        priced += 1;
    }
    if priced == 0 && zone_list.is_empty() {
        let why = format!("the zones of {region} were not read, so its Spot prices were not searched");
        f.missing.push(Missing::new(s, name, region, Reason::Failed, why));
    } else if priced == 0 && book.problems().is_empty() {
        // Spot price history lists a type only in the zones where it is sold as Spot (botocore
        // `DescribeSpotPriceHistory`: prices "for the specified instance types"): a read that
        // succeeded with no row for the type means it is not offered there (review capfind minor 3).
        let why = format!("Spot price history has no zone of {region} selling {name} ({})", book.source());
        f.missing.push(Missing::new(s, name, region, Reason::NoOffering, why));
    } else if priced == 0 {
        let why = format!("no Spot price for {name} in any zone of {region} ({})", book.source());
        f.missing.push(Missing::new(s, name, region, Reason::Unpriced, why));
    }
}

fn on_demand(
    ask: &Ask,
    region: &str,
    t: &TypeAsk,
    quotas: Option<&BTreeMap<String, f64>>,
    book: Option<&Result<PriceBook, String>>,
    f: &mut Found,
) {
    let s = Source::OnDemand;
    if !ask.include.contains(&s) {
        return;
    }
    let name = t.instance_type.as_str();
    let book = match book {
        Some(Ok(b)) => b,
        Some(Err(e)) => return f.missing.push(Missing::new(s, name, region, Reason::Unpriced, e.clone())),
        None => return,
    };
    let Some(hourly) = book.on_demand_hourly(region, name) else {
        let why = format!("no On-Demand price for {name} in {region} ({})", book.source());
        return f.missing.push(Missing::new(s, name, region, Reason::Unpriced, why));
    };
    if let Err(why) = quota_check(quotas, crate::quota::on_demand_quota(name), region, t) {
        return f.missing.push(Missing::new(s, name, region, Reason::NoQuota, why));
    }
    let mut row = hourly_row(s, ask, region, None, t, hourly);
    row.notes.push("not reserved: launches may find no capacity".into());
    f.rows.push(row);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(types: &[(&str, i64)], hours: i64) -> Ask {
        let start: jiff::Timestamp = "2026-12-01T00:00:00Z".parse().unwrap();
        Ask {
            types: types
                .iter()
                .map(|(t, count)| TypeAsk {
                    instance_type: t.to_string(),
                    gpus_per_instance: 8,
                    vcpus_per_instance: 192,
                    count: *count,
                })
                .collect(),
            regions: vec!["us-east-1".into()],
            hours,
            start,
            end: start + jiff::SignedDuration::from_hours(24 * 14),
            include: Source::ALL.into_iter().collect(),
        }
    }

    fn offer(t: &str, count: i64, hours: i64, usd: f64) -> Purchase {
        Purchase {
            offering_id: format!("cb-{t}-{count}-{hours}"),
            instance_type: t.into(),
            instance_count: count,
            availability_zone: "us-east-1a".into(),
            start: "2026-12-01T11:30:00Z".into(),
            end: (jiff::Timestamp::from_second(1_796_124_600).unwrap() + jiff::SignedDuration::from_hours(hours))
                .to_string(),
            duration_hours: hours,
            asked_hours: hours,
            upfront_usd: usd,
            currency: "USD".into(),
            max_upfront_usd: usd,
            blocks: vec![],
            attempt: 0,
        }
    }

    fn answers(book: PriceBook) -> Answers {
        let mut a = Answers::default();
        a.prices.insert("us-east-1".into(), Ok(book));
        a.zones.insert("us-east-1".into(), Ok(vec![("us-east-1a".into(), "use1-az1".into())]));
        a
    }

    /// Review capfind M1: a 48 h block bought for a 25 h ask at $31.46 per instance-hour costs
    /// $1,510.08; On-Demand for the 25 h asked costs 25 × $55.04 = $1,376, and ranks first.
    #[test]
    fn a_rounded_up_block_ranks_by_the_cost_of_the_ask() {
        let ask = ask(&[("p5.48xlarge", 1)], 25);
        let mut a = answers(PriceBook::from_prices("test", &[("us-east-1", "p5.48xlarge", 55.04)], &[]));
        a.blocks
            .insert(("us-east-1".into(), "p5.48xlarge".into()), Ok(vec![offer("p5.48xlarge", 1, 48, 31.46 * 48.0)]));
        let mut f = assemble(&ask, ["us-east-1"].into_iter(), &a);
        super::super::find::rank(&mut f.rows);
        let order: Vec<_> = f.rows.iter().map(|r| r.option).collect();
        assert_eq!(order, ["on-demand", "capacity-block"]);
        let block = &f.rows[1];
        assert!((block.usd_per_gpu_hour.unwrap() - 31.46 * 48.0 / (8.0 * 25.0)).abs() < 1e-9);
        assert!((block.usd_per_bought_gpu_hour.unwrap() - 31.46 / 8.0).abs() < 1e-9);
        assert!(block.notes.iter().any(|n| n.contains("buys 1× for 48 h to cover 1× for 25 h")), "{:?}", block.notes);
        assert!((f.rows[0].usd_per_gpu_hour.unwrap() - 55.04 / 8.0).abs() < 1e-9);
    }

    /// Review capfind M1: a plan of 4 instances for an ask of 3 is priced over the 24 GPUs asked.
    #[test]
    fn a_rounded_up_plan_count_is_priced_over_the_asked_gpus() {
        let ask = ask(&[("p5.48xlarge", 3)], 24);
        let mut a = answers(PriceBook::from_prices("test", &[], &[]));
        a.plans.insert(("us-east-1".into(), "p5.48xlarge".into()), Ok(vec![offer("p5.48xlarge", 4, 24, 3072.0)]));
        let f = assemble(&ask, ["us-east-1"].into_iter(), &a);
        let plan = f.rows.iter().find(|r| r.option == "training-plan").expect("a plan row");
        assert_eq!((plan.count, plan.gpus), (4, 32));
        assert_eq!(plan.usd_per_gpu_hour, Some(3072.0 / (24.0 * 24.0)));
        assert_eq!(plan.usd_per_bought_gpu_hour, Some(4.0));
    }

    /// Review capfind M4: the region's one score (of all the searched types) is on every Spot
    /// row of its zone, and the note says whose score it is.
    #[test]
    fn spot_rows_carry_the_score_of_the_searched_types_together() {
        let one = ask(&[("p5.48xlarge", 2)], 24);
        assert!(score_note(&one).contains("always scores fewer than 3 types low"), "{}", score_note(&one));
        let three = ask(&[("p5.48xlarge", 2), ("p5e.48xlarge", 2), ("p4d.24xlarge", 4)], 24);
        assert_eq!(score_capacity(&three), 4);
        let book = PriceBook::from_prices(
            "test",
            &[],
            &[("us-east-1", "us-east-1a", "p5.48xlarge", 20.0), ("us-east-1", "us-east-1a", "p4d.24xlarge", 9.0)],
        );
        let mut a = answers(book);
        a.scores.insert("us-east-1".into(), Ok(vec![("use1-az1".into(), 7)]));
        let f = assemble(&three, ["us-east-1"].into_iter(), &a);
        let spot: Vec<_> = f.rows.iter().filter(|r| r.option == "spot").collect();
        assert_eq!(spot.len(), 2);
        for r in spot {
            assert_eq!(r.placement_score, Some(7));
            assert!(r.notes.iter().any(|n| n.contains("any of the 3 searched types")), "{:?}", r.notes);
        }
        // p5e has no Spot row in the read history: not offered there (minor 3), not unpriced.
        let p5e =
            f.missing.iter().find(|m| m.option == "spot" && m.instance_type == "p5e.48xlarge").expect("p5e missing");
        assert_eq!(p5e.reason, Reason::NoOffering, "{}", p5e.detail);
        // With no zones read, Spot is said not searched (minor 2), not priced per region.
        let mut no_zones = answers(PriceBook::from_prices("test", &[], &[]));
        no_zones.zones.insert(
            "us-east-1".into(),
            Err(AwsError { operation: "DescribeAvailabilityZones", code: None, detail: "denied".into() }),
        );
        let f = assemble(&three, ["us-east-1"].into_iter(), &no_zones);
        assert!(f.warnings.iter().any(|w| w.contains("Spot is not searched there")), "{:?}", f.warnings);
        assert!(f.missing.iter().filter(|m| m.option == "spot").all(|m| m.reason == Reason::Failed));
    }
}
