//! `gpustack capacity timeline STACK [--svg FILE]`: a stack's reservations over time (see
//! `crate::capacity::timeline`); `read_timeline` is shared with `gpustack status`.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;

use super::stdout::{out, outln};
use super::{Global, VarArgs, load_stack};
use crate::capacity::timeline::{self, Timeline};
use crate::price::PriceBook;
use crate::state::State;
use crate::state::backend::Backend;

#[derive(Args)]
#[command(after_help = "Examples:
  gpustack capacity timeline examples/training.toml
  gpustack capacity timeline examples/training.toml --svg capacity.svg   # for a capacity review
  gpustack capacity timeline examples/training.toml --json | jq '.idle_usd_per_hour'

Reads the stack's state (run `gpustack apply` first) and AWS (DescribeCapacityReservations,
DescribeTrainingPlan). Idle instances are priced at the reservation's own rate: a Capacity
Block's or training plan's up-front fee / its hours / its instances, an ODCR's On-Demand
rate. A price that cannot be found is shown as unpriced, never as zero. Blocks ending within
a week are flagged.

GPUSTACK_NOW=2026-12-01T09:00:00Z pins \"now\" (RFC 3339) for reproducible output; states and use
still come from AWS as of the clock, so it does not foresee a later state.")]
pub struct TimelineArgs {
    /// The stack file (TOML)
    stack: PathBuf,
    /// Also write the timeline as an SVG picture to FILE
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    #[command(flatten)]
    vars: VarArgs,
}

pub async fn run(g: &Global, a: TimelineArgs) -> Result<i32> {
    let Some(stack) = load_stack(g, &a.stack, &a.vars) else { return Ok(1) };
    let Some((t, _, _)) = read_timeline(g, &stack).await? else { return Ok(1) };
    if let Some(path) = &a.svg {
        std::fs::write(path, crate::capacity::svg::render(&t))
            .with_context(|| format!("writing {}", path.display()))?;
        if !g.json {
            eprintln!("Wrote the timeline picture to {}", path.display());
        }
    }
    if g.json {
        outln!("{}", serde_json::to_string_pretty(&t.to_json())?)?;
    } else {
        out!("{}", timeline::render_text(&t, g.color_stdout()))?;
    }
    Ok(0)
}

/// The stack's state, or `None` after saying there is none.
async fn read_state(g: &Global, stack: &crate::stack::Stack) -> Result<Option<State>> {
    let backend = Backend::open(g.location(stack)?).await;
    match backend.read().await? {
        Some(s) => Ok(Some(s)),
        None => {
            eprintln!(
                "error: no state at {}\n  help: run `gpustack apply` first: the timeline shows what the stack reserved",
                backend.location()
            );
            Ok(None)
        }
    }
}

/// The stack's reservations from state, read live and priced, with the state and the AWS
/// context they were read with (for `status`'s further reads).
pub async fn read_timeline(
    g: &Global,
    stack: &crate::stack::Stack,
) -> Result<Option<(Timeline, State, crate::aws::Ctx)>> {
    let now = timeline::now()?;
    let Some(state) = read_state(g, stack).await? else { return Ok(None) };
    let declared = timeline::declared(&state);
    let ctx = crate::aws::Ctx::connect(&stack.name, &state.region).await;
    if !declared.is_empty() && !g.json {
        eprintln!("Reading {} reservation(s) from AWS…", declared.len());
    }
    let live = match timeline::read_live(&ctx, &declared).await {
        Ok(l) => l,
        Err(e) => bail!(
            "{e}\n  help: the read needs ec2:DescribeCapacityReservations and sagemaker:DescribeTrainingPlan; see `gpustack policy`"
        ),
    };
    // ODCRs bill at the On-Demand rate: price their types (live, the snapshot as a fallback).
    let types: Vec<String> = declared
        .iter()
        .zip(&live)
        .filter(|(d, _)| d.kind == timeline::ResKind::CapacityReservation)
        .filter_map(|(d, l)| l.instance_type.clone().or_else(|| Some(d.instance_type.clone())))
        .filter(|t| !t.is_empty())
        .collect();
    let book = prices(&ctx, &state.region, &types).await;
    let lookup = |region: &str, t: &str| on_demand(&book, region, t);
    let t = timeline::build(&state, declared, live, now, &lookup);
    Ok(Some((t, state, ctx)))
}

/// Live On-Demand prices of `types` (`pricing:GetProducts`), and the embedded snapshot for
/// what the live read could not price (a missing permission, a throttled call).
pub async fn prices(ctx: &crate::aws::Ctx, region: &str, types: &[String]) -> (PriceBook, PriceBook) {
    let refs: Vec<&str> = types.iter().map(String::as_str).collect();
    let live = match PriceBook::live(ctx, region, &refs).await {
        Ok(b) => b,
        Err(e) => PriceBook::none(format!("no live prices: {e}")),
    };
    for p in live.problems() {
        eprintln!("warning: {p} (prices from the embedded snapshot instead)");
    }
    (live, PriceBook::embedded())
}

/// An On-Demand price and its source: live first, else the snapshot; `None`: unpriced.
pub fn on_demand(book: &(PriceBook, PriceBook), region: &str, instance_type: &str) -> Option<(f64, String)> {
    let (live, embedded) = book;
    live.on_demand_hourly(region, instance_type)
        // The live book's source names the time it was read, which the header already says.
        .map(|usd| (usd, "AWS Price List, read now".to_string()))
        .or_else(|| embedded.on_demand_hourly(region, instance_type).map(|usd| (usd, embedded.source().to_string())))
}
