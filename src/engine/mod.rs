//! The executor: turns a plan into operations with ordering edges and runs them
//! in parallel over the DAG (tokio). Concurrency is bounded per AWS service
//! inside the kinds (`Ctx::permit`), so a resource that only waits holds no
//! slot. Every mutation is journaled: a pending entry is stored before the AWS
//! call, the result after it (on S3 with the next write: see `journal`). A
//! failure skips the failed operation's dependents while independent work
//! finishes; an interrupt starts nothing new and lets in-flight calls finish and
//! be recorded.

pub mod failure;
pub mod journal;
pub mod progress;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use tokio::sync::watch;

use crate::aws::Ctx;
use crate::plan::{Action, Change, Plan, desired_inputs};
use crate::resources::rank as kind_rank;
use crate::resources::{self, Create};
use crate::stack::Stack;
use crate::state::{Operation, Pending, ResourceState};
use crate::value::{Attrs, attrs_from_json, attrs_to_json};
pub use failure::Failure;
use journal::Journal;
use progress::Progress;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OpKind {
    Create {
        replacing: bool,
    },
    Update,
    Delete,
    /// `[import]`: tag, record, then update what the plan lists.
    Import,
}

struct Op {
    change: usize,
    kind: OpKind,
    deps_left: usize,
    dependents: Vec<usize>,
}

#[derive(Default, Debug)]
pub struct Outcome {
    pub done: usize,
    pub failed: Vec<(String, Failure)>,
    pub skipped: Vec<String>,
    pub not_started: Vec<String>,
    pub interrupted: bool,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.failed.is_empty() && self.skipped.is_empty() && self.not_started.is_empty() && !self.interrupted
    }
}

struct Env {
    ctx: Ctx,
    stack: Arc<Stack>,
    changes: Vec<Change>,
    journal: Arc<Journal>,
    progress: Arc<Progress>,
}

