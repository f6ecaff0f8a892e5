//! `capacity_block`: a Capacity Block for ML, bought from `DescribeCapacityBlockOfferings`.
//! This is where gpustack spends real money, so:
//! - the plan shows the chosen offering (cheapest, then earliest) with its price, and
//!   refuses one dearer than `max_upfront_usd`;
//! - apply buys only with explicit approval, and re-checks the offering first: gone or
//!   dearer stops the apply rather than buying something else;
//! - never twice: `PurchaseCapacityBlock` has no client token, so the purchase is
//!   journaled before the call, sent without SDK retries, tagged with
//!   `gpustack:address`, and any later run adopts an unexpired block tagged for this
//!   stack and address instead of buying (even with the state file lost);
//! - a block cannot be cancelled: removing it from the stack *retains* it (it runs until
//!   its end date; gpustack stops managing it), and changing a bought block is an error.

use async_trait::async_trait;
use aws_config::retry::RetryConfig;
use aws_sdk_ec2::types::{
    CapacityBlockOffering, CapacityReservation, CapacityReservationInstancePlatform, CapacityReservationState, Filter,
    ResourceType, Tag,
};

use super::capacity_reservation::{from_sdk_time, is_type, parse_time, read_by_id, read_reservations, to_sdk_time};
use super::offering::{Purchase, bought_current, fee, normalize_window, validate_window};
use super::{Create, Imported, Kind, Observed, Recorded, Result, Schema, TAGS, i32_of, int_attr, str_attr};
use crate::aws::{Absent, AwsError, Ctx, Service, tags};
use crate::stack::schema::{Attr, Default, OnChange, Ty};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

pub struct CapacityBlock;

/// Instance counts a block can have: "up to 64 instances" per block (EC2 UG
/// `capacity-blocks`; older pages listed only powers of two).
pub const COUNTS: std::ops::RangeInclusive<i64> = 1..=64;
/// How far ahead a block may start (EC2 UG `capacity-blocks-purchase`).
pub const MAX_LEAD_DAYS: i64 = 56;
/// States of a block that has not ended (EC2 UG `capacity-blocks-view`).
const LIVE: &[&str] = &["active", "scheduled", "payment-pending", "pending"];
/// The tag a retained block keeps instead of `gpustack:stack`/`gpustack:address`.
pub const RETAINED: &str = "gpustack:retained-from";

const ATTRS: &[Attr] = &[
    Attr::req("instance_type", Ty::Str, OnChange::Replace),
    Attr::req("instance_count", Ty::Int, OnChange::Replace),
    Attr::req("duration_hours", Ty::Int, OnChange::Replace),
    Attr::req("start_after", Ty::Str, OnChange::Replace),
    Attr::req("start_before", Ty::Str, OnChange::Replace),
    Attr::opt("availability_zone", Ty::Str, Default::None, OnChange::Replace),
    // A guard on the purchase, not a property of the block: changing it later changes nothing.
    Attr::req("max_upfront_usd", Ty::Number, OnChange::Update),
    TAGS,
];

/// Valid durations: 1-day steps up to 14 days, 7-day steps up to 182 days.
pub fn valid_duration(h: i64) -> bool {
    ((24..=336).contains(&h) && h % 24 == 0) || ((337..=4368).contains(&h) && h % 168 == 0)
}

impl Schema for CapacityBlock {
    fn name(&self) -> &'static str {
        "capacity_block"
    }
    fn attrs(&self) -> &'static [Attr] {
        ATTRS
    }
    fn outputs(&self) -> &'static [(&'static str, Ty)] {
        &[
            ("id", Ty::Str),
            ("availability_zone", Ty::Str),
            ("start_date", Ty::Str),
            ("end_date", Ty::Str),
            ("upfront_usd", Ty::Number),
            ("state", Ty::Str),
        ]
    }
}

