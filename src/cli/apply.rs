//! `gpustack apply` and `gpustack destroy`: plan, get approval, execute with
//! the journal, save outputs, report.

use super::stdout::{out, outln};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Result, bail};
use clap::{ArgAction, Args};
use serde_json::Map;
use tokio::sync::watch;

use super::interrupt::{First, on_interrupt};
use super::plan::{Prep, PrepareOpts, Prepared, header, prepare};
use super::{Global, VarArgs, confirm, load_stack, stdin_is_terminal};
use crate::engine::journal::Journal;
use crate::engine::progress::{Mode, Progress};
use crate::engine::{self, Outcome};
use crate::plan::{self, Action, render};
use crate::stack::{Source, Stack, VarSources};
use crate::state::backend::Backend;
use crate::state::{State, local, rescue};
use crate::value::Value;

#[derive(Args)]
#[command(
    after_help = "A saved plan (from `plan --out FILE`) is its own approval and is refused if the state or AWS changed since."
)]
pub struct ApplyArgs {
    /// The stack file, or a plan file saved by `gpustack plan --out`
    file: PathBuf,
    /// Do not ask for confirmation (purchases still need --approve-purchases)
    #[arg(long)]
    auto_approve: bool,
    /// Approve the Capacity Block purchases the plan shows (non-refundable)
    #[arg(long)]
    approve_purchases: bool,
    /// Skip the EC2 quota check (for accounts that deny the Service Quotas API)
    #[arg(long)]
    skip_quota_check: bool,
    /// Allow an apply that creates a HyperPod cluster (or buys its training plan) together
    /// with its EKS cluster; without it that is an error, since HyperPod's dependencies chart
    /// must be installed in between (apply --target eks_cluster.NAME first)
    #[arg(long)]
    hyperpod_chart_installed: bool,
    /// Apply only this resource and what it depends on (repeatable)
    #[arg(long = "target", value_name = "ADDRESS")]
    targets: Vec<String>,
    /// Read AWS before planning (always done when state has operations of an interrupted run)
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", action = ArgAction::Set)]
    refresh: bool,
    #[command(flatten)]
    vars: VarArgs,
}

#[derive(Args)]
pub struct DestroyArgs {
    /// The stack file
    stack: PathBuf,
    /// Do not ask for confirmation
    #[arg(long)]
    auto_approve: bool,
    /// Destroy only this resource and what depends on it (repeatable)
    #[arg(long = "target", value_name = "ADDRESS")]
    targets: Vec<String>,
    #[command(flatten)]
    vars: VarArgs,
}

pub async fn apply(g: &Global, a: ApplyArgs) -> Result<i32> {
    let cancel = on_interrupt(First::Cancel);
    if plan::file::is_plan_file(&a.file) {
        return apply_saved(g, &a, cancel).await;
    }
    let Some(stack) = super::load_stack_for(g, &a.file, &a.vars, a.refresh) else { return Ok(1) };
    let command = format!("gpustack apply {}", a.file.display());
    let opts = PrepareOpts {
        targets: &a.targets,
        refresh: a.refresh,
        destroy: false,
        command,
        which: g.which(&a.file, &a.vars.vars),
        resolve_pending: true,
        skip_quota_check: a.skip_quota_check,
        offline: false,
        hyperpod_chart_installed: a.hyperpod_chart_installed,
    };
    let p = match prepare(g, stack, opts).await? {
        Prep::Ready(p) => p,
        Prep::Exit(code) => return Ok(code),
    };
    show_plan(g, &p, "apply")?;
    if !p.plan.has_changes() {
        return Ok(0);
    }
    if !purchases_approved(g, &p.plan, a.approve_purchases)? {
        return Ok(1);
    }
    if !approved(g, a.auto_approve, &format!("Apply these changes to stack {}?", p.stack.name), "apply")? {
        return Ok(1);
    }
    run(g, *p, "Apply", cancel).await
}

