//! The model of `capacity find`: what was asked ([`Ask`]), the options found ([`Row`]), the
//! ones missing and why ([`Missing`]), the lengths and counts each option sells, and the
//! ranking (US dollars per GPU-hour, cheapest first). Pure: the AWS side is `search`.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::resources::offering::Purchase;

/// Where capacity comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// EC2 Capacity Blocks for ML (DescribeCapacityBlockOfferings)
    CapacityBlocks,
    /// SageMaker training plans (SearchTrainingPlanOfferings)
    TrainingPlans,
    /// Spot Instances (price history and placement scores)
    Spot,
    /// On-Demand Instances (the AWS Price List)
    OnDemand,
}

impl Source {
    pub const ALL: [Source; 4] = [Source::CapacityBlocks, Source::TrainingPlans, Source::Spot, Source::OnDemand];

    /// The option's name in the table: one of it.
    pub fn label(self) -> &'static str {
        match self {
            Source::CapacityBlocks => "capacity-block",
            Source::TrainingPlans => "training-plan",
            Source::Spot => "spot",
            Source::OnDemand => "on-demand",
        }
    }
}

/// One instance type asked for, with what the catalog says of it.
#[derive(Clone, Debug, Serialize)]
pub struct TypeAsk {
    pub instance_type: String,
    pub gpus_per_instance: u32,
    pub vcpus_per_instance: u32,
    /// Instances needed: `--instances`, or `--gpus` over the type's GPUs, rounded up.
    pub count: i64,
}

/// What `capacity find` was asked.
#[derive(Clone, Debug, Serialize)]
pub struct Ask {
    pub types: Vec<TypeAsk>,
    pub regions: Vec<String>,
    pub hours: i64,
    /// The capacity starts at or after `start` and ends by `end`.
    #[serde(serialize_with = "rfc3339")]
    pub start: jiff::Timestamp,
    #[serde(serialize_with = "rfc3339")]
    pub end: jiff::Timestamp,
    pub include: BTreeSet<Source>,
}

fn rfc3339<S: serde::Serializer>(t: &jiff::Timestamp, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(t)
}

impl Ask {
    /// The latest start that still ends by `end` for `hours`.
    pub fn start_before(&self, hours: i64) -> jiff::Timestamp {
        self.end - jiff::SignedDuration::from_hours(hours)
    }
}

/// A way to get the capacity, priced.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// 1 for the cheapest per GPU-hour; `--row N` names a row by it.
    pub rank: usize,
    pub option: &'static str,
    #[serde(skip)]
    pub source: Source,
    pub instance_type: String,
    pub count: i64,
    /// GPUs in all `count` instances.
    pub gpus: i64,
    pub region: String,
    /// None for On-Demand: its price is the region's, in any zone.
    pub zone: Option<String>,
    pub start: String,
    pub end: String,
    pub hours: i64,
    pub total_usd: f64,
    /// `total_usd` over the GPUs and hours asked (`--gpus`/`--instances` × `--hours`), the
    /// ranking key: a block or plan sold longer or larger than the ask is paid in full, so its
    /// price per asked GPU-hour is what compares with On-Demand and Spot for the same job. None
    /// when the type has no GPUs (Trainium): ranked after every priced GPU row.
    pub usd_per_gpu_hour: Option<f64>,
    /// `total_usd` over the GPUs and hours bought (`gpus` × `hours`): lower than
    /// `usd_per_gpu_hour` when a block or plan is rounded up to what is sold.
    pub usd_per_bought_gpu_hour: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offering_id: Option<String>,
    /// Spot only: EC2's placement score (1–10) in this zone of a request for any of the searched
    /// types (one request per region; AWS scores fewer than 3 types always low), see the notes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement_score: Option<i32>,
    pub notes: Vec<String>,
    /// The offering behind a Capacity Block or training-plan row, for `--emit toml`.
    #[serde(skip)]
    pub purchase: Option<Purchase>,
}

/// Why an option is not in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// The account's quota is below what the option needs.
    NoQuota,
    /// AWS offers nothing in the window.
    NoOffering,
    /// No price could be found (never shown as zero).
    Unpriced,
    /// The option does not sell this type, length or count.
    NotSold,
    /// The search itself failed (denied, throttled, …).
    Failed,
}

