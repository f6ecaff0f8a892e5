//! Ctrl-C and SIGTERM for every command that holds the state lock: none of them may die
//! with the default action, which skips `Drop` and leaves an S3 lock behind (a local lock is
//! an flock, which the kernel frees at any exit).
//!
//! SIGTERM is what a CI cancel sends after SIGINT ("the runner machine sends SIGINT/Ctrl-C to
//! the step's entry process ... If the process doesn't exit within 7500 ms, the runner will
//! send SIGTERM/Ctrl-Break to the process, then wait for 2500 ms" before killing the process
//! tree: GitHub docs, workflow-cancellation-reference), and what `kill` and Kubernetes send.

use tokio::sync::watch;

/// What the first signal does.
#[derive(Clone, Copy)]
pub enum First {
    /// apply and destroy: start nothing new, let in-flight calls finish and be recorded,
    /// release the lock, exit non-zero (the engine watches the returned flag).
    Cancel,
    /// A short write under the lock (`state push`, `state migrate`): let it finish, so the
    /// stored state is never left half-replaced; the message says what is being waited for.
    Finish(&'static str),
    /// Read-only under the lock (`plan`): nothing to finish; release the lock and exit now.
    Exit,
}

/// Installs the handler; call it before the lock is taken, so an early signal means
/// "change nothing" rather than the default kill.
///
/// A first signal waits for in-flight work (for apply and destroy, up to the longest AWS
/// wait: minutes). A runner that sends a single SIGTERM and kills after a grace period
/// (Kubernetes: `terminationGracePeriodSeconds`, 30 s by default) must either send a second
/// signal before its kill (two signals always release the lock within 2 s) or allow a grace
/// period longer than the longest wait; otherwise the kill orphans the S3 lock, and the next
/// run names it with the `force-unlock` line (or waits for it with `--lock-timeout`).
pub fn on_interrupt(first: First) -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(false);
    tokio::spawn(async move {
        // Without a SIGTERM handler (it cannot be installed) SIGTERM keeps its default.
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        if !stop_signal(&mut term).await {
            return;
        }
        match first {
            First::Exit => {
                eprintln!("Interrupted: nothing was changed; releasing the state lock and exiting.");
                exit_releasing().await;
            }
            First::Finish(what) => eprintln!("Interrupted: finishing {what}; interrupt again to exit now."),
            First::Cancel => {}
        }
        let _ = tx.send(true);
        if stop_signal(&mut term).await {
            eprintln!(
                "Second interrupt: exiting now. The state on disk is consistent; run the same command again to resolve pending operations."
            );
            exit_releasing().await;
        }
    });
    rx
}

/// Releases every S3 lock this process holds (2 s in all: within GitHub's 2.5 s between
/// SIGTERM and the kill) and exits 130.
async fn exit_releasing() {
    crate::state::s3::lock::release_held(std::time::Duration::from_secs(2)).await;
    std::process::exit(130);
}

/// Waits for SIGINT (Ctrl-C) or SIGTERM; false when no signal can arrive any more.
async fn stop_signal(term: &mut Option<tokio::signal::unix::Signal>) -> bool {
    match term {
        Some(t) => tokio::select! {
            r = tokio::signal::ctrl_c() => r.is_ok(),
            s = t.recv() => s.is_some(),
        },
        None => tokio::signal::ctrl_c().await.is_ok(),
    }
}