async fn apply_saved(g: &Global, a: &ApplyArgs, cancel: watch::Receiver<bool>) -> Result<i32> {
    let saved = plan::file::read(&a.file)?;
    if !a.vars.vars.is_empty() || !a.targets.is_empty() {
        bail!("a saved plan already fixes its variables and targets; drop --var and --target, or plan again");
    }
    let no_env = |_: &str| None;
    let sources = VarSources { cli: &saved.vars, env: &no_env };
    let stack = match crate::load::check(Source::new(&saved.stack_file, saved.source.clone()), &sources) {
        Ok(s) => s,
        Err(d) => {
            eprint!("{}", d.render(g.color()));
            return Ok(1);
        }
    };
    let command = format!("gpustack apply {}", a.file.display());
    let saved_vars: Vec<(String, String)> = saved.vars.clone();
    let opts = PrepareOpts {
        targets: &saved.targets,
        refresh: true,
        destroy: saved.destroy,
        command,
        which: g.which(std::path::Path::new(&saved.stack_file), &saved_vars),
        resolve_pending: true,
        skip_quota_check: a.skip_quota_check,
        offline: false,
        hyperpod_chart_installed: a.hyperpod_chart_installed,
    };
    let p = match prepare(g, stack, opts).await? {
        Prep::Ready(p) => p,
        Prep::Exit(code) => return Ok(code),
    };
    let (lineage, serial) = (p.state.as_ref().map(|s| s.lineage.clone()), p.state.as_ref().map_or(0, |s| s.serial));
    if lineage != saved.lineage || serial != saved.serial {
        bail!(
            "the saved plan {} is stale: it was made against state serial {} and the state is now at serial {serial}{}\n  help: run `gpustack plan --out {}` again and apply the new plan",
            a.file.display(),
            saved.serial,
            if lineage != saved.lineage { " of another lineage" } else { "" },
            a.file.display()
        );
    }
    if plan::fingerprint(&p.plan) != saved.fingerprint {
        bail!(
            "the saved plan {} no longer matches what AWS shows (something changed outside gpustack since it was made)\n  help: run `gpustack plan --out {}` again and review the new plan",
            a.file.display(),
            a.file.display()
        );
    }
    show_plan(g, &p, "apply")?;
    if !p.plan.has_changes() {
        return Ok(0);
    }
    if !purchases_approved(g, &p.plan, a.approve_purchases)? {
        return Ok(1);
    }
    run(g, *p, "Apply", cancel).await
}

pub async fn destroy(g: &Global, a: DestroyArgs) -> Result<i32> {
    let cancel = on_interrupt(First::Cancel);
    let Some(stack) = load_stack(g, &a.stack, &a.vars) else { return Ok(1) };
    let command = format!("gpustack destroy {}", a.stack.display());
    let opts = PrepareOpts {
        targets: &a.targets,
        refresh: true,
        destroy: true,
        command,
        which: g.which(&a.stack, &a.vars.vars),
        resolve_pending: true,
        skip_quota_check: true,
        offline: false,
        hyperpod_chart_installed: false,
    };
    let p = match prepare(g, stack, opts).await? {
        Prep::Ready(p) => p,
        Prep::Exit(code) => return Ok(code),
    };
    show_plan(g, &p, "destroy")?;
    if !p.plan.has_changes() {
        return Ok(0);
    }
    let n = p.plan.count(Action::is_removal);
    if !approved(
        g,
        a.auto_approve,
        &format!("Destroy {n} object(s) of stack {}? This cannot be undone.", p.stack.name),
        "destroy",
    )? {
        return Ok(1);
    }
    run(g, *p, "Destroy", cancel).await
}

fn show_plan(g: &Global, p: &Prepared, verb: &str) -> std::io::Result<()> {
    if g.json {
        outln!("{}", serde_json::json!({"event": "plan", "plan": plan::to_json(&p.plan)}))?;
    } else {
        out!("{}", render::render(&p.plan, &header(verb, p), &render::Style { color: g.color_stdout() }))?;
    }
    Ok(())
}

/// Money needs its own, explicit yes: `--approve-purchases`, or the total typed back on a
/// terminal. `--auto-approve` (and a saved plan) alone never buys.
fn purchases_approved(g: &Global, plan: &plan::Plan, flag: bool) -> Result<bool> {
    if let Some(c) = plan.changes.iter().find(|c| c.action == Action::Import && c.adopt.is_none()) {
        bail!(
            "`{}` would import {}, but this plan did not read it (--refresh=false); nothing is imported unread\n  help: apply with refresh (the default), so the object and what differs from the file are shown before you approve",
            c.address,
            c.id.as_deref().unwrap_or("an object")
        );
    }
    if let Some(c) =
        plan.changes.iter().find(|c| matches!(c.action, Action::Purchase(_)) && c.action.purchase().is_none())
    {
        bail!(
            "`{}` would buy capacity, but this plan did not look up its offering and price (--refresh=false); nothing is bought unpriced\n  help: apply with refresh (the default), so the offering and its price are shown before you approve",
            c.address
        );
    }
    let buys: Vec<&plan::Purchase> = plan.changes.iter().filter_map(|c| c.action.purchase()).collect();
    if buys.is_empty() || flag {
        return Ok(true);
    }
    let total: f64 = buys.iter().map(|p| p.upfront_usd).sum();
    let total = format!("{total:.2}");
    if !stdin_is_terminal() {
        bail!(
            "this plan buys {} for ${total} up front, non-refundable, and purchases need their own approval; --auto-approve alone does not buy\n  help: review the plan, then re-run with --approve-purchases",
            plan::render::purchases(plan, |a| a.purchase().is_some())
        );
    }
    if confirm(
        &format!(
            "This buys {} for ${total} up front. {} cannot be cancelled or refunded.",
            plan::render::purchases(plan, |a| a.purchase().is_some()),
            if buys.len() == 1 { "It" } else { "They" }
        ),
        &total,
    )? {
        return Ok(true);
    }
    if !g.json {
        eprintln!("Cancelled: nothing was bought or changed.");
    }
    Ok(false)
}

