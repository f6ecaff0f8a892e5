//! The diff: the stack (desired) against state (recorded) and refresh (observed), one
//! [`Change`] per object to touch. Pure: no AWS call, no I/O.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::{Action, Change, FieldDiff, Offer, Options, Plan, Refreshed};
use crate::resources::{self, Kind, ReplaceOrder};
use crate::stack::schema::{OnChange, Ty};
use crate::stack::{Diagnostic, OutputRef, Resource, Stack};
use crate::state::{ResourceState, State};
use crate::value::{Attrs, Value, attrs_from_json, attrs_to_json};

/// The inputs a resource would be created or updated with: references looked up
/// through `outputs_of` (an unknown output is `Unknown`), defaults filled, the
/// stack's tags merged, physical name and description defaulted, normalized.
pub fn desired_inputs(stack: &Stack, idx: usize, outputs_of: &dyn Fn(&str) -> Option<Attrs>) -> Attrs {
    let r = &stack.resources[idx];
    let lookup = |x: &OutputRef| -> Value {
        outputs_of(&x.address).and_then(|o| o.get(&x.output).cloned()).unwrap_or(Value::Unknown)
    };
    let mut inputs: Attrs = r.attrs.iter().map(|(k, e)| (k.clone(), e.resolve(&lookup))).collect();
    for a in r.kind.attrs().iter().filter(|a| !a.computed) {
        if !inputs.contains_key(a.name) {
            let v = match a.name {
                "name" => Some(Value::str(stack.default_physical_name(r))),
                "description" => Some(Value::str(r.address.clone())),
                _ => a.default.value(),
            };
            if let Some(v) = v {
                inputs.insert(a.name.to_string(), v);
            }
        }
    }
    if let Some(Value::Table(t)) = inputs.get_mut("tags") {
        for (k, v) in &stack.tags {
            t.entry(k.clone()).or_insert_with(|| Value::str(v.clone()));
        }
    }
    resources::of(r).normalize(&mut inputs);
    inputs
}

/// The outputs each resource will have once the plan so far has run: `None` while unknown
/// (created or replaced), else recorded outputs with those an update changes unknown.
type PlannedOutputs = HashMap<String, Option<Attrs>>;

/// Computes the plan. Errors are refusals (prevent_destroy, unknown target, a change to
/// something bought).
pub fn diff(
    stack: &Stack,
    state: Option<&State>,
    refreshed: &Refreshed,
    opts: &Options,
) -> Result<Plan, Vec<Diagnostic>> {
    let empty = State::new(&stack.name, &stack.region);
    let st = refreshed.state.as_ref().or(state).unwrap_or(&empty);
    let scope = target_scope(stack, st, opts)?;
    let mut changes: Vec<Change> = vec![];
    let mut errors = vec![];
    let mut unchanged = 0;
    if !opts.destroy {
        let mut planned = PlannedOutputs::new();
        for idx in crate::graph::topo_order(&stack.resources) {
            let r = &stack.resources[idx];
            let in_scope = scope.as_ref().is_none_or(|s| s.contains(&r.address));
            match resource_change(stack, idx, st, refreshed, &mut planned, &mut errors) {
                Some(c) if in_scope => changes.push(c),
                Some(_) | None => unchanged += 1,
            }
        }
    }
    changes.extend(removals(stack, st, refreshed, opts, scope.as_ref(), &mut errors));
    if !errors.is_empty() {
        return Err(errors);
    }
    let mut warnings: Vec<String> = vec![];
    if refreshed.skipped && !st.pending.is_empty() {
        warnings.push(format!(
            "{} operation(s) of an interrupted run are pending; apply refreshes to resolve them (found objects are adopted)",
            st.pending.len()
        ));
    }
    Ok(Plan {
        stack: stack.name.clone(),
        region: stack.region.clone(),
        lineage: state.map(|s| s.lineage.clone()),
        serial: state.map_or(0, |s| s.serial),
        changes,
        unchanged,
        destroy: opts.destroy,
        warnings,
    })
}

