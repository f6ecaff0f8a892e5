//! `gpustack plan`, and the preparation plan, apply and destroy share: lock the
//! state, read it, refresh, diff.

use super::stdout::{out, outln};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use clap::{ArgAction, Args};

use super::{Global, VarArgs};
use crate::aws::Ctx;
use crate::plan::{self, Plan, Refreshed, file::SavedPlan, render};
use crate::stack::Stack;
use crate::state::State;
use crate::state::backend::{Backend, StateLock};
use crate::value::Value;

#[derive(Args)]
#[command(
    after_help = "Exit codes: 0 success (with --detailed-exitcode: no changes), 1 error, 2 changes present (only with --detailed-exitcode)."
)]
pub struct PlanArgs {
    /// The stack file
    stack: PathBuf,
    /// Save the plan; `gpustack apply FILE` then applies exactly it
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Exit 2 when there are changes, 0 when there are none, 1 on error
    #[arg(long)]
    detailed_exitcode: bool,
    /// Plan only this resource and what it depends on (repeatable)
    #[arg(long = "target", value_name = "ADDRESS")]
    targets: Vec<String>,
    /// Read AWS before planning; --refresh=false plans from state alone, with no AWS call and
    /// no credentials (GPU rules from the embedded instance catalog, no quota check, Capacity
    /// Blocks unpriced, instance costs from the price snapshot embedded in the binary)
    #[arg(long, num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", action = ArgAction::Set)]
    refresh: bool,
    /// Plan the destruction of everything in state
    #[arg(long)]
    destroy: bool,
    /// Skip the EC2 quota check (for accounts that deny the Service Quotas API)
    #[arg(long)]
    skip_quota_check: bool,
    /// Allow a plan that creates a HyperPod cluster (or buys its training plan) in the same
    /// apply as its EKS cluster; without it that is an error, since HyperPod's dependencies
    /// chart must be installed in between
    #[arg(long)]
    hyperpod_chart_installed: bool,
    #[command(flatten)]
    vars: VarArgs,
}

/// Everything apply needs after planning; holds the state lock.
pub struct Prepared {
    pub stack: Arc<Stack>,
    pub backend: Arc<Backend>,
    /// How a command line names this state (`--stack s.toml`), for advice.
    pub which: String,
    pub state: Option<State>,
    pub refreshed: Refreshed,
    pub plan: Plan,
    pub ctx: Ctx,
    pub lock: StateLock,
}

pub enum Prep {
    Ready(Box<Prepared>),
    Exit(i32),
}

pub struct PrepareOpts<'a> {
    pub targets: &'a [String],
    pub refresh: bool,
    pub destroy: bool,
    pub command: String,
    /// How a command line names this state (see `Global::which`).
    pub which: String,
    /// apply and destroy must resolve pending operations even when asked not to refresh.
    pub resolve_pending: bool,
    /// Skip the Service Quotas preflight (for accounts where the API is denied).
    pub skip_quota_check: bool,
    /// `plan --refresh=false`: no AWS call at all (embedded catalog, no offering or quota
    /// reads). apply needs the offerings it buys, so it never plans offline.
    pub offline: bool,
    /// `--hyperpod-chart-installed`: a HyperPod cluster (or its training plan's purchase) may
    /// be planned in the same apply as its EKS cluster.
    pub hyperpod_chart_installed: bool,
}

