//! `gpustack capacity timeline`: every reservation a stack owns or uses (Capacity Blocks,
//! On-Demand Capacity Reservations, SageMaker training plans) on one time axis, with what
//! runs on it, the idle part priced, gaps between the blocks of one consumer, and blocks
//! that end within a week flagged. `gpustack status` reads the same model.
//!
//! Where the numbers come from (each named at its use below):
//! - reservations: the stack's state (what it bought or names), then a live read:
//!   `ec2:DescribeCapacityReservations` (StartDate, EndDate, TotalInstanceCount,
//!   AvailableInstanceCount, State; EC2 API Reference, botocore `CapacityReservation`) and
//!   `sagemaker:DescribeTrainingPlan` (StartTime, EndTime, TotalInstanceCount,
//!   AvailableInstanceCount, InUseInstanceCount, UpfrontFee; botocore
//!   `DescribeTrainingPlanResponse`);
//! - consumers: the state's resolved inputs (a launch template's `capacity_reservation`,
//!   the node groups on that template, a Karpenter pool's `capacity_reservations`, a
//!   HyperPod instance group's `training_plan`);
//! - prices: a Capacity Block's or training plan's effective hourly rate is what was paid
//!   up front divided by its hours (per instance: divided by its count too); an ODCR is
//!   "billed at the On-Demand rate whether you run instances in it or not" (EC2 UG
//!   `capacity-reservations-pricing-billing`), so its idle instances cost the On-Demand
//!   rate the price module gives. A price that cannot be found is "unpriced", never zero.
//!
//! "Now" is the clock, or `GPUSTACK_NOW` (RFC 3339) when set: tests and reviews pin it.

use std::collections::BTreeMap;

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;
use serde_json::{Map, Value as Json};

use crate::aws::{AwsError, Ctx, Service};
use crate::state::State;

/// Blocks ending within this many hours are flagged.
pub const ENDING_SOON_HOURS: i64 = 7 * 24;

/// The current time: `GPUSTACK_NOW` (RFC 3339) when set, else the clock.
pub fn now() -> anyhow::Result<Timestamp> {
    now_from(pinned_now().as_deref())
}

/// `GPUSTACK_NOW` when set and not empty.
pub fn pinned_now() -> Option<String> {
    std::env::var("GPUSTACK_NOW").ok().filter(|v| !v.trim().is_empty())
}

/// "Now" from an override (`GPUSTACK_NOW`'s value), else the clock.
pub fn now_from(pinned: Option<&str>) -> anyhow::Result<Timestamp> {
    match pinned {
        Some(v) if !v.trim().is_empty() => v.trim().parse::<Timestamp>().map_err(|e| {
            anyhow::anyhow!(
                "GPUSTACK_NOW = {v:?} is not an RFC 3339 time ({e})\n  help: write e.g. GPUSTACK_NOW=2026-12-01T09:00:00Z, or unset it to use the clock"
            )
        }),
        _ => Ok(Timestamp::now()),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum ResKind {
    CapacityBlock,
    CapacityReservation,
    TrainingPlan,
}

impl ResKind {
    pub fn noun(self) -> &'static str {
        match self {
            ResKind::CapacityBlock => "Capacity Block",
            ResKind::CapacityReservation => "On-Demand Capacity Reservation",
            ResKind::TrainingPlan => "training plan",
        }
    }
}

/// Something that runs on a reservation, with how many instances it wants there.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Consumer {
    /// Its address in the stack (`node_group.train`, `hyperpod_cluster.hp/train`).
    pub address: String,
    /// Desired instances; `None` when a controller decides (Karpenter) or none is set.
    pub desired: Option<i64>,
}

/// The hourly price of one instance of a reservation, and where it comes from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rate {
    pub usd_per_instance_hour: f64,
    /// How it was worked out, for people: "$4719.36 up front / 24 h / 2 instances".
    pub basis: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Reservation {
    /// The stack's address, or `(used) cr-…` for a reservation the stack only names.
    pub address: String,
    pub kind: ResKind,
    /// `cr-…` or the training plan's name.
    pub id: String,
    pub instance_type: String,
    pub availability_zone: String,
    #[serde(serialize_with = "ser_opt_ts")]
    pub start: Option<Timestamp>,
    /// `None`: no end date (an ODCR that runs until cancelled).
    #[serde(serialize_with = "ser_opt_ts")]
    pub end: Option<Timestamp>,
    /// As AWS says it: active, scheduled, expired… or `not found`.
    pub state: String,
    pub total: i64,
    /// Instances running in it now (live), when AWS says.
    pub in_use: Option<i64>,
    pub consumers: Vec<Consumer>,
    /// `None`: unpriced.
    pub rate: Option<Rate>,
    /// A split training plan's reserved stretches (empty when it is one stretch): nothing
    /// is reserved between them.
    #[serde(skip_serializing_if = "Vec::is_empty", serialize_with = "ser_segments")]
    pub segments: Vec<(Timestamp, Timestamp)>,
}

/// No reserved capacity for a consumer between two of its reservations.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Gap {
    pub consumer: String,
    pub after: String,
    pub before: String,
    #[serde(serialize_with = "ser_ts")]
    pub start: Timestamp,
    #[serde(serialize_with = "ser_ts")]
    pub end: Timestamp,
    pub hours: f64,
    /// What the consumer's desired count would cost at the On-Demand rate over the gap.
    pub on_demand_usd: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Timeline {
    pub stack: String,
    pub region: String,
    #[serde(serialize_with = "ser_ts")]
    pub now: Timestamp,
    pub reservations: Vec<Reservation>,
    pub gaps: Vec<Gap>,
}

impl Reservation {
    pub fn is_active(&self, now: Timestamp) -> bool {
        let started = self.start.is_none_or(|s| s <= now);
        let not_ended = self.end.is_none_or(|e| e > now);
        started && not_ended && (self.state == "active" || self.state.is_empty()) && self.reserved_at(now)
    }

    /// Whether `at` falls in one of a split plan's reserved stretches (always, for one stretch).
    pub fn reserved_at(&self, at: Timestamp) -> bool {
        self.segments.is_empty() || self.segments.iter().any(|(s, e)| *s <= at && at < *e)
    }

    pub fn is_scheduled(&self, now: Timestamp) -> bool {
        self.start.is_some_and(|s| s > now) && !matches!(self.state.as_str(), "expired" | "cancelled" | "failed")
    }

    /// What the consumers ask of it.
    pub fn wanted(&self) -> Option<i64> {
        let known: Vec<i64> = self.consumers.iter().filter_map(|c| c.desired).collect();
        (!known.is_empty()).then(|| known.iter().sum())
    }

    /// Idle instances: live (total − in use) while active; expected (total − what the
    /// consumers want) before it starts; none after it ended.
    pub fn idle(&self, now: Timestamp) -> Option<i64> {
        if self.is_active(now) {
            return self.in_use.map(|u| (self.total - u).max(0));
        }
        if self.is_scheduled(now) {
            return Some((self.total - self.wanted().unwrap_or(0)).max(0));
        }
        None
    }

