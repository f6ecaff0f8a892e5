//! The S3 state lock: the object `<key>.lock`, created with `PutObject If-None-Match: *`
//! so exactly one run can hold it, holding who took it and when. Unlike a local OS
//! lock it outlives a killed holder, so a held lock names its holder, its age and the
//! `force-unlock` command that frees it. Released with `DeleteObject If-Match:` the
//! ETag we wrote, so a lock someone else took since is never deleted. A second interrupt
//! exits without running `Drop`: [`release_held`] is its last-resort release.

use std::time::{Duration, Instant};

use aws_sdk_s3::primitives::ByteStream;
use serde::{Deserialize, Serialize};

use super::{Failure, S3Error, S3Location, get};
use crate::state::LockHeld;

/// The lock object's body.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LockInfo {
    pub id: String,
    pub who: String,
    pub host: String,
    pub pid: u32,
    pub command: String,
    pub created: String,
}

impl LockInfo {
    fn new(command: &str) -> LockInfo {
        let host = gethostname::gethostname().to_string_lossy().into_owned();
        let user = std::env::var("USER").or_else(|_| std::env::var("USERNAME")).unwrap_or_else(|_| "unknown".into());
        LockInfo {
            id: uuid::Uuid::new_v4().to_string(),
            who: format!("{user}@{host}"),
            host,
            pid: std::process::id(),
            command: command.to_string(),
            created: crate::state::now(),
        }
    }
}

impl std::fmt::Display for LockInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pid {} on {} ({}), running `{}`, since {} ({}), lock id {}",
            self.pid,
            self.host,
            self.who,
            self.command,
            self.created,
            crate::state::age(&self.created),
            self.id
        )
    }
}

/// How long acquiring keeps retrying 409 ConditionalRequestConflict past `--lock-timeout`.
const CONFLICT_WAIT: Duration = Duration::from_secs(30);

pub fn lock_key(key: &str) -> String {
    format!("{key}.lock")
}

/// A held S3 lock. Released on drop (a blocking DeleteObject); if that is impossible the
/// lock stays and a warning says how to free it.
pub struct S3Lock {
    client: aws_sdk_s3::Client,
    location: S3Location,
    info: LockInfo,
    etag: String,
    released: bool,
}

