//! Fuzzes what `gpustack validate` does with a stack file's bytes: parse the TOML, substitute
//! variables, check every resource against its schema and the stack's references, CIDRs,
//! zones, tags and GPU rules. The promise: no input panics or hangs, and every error carries
//! a `file:line:column`. The stable test `stack::mutations` keeps the same promise in CI.
#![no_main]
// The modules are the binary's, most of which (the CLI, the engine, AWS) validate never uses.
#![allow(dead_code, unused_imports, unused_macros)]

// gpustack has no library target yet: compile the binary's modules here, from ../src, as
// src/main.rs declares them. A module added there must be added here (the build says so).
#[path = "../../src/aws/mod.rs"]
mod aws;
#[path = "../../src/cli/mod.rs"]
mod cli;
#[path = "../../src/engine/mod.rs"]
mod engine;
#[path = "../../src/graph.rs"]
mod graph;
#[path = "../../src/plan/mod.rs"]
mod plan;
#[path = "../../src/policy.rs"]
mod policy;
#[path = "../../src/quota.rs"]
mod quota;
#[path = "../../src/resources/mod.rs"]
mod resources;
#[path = "../../src/rules.rs"]
mod rules;
#[path = "../../src/settings.rs"]
mod settings;
#[path = "../../src/stack/mod.rs"]
mod stack;
#[path = "../../src/state/mod.rs"]
mod state;
#[path = "../../src/value.rs"]
mod value;

use std::path::Path;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // The quickstart's one variable without a default, as the README exports it.
    let env = |k: &str| (k == "admin_cidr").then(|| "198.51.100.7/32".to_string());
    let vars = stack::VarSources { cli: &[], env: &env };
    if let Err(d) = stack::Stack::from_bytes(Path::new("fuzz.toml"), data.to_vec(), &vars) {
        for item in d.items.iter().filter(|i| i.is_error()) {
            let span = item.span.as_ref().unwrap_or_else(|| panic!("an error without a location: {}", item.message));
            assert!(span.start <= span.end && span.end <= d.source.text.len(), "a span outside the file");
        }
        let _ = d.render(false);
    }
});
