//! Plan round-trip benchmark: wall time of `gpustack plan` on an empty state for every
//! shipped example, against the local emulator with 0 ms and with N ms added to every
//! AWS call. (time at N − time at 0) ÷ N is the number of dependent round trips the plan
//! waits for: the refresh of every kind, the instance catalog, the offering searches and
//! the quotas. Target (issue 11): at most 3 for any shipped example.
//! Run: `cargo bench --bench plan_round_trips` (needs the emulator: tests/emulator/setup.sh).
//! `GPUSTACK_BIN=/path/to/gpustack` measures another build (for before/after numbers);
//! `LATENCY_MS` (default 80) and `RUNS` (default 5, the median is shown) change the setup.

#[allow(dead_code)]
#[path = "../tests/it/harness.rs"]
mod harness;

use std::path::PathBuf;
use std::time::Instant;

fn shipped() -> Vec<PathBuf> {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![];
    for dir in ["stacks", "examples"] {
        for e in std::fs::read_dir(repo.join(dir)).expect("read the stack directory") {
            let p = e.expect("directory entry").path();
            if p.extension().is_some_and(|x| x == "toml") {
                files.push(p);
            }
        }
    }
    files.sort();
    files
}

/// Median wall seconds of `runs` plans, and the AWS requests of one plan.
fn plan(env: &harness::Env, bin: &str, file: &str, runs: usize) -> (f64, usize) {
    let mut times = vec![];
    let mut requests = 0;
    for _ in 0..runs {
        env.emu.reset_requests();
        // The harness's environment (emulator endpoint, test credentials), with `bin`.
        let template = env.command(&["plan", file, "--var", "admin_cidr=198.51.100.7/32"]);
        let mut cmd = std::process::Command::new(bin);
        cmd.args(template.get_args()).current_dir(env.dir.path()).stdin(std::process::Stdio::null());
        for (k, v) in template.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        let start = Instant::now();
        let out = cmd.output().expect("run gpustack");
        times.push(start.elapsed().as_secs_f64());
        assert!(out.status.success(), "plan {file} failed: {}", String::from_utf8_lossy(&out.stderr));
        requests = env.emu.requests().len();
    }
    times.sort_by(f64::total_cmp);
    (times[runs / 2], requests)
}

fn main() {
    let bin = std::env::var("GPUSTACK_BIN").unwrap_or_else(|_| harness::bin().to_string());
    let latency: u64 = std::env::var("LATENCY_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(80);
    let runs: usize = std::env::var("RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(5).max(1);
    println!("gpustack plan, empty state, {latency} ms added to every AWS call (median of {runs} runs)");
    println!("binary: {bin}");
    println!(
        "{:<28} {:>9} {:>10} {:>12} {:>14}",
        "stack",
        "requests",
        "at 0 ms",
        &format!("at {latency} ms"),
        "round trips"
    );
    let env = harness::Env::new();
    for file in shipped() {
        let name = file.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap_or(&file).display().to_string();
        let path = file.to_string_lossy().into_owned();
        env.emu.set_latency(0);
        let (base, requests) = plan(&env, &bin, &path, runs);
        env.emu.set_latency(latency);
        let (slow, _) = plan(&env, &bin, &path, runs);
        env.emu.set_latency(0);
        let trips = (slow - base) * 1000.0 / latency as f64;
        println!(
            "{:<28} {:>9} {:>8.0}ms {:>10.0}ms {:>14.1}",
            name.trim_start_matches('/'),
            requests,
            base * 1000.0,
            slow * 1000.0,
            trips
        );
    }
    println!(
        "round trips = (time at {latency} ms − time at 0 ms) ÷ {latency} ms: the AWS calls the plan waits for one"
    );
    println!("after another (target: at most 3).");
}
