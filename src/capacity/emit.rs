//! `capacity find --emit toml`: a Capacity Block or training-plan row as the stack block that
//! buys it, its window pinned so that `gpustack plan` proposes that same offering, and its
//! price as the guard. Pure text; the block validates as written (a test checks it).

use super::find::{Row, Source};

/// The stack block for `row`, or why there is none (Spot and On-Demand are not bought).
pub fn toml(row: &Row) -> Result<String, String> {
    let kind = match row.source {
        Source::CapacityBlocks => "capacity_block",
        Source::TrainingPlans => "training_plan",
        Source::Spot | Source::OnDemand => {
            return Err(format!(
                "row {} is {}: there is nothing to buy; run it from a node group or pool (capacity_type = \"{}\")",
                row.rank,
                row.option,
                if row.source == Source::Spot { "SPOT" } else { "ON_DEMAND" }
            ));
        }
    };
    let Some(p) = &row.purchase else {
        return Err(format!("row {} has no offering to pin", row.rank));
    };
    let start: jiff::Timestamp = p.start.parse().map_err(|e| format!("offering start `{}`: {e}", p.start))?;
    let end: jiff::Timestamp = p.end.parse().map_err(|e| format!("offering end `{}`: {e}", p.end))?;
    // The kinds search for offerings that start in [start_after, start_before] and end by
    // start_before + duration_hours (capacity_block::search, training_plan::search), so a
    // block longer than asked needs start_before late enough for its end; an hour otherwise.
    let before =
        (end - jiff::SignedDuration::from_hours(p.asked_hours)).max(start + jiff::SignedDuration::from_hours(1));
    let instance_type = if row.source == Source::TrainingPlans {
        format!("ml.{}", row.instance_type)
    } else {
        row.instance_type.clone()
    };
    let name = format!("{}_{}", row.instance_type, p.availability_zone)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect::<String>();
    let mut out = String::new();
    out.push_str(&format!(
        "# gpustack capacity find, row {}: {}× {} in {}, {} → {}, ${:.2} up front (offering {}).\n",
        row.rank, p.instance_count, instance_type, p.availability_zone, p.start, p.end, p.upfront_usd, p.offering_id
    ));
    out.push_str(&format!(
        "# For a stack in {}; `gpustack plan` shows the offering again before anything is bought.\n",
        row.region
    ));
    out.push_str(&format!("[{kind}.{name}]\n"));
    let fields: [(&str, String); 7] = [
        ("instance_type", format!("\"{instance_type}\"")),
        ("instance_count", p.instance_count.to_string()),
        ("duration_hours", p.asked_hours.to_string()),
        ("start_after", format!("\"{start}\"")),
        ("start_before", format!("\"{before}\"")),
        ("availability_zone", format!("\"{}\"", p.availability_zone)),
        // The price found, rounded up to a dollar: a dearer offering is refused at plan and apply.
        ("max_upfront_usd", format!("{}", p.upfront_usd.ceil() as i64)),
    ];
    for (k, v) in fields {
        out.push_str(&format!("{k:<17} = {v}\n"));
    }
    if p.blocks.len() > 1 {
        out.push_str("allow_split       = true\n");
    }
    Ok(out)
}
