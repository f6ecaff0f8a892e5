//! Plan benchmark: generated stacks of one VPC and N security groups (each with
//! a reference to the VPC and one rule), planned with an empty state and
//! `--refresh=false` by the real binary. Prints wall time (best and median of
//! several runs) and the child's peak resident memory. Run: `cargo bench --bench plan`.
//! Target (DESIGN.md §5): 10,000 resources in under 1 s and 300 MB, growing linearly.

use std::fmt::Write as _;
use std::process::{Command, Stdio};
use std::time::Instant;

fn stack(n: usize) -> String {
    let mut s = String::with_capacity(n * 200);
    s.push_str("[stack]\nname = \"bench\"\nregion = \"us-west-2\"\ntags = { team = \"ml-platform\" }\n\n[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n");
    for i in 0..n {
        let _ = write!(
            s,
            "\n[security_group.g{i}]\nvpc = \"${{vpc.main.id}}\"\ningress = [{{ protocol = \"tcp\", from_port = {}, cidr = \"10.0.0.0/8\" }}]\n",
            1024 + (i % 60000)
        );
    }
    s
}

/// Runs the command, returning (seconds, peak RSS in MiB) of the child.
// The child is reaped by wait4 (which also reports its peak memory), not Child::wait.
#[allow(clippy::zombie_processes)]
fn measure(cmd: &mut Command) -> (f64, f64) {
    let start = Instant::now();
    let child = cmd.stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("spawn gpustack");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it for the child we just spawned.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(r, pid, "wait4 failed");
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "gpustack plan failed (status {status})");
    (secs, usage.ru_maxrss as f64 / 1024.0)
}

fn main() {
    let bin = env!("CARGO_BIN_EXE_gpustack");
    let dir = std::env::temp_dir().join(format!("gpustack-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let runs = 5;
    println!("gpustack plan --refresh=false, empty state, 1 VPC + N security groups ({runs} runs each)");
    println!(
        "{:>8} {:>10} {:>10} {:>10} {:>12} {:>12}",
        "N", "file KiB", "best ms", "median ms", "peak MiB", "µs/resource"
    );
    for n in [1_000usize, 2_500, 5_000, 10_000] {
        let text = stack(n);
        let file = dir.join(format!("s{n}.toml"));
        std::fs::write(&file, &text).unwrap();
        let mut times = vec![];
        let mut peak: f64 = 0.0;
        for _ in 0..runs {
            let (t, m) = measure(
                Command::new(bin)
                    .args(["plan", "--refresh=false"])
                    .arg(&file)
                    .current_dir(&dir)
                    .env("AWS_EC2_METADATA_DISABLED", "true"),
            );
            times.push(t);
            peak = peak.max(m);
        }
        times.sort_by(f64::total_cmp);
        let (best, median) = (times[0] * 1000.0, times[runs / 2] * 1000.0);
        println!(
            "{n:>8} {:>10} {best:>10.1} {median:>10.1} {peak:>12.1} {:>12.1}",
            text.len() / 1024,
            median * 1000.0 / (n + 1) as f64
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
