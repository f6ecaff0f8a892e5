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
use crate::value::{Attrs, attrs_to_json};

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
    /// What refresh read for the resources that name an object they do not own
    /// (`existing`): its id and outputs, or why it could not be read (no match, several).
    /// Absent for one whose lookup is not known yet (its `vpc` is created by this plan).
    pub existing: HashMap<String, std::result::Result<resources::Recorded, String>>,
    /// Addresses whose pending create found nothing tagged for them: the call may still be
    /// landing (AWS shows new objects after a moment), so look again before creating anew.
    pub unconfirmed: Vec<String>,
    /// `[import]` entries read with [`Kind::import`]: for an address the state does not hold
    /// yet, and for one it holds under another id (to compare the two objects).
    /// `None`: nothing has that id. An entry whose object the state already holds is not read.
    pub imports: HashMap<String, Option<resources::Imported>>,
    /// Ids of objects an interrupted import tagged for this stack before recording them
    /// (pending [`crate::state::Operation::Import`] entries still found by their tags): never
    /// deleted as strays, only untagged (review imp-core M1).
    pub interrupted_imports: BTreeSet<String>,
    /// `[import]` entries whose object the kind found but refused to import, and why (not in
    /// `imports`): reported each at its entry.
    pub import_refusals: HashMap<String, String>,
}

impl Refreshed {
    pub fn skipped() -> Refreshed {
        Refreshed { skipped: true, ..Default::default() }
    }
}

/// Refreshes; when a pending create of an interrupted run finds nothing tagged for it, waits
/// `settle` (after telling `on_wait` which addresses) and looks once more, because the call may
/// have landed just as the run died and AWS shows new objects after a moment.
pub async fn refresh_settled(
    ctx: &Ctx,
    stack: &Stack,
    state: Option<&State>,
    settle: std::time::Duration,
    on_wait: &dyn Fn(&[String]),
) -> Result<Refreshed> {
    let first = refresh(ctx, stack, state).await?;
    if first.unconfirmed.is_empty() {
        return Ok(first);
    }
    on_wait(&first.unconfirmed);
    tokio::time::sleep(settle).await;
    ctx.forget_reads().await;
    refresh(ctx, stack, state).await
}

