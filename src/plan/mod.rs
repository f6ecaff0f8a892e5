//! Plans: what apply would do, computed from the stack (desired), the state
//! (recorded) and refresh (observed). Pure: `diff` makes no AWS call; refresh
//! results come in as [`Refreshed`].

pub mod file;
pub mod refresh;
pub mod render;

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value as Json};

pub use refresh::Refreshed;

use crate::resources::ReplaceOrder;
pub use crate::resources::capacity_block::Purchase;
use crate::stack::schema::OnChange;
use crate::stack::{Diagnostic, Stack};
use crate::state::{ResourceState, State};
use crate::value::{Attrs, Value, attrs_from_json, attrs_to_json};

/// What apply does to one object. The symbols are what users see.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Create,
    Update,
    Replace,
    Delete,
    /// No change to AWS; state learns of an object found by its tags.
    Adopt,
}

impl Action {
    pub fn symbol(self, order: Option<ReplaceOrder>) -> &'static str {
        match self {
            Action::Create => "+",
            Action::Update => "~",
            Action::Replace if order == Some(ReplaceOrder::CreateBeforeDestroy) => "+/-",
            Action::Replace => "-/+",
            Action::Delete => "-",
            Action::Adopt => "=",
        }
    }
}

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
    pub replace_order: Option<ReplaceOrder>,
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
    /// A create that buys capacity: the offering the plan proposes (filled at plan time).
    pub purchase: Option<Purchase>,
    /// A create that buys capacity, planned without AWS (`--refresh=false`): what it would
    /// search for; the offering and price are looked up by a refreshing plan.
    pub unpriced_purchase: Option<String>,
    /// A delete that only lets go of the object (it cannot be deleted, e.g. a Capacity Block).
    pub retain: bool,
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

    pub fn count(&self, a: Action) -> usize {
        self.changes.iter().filter(|c| c.action == a).count()
    }
}

/// The inputs a resource would be created or updated with: references looked up
/// through `outputs_of` (an unknown output is `Unknown`), defaults filled, the
/// stack's tags merged, physical name and description defaulted, normalized.
pub fn desired_inputs(stack: &Stack, idx: usize, outputs_of: &dyn Fn(&str) -> Option<Attrs>) -> Attrs {
    let r = &stack.resources[idx];
    let lookup = |x: &crate::stack::OutputRef| -> Value {
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
    crate::resources::of(r).normalize(&mut inputs);
    inputs
}

/// Options that shape a plan.
pub struct Options<'a> {
    pub destroy: bool,
    /// Addresses given with --target (empty: everything).
    pub targets: &'a [String],
}

