//! The local state backend: one JSON file, written atomically (temp file in the
//! same directory, fsync, rename, fsync of the directory) with mode 0600, and a
//! lock file beside it held with an OS file lock, which the OS releases when the
//! holder exits — so a crashed holder never blocks anyone.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::{FORMAT, LockHeld, State};

/// Who holds a lock, written into the lock file by the holder.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Holder {
    pub pid: u32,
    pub host: String,
    pub command: String,
    pub started: String,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pid {} on {}, running `{}`, since {} ({})",
            self.pid,
            self.host,
            self.command,
            self.started,
            super::age(&self.started)
        )
    }
}

/// A held state lock; released on drop (and by the OS if the process dies).
pub struct Lock {
    file: File,
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}

pub fn lock_path(state: &Path) -> PathBuf {
    let mut p = state.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

/// Takes the lock beside `state`, waiting up to `timeout`.
pub fn lock(state: &Path, timeout: Duration, command: &str) -> Result<Lock> {
    ensure_dir(state)?;
    let path = lock_path(state);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .with_context(|| format!("cannot open the lock file {}", path.display()))?;
    let deadline = Instant::now() + timeout;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) => {
                if Instant::now() >= deadline {
                    let holder = read_holder(&mut file)
                        .map_or_else(|| "another gpustack process".to_string(), |h| h.to_string());
                    return Err(LockHeld { what: state.display().to_string(), holder, unlock: None }.into());
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("cannot lock {}", path.display()));
            }
        }
    }
    let holder = Holder {
        pid: std::process::id(),
        host: gethostname::gethostname().to_string_lossy().into_owned(),
        command: command.to_string(),
        started: super::now(),
    };
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(serde_json::to_string(&holder)?.as_bytes())?;
    file.sync_all()?;
    Ok(Lock { file })
}

fn read_holder(file: &mut File) -> Option<Holder> {
    let mut s = String::new();
    file.rewind().ok()?;
    file.read_to_string(&mut s).ok()?;
    serde_json::from_str(&s).ok()
}

/// The current holder of the lock beside `state`, if it is held.
pub fn holder(state: &Path) -> Result<Option<Holder>> {
    let path = lock_path(state);
    let Ok(mut file) = OpenOptions::new().read(true).write(true).open(&path) else {
        return Ok(None);
    };
    match file.try_lock() {
        Ok(()) => {
            let _ = file.unlock();
            Ok(None)
        }
        Err(std::fs::TryLockError::WouldBlock) => Ok(Some(read_holder(&mut file).unwrap_or(Holder {
            pid: 0,
            host: "unknown".into(),
            command: "unknown".into(),
            started: "unknown".into(),
        }))),
        Err(std::fs::TryLockError::Error(e)) => Err(e.into()),
    }
}

/// Reads the state file; `None` when it does not exist yet.
pub fn read(path: &Path) -> Result<Option<State>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read the state file {}", path.display())),
    };
    decode(text.as_bytes(), &path.display().to_string()).map(Some)
}

/// Parses state bytes read from `what` (a path or an s3:// URL), checking the format.
pub fn decode(bytes: &[u8], what: &str) -> Result<State> {
    let state: State = serde_json::from_slice(bytes).with_context(|| {
        format!("the state {what} is not valid gpustack state; restore it from its backup or bucket versioning")
    })?;
    if state.format > FORMAT {
        bail!(
            "the state {what} has format {} but this gpustack reads format {FORMAT} at most; upgrade gpustack",
            state.format
        );
    }
    Ok(state)
}

/// Serializes state the way it is written (pretty JSON, trailing newline).
pub fn encode(state: &State) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(state)?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Replaces the file at `path` with `bytes` atomically, mode 0600.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = ensure_dir(path)?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "state".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        File::open(&dir)?.sync_all()
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow::Error::new(e).context(format!("cannot write {}", path.display()))
    })
}

fn ensure_dir(path: &Path) -> Result<PathBuf> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create the state directory {}", dir.display()))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn writes_atomically_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        let st = State::new("x", "us-west-2");
        write_atomic(&p, &encode(&st).unwrap()).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(read(&p).unwrap().unwrap().lineage, st.lineage);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temp file left");
    }

    #[test]
    fn second_lock_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        let _held = lock(&p, Duration::ZERO, "gpustack apply a.toml").unwrap();
        let err = lock(&p, Duration::from_millis(300), "gpustack plan").err().unwrap().to_string();
        assert!(err.contains(&format!("pid {}", std::process::id())), "{err}");
        assert!(err.contains("gpustack apply a.toml"), "{err}");
        assert!(holder(&p).unwrap().is_some());
    }

    #[test]
    fn lock_is_free_after_drop() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.json");
        drop(lock(&p, Duration::ZERO, "a").unwrap());
        assert!(holder(&p).unwrap().is_none());
        lock(&p, Duration::ZERO, "b").unwrap();
    }
}