#[async_trait]
impl Kind for CapacityBlock {
    fn actions(&self) -> &'static [&'static str] {
        &[
            "ec2:DescribeCapacityBlockOfferings",
            "ec2:PurchaseCapacityBlock",
            "ec2:DescribeCapacityReservations",
            "ec2:DescribeInstanceTypes",
            "servicequotas:GetServiceQuota",
            "servicequotas:GetAWSDefaultServiceQuota",
        ]
    }
    fn retains_on_delete(&self) -> bool {
        true
    }
    fn buys(&self) -> bool {
        true
    }
    fn purchase_noun(&self) -> &'static str {
        "Capacity Block"
    }
    async fn offerings(&self, ctx: &Ctx, inputs: &Attrs) -> Result<Vec<Purchase>> {
        Ok(search(ctx, inputs).await?.iter().map(|o| purchase_of(o, inputs)).collect())
    }

    fn validate(&self, r: &Resource, diags: &mut Vec<Diagnostic>) {
        let lit = |k: &str| r.attrs.get(k).and_then(|e| e.as_literal());
        let at = |k: &str| r.attrs.get(k).and_then(|e| e.span.clone());
        validate_window(r, MAX_LEAD_DAYS, "Capacity Blocks", diags);
        if let Some(h) = lit("duration_hours").and_then(Value::as_int)
            && !valid_duration(h)
        {
            diags.push(
                Diagnostic::error(
                    format!("`duration_hours` = {h} is not a Capacity Block length"),
                    at("duration_hours"),
                )
                .help("use 24-hour steps up to 336 (14 days), then 168-hour steps up to 4368 (182 days)"),
            );
        }
        if let Some(n) = lit("instance_count").and_then(Value::as_int)
            && !COUNTS.contains(&n)
        {
            diags.push(
                Diagnostic::error(
                    format!("`instance_count` = {n} is not offered for Capacity Blocks"),
                    at("instance_count"),
                )
                .help("a Capacity Block holds 1 to 64 instances; buy several blocks for more"),
            );
        }
    }

    fn normalize(&self, inputs: &mut Attrs) {
        normalize_window(inputs);
    }

    /// A bought block's spec cannot drift; only its tags are read back. An imported block
    /// (nothing recorded) is what `import` read.
    fn current(&self, recorded: &Attrs, observed: &Attrs) -> Attrs {
        if recorded.is_empty() {
            return observed.clone();
        }
        bought_current(recorded, observed)
    }

    /// An imported block: the file's search window cannot be read back, only where the block
    /// starts (`IMPORTED_START`). A start inside the file's window is the file's window; one
    /// outside shows as both bounds at the block's start, so the plan names the difference.
    /// The price guard guards a purchase that will not happen; a zone the file leaves open
    /// is the block's.
    fn settle(&self, current: &mut Attrs, desired: &Attrs) {
        let Some(Value::Str(start)) = current.remove(IMPORTED_START) else { return };
        let at = |k: &str| desired.get(k).and_then(Value::as_str).and_then(|t| parse_time(t).ok());
        let started = parse_time(&start).ok();
        let inside = match (at("start_after"), at("start_before"), started) {
            (Some(a), Some(b), Some(s)) => a <= s && s <= b,
            _ => false,
        };
        for k in ["start_after", "start_before"] {
            let v = if inside { desired.get(k).cloned() } else { Some(Value::str(start.clone())) };
            if let Some(v) = v {
                current.insert(k.into(), v);
            }
        }
        if let Some(v) = desired.get("max_upfront_usd") {
            current.insert("max_upfront_usd".into(), v.clone());
        }
        if !desired.contains_key("availability_zone") {
            current.remove("availability_zone");
        }
    }

    fn import_id(&self) -> Option<&'static str> {
        Some("cr-… (a reservation of type capacity-block)")
    }

    /// `DescribeCapacityReservations` by id; the reservation must be a Capacity Block
    /// (`ReservationType` `capacity-block`, EC2 API reference `CapacityReservation`). Never
    /// searches offerings, never buys: the plan shows an `import`, not a purchase.
    async fn import(&self, ctx: &Ctx, id: &str) -> Result<Option<Imported>> {
        let Some(r) = super::capacity_reservation::read_for_import(ctx, id).await? else { return Ok(None) };
        if !is_type(&r, "capacity-block") {
            return Err(super::capacity_reservation::import_refusal(
                id,
                "is an On-Demand Capacity Reservation, not a Capacity Block: import it as a capacity_reservation",
            ));
        }
        let mut observed = observe(&r);
        observed.address = None;
        observed.attrs.insert("availability_zone".into(), Value::str(r.availability_zone().unwrap_or_default()));
        if let (Some(start), Some(end)) = (r.start_date(), r.end_date()) {
            // Blocks end at 11:30 UTC on their last day (EC2 UG `capacity-blocks`): the length
            // in whole hours, rounded, is the duration bought.
            let hours = ((end.secs() - start.secs()) as f64 / 3600.0).round() as i64;
            observed.attrs.insert("duration_hours".into(), Value::Int(hours));
            observed.attrs.insert(IMPORTED_START.into(), Value::str(from_sdk_time(start)));
        }
        let mut unexpressed = vec![];
        if let Some(e) = r.end_date() {
            unexpressed.push(("end_date (runs until, cannot be cancelled)".to_string(), from_sdk_time(e)));
        }
        Ok(Some(Imported { observed, unexpressed }))
    }

    async fn tag_imported(&self, ctx: &Ctx, address: &str, id: &str, _outputs: &Attrs) -> Result<()> {
        super::import::tag_ec2(ctx, id, address).await
    }

    async fn create(&self, ctx: &Ctx, req: &Create<'_>) -> Result<Recorded> {
        // Never twice: a block already tagged for this address is this resource's.
        if let Some(found) = find_ours(ctx, req.address).await? {
            return Ok(recorded(&found));
        }
        let Some(planned) = req.purchase else {
            return Err(refusal(
                "this capacity block has no planned offering; run `gpustack plan` and approve the purchase",
            ));
        };
        // The offering the plan showed, as it is now.
        let now = search(ctx, req.inputs).await?;
        let Some(offer) = now.iter().find(|o| o.capacity_block_offering_id() == Some(planned.offering_id.as_str()))
        else {
            return Err(refusal(&format!(
                "the planned offering {} ({} in {}, starting {}) is no longer available; nothing was bought. Run `gpustack plan` to see the current offerings",
                planned.offering_id, planned.instance_type, planned.availability_zone, planned.start
            )));
        };
        let fee = upfront(offer);
        if fee > planned.upfront_usd + 0.005 {
            return Err(refusal(&format!(
                "the planned offering {} now costs ${fee:.2}, not the ${:.2} the plan showed; nothing was bought. Run `gpustack plan` again",
                planned.offering_id, planned.upfront_usd
            )));
        }
        let mut t: Vec<Tag> = tags::all_tags(ctx, req.address, req.inputs)
            .into_iter()
            .map(|(k, v)| Tag::builder().key(k).value(v).build())
            .collect();
        // What was paid travels with the block, so a run that adopts it knows too.
        t.push(Tag::builder().key("gpustack:offering").value(planned.offering_id.clone()).build());
        t.push(Tag::builder().key("gpustack:upfront-usd").value(format!("{fee:.2}")).build());
        let spec = aws_sdk_ec2::types::TagSpecification::builder()
            .resource_type(ResourceType::CapacityReservation)
            .set_tags(Some(t))
            .build();
        let request = ctx
            .ec2
            .purchase_capacity_block()
            .capacity_block_offering_id(&planned.offering_id)
            .instance_platform(CapacityReservationInstancePlatform::LinuxUnix)
            .tag_specifications(spec)
            // No client token exists, so a retried call could buy twice: one attempt only.
            .customize()
            .config_override(aws_sdk_ec2::config::Config::builder().retry_config(RetryConfig::disabled()));
        match ctx.call(Service::Ec2, "PurchaseCapacityBlock", request.send()).await {
            Ok(out) => match out.capacity_reservation() {
                Some(r) => Ok(recorded(r)),
                None => find_ours(ctx, req.address).await?.map(|r| recorded(&r)).ok_or_else(|| {
                    refusal("PurchaseCapacityBlock answered without a reservation; check `aws ec2 describe-capacity-reservations` before retrying")
                }),
            },
            // The answer may have been lost after the purchase went through: look before failing.
            Err(e) => {
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                match find_ours(ctx, req.address).await? {
                    Some(r) => Ok(recorded(&r)),
                    None => Err(e),
                }
            }
        }
    }

    async fn read_all(&self, ctx: &Ctx) -> Result<Vec<Observed>> {
        let mut found: Vec<Observed> = read_reservations(ctx, "capacity-block").await?.iter().map(observe).collect();
        found.extend(read_retained(ctx).await?);
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
        let found = read_by_id(ctx, id).await?;
        Ok(found.as_ref().map(recorded).unwrap_or_else(|| Recorded::id_only(id)))
    }

    /// Retain: a Capacity Block cannot be cancelled. Its gpustack tags give way to
    /// `gpustack:retained-from`, so later runs neither adopt it nor list it as a stray.
    async fn delete(&self, ctx: &Ctx, address: &str, id: &str, _inputs: &Attrs, _outputs: &Attrs) -> Result<()> {
        let retained = Tag::builder().key(RETAINED).value(format!("{} {address}", ctx.stack)).build();
        ctx.call(Service::Ec2, "CreateTags", ctx.ec2.create_tags().resources(id).tags(retained).send()).await?;
        let request = ctx
            .ec2
            .delete_tags()
            .resources(id)
            .tags(Tag::builder().key(tags::STACK).build())
            .tags(Tag::builder().key(tags::ADDRESS).build());
        ctx.call(Service::Ec2, "DeleteTags", request.send()).await.absent_ok()?;
        Ok(())
    }
}

