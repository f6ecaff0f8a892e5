//! The diff: the stack (desired) against state (recorded) and refresh (observed), one
//! [`Change`] per object to touch. Pure: no AWS call, no I/O.

use std::collections::{BTreeSet, HashMap, HashSet};

use super::{Action, Change, FieldDiff, Offer, Options, Plan, Refreshed, Rendering};
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
    resources::of(r).stack_defaults(stack, r, &mut inputs);
    resources::of(r).normalize(&mut inputs);
    keep_distinct_unknowns(r, &lookup, &mut inputs);
    inputs
}

/// A kind's `normalize` sorts and dedups its sets (subnets, security groups), and to a
/// plan two values not yet known look equal: `["${subnet.a.id}", "${subnet.b.id}"]` would
/// show as one subnet. Each distinct reference still unknown in a written list stands for
/// one element, so the list gets back the unknowns the dedup merged.
fn keep_distinct_unknowns(r: &Resource, lookup: &dyn Fn(&OutputRef) -> Value, inputs: &mut Attrs) {
    for (k, e) in &r.attrs {
        let crate::stack::expr::ExprKind::List(items) = &e.kind else { continue };
        let unknown: BTreeSet<(&str, &str)> = items
            .iter()
            .filter_map(|e| e.as_single_ref())
            .filter(|x| !lookup(x).is_known())
            .map(|x| (x.address.as_str(), x.output.as_str()))
            .collect();
        if let Some(Value::List(l)) = inputs.get_mut(k) {
            let shown = l.iter().filter(|v| matches!(v, Value::Unknown)).count();
            l.extend(std::iter::repeat_n(Value::Unknown, unknown.len().saturating_sub(shown)));
        }
    }
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
        cost: None,
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
    // A read (`existing`) the file now takes over with `[import]`: imported like any object.
    let recorded = st
        .resources
        .get(&r.address)
        .filter(|e| !(resources::existing::in_state(e) && stack.import_of(&r.address).is_some()));
    let adopted = refreshed.adopted.get(&r.address);
    let outputs_of = |a: &str| -> Option<Attrs> {
        match planned.get(a) {
            Some(o) => o.clone(),
            None => st.resources.get(a).map(|e| attrs_from_json(&e.outputs)),
        }
    };
    if let Some(e) = r.attrs.get("existing") {
        let value = e.resolve(&|x: &OutputRef| {
            outputs_of(&x.address).and_then(|o| o.get(&x.output).cloned()).unwrap_or(Value::Unknown)
        });
        return read_change(r, value, recorded, refreshed, planned, errors);
    }
    // State holds a read of an object the stack does not own, and the stack no longer
    // says `existing`: diffing it would plan a replace whose delete hits that object
    // (DeleteVpc, CancelCapacityReservation…). Never: the user forgets it or keeps reading it.
    if let Some(e) = recorded.filter(|e| resources::existing::in_state(e)) {
        errors.push(
            Diagnostic::error(
                format!(
                    "`{}` is recorded as a read of {}, an object this stack does not own; without `existing` the plan would replace (delete) it",
                    r.address, e.id
                ),
                r.span.clone(),
            )
            .help(format!(
                "keep `existing = \"{}\"` to go on reading it; to have the stack create its own object here, first remove `[{}]` from the stack and apply (that only forgets the read, nothing is deleted), then add it back without `existing`; to take over this very object instead, write its attributes in place of `existing` and add `\"{}\" = \"{}\"` under [import]",
                e.id, r.address, r.address, e.id
            )),
        );
        planned.insert(r.address.clone(), None);
        return None;
    }
    let desired = desired_inputs(stack, idx, &outputs_of);
    if kind.rendered() {
        return rendered_change(kind, r, recorded, desired, planned);
    }
    if let Some(decl) = stack.import_of(&r.address) {
        if let Some(why) = refreshed.import_refusals.get(&r.address) {
            planned.insert(r.address.clone(), None);
            errors.push(
                Diagnostic::error(
                    format!("`[import]` `{}`: cannot import {}: {why}", r.address, decl.id),
                    decl.span.clone(),
                )
                .help(
                    "fix the object in AWS, or remove the [import] entry (and the resource, or let gpustack create it)",
                ),
            );
            return None;
        }
        match recorded.or(adopted) {
            None => return import_change(stack, idx, decl, refreshed, &desired, planned, errors),
            // In state already: the entry is a no-op (Terraform's), unless it names another object.
            Some(e) => {
                let other = match refreshed.imports.get(&r.address) {
                    Some(Some(imp)) if imp.observed.id != e.id => Some(imp.observed.id.clone()),
                    Some(None) => Some(decl.id.clone()),
                    _ => None,
                };
                if let Some(other) = other {
                    errors.push(
                        Diagnostic::error(
                            format!(
                                "`[import]` names {} for `{}`, but the state already holds another object there: {}",
                                decl.id, r.address, e.id
                            ),
                            decl.span.clone(),
                        )
                        .help(format!(
                            "an [import] entry of a resource already in state does nothing: remove it, or write the id the state holds (\"{}\"); an address holds one object: to import {other}, declare it under another address",
                            e.id
                        )),
                    );
                }
            }
        }
    }
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
    let mut current = current_inputs(kind, r, recorded.is_none(), refreshed.observed.get(&r.address), entry, &desired);
    kind.settle(&mut current, &desired);
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
        if deletion_protected(&current) {
            errors.push(protected_refusal(stack, &r.address, "replace"));
        }
        if r.prevent_destroy {
            errors.push(refusal(stack, &r.address, "replace"));
        } else if kind.replace_needs_consent() && !r.prevent_destroy_written {
            errors.push(unconsented_replace(r, &change.fields));
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

/// An `[import]` of an address the state lacks: `Import` with the fields the apply will
/// update after tagging and recording it. The object's current inputs are
/// `current(recorded = {}, observed)`, settled against the file. Refused: an id that names
/// nothing, any change to something bought, and a replacement unless the file spells out
/// `prevent_destroy = false` (a replacement deletes the object the user asked to take over).
fn import_change(
    stack: &Stack,
    idx: usize,
    decl: &crate::stack::ImportDecl,
    refreshed: &Refreshed,
    desired: &Attrs,
    planned: &mut PlannedOutputs,
    errors: &mut Vec<Diagnostic>,
) -> Option<Change> {
    let r = &stack.resources[idx];
    let kind = resources::of(r);
    let mut c = new_change(r.address.clone(), kind.name(), Action::Import, None);
    if refreshed.skipped {
        // Offline nothing is read: the plan cannot say what the object looks like, and its
        // outputs are unknown to the resources that refer to it.
        planned.insert(r.address.clone(), None);
        c.id = Some(decl.id.clone());
        c.note = Some(format!(
            "{} not read (--refresh=false): a refreshing plan reads it and lists what differs from the file",
            decl.id
        ));
        return Some(c);
    }
    let Some(imp) = refreshed.imports.get(&r.address).and_then(Option::as_ref) else {
        planned.insert(r.address.clone(), None);
        let form = kind.import_id().unwrap_or("its id");
        errors.push(
            Diagnostic::error(
                format!(
                    "`[import]` `{}`: no {} \"{}\" exists in {} (account of the credentials used)",
                    r.address,
                    kind.name(),
                    decl.id,
                    stack.region
                ),
                decl.span.clone(),
            )
            .help(format!(
                "check the id (a {} is imported as {form}) and [stack].region; remove the entry to have gpustack create the resource instead",
                kind.name()
            )),
        );
        return None;
    };
    let mut current = kind.current(&Attrs::new(), &imp.observed.attrs);
    kind.settle(&mut current, desired);
    c.fields = field_diffs(kind, &current, desired);
    c.id = Some(imp.observed.id.clone());
    c.old_inputs = current.clone();
    c.old_outputs = imp.observed.outputs.clone();
    c.adopt = Some(ResourceState {
        kind: kind.name().to_string(),
        id: imp.observed.id.clone(),
        inputs: attrs_to_json(&current),
        outputs: attrs_to_json(&imp.observed.outputs),
        deps: r.deps.iter().map(|&d| stack.resources[d].address.clone()).collect(),
        prevent_destroy: r.prevent_destroy,
    });
    if !imp.unexpressed.is_empty() {
        let kept: Vec<String> = imp.unexpressed.iter().map(|(f, v)| format!("{f} = {v}")).collect();
        c.note = Some(format!("kept as AWS has it (the stack language cannot say it): {}", kept.join("; ")));
    }
    if kind.buys() {
        // A bought Capacity Block or training plan cannot be modified (EC2 UG "Capacity
        // Blocks": a block cannot be modified or cancelled; SageMaker DG
        // `reserve-capacity-with-training-plans`: a plan "cannot be modified once
        // purchased"): any difference but its tags is refused, never planned as a change.
        let bought: Vec<FieldDiff> = c
            .fields
            .iter()
            .filter(|f| !f.path.starts_with("tags"))
            .cloned()
            .map(|mut f| {
                f.forces_replace = true;
                f
            })
            .collect();
        if !bought.is_empty() {
            errors.push(bought_cannot_change(r, &imp.observed.id, &bought));
            planned.insert(r.address.clone(), None);
            return None;
        }
    }
    if c.fields.iter().any(|f| f.forces_replace) {
        planned.insert(r.address.clone(), None);
        if deletion_protected(&current) {
            errors.push(protected_refusal(stack, &r.address, "replace"));
        }
        if r.prevent_destroy {
            errors.push(refusal(stack, &r.address, "replace"));
        } else if !r.prevent_destroy_written {
            let forcing: Vec<&str> = c.fields.iter().filter(|f| f.forces_replace).map(|f| f.path.as_str()).collect();
            errors.push(
                Diagnostic::error(
                    format!(
                        "importing `{}` ({}) would replace it: {} differ from the file and cannot change in place, so the object you import would be deleted",
                        r.address,
                        imp.observed.id,
                        forcing.join(", ")
                    ),
                    r.span.clone(),
                )
                .help(format!(
                    "write the values AWS shows (the plan lists them) so the import changes nothing, or write prevent_destroy = false under [{}] to allow the replacement",
                    r.address
                )),
            );
        }
        // Consented: recorded first (the executor's first write), then replaced like any object.
        c.action = match kind.replace_order() {
            ReplaceOrder::CreateBeforeDestroy => Action::CreateThenDelete,
            ReplaceOrder::DeleteBeforeCreate => Action::DeleteThenCreate,
        };
        c.note = Some(format!("imports {}, then replaces it", imp.observed.id));
        return Some(c);
    }
    let mut outputs = imp.observed.outputs.clone();
    if !c.fields.is_empty() {
        if let Some(n) = kind.update_note(&current, desired, &c.changed_attrs()) {
            c.note = Some(match c.note.take() {
                Some(kept) => format!("{n}; {kept}"),
                None => n,
            });
        }
        for (attr, msg, help) in kind.check_update(&current, desired) {
            let span = r.attrs.get(attr).and_then(|e| e.span.clone()).or(r.span.clone());
            errors.push(Diagnostic::error(format!("`{}`: {msg}", r.address), span).help(help));
        }
        for o in kind.outputs_changed_by_update() {
            outputs.insert(o.to_string(), Value::Unknown);
        }
    }
    planned.insert(r.address.clone(), Some(outputs));
    Some(c)
}

/// A resource that names an object the stack does not own (`existing`): `Read` when what
/// refresh read differs from what state recorded (or nothing is recorded), nothing when in
/// sync. Offline only a literal id is known; state's record stands until the next read.
fn read_change(
    r: &Resource,
    value: Value,
    recorded: Option<&ResourceState>,
    refreshed: &Refreshed,
    planned: &mut PlannedOutputs,
    errors: &mut Vec<Diagnostic>,
) -> Option<Change> {
    let span = r.attrs.get("existing").and_then(|e| e.span.clone()).or(r.span.clone());
    let inputs = Attrs::from([("existing".to_string(), value.clone())]);
    if let Some(e) = recorded.filter(|e| !resources::existing::in_state(e)) {
        errors.push(
            Diagnostic::error(
                format!("`{}` ({}) was created by this stack; `existing` names objects the stack does not own", r.address, e.id),
                span,
            )
            .help("remove `existing` to keep managing it, or destroy it first (gpustack destroy --target) and name the object that takes its place"),
        );
        planned.insert(r.address.clone(), None);
        return None;
    }
    let same = |e: &ResourceState| attrs_from_json(&e.inputs) == inputs;
    let mut c = new_change(r.address.clone(), r.kind.name(), Action::Read, None);
    let entry = |id: &str, outputs: &Attrs| ResourceState {
        kind: r.kind.name().to_string(),
        id: id.to_string(),
        inputs: attrs_to_json(&inputs),
        outputs: attrs_to_json(outputs),
        deps: vec![],
        prevent_destroy: false,
    };
    if refreshed.skipped {
        if let Some(e) = recorded.filter(|e| same(e)) {
            planned.insert(r.address.clone(), Some(attrs_from_json(&e.outputs)));
            return None;
        }
        let literal = value.as_str().map(str::to_string);
        let outputs = literal.as_ref().map(|id| Attrs::from([("id".to_string(), Value::str(id.clone()))]));
        planned.insert(r.address.clone(), outputs.clone());
        c.id = literal.clone();
        c.adopt = literal.as_ref().zip(outputs.as_ref()).map(|(id, o)| entry(id, o));
        c.note = Some("not read offline (--refresh=false); a refreshing plan reads it".into());
        return Some(c);
    }
    match refreshed.existing.get(&r.address) {
        None => {
            errors.push(
                Diagnostic::error(
                    format!("`{}`: the lookup depends on an object this plan creates, so there is nothing to read yet", r.address),
                    span,
                )
                .help("an existing object lives in a VPC that exists: name that VPC by id, or by a `vpc` resource with `existing`"),
            );
            planned.insert(r.address.clone(), None);
            None
        }
        Some(Err(why)) => {
            errors.push(
                Diagnostic::error(format!("`{}`: {why}", r.address), span).help(
                    "check the id or the tags (and the stack's region); a tag lookup must match exactly one object",
                ),
            );
            planned.insert(r.address.clone(), None);
            None
        }
        Some(Ok(read)) => {
            planned.insert(r.address.clone(), Some(read.outputs.clone()));
            let old_outputs = recorded.map(|e| attrs_from_json(&e.outputs)).unwrap_or_default();
            if recorded.is_some_and(|e| same(e) && e.id == read.id) && old_outputs == read.outputs {
                return None;
            }
            c.id = Some(read.id.clone());
            c.fields = read
                .outputs
                .iter()
                .filter(|(k, v)| old_outputs.get(*k) != Some(*v))
                .map(|(k, v)| FieldDiff {
                    path: k.clone(),
                    old: old_outputs.get(k).cloned(),
                    new: Some(v.clone()),
                    forces_replace: false,
                })
                .collect();
            c.old_outputs = old_outputs;
            c.adopt = Some(entry(&read.id, &read.outputs));
            Some(c)
        }
    }
}

/// A rendered resource (Kubernetes YAML): `Render` with the YAML's diff when it is new or
/// its inputs changed; nothing in AWS to compare with.
fn rendered_change(
    kind: &dyn Kind,
    r: &Resource,
    recorded: Option<&ResourceState>,
    desired: Attrs,
    planned: &mut PlannedOutputs,
) -> Option<Change> {
    let old_inputs = recorded.map(|e| attrs_from_json(&e.inputs));
    let fields = match &old_inputs {
        Some(old) => field_diffs(kind, old, &desired),
        None => desired
            .iter()
            .map(|(k, v)| FieldDiff { path: k.clone(), old: None, new: Some(v.clone()), forces_replace: false })
            .collect(),
    };
    let outputs = recorded.map(|e| attrs_from_json(&e.outputs));
    planned.insert(r.address.clone(), if fields.is_empty() { outputs.clone() } else { None });
    if recorded.is_some() && fields.is_empty() {
        return None;
    }
    let recorded_outputs = outputs.clone().unwrap_or_default();
    let manifest = kind.render(&r.address, &desired, &recorded_outputs)?;
    let old = old_inputs.as_ref().and_then(|o| kind.render(&r.address, o, &recorded_outputs)).map(|m| m.yaml);
    let action = Action::Render(Box::new(Rendering { file: manifest.file, old, new: manifest.yaml }));
    let mut c = new_change(r.address.clone(), kind.name(), action, None);
    c.fields = fields;
    if let Some(e) = recorded {
        if let Some(old) = &old_inputs {
            c.note = kind.update_note(old, &desired, &c.changed_attrs());
        }
        c.id = Some(e.id.clone());
        c.old_inputs = old_inputs.unwrap_or_default();
        c.old_outputs = outputs.unwrap_or_default();
        c.old_deps = e.deps.clone();
    }
    Some(c)
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
    let mut recorded_inputs = attrs_from_json(&entry.inputs);
    // State written before an attribute existed lacks it: the object has what the attribute's
    // default says (what gpustack sent, or did not, then). Without this a plan that does not
    // refresh showed `null -> default` for every such attribute and sent it (review r19-iam m1).
    // Only where the desired inputs carry the attribute: a kind that normalizes a default away
    // (a VPC with no secondary blocks) records nothing either, and must not diff `[] -> none`.
    for a in r.kind.attrs() {
        if !recorded_inputs.contains_key(a.name)
            && desired.contains_key(a.name)
            && let Some(v) = a.default.value()
        {
            recorded_inputs.insert(a.name.to_string(), v);
        }
    }
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
    .help(format!(
        "a {noun} cannot be modified or cancelled; restore the values, or add a new {kind} (this one runs until its end date)",
        noun = resources::of(r).purchase_noun(),
        kind = r.kind.name()
    ))
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
        // An object read with `existing` is only forgotten: nothing is deleted.
        if resources::existing::in_state(e) {
            let mut c = delete_change(address, e, false, None);
            c.action = Action::Forget;
            deletes.push(c);
            continue;
        }
        // A kind that retains on delete (a Capacity Block, a training plan) is not destroyed by
        // a removal: gpustack forgets it and it runs to its end date, so prevent_destroy has
        // nothing to refuse (import generate writes it on every purchase, and destroy of an
        // imported stack must leave those purchases retained). A replace is still refused.
        let retained = resources::kind(&e.kind).is_some_and(|k| k.retains_on_delete());
        if !retained && (e.prevent_destroy || stack.get(address).is_some_and(|r| r.prevent_destroy)) {
            errors.push(refusal(stack, address, "delete"));
        }
        let observed = refreshed.observed.get(address);
        if deletion_protected(&attrs_from_json(&e.inputs)) || observed.is_some_and(deletion_protected) {
            errors.push(protected_refusal(stack, address, "delete"));
        }
        deletes.push(delete_change(address, e, false, None));
    }
    if scope.is_none() {
        for d in &st.deposed {
            deletes.push(delete_change(&d.address, &d.resource, true, Some("replaced object still to delete".into())));
        }
        // An object tagged for this stack but claimed by nothing is deleted, unless the stack
        // imports it now (re-tagging it for its new address).
        let imported = |id: &str| refreshed.imports.values().flatten().any(|i| i.observed.id == id);
        for (address, e) in refreshed.strays.iter().filter(|(_, e)| !imported(&e.id)) {
            // Tagged by an interrupted import, never recorded: not the stack's to delete (or
            // cancel), only to untag (review imp-core M1).
            if refreshed.interrupted_imports.contains(&e.id) {
                let mut c = delete_change(address, e, true, None);
                c.action = Action::Forget;
                deletes.push(c);
                continue;
            }
            let note = "found by its tags, not in state: left by an interrupted run";
            deletes.push(delete_change(address, e, true, Some(note.into())));
        }
        if opts.destroy {
            for (address, e) in refreshed.adopted.iter().filter(|(a, _)| !st.resources.contains_key(*a)) {
                let retained = resources::kind(&e.kind).is_some_and(|k| k.retains_on_delete());
                if !retained && (e.prevent_destroy || stack.get(address).is_some_and(|r| r.prevent_destroy)) {
                    errors.push(refusal(stack, address, "delete"));
                }
                if deletion_protected(&attrs_from_json(&e.inputs)) {
                    errors.push(protected_refusal(stack, address, "delete"));
                }
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
    let old_inputs = attrs_from_json(&e.inputs);
    let note = note.or_else(|| kind.and_then(|k| k.delete_note(&old_inputs)));
    let mut c = new_change(address.to_string(), kind.map_or("unknown", |k| k.name()), action, note);
    c.id = Some(e.id.clone());
    c.old_inputs = old_inputs;
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

/// AWS's own guard (`eks_cluster.deletion_protection`: "the cluster cannot be deleted unless
/// deletion protection is first disabled", botocore eks `CreateClusterRequest`), recorded or
/// observed.
fn deletion_protected(inputs: &Attrs) -> bool {
    inputs.get("deletion_protection") == Some(&Value::Bool(true))
}

/// The delete would fail at the object itself, but only after everything that depends on it
/// (node groups, add-ons, access entries) was deleted first: refused up front, like
/// prevent_destroy (review r19 M1). Turning the protection off in the same apply does not
/// help: a replace's delete runs with the old inputs, before any update.
fn protected_refusal(stack: &Stack, address: &str, what: &str) -> Diagnostic {
    let span = stack
        .get(address)
        .and_then(|r| r.attrs.get("deletion_protection").and_then(|e| e.span.clone()).or(r.span.clone()));
    Diagnostic::error(
        format!("`{address}` has deletion_protection = true, so AWS refuses to delete it, but this plan would {what} it"),
        span,
    )
    .help(format!(
        "apply deletion_protection = false under [{address}] on its own first, then {what} it; nothing is deleted until then"
    ))
}

/// A replacement the kind does not make silently (a HyperPod cluster): the fields that force
/// it, and how to consent.
fn unconsented_replace(r: &Resource, fields: &[FieldDiff]) -> Diagnostic {
    let forcing: Vec<&str> = fields.iter().filter(|f| f.forces_replace).map(|f| f.path.as_str()).collect();
    Diagnostic::error(
        format!(
            "`{}` would be deleted and created again (its instances and their jobs stop) because {} cannot change in place",
            r.address,
            forcing.join(", ")
        ),
        r.span.clone(),
    )
    .help(format!(
        "undo that change, or write prevent_destroy = false under [{}] to allow the replacement{}",
        r.address,
        group_route(&forcing)
    ))
}

/// How a group field that forces a replacement changes without one: groups are added and
/// removed in place (`UpdateCluster` with a new group name, then `InstanceGroupsToDelete`;
/// SageMaker DG `sagemaker-hyperpod-eks-operate-cli-command-update-cluster` and
/// `smcluster-scale-down`), so the new value goes on a new group and the old group goes.
fn group_route(forcing: &[&str]) -> String {
    let groups: std::collections::BTreeSet<&str> =
        forcing.iter().filter_map(|p| p.strip_prefix("instance_groups.")?.split('.').next()).collect();
    match groups.first() {
        None => String::new(),
        Some(g) => format!(
            "; to keep the cluster, revert instance group {g} and add a group under a new name with the new value (added in place), then remove {g} in a later apply (deleted in place with InstanceGroupsToDelete)"
        ),
    }
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
            // A table of objects (HyperPod's instance groups): an object added or removed
            // counts as the attribute's change; in one both sides have, each field counts
            // as itself (a group's count updates in place, its type replaces).
            (Some(Value::Table(ot)), Some(Value::Table(nt))) if matches!(a.ty, Ty::Map(Ty::Object(_))) => {
                let Ty::Map(Ty::Object(fields)) = a.ty else { continue };
                let keys: BTreeSet<&String> = ot.keys().chain(nt.keys()).collect();
                for k in keys.into_iter().filter(|k| ot.get(*k) != nt.get(*k)) {
                    match (ot.get(k).and_then(Value::as_table), nt.get(k).and_then(Value::as_table)) {
                        (Some(of), Some(nf)) => {
                            let names: BTreeSet<&String> = of.keys().chain(nf.keys()).collect();
                            for f in names.into_iter().filter(|f| of.get(*f) != nf.get(*f)) {
                                let inner = fields.iter().find(|x| x.name == f.as_str());
                                out.push(FieldDiff {
                                    path: format!("{}.{k}.{f}", a.name),
                                    old: of.get(f).cloned(),
                                    new: nf.get(f).cloned(),
                                    forces_replace: inner.is_none_or(|x| x.on_change == OnChange::Replace),
                                });
                            }
                        }
                        _ => out.push(FieldDiff {
                            path: format!("{}.{k}", a.name),
                            old: ot.get(k).cloned(),
                            new: nt.get(k).cloned(),
                            forces_replace,
                        }),
                    }
                }
            }
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
    let replaces = kind.replaces(old, new);
    for f in out.iter_mut().filter(|f| replaces.contains(&f.path.split('.').next().unwrap_or_default())) {
        f.forces_replace = true;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::{Source, VarSources};

    const STACK: &str = r#"
[stack]
name = "t"
region = "us-west-2"

[vpc.main]
cidr_block = "10.0.0.0/16"

[subnet.a]
vpc = "${vpc.main.id}"
cidr_block = "10.0.0.0/20"
availability_zone = "us-west-2a"

[security_group.efa]
vpc = "${vpc.main.id}"
efa = true

[capacity_block.train]
instance_type = "p5.48xlarge"
instance_count = 2
duration_hours = 48
start_after = "AFTER"
start_before = "BEFORE"
max_upfront_usd = 8000
"#;

    /// The block's window starts a week from now (blocks start at most 8 weeks out).
    fn load(text: &str) -> Stack {
        static NOW: std::sync::OnceLock<jiff::Timestamp> = std::sync::OnceLock::new();
        let now = *NOW.get_or_init(jiff::Timestamp::now);
        let day = |n: i64| (now + jiff::SignedDuration::from_hours(24 * n)).to_string();
        let text = text.replace("AFTER", &day(7)).replace("BEFORE", &day(14));
        let none = |_: &str| None;
        crate::load::check(Source::new("t.toml", text), &VarSources { cli: &[], env: &none })
            .unwrap_or_else(|d| panic!("{}", d.render(false)))
    }

    /// A state in which every resource of `stack` was applied as written: id `<name>-id`,
    /// outputs `id` (and `name`) known.
    fn applied(stack: &Stack) -> State {
        let mut st = State::new(&stack.name, &stack.region);
        for idx in crate::graph::topo_order(&stack.resources) {
            let r = &stack.resources[idx];
            let outputs_of = |a: &str| st.resources.get(a).map(|e| attrs_from_json(&e.outputs));
            let inputs = desired_inputs(stack, idx, &outputs_of);
            let id = format!("{}-id", r.name);
            let outputs = Attrs::from([("id".to_string(), Value::str(id.clone()))]);
            let entry = ResourceState {
                kind: r.kind.name().into(),
                id,
                inputs: attrs_to_json(&inputs),
                outputs: attrs_to_json(&outputs),
                deps: r.deps.iter().map(|&d| stack.resources[d].address.clone()).collect(),
                prevent_destroy: false,
            };
            st.resources.insert(r.address.clone(), entry);
        }
        st
    }

    fn plan(stack: &Stack, st: Option<&State>, destroy: bool, targets: &[String]) -> Result<Plan, Vec<Diagnostic>> {
        diff(stack, st, &Refreshed::default(), &Options { destroy, targets })
    }

    fn actions(p: &Plan) -> Vec<(String, &'static str)> {
        p.changes.iter().map(|c| (c.address.clone(), c.action.name())).collect()
    }

    #[test]
    fn an_empty_state_creates_everything_in_dependency_order_and_buys_the_block() {
        let s = load(STACK);
        let p = plan(&s, None, false, &[]).unwrap();
        let order: Vec<&str> = p.changes.iter().map(|c| c.address.as_str()).collect();
        let at = |a: &str| order.iter().position(|x| *x == a).unwrap();
        assert!(at("vpc.main") < at("subnet.a") && at("vpc.main") < at("security_group.efa"), "{order:?}");
        let block = p.changes.iter().find(|c| c.address == "capacity_block.train").unwrap();
        assert_eq!(block.action, Action::Purchase(Offer::NotSearched));
        assert_eq!(p.count(|a| *a == Action::Create), 3);
        // A reference to an object not yet made is unknown, never a guess.
        let subnet = p.changes.iter().find(|c| c.address == "subnet.a").unwrap();
        let vpc = subnet.fields.iter().find(|f| f.path == "vpc").unwrap();
        assert_eq!(vpc.new, Some(Value::Unknown));
    }

    #[test]
    fn a_state_that_matches_has_no_changes() {
        let s = load(STACK);
        let st = applied(&s);
        let p = plan(&s, Some(&st), false, &[]).unwrap();
        assert!(!p.has_changes(), "{:?}", actions(&p));
        assert_eq!(p.unchanged, 4);
    }

    #[test]
    fn a_tag_updates_in_place_key_by_key() {
        let s = load(STACK);
        let st = applied(&s);
        let s2 = load(&STACK.replace("efa = true", "efa = true\ntags = { team = \"ml\" }"));
        let p = plan(&s2, Some(&st), false, &[]).unwrap();
        assert_eq!(actions(&p), vec![("security_group.efa".to_string(), "update")]);
        let f = &p.changes[0].fields[0];
        assert_eq!((f.path.as_str(), &f.old, &f.new), ("tags.team", &None, &Some(Value::str("ml"))));
        assert!(!f.forces_replace);
    }

    #[test]
    fn a_new_subnet_cidr_replaces_it_in_the_kinds_order() {
        let s = load(STACK);
        let st = applied(&s);
        let p = plan(&load(&STACK.replace("10.0.0.0/20", "10.0.16.0/20")), Some(&st), false, &[]).unwrap();
        assert_eq!(actions(&p), vec![("subnet.a".to_string(), "replace")]);
        // Subnet CIDRs must be free before the new one: delete first.
        assert_eq!(p.changes[0].action, Action::DeleteThenCreate);
        assert!(p.changes[0].fields.iter().any(|f| f.path == "cidr_block" && f.forces_replace));
    }

    #[test]
    fn removed_resources_are_deleted_and_a_bought_block_is_retained() {
        let s = load(STACK);
        let st = applied(&s);
        let fewer = STACK.split("[security_group.efa]").next().unwrap();
        let p = plan(&load(fewer), Some(&st), false, &[]).unwrap();
        let mut got = actions(&p);
        got.sort();
        assert_eq!(
            got,
            vec![("capacity_block.train".to_string(), "retain"), ("security_group.efa".to_string(), "delete")]
        );
    }

    #[test]
    fn a_bought_block_cannot_change() {
        let s = load(STACK);
        let st = applied(&s);
        let errors = plan(&load(&STACK.replace("instance_count = 2", "instance_count = 4")), Some(&st), false, &[])
            .err()
            .expect("a change to a bought block is refused");
        assert!(errors[0].message.contains("was bought and cannot change: instance_count"), "{}", errors[0].message);
    }

    #[test]
    fn prevent_destroy_refuses_a_delete_and_a_replace() {
        let guarded = STACK.replace("[subnet.a]", "[subnet.a]\nprevent_destroy = true");
        let s = load(&guarded);
        let st = applied(&s);
        let errors = plan(&s, Some(&st), true, &[]).err().expect("destroy is refused");
        assert!(errors[0].message.contains("`subnet.a` has prevent_destroy = true, but this plan would delete it"));
        let moved = guarded.replace("10.0.0.0/20", "10.0.16.0/20");
        let errors = plan(&load(&moved), Some(&st), false, &[]).err().expect("replace is refused");
        assert!(errors[0].message.contains("would replace it"), "{}", errors[0].message);
    }

    /// A purchase that retains on delete is only forgotten by a destroy: prevent_destroy does
    /// not refuse that (integrator decision), but still refuses the change that would replace it.
    #[test]
    fn prevent_destroy_on_a_bought_block_allows_the_retain_not_a_replace() {
        let guarded = STACK.replace("[capacity_block.train]", "[capacity_block.train]\nprevent_destroy = true");
        assert_ne!(guarded, STACK);
        let s = load(&guarded);
        let st = applied(&s);
        let p = plan(&s, Some(&st), true, &[]).expect("destroy retains the block");
        let block = p.changes.iter().find(|c| c.address == "capacity_block.train").unwrap();
        assert_eq!(block.action, Action::Retain);
        let fewer = guarded.split("[capacity_block.train]").next().unwrap();
        assert!(plan(&load(fewer), Some(&st), false, &[]).is_ok(), "removing it retains it");
        let errors = plan(&load(&guarded.replace("instance_count = 2", "instance_count = 4")), Some(&st), false, &[])
            .err()
            .expect("a change is refused");
        assert!(errors.iter().any(|e| e.message.contains("cannot change")), "{:?}", errors);
    }

    #[test]
    fn destroy_deletes_dependents_first_and_targets_take_what_they_need() {
        let s = load(STACK);
        let st = applied(&s);
        let p = plan(&s, Some(&st), true, &[]).unwrap();
        let order: Vec<&str> = p.changes.iter().map(|c| c.address.as_str()).collect();
        let at = |a: &str| order.iter().position(|x| *x == a).unwrap();
        assert!(at("subnet.a") < at("vpc.main") && at("security_group.efa") < at("vpc.main"), "{order:?}");

        let p = plan(&s, None, false, &["subnet.a".to_string()]).unwrap();
        let mut got: Vec<&str> = p.changes.iter().map(|c| c.address.as_str()).collect();
        got.sort();
        assert_eq!(got, vec!["subnet.a", "vpc.main"]);

        let errors = plan(&s, None, false, &["subnet.b".to_string()]).err().unwrap();
        assert_eq!(errors[0].help.as_deref(), Some("did you mean subnet.a?"));
    }

    const PG: &str = "[stack]\nname = \"t\"\nregion = \"us-west-2\"\n[placement_group.train]\nstrategy = \"cluster\"\nname = \"train-pg\"\nPD\n[import]\n\"placement_group.train\" = \"train-pg\"\n";

    fn pg_stack(pd: &str) -> Stack {
        load(&PG.replace("PD", pd))
    }

    /// What `Kind::import` returns for the group: `strategy` and user `tags` as AWS shows them.
    fn pg_read(strategy: &str, tags: &[(&str, &str)]) -> Refreshed {
        let tags = Value::Table(tags.iter().map(|(k, v)| (k.to_string(), Value::str(*v))).collect());
        let observed = resources::Observed {
            address: None,
            id: "pg-0123".into(),
            attrs: Attrs::from([
                ("strategy".to_string(), Value::str(strategy)),
                ("name".to_string(), Value::str("train-pg")),
                ("tags".to_string(), tags),
            ]),
            outputs: Attrs::from([
                ("id".to_string(), Value::str("pg-0123")),
                ("name".to_string(), Value::str("train-pg")),
            ]),
            retained: false,
        };
        let imported = resources::Imported { observed, unexpressed: vec![] };
        Refreshed {
            imports: HashMap::from([("placement_group.train".to_string(), Some(imported))]),
            ..Default::default()
        }
    }

    fn plan_with(s: &Stack, st: Option<&State>, r: &Refreshed) -> Result<Plan, Vec<Diagnostic>> {
        diff(s, st, r, &Options { destroy: false, targets: &[] })
    }

    #[test]
    fn an_import_that_matches_the_file_is_recorded_and_tagged_but_changes_nothing() {
        let s = pg_stack("");
        let p = plan_with(&s, None, &pg_read("cluster", &[])).unwrap();
        assert_eq!(actions(&p), vec![("placement_group.train".to_string(), "import")]);
        let c = &p.changes[0];
        assert!(c.fields.is_empty(), "{:?}", c.fields);
        assert_eq!(c.id.as_deref(), Some("pg-0123"));
        let entry = c.adopt.as_ref().expect("recorded by the apply");
        assert_eq!((entry.id.as_str(), entry.outputs.get("id")), ("pg-0123", Some(&serde_json::json!("pg-0123"))));
        assert!(p.has_changes() && !p.changes_anything(), "a clean import is no change for --detailed-exitcode");
    }

    #[test]
    fn an_imported_field_that_differs_is_the_update_the_apply_makes() {
        let s = load(&PG.replace("PD", "tags = { team = \"ml\" }"));
        let p = plan_with(&s, None, &pg_read("cluster", &[("team", "infra")])).unwrap();
        let c = &p.changes[0];
        assert_eq!(c.action, Action::Import);
        let got: Vec<(&str, &Option<Value>, &Option<Value>)> =
            c.fields.iter().map(|f| (f.path.as_str(), &f.old, &f.new)).collect();
        assert_eq!(got, vec![("tags.team", &Some(Value::str("infra")), &Some(Value::str("ml")))]);
        assert!(p.changes_anything());
    }

    #[test]
    fn an_import_that_would_replace_needs_prevent_destroy_false_spelled_out() {
        let errors = plan_with(&pg_stack(""), None, &pg_read("spread", &[])).err().expect("refused");
        assert!(
            errors[0].message.contains("importing `placement_group.train` (pg-0123) would replace it: strategy"),
            "{}",
            errors[0].message
        );
        let errors = plan_with(&pg_stack("prevent_destroy = true"), None, &pg_read("spread", &[])).err().unwrap();
        assert!(errors[0].message.contains("prevent_destroy = true"), "{}", errors[0].message);
        let p = plan_with(&pg_stack("prevent_destroy = false"), None, &pg_read("spread", &[])).unwrap();
        assert_eq!(p.changes[0].action, Action::DeleteThenCreate);
        assert_eq!(p.changes[0].adopt.as_ref().map(|e| e.id.as_str()), Some("pg-0123"));
    }

    #[test]
    fn an_import_id_that_names_nothing_is_an_error_naming_it() {
        let s = pg_stack("");
        let r =
            Refreshed { imports: HashMap::from([("placement_group.train".to_string(), None)]), ..Default::default() };
        let errors = plan_with(&s, None, &r).err().expect("refused");
        assert!(
            errors[0]
                .message
                .contains("`[import]` `placement_group.train`: no placement_group \"train-pg\" exists in us-west-2"),
            "{}",
            errors[0].message
        );
        assert_eq!(s.source.location(&errors[0].span), "t.toml:9:27");
    }

    #[test]
    fn an_offline_plan_does_not_pretend_to_know_an_import() {
        let p = plan_with(&pg_stack(""), None, &Refreshed::skipped()).unwrap();
        let c = &p.changes[0];
        assert_eq!((c.action.name(), c.adopt.is_none()), ("import", true));
        assert!(c.note.as_deref().unwrap_or_default().contains("not read (--refresh=false)"));
        assert!(p.changes_anything(), "an unread import may differ: it counts as a change");
    }

    #[test]
    fn an_import_of_an_address_in_state_is_a_no_op_unless_it_names_another_object() {
        let s = pg_stack("");
        let mut st = applied(&s);
        st.resources.get_mut("placement_group.train").unwrap().id = "pg-0123".into();
        // Same object (the plan did not need to read it): nothing to do.
        let p = plan_with(&s, Some(&st), &Refreshed::default()).unwrap();
        assert!(!p.has_changes(), "{:?}", actions(&p));
        st.resources.get_mut("placement_group.train").unwrap().id = "pg-other".into();
        let errors = plan_with(&s, Some(&st), &pg_read("cluster", &[])).err().expect("refused");
        assert!(
            errors[0].message.contains("the state already holds another object there: pg-other"),
            "{}",
            errors[0].message
        );
    }

    /// An object tagged for this stack that nothing claims is deleted as a stray, unless the
    /// stack imports it now: then it is imported, not deleted.
    #[test]
    fn a_stray_the_stack_imports_is_not_deleted() {
        let s = pg_stack("");
        let mut r = pg_read("cluster", &[]);
        let stray = ResourceState {
            kind: "placement_group".into(),
            id: "pg-0123".into(),
            inputs: Default::default(),
            outputs: Default::default(),
            deps: vec![],
            prevent_destroy: false,
        };
        r.strays = vec![("placement_group.old".into(), stray)];
        let p = plan_with(&s, None, &r).unwrap();
        assert_eq!(actions(&p), vec![("placement_group.train".to_string(), "import")]);
    }

    /// Review imp-core m1: every import the kind refuses is its own error, at its entry, in
    /// one pass (not a bare error that stops the refresh at the first).
    #[test]
    fn refused_imports_are_each_an_error_at_their_entry() {
        let text = "[stack]\nname = \"t\"\nregion = \"us-west-2\"\n[placement_group.a]\nstrategy = \"cluster\"\n[placement_group.b]\nstrategy = \"cluster\"\n[import]\n\"placement_group.a\" = \"pg-a\"\n\"placement_group.b\" = \"pg-b\"\n";
        let s = load(text);
        let r = Refreshed {
            import_refusals: HashMap::from([
                ("placement_group.a".to_string(), "pg-a is no good".to_string()),
                ("placement_group.b".to_string(), "pg-b is no good either".to_string()),
            ]),
            ..Default::default()
        };
        let errors = plan_with(&s, None, &r).err().expect("refused");
        let mut got: Vec<(String, String)> =
            errors.iter().map(|e| (e.message.clone(), s.source.location(&e.span))).collect();
        got.sort();
        assert_eq!(
            got,
            vec![
                (
                    "`[import]` `placement_group.a`: cannot import pg-a: pg-a is no good".to_string(),
                    "t.toml:9:23".to_string()
                ),
                (
                    "`[import]` `placement_group.b`: cannot import pg-b: pg-b is no good either".to_string(),
                    "t.toml:10:23".to_string()
                ),
            ]
        );
    }

    /// Review imp-core M1: an object tagged by an interrupted import (pending import still
    /// found by its tags) that the file no longer imports is only untagged (`forget`), never
    /// deleted or cancelled; an object tagged by the stack's own interrupted create still is.
    #[test]
    fn an_interrupted_import_the_file_dropped_is_released_not_deleted() {
        let s = load("[stack]\nname = \"t\"\nregion = \"us-west-2\"\n[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n");
        let stray = |id: &str| ResourceState {
            kind: "capacity_reservation".into(),
            id: id.into(),
            inputs: Default::default(),
            outputs: Default::default(),
            deps: vec![],
            prevent_destroy: false,
        };
        let r = Refreshed {
            strays: vec![
                ("capacity_reservation.odcr".into(), stray("cr-0abc")),
                ("capacity_reservation.made".into(), stray("cr-0mine")),
            ],
            interrupted_imports: ["cr-0abc".to_string()].into(),
            ..Default::default()
        };
        let p = plan_with(&s, None, &r).unwrap();
        let mut got = actions(&p);
        got.retain(|(a, _)| a.starts_with("capacity_reservation"));
        got.sort();
        assert_eq!(
            got,
            vec![
                ("capacity_reservation.made".to_string(), "delete"),
                ("capacity_reservation.odcr".to_string(), "forget")
            ]
        );
        let released = p.changes.iter().find(|c| c.address == "capacity_reservation.odcr").unwrap();
        assert!(released.stray && released.id.as_deref() == Some("cr-0abc"));
        let text = crate::plan::render::render(&p, "", &crate::plan::render::Style { color: false });
        assert!(text.contains("tagged by an interrupted import"), "{text}");
    }

    /// A reservation the stack read with `existing` is taken over when the file writes its
    /// attributes instead and names it under `[import]`: an import, not a refusal.
    #[test]
    fn a_read_object_is_taken_over_with_import() {
        let text = "[stack]\nname = \"t\"\nregion = \"us-west-2\"\n[capacity_reservation.odcr]\ninstance_type = \"p5.48xlarge\"\navailability_zone = \"us-west-2a\"\ninstance_count = 1\nend_date = \"2026-12-31T00:00:00Z\"\n[import]\n\"capacity_reservation.odcr\" = \"cr-0abc\"\n";
        let s = load(text);
        let mut st = State::new("t", "us-west-2");
        st.resources.insert(
            "capacity_reservation.odcr".into(),
            ResourceState {
                kind: "capacity_reservation".into(),
                id: "cr-0abc".into(),
                inputs: attrs_to_json(&Attrs::from([("existing".to_string(), Value::str("cr-0abc"))])),
                outputs: Default::default(),
                deps: vec![],
                prevent_destroy: false,
            },
        );
        let idx = s.by_address["capacity_reservation.odcr"];
        let desired = desired_inputs(&s, idx, &|_| None);
        let observed = resources::Observed {
            address: None,
            id: "cr-0abc".into(),
            attrs: desired.clone(),
            outputs: Attrs::from([("id".to_string(), Value::str("cr-0abc"))]),
            retained: false,
        };
        let imported = resources::Imported { observed, unexpressed: vec![] };
        let r = Refreshed {
            imports: HashMap::from([("capacity_reservation.odcr".to_string(), Some(imported))]),
            ..Default::default()
        };
        let p = plan_with(&s, Some(&st), &r).unwrap();
        assert_eq!(actions(&p), vec![("capacity_reservation.odcr".to_string(), "import")]);
        assert!(p.changes[0].fields.is_empty(), "{:?}", p.changes[0].fields);
    }
}
