//! kill -9 at points all through an apply, then apply again: every resource
//! exists exactly once, the state is readable, and a plan shows no changes.

use std::time::{Duration, Instant};

use crate::harness::{Env, network_stack};

/// Where in the apply to kill: once the journal on disk shows `recorded` finished resources
/// and at least one pending operation, plus `after` more time.
struct KillPoint {
    recorded: usize,
    after: Duration,
}

fn journal(env: &Env) -> Option<(usize, usize)> {
    let text = std::fs::read_to_string(env.path("state/crash.json")).ok()?;
    let st: serde_json::Value = serde_json::from_str(&text).ok()?;
    let pending = st.get("pending").and_then(|p| p.as_array()).map_or(0, Vec::len);
    Some((st["resources"].as_object()?.len(), pending))
}

fn crash_then_recover(at: KillPoint) {
    let env = Env::new();
    env.write("s.toml", &network_stack("crash", ""));
    // Every AWS call takes 60 ms, so each operation spans several polls of the journal.
    env.emu.set_latency(60);
    let mut child = env
        .command(&["apply", "s.toml", "--auto-approve"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !journal(&env).is_some_and(|(done, pending)| done >= at.recorded && pending > 0) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the apply finished before the kill point ({} recorded)",
            at.recorded
        );
        assert!(Instant::now() < deadline, "the kill point was never reached");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(at.after);
    assert!(child.try_wait().unwrap().is_none(), "the apply finished before the kill");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let seen = journal(&env);
    env.emu.set_latency(0);

    let again = env.run(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(again.code, 0, "recovery apply failed after a kill at (recorded, pending) = {seen:?}:\n{again:?}");
    let t = env.tagged("crash");
    assert_eq!(
        t.counts(),
        (1, 2, 1, 1, 1, 1, 1, 1),
        "every object exactly once after a kill at {seen:?}: {t:?}\n{again:?}"
    );
    let st = env.state("crash");
    assert!(st.get("pending").is_none(), "pending resolved: {st}");
    assert_eq!(st["resources"].as_object().unwrap().len(), 6);
    let plan = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "converged after a kill at {seen:?}:\n{plan:?}");
}

#[test]
fn kill_9_as_the_first_create_starts() {
    crash_then_recover(KillPoint { recorded: 0, after: Duration::ZERO });
}

/// Inside the VPC's create: the VPC exists, its gateway or route table may not yet.
#[test]
fn kill_9_inside_a_multi_call_create() {
    crash_then_recover(KillPoint { recorded: 0, after: Duration::from_millis(250) });
}

#[test]
fn kill_9_mid_apply() {
    crash_then_recover(KillPoint { recorded: 3, after: Duration::ZERO });
}

#[test]
fn kill_9_late_in_apply() {
    crash_then_recover(KillPoint { recorded: 4, after: Duration::from_millis(20) });
}

#[test]
fn ctrl_c_finishes_in_flight_work_records_it_and_exits_non_zero() {
    let env = Env::new();
    env.write("s.toml", &network_stack("intr", ""));
    env.emu.set_latency(80);
    let child = env
        .command(&["apply", "s.toml", "--auto-approve"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupt once the first operations are in flight (pending in the journal).
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::fs::read_to_string(env.path("state/intr.json")).is_ok_and(|t| t.contains("\"pending\"")) {
        assert!(Instant::now() < deadline, "the apply never started an operation");
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: sending SIGINT to our own child process.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "interrupted apply exits non-zero:\n{stderr}");
    assert!(stderr.contains("Interrupted: finishing the"), "{stderr}");
    // In-flight calls finished and were recorded: nothing is left pending.
    let st = env.state("intr");
    assert!(st.get("pending").is_none(), "in-flight work recorded: {st}");
    assert!(st["resources"].as_object().unwrap().len() < 6, "something was left to do: {st}");
    env.emu.set_latency(0);
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(env.run(&["plan", "s.toml", "--detailed-exitcode"]).code, 0);
    assert_eq!(env.tagged("intr").vpcs.len(), 1);
}
