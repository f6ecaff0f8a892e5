//! gpustack as a library: the layers the `gpustack` binary is built from, one-way from top
//! to bottom (each module imports only modules listed below it):
//!
//! - `cli`: the commands; the load step (`load`) runs the language, the cycle check and
//!   the offline rules in one pass.
//! - `generate`: `import generate`, a stack file from a live cluster (kinds' `import`).
//! - `manifests`: the Kubernetes YAML of rendered kinds, ids from state.
//! - `engine`: walks an approved plan, journals each mutation, records state.
//! - `capacity`: the reservations a stack owns or uses, over time, live and priced.
//! - `plan`: the diff of desired against recorded and observed; `Action` is what users see.
//! - `capacity`: finding GPU capacity across regions and pricing it (`capacity find`).
//! - `rules`, `quota`, `policy`: checks and policy built from the stack and the kinds.
//! - `graph`: the resource DAG, its cycles and its order.
//! - `resources`: one file per kind, behind the `Kind` trait, over `aws`'s mechanics.
//! - `aws`: clients, the call wrapper, pagination, waiters, the instance catalog.
//! - `stack`: the language (TOML with spans, schema, references, diagnostics); no AWS.
//! - `state`, `settings`, `value`: leaves.

pub mod aws;
pub mod capacity;
pub mod cli;
pub mod engine;
pub mod generate;
pub mod graph;
pub mod load;
pub mod manifests;
pub mod plan;
pub mod policy;
pub mod price;
pub mod quota;
pub mod reference;
pub mod resources;
pub mod rules;
pub mod settings;
pub mod stack;
pub mod state;
pub mod value;
