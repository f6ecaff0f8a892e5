//! `capacity find` round-trip benchmark (issue 22): 6 GPU types × 4 regions (every zone), all
//! four options, against the local emulator with 0 ms and with N ms added to every AWS call.
//! (time at N − time at 0) ÷ N is the number of dependent round trips the search waits for.
//! Target: at most 3 (everything independent runs at once, within each region's per-service
//! limits: training-plan searches queue behind SageMaker's limit of 4, On-Demand prices behind
//! the Price List's limit of 5).
//! Run: `cargo bench --bench capacity_find` (needs the emulator: tests/emulator/setup.sh).
//! `GPUSTACK_BIN=/path/to/gpustack` measures another build; `LATENCY_MS` (default 100),
//! `HIGH_MS` (default 2000; also measured at half of it) and `RUNS` (default 5, the median is
//! shown) change the setup.

#[allow(dead_code)]
#[path = "../tests/it/harness.rs"]
mod harness;

use std::time::Instant;

const TYPES: &str = "p5.48xlarge,p5e.48xlarge,p5en.48xlarge,p6-b200.48xlarge,p4d.24xlarge,p5.4xlarge";
const REGIONS: &str = "us-east-1,us-west-2,us-east-2,eu-west-1";

/// Median wall seconds of `runs` searches, and the AWS requests of one.
fn search(env: &harness::Env, bin: &str, runs: usize) -> (f64, usize) {
    let mut times = vec![];
    let mut requests = 0;
    for _ in 0..runs {
        env.emu.reset_requests();
        let args =
            ["capacity", "find", "--gpus", "16", "--types", TYPES, "--hours", "48", "--regions", REGIONS, "--json"];
        // The harness's environment (emulator endpoint, test credentials), with `bin`.
        let template = env.command(&args);
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
        assert!(out.status.code() == Some(0), "capacity find failed: {}", String::from_utf8_lossy(&out.stderr));
        requests = env.emu.requests().len();
    }
    times.sort_by(f64::total_cmp);
    (times[runs / 2], requests)
}

fn main() {
    let bin = std::env::var("GPUSTACK_BIN").unwrap_or_else(|_| harness::bin().to_string());
    let latency: u64 = std::env::var("LATENCY_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let runs: usize = std::env::var("RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(5).max(1);
    // Two long latencies, far above the emulator's own time, whose difference counts the
    // latencies the search waits for one after another whatever that floor is.
    let high = std::env::var("HIGH_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(2000u64);
    let mid = high / 2;
    println!("gpustack capacity find: 6 types × 4 regions, every option, N ms added to every AWS call");
    println!("(median of {runs} runs); binary: {bin}");
    let env = harness::Env::new();
    env.emu.set_latency(0);
    // One unmeasured search: the emulator builds its catalogs on first use.
    search(&env, &bin, 1);
    let mut at = vec![];
    for ms in [0, latency, mid, high] {
        env.emu.set_latency(ms);
        at.push(search(&env, &bin, runs));
    }
    env.emu.set_latency(0);
    let requests = at[0].1;
    let trips = |t: f64, ms: u64| (t - at[0].0) * 1000.0 / ms as f64;
    let slope = (at[3].0 - at[2].0) * 1000.0 / (high - mid) as f64;
    println!(
        "{:>9} {:>10} {:>12} {:>12} {:>12} {:>14} {:>20}",
        "requests",
        "at 0 ms",
        format!("at {latency} ms"),
        format!("at {mid} ms"),
        format!("at {high} ms"),
        format!("trips at {latency}"),
        format!("trips {mid}→{high} ms")
    );
    println!(
        "{:>9} {:>8.0}ms {:>10.0}ms {:>10.0}ms {:>10.0}ms {:>14.1} {:>20.1}",
        requests,
        at[0].0 * 1000.0,
        at[1].0 * 1000.0,
        at[2].0 * 1000.0,
        at[3].0 * 1000.0,
        trips(at[1].0, latency),
        slope
    );
    println!("round trips = (time at N ms − time at 0 ms) ÷ N ms: the AWS calls the search waits for one after");
    println!(
        "another (target: at most 3). (time at {high} − time at {mid}) ÷ {} ms counts the same without the",
        high - mid
    );
    println!("emulator's own time (one Python process answering {requests} requests), which hides short latencies.");
}
