//! Where a stack's state lives, behind one interface: a local file (the default) or
//! an S3 object (`[stack.backend] s3 = {…}` or `--state s3://bucket/key`). Commands
//! lock, read and write through [`Backend`] and never ask which one it is, except to
//! say where the state is.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};

use super::s3::lock::{self as s3lock, LockInfo, S3Lock, Unlocked};
use super::s3::{S3Error, S3Location, Store};
use super::{State, local};

/// Where a state is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    Local(PathBuf),
    S3(S3Location),
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Local(p) => write!(f, "{}", p.display()),
            Location::S3(l) => l.fmt(f),
        }
    }
}

impl Location {
    /// A `--state` or `--to` value: `s3://bucket/key` (in `region`, asked only then) or a path.
    pub fn parse(text: &str, region: impl FnOnce() -> Option<String>) -> Result<Location> {
        let Some(rest) = text.strip_prefix("s3://") else { return Ok(Location::Local(PathBuf::from(text))) };
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() || key.is_empty() || key.ends_with('/') {
            bail!("`{text}` is not an S3 state location; write s3://BUCKET/KEY, e.g. s3://my-team-state/envs/dev.json");
        }
        let Some(region) = region() else {
            bail!(
                "which region is the bucket `{bucket}` in? Pass --stack FILE (its [stack.backend] or [stack] region), or set AWS_REGION"
            );
        };
        Ok(Location::S3(S3Location { bucket: bucket.to_string(), key: key.to_string(), region }))
    }
}

/// A state store, opened.
pub enum Backend {
    Local(PathBuf),
    S3(Store),
}

/// A held state lock; released on drop.
pub enum StateLock {
    Local(local::Lock),
    S3(Box<S3Lock>),
}

impl StateLock {
    /// Releases the lock now, reporting a failure (dropping it releases too, but can only warn).
    pub async fn release(self) -> Result<()> {
        match self {
            StateLock::Local(l) => drop(l),
            StateLock::S3(l) => l.release().await?,
        }
        Ok(())
    }
}

/// A state write that did not happen.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The stored state is not the one this run last read or wrote: someone else wrote it.
    #[error(transparent)]
    Changed(S3Error),
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
}

/// What `force-unlock` found.
pub enum Holder {
    None,
    /// A local OS lock: held by a live process, which the OS frees when it exits.
    Local(local::Holder),
    S3(LockInfo),
}

impl Backend {
    pub async fn open(location: Location) -> Backend {
        match location {
            Location::Local(p) => Backend::Local(p),
            Location::S3(l) => Backend::S3(Store::connect(l).await),
        }
    }

    pub fn location(&self) -> Location {
        match self {
            Backend::Local(p) => Location::Local(p.clone()),
            Backend::S3(s) => Location::S3(s.location.clone()),
        }
    }

    /// Takes the state's lock, waiting up to `timeout`. `unlock` is the command line that
    /// frees a lock left by a dead run, with `{id}` where the lock id goes.
    pub async fn lock(&self, timeout: Duration, command: &str, unlock: &str) -> Result<StateLock> {
        match self {
            Backend::Local(p) => {
                let (p, command) = (p.clone(), command.to_string());
                let lock = tokio::task::spawn_blocking(move || local::lock(&p, timeout, &command)).await??;
                Ok(StateLock::Local(lock))
            }
            Backend::S3(s) => {
                Ok(StateLock::S3(Box::new(s3lock::acquire(s.client(), &s.location, timeout, command, unlock).await?)))
            }
        }
    }

    /// The state's bytes, or `None` when nothing has been written yet.
    pub async fn read_bytes(&self) -> Result<Option<Vec<u8>>> {
        match self {
            Backend::Local(p) => match std::fs::read(p) {
                Ok(b) => Ok(Some(b)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(anyhow::Error::new(e).context(format!("cannot read the state file {}", p.display()))),
            },
            Backend::S3(s) => Ok(s.read().await?),
        }
    }

    /// The state, or `None` when nothing has been written yet.
    pub async fn read(&self) -> Result<Option<State>> {
        match self {
            Backend::Local(p) => local::read(p),
            Backend::S3(s) => {
                let what = s.location.to_string();
                s.read().await?.map(|b| local::decode(&b, &what)).transpose()
            }
        }
    }

    /// Replaces the state: atomically for a file, and for S3 only if the object is still
    /// the one this backend last read or wrote.
    pub async fn write(&self, bytes: Vec<u8>) -> Result<(), WriteError> {
        match self {
            Backend::Local(p) => {
                let p = p.clone();
                tokio::task::spawn_blocking(move || local::write_atomic(&p, &bytes))
                    .await
                    .map_err(anyhow::Error::from)??;
                Ok(())
            }
            Backend::S3(s) => s.write(&bytes).await.map_err(|e| match e {
                S3Error::Changed { .. } => WriteError::Changed(e),
                other => WriteError::Failed(other.into()),
            }),
        }
    }

    /// Who holds the lock, without taking it.
    pub async fn holder(&self) -> Result<Holder> {
        match self {
            Backend::Local(p) => Ok(local::holder(p)?.map_or(Holder::None, Holder::Local)),
            Backend::S3(s) => {
                Ok(s3lock::holder(s.client(), &s.location).await?.map_or(Holder::None, |(i, _)| Holder::S3(i)))
            }
        }
    }

    /// Deletes an S3 lock whose id is `id`; a local lock cannot be broken (see [`Holder::Local`]).
    pub async fn force_unlock(&self, id: &str) -> Result<Option<Unlocked>> {
        match self {
            Backend::Local(_) => Ok(None),
            Backend::S3(s) => Ok(Some(s3lock::force_unlock(s.client(), &s.location, id).await?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse() {
        let r = || Some("eu-west-1".to_string());
        assert_eq!(Location::parse("./s.json", || None).unwrap(), Location::Local(PathBuf::from("./s.json")));
        let s3 = Location::parse("s3://b/envs/pr-1.json", r).unwrap();
        assert_eq!(s3.to_string(), "s3://b/envs/pr-1.json");
        assert!(matches!(s3, Location::S3(S3Location { ref region, .. }) if region == "eu-west-1"));
        for bad in ["s3://", "s3://b", "s3://b/", "s3:///k", "s3://b/dir/"] {
            assert!(Location::parse(bad, r).is_err(), "{bad}");
        }
        assert!(Location::parse("s3://b/k", || None).unwrap_err().to_string().contains("AWS_REGION"));
    }
}