/// Runs the plan's changes. Adoptions are recorded first, in one write.
pub async fn execute(
    ctx: Ctx,
    stack: Arc<Stack>,
    plan: &Plan,
    journal: Arc<Journal>,
    progress: Arc<Progress>,
    mut cancel: watch::Receiver<bool>,
) -> anyhow::Result<Outcome> {
    // An import that the plan replaces (consented with prevent_destroy = false) is tagged
    // before it is recorded and replaced: the delete of the old object is allowed only on an
    // object tagged for the stack (`gpustack policy`, `aws:ResourceTag/gpustack:stack`), and
    // the import's own tag grant is the only one that reaches it untagged (review imp-core M2).
    let replaced_imports: Vec<&Change> = plan.changes.iter().filter(|c| is_replaced_import(&stack, c)).collect();
    let mut import_tokens = vec![];
    for c in replaced_imports {
        let kind = resources::kind(c.kind).ok_or_else(|| anyhow::anyhow!("unknown kind {}", c.kind))?;
        let id = c.id.clone().unwrap_or_default();
        let token = uuid::Uuid::new_v4().to_string();
        journal.commit(|s| s.pending.push(pending(c, Operation::Import, &token, Some(id.clone())))).await?;
        import_tokens.push(token);
        kind.tag_imported(&ctx, &c.address, &id, &c.old_outputs)
            .await
            .map_err(|e| anyhow::anyhow!("{}: tagging {id} for the import before replacing it: {e}", c.address))?;
    }
    // Objects tagged by an interrupted import and no longer wanted: their gpustack tags come
    // off, nothing else is touched (review imp-core M1), then their pending entry goes.
    for c in plan.changes.iter().filter(|c| c.action == Action::Forget && c.stray) {
        let id = c.id.clone().unwrap_or_default();
        resources::import::untag(&ctx, c.kind, &id, &c.old_outputs)
            .await
            .map_err(|e| anyhow::anyhow!("{}: removing the gpustack tags from {id}: {e}", c.address))?;
        journal
            .record(|s| {
                s.pending.retain(|p| !(p.operation == Operation::Import && p.id.as_deref() == Some(id.as_str())))
            })
            .await?;
    }
    // An import is recorded by its own operation, after its tags are on the object.
    let adoptions: Vec<(String, ResourceState)> = plan
        .changes
        .iter()
        .filter(|c| c.action != Action::Import)
        .filter_map(|c| c.adopt.clone().map(|e| (c.address.clone(), e)))
        .collect();
    // Adopted objects exist in AWS already: like results, they need not be stored before acting.
    // Objects the stack reads but does not own (`existing`) leave state without an AWS call.
    let forgotten: Vec<String> =
        plan.changes.iter().filter(|c| c.action == Action::Forget && !c.stray).map(|c| c.address.clone()).collect();
    journal
        .record(|s| {
            s.pending.retain(|p| !import_tokens.contains(&p.token));
            for (a, e) in adoptions {
                s.resources.insert(a, e);
            }
            // An interrupted import adopted at its address is resolved.
            let held: Vec<(String, String)> = s.resources.iter().map(|(a, e)| (a.clone(), e.id.clone())).collect();
            s.pending.retain(|p| {
                p.operation != Operation::Import
                    || !held.iter().any(|(a, id)| *a == p.address && Some(id) == p.id.as_ref())
            });
            for a in &forgotten {
                s.resources.remove(a);
            }
        })
        .await?;
    let mut ops = build_ops(&stack, &plan.changes);
    let env = Arc::new(Env { ctx, stack, changes: plan.changes.clone(), journal, progress });
    let mut outcome = Outcome::default();
    let mut ready: VecDeque<usize> = (0..ops.len()).filter(|&i| ops[i].deps_left == 0).collect();
    let mut blocked = vec![false; ops.len()];
    let mut finished = vec![false; ops.len()];
    let mut running = tokio::task::JoinSet::new();
    // An interrupt before execution (say, at the prompt) means: change nothing.
    let mut interrupted = *cancel.borrow_and_update();
    if interrupted {
        env.progress.note("Interrupted before any change: nothing was started.");
    }
    loop {
        if !interrupted {
            while let Some(i) = ready.pop_front() {
                if blocked[i] {
                    continue;
                }
                let env = env.clone();
                let (change, kind) = (ops[i].change, ops[i].kind);
                running.spawn(async move { (i, run_op(&env, change, kind).await) });
            }
        }
        if running.is_empty() {
            break;
        }
        tokio::select! {
            joined = running.join_next() => {
                let Some(joined) = joined else { break };
                let (i, res) = match joined {
                    Ok(x) => x,
                    Err(e) => return Err(anyhow::anyhow!("an operation panicked: {e}")),
                };
                finished[i] = true;
                match res {
                    Ok(()) => {
                        outcome.done += 1;
                        for d in ops[i].dependents.clone() {
                            ops[d].deps_left -= 1;
                            if ops[d].deps_left == 0 {
                                ready.push_back(d);
                            }
                        }
                    }
                    Err(e) => {
                        outcome.failed.push((env.changes[ops[i].change].address.clone(), e));
                        let mut stack_ix = ops[i].dependents.clone();
                        while let Some(d) = stack_ix.pop() {
                            if !blocked[d] {
                                blocked[d] = true;
                                outcome.skipped.push(env.changes[ops[d].change].address.clone());
                                stack_ix.extend(ops[d].dependents.iter().copied());
                            }
                        }
                    }
                }
            }
            changed = cancel.changed(), if !interrupted => {
                if changed.is_ok() && *cancel.borrow() {
                    interrupted = true;
                    env.progress.note(&format!(
                        "Interrupted: finishing the {} operation(s) in flight and recording them; nothing new starts. Press Ctrl-C again to exit at once.",
                        running.len()
                    ));
                }
            }
        }
    }
    for i in 0..ops.len() {
        if !finished[i] && !blocked[i] {
            outcome.not_started.push(env.changes[ops[i].change].address.clone());
        }
    }
    outcome.interrupted = interrupted;
    Ok(outcome)
}