    /// Idle instances × the hourly rate, while active.
    pub fn idle_usd_per_hour(&self, now: Timestamp) -> Option<f64> {
        if !self.is_active(now) {
            return None;
        }
        Some(self.idle(now)? as f64 * self.rate.as_ref()?.usd_per_instance_hour)
    }

    pub fn hours_left(&self, now: Timestamp) -> Option<f64> {
        let end = self.end?;
        Some((end.duration_since(now).as_secs_f64() / 3600.0).max(0.0))
    }

    /// Ends within a week and has not ended.
    pub fn ends_soon(&self, now: Timestamp) -> bool {
        self.end.is_some_and(|e| e > now && e.duration_since(now) <= SignedDuration::from_hours(ENDING_SOON_HOURS))
    }
}

impl Timeline {
    /// Idle reserved capacity right now, summed: (instances, USD per hour of the priced
    /// part, reservations whose idle part is unpriced).
    pub fn idle_now(&self) -> (i64, f64, usize) {
        let mut n = 0;
        let mut usd = 0.0;
        let mut unpriced = 0;
        for r in self.reservations.iter().filter(|r| r.is_active(self.now)) {
            let idle = r.idle(self.now).unwrap_or(0);
            n += idle;
            match r.idle_usd_per_hour(self.now) {
                Some(u) => usd += u,
                None if idle > 0 => unpriced += 1,
                None => {}
            }
        }
        (n, usd, unpriced)
    }

    /// "2 instances ≈ $110.08/h", "2 instances (unpriced)", or with both kinds "3 instances ≈
    /// $50.00/h + those of 1 unpriced reservation"; `None` when nothing reserved sits idle.
    pub fn idle_summary(&self) -> Option<String> {
        let (n, cost, unpriced) = self.idle_now();
        if n == 0 {
            return None;
        }
        let idle_reservations =
            self.reservations.iter().filter(|r| r.is_active(self.now) && r.idle(self.now).unwrap_or(0) > 0).count();
        let what = format!("{n} instance{}", if n == 1 { "" } else { "s" });
        Some(match unpriced {
            0 => format!("{what} ≈ {}/h", usd(cost)),
            u if u == idle_reservations => format!("{what} (unpriced)"),
            u => {
                format!("{what} ≈ {}/h + those of {u} unpriced reservation{}", usd(cost), if u == 1 { "" } else { "s" })
            }
        })
    }

    pub fn to_json(&self) -> Json {
        let now = self.now;
        let res: Vec<Json> = self
            .reservations
            .iter()
            .map(|r| {
                let mut j = match serde_json::to_value(r) {
                    Ok(Json::Object(m)) => m,
                    _ => Map::new(),
                };
                j.insert("idle".into(), serde_json::json!(r.idle(now)));
                j.insert("idle_usd_per_hour".into(), serde_json::json!(r.idle_usd_per_hour(now).map(cents)));
                j.insert("hours_left".into(), serde_json::json!(r.hours_left(now).map(|h| (h * 10.0).round() / 10.0)));
                j.insert("ends_within_week".into(), Json::Bool(r.ends_soon(now)));
                j.insert("priced".into(), Json::Bool(r.rate.is_some()));
                Json::Object(j)
            })
            .collect();
        let (idle, usd, unpriced) = self.idle_now();
        serde_json::json!({
            "stack": self.stack,
            "region": self.region,
            "now": self.now.to_string(),
            "reservations": res,
            "gaps": self.gaps,
            "idle_instances": idle,
            "idle_usd_per_hour": cents(usd),
            "idle_unpriced": unpriced,
        })
    }
}

fn ser_ts<S: serde::Serializer>(t: &Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(t)
}

fn ser_opt_ts<S: serde::Serializer>(t: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => s.collect_str(t),
        None => s.serialize_none(),
    }
}

fn ser_segments<S: serde::Serializer>(v: &[(Timestamp, Timestamp)], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    let mut seq = s.serialize_seq(Some(v.len()))?;
    for (a, b) in v {
        seq.serialize_element(&serde_json::json!({"start": a.to_string(), "end": b.to_string()}))?;
    }
    seq.end()
}

fn cents(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

// --- building the model from state ---------------------------------------------------------------

/// A reservation the state names, before the live read.
#[derive(Clone, Debug, PartialEq)]
pub struct Declared {
    pub address: String,
    pub kind: ResKind,
    pub id: String,
    /// From state: type, zone, count, dates and the up-front fee as recorded.
    pub instance_type: String,
    pub availability_zone: String,
    pub total: i64,
    pub start: Option<Timestamp>,
    pub end: Option<Timestamp>,
    pub upfront_usd: Option<f64>,
    pub consumers: Vec<Consumer>,
}

fn s<'a>(m: &'a Map<String, Json>, k: &str) -> &'a str {
    m.get(k).and_then(Json::as_str).unwrap_or_default()
}

fn ts(m: &Map<String, Json>, k: &str) -> Option<Timestamp> {
    s(m, k).parse().ok()
}

