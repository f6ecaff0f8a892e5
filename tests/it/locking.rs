//! One writer at a time: a second run fails fast naming the holder, and
//! --lock-timeout waits for it.

use std::time::{Duration, Instant};

use crate::harness::{Env, network_stack};

/// Starts an apply that the emulator's latency keeps busy, and waits until it holds the lock.
fn busy_apply(env: &Env) -> std::process::Child {
    env.emu.set_latency(150);
    let child = env
        .command(&["apply", "s.toml", "--auto-approve"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let lock = env.path("state/lock.json.lock");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(&lock).map_or(true, |s| s.is_empty()) {
        assert!(Instant::now() < deadline, "the apply never took the lock");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

#[test]
fn a_second_run_fails_fast_naming_the_holder() {
    let env = Env::new();
    env.write("s.toml", &network_stack("lock", ""));
    let mut child = busy_apply(&env);
    let started = Instant::now();
    let second = env.run(&["plan", "s.toml"]);
    assert!(started.elapsed() < Duration::from_secs(3), "fails at once without --lock-timeout");
    assert_eq!(second.code, 1, "{second:?}");
    assert!(second.stderr.contains("is locked by pid"), "{second:?}");
    assert!(second.stderr.contains(&format!("pid {} on ", child.id())), "names the holder's pid: {second:?}");
    assert!(second.stderr.contains("running `gpustack apply s.toml`"), "{second:?}");
    assert!(second.stderr.contains("--lock-timeout"), "{second:?}");
    let unlock = env.run(&["force-unlock", "--stack", "s.toml"]);
    assert_eq!(unlock.code, 1);
    assert!(unlock.stderr.contains(&format!("kill {}", child.id())), "{unlock:?}");

    // Waiting for the holder works.
    let waited = env.run(&["--lock-timeout", "60s", "plan", "s.toml"]);
    assert_eq!(waited.code, 0, "{waited:?}");
    assert!(child.wait().unwrap().success());
    env.emu.set_latency(0);
    assert_eq!(env.run(&["plan", "s.toml", "--detailed-exitcode"]).code, 0);
    assert!(env.ok(&["force-unlock", "--stack", "s.toml"]).stdout.contains("is not locked"));
}

#[test]
fn a_killed_holder_never_blocks() {
    let env = Env::new();
    env.write("s.toml", &network_stack("lock", ""));
    let mut child = busy_apply(&env);
    child.kill().unwrap();
    child.wait().unwrap();
    env.emu.set_latency(0);
    let next = env.run(&["plan", "s.toml"]);
    assert_eq!(next.code, 0, "{next:?}");
}
