//! The load step every command runs on a stack file: the language (`stack`), the edges AWS
//! needs that the file does not write, the cycle check (`graph`), each kind's offline checks
//! and the offline GPU rules (`rules`; for a file with errors, the instance-catalog rules
//! too), all in one pass, so a file's problems are reported together. No network.

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
    // The GPU rules read values across resources. They run whatever else is wrong, so a
    // file's independent mistakes show in one run; what they say about a resource with
    // errors of its own, or where an error already points, is left out (one mistake, one
    // error).
    let broken = broken_sections(&stack);
    let rules = rules::offline(&stack);
    add_new(&mut diags, rules, &broken);
    if diags.iter().any(Diagnostic::is_error) {
        // The file is refused: the instance-catalog rules (EFA on a type without it, MIG on an
        // L4…) come in the same report, from the embedded catalog as `validate` runs them,
        // instead of after the other errors are fixed. An accepted stack gets them from the
        // command (`validate` offline, `plan` from EC2).
        add_new(&mut diags, rules::preflight_offline(&stack).diags, &broken);
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

/// Adds the rules' diagnostics `found` to `diags`, but not one about a broken resource nor
/// an error whose place overlaps an error's already there (a kind's own check and a rule can
/// see the same mistake: a MIG layout the GPU does not have).
fn add_new(diags: &mut Vec<Diagnostic>, found: Vec<Diagnostic>, broken: &[Broken]) {
    let taken: Vec<std::ops::Range<usize>> =
        diags.iter().filter(|d| d.is_error()).filter_map(|d| d.span.clone()).collect();
    let overlaps = |a: &std::ops::Range<usize>, b: &std::ops::Range<usize>| {
        a.start < b.end.max(b.start + 1) && b.start < a.end.max(a.start + 1)
    };
    let twin = |d: &Diagnostic| d.is_error() && d.span.as_ref().is_some_and(|s| taken.iter().any(|t| overlaps(s, t)));
    diags.extend(found.into_iter().filter(|d| !about_broken(d, broken) && !twin(d)));
}

/// A resource whose values or attributes have errors of their own: its address, and the
/// byte range of its section (from its header to the next resource's).
struct Broken {
    address: String,
    section: std::ops::Range<usize>,
}

fn broken_sections(stack: &Stack) -> Vec<Broken> {
    let mut starts: Vec<usize> = stack.resources.iter().filter_map(|r| r.span.as_ref().map(|s| s.start)).collect();
    starts.sort_unstable();
    let end_of = |start: usize| starts.iter().copied().find(|s| *s > start).unwrap_or(usize::MAX);
    stack
        .resources
        .iter()
        .filter(|r| !r.schema_ok)
        .map(|r| {
            let start = r.span.as_ref().map_or(usize::MAX, |s| s.start);
            Broken { address: r.address.clone(), section: start..end_of(start) }
        })
        .collect()
}

/// A rule's diagnostic names a broken resource (rules name resources as `kind.name`), or
/// points into its section.
fn about_broken(d: &Diagnostic, broken: &[Broken]) -> bool {
    broken.iter().any(|b| {
        d.message.contains(&format!("`{}`", b.address)) || d.span.as_ref().is_some_and(|s| b.section.contains(&s.start))
    })
}