/// Reservations the state owns or its consumers name, each with its consumers.
pub fn declared(state: &State) -> Vec<Declared> {
    let mut out: BTreeMap<String, Declared> = BTreeMap::new();
    for (address, r) in &state.resources {
        let kind = match r.kind.as_str() {
            "capacity_block" => ResKind::CapacityBlock,
            "capacity_reservation" => ResKind::CapacityReservation,
            "training_plan" => ResKind::TrainingPlan,
            _ => continue,
        };
        let id = match kind {
            ResKind::TrainingPlan => s(&r.outputs, "name").to_string(),
            _ => r.id.clone(),
        };
        if id.is_empty() {
            continue;
        }
        let key = match kind {
            ResKind::TrainingPlan => s(&r.outputs, "arn").to_string(),
            _ => id.clone(),
        };
        let zone = match s(&r.outputs, "availability_zone") {
            "" => s(&r.inputs, "availability_zone"),
            z => z,
        };
        out.insert(
            key,
            Declared {
                address: address.clone(),
                kind,
                id,
                instance_type: s(&r.inputs, "instance_type").to_string(),
                availability_zone: zone.to_string(),
                total: r.inputs.get("instance_count").and_then(Json::as_i64).unwrap_or(0),
                start: ts(&r.outputs, "start_date"),
                end: ts(&r.outputs, "end_date").or_else(|| ts(&r.inputs, "end_date")),
                upfront_usd: r.outputs.get("upfront_usd").and_then(Json::as_f64),
                consumers: vec![],
            },
        );
    }
    // Launch templates by id, with the reservation each targets.
    let mut template_cr: BTreeMap<String, (String, String)> = BTreeMap::new();
    for (address, r) in &state.resources {
        if r.kind == "launch_template" {
            let cr = s(&r.inputs, "capacity_reservation");
            if !cr.is_empty() {
                template_cr.insert(r.id.clone(), (address.clone(), cr.to_string()));
            }
        }
    }
    let mut used_templates = std::collections::BTreeSet::new();
    let add = |out: &mut BTreeMap<String, Declared>, key: &str, c: Consumer| {
        let d = out.entry(key.to_string()).or_insert_with(|| Declared {
            address: format!("(used) {key}"),
            kind: if key.starts_with("arn:") { ResKind::TrainingPlan } else { ResKind::CapacityReservation },
            id: key.rsplit('/').next().unwrap_or(key).to_string(),
            instance_type: String::new(),
            availability_zone: String::new(),
            total: 0,
            start: None,
            end: None,
            upfront_usd: None,
            consumers: vec![],
        });
        if !d.consumers.iter().any(|x| x.address == c.address) {
            d.consumers.push(c);
        }
    };
    let desired = |i: &Map<String, Json>| {
        let sc = i.get("scaling").and_then(Json::as_object)?;
        sc.get("desired").and_then(Json::as_i64).or_else(|| sc.get("min").and_then(Json::as_i64))
    };
    for (address, r) in &state.resources {
        match r.kind.as_str() {
            "node_group" | "self_managed_node_group" => {
                let lt = s(&r.inputs, "launch_template");
                if let Some((lt_addr, cr)) = template_cr.get(lt) {
                    used_templates.insert(lt_addr.clone());
                    add(&mut out, cr, Consumer { address: address.clone(), desired: desired(&r.inputs) });
                }
                // A self-managed group may also name reservations directly.
                if let Some(ids) = r
                    .inputs
                    .get("capacity_reservation")
                    .and_then(Json::as_object)
                    .and_then(|c| c.get("ids"))
                    .and_then(Json::as_array)
                {
                    for id in ids.iter().filter_map(Json::as_str) {
                        add(&mut out, id, Consumer { address: address.clone(), desired: desired(&r.inputs) });
                    }
                }
            }
            "karpenter_pool" => {
                for id in r.inputs.get("capacity_reservations").and_then(Json::as_array).into_iter().flatten() {
                    if let Some(id) = id.as_str() {
                        add(&mut out, id, Consumer { address: address.clone(), desired: None });
                    }
                }
            }
            "hyperpod_cluster" => {
                for (g, grp) in r.inputs.get("instance_groups").and_then(Json::as_object).into_iter().flatten() {
                    let Some(grp) = grp.as_object() else { continue };
                    let plan = s(grp, "training_plan");
                    if !plan.is_empty() {
                        let c = Consumer {
                            address: format!("{address}/{g}"),
                            desired: grp.get("instance_count").and_then(Json::as_i64),
                        };
                        add(&mut out, plan, c);
                    }
                }
            }
            _ => {}
        }
    }
    // A template on a reservation that no node group uses yet is still a consumer (of nothing).
    for (lt_addr, cr) in template_cr.values() {
        if !used_templates.contains(lt_addr) {
            add(&mut out, cr, Consumer { address: lt_addr.clone(), desired: None });
        }
    }
    let mut v: Vec<Declared> = out.into_values().collect();
    v.sort_by(|a, b| (a.start, &a.address).cmp(&(b.start, &b.address)));
    v
}

/// What a live read said of one reservation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Live {
    pub found: bool,
    pub instance_type: Option<String>,
    pub availability_zone: Option<String>,
    pub start: Option<Timestamp>,
    pub end: Option<Timestamp>,
    pub state: String,
    pub total: Option<i64>,
    pub in_use: Option<i64>,
    pub upfront_usd: Option<f64>,
    /// `capacity-block` or `default` (EC2 `CapacityReservation.ReservationType`, botocore
    /// `CapacityReservationType`): tells a block the stack only uses from an ODCR.
    pub reservation_type: Option<String>,
    /// Reserved instance-hours: for a training plan, Σ over its `ReservedCapacitySummaries`
    /// of TotalInstanceCount × (DurationHours + DurationMinutes/60). A split plan's blocks
    /// have gaps between them, so its StartTime..EndTime overstates the hours paid for.
    pub instance_hours: Option<f64>,
    /// The reserved stretches when there are several (a split training plan), in order.
    pub segments: Vec<(Timestamp, Timestamp)>,
    /// An ODCR's `InstancePlatform` and `Tenancy` (botocore `CapacityReservation`): the
    /// On-Demand rate the price module gives is Linux/UNIX on shared tenancy only.
    pub platform: Option<String>,
    pub tenancy: Option<String>,
}

fn from_smithy(t: &aws_smithy_types::DateTime) -> Option<Timestamp> {
    Timestamp::from_second(t.secs()).ok()
}

/// One ODCR or Capacity Block, by id: `DescribeCapacityReservations` with
/// `CapacityReservationIds` (the API has no id filter). A reservation that is gone
/// (`InvalidCapacityReservationId.NotFound`) is "not found", not an error.
async fn read_cr(ctx: &Ctx, id: &str) -> Result<Live, AwsError> {
    let request = ctx.ec2.describe_capacity_reservations().capacity_reservation_ids(id);
    let out = match ctx.call(Service::Ec2, "DescribeCapacityReservations", request.send()).await {
        Ok(o) => o,
        Err(e) if e.code.as_deref().is_some_and(|c| c.contains("NotFound")) => {
            return Ok(Live { state: "not found".into(), ..Live::default() });
        }
        // `InvalidCapacityReservationId.Malformed` (EC2 API error codes): a typo in the
        // stack or state, not a reservation that went away; say so.
        Err(e) if e.code.as_deref().is_some_and(|c| c.contains("Malformed")) => {
            return Ok(Live { state: "malformed id".into(), ..Live::default() });
        }
        Err(e) => return Err(e),
    };
    let Some(r) = out.capacity_reservations().first() else {
        return Ok(Live { state: "not found".into(), ..Live::default() });
    };
    let total = r.total_instance_count().map(i64::from);
    // AvailableInstanceCount: "The remaining capacity. Indicates the number of instances that
    // can be launched in the Capacity Reservation" (botocore CapacityReservation).
    let in_use = total.zip(r.available_instance_count().map(i64::from)).map(|(t, a)| (t - a).max(0));
    let upfront = crate::aws::tags::ec2_map(r.tags()).get("gpustack:upfront-usd").and_then(|f| f.parse::<f64>().ok());
    Ok(Live {
        found: true,
        instance_type: r.instance_type().map(str::to_string),
        availability_zone: r.availability_zone().map(str::to_string),
        start: r.start_date().and_then(from_smithy),
        end: r.end_date().and_then(from_smithy),
        state: r.state().map(|s| s.as_str().to_string()).unwrap_or_default(),
        total,
        in_use,
        upfront_usd: upfront,
        reservation_type: r.reservation_type().map(|t| t.as_str().to_string()),
        platform: r.instance_platform().map(|p| p.as_str().to_string()),
        tenancy: r.tenancy().map(|t| t.as_str().to_string()),
        ..Live::default()
    })
}

