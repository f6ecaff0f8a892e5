//! Injected throttling and server errors: the SDK's retries (adaptive mode) carry
//! apply and destroy through, with every object created exactly once.

use crate::harness::{Env, network_stack};

fn converges_through(kind: &str, every: u64) {
    let env = Env::new();
    env.write("s.toml", &network_stack("flaky", ""));
    env.emu.set_faults(every, kind);
    let apply = env.run(&["apply", "s.toml", "--auto-approve"]);
    let injected = env.emu.set_faults(0, kind);
    assert_eq!(apply.code, 0, "apply with every {every}th call failing ({kind}):\n{apply:?}");
    assert!(injected >= 3, "the faults were exercised: {injected}");
    let t = env.tagged("flaky");
    assert_eq!(t.counts(), (1, 2, 1, 1, 1, 1, 1, 1), "{t:?}");
    assert_eq!(env.run(&["plan", "s.toml", "--detailed-exitcode"]).code, 0);

    env.emu.set_faults(every, kind);
    let destroy = env.run(&["destroy", "s.toml", "--auto-approve"]);
    env.emu.set_faults(0, kind);
    assert_eq!(destroy.code, 0, "{destroy:?}");
    assert_eq!(env.tagged("flaky").total(), 0);
}

/// One call in eight throttled. (At one in three the SDK's adaptive rate limiter slows the
/// apply to minutes: correct, but too slow for the suite.)
#[test]
fn apply_and_destroy_converge_with_every_eighth_call_throttled() {
    converges_through("throttle", 8);
}

#[test]
fn apply_and_destroy_converge_with_every_fourth_call_a_server_error() {
    converges_through("5xx", 4);
}