/// A purchase cannot be undone, so it runs only after every operation that neither depends
/// on it nor is depended on by it has succeeded: if the network, the roles or the cluster
/// fail, nothing has been bought (a failed operation skips its dependents, the purchase
/// among them). Operations downstream of any purchase are left out, which keeps the graph
/// acyclic with several purchases.
fn last_for_purchases(ops: &[Op], changes: &[Change], edges: &mut Vec<(usize, usize)>) {
    let purchases: Vec<usize> = (0..ops.len())
        .filter(|&i| {
            matches!(ops[i].kind, OpKind::Create { .. }) && matches!(changes[ops[i].change].action, Action::Purchase(_))
        })
        .collect();
    if purchases.is_empty() {
        return;
    }
    let mut next: Vec<Vec<usize>> = vec![vec![]; ops.len()];
    let mut prev: Vec<Vec<usize>> = vec![vec![]; ops.len()];
    for &(from, to) in edges.iter() {
        next[from].push(to);
        prev[to].push(from);
    }
    let reach = |start: usize, links: &[Vec<usize>]| {
        let mut seen = vec![false; ops.len()];
        let mut todo = vec![start];
        while let Some(n) = todo.pop() {
            for &m in &links[n] {
                if !seen[m] {
                    seen[m] = true;
                    todo.push(m);
                }
            }
        }
        seen
    };
    let mut downstream = vec![false; ops.len()];
    for &p in &purchases {
        downstream[p] = true;
        for (i, d) in reach(p, &next).into_iter().enumerate() {
            downstream[i] |= d;
        }
    }
    for &p in &purchases {
        let upstream = reach(p, &prev);
        edges.extend((0..ops.len()).filter(|&i| !downstream[i] && !upstream[i]).map(|i| (i, p)));
    }
}

/// Operations and their ordering edges (see the module doc of `plan` for actions).
fn build_ops(stack: &Stack, changes: &[Change]) -> Vec<Op> {
    let mut ops: Vec<Op> = vec![];
    let mut forward: HashMap<&str, usize> = HashMap::new();
    let mut deletes: HashMap<&str, usize> = HashMap::new();
    let mut dbc: Vec<bool> = vec![];
    let mut strays: Vec<usize> = vec![];
    let mut edges: Vec<(usize, usize)> = vec![];
    let push = |ops: &mut Vec<Op>, dbc: &mut Vec<bool>, change: usize, kind: OpKind, is_dbc: bool| {
        ops.push(Op { change, kind, deps_left: 0, dependents: vec![] });
        dbc.push(is_dbc);
        ops.len() - 1
    };
    for (ci, c) in changes.iter().enumerate() {
        let a = c.address.as_str();
        match c.action {
            Action::Create | Action::Purchase(_) => {
                let k = push(&mut ops, &mut dbc, ci, OpKind::Create { replacing: false }, false);
                forward.insert(a, k);
            }
            Action::Update => {
                let k = push(&mut ops, &mut dbc, ci, OpKind::Update, false);
                forward.insert(a, k);
            }
            Action::Import => {
                let k = push(&mut ops, &mut dbc, ci, OpKind::Import, false);
                forward.insert(a, k);
            }
            Action::DeleteThenCreate => {
                let d = push(&mut ops, &mut dbc, ci, OpKind::Delete, true);
                let k = push(&mut ops, &mut dbc, ci, OpKind::Create { replacing: false }, false);
                edges.push((d, k));
                forward.insert(a, k);
                deletes.insert(a, d);
            }
            Action::CreateThenDelete => {
                let k = push(&mut ops, &mut dbc, ci, OpKind::Create { replacing: true }, false);
                let d = push(&mut ops, &mut dbc, ci, OpKind::Delete, false);
                edges.push((k, d));
                forward.insert(a, k);
                deletes.insert(a, d);
            }
            Action::Delete | Action::Retain => {
                let d = push(&mut ops, &mut dbc, ci, OpKind::Delete, false);
                if c.stray {
                    strays.push(d);
                } else {
                    deletes.insert(a, d);
                }
            }
            // Recorded in state (no AWS call: the kind's create and update only record it).
            Action::Render(_) => {
                let op = if c.id.is_some() { OpKind::Update } else { OpKind::Create { replacing: false } };
                let k = push(&mut ops, &mut dbc, ci, op, false);
                forward.insert(a, k);
            }
            // State-only: recorded (or dropped) in the first write, nothing to run.
            Action::Adopt | Action::Read | Action::Forget => {}
        }
    }
    // Creates and updates after those of their dependencies.
    for r in &stack.resources {
        let Some(&k) = forward.get(r.address.as_str()) else { continue };
        for &d in &r.deps {
            if let Some(&dk) = forward.get(stack.resources[d].address.as_str()) {
                edges.push((dk, k));
            }
        }
    }
    // Who refers to an address, now or as last applied: the creates and updates that must
    // move off an object before it is deleted. Built once, so ordering stays linear.
    let mut referrers: HashMap<&str, Vec<usize>> = HashMap::new();
    for r in &stack.resources {
        let Some(&k) = forward.get(r.address.as_str()) else { continue };
        let desired = r.deps.iter().map(|&i| stack.resources[i].address.as_str());
        let old = changes[ops[k].change].old_deps.iter().map(String::as_str);
        for target in desired.chain(old).filter(|t| *t != r.address) {
            referrers.entry(target).or_default().push(k);
        }
    }
    // Deletes of old objects before deletes of what they depended on; dependents move
    // off an object before it is deleted, except delete-before-create.
    for (&x, &d) in &deletes {
        for y in &changes[ops[d].change].old_deps {
            if let Some(&dy) = deletes.get(y.as_str()) {
                edges.push((d, dy));
            }
        }
        if !dbc[d] {
            edges.extend(referrers.get(x).into_iter().flatten().map(|&k| (k, d)));
        }
    }
    // An object leaving (or deleted to be recreated) goes before an in-place update of what
    // it depended on: that update may take away what held it, e.g. a VPC's
    // DisassociateVpcCidrBlock needs the block's subnets deleted first (botocore
    // `DisassociateVpcCidrBlock`: "You must detach or delete all gateways and resources that
    // are associated with the CIDR block before you can disassociate it"). Not for
    // create-before-delete: its delete waits for its create, which waits for the update.
    for &d in deletes.values() {
        let c = &changes[ops[d].change];
        if matches!(c.action, Action::CreateThenDelete) {
            continue;
        }
        for y in &c.old_deps {
            if let Some(&uy) = forward.get(y.as_str()).filter(|&&u| matches!(ops[u].kind, OpKind::Update)) {
                edges.push((d, uy));
            }
        }
    }
    // Objects found by tags have no recorded dependencies: order them by kind.
    let all_deletes: Vec<usize> = deletes.values().copied().chain(strays.iter().copied()).collect();
    for &s in &strays {
        for &d in &all_deletes {
            let (rs, rd) = (kind_rank(changes[ops[s].change].kind), kind_rank(changes[ops[d].change].kind));
            if rs > rd {
                edges.push((s, d));
            } else if rd > rs {
                edges.push((d, s));
            }
        }
    }
    last_for_purchases(&ops, changes, &mut edges);
    edges.sort_unstable();
    edges.dedup();
    for (from, to) in edges {
        if from != to {
            ops[from].dependents.push(to);
            ops[to].deps_left += 1;
        }
    }
    ops
}