pub async fn prepare(g: &Global, stack: Stack, o: PrepareOpts<'_>) -> Result<Prep> {
    let backend = Arc::new(Backend::open(g.location(&stack)?).await);
    let unlock = format!("gpustack force-unlock {{id}} {}", o.which);
    let lock = backend.lock(g.lock_timeout, &o.command, &unlock).await?;
    let state = backend.read().await?;
    if let Some(st) = &state
        && st.stack != stack.name
    {
        bail!(
            "the state {} belongs to stack \"{}\", not \"{}\"; pass --state for this stack's own state",
            backend.location(),
            st.stack,
            stack.name
        );
    }
    let ctx = Ctx::connect(&stack.name, &stack.region).await;
    let pending = state.as_ref().is_some_and(|s| !s.pending.is_empty());
    let refresh = o.refresh || (o.resolve_pending && pending);
    // `plan --refresh=false` makes no AWS call: the rules use the embedded catalog.
    let offline = o.offline && !refresh;
    // The reads are scheduled together, so a plan costs few dependent round trips: the refresh
    // of every kind, the instance catalog and the offering searches at once, then the quotas
    // (they need the catalog's vCPUs).
    let refreshing = async {
        if !refresh {
            return Ok(Refreshed::skipped());
        }
        if !o.refresh && !g.json {
            eprintln!("Refreshing anyway: the state has operations of an interrupted run to resolve.");
        }
        let settle = crate::settings::get().settle;
        let secs = settle.as_secs_f64();
        let on_wait = |addresses: &[String]| {
            if !g.json {
                eprintln!(
                    "{} create(s) of an interrupted run ({}) not found yet; looking again in {secs}s before creating anew.",
                    addresses.len(),
                    addresses.join(", ")
                );
            }
        };
        plan::refresh::refresh_settled(&ctx, &stack, state.as_ref(), settle, &on_wait).await
    };
    let checking = async {
        if o.destroy || offline {
            return Ok(None);
        }
        live_reads(&ctx, &stack, state.as_ref(), o.skip_quota_check).await.map(Some)
    };
    let (refreshed, mut reads) = tokio::try_join!(refreshing, checking)?;
    // Subnets and reservations the stack does not define, read once refresh knows the ids
    // of its `existing` objects: their zones, routes and endpoints feed the network rules.
    if let Some(r) = reads.as_mut()
        && !refreshed.skipped
    {
        let existing = refreshed
            .existing
            .iter()
            .filter_map(|(a, rec)| {
                Some((a.clone(), (rec.as_ref().ok()?.id.clone(), rec.as_ref().ok()?.outputs.clone())))
            })
            .collect();
        let outside = crate::rules::outside::read(&ctx, &stack, &existing).await?;
        r.quotas.extend(crate::rules::network_online(&stack, &outside));
    }
    let opts = plan::Options { destroy: o.destroy, targets: o.targets };
    match plan::diff(&stack, state.as_ref(), &refreshed, &opts) {
        Ok(mut plan) => {
            if !o.destroy
                && !checks(g, &ctx, &stack, &mut plan, reads, o.skip_quota_check, o.hyperpod_chart_installed).await?
            {
                return Ok(Prep::Exit(1));
            }
            Ok(Prep::Ready(Box::new(Prepared {
                stack: Arc::new(stack),
                backend,
                which: o.which,
                state,
                refreshed,
                plan,
                ctx,
                lock,
            })))
        }
        Err(mut diags) => {
            // A refusal of the diff (prevent_destroy, an unknown target) does not hide the
            // GPU rules' and quotas' errors, which need no plan: one run shows them all.
            if !o.destroy {
                diags.extend(rule_errors(&stack, reads));
                diags.sort_by_key(|d| d.span.as_ref().map_or(0, |s| s.start));
            }
            for d in &diags {
                eprint!("{}", stack.source.render(d, g.color()));
            }
            Ok(Prep::Exit(1))
        }
    }
}

/// The errors of the checks that need no plan: the instance-catalog rules (EC2's catalog, or
/// the embedded one offline) and the quotas the reads found.
fn rule_errors(stack: &Stack, reads: Option<LiveReads>) -> Vec<crate::stack::Diagnostic> {
    let found = match reads {
        Some(r) => r.preflight.diags.into_iter().chain(r.quotas).collect(),
        None => crate::rules::preflight_offline(stack).diags,
    };
    found.into_iter().filter(|d| d.is_error()).collect()
}