/// Where an imported block starts, read by `import` and consumed by `settle` (not an attribute).
const IMPORTED_START: &str = "imported_start";

fn refusal(detail: &str) -> AwsError {
    AwsError { operation: "PurchaseCapacityBlock", code: Some("NotPurchased".into()), detail: detail.to_string() }
}

fn upfront(o: &CapacityBlockOffering) -> f64 {
    fee(o.upfront_fee())
}

/// The offerings matching the inputs: the type, count and length, starting within
/// [start_after, start_before] (and in `availability_zone` when given). Paged.
pub async fn search(ctx: &Ctx, inp: &Attrs) -> Result<Vec<CapacityBlockOffering>> {
    let bad = |detail: String| AwsError {
        operation: "DescribeCapacityBlockOfferings",
        code: Some("InvalidParameterValue".into()),
        detail,
    };
    let after = parse_time(str_attr(inp, "start_after")).map_err(bad)?;
    let before = parse_time(str_attr(inp, "start_before")).map_err(bad)?;
    let hours = int_attr(inp, "duration_hours").unwrap_or(24);
    let latest_end = before + jiff::SignedDuration::from_hours(hours);
    let pages = ctx
        .ec2
        .describe_capacity_block_offerings()
        .instance_type(str_attr(inp, "instance_type"))
        .instance_count(i32_of(int_attr(inp, "instance_count").unwrap_or(1)))
        .capacity_duration_hours(i32_of(hours))
        .start_date_range(to_sdk_time(after))
        .end_date_range(to_sdk_time(latest_end))
        .into_paginator()
        .send();
    let mut out = ctx
        .all_pages(Service::Ec2, "DescribeCapacityBlockOfferings", pages, |p| {
            p.capacity_block_offerings.unwrap_or_default()
        })
        .await?;
    let zone = str_attr(inp, "availability_zone");
    out.retain(|o| {
        let start = o.start_date().map(|d| d.secs()).unwrap_or(i64::MAX);
        start >= after.as_second()
            && start <= before.as_second()
            && (zone.is_empty() || o.availability_zone() == Some(zone))
    });
    Ok(out)
}

