//! Fuzzes what `gpustack validate` does with a stack file's bytes: parse the TOML, substitute
//! variables, check every resource against its schema and the stack's references, CIDRs,
//! zones, tags and GPU rules. The promise: no input panics or hangs, and every error carries
//! a `file:line:column`. The stable test `load::mutations` keeps the same promise in CI.
#![no_main]

use std::path::Path;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    // The quickstart's one variable without a default, as the README exports it.
    let env = |k: &str| (k == "admin_cidr").then(|| "198.51.100.7/32".to_string());
    let vars = gpustack::stack::VarSources { cli: &[], env: &env };
    if let Err(d) = gpustack::load::from_bytes(Path::new("fuzz.toml"), data.to_vec(), &vars) {
        for item in d.items.iter().filter(|i| i.is_error()) {
            let span = item.span.as_ref().unwrap_or_else(|| panic!("an error without a location: {}", item.message));
            assert!(span.start <= span.end && span.end <= d.source.text.len(), "a span outside the file");
        }
        let _ = d.render(false);
    }
});