/// What the GPU rules, the price and the quota check read from AWS, read before the plan
/// is known so that it overlaps the refresh.
struct LiveReads {
    preflight: crate::rules::Preflight,
    quotas: Vec<crate::stack::Diagnostic>,
    offers: crate::plan::purchase::Offers,
    /// The prices of the stack's instance types, for the plan's cost.
    prices: crate::price::PriceBook,
}

async fn live_reads(ctx: &Ctx, stack: &Stack, state: Option<&State>, skip_quota: bool) -> Result<LiveReads> {
    let catalog_then_quotas = async {
        let pf =
            crate::rules::preflight(ctx, stack).await.context("reading the instance catalog for the GPU checks")?;
        let mut quotas =
            if skip_quota { vec![] } else { crate::quota::check(ctx, stack).await.context("checking quotas")? };
        // A bought training plan's zone against its HyperPod cluster's subnets.
        quotas.extend(
            crate::plan::purchase::bought_plan_zones(ctx, stack, state)
                .await
                .context("reading the zones of HyperPod subnets")?,
        );
        anyhow::Ok((pf, quotas))
    };
    // A block the state already holds is not bought again: no search for it; nor for one
    // the stack imports (an import never buys: `diff::import_change`).
    let known =
        |address: &str| state.is_some_and(|s| s.resources.contains_key(address)) || stack.import_of(address).is_some();
    let offers = async {
        crate::plan::purchase::prefetch_offers(ctx, stack, &known).await.context("searching offerings to buy")
    };
    // Prices are read beside the rest (one batch, no extra round trip); a refused read leaves
    // its prices unpriced and is said in the plan, it does not stop it.
    let prices = async {
        let types = crate::plan::cost::instance_types(stack);
        let types: Vec<&str> = types.iter().map(String::as_str).collect();
        let book = crate::price::PriceBook::live(ctx, &stack.region, &types).await;
        anyhow::Ok(book.unwrap_or_else(|e| crate::price::PriceBook::none(format!("no prices ({e:#})"))))
    };
    let ((preflight, quotas), offers, prices) = tokio::try_join!(catalog_then_quotas, offers, prices)?;
    Ok(LiveReads { preflight, quotas, offers, prices })
}

/// The GPU rules that need the instance catalog, before anything changes: errors stop
/// here (false); warnings join the plan's; notes say what the catalog made of a resource.
/// Without `reads` (offline) the rules use the embedded catalog, blocks are shown unpriced
/// and the quota check is skipped with a note.
async fn checks(
    g: &Global,
    ctx: &Ctx,
    stack: &Stack,
    plan: &mut Plan,
    reads: Option<LiveReads>,
    skip_quota: bool,
    chart_installed: bool,
) -> Result<bool> {
    let prices =
        reads.as_ref().map_or_else(|| crate::price::PriceBook::embedded_for(&stack.region), |r| r.prices.clone());
    let pf = match reads {
        Some(r) => {
            let mut pf = r.preflight;
            if !pf.diags.iter().any(|d| d.is_error()) {
                pf.diags.extend(
                    crate::plan::purchase::price(ctx, stack, plan, &r.offers)
                        .await
                        .context("searching offerings to buy")?,
                );
            }
            pf.diags.extend(r.quotas);
            pf
        }
        None => {
            let pf = crate::rules::preflight_offline(stack);
            if !pf.diags.iter().any(|d| d.is_error()) {
                crate::plan::purchase::price_offline(stack, plan);
            }
            let counted = ["node_group", "capacity_reservation", "capacity_block", "hyperpod_cluster", "training_plan"];
            if !skip_quota && stack.resources.iter().any(|r| counted.contains(&r.kind.name())) {
                eprintln!(
                    "note: EC2 quotas not checked (--refresh=false makes no AWS call); a refreshing plan checks them"
                );
            }
            pf
        }
    };
    let mut pf = pf;
    // A cluster this plan creates (or replaces) must be on a version EKS still creates; one
    // that exists is left alone, as EKS upgrades it itself. A node group this plan creates or
    // changes needs an AMI for its cluster's version.
    let creates = |a: &str| plan.changes.iter().any(|c| c.address == a && c.action.creates());
    let changes = |a: &str| plan.changes.iter().any(|c| c.address == a && !c.action.is_removal());
    pf.diags.extend(crate::rules::cluster_versions(stack, &creates, &changes));
    if !chart_installed {
        pf.diags.extend(hyperpod_same_apply(stack, plan));
    }
    let errors = pf.diags.iter().filter(|d| d.is_error()).count();
    if errors > 0 {
        refuse(g, stack, &pf.diags);
        if !g.json {
            eprintln!(
                "The plan stopped at the checks above (GPU rules, capacity prices, quotas): nothing was changed or bought."
            );
        }
        return Ok(false);
    }
    for d in &pf.diags {
        plan.warnings.push(format!("{}: {}", stack.source.location(&d.span), d.message));
    }
    for c in plan.changes.iter_mut().filter(|c| c.note.is_none() && !c.action.is_removal()) {
        // HyperPod's note is about its creation (the dependencies chart goes first).
        if c.kind == "hyperpod_cluster" && c.action != crate::plan::Action::Create {
            continue;
        }
        c.note = pf.notes.get(&c.address).cloned();
    }
    plan.warnings.extend(pool_drift(plan));
    plan.cost = Some(crate::plan::cost::estimate(stack, plan, &prices));
    Ok(true)
}

