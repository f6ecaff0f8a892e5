//! kill -9 at points all through an apply, then apply again: every resource
//! exists exactly once, the state is readable, and a plan shows no changes.

use std::time::{Duration, Instant};

use crate::harness::{network_stack, Env};

fn crash_then_recover(kill_after: Duration) {
    let env = Env::new();
    env.write("s.toml", &network_stack("crash", ""));
    env.emu.set_latency(60);
    let mut child = env.command(&["apply", "s.toml", "--auto-approve"]).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    let start = Instant::now();
    std::thread::sleep(kill_after);
    let still_running = child.try_wait().unwrap().is_none();
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(still_running, "the apply finished before {kill_after:?}; the kill point is too late to test anything");
    eprintln!("killed after {:?}", start.elapsed());
    env.emu.set_latency(0);

    // Whatever was on disk is valid state.
    if let Ok(text) = std::fs::read_to_string(env.path("state/crash.json")) {
        serde_json::from_str::<serde_json::Value>(&text).expect("state readable after kill -9");
    }
    let again = env.run(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(again.code, 0, "recovery apply failed after a kill at {kill_after:?}:\n{again:?}");
    let t = env.tagged("crash");
    assert_eq!(
        (t.vpcs.len(), t.subnets.len(), t.security_groups.len(), t.gateways.len(), t.route_tables.len(), t.placement_groups.len(), t.roles.len(), t.instance_profiles.len()),
        (1, 2, 1, 1, 1, 1, 1, 1),
        "every object exactly once after a kill at {kill_after:?}: {t:?}\n{again:?}"
    );
    let st = env.state("crash");
    assert!(st.get("pending").is_none(), "pending resolved: {st}");
    assert_eq!(st["resources"].as_object().unwrap().len(), 6);
    let plan = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "converged after a kill at {kill_after:?}:\n{plan:?}");
}

#[test]
fn kill_9_early_in_apply() {
    crash_then_recover(Duration::from_millis(400));
}

#[test]
fn kill_9_mid_apply() {
    crash_then_recover(Duration::from_millis(800));
}

#[test]
fn kill_9_late_in_apply() {
    crash_then_recover(Duration::from_millis(1200));
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
    std::thread::sleep(Duration::from_millis(700));
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