/// Computes the plan. Errors are refusals (prevent_destroy, unknown target).
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
    let mut planned_outputs: HashMap<String, Option<Attrs>> = HashMap::new();

    if !opts.destroy {
        for idx in crate::graph::topo_order(&stack.resources) {
            let r = &stack.resources[idx];
            let kind = crate::resources::of(r);
            let in_scope = scope.as_ref().is_none_or(|s| s.contains(&r.address));
            let recorded = st.resources.get(&r.address);
            let adopted = refreshed.adopted.get(&r.address);
            let outputs_of = |a: &str| -> Option<Attrs> {
                match planned_outputs.get(a) {
                    Some(o) => o.clone(),
                    None => st.resources.get(a).map(|e| attrs_from_json(&e.outputs)),
                }
            };
            let desired = desired_inputs(stack, idx, &outputs_of);
            let entry = recorded.cloned().or_else(|| adopted.cloned());
            let Some(entry) = entry else {
                planned_outputs.insert(r.address.clone(), None);
                if in_scope {
                    let mut c = new_change(
                        r.address.clone(),
                        r.kind.name(),
                        Action::Create,
                        refreshed.notes.get(&r.address).cloned(),
                    );
                    c.fields = desired
                        .iter()
                        .map(|(k, v)| FieldDiff {
                            path: k.clone(),
                            old: None,
                            new: Some(v.clone()),
                            forces_replace: false,
                        })
                        .collect();
                    changes.push(c);
                }
                continue;
            };
            let observed = refreshed.observed.get(&r.address);
            let recorded_inputs = attrs_from_json(&entry.inputs);
            let current = match (adopted.is_some() && recorded.is_none(), observed) {
                // Found by tags: what refresh cannot see is re-applied if it updates in place,
                // trusted if it would force a replace.
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
            };
            let fields = field_diffs(kind, &current, &desired);
            let replace = fields.iter().any(|f| f.forces_replace);
            let old_outputs = attrs_from_json(&entry.outputs);
            let mut change = new_change(r.address.clone(), r.kind.name(), Action::Update, None);
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
            if replace && kind.retains_on_delete() {
                let fields: Vec<&FieldDiff> = change.fields.iter().filter(|f| f.forces_replace).collect();
                let first = fields
                    .first()
                    .map(|f| f.path.split('.').next().unwrap_or_default().to_string())
                    .unwrap_or_default();
                let span = r.attrs.get(&first).and_then(|e| e.span.clone()).or(r.span.clone());
                let what: Vec<String> = fields.iter().map(|f| f.path.clone()).collect();
                errors.push(
                    Diagnostic::error(
                        format!(
                            "`{}` ({}) was bought and cannot change: {} differ from what was bought",
                            r.address,
                            entry.id,
                            what.join(", ")
                        ),
                        span,
                    )
                    .help("a Capacity Block cannot be modified or cancelled; restore the values, or add a new capacity_block (this one runs until its end date)"),
                );
            }
            if replace {
                planned_outputs.insert(r.address.clone(), None);
                change.action = Action::Replace;
                change.replace_order = Some(kind.replace_order());
                if r.prevent_destroy {
                    errors.push(refusal(stack, &r.address, "replace"));
                }
            } else {
                if !change.fields.is_empty() {
                    if let Some(n) = kind.update_note(&current, &desired, &change.changed_attrs()) {
                        change.note = Some(n);
                    }
                    for (attr, msg, help) in kind.check_update(&current, &desired) {
                        let span = r.attrs.get(attr).and_then(|e| e.span.clone()).or(r.span.clone());
                        errors.push(Diagnostic::error(format!("`{}`: {msg}", r.address), span).help(help));
                    }
                }
                let mut outputs = old_outputs;
                if !change.fields.is_empty() {
                    for o in kind.outputs_changed_by_update() {
                        outputs.insert(o.to_string(), Value::Unknown);
                    }
                }
                planned_outputs.insert(r.address.clone(), Some(outputs));
                if change.fields.is_empty() {
                    change.action = Action::Adopt;
                    // Only prevent_destroy changed: state records it, AWS is not touched.
                    if change.adopt.is_none() && entry.prevent_destroy != r.prevent_destroy {
                        let mut e = entry.clone();
                        e.prevent_destroy = r.prevent_destroy;
                        change.adopt = Some(e);
                        change.note = Some(format!(
                            "prevent_destroy: {} → {} (state only)",
                            entry.prevent_destroy, r.prevent_destroy
                        ));
                    }
                }
            }
            if !in_scope || (change.action == Action::Adopt && change.adopt.is_none()) {
                unchanged += 1;
                continue;
            }
            changes.push(change);
        }
    }

    // Objects in state but not (or no longer) wanted, deposed copies and objects found by tags.
    let wanted = |a: &str| !opts.destroy && stack.by_address.contains_key(a);
    let mut deletes = vec![];
    for (address, e) in &st.resources {
        if wanted(address) || scope.as_ref().is_some_and(|s| !s.contains(address)) {
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
            deletes.push(delete_change(
                address,
                e,
                true,
                Some("found by its tags, not in state: left by an interrupted run".into()),
            ));
        }
        if opts.destroy {
            for (address, e) in &refreshed.adopted {
                if !st.resources.contains_key(address) {
                    deletes.push(delete_change(address, e, true, Some("found by its tags, not in state".into())));
                }
            }
        }
    }
    // Dependents first: a stable order for display; the executor orders by edges anyway.
    deletes.sort_by_key(|c| std::cmp::Reverse(kind_rank(c.kind)));
    changes.extend(deletes);

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

fn new_change(address: String, kind: &'static str, action: Action, note: Option<String>) -> Change {
    Change {
        address,
        kind,
        action,
        fields: vec![],
        replace_order: None,
        id: None,
        old_inputs: Attrs::new(),
        old_outputs: Attrs::new(),
        old_deps: vec![],
        adopt: None,
        stray: false,
        note,
        purchase: None,
        unpriced_purchase: None,
        retain: false,
    }
}

fn delete_change(address: &str, e: &ResourceState, stray: bool, note: Option<String>) -> Change {
    let kind = crate::resources::kind(&e.kind).map_or("unknown", |k| k.name());
    let mut c = new_change(address.to_string(), kind, Action::Delete, note);
    c.id = Some(e.id.clone());
    c.old_inputs = attrs_from_json(&e.inputs);
    c.old_outputs = attrs_from_json(&e.outputs);
    c.old_deps = e.deps.clone();
    c.stray = stray;
    c.retain = crate::resources::kind(&e.kind).is_some_and(|k| k.retains_on_delete());
    c
}

/// Position in the kind registry: later kinds may depend on earlier ones.
pub fn kind_rank(name: &str) -> usize {
    crate::resources::KINDS.iter().position(|k| k.name() == name).unwrap_or(0)
}

fn refusal(stack: &Stack, address: &str, what: &str) -> Diagnostic {
    let span = stack.get(address).and_then(|r| r.span.clone());
    Diagnostic::error(format!("`{address}` has prevent_destroy = true, but this plan would {what} it"), span)
        .help("remove prevent_destroy from the resource first if you really mean to, or change the stack so it is kept")
}