/// What the plan shows for an offering.
pub fn purchase_of(o: &CapacityBlockOffering, inp: &Attrs) -> Purchase {
    Purchase {
        offering_id: o.capacity_block_offering_id().unwrap_or_default().to_string(),
        instance_type: o.instance_type().unwrap_or_default().to_string(),
        instance_count: o.instance_count().unwrap_or(0).into(),
        availability_zone: o.availability_zone().unwrap_or_default().to_string(),
        start: o.start_date().map(from_sdk_time).unwrap_or_default(),
        end: o.end_date().map(from_sdk_time).unwrap_or_default(),
        duration_hours: o.capacity_block_duration_hours().unwrap_or(0).into(),
        asked_hours: 0,
        upfront_usd: upfront(o),
        currency: o.currency_code().unwrap_or("USD").to_string(),
        max_upfront_usd: 0.0,
        attempt: 0,
        blocks: vec![],
    }
    .asked(inp)
}

/// An unexpired block this stack bought for `address`: tagged for it, or retained from it.
async fn find_ours(ctx: &Ctx, address: &str) -> Result<Option<CapacityReservation>> {
    let tagged = read_reservations(ctx, "capacity-block").await?.into_iter().find(|r| {
        tags::is_ours(ctx, r.tags(), address) && !matches!(r.state(), Some(CapacityReservationState::Expired))
    });
    if tagged.is_some() {
        return Ok(tagged);
    }
    let retained = read_retained(ctx).await?;
    let id = retained.into_iter().find(|o| o.address.as_deref() == Some(address)).map(|o| o.id);
    match id {
        Some(id) => read_by_id(ctx, &id).await,
        None => Ok(None),
    }
}