/// Takes the lock beside the state at `loc`, polling with backoff up to `timeout`.
/// `unlock` is the command line that would free it, with `{id}` for the lock id.
pub async fn acquire(
    client: &aws_sdk_s3::Client,
    loc: &S3Location,
    timeout: Duration,
    command: &str,
    unlock: &str,
) -> Result<S3Lock, anyhow::Error> {
    let info = LockInfo::new(command);
    let body = serde_json::to_vec(&info)?;
    let key = lock_key(&loc.key);
    let deadline = Instant::now() + timeout;
    // 409s mean a write on the key is in flight right now; they end within moments.
    let conflict_deadline = deadline.max(Instant::now() + CONFLICT_WAIT);
    let mut wait = Duration::from_millis(200);
    loop {
        let put = client
            .put_object()
            .bucket(&loc.bucket)
            .key(&key)
            .content_type("application/json")
            .if_none_match("*")
            .body(ByteStream::from(body.clone()))
            .send()
            .await;
        let f = match put {
            Ok(out) => return Ok(held(client, loc, info, out.e_tag().unwrap_or_default())),
            Err(e) => Failure::of(e),
        };
        if f.conflict() {
            // "On a 409 failure you should retry" (PutObject `If-None-Match`), but not for ever.
            if Instant::now() >= conflict_deadline {
                return Err(f.into_error("locking", loc).into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        if !f.precondition_failed() {
            // A PUT that landed while every answer to it was lost (timeouts, 5xx on the SDK's
            // retries) left our lock: take it, rather than fail and orphan it (OpenTofu #4405).
            if let Ok(Some((bytes, etag))) = get(client, loc, &key).await
                && serde_json::from_slice::<LockInfo>(&bytes).is_ok_and(|o| o.id == info.id)
            {
                return Ok(held(client, loc, info, &etag));
            }
            return Err(f.into_error("locking", loc).into());
        }
        // Held. If the holder is us, an SDK retry of a PUT that had landed got the 412
        // (OpenTofu #4405): the lock is ours.
        let holder = get(client, loc, &key).await.map_err(|f| f.into_error("reading the lock of", loc))?;
        let Some((bytes, etag)) = holder else { continue };
        let other: Option<LockInfo> = serde_json::from_slice(&bytes).ok();
        if other.as_ref().is_some_and(|o| o.id == info.id) {
            return Ok(held(client, loc, info, &etag));
        }
        if Instant::now() >= deadline {
            let (holder, id) = match &other {
                Some(o) => (o.to_string(), o.id.clone()),
                None => ("something that is not gpustack (the lock object is not gpustack's JSON)".into(), "ID".into()),
            };
            return Err(LockHeld { what: loc.to_string(), holder, unlock: Some(unlock.replace("{id}", &id)) }.into());
        }
        tokio::time::sleep(wait.min(deadline.saturating_duration_since(Instant::now()))).await;
        wait = (wait * 3 / 2).min(Duration::from_secs(5));
    }
}

fn held(client: &aws_sdk_s3::Client, loc: &S3Location, info: LockInfo, etag: &str) -> S3Lock {
    let lock = S3Lock { client: client.clone(), location: loc.clone(), info, etag: etag.to_string(), released: false };
    if let Ok(mut all) = HELD.lock() {
        all.push(Held {
            client: lock.client.clone(),
            location: lock.location.clone(),
            etag: lock.etag.clone(),
            id: lock.info.id.clone(),
        });
    }
    lock
}

/// A lock this process holds, as the signal handler needs it (it cannot reach the owner).
struct Held {
    client: aws_sdk_s3::Client,
    location: S3Location,
    etag: String,
    id: String,
}

/// Every S3 lock this process holds (`state migrate` holds two). A process-wide list
/// because a second Ctrl-C or SIGTERM exits from the signal task, where no owner is in
/// reach and no `Drop` will run.
static HELD: std::sync::Mutex<Vec<Held>> = std::sync::Mutex::new(Vec::new());

fn forget(id: &str) {
    if let Ok(mut all) = HELD.lock() {
        all.retain(|h| h.id != id);
    }
}

/// Releases every lock this process still holds before an exit that skips `Drop`, all of
/// them within one `timeout` (`state migrate` holds two: each with its own 2 s would exceed
/// GitHub's 2.5 s before the kill); a lock that stays gets the `force-unlock` line.
pub async fn release_held(timeout: Duration) {
    let all: Vec<Held> = HELD.lock().map(|mut all| std::mem::take(&mut *all)).unwrap_or_default();
    let deadline = tokio::time::Instant::now() + timeout;
    for h in all {
        let result = match tokio::time::timeout_at(deadline, delete(&h.client, &h.location, &h.etag)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(f)) if f.no_such_key() || f.precondition_failed() => Ok(()),
            Ok(Err(f)) => Err(f.into_error("unlocking", &h.location).to_string()),
            Err(_) => Err(format!("no answer from S3 within {}s", timeout.as_secs())),
        };
        if let Err(e) = result {
            stays_held(&h.location, &h.id, &e);
        }
    }
}

/// The warning for a lock this run could not release.
fn stays_held(location: &S3Location, id: &str, why: &str) {
    eprintln!(
        "warning: the state lock {} stays held: {why}\n  help: free it with: gpustack force-unlock {id} --state {location}",
        lock_key(&location.to_string()),
    );
}

/// The lock's holder and the lock object's ETag, if it is held.
pub async fn holder(client: &aws_sdk_s3::Client, loc: &S3Location) -> Result<Option<(LockInfo, String)>, S3Error> {
    let got = get(client, loc, &lock_key(&loc.key)).await.map_err(|f| f.into_error("reading the lock of", loc))?;
    Ok(got.map(|(bytes, etag)| {
        let info = serde_json::from_slice(&bytes).unwrap_or_else(|_| LockInfo {
            id: String::new(),
            who: "unknown".into(),
            host: "unknown".into(),
            pid: 0,
            command: "not gpustack's lock JSON".into(),
            created: String::new(),
        });
        (info, etag)
    }))
}

/// What `force-unlock` found and did.
pub enum Unlocked {
    NotLocked,
    /// The lock has another id: nothing was deleted.
    OtherId(LockInfo),
    Deleted(LockInfo),
}

/// Deletes the lock only if its id is `id`, and only the very object read (`If-Match`).
pub async fn force_unlock(client: &aws_sdk_s3::Client, loc: &S3Location, id: &str) -> Result<Unlocked, S3Error> {
    let Some((info, etag)) = holder(client, loc).await? else { return Ok(Unlocked::NotLocked) };
    if info.id != id {
        return Ok(Unlocked::OtherId(info));
    }
    delete(client, loc, &etag).await.map_err(|f| f.into_error("unlocking", loc))?;
    Ok(Unlocked::Deleted(info))
}

async fn delete(client: &aws_sdk_s3::Client, loc: &S3Location, etag: &str) -> Result<(), Failure> {
    let mut attempt = 0;
    loop {
        let del = client.delete_object().bucket(&loc.bucket).key(lock_key(&loc.key)).if_match(etag).send().await;
        match del.map_err(Failure::of) {
            Ok(_) => return Ok(()),
            Err(f) if f.conflict() && attempt < 5 => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(f) => return Err(f),
        }
    }
}

impl S3Lock {
    /// Deletes the lock object if it is still ours.
    pub async fn release(mut self) -> Result<(), S3Error> {
        self.released = true;
        forget(&self.info.id);
        self.delete_ours().await
    }

    async fn delete_ours(&self) -> Result<(), S3Error> {
        match delete(&self.client, &self.location, &self.etag).await {
            Ok(()) => Ok(()),
            // Gone, or replaced: someone force-unlocked us; their lock is not ours to delete.
            Err(f) if f.no_such_key() || f.precondition_failed() => Ok(()),
            Err(f) => Err(f.into_error("unlocking", &self.location)),
        }
    }
}

impl Drop for S3Lock {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        forget(&self.info.id);
        // Drop cannot await: block this thread on the runtime (a multi-threaded one keeps
        // serving the request meanwhile).
        let result = match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| h.block_on(self.delete_ours())).map_err(|e| e.to_string())
            }
            _ => Err("no async runtime to send the request on".to_string()),
        };
        if let Err(e) = result {
            stays_held(&self.location, &self.info.id, &e);
        }
    }
}