/// One training plan, by name: `DescribeTrainingPlan` (`TrainingPlanName` is required).
async fn read_plan(ctx: &Ctx, name: &str) -> Result<Live, AwsError> {
    let request = ctx.sagemaker.describe_training_plan().training_plan_name(name);
    let out = match ctx.call(Service::SageMaker, "DescribeTrainingPlan", request.send()).await {
        Ok(o) => o,
        Err(e) if e.code.as_deref() == Some("ResourceNotFound") => {
            return Ok(Live { state: "not found".into(), ..Live::default() });
        }
        Err(e) => return Err(e),
    };
    // Training plan statuses: Pending, Active, Scheduled, Expired, Failed (botocore
    // TrainingPlanStatus); lower-cased to read like EC2's.
    let state = out.status().map(|s| s.as_str().to_ascii_lowercase()).unwrap_or_default();
    Ok(Live {
        found: true,
        instance_type: out
            .reserved_capacity_summaries()
            .first()
            .and_then(|r| r.instance_type())
            .map(|t| t.as_str().to_string()),
        availability_zone: out
            .reserved_capacity_summaries()
            .first()
            .and_then(|r| r.availability_zone())
            .map(str::to_string),
        start: out.start_time().and_then(from_smithy),
        end: out.end_time().and_then(from_smithy),
        state,
        total: out.total_instance_count().map(i64::from),
        // AvailableInstanceCount: "The number of instances currently available for use in
        // this training plan" (botocore DescribeTrainingPlanResponse); InUse leaves out the
        // unhealthy ones (UnhealthyInstanceCount), which are not idle capacity.
        in_use: match (out.total_instance_count(), out.available_instance_count()) {
            (Some(t), Some(a)) => Some(i64::from(t - a).max(0)),
            _ => out.in_use_instance_count().map(i64::from),
        },
        upfront_usd: out.upfront_fee().and_then(|f| f.trim().parse::<f64>().ok()),
        reservation_type: None,
        platform: None,
        tenancy: None,
        instance_hours: {
            // ReservedCapacitySummary: TotalInstanceCount, DurationHours ("whole hours in the
            // total duration for this reserved capacity"), DurationMinutes (botocore).
            let parts: Vec<f64> = out
                .reserved_capacity_summaries()
                .iter()
                .filter_map(|r| {
                    let n = r.total_instance_count()? as f64;
                    let h = r.duration_hours()? as f64 + r.duration_minutes().unwrap_or(0) as f64 / 60.0;
                    Some(n * h)
                })
                .collect();
            (!parts.is_empty() && parts.len() == out.reserved_capacity_summaries().len())
                .then(|| parts.iter().sum::<f64>())
                .filter(|h| *h > 0.0)
        },
        segments: {
            let mut v: Vec<(Timestamp, Timestamp)> = out
                .reserved_capacity_summaries()
                .iter()
                .filter_map(|r| Some((r.start_time().and_then(from_smithy)?, r.end_time().and_then(from_smithy)?)))
                .collect();
            v.sort();
            if v.len() > 1 { v } else { vec![] }
        },
    })
}

/// Reads every declared reservation live, all at once (each call holds one slot of its
/// service's limit).
pub async fn read_live(ctx: &Ctx, declared: &[Declared]) -> Result<Vec<Live>, AwsError> {
    let mut set = tokio::task::JoinSet::new();
    for (i, d) in declared.iter().enumerate() {
        let (ctx, d) = (ctx.clone(), d.clone());
        set.spawn(async move {
            let live = match d.kind {
                ResKind::TrainingPlan => read_plan(&ctx, &d.id).await,
                _ => read_cr(&ctx, &d.id).await,
            };
            (i, live)
        });
    }
    let mut out = vec![Live::default(); declared.len()];
    while let Some(done) = set.join_next().await {
        let (i, live) = done.map_err(|e| AwsError {
            operation: "DescribeCapacityReservations",
            code: None,
            detail: format!("a read task failed: {e}"),
        })?;
        out[i] = live?;
    }
    Ok(out)
}

/// On-Demand prices: (USD per instance-hour, where the price comes from) for a type in a region.
pub type OnDemand<'a> = &'a dyn Fn(&str, &str) -> Option<(f64, String)>;

/// The model: declared reservations merged with what AWS said, priced, with gaps.
pub fn build(state: &State, declared: Vec<Declared>, live: Vec<Live>, now: Timestamp, on_demand: OnDemand) -> Timeline {
    let mut reservations = vec![];
    for (d, l) in declared.into_iter().zip(live) {
        let total = l.total.unwrap_or(d.total);
        let instance_type = l.instance_type.clone().filter(|t| !t.is_empty()).unwrap_or(d.instance_type.clone());
        let start = l.start.or(d.start);
        let end = l.end.or(d.end);
        let upfront = d.upfront_usd.or(l.upfront_usd);
        // A reservation the stack only names is an ODCR until EC2 says its ReservationType is
        // `capacity-block` (botocore `CapacityReservationType`): a block is paid up front
        // (EC2 UG `capacity-blocks-purchase`), not billed at the On-Demand rate, so without
        // a recorded fee it is unpriced.
        let kind = match (d.kind, l.reservation_type.as_deref()) {
            (ResKind::CapacityReservation, Some("capacity-block")) => ResKind::CapacityBlock,
            (k, _) => k,
        };
        let rate = match kind {
            ResKind::CapacityBlock | ResKind::TrainingPlan => {
                let hours =
                    start.zip(end).map(|(s, e)| e.duration_since(s).as_secs_f64() / 3600.0).filter(|h| *h > 0.0);
                let plural = |n: i64| if n == 1 { "" } else { "s" };
                match (upfront, l.instance_hours, hours) {
                    // A training plan: the fee over the instance-hours of its reserved blocks
                    // (a split plan's gaps are not paid for).
                    (Some(fee), Some(ih), _) if fee.is_finite() => Some(Rate {
                        usd_per_instance_hour: fee / ih,
                        basis: format!(
                            "${fee:.2} up front / {ih:.0} reserved instance-hours{}",
                            if l.segments.len() > 1 {
                                format!(" in {} blocks", l.segments.len())
                            } else {
                                String::new()
                            }
                        ),
                    }),
                    (Some(fee), None, Some(h)) if total > 0 && fee.is_finite() => Some(Rate {
                        usd_per_instance_hour: fee / h / total as f64,
                        basis: format!("${fee:.2} up front / {h:.0} h / {total} instance{}", plural(total)),
                    }),
                    _ => None,
                }
            }
            // The price module's rate is Linux/UNIX, shared tenancy; an ODCR for RHEL, SUSE,
            // Windows… or dedicated tenancy bills its own On-Demand rate, so it is unpriced
            // rather than priced wrong (review timeline minor 2).
            ResKind::CapacityReservation
                if l.platform.as_deref().is_some_and(|p| p != "Linux/UNIX")
                    || l.tenancy.as_deref().is_some_and(|t| t != "default") =>
            {
                None
            }
            ResKind::CapacityReservation => on_demand(&state.region, &instance_type)
                .map(|(usd, source)| Rate { usd_per_instance_hour: usd, basis: format!("On-Demand rate ({source})") }),
        };
        reservations.push(Reservation {
            address: d.address,
            kind,
            id: d.id,
            instance_type,
            availability_zone: l.availability_zone.clone().filter(|z| !z.is_empty()).unwrap_or(d.availability_zone),
            start,
            end,
            state: if l.found || !l.state.is_empty() { l.state } else { String::new() },
            total,
            in_use: l.in_use,
            consumers: d.consumers,
            rate,
            segments: l.segments,
        });
    }
    reservations.sort_by(|a, b| (a.start, &a.address).cmp(&(b.start, &b.address)));
    let gaps = gaps(&reservations, &state.region, on_demand);
    Timeline { stack: state.stack.clone(), region: state.region.clone(), now, reservations, gaps }
}