/// Reads every kind the stack or the state uses, concurrently, one paged call each.
pub async fn refresh(ctx: &Ctx, stack: &Stack, state: Option<&State>) -> Result<Refreshed> {
    let mut kinds: BTreeSet<&'static str> = stack.resources.iter().map(|r| r.kind.name()).collect();
    if let Some(st) = state {
        kinds.extend(st.resources.values().filter_map(|e| resources::kind(&e.kind)).map(|k| k.name()));
        kinds.extend(st.deposed.iter().filter_map(|d| resources::kind(&d.resource.kind)).map(|k| k.name()));
        kinds.extend(st.pending.iter().filter_map(|p| resources::kind(&p.kind)).map(|k| k.name()));
    }
    note_owned_log_groups(ctx, stack, state);
    note_recorded_ids(ctx, state);
    let mut tasks = tokio::task::JoinSet::new();
    for name in kinds {
        // Rendered kinds live in Kubernetes YAML, not in AWS: state is their record.
        let Some(kind) = resources::kind(name).filter(|k| !k.rendered()) else { continue };
        let ctx = ctx.clone();
        tasks.spawn(async move { (kind, kind.read_all(&ctx).await) });
    }
    let reading = async {
        let mut found: Vec<(&'static dyn Kind, Vec<Observed>)> = vec![];
        while let Some(joined) = tasks.join_next().await {
            let (kind, res) = joined.context("a refresh task failed")?;
            let mut observed =
                res.with_context(|| format!("refreshing {} objects of stack {}", kind.name(), ctx.stack))?;
            observed.extend(pending_by_name(ctx, kind, state, &observed).await?);
            found.push((kind, observed));
        }
        anyhow::Ok(found)
    };
    // The imports are read beside the kinds' reads, not after them.
    let (mut found, (imports, refused)) = tokio::try_join!(reading, read_imports(ctx, stack, state))?;
    found.sort_by_key(|(k, _)| crate::resources::rank(k.name()));
    let mut out = merge(stack, state, found);
    out.existing = read_existing(ctx, stack, out.state.as_ref()).await?;
    out.imports = imports;
    out.import_refusals = refused;
    Ok(out)
}

/// Reads the objects `[import]` names, concurrently with each other and with the kinds' reads
/// (each kind's read takes its service's permit, like every other read), read-only. An entry
/// whose object the state already holds under the same id is a no-op and not read
/// (Terraform's behaviour); one whose address the state holds under another id is read, so
/// the plan can say which two objects disagree.
async fn read_imports(ctx: &Ctx, stack: &Stack, state: Option<&State>) -> Result<ImportReads> {
    // A read (`existing`) is not held: the file may take it over with [import].
    let mut tasks = tokio::task::JoinSet::new();
    for decl in &stack.imports {
        if held(state, &decl.address, &decl.id) {
            continue;
        }
        let Some(r) = stack.get(&decl.address) else { continue };
        let kind = resources::of(r);
        let (ctx, address, id) = (ctx.clone(), decl.address.clone(), decl.id.clone());
        tasks.spawn(async move {
            let found = kind.import(&ctx, &id).await;
            (address, id, found)
        });
    }
    let (mut out, mut refused) = (HashMap::new(), HashMap::new());
    while let Some(joined) = tasks.join_next().await {
        let (address, id, found) = joined.context("an import read failed")?;
        match found {
            Ok(found) => {
                out.insert(address, found);
            }
            // The kind refused the object it found (gpustack's own refusals carry no AWS
            // code: a Capacity Block given as an ODCR, a Failed plan, an expired
            // reservation): one diagnostic per entry, at its place (review imp-core m1).
            Err(e) if e.code.is_none() => {
                refused.insert(address, e.detail);
            }
            Err(e) => return Err(anyhow::Error::new(e).context(format!("reading {id} to import it as {address}"))),
        }
    }
    Ok((out, refused))
}

/// What `[import]` read: the objects by address, and the entries the kind refused (why).
type ImportReads = (HashMap<String, Option<resources::Imported>>, HashMap<String, String>);

/// Whether the state records the object an `[import]` names at its address, under the
/// written id or another form of it (a placement group imported by name is recorded by its
/// `pg-` id, a training plan by its ARN; both keep the name in their outputs): such an entry is
/// a no-op, not read again on every plan (review imp-core m4).
fn held(state: Option<&State>, address: &str, id: &str) -> bool {
    let Some(e) = state.and_then(|s| s.resources.get(address)) else { return false };
    let other = |k: &str| e.outputs.get(k).and_then(|v| v.as_str()) == Some(id);
    !resources::existing::in_state(e) && (e.id == id || other("name") || other("arn") || other("id"))
}

/// Reads the objects the stack names with `existing`, kind by kind in dependency order (a
/// subnet looked up in an existing VPC needs that VPC's id first): one call per kind for the
/// literal ids, one per tag lookup.
async fn read_existing(
    ctx: &Ctx,
    stack: &Stack,
    state: Option<&State>,
) -> Result<HashMap<String, std::result::Result<resources::Recorded, String>>> {
    let mut read: HashMap<String, std::result::Result<resources::Recorded, String>> = HashMap::new();
    for kind in resources::KINDS {
        let mut asked: Vec<(String, resources::existing::Lookup)> = vec![];
        for r in stack.resources.iter().filter(|r| r.kind.name() == kind.name()) {
            let Some(e) = r.attrs.get("existing") else { continue };
            let value = e.resolve(&|x| {
                let outputs = match read.get(&x.address) {
                    Some(Ok(rec)) => Some(&rec.outputs),
                    Some(Err(_)) => None,
                    None => None,
                };
                let recorded =
                    state.and_then(|s| s.resources.get(&x.address)).map(|e| crate::value::attrs_from_json(&e.outputs));
                outputs
                    .cloned()
                    .or(recorded)
                    .and_then(|o| o.get(&x.output).cloned())
                    .unwrap_or(crate::value::Value::Unknown)
            });
            if let Some(l) = resources::existing::Lookup::of(&value) {
                asked.push((r.address.clone(), l));
            }
        }
        if asked.is_empty() {
            continue;
        }
        let lookups: Vec<resources::existing::Lookup> = asked.iter().map(|(_, l)| l.clone()).collect();
        let answers = kind
            .read_existing(ctx, &lookups)
            .await
            .with_context(|| format!("reading the existing {} objects stack {} names", kind.name(), ctx.stack))?;
        for ((address, _), answer) in asked.into_iter().zip(answers) {
            read.insert(address, answer);
        }
    }
    Ok(read)
}

/// Tells `eks_cluster`'s read which control-plane log groups are the stack's to read (review
/// r19 M3): the clusters that set `log_retention_days` in the file or in state.
fn note_owned_log_groups(ctx: &Ctx, stack: &Stack, state: Option<&State>) {
    let mut names: std::collections::BTreeSet<String> = stack
        .resources
        .iter()
        .filter(|r| r.kind.name() == "eks_cluster" && r.attrs.contains_key("log_retention_days"))
        .map(|r| match r.attrs.get("name").map(|e| e.resolve(&|_| crate::value::Value::Unknown)) {
            Some(crate::value::Value::Str(n)) => n,
            _ => stack.default_physical_name(r),
        })
        .collect();
    if let Some(st) = state {
        let recorded = st.resources.values().chain(st.deposed.iter().map(|d| &d.resource));
        names.extend(
            recorded
                .filter(|e| e.kind == "eks_cluster" && e.inputs.get("log_retention_days").is_some())
                .map(|e| e.id.clone()),
        );
    }
    if let Ok(mut owned) = ctx.owned_log_groups.write() {
        *owned = names;
    }
}

/// Tells the kinds which ids the state records ([`Ctx::recorded_ids`]).
fn note_recorded_ids(ctx: &Ctx, state: Option<&State>) {
    let mut ids: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    if let Some(st) = state {
        for e in st.resources.values().chain(st.deposed.iter().map(|d| &d.resource)) {
            ids.entry(e.kind.clone()).or_default().insert(e.id.clone());
        }
    }
    if let Ok(mut recorded) = ctx.recorded_ids.write() {
        *recorded = ids;
    }
}

/// What the state's pending creates of `kind` journaled by name ([`Kind::pending_token`]),
/// read directly by that name when the batched read (a list, which may lag behind a
/// create) did not show it: a training plan bought just before a crash is found this way.
async fn pending_by_name(
    ctx: &Ctx,
    kind: &'static dyn Kind,
    state: Option<&State>,
    seen: &[Observed],
) -> Result<Vec<Observed>> {
    let mut out = vec![];
    let pendings = state.map(|s| s.pending.as_slice()).unwrap_or_default();
    for p in pendings.iter().filter(|p| p.kind == kind.name() && p.operation == crate::state::Operation::Create) {
        if seen.iter().any(|o| o.address.as_deref() == Some(p.address.as_str())) {
            continue;
        }
        let found = kind.find_pending(ctx, &p.address, &p.token).await;
        if let Some(o) = found.with_context(|| format!("looking up {}'s pending {}", p.address, p.token))? {
            out.push(o);
        }
    }
    Ok(out)
}

/// Pure merge of observations into the state (separate for testing).
pub fn merge(stack: &Stack, state: Option<&State>, found: Vec<(&'static dyn Kind, Vec<Observed>)>) -> Refreshed {
    let mut st = state.cloned().unwrap_or_else(|| State::new(&stack.name, &stack.region));
    let mut out = Refreshed::default();
    for (kind, observed) in found {
        let mut by_id: HashMap<String, Observed> = observed.into_iter().map(|o| (o.id.clone(), o)).collect();
        // Objects read with `existing` are not the stack's: refresh neither drops their
        // entries (they carry no stack tag) nor treats them as strays.
        by_id.retain(|id, _| !st.resources.values().any(|e| resources::existing::in_state(e) && e.id == *id));
        let addresses: Vec<String> = st
            .resources
            .iter()
            .filter(|(_, e)| e.kind == kind.name() && !resources::existing::in_state(e))
            .map(|(a, _)| a.clone())
            .collect();
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
            // Adopted for a declared address: the file's prevent_destroy protects it from the
            // start (review imp-core m7), not only after the adoption's apply.
            let mut entry = entry;
            entry.prevent_destroy = declared && stack.get(&address).is_some_and(|r| r.prevent_destroy);
            if o.retained && !declared {
                continue;
            }
            if declared && !st.resources.contains_key(&address) && !out.adopted.contains_key(&address) {
                let note = if o.retained {
                    format!(
                        "taking back {}, retained by an earlier run (it cannot be cancelled), instead of buying again",
                        o.id
                    )
                } else {
                    format!("adopting {} found by its gpustack:address tag", o.id)
                };
                out.notes.insert(address.clone(), note);
                out.observed.insert(address.clone(), o.attrs);
                out.adopted.insert(address, entry);
            } else {
                out.strays.push((address, entry));
            }
        }
    }
    if let Some(before) = state {
        out.unconfirmed = before
            .pending
            .iter()
            .filter(|p| p.operation == crate::state::Operation::Create && !before.resources.contains_key(&p.address))
            .filter(|p| !out.adopted.contains_key(&p.address) && !out.strays.iter().any(|(a, _)| *a == p.address))
            .map(|p| p.address.clone())
            .collect();
    }
    // A pending import stays until its object is recorded at its address, or no longer
    // carries the stack's tag (then it was never tagged, or was released): until then the
    // object found by its tags is one gpustack never owned (review imp-core M1).
    let tagged: BTreeSet<&str> =
        out.adopted.values().chain(out.strays.iter().map(|(_, e)| e)).map(|e| e.id.as_str()).collect();
    let recorded =
        |p: &crate::state::Pending| st.resources.get(&p.address).is_some_and(|e| Some(&e.id) == p.id.as_ref());
    let kept: Vec<crate::state::Pending> = st
        .pending
        .iter()
        .filter(|p| p.operation == crate::state::Operation::Import && !recorded(p))
        .filter(|p| p.id.as_deref().is_some_and(|id| tagged.contains(id)))
        .cloned()
        .collect();
    out.interrupted_imports = kept.iter().filter_map(|p| p.id.clone()).collect();
    st.pending = kept;
    out.state = Some(st);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::{Source, VarSources};
    use crate::state::{Operation, Pending};
    use crate::value::Value;

    fn stack() -> Stack {
        let text = "[stack]\nname = \"m\"\nregion = \"us-west-2\"\n[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n[vpc.other]\ncidr_block = \"10.1.0.0/16\"\n";
        let none = |_: &str| None;
        crate::load::check(Source::new("m.toml", text.into()), &VarSources { cli: &[], env: &none })
            .unwrap_or_else(|d| panic!("{d}"))
    }

    fn vpc(id: &str, address: &str) -> Observed {
        Observed {
            address: Some(address.into()),
            id: id.into(),
            attrs: Attrs::from([("cidr_block".into(), Value::str("10.0.0.0/16"))]),
            outputs: Attrs::new(),
            retained: false,
        }
    }

    fn pending_create(address: &str) -> Pending {
        Pending {
            address: address.into(),
            kind: "vpc".into(),
            operation: Operation::Create,
            token: "t".into(),
            id: None,
            started: "now".into(),
        }
    }

    #[test]
    fn pending_creates_are_adopted_when_found_and_unconfirmed_when_not() {
        let s = stack();
        let mut st = State::new("m", "us-west-2");
        st.pending = vec![pending_create("vpc.main"), pending_create("vpc.other")];
        let kind = resources::kind("vpc").unwrap();
        let r = merge(&s, Some(&st), vec![(kind, vec![vpc("vpc-1", "vpc.main")])]);
        assert_eq!(r.adopted.keys().collect::<Vec<_>>(), vec!["vpc.main"]);
        assert_eq!(r.unconfirmed, vec!["vpc.other".to_string()]);
        assert!(r.state.unwrap().pending.is_empty());
    }

    /// Review imp-core M1: a pending import whose object still carries the stack's tags and is
    /// not recorded stays pending (its id marked as an interrupted import); one whose object is
    /// recorded at its address, or is no longer found by its tags, is resolved.
    #[test]
    fn a_pending_import_stays_until_its_object_is_recorded_or_untagged() {
        let s = stack();
        let import = |address: &str, id: &str| Pending {
            address: address.into(),
            kind: "vpc".into(),
            operation: Operation::Import,
            token: id.into(),
            id: Some(id.into()),
            started: "now".into(),
        };
        let mut st = State::new("m", "us-west-2");
        st.pending = vec![import("vpc.gone", "vpc-7"), import("vpc.untagged", "vpc-8"), pending_create("vpc.other")];
        let kind = resources::kind("vpc").unwrap();
        let r = merge(&s, Some(&st), vec![(kind, vec![vpc("vpc-7", "vpc.gone")])]);
        assert_eq!(r.strays.iter().map(|(_, e)| e.id.as_str()).collect::<Vec<_>>(), vec!["vpc-7"]);
        assert_eq!(r.interrupted_imports, BTreeSet::from(["vpc-7".to_string()]));
        let kept = r.state.unwrap().pending;
        assert_eq!(kept.iter().map(|p| p.token.as_str()).collect::<Vec<_>>(), vec!["vpc-7"]);
        // Recorded at its address: resolved.
        let mut done = State::new("m", "us-west-2");
        done.pending = vec![import("vpc.main", "vpc-1")];
        done.resources.insert(
            "vpc.main".into(),
            ResourceState {
                kind: "vpc".into(),
                id: "vpc-1".into(),
                inputs: Default::default(),
                outputs: Default::default(),
                deps: vec![],
                prevent_destroy: false,
            },
        );
        let r = merge(&s, Some(&done), vec![(kind, vec![vpc("vpc-1", "vpc.main")])]);
        assert!(r.state.unwrap().pending.is_empty() && r.interrupted_imports.is_empty());
    }

    /// Review imp-core m4: an import recorded under another form of its id (a group by its
    /// `pg-` id, imported by name) is held, so it is not read again; another name is not.
    #[test]
    fn an_import_held_under_another_form_of_its_id_is_not_read_again() {
        let mut st = State::new("m", "us-west-2");
        st.resources.insert(
            "placement_group.train".into(),
            ResourceState {
                kind: "placement_group".into(),
                id: "pg-0123".into(),
                inputs: Default::default(),
                outputs: serde_json::json!({ "name": "brown-pg", "id": "pg-0123" }).as_object().unwrap().clone(),
                deps: vec![],
                prevent_destroy: false,
            },
        );
        assert!(held(Some(&st), "placement_group.train", "brown-pg"));
        assert!(held(Some(&st), "placement_group.train", "pg-0123"));
        assert!(!held(Some(&st), "placement_group.train", "other-pg"));
        assert!(!held(None, "placement_group.train", "brown-pg"));
    }

    /// Review imp-core m7: an object adopted for a declared address carries the file's
    /// prevent_destroy from the start.
    #[test]
    fn an_adopted_object_keeps_the_files_prevent_destroy() {
        let text = "[stack]\nname = \"m\"\nregion = \"us-west-2\"\n[vpc.main]\ncidr_block = \"10.0.0.0/16\"\nprevent_destroy = true\n";
        let none = |_: &str| None;
        let s = crate::load::check(Source::new("m.toml", text.into()), &VarSources { cli: &[], env: &none })
            .unwrap_or_else(|d| panic!("{d}"));
        let kind = resources::kind("vpc").unwrap();
        let r = merge(&s, None, vec![(kind, vec![vpc("vpc-1", "vpc.main"), vpc("vpc-2", "vpc.stray")])]);
        assert!(r.adopted["vpc.main"].prevent_destroy);
        assert!(!r.strays[0].1.prevent_destroy);
    }

    #[test]
    fn duplicates_become_strays_and_vanished_objects_leave_state() {
        let s = stack();
        let mut st = State::new("m", "us-west-2");
        st.resources.insert(
            "vpc.other".into(),
            ResourceState {
                kind: "vpc".into(),
                id: "vpc-gone".into(),
                inputs: Default::default(),
                outputs: Default::default(),
                deps: vec![],
                prevent_destroy: false,
            },
        );
        let kind = resources::kind("vpc").unwrap();
        let r = merge(&s, Some(&st), vec![(kind, vec![vpc("vpc-1", "vpc.main"), vpc("vpc-2", "vpc.main")])]);
        assert_eq!(r.adopted["vpc.main"].id, "vpc-1");
        assert_eq!(
            r.strays.iter().map(|(a, e)| (a.as_str(), e.id.as_str())).collect::<Vec<_>>(),
            vec![("vpc.main", "vpc-2")]
        );
        assert!(!r.state.as_ref().unwrap().resources.contains_key("vpc.other"));
        assert_eq!(r.notes["vpc.other"], "vpc-gone was deleted outside gpustack");
    }
}