/// Field-level differences; tables are compared key by key.
fn field_diffs(kind: &dyn crate::resources::Kind, old: &Attrs, new: &Attrs) -> Vec<FieldDiff> {
    let mut out = vec![];
    for a in kind.attrs() {
        let (o, n) = (old.get(a.name), new.get(a.name));
        if o == n {
            continue;
        }
        let forces_replace = a.on_change == OnChange::Replace;
        match (o, n) {
            (Some(Value::Table(ot)), Some(Value::Table(nt)))
                if a.name == "tags" || matches!(a.ty, crate::stack::schema::Ty::Map(_)) =>
            {
                let keys: std::collections::BTreeSet<&String> = ot.keys().chain(nt.keys()).collect();
                for k in keys {
                    let (ov, nv) = (ot.get(k), nt.get(k));
                    if ov != nv {
                        out.push(FieldDiff {
                            path: format!("{}.{k}", a.name),
                            old: ov.cloned(),
                            new: nv.cloned(),
                            forces_replace,
                        });
                    }
                }
            }
            _ => out.push(FieldDiff { path: a.name.to_string(), old: o.cloned(), new: n.cloned(), forces_replace }),
        }
    }
    out
}

/// With --target: the targets and everything they depend on. Unknown targets are errors.
fn target_scope(stack: &Stack, st: &State, opts: &Options) -> Result<Option<HashSet<String>>, Vec<Diagnostic>> {
    if opts.targets.is_empty() {
        return Ok(None);
    }
    let mut scope = HashSet::new();
    let mut errors = vec![];
    for t in opts.targets {
        match stack.by_address.get(t) {
            Some(&i) => {
                if opts.destroy {
                    // Destroying a target takes its dependents with it.
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
                } else {
                    let mut stack_ix = vec![i];
                    while let Some(j) = stack_ix.pop() {
                        if scope.insert(stack.resources[j].address.clone()) {
                            stack_ix.extend(stack.resources[j].deps.iter().copied());
                        }
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

/// JSON for `plan --json`.
pub fn to_json(plan: &Plan) -> Json {
    let changes: Vec<Json> = plan
        .changes
        .iter()
        .map(|c| {
            let fields: Vec<Json> = c
                .fields
                .iter()
                .map(|f| {
                    serde_json::json!({
                        "path": f.path,
                        "old": f.old.as_ref().map(Value::to_json),
                        "new": f.new.as_ref().map(|v| if v.is_known() { v.to_json() } else { Json::String("(known after apply)".into()) }),
                        "forces_replace": f.forces_replace,
                    })
                })
                .collect();
            let mut m = Map::new();
            m.insert("address".into(), c.address.clone().into());
            m.insert("kind".into(), c.kind.into());
            m.insert("action".into(), serde_json::to_value(c.action).unwrap_or_default());
            if let Some(id) = &c.id {
                m.insert("id".into(), id.clone().into());
            }
            if let Some(o) = c.replace_order {
                m.insert(
                    "replace_order".into(),
                    match o {
                        ReplaceOrder::CreateBeforeDestroy => "create_before_destroy",
                        ReplaceOrder::DeleteBeforeCreate => "delete_before_create",
                    }
                    .into(),
                );
            }
            if let Some(n) = &c.note {
                m.insert("note".into(), n.clone().into());
            }
            if let Some(p) = &c.unpriced_purchase {
                m.insert("purchase".into(), serde_json::json!({"offering_id": null, "looked_up": false, "note": p}));
            }
            if let Some(p) = &c.purchase {
                m.insert("purchase".into(), serde_json::to_value(p).unwrap_or_default());
            }
            if c.retain {
                m.insert("retain".into(), true.into());
            }
            m.insert("fields".into(), fields.into());
            Json::Object(m)
        })
        .collect();
    serde_json::json!({
        "stack": plan.stack,
        "region": plan.region,
        "serial": plan.serial,
        "lineage": plan.lineage,
        "summary": {
            "create": plan.count(Action::Create),
            "update": plan.count(Action::Update),
            "replace": plan.count(Action::Replace),
            "delete": plan.count(Action::Delete),
            "adopt": plan.count(Action::Adopt),
            "unchanged": plan.unchanged,
        },
        "changes": changes,
        "purchases_usd": purchases_usd(plan),
        "warnings": plan.warnings,
    })
}

/// The plan's purchases in USD. Folded from +0.0: an empty `f64` sum is -0.0, which JSON
/// would show as `"purchases_usd": -0.0` for a plan that buys nothing.
fn purchases_usd(plan: &Plan) -> f64 {
    plan.changes.iter().filter_map(|c| c.purchase.as_ref()).fold(0.0, |total, p| total + p.upfront_usd)
}

/// A stable fingerprint of what a plan does, for refusing a saved plan whose world moved.
pub fn fingerprint(plan: &Plan) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for c in &plan.changes {
        h.update(format!("{}|{:?}|{:?}|{:?}|", c.address, c.action, c.id, c.purchase));
        for f in &c.fields {
            h.update(format!("{}={:?}>{:?};", f.path, f.old, f.new));
        }
    }
    format!("{:x}", h.finalize())
}
