//! stdout: what a command produces (the plan, the graph, JSON, outputs, listings).
//!
//! A closed stdout (`gpustack plan … | head -1`) is not an error: what is written after the
//! reader left is dropped and the command goes on to its own exit code, so `plan --out`
//! still saves its file, `--detailed-exitcode` still answers, an apply still finishes, and a
//! read-only command ends quietly with exit 0 (as ripgrep does). Any other write error (a
//! full disk) is an error that says it was stdout. `print!` would panic in both cases.

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write found the reader gone; later writes are skipped.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes to stdout and flushes (so a closed pipe shows here, not at exit).
pub fn write(args: fmt::Arguments) -> io::Result<()> {
    send(|out| out.write_fmt(args))
}

/// Writes bytes as they are (`state pull`: the stored state, byte for byte).
pub fn write_bytes(bytes: &[u8]) -> io::Result<()> {
    send(|out| out.write_all(bytes))
}

fn send(write: impl FnOnce(&mut io::StdoutLock) -> io::Result<()>) -> io::Result<()> {
    if CLOSED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let mut out = io::stdout().lock();
    match write(&mut out).and_then(|()| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        Err(e) => Err(io::Error::new(e.kind(), format!("cannot write to stdout: {e}"))),
        Ok(()) => Ok(()),
    }
}

/// `print!` to stdout, returning `io::Result` instead of panicking (see the module doc).
macro_rules! out {
    ($($arg:tt)*) => { $crate::cli::stdout::write(format_args!($($arg)*)) };
}

/// `println!` to stdout, returning `io::Result` instead of panicking (see the module doc).
macro_rules! outln {
    () => { $crate::cli::stdout::write(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::cli::stdout::write(format_args!("{}\n", format_args!($($arg)*))) };
}

pub(crate) use {out, outln};
