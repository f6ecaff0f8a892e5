//! Commands on state outside a plan: `state list|show|pull|push|migrate`, `output`,
//! and `force-unlock`. They find the state like plan does (`--state`, else the stack
//! file's `[stack.backend]`, else its default local file) and go through the backend,
//! so each works the same on a local file and on S3.

use super::stdout::outln;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use super::{Global, VarArgs, load_stack, location_without_stack};
use crate::state::backend::{Backend, Holder, Location};
use crate::state::s3::lock::Unlocked;
use crate::state::{State, local};
use crate::value::Value;

#[derive(Args)]
pub struct Which {
    /// Find the state through this stack file ([stack.backend], or state/<name>.json); or pass --state
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
        /// The resource's address, as `state list` prints it (security_group.efa)
        address: String,
        #[command(flatten)]
        which: Which,
    },
    /// Print the stored state JSON on stdout (e.g. to back it up or diff it with a rescue file)
    Pull(Which),
    /// Replace the stored state with FILE under the lock (refuses another lineage or an older
    /// serial unless --force)
    #[command(
        after_help = "A forced push of a serial not above the stored one is written with the stored serial + 1, so plans saved against the old state are refused as stale."
    )]
    Push {
        /// A state JSON file (from `state pull`, or a gpustack-rescue-*.json)
        file: PathBuf,
        /// Push even across lineages or serials (you have compared the two and FILE is right)
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        which: Which,
    },
    /// Copy the state to another backend (local file ↔ S3) under both locks, lineage and serial kept
    #[command(after_help = "Example: gpustack state migrate --stack env.toml --to s3://my-team-state/envs/dev.json