/// A change that drifts the running nodes of a Karpenter or Auto Mode pool in state
/// (karpenter_pool::drift; Auto Mode's NodePool is Karpenter's).
fn pool_drift(plan: &Plan) -> Vec<String> {
    let pools = plan.changes.iter().filter(|c| matches!(c.kind, "karpenter_pool" | "auto_mode_pool") && c.id.is_some());
    pools
        .filter_map(|c| {
            let changed: Vec<(&str, Option<&crate::value::Value>)> =
                c.fields.iter().map(|f| (f.path.as_str(), f.new.as_ref())).collect();
            crate::resources::karpenter_pool::drift::warning(&c.address, &c.old_inputs, &changed)
        })
        .collect()
}

/// A HyperPod cluster created, or its training plan bought, by the same apply that creates
/// its EKS cluster: an error (unless `--hyperpod-chart-installed`). HyperPod's dependencies
/// chart must be in the EKS cluster before the HyperPod cluster is created ("This Helm
/// installation step is required … Failure to configure your Amazon EKS cluster using the
/// provided Helm chart might result in the SageMaker HyperPod cluster not functioning
/// correctly or the creation process failing entirely", SageMaker DG
/// `sagemaker-hyperpod-eks-install-packages-using-helm-chart`), one apply leaves no moment
/// to install it, and a training plan "cannot be modified once purchased" (DG
/// `reserve-capacity-with-training-plans`): its window would run while the cluster fails.
fn hyperpod_same_apply(stack: &Stack, plan: &Plan) -> Vec<crate::stack::Diagnostic> {
    let action = |a: &str| plan.changes.iter().find(|c| c.address == a).map(|c| &c.action);
    let created = |a: &str| action(a) == Some(&crate::plan::Action::Create);
    let mut out = vec![];
    for c in crate::rules::hyperpod::clusters(stack) {
        let Some(eks) = c.attrs.get("eks_cluster").and_then(|e| e.as_single_ref()) else { continue };
        if !created(&eks.address) {
            continue;
        }
        let bought: Vec<String> = crate::rules::hyperpod::plans_of(stack, c)
            .into_iter()
            .filter(|p| matches!(action(&p.address), Some(crate::plan::Action::Purchase(_))))
            .map(|p| format!("`{}`", p.address))
            .collect();
        if !created(&c.address) && bought.is_empty() {
            continue;
        }
        let what = match (created(&c.address), bought.is_empty()) {
            (true, true) => format!("`{}` would be created", c.address),
            (true, false) => format!("`{}` would be created and {} bought", c.address, bought.join(", ")),
            _ => format!("{} would be bought for `{}`", bought.join(", "), c.address),
        };
        out.push(
            crate::stack::Diagnostic::error(
                format!(
                    "{what} by the same apply that creates its EKS cluster `{}`: HyperPod's dependencies chart must be installed in the EKS cluster before the HyperPod cluster is created, and one apply leaves no moment to install it",
                    eks.address
                ),
                c.span.clone(),
            )
            .help(format!(
                "apply with --target {} first, install the chart (gpustack manifests --out DIR; see DIR/hyperpod-dependencies/values.yaml), then apply the rest; --hyperpod-chart-installed skips this check",
                eks.address
            )),
        );
    }
    out
}

