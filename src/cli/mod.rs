//! The command line: global flags, commands, and the plumbing they share
//! (loading a stack, finding and locking state, asking for approval).

mod apply;
mod capacity;
mod import;
mod interrupt;
mod kubeconfig;
mod manifests;
mod plan;
mod state;
mod status;
mod stdout;
mod timeline;

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::stack::{Stack, VarSources};
use crate::state::backend::Location;
use crate::state::s3::S3Location;
use stdout::{out, outln};

const ABOUT: &str = "Provision GPU-ready Amazon EKS environments from a declarative TOML stack file.

Typical use:
  gpustack validate examples/training.toml   check the file, offline
  gpustack plan examples/training.toml       show what would change
  gpustack apply examples/training.toml      make it so (asks first)
  gpustack destroy examples/training.toml    remove everything the stack created

AWS credentials and endpoints come from the SDK's standard chain (AWS_PROFILE,
AWS_ACCESS_KEY_ID…, AWS_ENDPOINT_URL); the stack's region is used for every call.";

#[derive(Parser)]
#[command(name = "gpustack", version, about = ABOUT, max_term_width = 100)]
pub struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
pub struct Global {
    /// Where state is: a file PATH or s3://BUCKET/KEY (default: the stack's [stack.backend],
    /// else state/<stack-name>.json under the current directory)
    #[arg(long, global = true, value_name = "PATH|S3URL")]
    state: Option<String>,
    /// How long to wait for a state lock held by another run, e.g. 30s or 5m (default: fail at
    /// once); an S3 lock is polled with backoff
    #[arg(long, global = true, value_name = "DURATION", value_parser = parse_duration, default_value = "0s")]
    lock_timeout: Duration,
    /// No colours (also when NO_COLOR is set or output is not a terminal)
    #[arg(long, global = true)]
    no_color: bool,
    /// Machine-readable JSON on stdout
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Args, Clone, Default)]
pub struct VarArgs {
    /// Set a variable: --var env=pr-42 (beats GPUSTACK_VAR_env, which beats [vars])
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    vars: Vec<(String, String)>,
}

#[derive(Subcommand)]
enum Command {
    /// Check a stack file offline: syntax, keys, types, references, cycles
    Validate {
        /// The stack file (TOML)
        stack: PathBuf,
        #[command(flatten)]
        vars: VarArgs,
    },
    /// Print the resource graph (edges point to what a resource depends on)
    Graph {
        /// The stack file (TOML)
        stack: PathBuf,
        /// dot (Graphviz: `| dot -Tsvg`) or mermaid (Markdown)
        #[arg(long, value_enum, default_value = "dot")]
        format: crate::graph::Format,
        #[command(flatten)]
        vars: VarArgs,
    },
    /// Show what apply would change
    Plan(plan::PlanArgs),
    /// Print the least-privilege IAM policy (JSON) a deploy role needs to plan, apply and
    /// destroy this stack: the actions of its kinds, scoped to its region, its
    /// gpustack:stack tag and its role path. Offline: reads the stack file only
    Policy {
        /// The stack file (TOML)
        #[arg(required_unless_present = "for_what")]
        stack: Option<PathBuf>,
        /// Instead of a stack's policy, the read-only policy of a command group: `capacity`
        /// (capacity find and the other capacity commands)
        #[arg(
            long = "for",
            id = "for_what",
            value_name = "GROUP",
            value_enum,
            hide_possible_values = true,
            conflicts_with = "stack"
        )]
        for_what: Option<crate::policy::PolicyFor>,
        #[command(flatten)]
        vars: VarArgs,
    },
    /// Create or update everything in the stack (or apply a saved plan file)
    Apply(apply::ApplyArgs),
    /// Delete everything the stack created
    Destroy(apply::DestroyArgs),
    /// Inspect, pull, push or migrate state
    #[command(subcommand)]
    State(state::StateCommand),
    /// Print the stack's outputs, saved at the last apply
    Output(state::OutputArgs),
    /// Write the Kubernetes YAML of the stack's rendered kinds (Karpenter pools, priority
    /// classes, device-plugin values) with the ids from state
    Manifests(manifests::ManifestsArgs),
    /// Add a cluster of the stack to your kubeconfig (credentials from `aws eks get-token`)
    Kubeconfig(kubeconfig::KubeconfigArgs),
    /// Find GPU capacity and what it costs, across regions: Capacity Blocks, training plans,
    /// Spot and On-Demand (`capacity find`); draw a stack's reservations over time
    /// (`capacity timeline`)
    #[command(subcommand)]
    Capacity(capacity::CapacityCommand),
    /// Bring existing AWS objects under gpustack: `import generate` writes a stack file for a
    /// live EKS cluster
    #[command(subcommand)]
    Import(import::ImportCommand),
    /// Free the S3 state lock left by a dead run (only the lock with LOCK_ID), or show who
    /// holds the lock
    ForceUnlock(state::UnlockArgs),
    /// Live use of what the stack reserved: ODCR used/total and idle cost per hour, time left
    /// on each block and plan, node groups' desired/ready and health. Exit 3 when reserved
    /// capacity sits idle
    Status(status::StatusArgs),
}

pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 1 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    if let Err(e) = crate::settings::init_from_env() {
        eprintln!("error: {e}");
        return 1;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return 1;
        }
    };
    let g = cli.global.clone();
    let color = g.color();
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Validate { stack, vars } => validate(&g, &stack, &vars),
            Command::Graph { stack, format, vars } => graph(&g, &stack, format, &vars),
            Command::Policy { stack, for_what, vars } => policy(&g, stack.as_deref(), for_what, &vars),
            Command::Plan(a) => plan::run(&g, a).await,
            Command::Apply(a) => apply::apply(&g, a).await,
            Command::Destroy(a) => apply::destroy(&g, a).await,
            Command::State(c) => state::run(&g, c).await,
            Command::Output(a) => state::output(&g, a).await,
            Command::ForceUnlock(a) => state::force_unlock(&g, a).await,
            Command::Kubeconfig(a) => kubeconfig::run(&g, a).await,
            Command::Manifests(a) => manifests::run(&g, a).await,
            Command::Capacity(c) => capacity::run(&g, c).await,
            Command::Status(a) => status::run(&g, a).await,
            Command::Import(c) => import::run(&g, c).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            let label = if color { "\x1b[1;31merror\x1b[0m" } else { "error" };
            eprintln!("{label}: {e:#}");
            1
        }
    }
}

impl Global {
    pub fn color(&self) -> bool {
        !self.no_color && std::env::var_os("NO_COLOR").is_none() && std::io::stderr().is_terminal()
    }

    pub fn color_stdout(&self) -> bool {
        !self.no_color && std::env::var_os("NO_COLOR").is_none() && std::io::stdout().is_terminal()
    }

    /// Where the stack's state is: `--state`, else `[stack.backend]`, else
    /// `state/<stack>.json` under the current directory.
    pub fn location(&self, stack: &Stack) -> anyhow::Result<Location> {
        let region = stack.backend.as_ref().and_then(|b| b.region.clone()).unwrap_or_else(|| stack.region.clone());
        if let Some(s) = &self.state {
            return Location::parse(s, || Some(region));
        }
        Ok(match &stack.backend {
            Some(b) => Location::S3(S3Location { bucket: b.bucket.clone(), key: b.key.clone(), region }),
            None => Location::Local(PathBuf::from("state").join(format!("{}.json", stack.name))),
        })
    }

    /// How a command line names this state again (in advice such as the force-unlock
    /// command): `--state …`, or `--stack FILE` with the `--var`s that shape it.
    pub fn which(&self, stack_file: &Path, vars: &[(String, String)]) -> String {
        if let Some(s) = &self.state {
            return format!("--state {s}");
        }
        let mut w = format!("--stack {}", stack_file.display());
        for (k, v) in vars {
            w.push_str(&format!(" --var {k}={v}"));
        }
        w
    }
}

/// `--state` alone, for a command run without a stack file. An S3 URL's region comes
/// from the environment (AWS_REGION), as the stack that would name it is not at hand.
fn location_without_stack(g: &Global) -> anyhow::Result<Option<Location>> {
    let Some(s) = &g.state else { return Ok(None) };
    let env_region = || std::env::var("AWS_REGION").or_else(|_| std::env::var("AWS_DEFAULT_REGION")).ok();
    Location::parse(s, env_region).map(Some)
}

/// Loads a stack, printing warnings; on errors prints them and returns `None`.
pub fn load_stack(g: &Global, path: &Path, vars: &VarArgs) -> Option<Stack> {
    load_stack_for(g, path, vars, false)
}