/// Blocks an earlier run of this stack let go of (destroyed, or removed from the stack)
/// that have not ended: a stack that declares the address again gets the block back
/// instead of buying another.
async fn read_retained(ctx: &Ctx) -> Result<Vec<Observed>> {
    let pages = ctx
        .ec2
        .describe_capacity_reservations()
        // Documented filters only (no `tag-key`, no `reservation-type` for this call): the live
        // states narrow the listing; the retained tag and the type are checked here.
        .filters(Filter::builder().name("state").set_values(Some(LIVE.iter().map(|s| s.to_string()).collect())).build())
        .into_paginator()
        .send();
    let mut all = ctx
        .all_pages(Service::Ec2, "DescribeCapacityReservations", pages, |p| p.capacity_reservations.unwrap_or_default())
        .await?;
    all.retain(|r| is_type(r, "capacity-block") && tags::ec2_map(r.tags()).contains_key(RETAINED));
    let mut out = vec![];
    let prefix = format!("{} ", ctx.stack);
    for r in &all {
        let live = matches!(
            r.state(),
            Some(
                CapacityReservationState::Active
                    | CapacityReservationState::Scheduled
                    | CapacityReservationState::PaymentPending
                    | CapacityReservationState::Pending
            )
        );
        let from = tags::ec2_map(r.tags()).get(RETAINED).and_then(|v| v.strip_prefix(&prefix).map(str::to_string));
        if let (true, Some(address)) = (live, from) {
            let mut o = observe(r);
            o.address = Some(address);
            o.retained = true;
            out.push(o);
        }
    }
    Ok(out)
}

fn observe(r: &CapacityReservation) -> Observed {
    let all = tags::ec2_map(r.tags());
    let attrs = Attrs::from([
        ("instance_type".into(), Value::str(r.instance_type().unwrap_or_default())),
        ("instance_count".into(), Value::Int(r.total_instance_count().unwrap_or(0).into())),
        ("tags".into(), tags::observed(&all)),
    ]);
    let rec = recorded(r);
    Observed::tagged(&all, rec, attrs)
}

fn recorded(r: &CapacityReservation) -> Recorded {
    let id = r.capacity_reservation_id().unwrap_or_default().to_string();
    let fee = tags::ec2_map(r.tags()).get("gpustack:upfront-usd").and_then(|f| f.parse::<f64>().ok());
    let mut outputs = Attrs::from([
        ("id".into(), Value::str(id.clone())),
        ("availability_zone".into(), Value::str(r.availability_zone().unwrap_or_default())),
        ("start_date".into(), Value::str(r.start_date().map(from_sdk_time).unwrap_or_default())),
        ("end_date".into(), Value::str(r.end_date().map(from_sdk_time).unwrap_or_default())),
        ("state".into(), Value::str(r.state().map(|s| s.as_str()).unwrap_or_default())),
    ]);
    if let Some(f) = fee {
        outputs.insert("upfront_usd".into(), Value::Float(f));
    }
    Recorded { id, outputs }
}
