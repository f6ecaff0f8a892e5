//! Apply benchmark: wall time of the executor on wide stacks against the local
//! emulator with a fixed latency on every AWS call, compared with two lower
//! bounds: the DAG's critical path (VPC create, then a security group's three
//! calls) and the per-service concurrency bound (EC2 calls × latency ÷ slots).
//! Run: `cargo bench --bench apply` (needs the emulator: tests/emulator/setup.sh).
//! Target (DESIGN.md §5): within 10% of the critical path where concurrency allows.

#[allow(dead_code)]
#[path = "../tests/it/harness.rs"]
mod harness;

use std::fmt::Write as _;

const LATENCY_MS: u64 = 100;
/// Calls on the longest chain: CreateVpc, then CreateSecurityGroup, RevokeSecurityGroupEgress,
/// AuthorizeSecurityGroupIngress.
const CHAIN_CALLS: u64 = 4;
const CALLS_PER_GROUP: u64 = 3;

fn stack(n: usize) -> String {
    let mut s =
        String::from("[stack]\nname = \"wide\"\nregion = \"us-west-2\"\n\n[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n");
    for i in 0..n {
        let _ = write!(
            s,
            "\n[security_group.g{i}]\nvpc = \"${{vpc.main.id}}\"\ningress = [{{ protocol = \"tcp\", from_port = {}, cidr = \"10.0.0.0/8\" }}]\n",
            2000 + i
        );
    }
    s
}

/// The executor's own seconds (from the --json summary) for a fresh apply, in ms.
fn apply_ms(n: usize, slots: u64, latency: u64) -> f64 {
    let env = harness::Env::new();
    env.write("s.toml", &stack(n));
    env.emu.set_latency(latency);
    let out = env
        .command(&["apply", "s.toml", "--auto-approve", "--json"])
        .env("GPUSTACK_PARALLELISM_EC2", slots.to_string())
        .output()
        .expect("run gpustack");
    assert!(out.status.success(), "apply failed: {}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap_or("{}")).expect("summary line");
    summary["seconds"].as_f64().unwrap_or(f64::NAN) * 1000.0
}

fn main() {
    println!(
        "gpustack apply, 1 VPC + N security groups, {LATENCY_MS} ms per AWS call (execution only, refresh excluded)"
    );
    println!(
        "{:>5} {:>10} {:>10} {:>14} {:>16} {:>12} {:>12} {:>8}",
        "N", "EC2 slots", "calls", "critical ms", "concurrency ms", "at 0 ms", "measured ms", "ratio"
    );
    for (n, slots) in [(4usize, 16u64), (16, 16), (64, 16), (64, 64), (128, 128)] {
        let measured = apply_ms(n, slots, LATENCY_MS);
        let baseline = apply_ms(n, slots, 0);
        let calls = 1 + CALLS_PER_GROUP * n as u64;
        let critical = (CHAIN_CALLS * LATENCY_MS) as f64;
        let concurrency = (LATENCY_MS + (CALLS_PER_GROUP * n as u64).div_ceil(slots) * LATENCY_MS) as f64;
        let bound = critical.max(concurrency);
        println!(
            "{n:>5} {slots:>10} {calls:>10} {critical:>14.0} {concurrency:>16.0} {baseline:>12.0} {measured:>12.0} {:>8.2}",
            measured / bound
        );
    }
    println!("ratio = measured ÷ the larger lower bound (target 1.10). \"at 0 ms\" is the same apply with no injected");
    println!("latency: the floor set by the local emulator's own cost per request on this machine.");
}