/// [`load_stack`] for a command that reads AWS before planning (`refreshing`): the notes of
/// what the network rules could not check offline are left out, as the plan checks it.
pub fn load_stack_for(g: &Global, path: &Path, vars: &VarArgs, refreshing: bool) -> Option<Stack> {
    let sources = VarSources::process_env(&vars.vars);
    match crate::load::load(path, &sources) {
        Ok(s) => {
            for w in s.warnings.iter().filter(|w| !(refreshing && crate::rules::outside::is_offline_note(w))) {
                eprint!("{}", s.source.render(w, g.color()));
            }
            Some(s)
        }
        Err(d) => {
            if g.json {
                let items: Vec<_> = d.items.iter().map(|x| d.source.to_json(x)).collect();
                // The command fails either way; a stdout that cannot take the report changes nothing.
                let _ = outln!("{}", serde_json::json!({"valid": false, "diagnostics": items}));
            } else {
                eprint!("{}", d.render(g.color()));
            }
            None
        }
    }
}

fn validate(g: &Global, path: &Path, vars: &VarArgs) -> anyhow::Result<i32> {
    let Some(s) = load_stack(g, path, vars) else { return Ok(1) };
    // The GPU rules too, from the embedded instance catalog (no AWS call), and the
    // Kubernetes version EKS creates clusters on (and node AMIs for): validate reads the
    // file as a new stack.
    let mut catalog = crate::rules::preflight_offline(&s).diags;
    catalog.extend(crate::rules::cluster_versions(&s, &|_| true, &|_| true));
    if catalog.iter().any(|d| d.is_error()) {
        plan::refuse(g, &s, &catalog);
        return Ok(1);
    }
    if !g.json {
        for w in &catalog {
            eprint!("{}", s.source.render(w, g.color()));
        }
    }
    if g.json {
        let items: Vec<_> = s.warnings.iter().chain(&catalog).map(|x| s.source.to_json(x)).collect();
        outln!(
            "{}",
            serde_json::json!({"valid": true, "stack": s.name, "resources": s.resources.len(), "diagnostics": items})
        )?;
    } else {
        outln!(
            "{} is valid: stack {} ({}), {} resource{}.",
            path.display(),
            s.name,
            s.region,
            s.resources.len(),
            crate::stack::diag::plural(s.resources.len())
        )?;
    }
    Ok(0)
}

fn graph(g: &Global, path: &Path, format: crate::graph::Format, vars: &VarArgs) -> anyhow::Result<i32> {
    let Some(s) = load_stack(g, path, vars) else { return Ok(1) };
    out!("{}", crate::graph::render(&s, format))?;
    Ok(0)
}

fn policy(
    g: &Global,
    path: Option<&Path>,
    for_what: Option<crate::policy::PolicyFor>,
    vars: &VarArgs,
) -> anyhow::Result<i32> {
    if let Some(f) = for_what {
        outln!("{}", serde_json::to_string_pretty(&crate::policy::command_document(f))?)?;
        return Ok(0);
    }
    let Some(path) = path else { anyhow::bail!("give a stack file, or --for capacity") };
    let Some(s) = load_stack(g, path, vars) else { return Ok(1) };
    outln!("{}", serde_json::to_string_pretty(&crate::policy::document(&s))?)?;
    Ok(0)
}

/// Asks on the terminal; only the exact `expected` answer approves.
pub fn confirm(question: &str, expected: &str) -> anyhow::Result<bool> {
    eprint!("{question}\n  Only '{expected}' will be accepted: ");
    std::io::stderr().flush()?;
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    Ok(line.trim() == expected)
}

pub fn stdin_is_terminal() -> bool {
    std::io::stdin().is_terminal()
}

fn parse_var(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("`{s}` is not NAME=VALUE")),
    }
}

/// The longest `--lock-timeout`: waiting a week for a lock is a typo, and a larger value
/// would overflow the deadline's clock arithmetic.
const MAX_LOCK_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);

/// `500ms`, `30s`, `5m`, `1h`, or a bare number of seconds; from 0 to [`MAX_LOCK_TIMEOUT`].
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let not_a_duration = || format!("`{s}` is not a duration; write e.g. 30s, 5m or 1h");
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(s.len()));
    let n: f64 = num.parse().map_err(|_| not_a_duration())?;
    let secs = match unit {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(not_a_duration()),
    };
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if d <= MAX_LOCK_TIMEOUT => Ok(d),
        _ => Err(format!("`{s}` is too long; the longest wait for a lock is 168h (a week)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_vars_parse() {
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_duration("five").is_err());
        assert_eq!(parse_duration("168h").unwrap(), MAX_LOCK_TIMEOUT);
        for absurd in ["99999999999999999999h", "169h", "1e400", "inf", "NaN", "-1s", ".", "1.2.3s", ""] {
            assert!(parse_duration(absurd).is_err(), "{absurd}");
        }
        assert_eq!(parse_var("env=pr-42=x").unwrap(), ("env".into(), "pr-42=x".into()));
        assert!(parse_var("=x").is_err());
    }

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