async fn run_op(env: &Env, ci: usize, op: OpKind) -> Result<(), Failure> {
    let c = &env.changes[ci];
    let (verb, past) = match op {
        OpKind::Create { .. } if matches!(c.action, Action::Purchase(_)) => ("buying", "bought"),
        OpKind::Delete if c.action == Action::Retain => {
            ("retaining", "retained (not cancellable; gpustack no longer manages it)")
        }
        OpKind::Create { .. } | OpKind::Update if matches!(c.action, Action::Render(_)) => {
            ("recording", "recorded (write it with gpustack manifests)")
        }
        OpKind::Delete if resources::kind(c.kind).is_some_and(|k| k.rendered()) => {
            ("forgetting", "forgotten (remove it from the cluster yourself if it was applied there)")
        }
        OpKind::Create { .. } => ("creating", "created"),
        OpKind::Import if c.fields.is_empty() => ("importing", "imported (tagged and recorded)"),
        OpKind::Import => ("importing", "imported and updated"),
        OpKind::Update => ("updating", "updated"),
        OpKind::Delete => ("deleting", "deleted"),
    };
    let task = env.progress.start(&c.address, verb, past);
    let res = {
        let report = |step: &str| env.progress.step(&task, step);
        let work = async {
            match op {
                OpKind::Create { replacing } => create(env, c, replacing, &report).await,
                OpKind::Update => update(env, c).await,
                OpKind::Delete => delete(env, c).await,
                OpKind::Import => import(env, c).await,
            }
        };
        tokio::pin!(work);
        // Long work (an EKS cluster takes ~10 minutes) says it is still going.
        let every = progress::heartbeat();
        let mut beat = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        loop {
            tokio::select! {
                r = &mut work => break r,
                _ = beat.tick() => env.progress.still(&task),
            }
        }
    };
    match &res {
        Ok(detail) => env.progress.finish(task, &c.address, Ok(detail)),
        Err(e) => env.progress.finish_failed(task, &c.address, e),
    }
    res.map(|_| ())
}