/// For each consumer on more than one reservation: the stretches between one's end and the
/// next one's start, priced at the On-Demand rate for the consumer's desired count.
fn gaps(reservations: &[Reservation], region: &str, on_demand: OnDemand) -> Vec<Gap> {
    let mut by_consumer: BTreeMap<&str, Vec<(&Reservation, Option<i64>)>> = BTreeMap::new();
    for r in reservations {
        for c in &r.consumers {
            by_consumer.entry(c.address.as_str()).or_default().push((r, c.desired));
        }
    }
    let mut out = vec![];
    for (consumer, mut rs) in by_consumer {
        rs.retain(|(r, _)| r.start.is_some() && r.end.is_some());
        rs.sort_by_key(|(r, _)| r.start);
        for w in rs.windows(2) {
            let ((a, _), (b, desired)) = (w[0], w[1]);
            let (Some(end), Some(start)) = (a.end, b.start) else { continue };
            if start <= end {
                continue;
            }
            let hours = start.duration_since(end).as_secs_f64() / 3600.0;
            let od = on_demand(region, &b.instance_type).map(|(usd, _)| usd);
            out.push(Gap {
                consumer: consumer.to_string(),
                after: a.address.clone(),
                before: b.address.clone(),
                start: end,
                end: start,
                hours,
                on_demand_usd: od.zip(desired).map(|(usd, n)| cents(usd * n as f64 * hours)),
            });
        }
    }
    out
}

// --- terminal rendering ----------------------------------------------------------------------------

/// The chart's width in columns (the labels are printed above each lane).
pub const CHART_COLS: usize = 72;

/// How far back a chart reaches at most: a long-lived ODCR or an expired block still in
/// state would otherwise squash everything else into slivers.
pub const WINDOW_BACK_DAYS: i64 = 7;
/// How far ahead a chart reaches at most.
pub const WINDOW_AHEAD_DAYS: i64 = 60;

/// The time window a chart shows: from the earliest start (or now) to the latest end (or now
/// plus a week), clamped to [now − 7 days, now + 60 days], with a margin, at least two days
/// wide. A bar cut at either edge is marked (`since …` / `until …`).
pub fn window(t: &Timeline) -> (Timestamp, Timestamp) {
    let mut lo = t.now;
    let mut hi = t.now + SignedDuration::from_hours(24 * 7);
    for r in &t.reservations {
        if let Some(s) = r.start {
            lo = lo.min(s);
        }
        if let Some(e) = r.end {
            hi = hi.max(e);
        }
    }
    lo = lo.max(t.now - SignedDuration::from_hours(24 * WINDOW_BACK_DAYS));
    hi = hi.min(t.now + SignedDuration::from_hours(24 * WINDOW_AHEAD_DAYS));
    let span = hi.duration_since(lo).as_secs().max(2 * 86400);
    let margin = SignedDuration::from_secs(span / 20);
    // Whole days, so the axis starts at a date.
    let start = day_floor(lo - margin);
    let end = day_floor(hi + margin) + SignedDuration::from_hours(24);
    (start, end)
}

pub fn day_floor(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second().div_euclid(86400) * 86400).unwrap_or(t)
}

/// "Nov 27 11:30".
pub fn short(t: Timestamp) -> String {
    t.strftime("%b %d %H:%M").to_string()
}

/// "2d 03h", "5h 10m".
pub fn human_hours(h: f64) -> String {
    let mins = (h * 60.0).round() as i64;
    match mins {
        m if m >= 24 * 60 => format!("{}d {:02}h", m / 1440, m % 1440 / 60),
        m => format!("{}h {:02}m", m / 60, m % 60),
    }
}

pub fn usd(x: f64) -> String {
    format!("${x:.2}")
}

struct Paint {
    color: bool,
}

impl Paint {
    fn wrap(&self, code: &str, s: &str) -> String {
        if self.color { format!("\x1b[{code}m{s}\x1b[0m") } else { s.to_string() }
    }
    fn bold(&self, s: &str) -> String {
        self.wrap("1", s)
    }
    fn warn(&self, s: &str) -> String {
        self.wrap("1;33", s)
    }
    fn idle(&self, s: &str) -> String {
        self.wrap("33", s)
    }
    fn dim(&self, s: &str) -> String {
        self.wrap("2", s)
    }
}