impl Reason {
    pub fn label(self) -> &'static str {
        match self {
            Reason::NoQuota => "no quota",
            Reason::NoOffering => "no offering",
            Reason::Unpriced => "unpriced",
            Reason::NotSold => "not sold",
            Reason::Failed => "search failed",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Missing {
    pub option: &'static str,
    pub instance_type: String,
    pub region: String,
    pub reason: Reason,
    pub detail: String,
}

impl Missing {
    pub fn new(source: Source, t: &str, region: &str, reason: Reason, detail: impl Into<String>) -> Missing {
        Missing {
            option: source.label(),
            instance_type: t.to_string(),
            region: region.to_string(),
            reason,
            detail: detail.into(),
        }
    }
}

/// Instances of a type with `per` GPUs that hold `gpus` GPUs: rounded up.
pub fn instances_for(gpus: i64, per: u32) -> Option<i64> {
    (per > 0).then(|| (gpus + i64::from(per) - 1) / i64::from(per))
}

/// The Capacity Block length to search for `hours`: the next length EC2 sells (1-day steps
/// up to 14 days, 7-day steps up to 182 days; `capacity_block::valid_duration`).
pub fn block_hours(hours: i64) -> Option<i64> {
    let h = hours.max(24);
    let rounded = if h <= 336 { (h + 23) / 24 * 24 } else { (h + 167) / 168 * 168 };
    crate::resources::capacity_block::valid_duration(rounded).then_some(rounded)
}

/// The training-plan length to search for `hours`: whole days, 1 to 182 (`training_plan`).
pub fn plan_hours(hours: i64) -> Option<i64> {
    let rounded = (hours.max(24) + 23) / 24 * 24;
    crate::resources::training_plan::valid_duration(rounded).then_some(rounded)
}

/// The training-plan count that holds `n` instances: plans are sold in 1, 2, 4 … 64.
pub fn plan_count(n: i64) -> Option<i64> {
    crate::resources::training_plan::COUNTS.iter().copied().find(|c| *c >= n)
}

/// US dollars per GPU-hour of `total` over `gpus` GPUs for `hours`.
pub fn per_gpu_hour(total: f64, gpus: i64, hours: i64) -> Option<f64> {
    (gpus > 0 && hours > 0 && total.is_finite()).then(|| total / (gpus as f64 * hours as f64))
}

/// Orders the rows cheapest per GPU-hour first (rows without GPUs last, by total), then by
/// total, start, and names, so equal prices list the same way every run; numbers them from 1.
pub fn rank(rows: &mut [Row]) {
    rows.sort_by(|a, b| {
        let key = |r: &Row| r.usd_per_gpu_hour.unwrap_or(f64::INFINITY);
        key(a)
            .total_cmp(&key(b))
            .then(a.total_usd.total_cmp(&b.total_usd))
            .then(a.start.cmp(&b.start))
            .then(a.source.cmp(&b.source))
            .then(a.instance_type.cmp(&b.instance_type))
            .then(a.region.cmp(&b.region))
            .then(a.zone.cmp(&b.zone))
    });
    for (i, r) in rows.iter_mut().enumerate() {
        r.rank = i + 1;
    }
}

/// Missing options in a stable order: by option, type, region.
pub fn order_missing(missing: &mut [Missing]) {
    missing.sort_by(|a, b| {
        (a.option, &a.instance_type, &a.region, a.reason).cmp(&(b.option, &b.instance_type, &b.region, b.reason))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(source: Source, per: Option<f64>, total: f64) -> Row {
        Row {
            rank: 0,
            option: source.label(),
            source,
            instance_type: "p5.48xlarge".into(),
            count: 1,
            gpus: 8,
            region: "us-west-2".into(),
            zone: None,
            start: "2026-12-01T00:00:00Z".into(),
            end: "2026-12-02T00:00:00Z".into(),
            hours: 24,
            total_usd: total,
            usd_per_gpu_hour: per,
            usd_per_bought_gpu_hour: per,
            offering_id: None,
            placement_score: None,
            notes: vec![],
            purchase: None,
        }
    }

    #[test]
    fn lengths_and_counts_round_up_to_what_is_sold() {
        assert_eq!(block_hours(1), Some(24));
        assert_eq!(block_hours(25), Some(48));
        assert_eq!(block_hours(336), Some(336));
        assert_eq!(block_hours(337), Some(504));
        assert_eq!(block_hours(4368), Some(4368));
        assert_eq!(block_hours(4369), None);
        assert_eq!(plan_hours(30), Some(48));
        assert_eq!(plan_hours(5000), None);
        assert_eq!(plan_count(3), Some(4));
        assert_eq!(plan_count(64), Some(64));
        assert_eq!(plan_count(65), None);
        assert_eq!(instances_for(16, 8), Some(2));
        assert_eq!(instances_for(17, 8), Some(3));
        assert_eq!(instances_for(16, 0), None);
    }

    #[test]
    fn cheapest_per_gpu_hour_ranks_first_and_gpu_less_rows_last() {
        let mut rows = vec![
            row(Source::OnDemand, Some(5.0), 960.0),
            row(Source::Spot, None, 10.0),
            row(Source::CapacityBlocks, Some(4.0), 768.0),
            row(Source::Spot, Some(4.0), 700.0),
        ];
        rank(&mut rows);
        let order: Vec<_> = rows.iter().map(|r| (r.rank, r.option, r.total_usd)).collect();
        assert_eq!(
            order,
            [(1, "spot", 700.0), (2, "capacity-block", 768.0), (3, "on-demand", 960.0), (4, "spot", 10.0)]
        );
        assert_eq!(per_gpu_hour(768.0, 8, 24), Some(4.0));
        assert_eq!(per_gpu_hour(1.0, 0, 24), None);
        assert_eq!(per_gpu_hour(f64::INFINITY, 8, 24), None);
    }
}