fn pending(c: &Change, op: Operation, token: &str, id: Option<String>) -> Pending {
    Pending {
        address: c.address.clone(),
        kind: c.kind.to_string(),
        operation: op,
        token: token.to_string(),
        id,
        started: crate::state::now(),
    }
}

/// The resource's inputs now that its dependencies are done.
fn inputs_now(env: &Env, c: &Change) -> Result<(Attrs, usize), Failure> {
    let idx = *env
        .stack
        .by_address
        .get(&c.address)
        .ok_or_else(|| Failure::from(format!("{} is not in the stack", c.address)))?;
    let inputs = desired_inputs(&env.stack, idx, &|a| {
        env.journal.read(|s| s.resources.get(a).map(|e| attrs_from_json(&e.outputs)))
    });
    if let Some((k, _)) = inputs.iter().find(|(_, v)| !v.is_known()) {
        return Err(format!("input `{k}` is still unknown: a resource it refers to was not created").into());
    }
    Ok((inputs, idx))
}

fn deps_of(env: &Env, idx: usize) -> Vec<String> {
    env.stack.resources[idx].deps.iter().map(|&d| env.stack.resources[d].address.clone()).collect()
}

async fn create(
    env: &Env,
    c: &Change,
    replacing: bool,
    report: &(dyn Fn(&str) + Send + Sync),
) -> Result<String, Failure> {
    let kind = resources::kind(c.kind).ok_or(Failure::from("unknown kind"))?;
    let (inputs, idx) = inputs_now(env, c)?;
    // A kind without a client token journals the name it will use, so a later run finds it.
    let token = kind
        .pending_token(&env.stack.name, &c.address, c.action.purchase())
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    env.journal
        .commit(|s| s.pending.push(pending(c, Operation::Create, &token, None)))
        .await
        .map_err(|e| Failure::from(e.to_string()))?;
    let req = Create {
        address: &c.address,
        inputs: &inputs,
        token: &token,
        replacing,
        purchase: c.action.purchase(),
        report,
    };
    match kind.create(&env.ctx, &req).await {
        Ok(rec) => {
            let entry = ResourceState {
                kind: c.kind.to_string(),
                id: rec.id.clone(),
                inputs: attrs_to_json(&inputs),
                outputs: attrs_to_json(&rec.outputs),
                deps: deps_of(env, idx),
                prevent_destroy: env.stack.resources[idx].prevent_destroy,
            };
            // On S3 the result rides on the next write (journal.rs says why that is safe).
            env.journal
                .record(|s| {
                    s.pending.retain(|p| p.token != token);
                    if let Some(old) = s.resources.insert(c.address.clone(), entry)
                        && replacing
                    {
                        s.deposed.push(crate::state::Deposed { address: c.address.clone(), resource: old });
                    }
                })
                .await
                .map_err(|e| Failure::from(e.to_string()))?;
            Ok(rec.id)
        }
        // The pending entry stays: the next run looks the object up by its tags.
        Err(e) => Err(e.into()),
    }
}

async fn update(env: &Env, c: &Change) -> Result<String, Failure> {
    let kind = resources::kind(c.kind).ok_or(Failure::from("unknown kind"))?;
    let (inputs, idx) = inputs_now(env, c)?;
    let id = c.id.clone().unwrap_or_default();
    let token = uuid::Uuid::new_v4().to_string();
    env.journal
        .commit(|s| s.pending.push(pending(c, Operation::Update, &token, Some(id.clone()))))
        .await
        .map_err(|e| Failure::from(e.to_string()))?;
    let rec = kind.update(&env.ctx, &c.address, &id, &c.old_inputs, &inputs, &c.changed_attrs()).await?;
    let deps = deps_of(env, idx);
    env.journal
        .record(|s| {
            s.pending.retain(|p| p.token != token);
            if let Some(e) = s.resources.get_mut(&c.address) {
                e.inputs = attrs_to_json(&inputs);
                e.outputs.extend(attrs_to_json(&rec.outputs));
                e.deps = deps;
                e.prevent_destroy = env.stack.resources[idx].prevent_destroy;
            }
        })
        .await
        .map_err(|e| Failure::from(e.to_string()))?;
    Ok(String::new())
}

