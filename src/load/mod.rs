//! The load step every command runs on a stack file: the language (`stack`), the edges AWS
//! needs that the file does not write, the cycle check (`graph`), each kind's offline checks
//! and the offline GPU rules (`rules`), all in one pass, so a file's problems are reported
//! together. No network.

#[cfg(test)]
mod mutations;

use std::path::Path;

use crate::stack::{self, Diagnostic, Diagnostics, Source, Stack, VarSources};
use crate::{graph, resources, rules};

/// Reads and checks a stack file.
pub fn load(path: &Path, vars: &VarSources) -> Result<Stack, Box<Diagnostics>> {
    check(stack::read_source(path)?, vars)
}

/// Checks a stack file's bytes (`validate`'s fuzz target and mutation test start here).
pub fn from_bytes(path: &Path, bytes: Vec<u8>, vars: &VarSources) -> Result<Stack, Box<Diagnostics>> {
    check(stack::source_from_bytes(path, bytes)?, vars)
}

/// Checks a stack file's text: a stack with its warnings, or every error and warning sorted
/// by where it is written.
pub fn check(source: Source, vars: &VarSources) -> Result<Stack, Box<Diagnostics>> {
    let (mut stack, mut diags) = Stack::parse(source, vars, &resources::schemas())?;
    resources::add_implicit_edges(&mut stack.resources);
    diags.extend(graph::cycle_diagnostics(&stack.resources, &stack.source));
    resources::check_stack(&stack, &mut diags);
    // The GPU rules read values across resources: they run on a stack the language accepted.
    if !diags.iter().any(Diagnostic::is_error) {
        diags.extend(rules::offline(&stack));
    }
    let (errors, warnings): (Vec<_>, Vec<_>) = diags.into_iter().partition(Diagnostic::is_error);
    if errors.is_empty() {
        stack.warnings = warnings;
        return Ok(stack);
    }
    let mut items = errors;
    items.extend(warnings);
    items.sort_by_key(|d| d.span.as_ref().map_or(0, |s| s.start));
    Err(Box::new(Diagnostics { source: stack.source, items }))
}
