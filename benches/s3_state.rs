//! S3 state benchmark: apply wall time of a 41-resource stack (1 VPC + 40 security
//! groups: many small operations, the journal's worst case) with state in S3 and
//! 50 ms added to every S3 call, against the same apply with local state. Every EC2
//! call takes 100 ms in both runs (the emulator's per-service latency), so the ratio
//! is what remote state costs on top of AWS. Also counts the S3 PUTs per apply.
//! Run: `cargo bench --bench s3_state` (needs the emulator: tests/emulator/setup.sh).
//! Target (DESIGN.md §5): ratio ≤ 1.10.

#[allow(dead_code)]
#[path = "../tests/it/harness.rs"]
mod harness;

use std::fmt::Write as _;
use std::time::Instant;

const RESOURCES: usize = 41;
const EC2_MS: u64 = 100;
const S3_MS: u64 = 50;
const RUNS: usize = 3;
const BUCKET: &str = "bench-gpustack-state";

fn stack(s3: bool) -> String {
    let mut s = String::from("[stack]\nname = \"wide\"\nregion = \"us-west-2\"\n");
    if s3 {
        let _ = write!(s, "\n[stack.backend]\ns3 = {{ bucket = \"{BUCKET}\", key = \"envs/wide.json\" }}\n");
    }
    s.push_str("\n[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n");
    for i in 0..RESOURCES - 1 {
        let _ = write!(
            s,
            "\n[security_group.g{i}]\nvpc = \"${{vpc.main.id}}\"\ningress = [{{ protocol = \"tcp\", from_port = {}, cidr = \"10.0.0.0/8\" }}]\n",
            2000 + i
        );
    }
    s
}

struct Run {
    /// The whole process, lock to release (ms).
    wall: f64,
    /// The executor alone, from the --json summary (ms).
    execute: f64,
    state_puts: usize,
}

fn apply(s3: bool) -> Run {
    let env = harness::Env::new();
    env.write("s.toml", &stack(s3));
    env.emu.control("POST", &format!("/_gpustack/service-latency?service=ec2&ms={EC2_MS}"));
    if s3 {
        env.emu.create_bucket(BUCKET);
        env.emu.control("POST", &format!("/_gpustack/service-latency?service=s3&ms={S3_MS}"));
    }
    env.emu.reset_requests();
    let started = Instant::now();
    let out = env.command(&["apply", "s.toml", "--auto-approve", "--json"]).output().expect("run gpustack");
    let wall = started.elapsed().as_secs_f64() * 1000.0;
    assert!(out.status.success(), "apply failed: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap_or("{}")).expect("summary line");
    let state_puts = env
        .emu
        .requests()
        .iter()
        .filter(|(svc, action)| svc == "s3" && action == &format!("PUT /{BUCKET}/envs/wide.json"))
        .count();
    // The emulator's settings are per process; this Env's emulator ends here.
    Run { wall, execute: summary["seconds"].as_f64().unwrap_or(f64::NAN) * 1000.0, state_puts }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    println!(
        "gpustack apply, {RESOURCES} resources (1 VPC + {} security groups), {EC2_MS} ms per EC2 call, +{S3_MS} ms per S3 call; median of {RUNS}",
        RESOURCES - 1
    );
    let (mut local, mut remote) = (vec![], vec![]);
    for _ in 0..RUNS {
        local.push(apply(false));
        remote.push(apply(true));
    }
    let wall = |r: &[Run]| median(r.iter().map(|x| x.wall).collect());
    let exec = |r: &[Run]| median(r.iter().map(|x| x.execute).collect());
    println!("{:>14} {:>12} {:>12} {:>12}", "", "local ms", "S3 ms", "ratio");
    println!(
        "{:>14} {:>12.0} {:>12.0} {:>12.3}",
        "wall time",
        wall(&local),
        wall(&remote),
        wall(&remote) / wall(&local)
    );
    println!(
        "{:>14} {:>12.0} {:>12.0} {:>12.3}",
        "execution",
        exec(&local),
        exec(&remote),
        exec(&remote) / exec(&local)
    );
    let puts: Vec<usize> = remote.iter().map(|r| r.state_puts).collect();
    println!("state PUTs per apply with S3: {puts:?} (one lock PUT and one lock DELETE besides)");
    println!(
        "ratio = S3 ÷ local (target ≤ 1.10). Wall time is the whole process: lock, read, refresh, plan, apply, release."
    );
}
