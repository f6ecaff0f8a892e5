//! `gpustack capacity`: where GPU capacity can be had and what it costs. `find` searches
//! and ranks (src/capacity); each subcommand is one variant of [`CapacityCommand`].

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{ArgGroup, Args, Subcommand, ValueEnum};

use super::stdout::{out, outln};
use super::{Global, VarArgs, load_stack};
use crate::aws::Ctx;
use crate::capacity::find::{Ask, Missing, Row, Source, TypeAsk, instances_for, order_missing, rank};
use crate::capacity::{emit, search};

#[derive(Subcommand)]
pub enum CapacityCommand {
    /// Find GPU capacity across regions and zones and rank it by US dollars per GPU-hour:
    /// Capacity Blocks, training plans, Spot and On-Demand. Reads only; buys nothing
    Find(FindArgs),
    /// Every reservation a stack owns or uses (Capacity Blocks, ODCRs, training plans) on a
    /// time axis, with what runs on it, idle capacity priced, gaps, and blocks ending soon
    Timeline(super::timeline::TimelineArgs),
}

pub async fn run(g: &Global, c: CapacityCommand) -> anyhow::Result<i32> {
    match c {
        CapacityCommand::Find(a) => find(g, a).await,
        CapacityCommand::Timeline(a) => super::timeline::run(g, a).await,
    }
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Emit {
    /// The `capacity_block` or `training_plan` block that buys the row, window pinned
    Toml,
}

const FIND_AFTER: &str = "Examples:
  gpustack capacity find --gpus 16 --gpu h100,h200 --hours 336 \\
      --between 2026-12-01 2027-01-01 --regions us-east-1,us-west-2
  gpustack capacity find --instances 2 --types p5.48xlarge --hours 48 \\
      --emit toml --row 1 >> stack.toml

Exit status: 0 when some option was found, 2 when none was, 1 on an error.
Capacity Block and training-plan prices are the offerings' up-front fees; Spot and On-Demand
prices come from the AWS Price List and Spot price history. A price that cannot be found is
listed as unpriced, never as zero.";

#[derive(Args)]
#[command(after_help = FIND_AFTER)]
#[command(group(ArgGroup::new("size").required(true).args(["gpus", "instances"])))]
#[command(group(ArgGroup::new("what").required(true).args(["types", "gpu"])))]
pub struct FindArgs {
    /// GPUs wanted: each type's instance count is N over its GPUs, rounded up
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..=65536))]
    gpus: Option<i64>,
    /// Instances wanted, of whichever type
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(i64).range(1..=8192))]
    instances: Option<i64>,
    /// Instance types, comma-separated (p5.48xlarge,p5e.48xlarge,p6-b200.48xlarge)
    #[arg(long, value_name = "TYPES", value_delimiter = ',')]
    types: Vec<String>,
    /// GPU models, comma-separated (h100,h200,b200): every type with that GPU in gpustack's
    /// instance catalog
    #[arg(long, value_name = "MODELS", value_delimiter = ',')]
    gpu: Vec<String>,
    /// How long the capacity is needed, in hours (blocks and plans round up to whole days)
    #[arg(long, value_name = "H", value_parser = clap::value_parser!(i64).range(1..=4368))]
    hours: i64,
    /// The window: start at or after START and end by END; RFC 3339 or a date (UTC midnight).
    /// Default: from now, starting within 14 days
    #[arg(long, num_args = 2, value_names = ["START", "END"])]
    between: Vec<String>,
    /// Regions, comma-separated (default: the region of --stack, else the SDK's: AWS_REGION
    /// or the profile's)
    #[arg(long, value_name = "REGIONS", value_delimiter = ',')]
    regions: Vec<String>,
    /// A stack file: its region is searched when --regions is not given
    #[arg(long, value_name = "FILE")]
    stack: Option<PathBuf>,
    #[command(flatten)]
    vars: VarArgs,
    /// What to search, comma-separated
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = Source::ALL)]
    include: Vec<Source>,
    /// Rows the table shows (--json lists every row)
    #[arg(long, value_name = "N", default_value_t = 20)]
    top: usize,
    /// Print a row as the stack block that buys it instead of the table
    #[arg(long, value_enum)]
    emit: Option<Emit>,
    /// The row --emit prints (default: the cheapest Capacity Block or training plan)
    #[arg(long, value_name = "N", requires = "emit")]
    row: Option<usize>,
}

