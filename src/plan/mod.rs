//! Plans: what apply would do, computed from the stack (desired), the state
//! (recorded) and refresh (observed). `diff` is pure: it makes no AWS call; refresh
//! results come in as [`Refreshed`], and `purchase` prices what the plan would buy.
//!
//! - `action`: the [`Action`] users see, which rendering, JSON and the engine match on.
//! - `diff`: desired against recorded and observed.
//! - `purchase`: offering search and price guard for the plan's purchases.
//! - `render` (people), `json` (pipelines), `file` (a saved plan).

mod action;
mod diff;
pub mod file;
mod json;
pub mod purchase;
pub mod refresh;
pub mod render;

pub use action::{Action, Offer, Rendering};
pub use diff::{desired_inputs, diff, field_diffs};
pub use json::to_json;
pub use refresh::Refreshed;

pub use crate::resources::offering::Purchase;
use crate::state::ResourceState;
use crate::value::{Attrs, Value};

#[derive(Clone, Debug, PartialEq)]
pub struct FieldDiff {
    pub path: String,
    pub old: Option<Value>,
    pub new: Option<Value>,
    pub forces_replace: bool,
}

#[derive(Clone, Debug)]
pub struct Change {
    pub address: String,
    pub kind: &'static str,
    pub action: Action,
    pub fields: Vec<FieldDiff>,
    /// The existing object's id (update, replace, delete, adopt).
    pub id: Option<String>,
    /// The object's inputs as they are now (update, replace, delete).
    pub old_inputs: Attrs,
    pub old_outputs: Attrs,
    /// Dependencies recorded in state (delete order for objects no longer in the stack).
    pub old_deps: Vec<String>,
    /// The state entry to record before acting, for an object found by its tags.
    pub adopt: Option<ResourceState>,
    /// Deleting an object that is not the address's current one (deposed or found by tags).
    pub stray: bool,
    pub note: Option<String>,
}

impl Change {
    /// Top-level attribute names that change.
    pub fn changed_attrs(&self) -> Vec<String> {
        let mut v: Vec<String> =
            self.fields.iter().map(|f| f.path.split('.').next().unwrap_or_default().to_string()).collect();
        v.dedup();
        v
    }
}

pub struct Plan {
    pub stack: String,
    pub region: String,
    pub lineage: Option<String>,
    pub serial: u64,
    pub changes: Vec<Change>,
    /// Addresses already in sync (for counts).
    pub unchanged: usize,
    pub destroy: bool,
    pub warnings: Vec<String>,
}

impl Plan {
    pub fn has_changes(&self) -> bool {
        !self.changes.is_empty()
    }

    /// Whether applying changes anything AWS or a user would call a change: an import whose
    /// object already matches the file (only the state record and the two `gpustack:` tags)
    /// is not one, so `plan --detailed-exitcode` exits 0 for a clean import (issue 20's
    /// round trip). An import not read (`--refresh=false`) is one: the plan cannot tell.
    pub fn changes_anything(&self) -> bool {
        self.changes.iter().any(|c| !(c.action == Action::Import && c.fields.is_empty() && c.adopt.is_some()))
    }

    /// How many changes have an action `of` accepts.
    pub fn count(&self, of: impl Fn(&Action) -> bool) -> usize {
        self.changes.iter().filter(|c| of(&c.action)).count()
    }
}

/// Options that shape a plan.
pub struct Options<'a> {
    pub destroy: bool,
    /// Addresses given with --target (empty: everything).
    pub targets: &'a [String],
}

/// A stable fingerprint of what a plan does, for refusing a saved plan whose world moved.
pub fn fingerprint(plan: &Plan) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for c in &plan.changes {
        h.update(format!("{}|{:?}|{:?}|", c.address, c.action, c.id));
        for f in &c.fields {
            h.update(format!("{}={:?}>{:?};", f.path, f.old, f.new));
        }
    }
    format!("{:x}", h.finalize())
}
