//! The journal: the live state of an apply, persisted through the state backend
//! (a local file or S3) with group commit. An operation changes the in-memory
//! state, then waits until a write that includes its change is stored.
//! Concurrent operations share writes, so a wide apply does not write once per call.
//!
//! Two kinds of change: [`Journal::commit`] is stored before it returns — a pending
//! entry must be durable before the AWS call it announces. [`Journal::record`] (an
//! operation's result) is too with a local file; with S3, where a write is a round trip,
//! it returns at once and rides on the next write, or a flush [`FLUSH_DELAY`] later.
//! That adds no crash state: what is stored is always a prefix of the changes, and a
//! result not yet stored leaves its pending entry, which the next run resolves by tag
//! exactly as for a kill during the call.
//!
//! A write refused because the stored state changed behind the lock (S3) stops the
//! journal: every later write fails, and the state is kept in a local rescue file.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;

use crate::state::backend::{Backend, WriteError};
use crate::state::{State, local, rescue};

/// How long a recorded result may wait for a write to carry it.
pub const FLUSH_DELAY: Duration = Duration::from_millis(300);
/// How long a remote write waits for other changes to join it.
const GATHER: Duration = Duration::from_millis(3);

pub struct Journal {
    backend: Arc<Backend>,
    /// How the state is named on the command line (`--stack s.toml`), for the rescue advice.
    which: String,
    state: Mutex<State>,
    /// Bumped by every change.
    changed: AtomicU64,
    /// The last change that is stored.
    written: AtomicU64,
    writer: tokio::sync::Mutex<()>,
    flush_scheduled: AtomicBool,
    refused: Mutex<Option<Refused>>,
}

/// The stored state changed behind this run: where our state went instead.
#[derive(Clone, Debug)]
struct Refused {
    serial: u64,
    file: PathBuf,
    message: String,
}

/// A journal write that could not be stored; the full advice is [`Journal::refusal`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct RefusedWrite(String);

impl Journal {
    pub fn new(backend: Arc<Backend>, state: State, which: &str) -> Journal {
        Journal {
            backend,
            which: which.to_string(),
            state: Mutex::new(state),
            changed: AtomicU64::new(0),
            written: AtomicU64::new(0),
            writer: tokio::sync::Mutex::new(()),
            flush_scheduled: AtomicBool::new(false),
            refused: Mutex::new(None),
        }
    }

    /// Changes the state in memory; returns a ticket to `persist`.
    pub fn change<R>(&self, f: impl FnOnce(&mut State) -> R) -> (R, u64) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let r = f(&mut st);
        let ticket = self.changed.fetch_add(1, Ordering::SeqCst) + 1;
        (r, ticket)
    }

    pub fn read<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&st)
    }

    /// Returns once the change with `ticket` (and every earlier one) is stored.
    pub async fn persist(&self, ticket: u64) -> Result<()> {
        let _w = self.writer.lock().await;
        if self.written.load(Ordering::SeqCst) >= ticket {
            return Ok(());
        }
        if let Some(r) = self.refused.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            // Keep the rescue file current with what in-flight operations still record.
            let bytes = self.read(|st| local::encode(&State { serial: r.serial, ..st.clone() }))?;
            local::write_atomic(&r.file, &bytes)?;
            return Err(RefusedWrite(r.message).into());
        }
        if !matches!(*self.backend, Backend::Local(_)) {
            // A round trip costs far more than this wait: let operations that start together
            // (the dependents of one finished resource) join this write instead of the next.
            tokio::time::sleep(GATHER).await;
        }
        let (bytes, upto, serial, stack) = {
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            st.serial += 1;
            (local::encode(&st)?, self.changed.load(Ordering::SeqCst), st.serial, st.stack.clone())
        };
        match self.backend.write(bytes.clone()).await {
            Ok(()) => {
                self.written.store(upto, Ordering::SeqCst);
                Ok(())
            }
            Err(WriteError::Changed(e)) => {
                let file = rescue::write(&stack, serial, &bytes)?;
                let message = format!(
                    "{e} (after a force-unlock and another run, or a manual push); {}",
                    rescue::advice(&file, &self.which)
                );
                *self.refused.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(Refused { serial, file, message: message.clone() });
                Err(RefusedWrite(message).into())
            }
            Err(WriteError::Failed(e)) => Err(e),
        }
    }

    /// Changes and stores in one step: for what must be durable before acting.
    pub async fn commit<R>(&self, f: impl FnOnce(&mut State) -> R) -> Result<R> {
        let (r, t) = self.change(f);
        self.persist(t).await?;
        Ok(r)
    }

    /// An operation's result. With a local file it is stored before this returns, like
    /// [`Journal::commit`] (a write costs little). With S3 it returns at once, and the change
    /// is stored with the next write, at the latest [`FLUSH_DELAY`] from now: the module doc
    /// says why that is safe.
    pub async fn record<R>(self: &Arc<Self>, f: impl FnOnce(&mut State) -> R) -> Result<R> {
        if matches!(*self.backend, Backend::Local(_)) {
            return self.commit(f).await;
        }
        let (r, _) = self.change(f);
        if !self.flush_scheduled.swap(true, Ordering::SeqCst) {
            let j = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(FLUSH_DELAY).await;
                j.flush_scheduled.store(false, Ordering::SeqCst);
                // A failure here surfaces at the next commit or flush, which tries again.
                let _ = j.flush().await;
            });
        }
        Ok(r)
    }

    /// Stores every change made so far.
    pub async fn flush(&self) -> Result<()> {
        self.persist(self.changed.load(Ordering::SeqCst)).await
    }

    /// Why writes are refused, with the rescue file and what to do; `None` while they are not.
    pub fn refusal(&self) -> Option<String> {
        self.refused.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|r| r.message.clone())
    }

    pub fn snapshot(&self) -> State {
        self.read(State::clone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_changes_share_writes_and_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        let backend = Arc::new(Backend::Local(path.clone()));
        let j = Arc::new(Journal::new(backend, State::new("s", "r"), "--state s.json"));
        let mut tasks = vec![];
        for i in 0..50 {
            let j = j.clone();
            tasks.push(tokio::spawn(async move {
                j.commit(|s| s.outputs.insert(format!("k{i}"), i.into())).await.unwrap();
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let on_disk = local::read(&path).unwrap().unwrap();
        assert_eq!(on_disk.outputs.len(), 50);
        assert!(on_disk.serial <= 50 && on_disk.serial >= 1);
    }
}