/// "2026-12-01T00:00:00Z" or "2026-12-01" (midnight UTC).
fn parse_when(s: &str) -> Result<jiff::Timestamp, String> {
    if let Ok(t) = s.parse::<jiff::Timestamp>() {
        return Ok(t);
    }
    s.parse::<jiff::civil::Date>()
        .ok()
        .and_then(|d| d.to_zoned(jiff::tz::TimeZone::UTC).ok())
        .map(|z| z.timestamp())
        .ok_or_else(|| format!("`{s}` is not a time; write RFC 3339 (2026-12-01T00:00:00Z) or a date (2026-12-01)"))
}

fn valid_region(r: &str) -> bool {
    let parts: Vec<&str> = r.split('-').collect();
    parts.len() >= 3
        && parts.iter().all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()))
        && parts.last().is_some_and(|p| p.chars().all(|c| c.is_ascii_digit()))
}

/// The types asked for, from `--types` or `--gpu` through the embedded instance catalog, with
/// their GPU and vCPU counts; types the catalog lacks are asked of EC2 (`ctx`).
async fn types(a: &FindArgs, ctx: &Ctx) -> anyhow::Result<Vec<TypeAsk>> {
    let catalog = crate::aws::catalog::embedded();
    let mut names: BTreeSet<String> = a.types.iter().map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect();
    for model in a.gpu.iter().map(|m| m.trim()).filter(|m| !m.is_empty()) {
        let found: Vec<String> = catalog
            .all()
            .filter(|i| i.gpu_model.as_deref().is_some_and(|g| g.eq_ignore_ascii_case(model)))
            .map(|i| i.name.clone())
            .collect();
        if found.is_empty() {
            let mut models: Vec<String> = catalog.all().filter_map(|i| i.gpu_model.clone()).collect();
            models.sort();
            models.dedup();
            anyhow::bail!(
                "no instance type in {} has a GPU named `{model}`; known: {}",
                catalog.label(),
                models.join(", ").to_lowercase()
            );
        }
        names.extend(found);
    }
    let unknown: Vec<String> = names.iter().filter(|n| catalog.get(n).is_none()).cloned().collect();
    let live = if unknown.is_empty() { Default::default() } else { ctx.catalog.lookup(ctx, unknown).await? };
    let mut out = vec![];
    for name in names {
        let info = match catalog.get(&name) {
            Some(i) => i.clone(),
            None => live.get(&name).cloned().flatten().ok_or_else(|| {
                anyhow::anyhow!("EC2 does not know instance type `{name}`; check the name (e.g. p5.48xlarge)")
            })?,
        };
        let count = match (a.instances, a.gpus) {
            (Some(n), _) => n,
            (None, Some(g)) => instances_for(g, info.gpus).ok_or_else(|| {
                anyhow::anyhow!("{name} has no GPUs, so --gpus cannot size it; ask with --instances N")
            })?,
            (None, None) => 1,
        };
        out.push(TypeAsk { instance_type: name, gpus_per_instance: info.gpus, vcpus_per_instance: info.vcpus, count });
    }
    Ok(out)
}