fn approved(g: &Global, auto: bool, question: &str, verb: &str) -> Result<bool> {
    if auto {
        return Ok(true);
    }
    if !stdin_is_terminal() {
        bail!(
            "{verb} needs approval and there is no terminal to ask on\n  help: re-run with --auto-approve, or save a plan with `gpustack plan --out FILE` and apply that file"
        );
    }
    if confirm(question, "yes")? {
        return Ok(true);
    }
    if !g.json {
        eprintln!("Cancelled: nothing was changed.");
    }
    Ok(false)
}

/// Executes the plan, saves outputs, prints the summary.
async fn run(g: &Global, p: Prepared, verb: &str, cancel_rx: watch::Receiver<bool>) -> Result<i32> {
    let mode = if g.json {
        Mode::Json
    } else if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        Mode::Terminal
    } else {
        Mode::Plain
    };
    let progress = Arc::new(Progress::new(mode));
    let initial =
        p.refreshed.state.clone().or(p.state.clone()).unwrap_or_else(|| State::new(&p.stack.name, &p.stack.region));
    let journal = Arc::new(Journal::new(p.backend.clone(), initial, &p.which));
    let started = std::time::Instant::now();
    let outcome =
        engine::execute(p.ctx.clone(), p.stack.clone(), &p.plan, journal.clone(), progress, cancel_rx).await?;
    let outputs = if p.plan.destroy { Map::new() } else { compute_outputs(&p.stack, &journal.snapshot()) };
    let shown = outputs.clone();
    let stored = journal.commit(|s| s.outputs = outputs).await;
    // The state changed behind the lock: say so once, in full, rather than per operation.
    if let Some(refusal) = journal.refusal() {
        report(g, verb, &p, &outcome, started.elapsed().as_secs_f64(), &shown)?;
        bail!("{refusal}");
    }
    if let Err(e) = stored {
        // S3 unreachable at the end: what this run did must not live only in memory.
        if matches!(*p.backend, Backend::S3(_)) {
            let st = journal.snapshot();
            let file = rescue::write(&st.stack, st.serial, &local::encode(&st)?)?;
            report(g, verb, &p, &outcome, started.elapsed().as_secs_f64(), &shown)?;
            bail!("{e:#}; {}", rescue::advice(&file, &p.which));
        }
        return Err(e);
    }
    report(g, verb, &p, &outcome, started.elapsed().as_secs_f64(), &shown)?;
    p.lock.release().await?;
    Ok(if outcome.ok() { 0 } else { 1 })
}

/// `[output]` values from the state after apply; an output whose resource failed is left out.
fn compute_outputs(stack: &Stack, st: &State) -> Map<String, serde_json::Value> {
    stack
        .outputs
        .iter()
        .filter_map(|o| {
            let v = o.expr.resolve(&|r| {
                st.resources
                    .get(&r.address)
                    .and_then(|e| e.outputs.get(&r.output))
                    .map(Value::from_json)
                    .unwrap_or(Value::Unknown)
            });
            v.is_known().then(|| (o.name.clone(), v.to_json()))
        })
        .collect()
}

fn report(
    g: &Global,
    verb: &str,
    p: &Prepared,
    o: &Outcome,
    secs: f64,
    outputs: &Map<String, serde_json::Value>,
) -> std::io::Result<()> {
    if g.json {
        outln!(
            "{}",
            serde_json::json!({
                "event": "summary", "ok": o.ok(), "done": o.done, "seconds": secs,
                "failed": o.failed.iter().map(|(a, e)| {
                    let mut m = Map::new();
                    m.insert("address".into(), a.clone().into());
                    e.json_fields(&mut m);
                    serde_json::Value::Object(m)
                }).collect::<Vec<_>>(),
                "skipped": o.skipped, "not_started": o.not_started, "interrupted": o.interrupted, "outputs": outputs,
            })
        )?;
        return Ok(());
    }
    let state = p.backend.location();
    if o.ok() {
        outln!("\n{verb} complete: {} operation(s) in {secs:.1}s. State: {state}", o.done)?;
    } else {
        outln!(
            "\n{verb} incomplete: {} done, {} failed, {} skipped, {} not started. State: {state}",
            o.done,
            o.failed.len(),
            o.skipped.len(),
            o.not_started.len()
        )?;
        for (a, e) in &o.failed {
            outln!("  failed   {a}: {e}")?;
        }
        for a in &o.skipped {
            outln!("  skipped  {a} (a resource it depends on failed)")?;
        }
        if o.interrupted {
            outln!(
                "  interrupted: {} operation(s) not started; run the same command again to continue.",
                o.not_started.len()
            )?;
        }
    }
    if !outputs.is_empty() {
        outln!("\nOutputs:")?;
        for (k, v) in outputs {
            outln!("  {k} = {}", Value::from_json(v))?;
        }
    }
    Ok(())
}