The source is left as it was. Then point the stack at the new place ([stack.backend] s3 = {...},
or remove it for a local file) and delete the old copy.")]
    Migrate {
        /// Where to copy it: s3://BUCKET/KEY or a file PATH
        #[arg(long, value_name = "S3URL|PATH")]
        to: String,
        /// Replace a different state already at the destination
        #[arg(long)]
        force: bool,
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
#[command(after_help = "Example: gpustack force-unlock 3f2a…-c1 --stack env.toml
Without LOCK_ID it shows who holds the lock and the exact command. A local lock is an OS lock
that frees itself when its holder exits, so it is never broken: stop the holder instead.")]
pub struct UnlockArgs {
    /// The lock id shown in the "is locked by …" error; only a lock with this id is deleted
    lock_id: Option<String>,
    #[command(flatten)]
    which: Which,
}

/// A state found from the command line.
struct Found {
    location: Location,
    /// How a command line names it again (`--stack s.toml`).
    which: String,
    /// The region an S3 URL given without a stack would be in: the stack's (backend) region.
    region: Option<String>,
}

/// Finds the state; `None` after printing the stack file's diagnostics.
fn locate(g: &Global, w: &Which) -> Result<Option<Found>> {
    if let Some(file) = &w.stack {
        let Some(stack) = load_stack(g, file, &w.vars) else { return Ok(None) };
        let region = stack.backend.as_ref().and_then(|b| b.region.clone()).unwrap_or_else(|| stack.region.clone());
        return Ok(Some(Found {
            location: g.location(&stack)?,
            which: g.which(file, &w.vars.vars),
            region: Some(region),
        }));
    }
    match location_without_stack(g)? {
        Some(location) => {
            let region = match &location {
                Location::S3(l) => Some(l.region.clone()),
                Location::Local(_) => None,
            };
            Ok(Some(Found { location, which: g.which(std::path::Path::new(""), &[]), region }))
        }
        None => bail!(
            "say which state: --stack FILE (its [stack.backend], or state/<name>.json), or --state PATH|s3://BUCKET/KEY"
        ),
    }
}

async fn open(g: &Global, w: &Which) -> Result<Option<(Backend, String)>> {
    let Some(f) = locate(g, w)? else { return Ok(None) };
    Ok(Some((Backend::open(f.location).await, f.which)))
}

async fn read(g: &Global, w: &Which) -> Result<Option<State>> {
    let Some((b, _)) = open(g, w).await? else { return Ok(None) };
    let st = b.read().await?.with_context(|| format!("no state at {}: nothing has been applied yet", b.location()))?;
    Ok(Some(st))
}

pub async fn run(g: &Global, c: StateCommand) -> Result<i32> {
    match c {
        StateCommand::List(w) => {
            let Some(st) = read(g, &w).await? else { return Ok(1) };
            if g.json {
                let items: Vec<_> = st
                    .resources
                    .iter()
                    .map(|(a, e)| serde_json::json!({"address": a, "kind": e.kind, "id": e.id}))
                    .collect();
                outln!("{}", serde_json::to_string_pretty(&items)?)?;
            } else {
                for (a, e) in &st.resources {
                    outln!("{a:<40} {}", e.id)?;
                }
            }
            Ok(0)
        }
        StateCommand::Show { address, which } => {
            let Some(st) = read(g, &which).await? else { return Ok(1) };
            let Some(e) = st.resources.get(&address) else {
                let hint = crate::stack::diag::closest(&address, st.resources.keys().map(String::as_str))
                    .map_or(String::new(), |c| format!(" (did you mean {c}?)"));
                bail!("{address} is not in state{hint}; `gpustack state list` shows what is");
            };
            outln!("{}", serde_json::to_string_pretty(e)?)?;
            Ok(0)
        }
        StateCommand::Pull(w) => pull(g, &w).await,
        StateCommand::Push { file, force, which } => push(g, &which, &file, force).await,
        StateCommand::Migrate { to, force, which } => migrate(g, &which, &to, force).await,
    }
}

/// Prints the stored bytes as they are, so a pull can be pushed back unchanged.
async fn pull(g: &Global, w: &Which) -> Result<i32> {
    let Some((b, _)) = open(g, w).await? else { return Ok(1) };
    let bytes =
        b.read_bytes().await?.with_context(|| format!("no state at {}: nothing has been applied yet", b.location()))?;
    local::decode(&bytes, &b.location().to_string())?;
    super::stdout::write_bytes(&bytes)?;
    Ok(0)
}

/// Why `new` may not replace `stored` without --force.
fn push_refusal(stored: &State, new: &State, same_bytes: bool) -> Option<String> {
    if stored.lineage != new.lineage {
        Some(format!(
            "it is another state's history (lineage {}, the stored state's is {})",
            new.lineage, stored.lineage
        ))
    } else if new.serial < stored.serial {
        Some(format!("its serial {} is lower than the stored {}: it is older", new.serial, stored.serial))
    } else if new.serial == stored.serial && !same_bytes {
        Some(format!("it has the stored serial {} but other content", new.serial))
    } else {
        None
    }
}

async fn push(g: &Global, w: &Which, file: &std::path::Path, force: bool) -> Result<i32> {
    let text = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let mut new = local::decode(&text, &file.display().to_string())?;
    let Some((b, which)) = open(g, w).await? else { return Ok(1) };
    super::interrupt::on_interrupt(super::interrupt::First::Finish("the state write"));
    let unlock = format!("gpustack force-unlock {{id}} {which}");
    let lock = b.lock(g.lock_timeout, &format!("gpustack state push {}", file.display()), &unlock).await?;
    let mut bytes = text;
    if let Some(stored) = b.read().await? {
        let same = serde_json::to_value(&stored)? == serde_json::to_value(&new)?;
        if same {
            outln!("{} already holds this state (serial {}); nothing to push.", b.location(), new.serial)?;
            return Ok(0);
        }
        if let Some(why) = push_refusal(&stored, &new, same) {
            if !force {
                bail!(
                    "refusing to push {} to {}: {why}\n  help: compare them (gpustack state pull {which} > stored.json), then push with --force if {} is right",
                    file.display(),
                    b.location(),
                    file.display()
                );
            }
            if new.serial <= stored.serial {
                new.serial = stored.serial + 1;
                bytes = local::encode(&new)?;
                eprintln!(
                    "--force: writing it as serial {} so plans saved against the old state are stale.",
                    new.serial
                );
            }
        }
    }
    b.write(bytes).await?;
    lock.release().await?;
    outln!("Pushed {} to {} (lineage {}, serial {}).", file.display(), b.location(), new.lineage, new.serial)?;
    Ok(0)
}

async fn migrate(g: &Global, w: &Which, to: &str, force: bool) -> Result<i32> {
    let Some(Found { location: from_loc, which, region }) = locate(g, w)? else { return Ok(1) };
    let env_region = || std::env::var("AWS_REGION").or_else(|_| std::env::var("AWS_DEFAULT_REGION")).ok();
    let to_loc = Location::parse(to, || region.or_else(env_region))?;
    if to_loc == from_loc {
        bail!("the state is already at {to_loc}; --to names where to copy it");
    }
    let (from, dest) = (Backend::open(from_loc).await, Backend::open(to_loc).await);
    let command = format!("gpustack state migrate --to {to}");
    super::interrupt::on_interrupt(super::interrupt::First::Finish("copying the state"));
    let unlock = format!("gpustack force-unlock {{id}} {which}");
    let from_lock = from.lock(g.lock_timeout, &command, &unlock).await?;
    let dest_unlock = format!("gpustack force-unlock {{id}} --state {}", dest.location());
    let dest_lock = dest.lock(g.lock_timeout, &command, &dest_unlock).await?;
    let bytes = from
        .read_bytes()
        .await?
        .with_context(|| format!("no state at {}: there is nothing to migrate", from.location()))?;
    let st = local::decode(&bytes, &from.location().to_string())?;
    if let Some(there) = dest.read().await? {
        if there.lineage == st.lineage && there.serial == st.serial {
            outln!("{} already holds this state (serial {}); nothing to copy.", dest.location(), st.serial)?;
            return Ok(0);
        }
        if !force {
            bail!(
                "{} already holds a state (lineage {}, serial {}); refusing to replace it with {}'s (lineage {}, serial {})\n  help: pick another --to, or add --force once you are sure the state there is not needed",
                dest.location(),
                there.lineage,
                there.serial,
                from.location(),
                st.lineage,
                st.serial
            );
        }
    }
    dest.write(bytes).await?;
    dest_lock.release().await?;
    from_lock.release().await?;
    outln!(
        "Copied the state (lineage {}, serial {}) from {} to {}.\nThe copy at {} is left as it was. Point the stack at {} ({}), check with `gpustack plan`, then delete the old copy.",
        st.lineage,
        st.serial,
        from.location(),
        dest.location(),
        from.location(),
        dest.location(),
        match dest.location() {
            Location::S3(l) =>
                format!("[stack.backend] s3 = {{ bucket = \"{}\", key = \"{}\" }} or --state {l}", l.bucket, l.key),
            Location::Local(p) => format!("remove [stack.backend], or pass --state {}", p.display()),
        }
    )?;
    Ok(0)
}

pub async fn output(g: &Global, a: OutputArgs) -> Result<i32> {
    let Some(st) = read(g, &a.which).await? else { return Ok(1) };
    match &a.name {
        Some(n) => {
            let Some(v) = st.outputs.get(n) else {
                bail!("no output named `{n}`; outputs: {}", st.outputs.keys().cloned().collect::<Vec<_>>().join(", "));
            };
            match (g.json, v) {
                (false, serde_json::Value::String(s)) => outln!("{s}")?,
                _ => outln!("{v}")?,
            }
        }
        None if g.json => outln!("{}", serde_json::to_string_pretty(&st.outputs)?)?,
        None => {
            for (k, v) in &st.outputs {
                outln!("{k} = {}", Value::from_json(v))?;
            }
        }
    }
    Ok(0)
}

/// An S3 lock outlives a killed holder, so it can be deleted — but only the lock with the
/// id the operator read, and only the very object read. A local lock is an OS file lock,
/// held only by a live process: this names the holder instead of breaking it.
pub async fn force_unlock(g: &Global, a: UnlockArgs) -> Result<i32> {
    let Some((b, which)) = open(g, &a.which).await? else { return Ok(1) };
    let loc = b.location();
    if let (Some(id), Backend::S3(_)) = (&a.lock_id, &b) {
        return match b.force_unlock(id).await? {
            None | Some(Unlocked::NotLocked) => {
                outln!("{loc} is not locked.")?;
                Ok(0)
            }
            Some(Unlocked::OtherId(info)) => {
                bail!("the lock on {loc} has id {}, not {id}: nothing was changed. It is held by {info}", info.id)
            }
            Some(Unlocked::Deleted(info)) => {
                outln!(
                    "Unlocked {loc} (it was held by {info}).\nIf that run was cut short, run apply again: it resolves what the run left pending."
                )?;
                Ok(0)
            }
        };
    }
    match b.holder().await? {
        Holder::None => {
            outln!("{loc} is not locked.")?;
            Ok(0)
        }
        Holder::S3(info) => {
            eprintln!(
                "error: {loc} is locked by {info}.\n  help: if that run is dead, free the lock with: gpustack force-unlock {} {which}",
                info.id
            );
            Ok(1)
        }
        Holder::Local(h) => {
            eprintln!(
                "error: {loc} is locked by {h}.\n  A local lock is held by a running process and is released the moment it exits (even on kill -9),\n  so it cannot be stale. Stop that process (kill {}) if it is stuck; breaking the lock under it could corrupt state.",
                h.pid
            );
            Ok(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_refuses_other_lineage_older_serial_and_same_serial_other_content() {
        let stored = State { serial: 5, ..State::new("s", "r") };
        let newer = State { serial: 6, ..stored.clone() };
        assert_eq!(push_refusal(&stored, &newer, false), None);
        assert!(push_refusal(&stored, &State { serial: 4, ..stored.clone() }, false).unwrap().contains("lower"));
        assert!(push_refusal(&stored, &stored, false).unwrap().contains("other content"));
        assert!(
            push_refusal(&stored, &State { serial: 9, ..State::new("s", "r") }, false).unwrap().contains("lineage")
        );
    }
}