async fn regions(g: &Global, a: &FindArgs) -> anyhow::Result<Option<Vec<String>>> {
    let mut regions: Vec<String> = a.regions.iter().map(|r| r.trim().to_string()).filter(|r| !r.is_empty()).collect();
    if regions.is_empty() {
        if let Some(path) = &a.stack {
            let Some(s) = load_stack(g, path, &a.vars) else { return Ok(None) };
            regions.push(s.region.clone());
        } else {
            let sdk = aws_config::default_provider::region::DefaultRegionChain::builder().build().region().await;
            match sdk {
                Some(r) => regions.push(r.to_string()),
                None => anyhow::bail!(
                    "no region to search: pass --regions us-east-1,us-west-2, --stack FILE, or set AWS_REGION"
                ),
            }
        }
    }
    if let Some(bad) = regions.iter().find(|r| !valid_region(r)) {
        anyhow::bail!("`{bad}` is not an AWS region name; write e.g. --regions us-east-1,us-west-2");
    }
    let mut seen = BTreeSet::new();
    regions.retain(|r| seen.insert(r.clone()));
    Ok(Some(regions))
}

fn window(a: &FindArgs) -> anyhow::Result<(jiff::Timestamp, jiff::Timestamp)> {
    let now = jiff::Timestamp::now();
    let hours = jiff::SignedDuration::from_hours(a.hours);
    let (start, end) = match a.between.as_slice() {
        [s, e] => (parse_when(s).map_err(anyhow::Error::msg)?, parse_when(e).map_err(anyhow::Error::msg)?),
        _ => (now, now + jiff::SignedDuration::from_hours(14 * 24) + hours),
    };
    if end <= now {
        anyhow::bail!("--between ends in the past ({end}); give a window in the future");
    }
    // A window that has begun is searched from now on (offerings start in the future).
    let start = start.max(now).round(jiff::Unit::Second).unwrap_or(start);
    let end = end.round(jiff::Unit::Second).unwrap_or(end);
    if end.duration_since(start) < hours {
        anyhow::bail!(
            "--between {start} {end} is shorter than --hours {}; widen the window or ask for fewer hours",
            a.hours
        );
    }
    Ok((start, end))
}

async fn find(g: &Global, a: FindArgs) -> anyhow::Result<i32> {
    let Some(regions) = regions(g, &a).await? else { return Ok(1) };
    let (start, end) = window(&a)?;
    let mut ctxs = vec![];
    for r in &regions {
        ctxs.push((r.clone(), Ctx::connect("capacity-find", r).await));
    }
    let types = types(&a, &ctxs[0].1).await?;
    let ask = Ask {
        types,
        regions: regions.clone(),
        hours: a.hours,
        start,
        end,
        include: a.include.iter().copied().collect(),
    };
    let progress = progress_reporter(&ask);
    let started = std::time::Instant::now();
    let found = search::run(&ask, &ctxs, progress).await;
    if !std::io::stderr().is_terminal() || g.json {
        eprintln!("searched in {:.1} s", started.elapsed().as_secs_f64());
    }
    for w in &found.warnings {
        eprintln!("warning: {w}");
    }
    let mut rows = found.rows;
    let mut missing = found.missing;
    rank(&mut rows);
    order_missing(&mut missing);
    if let Some(Emit::Toml) = a.emit {
        let chosen = match a.row {
            Some(n) => rows.iter().find(|r| r.rank == n).ok_or_else(|| {
                anyhow::anyhow!("there is no row {n}: the search found {} (run without --emit to see them)", rows.len())
            })?,
            None => rows.iter().find(|r| r.purchase.is_some()).ok_or_else(|| {
                anyhow::anyhow!("no Capacity Block or training plan was found, so there is nothing to emit")
            })?,
        };
        out!("{}", emit::toml(chosen).map_err(anyhow::Error::msg)?)?;
        return Ok(0);
    }
    if g.json {
        let doc = serde_json::json!({
            "ask": ask,
            "options": rows,
            "missing": missing,
            "price_sources": found.price_sources,
            "warnings": found.warnings,
        });
        outln!("{}", serde_json::to_string_pretty(&doc)?)?;
    } else {
        out!("{}", table(&ask, &rows, &missing, &found.price_sources, a.top))?;
    }
    Ok(if rows.is_empty() { 2 } else { 0 })
}

