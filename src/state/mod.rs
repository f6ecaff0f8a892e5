//! The state model: what gpustack created, with the inputs last applied and the
//! outputs AWS returned, plus the journal of operations in flight (`pending`).
//! The on-disk format is versioned by `format`; `lineage` identifies one state's
//! history and `serial` increases with every write.

pub mod backend;
pub mod local;
pub mod rescue;
pub mod s3;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

pub const FORMAT: u32 = 1;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct State {
    pub format: u32,
    pub lineage: String,
    pub serial: u64,
    pub stack: String,
    pub region: String,
    #[serde(default)]
    pub resources: BTreeMap<String, ResourceState>,
    /// Objects replaced (create-before-destroy) whose old copy still awaits deletion.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deposed: Vec<Deposed>,
    /// Operations started but not known to have finished: resolved by tag lookup on the next run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<Pending>,
    /// `[output]` values computed at the last apply.
    #[serde(default)]
    pub outputs: Map<String, Json>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResourceState {
    pub kind: String,
    pub id: String,
    pub inputs: Map<String, Json>,
    pub outputs: Map<String, Json>,
    /// Addresses this resource depended on when applied: destroy order for resources
    /// that are no longer in the stack file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deps: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prevent_destroy: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Deposed {
    pub address: String,
    #[serde(flatten)]
    pub resource: ResourceState,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    Create,
    Update,
    Delete,
    /// `[import]`: the gpustack tags go on an object the stack does not own yet. Kept by
    /// refresh until the object is recorded at its address (or no longer carries the tags), so
    /// an object tagged by an interrupted import is never mistaken for one the stack made and
    /// deleted (review imp-core M1).
    Import,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pending {
    pub address: String,
    pub kind: String,
    pub operation: Operation,
    /// The idempotency token sent with the call (or the tag value that finds its result).
    pub token: String,
    /// The object operated on, when it already had an id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub started: String,
}

impl State {
    pub fn new(stack: &str, region: &str) -> State {
        State {
            format: FORMAT,
            lineage: uuid::Uuid::new_v4().to_string(),
            serial: 0,
            stack: stack.to_string(),
            region: region.to_string(),
            resources: BTreeMap::new(),
            deposed: vec![],
            pending: vec![],
            outputs: Map::new(),
        }
    }
}

pub fn now() -> String {
    jiff::Timestamp::now().round(jiff::Unit::Second).map(|t| t.to_string()).unwrap_or_default()
}

/// How long ago an RFC 3339 time was, for people: "3m12s ago".
pub fn age(since: &str) -> String {
    let Ok(then) = since.parse::<jiff::Timestamp>() else { return "age unknown".into() };
    let secs = jiff::Timestamp::now().duration_since(then).as_secs().max(0);
    match secs {
        0..60 => format!("{secs}s ago"),
        60..3600 => format!("{}m{:02}s ago", secs / 60, secs % 60),
        3600..86400 => format!("{}h{:02}m ago", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d{:02}h ago", secs / 86400, secs % 86400 / 3600),
    }
}

/// Another run holds the state's lock. The same sentence for every backend; a lock that
/// can outlive its holder (S3) adds the command that frees it.
#[derive(Debug, thiserror::Error)]
#[error(
    "the state {what} is locked by {holder}\n  help: wait for that run to finish, or retry with --lock-timeout 5m to wait for it{}",
    unlock.as_ref().map_or(String::new(), |u| format!("\n  help: if that run is dead (its job killed, its runner gone), free the lock with: {u}"))
)]
pub struct LockHeld {
    /// The state's path or URL.
    pub what: String,
    pub holder: String,
    pub unlock: Option<String>,
}