/// The terminal rendering: a date axis, then per reservation a header line, a lane
/// (`█` reserved and used, `░` reserved and idle, `▒` already past, `│` now) and its
/// consumers; then gaps and a summary. Fixed width; colour only when `color`.
pub fn render_text(t: &Timeline, color: bool) -> String {
    let p = Paint { color };
    let mut o = String::new();
    let now = t.now;
    o.push_str(&p.bold(&format!("Capacity timeline of stack {} ({}), now {} UTC", t.stack, t.region, short(now))));
    o.push('\n');
    if t.reservations.is_empty() {
        o.push_str("No reservations: the stack owns no capacity_block, capacity_reservation or training_plan, and none of its launch templates, pools or HyperPod groups names one.\n");
        return o;
    }
    let (lo, hi) = window(t);
    let span = hi.duration_since(lo).as_secs_f64();
    let col = |x: Timestamp| -> usize {
        let f = x.duration_since(lo).as_secs_f64() / span;
        ((f * CHART_COLS as f64).floor().max(0.0) as usize).min(CHART_COLS)
    };
    let pad = "  ";
    // The axis: a date label at the column of each tick's midnight, as many as fit.
    let days = (span / 86400.0).round().max(1.0) as i64;
    let step = [1, 2, 3, 7, 14, 28].into_iter().find(|s| days / s <= (CHART_COLS / 8) as i64).unwrap_or(56);
    let mut labels = vec![' '; CHART_COLS + 8];
    let mut ticks = vec!['─'; CHART_COLS];
    let mut d = 0;
    while d <= days {
        let at = lo + SignedDuration::from_hours(24 * d);
        let c = col(at);
        if c < CHART_COLS {
            ticks[c] = '┬';
            for (i, ch) in at.strftime("%b %d").to_string().chars().enumerate() {
                if c + i < labels.len() {
                    labels[c + i] = ch;
                }
            }
        }
        d += step;
    }
    let nc = col(now);
    if nc < CHART_COLS {
        ticks[nc] = '┼';
    }
    o.push_str(&format!("{pad}{}\n", labels.iter().collect::<String>().trim_end()));
    o.push_str(&format!("{pad}{}  (now at ┼)\n", ticks.iter().collect::<String>()));
    for r in &t.reservations {
        o.push('\n');
        let head = format!(
            "{}  {}  {} ×{}  {}  {}",
            r.address,
            r.id,
            if r.instance_type.is_empty() { "?" } else { &r.instance_type },
            r.total,
            if r.availability_zone.is_empty() { "?" } else { &r.availability_zone },
            if r.state.is_empty() { "state unknown" } else { &r.state }
        );
        o.push_str(&p.bold(&head));
        o.push('\n');
        // The lane.
        let mut lane = vec!['·'; CHART_COLS];
        let (s, e) = (r.start.unwrap_or(lo).max(lo), r.end.unwrap_or(hi).min(hi));
        let idle = r.idle(now).unwrap_or(0) > 0;
        let (cs, ce) = (col(s), col(e).max(col(s) + 1).min(CHART_COLS));
        for (i, c) in lane.iter_mut().enumerate().take(ce).skip(cs) {
            let at = lo + SignedDuration::from_secs_f64(span * (i as f64 + 0.5) / CHART_COLS as f64);
            *c = if !r.reserved_at(at) {
                '·'
            } else if at < now {
                '▒'
            } else if idle {
                '░'
            } else {
                '█'
            };
        }
        if nc < CHART_COLS {
            lane[nc] = '│';
        }
        // Cut at an edge of the window: an arrow, and the date in the line below.
        if r.start.is_some_and(|s| s < lo) {
            lane[0] = '◀';
        }
        if r.end.is_some_and(|e| e > hi) {
            lane[CHART_COLS - 1] = '▶';
        }
        let lane: String = lane.into_iter().collect();
        o.push_str(&format!("{pad}{}\n", if idle { p.idle(&lane) } else { lane }));
        // Window and time left.
        let window = match (r.start, r.end) {
            (Some(s), Some(e)) => {
                format!("{} → {} UTC ({})", short(s), short(e), human_hours(e.duration_since(s).as_secs_f64() / 3600.0))
            }
            (Some(s), None) => format!("{} UTC → no end date", short(s)),
            _ => "window unknown".into(),
        };
        let left = match (r.is_scheduled(now), r.hours_left(now)) {
            (true, _) => format!(
                "starts in {}",
                human_hours(r.start.map(|s| s.duration_since(now).as_secs_f64() / 3600.0).unwrap_or(0.0))
            ),
            (false, Some(0.0)) => "ended".into(),
            (false, Some(h)) => format!("{} left", human_hours(h)),
            (false, None) => "runs until cancelled".into(),
        };
        o.push_str(&format!("{pad}{window}, {left}"));
        if r.segments.len() > 1 {
            let parts: Vec<String> = r.segments.iter().map(|(s, e)| format!("{} → {}", short(*s), short(*e))).collect();
            o.push_str(&format!("; reserved in {} blocks: {}", r.segments.len(), parts.join(", ")));
        }
        if r.ends_soon(now) {
            o.push_str(&format!("  {}", p.warn("⚠ ends within a week")));
        }
        o.push('\n');
        // Consumers.
        if r.consumers.is_empty() {
            o.push_str(&format!("{pad}on it: nothing in the stack targets it\n"));
        }
        for c in &r.consumers {
            let want = match c.desired {
                Some(d) => format!("desired {d}"),
                None if c.address.starts_with("karpenter_pool.") => "Karpenter sets the count".into(),
                None if c.address.starts_with("launch_template.") => "a template no node group uses yet".into(),
                None => "no desired count".into(),
            };
            o.push_str(&format!("{pad}on it: {} ({want})\n", c.address));
        }
        // Use and idle cost.
        let used = match (r.is_active(now), r.in_use) {
            (true, Some(u)) => format!("in use {u} of {}", r.total),
            (true, None) => format!("use unknown of {}", r.total),
            _ => match r.wanted() {
                Some(w) => format!("wanted {w} of {}", r.total),
                None => format!("{} reserved", r.total),
            },
        };
        let rate = match &r.rate {
            Some(rt) => format!("{}/h per instance: {}", usd(rt.usd_per_instance_hour), rt.basis),
            None => "unpriced".into(),
        };
        o.push_str(&format!("{pad}{used}; {rate}\n"));
        if let Some(n) = r.idle(now).filter(|n| *n > 0) {
            let what = if r.is_active(now) { "idle now" } else { "will sit idle" };
            let cost = match &r.rate {
                Some(rt) => {
                    format!("{n} × {} = {}/h", usd(rt.usd_per_instance_hour), usd(n as f64 * rt.usd_per_instance_hour))
                }
                None => format!("{n} instance{} (unpriced)", if n == 1 { "" } else { "s" }),
            };
            o.push_str(&format!("{pad}{}\n", p.idle(&format!("░ {what}: {cost}"))));
        }
    }
    if !t.gaps.is_empty() {
        o.push('\n');
        o.push_str(&p.bold("Gaps (no reserved capacity between two reservations of one consumer)"));
        o.push('\n');
        for g in &t.gaps {
            let cost = g
                .on_demand_usd
                .map(|c| format!("; On-Demand meanwhile ≈ {}", usd(c)))
                .unwrap_or_else(|| "; unpriced".into());
            o.push_str(&format!(
                "{pad}{}: {} → {} UTC ({}) between {} and {}{cost}\n",
                g.consumer,
                short(g.start),
                short(g.end),
                human_hours(g.hours),
                g.after,
                g.before
            ));
        }
    }
    o.push('\n');
    let soon: Vec<&str> = t.reservations.iter().filter(|r| r.ends_soon(now)).map(|r| r.address.as_str()).collect();
    if let Some(idle) = t.idle_summary() {
        o.push_str(&p.idle(&format!("Idle reserved now: {idle}")));
    } else {
        o.push_str("Idle reserved now: none");
    }
    o.push('\n');
    if !soon.is_empty() {
        o.push_str(&p.warn(&format!("Ending within a week: {}", soon.join(", "))));
        o.push('\n');
    }
    o.push_str(&p.dim("Legend: █ reserved, in use   ░ reserved, idle   ▒ past   │ now   · not reserved"));
    if t.reservations.iter().any(|r| r.start.is_some_and(|s| s < lo) || r.end.is_some_and(|e| e > hi)) {
        o.push_str(&p.dim("   ◀ ▶ runs past the chart's edge"));
    }
    o.push('\n');
    o
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::state::ResourceState;
    use serde_json::json;

    pub fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn res(kind: &str, id: &str, inputs: Json, outputs: Json) -> ResourceState {
        ResourceState {
            kind: kind.into(),
            id: id.into(),
            inputs: inputs.as_object().unwrap().clone(),
            outputs: outputs.as_object().unwrap().clone(),
            deps: vec![],
            prevent_destroy: false,
        }
    }

    /// A stack with an idle ODCR, a block ending tomorrow and a block after it (a gap), and
    /// a training plan for a HyperPod group.
    pub fn sample_state() -> State {
        let mut st = State::new("cap", "us-west-2");
        let r = &mut st.resources;
        r.insert(
            "capacity_reservation.spare".into(),
            res(
                "capacity_reservation",
                "cr-0000000000000odcr",
                json!({"instance_type": "p5.48xlarge", "availability_zone": "us-west-2b", "instance_count": 2}),
                json!({"id": "cr-0000000000000odcr", "availability_zone": "us-west-2b"}),
            ),
        );
        r.insert(
            "capacity_block.first".into(),
            res(
                "capacity_block",
                "cr-00000000000block1",
                json!({"instance_type": "p5.48xlarge", "instance_count": 2}),
                json!({"availability_zone": "us-west-2b", "start_date": "2026-11-25T11:30:00Z", "end_date": "2026-11-27T11:30:00Z", "upfront_usd": 4800.0, "state": "active"}),
            ),
        );
        r.insert(
            "capacity_block.second".into(),
            res(
                "capacity_block",
                "cr-00000000000block2",
                json!({"instance_type": "p5.48xlarge", "instance_count": 2}),
                json!({"availability_zone": "us-west-2b", "start_date": "2026-11-29T11:30:00Z", "end_date": "2026-12-03T11:30:00Z", "upfront_usd": 9600.0, "state": "scheduled"}),
            ),
        );
        r.insert(
            "training_plan.tp".into(),
            res(
                "training_plan",
                "arn:aws:sagemaker:us-west-2:123456789012:training-plan/tp-cap",
                json!({"instance_type": "ml.p5.48xlarge", "instance_count": 4}),
                json!({"arn": "arn:aws:sagemaker:us-west-2:123456789012:training-plan/tp-cap", "name": "tp-cap", "availability_zone": "us-west-2a", "start_date": "2026-12-01T00:00:00Z", "end_date": "2026-12-06T00:00:00Z", "upfront_usd": 24000.0}),
            ),
        );
        r.insert(
            "launch_template.first".into(),
            res("launch_template", "lt-1", json!({"capacity_reservation": "cr-00000000000block1"}), json!({})),
        );
        r.insert(
            "launch_template.second".into(),
            res("launch_template", "lt-2", json!({"capacity_reservation": "cr-00000000000block2"}), json!({})),
        );
        r.insert(
            "node_group.train".into(),
            res(
                "node_group",
                "c:train",
                json!({"launch_template": "lt-1", "scaling": {"min": 0, "desired": 2, "max": 2}}),
                json!({}),
            ),
        );
        r.insert(
            "node_group.train2".into(),
            res(
                "node_group",
                "c:train2",
                json!({"launch_template": "lt-2", "scaling": {"min": 0, "desired": 1, "max": 2}}),
                json!({}),
            ),
        );
        r.insert(
            "karpenter_pool.gpu".into(),
            res(
                "karpenter_pool",
                "gpu",
                json!({"capacity_reservations": ["cr-00000000000block1", "cr-00000000000block2"]}),
                json!({}),
            ),
        );
        r.insert(
            "hyperpod_cluster.hp".into(),
            res(
                "hyperpod_cluster",
                "hp",
                json!({"instance_groups": {"train": {"instance_count": 4, "training_plan": "arn:aws:sagemaker:us-west-2:123456789012:training-plan/tp-cap"}}}),
                json!({}),
            ),
        );
        st
    }

    pub fn sample_live(d: &[Declared]) -> Vec<Live> {
        d.iter()
            .map(|d| match d.id.as_str() {
                "cr-0000000000000odcr" => Live {
                    found: true,
                    start: Some(t("2026-11-20T08:00:00Z")),
                    state: "active".into(),
                    total: Some(2),
                    in_use: Some(0),
                    ..Live::default()
                },
                "cr-00000000000block1" => {
                    Live { found: true, state: "active".into(), total: Some(2), in_use: Some(2), ..Live::default() }
                }
                "cr-00000000000block2" => Live { found: true, state: "scheduled".into(), ..Live::default() },
                _ => {
                    Live { found: true, state: "scheduled".into(), total: Some(4), in_use: Some(0), ..Live::default() }
                }
            })
            .collect()
    }

    pub fn od(_region: &str, ty: &str) -> Option<(f64, String)> {
        (ty == "p5.48xlarge").then(|| (55.04, "test prices".to_string()))
    }

    pub fn sample() -> Timeline {
        let st = sample_state();
        let d = declared(&st);
        let live = sample_live(&d);
        build(&st, d, live, t("2026-11-26T10:00:00Z"), &od)
    }

    #[test]
    fn consumers_are_found_through_templates_pools_and_groups() {
        let d = declared(&sample_state());
        let by = |a: &str| d.iter().find(|x| x.address == a).unwrap();
        let first: Vec<&str> = by("capacity_block.first").consumers.iter().map(|c| c.address.as_str()).collect();
        assert_eq!(first, ["karpenter_pool.gpu", "node_group.train"]);
        assert_eq!(
            by("training_plan.tp").consumers[0],
            Consumer { address: "hyperpod_cluster.hp/train".into(), desired: Some(4) }
        );
        assert!(by("capacity_reservation.spare").consumers.is_empty());
    }

    #[test]
    fn idle_cost_gaps_and_flags() {
        let tl = sample();
        let by = |a: &str| tl.reservations.iter().find(|x| x.address == a).unwrap();
        let now = tl.now;
        // The ODCR: 2 idle at the On-Demand rate.
        let odcr = by("capacity_reservation.spare");
        assert_eq!(odcr.idle(now), Some(2));
        assert!((odcr.idle_usd_per_hour(now).unwrap() - 110.08).abs() < 1e-9);
        assert!(!odcr.ends_soon(now), "no end date");
        // The first block: fully used, 4800 / 48 h / 2 = 50/h per instance, ends tomorrow.
        let b1 = by("capacity_block.first");
        assert_eq!(b1.rate.as_ref().unwrap().usd_per_instance_hour, 50.0);
        assert_eq!(b1.idle(now), Some(0));
        assert!(b1.ends_soon(now));
        // The second block is scheduled: 1 wanted by the node group (the pool asks nothing).
        assert_eq!(by("capacity_block.second").idle(now), Some(1));
        assert_eq!(by("capacity_block.second").idle_usd_per_hour(now), None, "not billed idle before it starts");
        // Totals: only what is active now.
        assert_eq!(tl.idle_now(), (2, 110.08, 0));
        // The pool sits on both blocks: a 48-hour gap between them, unpriced (no desired count).
        let g = tl.gaps.iter().find(|g| g.consumer == "karpenter_pool.gpu").unwrap();
        assert_eq!((g.hours, g.on_demand_usd), (48.0, None));
        assert_eq!(g.start, t("2026-11-27T11:30:00Z"));
    }

    #[test]
    fn unpriced_is_never_zero() {
        let st = sample_state();
        let d = declared(&st);
        let live = sample_live(&d);
        let tl = build(&st, d, live, t("2026-11-26T10:00:00Z"), &|_: &str, _: &str| None);
        let odcr = tl.reservations.iter().find(|x| x.address == "capacity_reservation.spare").unwrap();
        assert_eq!(odcr.rate, None);
        assert_eq!(odcr.idle_usd_per_hour(tl.now), None);
        assert_eq!(tl.idle_now(), (2, 0.0, 1));
        assert!(render_text(&tl, false).contains("Idle reserved now: 2 instances (unpriced)"));
        assert_eq!(tl.to_json()["reservations"][0]["idle_usd_per_hour"], Json::Null);
    }

    #[test]
    fn terminal_rendering() {
        let text = render_text(&sample(), false);
        assert!(!text.contains('\x1b'), "no colour when asked for none");
        insta::assert_snapshot!(text);
        assert!(render_text(&sample(), true).contains("\x1b[1;33m⚠ ends within a week"));
    }

    #[test]
    fn json_rendering() {
        insta::assert_snapshot!(serde_json::to_string_pretty(&sample().to_json()).unwrap());
    }

    /// An ODCR started a year ago, a used block (only a pool names it) and a plan split in
    /// two blocks with a gap.
    pub fn long_lived() -> Timeline {
        let mut st = State::new("cap", "us-west-2");
        st.resources.insert(
            "capacity_reservation.old".into(),
            res(
                "capacity_reservation",
                "cr-00000000000000old",
                json!({"instance_type": "p5.48xlarge", "availability_zone": "us-west-2b", "instance_count": 1}),
                json!({}),
            ),
        );
        st.resources.insert(
            "karpenter_pool.gpu".into(),
            res("karpenter_pool", "gpu", json!({"capacity_reservations": ["cr-0000000000000used"]}), json!({})),
        );
        st.resources.insert(
            "training_plan.split".into(),
            res(
                "training_plan",
                "arn:aws:sagemaker:us-west-2:123456789012:training-plan/split",
                json!({"instance_type": "ml.p5.48xlarge", "instance_count": 2}),
                json!({"arn": "arn:aws:sagemaker:us-west-2:123456789012:training-plan/split", "name": "split", "upfront_usd": 9600.0}),
            ),
        );
        let d = declared(&st);
        let live = d
            .iter()
            .map(|d| match d.id.as_str() {
                "cr-00000000000000old" => Live {
                    found: true,
                    start: Some(t("2025-11-20T08:00:00Z")),
                    state: "active".into(),
                    total: Some(1),
                    in_use: Some(1),
                    reservation_type: Some("default".into()),
                    ..Live::default()
                },
                "cr-0000000000000used" => Live {
                    found: true,
                    instance_type: Some("p5.48xlarge".into()),
                    start: Some(t("2026-12-01T11:30:00Z")),
                    end: Some(t("2026-12-03T11:30:00Z")),
                    state: "scheduled".into(),
                    total: Some(1),
                    in_use: Some(0),
                    reservation_type: Some("capacity-block".into()),
                    ..Live::default()
                },
                _ => Live {
                    found: true,
                    start: Some(t("2026-11-25T00:00:00Z")),
                    end: Some(t("2026-11-30T00:00:00Z")),
                    state: "active".into(),
                    total: Some(2),
                    in_use: Some(0),
                    // Two 48-hour blocks of 2 instances with a 24-hour gap: 192 instance-hours.
                    instance_hours: Some(192.0),
                    segments: vec![
                        (t("2026-11-25T00:00:00Z"), t("2026-11-27T00:00:00Z")),
                        (t("2026-11-28T00:00:00Z"), t("2026-11-30T00:00:00Z")),
                    ],
                    ..Live::default()
                },
            })
            .collect();
        build(&st, d, live, t("2026-11-26T10:00:00Z"), &od)
    }

    /// Review timeline M1: a year-old ODCR does not pull the axis back a year.
    #[test]
    fn window_is_clamped_and_cut_bars_are_marked() {
        let tl = long_lived();
        let (lo, hi) = window(&tl);
        assert!(lo >= tl.now - SignedDuration::from_hours(24 * 9), "{lo}");
        assert!(hi <= tl.now + SignedDuration::from_hours(24 * 64), "{hi}");
        let text = render_text(&tl, false);
        let lane = text.lines().skip_while(|l| !l.starts_with("capacity_reservation.old")).nth(1).unwrap();
        assert!(lane.trim_start().starts_with('◀'), "{lane}");
        assert!(text.contains("◀ ▶ runs past the chart's edge"), "{text}");
    }

    /// Review timeline M2: a reservation the stack only uses is a Capacity Block when EC2
    /// says so: no On-Demand price, unpriced without a recorded fee.
    #[test]
    fn a_used_capacity_block_is_not_priced_as_an_odcr() {
        let tl = long_lived();
        let used = tl.reservations.iter().find(|r| r.id == "cr-0000000000000used").unwrap();
        assert_eq!(used.kind, ResKind::CapacityBlock);
        assert_eq!(used.rate, None);
        let old = tl.reservations.iter().find(|r| r.id == "cr-00000000000000old").unwrap();
        assert_eq!(old.kind, ResKind::CapacityReservation);
        assert_eq!(old.rate.as_ref().unwrap().usd_per_instance_hour, 55.04);
    }

    /// Review timeline minor 2: an ODCR that is not Linux/UNIX on default tenancy is unpriced,
    /// not priced at the Linux rate.
    #[test]
    fn odcr_of_another_platform_or_tenancy_is_unpriced() {
        let st = sample_state();
        for (platform, tenancy, priced) in [
            ("Linux/UNIX", "default", true),
            ("Red Hat Enterprise Linux", "default", false),
            ("Windows", "default", false),
            ("Linux/UNIX", "dedicated", false),
        ] {
            let d = declared(&st);
            let mut live = sample_live(&d);
            let i = d.iter().position(|x| x.address == "capacity_reservation.spare").unwrap();
            live[i].platform = Some(platform.into());
            live[i].tenancy = Some(tenancy.into());
            let tl = build(&st, d, live, t("2026-11-26T10:00:00Z"), &od);
            let odcr = tl.reservations.iter().find(|x| x.address == "capacity_reservation.spare").unwrap();
            assert_eq!(odcr.rate.is_some(), priced, "{platform} {tenancy}");
        }
    }

    /// Review timeline M3: a split plan's rate is the fee over its reserved instance-hours
    /// (not over its span), and nothing is idle (or reserved) between its blocks.
    #[test]
    fn a_split_plan_is_priced_over_its_reserved_hours() {
        let tl = long_lived();
        let plan = tl.reservations.iter().find(|r| r.id == "split").unwrap();
        // 9600 / 192 = 50, not 9600 / 120 h / 2 = 40.
        assert_eq!(plan.rate.as_ref().unwrap().usd_per_instance_hour, 50.0);
        assert!(plan.rate.as_ref().unwrap().basis.contains("192 reserved instance-hours in 2 blocks"));
        assert!(plan.is_active(tl.now));
        assert_eq!(plan.idle_usd_per_hour(tl.now), Some(100.0));
        let gap = t("2026-11-27T12:00:00Z");
        assert!(!plan.is_active(gap) && !plan.reserved_at(gap));
        let text = render_text(&tl, false);
        assert!(text.contains("reserved in 2 blocks: Nov 25 00:00 → Nov 27 00:00, Nov 28 00:00 → Nov 30 00:00"));
        assert_eq!(
            tl.to_json()["reservations"].as_array().unwrap().iter().filter(|r| r["segments"].is_array()).count(),
            1
        );
    }

    /// Review timeline minor 15: tested through `now_from`, without setting the process's
    /// environment while other tests run.
    #[test]
    fn gpustack_now_is_checked() {
        assert_eq!(now_from(Some("2026-11-26T10:00:00Z")).unwrap(), t("2026-11-26T10:00:00Z"));
        let e = now_from(Some("tomorrow")).unwrap_err().to_string();
        assert!(e.contains("GPUSTACK_NOW") && e.contains("help:"), "{e}");
        let before = Timestamp::now();
        assert!(now_from(Some("  ")).unwrap() >= before, "empty: the clock");
        assert!(now_from(None).unwrap() >= before);
    }
}