/// Progress on stderr: a counter that rewrites itself on a terminal, one line otherwise.
fn progress_reporter(ask: &Ask) -> search::Progress {
    let what = format!(
        "searching {} type{} in {} region{}",
        ask.types.len(),
        crate::stack::diag::plural(ask.types.len()),
        ask.regions.len(),
        crate::stack::diag::plural(ask.regions.len())
    );
    if std::io::stderr().is_terminal() {
        Arc::new(move |done, total| {
            eprint!("\r{what}: {done}/{total} reads answered");
            if done == total {
                eprintln!();
            }
        })
    } else {
        eprintln!("{what}…");
        Arc::new(|_, _| {})
    }
}

fn short_time(t: &str) -> String {
    t.parse::<jiff::Timestamp>().map(|ts| ts.strftime("%Y-%m-%d %H:%M").to_string()).unwrap_or_else(|_| t.to_string())
}

/// The ranked table, the missing options and where the prices came from.
pub fn table(ask: &Ask, rows: &[Row], missing: &[Missing], sources: &[String], top: usize) -> String {
    let sizes: Vec<String> = ask.types.iter().map(|t| format!("{}× {}", t.count, t.instance_type)).collect();
    let mut s = format!(
        "Capacity for {} h, starting {} or later and ending by {}, in {}:\n  {}\n\n",
        ask.hours,
        short_time(&ask.start.to_string()),
        short_time(&ask.end.to_string()),
        ask.regions.join(", "),
        sizes.join(", ")
    );
    if rows.is_empty() {
        s.push_str("No option was found.\n");
    } else {
        s.push_str(&format!(
            "{:>3}  {:<14}  {:<18}  {:>5}  {:<16}  {:<36}  {:>12}  {:>9}  {}\n",
            "#", "option", "type", "count", "zone", "window", "total USD", "USD/GPU-h", "notes"
        ));
        for r in rows.iter().take(top) {
            let zone = r.zone.clone().unwrap_or_else(|| format!("{} (any)", r.region));
            let window = format!("{} → {} ({} h)", short_time(&r.start), short_time(&r.end), r.hours);
            let per = r.usd_per_gpu_hour.map(|p| format!("{p:.2}")).unwrap_or_else(|| "n/a".into());
            let mut notes = r.notes.clone();
            if let Some(n) = r.placement_score {
                notes.insert(0, format!("score {n}/10"));
            }
            s.push_str(&format!(
                "{:>3}  {:<14}  {:<18}  {:>5}  {:<16}  {:<36}  {:>12.2}  {:>9}  {}\n",
                r.rank,
                r.option,
                r.instance_type,
                r.count,
                zone,
                window,
                r.total_usd,
                per,
                notes.join("; ")
            ));
        }
        if rows.len() > top {
            s.push_str(&format!("… {} more (--top N shows more, --json lists all)\n", rows.len() - top));
        }
    }
    if !missing.is_empty() {
        s.push_str("\nNot available:\n");
        for m in missing {
            s.push_str(&format!(
                "  {:<14}  {:<18}  {:<14}  {}: {}\n",
                m.option,
                m.instance_type,
                m.region,
                m.reason.label(),
                m.detail
            ));
        }
    }
    if !sources.is_empty() {
        s.push_str(&format!("\nPrices: {}; blocks and plans at their offerings' up-front fees.\n", sources.join("; ")));
    }
    if rows.iter().any(|r| r.purchase.is_some()) {
        s.push_str("`--emit toml --row N` prints a block or plan row as the stack block that buys it.\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_regions_parse() {
        assert_eq!(parse_when("2026-12-01").unwrap().to_string(), "2026-12-01T00:00:00Z");
        assert_eq!(parse_when("2026-12-01T11:30:00Z").unwrap().to_string(), "2026-12-01T11:30:00Z");
        assert!(parse_when("next week").is_err());
        assert!(valid_region("us-east-1") && valid_region("ap-southeast-2") && valid_region("us-gov-west-1"));
        assert!(!valid_region("us-east") && !valid_region("US-EAST-1") && !valid_region("us-east-1a"));
    }
}