/// The change one declared resource needs, or `None` when it is in sync. Records its
/// planned outputs for the resources after it.
fn resource_change(
    stack: &Stack,
    idx: usize,
    st: &State,
    refreshed: &Refreshed,
    planned: &mut PlannedOutputs,
    errors: &mut Vec<Diagnostic>,
) -> Option<Change> {
    let r = &stack.resources[idx];
    let kind = resources::of(r);
    let recorded = st.resources.get(&r.address);
    let adopted = refreshed.adopted.get(&r.address);
    let outputs_of = |a: &str| -> Option<Attrs> {
        match planned.get(a) {
            Some(o) => o.clone(),
            None => st.resources.get(a).map(|e| attrs_from_json(&e.outputs)),
        }
    };
    let desired = desired_inputs(stack, idx, &outputs_of);
    let Some(entry) = recorded.or(adopted) else {
        planned.insert(r.address.clone(), None);
        let action = if kind.buys() { Action::Purchase(Offer::NotSearched) } else { Action::Create };
        let mut c = new_change(r.address.clone(), kind.name(), action, refreshed.notes.get(&r.address).cloned());
        c.fields = desired
            .iter()
            .map(|(k, v)| FieldDiff { path: k.clone(), old: None, new: Some(v.clone()), forces_replace: false })
            .collect();
        return Some(c);
    };
    let current = current_inputs(kind, r, recorded.is_none(), refreshed.observed.get(&r.address), entry, &desired);
    let fields = field_diffs(kind, &current, &desired);
    let old_outputs = attrs_from_json(&entry.outputs);
    let mut change = new_change(r.address.clone(), kind.name(), Action::Update, None);
    change.id = Some(entry.id.clone());
    change.old_inputs = current.clone();
    change.old_outputs = old_outputs.clone();
    change.old_deps = entry.deps.clone();
    if recorded.is_none() {
        let mut e = entry.clone();
        e.inputs = attrs_to_json(&current);
        e.deps = r.deps.iter().map(|&d| stack.resources[d].address.clone()).collect();
        change.adopt = Some(e);
        change.note = refreshed.notes.get(&r.address).cloned();
    }
    change.fields = fields;
    if change.fields.iter().any(|f| f.forces_replace) {
        if kind.retains_on_delete() {
            errors.push(bought_cannot_change(r, &entry.id, &change.fields));
        }
        planned.insert(r.address.clone(), None);
        change.action = match kind.replace_order() {
            ReplaceOrder::CreateBeforeDestroy => Action::CreateThenDelete,
            ReplaceOrder::DeleteBeforeCreate => Action::DeleteThenCreate,
        };
        if r.prevent_destroy {
            errors.push(refusal(stack, &r.address, "replace"));
        }
        return Some(change);
    }
    let mut outputs = old_outputs;
    if !change.fields.is_empty() {
        if let Some(n) = kind.update_note(&current, &desired, &change.changed_attrs()) {
            change.note = Some(n);
        }
        for (attr, msg, help) in kind.check_update(&current, &desired) {
            let span = r.attrs.get(attr).and_then(|e| e.span.clone()).or(r.span.clone());
            errors.push(Diagnostic::error(format!("`{}`: {msg}", r.address), span).help(help));
        }
        for o in kind.outputs_changed_by_update() {
            outputs.insert(o.to_string(), Value::Unknown);
        }
    }
    planned.insert(r.address.clone(), Some(outputs));
    if change.fields.is_empty() {
        change.action = Action::Adopt;
        // Only prevent_destroy changed: state records it, AWS is not touched.
        if change.adopt.is_none() && entry.prevent_destroy != r.prevent_destroy {
            let mut e = entry.clone();
            e.prevent_destroy = r.prevent_destroy;
            change.adopt = Some(e);
            change.note =
                Some(format!("prevent_destroy: {} → {} (state only)", entry.prevent_destroy, r.prevent_destroy));
        }
        // In sync: nothing to record either.
        return change.adopt.is_some().then_some(change);
    }
    Some(change)
}

