//! Saved plans (`plan --out FILE`): the stack file's text and variables, the
//! state's lineage and serial it was made against, and a fingerprint of its
//! changes. `apply FILE` re-plans from exactly that input and refuses when the
//! state moved on or the result differs.

use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

pub const MAGIC: &str = "gpustack_plan";

#[derive(Serialize, Deserialize)]
pub struct SavedPlan {
    pub gpustack_plan: u32,
    pub stack_file: String,
    pub source: String,
    pub vars: Vec<(String, String)>,
    pub targets: Vec<String>,
    pub destroy: bool,
    pub lineage: Option<String>,
    pub serial: u64,
    pub fingerprint: String,
    pub summary: String,
}

/// True when the file at `path` is a saved plan rather than a stack file.
pub fn is_plan_file(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|b| {
        let head = String::from_utf8_lossy(&b[..b.len().min(64)]).to_string();
        head.trim_start().starts_with('{') && head.contains(MAGIC)
    })
}

pub fn write(path: &Path, plan: &SavedPlan) -> Result<()> {
    let mut bytes = serde_json::to_vec_pretty(plan)?;
    bytes.push(b'\n');
    crate::state::local::write_atomic(path, &bytes)
}

pub fn read(path: &Path) -> Result<SavedPlan> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read the plan file {}", path.display()))?;
    let p: SavedPlan =
        serde_json::from_str(&text).with_context(|| format!("{} is not a gpustack plan file", path.display()))?;
    if p.gpustack_plan != 1 {
        bail!("{} was written by a newer gpustack (plan format {}); use that version", path.display(), p.gpustack_plan);
    }
    Ok(p)
}
