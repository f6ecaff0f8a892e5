//! Commands that read state: `state list`, `state show`, `output`, and `force-unlock`.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use super::{Global, VarArgs, load_stack};
use crate::state::{State, local};
use crate::value::Value;

#[derive(Args)]
pub struct Which {
    /// Find the state from this stack file's name (or pass --state PATH)
    #[arg(long, value_name = "FILE")]
    stack: Option<PathBuf>,
    #[command(flatten)]
    vars: VarArgs,
}

#[derive(Subcommand)]
pub enum StateCommand {
    /// List the addresses in state with their kind and id
    List(Which),
    /// Show one resource's recorded inputs and outputs
    Show {
        address: String,
        #[command(flatten)]
        which: Which,
    },
}

#[derive(Args)]
pub struct OutputArgs {
    /// Print only this output's value (strings unquoted)
    name: Option<String>,
    #[command(flatten)]
    which: Which,
}

#[derive(Args)]
pub struct UnlockArgs {
    #[command(flatten)]
    which: Which,
}

fn state_path(g: &Global, w: &Which) -> Result<Option<PathBuf>> {
    if let Some(p) = &g.state {
        return Ok(Some(p.clone()));
    }
    let Some(file) = &w.stack else {
        bail!("say which state to read: --state PATH, or --stack FILE to use the stack's default state/<name>.json");
    };
    Ok(load_stack(g, file, &w.vars).map(|s| g.state_path(&s.name)))
}

fn read(g: &Global, w: &Which) -> Result<Option<State>> {
    let Some(path) = state_path(g, w)? else { return Ok(None) };
    let st =
        local::read(&path)?.with_context(|| format!("no state at {}: nothing has been applied yet", path.display()))?;
    Ok(Some(st))
}

pub fn run(g: &Global, c: StateCommand) -> Result<i32> {
    match c {
        StateCommand::List(w) => {
            let Some(st) = read(g, &w)? else { return Ok(1) };
            if g.json {
                let items: Vec<_> = st
                    .resources
                    .iter()
                    .map(|(a, e)| serde_json::json!({"address": a, "kind": e.kind, "id": e.id}))
                    .collect();
                println!("{}", serde_json::to_string_pretty(&items)?);
            } else {
                for (a, e) in &st.resources {
                    println!("{a:<40} {}", e.id);
                }
            }
            Ok(0)
        }
        StateCommand::Show { address, which } => {
            let Some(st) = read(g, &which)? else { return Ok(1) };
            let Some(e) = st.resources.get(&address) else {
                let hint = crate::stack::diag::closest(&address, st.resources.keys().map(String::as_str))
                    .map_or(String::new(), |c| format!(" (did you mean {c}?)"));
                bail!("{address} is not in state{hint}; `gpustack state list` shows what is");
            };
            println!("{}", serde_json::to_string_pretty(e)?);
            Ok(0)
        }
    }
}

pub fn output(g: &Global, a: OutputArgs) -> Result<i32> {
    let Some(st) = read(g, &a.which)? else { return Ok(1) };
    match &a.name {
        Some(n) => {
            let Some(v) = st.outputs.get(n) else {
                bail!("no output named `{n}`; outputs: {}", st.outputs.keys().cloned().collect::<Vec<_>>().join(", "));
            };
            match (g.json, v) {
                (false, serde_json::Value::String(s)) => println!("{s}"),
                _ => println!("{v}"),
            }
        }
        None if g.json => println!("{}", serde_json::to_string_pretty(&st.outputs)?),
        None => {
            for (k, v) in &st.outputs {
                println!("{k} = {}", Value::from_json(v));
            }
        }
    }
    Ok(0)
}

/// Local locks are OS file locks, released when their holder exits, so a lock is only
/// ever held by a live process; this command names it instead of breaking it.
pub fn force_unlock(g: &Global, a: UnlockArgs) -> Result<i32> {
    let Some(path) = state_path(g, &a.which)? else { return Ok(1) };
    match local::holder(&path)? {
        None => {
            println!("{} is not locked.", path.display());
            Ok(0)
        }
        Some(h) => {
            eprintln!(
                "error: {} is locked by {h}.\n  A local lock is held by a running process and is released the moment it exits (even on kill -9),\n  so it cannot be stale. Stop that process (kill {}) if it is stuck; breaking the lock under it could corrupt state.",
                path.display(),
                h.pid
            );
            Ok(1)
        }
    }
}