/// The inputs of an existing object as they are now. For one found by its tags (`found`),
/// what refresh cannot see is re-applied if it updates in place, and trusted if it would
/// force a replace.
fn current_inputs(
    kind: &dyn Kind,
    r: &Resource,
    found: bool,
    observed: Option<&Attrs>,
    entry: &ResourceState,
    desired: &Attrs,
) -> Attrs {
    let recorded_inputs = attrs_from_json(&entry.inputs);
    match (found, observed) {
        (true, obs) => {
            let obs = obs.cloned().unwrap_or_default();
            let mut cur = Attrs::new();
            for a in r.kind.attrs() {
                if let Some(v) = obs.get(a.name) {
                    cur.insert(a.name.to_string(), v.clone());
                } else if (a.on_change == OnChange::Replace || kind.retains_on_delete())
                    && let Some(v) = desired.get(a.name)
                {
                    cur.insert(a.name.to_string(), v.clone());
                }
            }
            kind.current(&cur, &obs)
        }
        (false, Some(obs)) => kind.current(&recorded_inputs, obs),
        (false, None) => recorded_inputs,
    }
}

fn bought_cannot_change(r: &Resource, id: &str, fields: &[FieldDiff]) -> Diagnostic {
    let forcing: Vec<&FieldDiff> = fields.iter().filter(|f| f.forces_replace).collect();
    let first = forcing.first().map(|f| f.path.split('.').next().unwrap_or_default().to_string()).unwrap_or_default();
    let span = r.attrs.get(&first).and_then(|e| e.span.clone()).or(r.span.clone());
    let what: Vec<&str> = forcing.iter().map(|f| f.path.as_str()).collect();
    Diagnostic::error(
        format!("`{}` ({id}) was bought and cannot change: {} differ from what was bought", r.address, what.join(", ")),
        span,
    )
    .help("a Capacity Block cannot be modified or cancelled; restore the values, or add a new capacity_block (this one runs until its end date)")
}

/// Objects in state but not (or no longer) wanted, deposed copies and objects found by
/// tags: deletes (or retains), dependents first.
fn removals(
    stack: &Stack,
    st: &State,
    refreshed: &Refreshed,
    opts: &Options,
    scope: Option<&HashSet<String>>,
    errors: &mut Vec<Diagnostic>,
) -> Vec<Change> {
    let wanted = |a: &str| !opts.destroy && stack.by_address.contains_key(a);
    let mut deletes = vec![];
    for (address, e) in &st.resources {
        if wanted(address) || scope.is_some_and(|s| !s.contains(address)) {
            continue;
        }
        if e.prevent_destroy || stack.get(address).is_some_and(|r| r.prevent_destroy) {
            errors.push(refusal(stack, address, "delete"));
        }
        deletes.push(delete_change(address, e, false, None));
    }
    if scope.is_none() {
        for d in &st.deposed {
            deletes.push(delete_change(&d.address, &d.resource, true, Some("replaced object still to delete".into())));
        }
        for (address, e) in &refreshed.strays {
            let note = "found by its tags, not in state: left by an interrupted run";
            deletes.push(delete_change(address, e, true, Some(note.into())));
        }
        if opts.destroy {
            for (address, e) in refreshed.adopted.iter().filter(|(a, _)| !st.resources.contains_key(*a)) {
                deletes.push(delete_change(address, e, true, Some("found by its tags, not in state".into())));
            }
        }
    }
    // Dependents first: a stable order for display; the executor orders by edges anyway.
    deletes.sort_by_key(|c| std::cmp::Reverse(resources::rank(c.kind)));
    deletes
}

fn new_change(address: String, kind: &'static str, action: Action, note: Option<String>) -> Change {
    Change {
        address,
        kind,
        action,
        fields: vec![],
        id: None,
        old_inputs: Attrs::new(),
        old_outputs: Attrs::new(),
        old_deps: vec![],
        adopt: None,
        stray: false,
        note,
    }
}