/// `[import]`: tags the object (`gpustack:stack`, `gpustack:address`), then records it in
/// state, then updates the fields the plan listed. The tagging is journaled as a pending
/// import of the object: a crash after the tags landed and before the record leaves an
/// object the next refresh finds by its tags (`Kind::read_all`) and adopts for its address,
/// or, when the file no longer wants it, only untags (never deletes: review imp-core M1).
async fn import(env: &Env, c: &Change) -> Result<String, Failure> {
    let kind = resources::kind(c.kind).ok_or(Failure::from("unknown kind"))?;
    let Some(mut entry) = c.adopt.clone() else {
        return Err(Failure::from(format!(
            "{} was not read (planned with --refresh=false); apply with refresh so the import is read and shown first",
            c.id.as_deref().unwrap_or("the object")
        )));
    };
    let id = entry.id.clone();
    let token = uuid::Uuid::new_v4().to_string();
    env.journal
        .commit(|s| s.pending.push(pending(c, Operation::Import, &token, Some(id.clone()))))
        .await
        .map_err(|e| Failure::from(e.to_string()))?;
    kind.tag_imported(&env.ctx, &c.address, &id, &c.old_outputs).await?;
    if let Some(&idx) = env.stack.by_address.get(&c.address) {
        entry.prevent_destroy = env.stack.resources[idx].prevent_destroy;
    }
    env.journal
        .record(|s| {
            s.pending.retain(|p| p.token != token);
            s.resources.insert(c.address.clone(), entry);
        })
        .await
        .map_err(|e| Failure::from(e.to_string()))?;
    if c.fields.is_empty() {
        return Ok(id);
    }
    update(env, c).await?;
    Ok(id)
}

/// A consented replace of an `[import]` (diff.rs `import_change`): a replace that adopts an
/// object the stack's `[import]` names by the id the plan read.
fn is_replaced_import(stack: &Stack, c: &Change) -> bool {
    matches!(c.action, Action::DeleteThenCreate | Action::CreateThenDelete)
        && c.adopt.is_some()
        && stack.imports.iter().any(|i| i.address == c.address)
}

/// Last guard: an object read with `existing` is not the stack's; nothing deletes it,
/// whatever the plan says (the plan refuses to get here: `diff::resource_change`).
fn foreign(c: &Change) -> Option<Failure> {
    c.old_inputs.contains_key("existing").then(|| {
        Failure::from(format!(
            "refusing to delete {}: `{}` read it with `existing`, the stack does not own it",
            c.id.as_deref().unwrap_or("?"),
            c.address
        ))
    })
}

async fn delete(env: &Env, c: &Change) -> Result<String, Failure> {
    let kind = resources::kind(c.kind).ok_or(Failure::from("unknown kind"))?;
    let id = c.id.clone().unwrap_or_default();
    if let Some(refused) = foreign(c) {
        return Err(refused);
    }
    let token = uuid::Uuid::new_v4().to_string();
    env.journal
        .commit(|s| s.pending.push(pending(c, Operation::Delete, &token, Some(id.clone()))))
        .await
        .map_err(|e| Failure::from(e.to_string()))?;
    kind.delete(&env.ctx, &c.address, &id, &c.old_inputs, &c.old_outputs).await?;
    env.journal
        .record(|s| {
            s.pending.retain(|p| p.token != token);
            if s.resources.get(&c.address).is_some_and(|e| e.id == id) {
                s.resources.remove(&c.address);
            }
            s.deposed.retain(|d| d.resource.id != id);
        })
        .await
        .map_err(|e| Failure::from(e.to_string()))?;
    Ok(id)
}

#[cfg(test)]
mod foreign_tests {
    use super::*;
    use crate::value::Value;

    #[test]
    fn a_read_object_is_never_deleted() {
        let c = Change {
            address: "vpc.shared".into(),
            kind: "vpc",
            action: Action::Delete,
            fields: vec![],
            id: Some("vpc-0abc".into()),
            old_inputs: Attrs::from([("existing".to_string(), Value::str("vpc-0abc"))]),
            old_outputs: Attrs::new(),
            old_deps: vec![],
            adopt: None,
            stray: false,
            note: None,
        };
        assert!(foreign(&c).is_some_and(|f| f.text.contains("refusing to delete vpc-0abc")));
        let mut owned = c.clone();
        owned.old_inputs.remove("existing");
        assert!(foreign(&owned).is_none());
    }
}