/// Diagnostics that stop a command: `{"valid": false, "diagnostics": […]}` on stdout with
/// `--json`, else rendered with their source lines on stderr.
pub fn refuse(g: &Global, stack: &Stack, diags: &[crate::stack::Diagnostic]) {
    if g.json {
        let json: Vec<_> = diags.iter().map(|x| stack.source.to_json(x)).collect();
        // A closed stdout ends quietly (the caller exits 1 anyway).
        let _ = outln!("{}", serde_json::json!({"valid": false, "diagnostics": json}));
    } else {
        for d in diags {
            eprint!("{}", stack.source.render(d, g.color()));
        }
    }
}

pub fn header(verb: &str, p: &Prepared) -> String {
    let serial = match &p.state {
        Some(s) => format!("state serial {}", s.serial),
        None => "no state yet".to_string(),
    };
    format!("gpustack {verb} {} — stack {} ({}), {serial}", p.stack.source.path.display(), p.stack.name, p.stack.region)
}

pub async fn run(g: &Global, a: PlanArgs) -> Result<i32> {
    // Planning holds the state lock (through a refresh that can take minutes): a signal
    // releases it and exits, rather than the default kill that leaves an S3 lock behind.
    super::interrupt::on_interrupt(super::interrupt::First::Exit);
    let refreshing = a.refresh && !a.destroy;
    let Some(stack) = super::load_stack_for(g, &a.stack, &a.vars, refreshing) else { return Ok(1) };
    let command = format!("gpustack plan {}", a.stack.display());
    let opts = PrepareOpts {
        targets: &a.targets,
        refresh: a.refresh,
        destroy: a.destroy,
        command,
        which: g.which(&a.stack, &a.vars.vars),
        resolve_pending: false,
        skip_quota_check: a.skip_quota_check,
        offline: !a.refresh,
        hyperpod_chart_installed: a.hyperpod_chart_installed,
    };
    let p = match prepare(g, stack, opts).await? {
        Prep::Ready(p) => p,
        Prep::Exit(code) => return Ok(code),
    };
    if g.json {
        outln!("{}", serde_json::to_string_pretty(&plan::to_json(&p.plan))?)?;
    } else {
        out!("{}", render::render(&p.plan, &header("plan", &p), &render::Style { color: g.color_stdout() }))?;
    }
    if let Some(out) = &a.out {
        let saved = SavedPlan {
            gpustack_plan: 1,
            stack_file: a.stack.display().to_string(),
            source: p.stack.source.text.clone(),
            vars: p.stack.vars.iter().map(|(k, v)| (k.clone(), var_text(v))).collect(),
            targets: a.targets.clone(),
            destroy: a.destroy,
            lineage: p.plan.lineage.clone(),
            serial: p.plan.serial,
            fingerprint: plan::fingerprint(&p.plan),
            summary: render::summary(&p.plan),
        };
        plan::file::write(out, &saved)?;
        if !g.json {
            outln!("\nSaved the plan to {}. Apply exactly it with: gpustack apply {}", out.display(), out.display())?;
        }
    }
    Ok(if a.detailed_exitcode && p.plan.changes_anything() { 2 } else { 0 })
}

/// A variable's value as `--var` would give it.
fn var_text(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        Value::List(_) | Value::Table(_) => v.to_json().to_string(),
        other => other.to_string(),
    }
}
