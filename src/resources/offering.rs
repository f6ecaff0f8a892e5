//! What a plan proposes to buy, whatever sells it: a Capacity Block offering
//! (`DescribeCapacityBlockOfferings`) or a training plan offering
//! (`SearchTrainingPlanOfferings`). Kinds that buy ([`super::Kind::buys`]) turn their
//! offerings into [`Purchase`]s; the plan chooses one with [`choose`] and guards its price.

use super::capacity_reservation::{check_time, parse_time};
use crate::stack::{Diagnostic, Resource};
use crate::value::{Attrs, Value};

/// An offering a plan proposes to buy.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Purchase {
    pub offering_id: String,
    pub instance_type: String,
    pub instance_count: i64,
    pub availability_zone: String,
    pub start: String,
    pub end: String,
    /// The offering's length; at least `asked_hours` (blocks end at 11:30 UTC, so rarely equal).
    pub duration_hours: i64,
    pub asked_hours: i64,
    pub upfront_usd: f64,
    pub currency: String,
    pub max_upfront_usd: f64,
    /// The separate blocks of a split (two-block) training plan offering, each with its own
    /// start and end, so the plan shows the gap between them; empty for one block.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<Block>,
    /// A training plan's `purchase_attempt` (0 when not set): salts the plan's name, so a
    /// purchase whose payment failed can be made again under a new name.
    #[serde(skip_serializing_if = "is_zero")]
    pub attempt: i64,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// One reserved-capacity block of an offering.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Block {
    pub availability_zone: String,
    pub start: String,
    pub end: String,
}

impl Purchase {
    /// The fields a purchase takes from the resource's inputs: what was asked and the guard.
    pub fn asked(mut self, inputs: &Attrs) -> Purchase {
        self.asked_hours = inputs.get("duration_hours").and_then(Value::as_int).unwrap_or(0);
        self.max_upfront_usd = inputs.get("max_upfront_usd").and_then(Value::as_f64).unwrap_or(0.0);
        self.attempt = inputs.get("purchase_attempt").and_then(Value::as_int).unwrap_or(0);
        self
    }
}

/// An up-front fee as AWS writes it (a decimal string); unreadable is infinitely dear, so
/// any `max_upfront_usd` refuses it.
pub fn fee(text: Option<&str>) -> f64 {
    text.and_then(|f| f.trim().parse::<f64>().ok()).filter(|f| f.is_finite()).unwrap_or(f64::INFINITY)
}

/// The offering a plan proposes: one at least as long as asked, then the cheapest, then
/// the earliest, then by zone (so the choice does not depend on the order AWS lists them).
/// Every Capacity Block ends at 11:30 UTC, so for a requested length EC2 offers one block
/// slightly shorter and one slightly longer (EC2 UG `capacity-blocks-purchase`); the shorter
/// is cheaper, and cheapest-first alone would buy less time than asked for.
pub fn choose(offers: &[Purchase], hours: i64) -> Option<&Purchase> {
    offers.iter().filter(|o| o.duration_hours >= hours).min_by(|a, b| {
        a.upfront_usd
            .total_cmp(&b.upfront_usd)
            .then(start_secs(a).cmp(&start_secs(b)))
            .then(a.availability_zone.cmp(&b.availability_zone))
    })
}

fn start_secs(p: &Purchase) -> i64 {
    p.start.parse::<jiff::Timestamp>().map(|t| t.as_second()).unwrap_or(i64::MAX)
}

/// The checks every purchase's attributes get offline: `start_after` and `start_before` are
/// RFC 3339 times in order, `start_after` is at most `lead_days` ahead (what AWS sells), and
/// `max_upfront_usd` is a positive amount. `noun` names what is bought ("Capacity Blocks").
pub fn validate_window(r: &Resource, lead_days: i64, noun: &str, diags: &mut Vec<Diagnostic>) {
    let lit = |k: &str| r.attrs.get(k).and_then(|e| e.as_literal());
    let at = |k: &str| r.attrs.get(k).and_then(|e| e.span.clone());
    check_time(r, "start_after", diags);
    check_time(r, "start_before", diags);
    if let Some(v) = lit("max_upfront_usd")
        && !matches!(v, Value::Int(n) if *n > 0)
        && !matches!(v, Value::Float(f) if *f > 0.0)
    {
        diags.push(
            Diagnostic::error("`max_upfront_usd` must be a positive number of US dollars", at("max_upfront_usd"))
                .help("the most you will pay up front, e.g. max_upfront_usd = 40000"),
        );
    }
    let time = |k: &str| lit(k).and_then(Value::as_str).and_then(|v| parse_time(v).ok());
    if let (Some(a), Some(b)) = (time("start_after"), time("start_before")) {
        if a >= b {
            diags.push(
                Diagnostic::error("`start_before` must be later than `start_after`", at("start_before"))
                    .help("the purchase starts somewhere in [start_after, start_before]"),
            );
        }
        let limit = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(24 * lead_days);
        if a > limit {
            diags.push(
                Diagnostic::error(
                    format!(
                        "`start_after` is more than {} weeks ahead; {noun} start at most {} weeks out",
                        lead_days / 7,
                        lead_days / 7
                    ),
                    at("start_after"),
                )
                .help("move the window closer, and plan again nearer the time"),
            );
        }
    }
}

/// A purchase's window in canonical form (RFC 3339 as jiff writes it), so equal times compare equal.
pub fn normalize_window(inputs: &mut Attrs) {
    for k in ["start_after", "start_before"] {
        if let Some(Value::Str(t)) = inputs.get_mut(k)
            && let Ok(ts) = parse_time(t)
        {
            *t = ts.to_string();
        }
    }
}

/// What was bought cannot drift: the recorded inputs, with only the tags read back.
pub fn bought_current(recorded: &Attrs, observed: &Attrs) -> Attrs {
    let mut cur = recorded.clone();
    if let Some(t) = observed.get("tags") {
        cur.insert("tags".into(), t.clone());
    }
    cur
}
