//! The journal: the live state of an apply, persisted atomically with group
//! commit. An operation changes the in-memory state (a pending entry before its
//! AWS call, the result after), then waits until a write that includes its
//! change is on disk. Concurrent operations share writes, so a wide apply does
//! not write the file once per call.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Result;

use crate::state::{State, local};

pub struct Journal {
    path: PathBuf,
    state: Mutex<State>,
    /// Bumped by every change.
    changed: AtomicU64,
    /// The last change that is on disk.
    written: AtomicU64,
    writer: tokio::sync::Mutex<()>,
}

impl Journal {
    pub fn new(path: PathBuf, state: State) -> Journal {
        Journal {
            path,
            state: Mutex::new(state),
            changed: AtomicU64::new(0),
            written: AtomicU64::new(0),
            writer: tokio::sync::Mutex::new(()),
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

    /// Returns once the change with `ticket` (and every earlier one) is on disk.
    pub async fn persist(&self, ticket: u64) -> Result<()> {
        let _w = self.writer.lock().await;
        if self.written.load(Ordering::SeqCst) >= ticket {
            return Ok(());
        }
        let (bytes, upto) = {
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            st.serial += 1;
            (local::encode(&st)?, self.changed.load(Ordering::SeqCst))
        };
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || local::write_atomic(&path, &bytes)).await??;
        self.written.store(upto, Ordering::SeqCst);
        Ok(())
    }

    /// Changes and persists in one step.
    pub async fn commit<R>(&self, f: impl FnOnce(&mut State) -> R) -> Result<R> {
        let (r, t) = self.change(f);
        self.persist(t).await?;
        Ok(r)
    }

    pub fn snapshot(&self) -> State {
        self.read(State::clone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn concurrent_changes_share_writes_and_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json");
        let j = std::sync::Arc::new(Journal::new(path.clone(), State::new("s", "r")));
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
