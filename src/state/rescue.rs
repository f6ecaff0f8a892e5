//! The rescue file: when a state write is refused because the stored state changed
//! behind this run's back, the run's own state is kept locally instead, as
//! `gpustack-rescue-<stack>-<serial>.json` in the working directory (mode 0600), so
//! nothing it recorded is lost and nothing stored is overwritten.

use std::path::PathBuf;

use anyhow::Result;

use super::local;

pub fn path(stack: &str, serial: u64) -> PathBuf {
    PathBuf::from(format!("gpustack-rescue-{stack}-{serial}.json"))
}

/// Writes (or rewrites, as the run goes on) the rescue file.
pub fn write(stack: &str, serial: u64, bytes: &[u8]) -> Result<PathBuf> {
    let p = path(stack, serial);
    local::write_atomic(&p, bytes)?;
    Ok(p)
}

/// What the operator reads: where the rescue is, how to compare it with what is stored,
/// and how to push it once they know which is right.
pub fn advice(file: &std::path::Path, which: &str) -> String {
    let f = file.display();
    format!(
        "this run's state is saved in {f}\n  \
         help: compare it with the stored state: gpustack state pull {which} > stored.json && diff stored.json {f}\n  \
         help: then keep the right one: gpustack state push {f} {which} (it names the reason if it refuses; add --force once you are sure)"
    )
}