fn delete_change(address: &str, e: &ResourceState, stray: bool, note: Option<String>) -> Change {
    let kind = resources::kind(&e.kind);
    let action = if kind.is_some_and(|k| k.retains_on_delete()) { Action::Retain } else { Action::Delete };
    let mut c = new_change(address.to_string(), kind.map_or("unknown", |k| k.name()), action, note);
    c.id = Some(e.id.clone());
    c.old_inputs = attrs_from_json(&e.inputs);
    c.old_outputs = attrs_from_json(&e.outputs);
    c.old_deps = e.deps.clone();
    c.stray = stray;
    c
}

fn refusal(stack: &Stack, address: &str, what: &str) -> Diagnostic {
    let span = stack.get(address).and_then(|r| r.span.clone());
    Diagnostic::error(format!("`{address}` has prevent_destroy = true, but this plan would {what} it"), span)
        .help("remove prevent_destroy from the resource first if you really mean to, or change the stack so it is kept")
}

/// Field-level differences; maps (tags and the like) are compared key by key.
pub fn field_diffs(kind: &dyn Kind, old: &Attrs, new: &Attrs) -> Vec<FieldDiff> {
    let mut out = vec![];
    for a in kind.attrs() {
        let (o, n) = (old.get(a.name), new.get(a.name));
        if o == n {
            continue;
        }
        let forces_replace = a.on_change == OnChange::Replace;
        match (o, n) {
            (Some(Value::Table(ot)), Some(Value::Table(nt))) if a.name == "tags" || matches!(a.ty, Ty::Map(_)) => {
                let keys: BTreeSet<&String> = ot.keys().chain(nt.keys()).collect();
                for k in keys.into_iter().filter(|k| ot.get(*k) != nt.get(*k)) {
                    out.push(FieldDiff {
                        path: format!("{}.{k}", a.name),
                        old: ot.get(k).cloned(),
                        new: nt.get(k).cloned(),
                        forces_replace,
                    });
                }
            }
            _ => out.push(FieldDiff { path: a.name.to_string(), old: o.cloned(), new: n.cloned(), forces_replace }),
        }
    }
    out
}

/// With --target: the targets and everything they depend on (with --destroy: the targets
/// and everything that depends on them). Unknown targets are errors.
fn target_scope(stack: &Stack, st: &State, opts: &Options) -> Result<Option<HashSet<String>>, Vec<Diagnostic>> {
    if opts.targets.is_empty() {
        return Ok(None);
    }
    let mut scope = HashSet::new();
    let mut errors = vec![];
    for t in opts.targets {
        match stack.by_address.get(t) {
            Some(&i) if opts.destroy => {
                scope.insert(t.clone());
                let mut changed = true;
                while changed {
                    changed = false;
                    for r in &stack.resources {
                        if !scope.contains(&r.address)
                            && r.deps.iter().any(|&d| scope.contains(&stack.resources[d].address))
                        {
                            scope.insert(r.address.clone());
                            changed = true;
                        }
                    }
                }
                let _ = i;
            }
            Some(&i) => {
                let mut todo = vec![i];
                while let Some(j) = todo.pop() {
                    if scope.insert(stack.resources[j].address.clone()) {
                        todo.extend(stack.resources[j].deps.iter().copied());
                    }
                }
            }
            None if st.resources.contains_key(t) => {
                scope.insert(t.clone());
            }
            None => {
                let d = Diagnostic::error(format!("--target {t}: no such resource in the stack or its state"), None);
                errors.push(match crate::stack::diag::closest(t, stack.by_address.keys().map(String::as_str)) {
                    Some(c) => d.help(format!("did you mean {c}?")),
                    None => d.help("targets are addresses like security_group.efa (see `gpustack state list`)"),
                });
            }
        }
    }
    if errors.is_empty() { Ok(Some(scope)) } else { Err(errors) }
}
