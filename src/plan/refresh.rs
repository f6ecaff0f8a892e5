//! Refresh: one batched read per kind (objects found by the `gpustack:stack`
//! tag), merged into a working copy of the state. Objects the state names but
//! AWS no longer has are dropped; objects AWS has and the state lacks are
//! adopted (when the stack declares their address) or marked to delete. This is
//! what resolves the journal's pending entries after a crash.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use anyhow::{Context, Result};

use crate::aws::Ctx;
use crate::resources::{self, Kind, Observed};
use crate::stack::Stack;
use crate::state::{ResourceState, State};
use crate::value::{attrs_to_json, Attrs};

#[derive(Default)]
pub struct Refreshed {
    /// The state after merging what refresh found; `None` when refresh was skipped.
    pub state: Option<State>,
    /// What AWS shows for each address now.
    pub observed: HashMap<String, Attrs>,
    /// Objects found by their tags for addresses the state lacks.
    pub adopted: BTreeMap<String, ResourceState>,
    /// Objects tagged for this stack that nothing claims: to delete.
    pub strays: Vec<(String, ResourceState)>,
    pub notes: HashMap<String, String>,
    pub skipped: bool,
}

impl Refreshed {
    pub fn skipped() -> Refreshed {
        Refreshed { skipped: true, ..Default::default() }
    }
}

/// Reads every kind the stack or the state uses, concurrently, one paged call each.
pub async fn refresh(ctx: &Ctx, stack: &Stack, state: Option<&State>) -> Result<Refreshed> {
    let mut kinds: BTreeSet<&'static str> = stack.resources.iter().map(|r| r.kind.name()).collect();
    if let Some(st) = state {
        kinds.extend(st.resources.values().filter_map(|e| resources::kind(&e.kind)).map(|k| k.name()));
        kinds.extend(st.deposed.iter().filter_map(|d| resources::kind(&d.resource.kind)).map(|k| k.name()));
        kinds.extend(st.pending.iter().filter_map(|p| resources::kind(&p.kind)).map(|k| k.name()));
    }
    let mut tasks = tokio::task::JoinSet::new();
    for name in kinds {
        let Some(kind) = resources::kind(name) else { continue };
        let ctx = ctx.clone();
        tasks.spawn(async move { (kind, kind.read_all(&ctx).await) });
    }
    let mut found: Vec<(&'static dyn Kind, Vec<Observed>)> = vec![];
    while let Some(joined) = tasks.join_next().await {
        let (kind, res) = joined.context("a refresh task failed")?;
        let observed = res.with_context(|| format!("refreshing {} objects of stack {}", kind.name(), ctx.stack))?;
        found.push((kind, observed));
    }
    found.sort_by_key(|(k, _)| crate::plan::kind_rank(k.name()));
    Ok(merge(stack, state, found))
}

/// Pure merge of observations into the state (separate for testing).
pub fn merge(stack: &Stack, state: Option<&State>, found: Vec<(&'static dyn Kind, Vec<Observed>)>) -> Refreshed {
    let mut st = state.cloned().unwrap_or_else(|| State::new(&stack.name, &stack.region));
    let mut out = Refreshed::default();
    for (kind, observed) in found {
        let mut by_id: HashMap<String, Observed> = observed.into_iter().map(|o| (o.id.clone(), o)).collect();
        let addresses: Vec<String> = st.resources.iter().filter(|(_, e)| e.kind == kind.name()).map(|(a, _)| a.clone()).collect();
        for a in addresses {
            let id = st.resources[&a].id.clone();
            match by_id.remove(&id) {
                Some(o) => {
                    if let Some(e) = st.resources.get_mut(&a) {
                        e.outputs.extend(attrs_to_json(&o.outputs));
                    }
                    out.observed.insert(a, o.attrs);
                }
                None => {
                    st.resources.remove(&a);
                    out.notes.insert(a, format!("{id} was deleted outside gpustack"));
                }
            }
        }
        st.deposed.retain(|d| d.resource.kind != kind.name() || by_id.remove(&d.resource.id).is_some());
        let mut rest: Vec<Observed> = by_id.into_values().collect();
        rest.sort_by(|a, b| a.id.cmp(&b.id));
        for o in rest {
            let entry = ResourceState {
                kind: kind.name().to_string(),
                id: o.id.clone(),
                inputs: attrs_to_json(&o.attrs),
                outputs: attrs_to_json(&o.outputs),
                deps: vec![],
                prevent_destroy: false,
            };
            let address = o.address.clone().unwrap_or_else(|| format!("{}.{}", kind.name(), o.id));
            let declared = stack.get(&address).is_some_and(|r| r.kind.name() == kind.name());
            if declared && !st.resources.contains_key(&address) && !out.adopted.contains_key(&address) {
                out.notes.insert(address.clone(), format!("adopting {} found by its gpustack:address tag", o.id));
                out.observed.insert(address.clone(), o.attrs);
                out.adopted.insert(address, entry);
            } else {
                out.strays.push((address, entry));
            }
        }
    }
    st.pending.clear();
    out.state = Some(st);
    out
}
