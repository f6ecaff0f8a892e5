//! Input that once reached a panic, through the real binary: absurd durations and
//! settings, a closed stdout, and an IAM trust policy that is not what AWS usually sends.
//! Each must end with a clear message (or quietly, for a closed pipe) and the right exit
//! code, never `panicked at`.

use std::io::Read;
use std::process::{Command, Stdio};

use crate::harness::{Env, bin, block_on};

const STACK: &str = "[stack]\nname = \"robust\"\nregion = \"us-west-2\"\n\n[vpc.main]\ncidr_block = \"10.0.0.0/16\"\n";

struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Runs gpustack offline in a temp dir holding `s.toml`.
fn run(args: &[&str], env: &[(&str, &str)]) -> Ran {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), STACK).unwrap();
    let mut c = Command::new(bin());
    c.args(args).current_dir(dir.path()).env("AWS_ENDPOINT_URL", "http://127.0.0.1:9").env("NO_COLOR", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    }
}

#[test]
fn absurd_lock_timeouts_are_usage_errors() {
    for bad in ["99999999999999999999h", "169h", "1e400", "inf", "NaN", "-5s", "5 minutes"] {
        let r = run(&[&format!("--lock-timeout={bad}"), "plan", "s.toml", "--refresh=false"], &[]);
        assert_eq!(r.code, 1, "--lock-timeout {bad}: {}", r.stderr);
        assert!(!r.stderr.contains("panicked"), "--lock-timeout {bad}: {}", r.stderr);
        assert!(r.stderr.contains("--lock-timeout"), "--lock-timeout {bad}: {}", r.stderr);
    }
    let r = run(&["--lock-timeout", "99999999999999999999h", "validate", "s.toml"], &[]);
    assert!(r.stderr.contains("is too long; the longest wait for a lock is 168h"), "{}", r.stderr);
    let r = run(&["--lock-timeout", "five", "validate", "s.toml"], &[]);
    assert!(r.stderr.contains("`five` is not a duration; write e.g. 30s, 5m or 1h"), "{}", r.stderr);
    assert_eq!(run(&["--lock-timeout", "168h", "validate", "s.toml"], &[]).code, 0);
}

#[test]
fn absurd_settings_name_the_variable_and_its_range() {
    let ranges = [
        ("GPUSTACK_SETTLE_SECONDS", "from 0 to 3600"),
        ("GPUSTACK_POLL_MAX_SECONDS", "from 0.05 to 15"),
        ("GPUSTACK_HEARTBEAT_SECONDS", "from 0.1 to 86400"),
        ("GPUSTACK_PARALLELISM_EC2", "from 1 to 1024"),
        ("GPUSTACK_PARALLELISM_QUOTAS", "from 1 to 1024"),
    ];
    for (var, range) in ranges {
        for bad in ["NaN", "inf", "-1", "1e400", "99999999999999999999"] {
            let r = run(&["plan", "s.toml", "--refresh=false"], &[(var, bad)]);
            assert_eq!(r.code, 1, "{var}={bad}: {}", r.stderr);
            assert!(!r.stderr.contains("panicked"), "{var}={bad}: {}", r.stderr);
            assert!(r.stderr.contains(&format!("error: {var}={bad} is not valid")), "{var}={bad}: {}", r.stderr);
            assert!(r.stderr.contains(range), "{var}={bad}: {}", r.stderr);
        }
    }
    // Values in range, and empty ones (the default), are fine.
    let fine =
        [("GPUSTACK_POLL_MAX_SECONDS", "0.2"), ("GPUSTACK_SETTLE_SECONDS", ""), ("GPUSTACK_PARALLELISM_IAM", "2")];
    assert_eq!(run(&["validate", "s.toml"], &fine).code, 0);
}

/// Runs gpustack with its stdout a pipe whose reading end is closed before it writes.
fn with_closed_stdout(dir: &std::path::Path, args: &[&str]) -> (i32, String) {
    let mut child = Command::new(bin())
        .args(args)
        .current_dir(dir)
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    (child.wait().unwrap().code().unwrap_or(-1), stderr)
}

#[test]
fn a_closed_stdout_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), STACK).unwrap();
    for args in [
        &["validate", "s.toml"][..],
        &["--json", "validate", "s.toml"],
        &["graph", "s.toml"],
        &["policy", "s.toml"],
        &["plan", "s.toml", "--refresh=false"],
        &["plan", "s.toml", "--refresh=false", "--json"],
    ] {
        let (code, stderr) = with_closed_stdout(dir.path(), args);
        assert_eq!(code, 0, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "{args:?}: {stderr}");
    }
    // The command still does its work and keeps its exit code: the plan file is saved and
    // --detailed-exitcode still says there are changes.
    let (code, stderr) = with_closed_stdout(
        dir.path(),
        &["plan", "s.toml", "--refresh=false", "--out", "p.json", "--detailed-exitcode"],
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(dir.path().join("p.json").exists(), "{stderr}");
}

#[test]
fn plan_piped_into_head_exits_0() {
    // A plan larger than a pipe's buffer, so `head -1` has left before most of it is written.
    let mut stack = STACK.to_string();
    for i in 0..400 {
        stack.push_str(&format!(
            "\n[security_group.g{i}]\nvpc = \"${{vpc.main.id}}\"\ndescription = \"group {i} with a description long enough to fill the pipe\"\ningress = [{{ protocol = \"tcp\", from_port = {}, cidr = \"10.0.0.0/16\" }}]\n",
            1000 + i
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.toml"), stack).unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("'{}' plan s.toml --refresh=false | head -1; echo \"exit=${{PIPESTATUS[0]}}\"", bin()))
        .current_dir(dir.path())
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with("gpustack plan s.toml — stack robust (us-west-2)"), "{stdout}");
    assert!(stdout.trim_end().ends_with("exit=0"), "{stdout}\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_plan_that_buys_nothing_reports_zero_dollars() {
    let r = run(&["plan", "s.toml", "--refresh=false", "--json"], &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["purchases_usd"], 0.0);
    assert!(r.stdout.contains("\"purchases_usd\": 0.0"), "{}", r.stdout);
    assert!(!r.stdout.contains("-0.0"), "{}", r.stdout);
}

#[test]
fn a_trust_policy_with_a_multibyte_character_after_percent_is_read() {
    // AWS sends trust policies URL-encoded; one that is not, with `%` before a multi-byte
    // character, once cut a string inside the character (panic) during refresh.
    let env = Env::new();
    env.write(
        "s.toml",
        "[stack]\nname = \"pct\"\nregion = \"us-west-2\"\n\n[iam_role.node]\nservice = \"ec2.amazonaws.com\"\n",
    );
    let iam = env.emu.iam();
    block_on(async move {
        let doc = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com%€"},"Action":"sts:AssumeRole"}]}"#;
        iam.create_role()
            .role_name("pct-node")
            .path("/gpustack/pct/")
            .assume_role_policy_document(doc)
            .send()
            .await
            .unwrap();
    });
    let r = env.run(&["plan", "s.toml"]);
    assert!(!r.stderr.contains("panicked"), "{r:?}");
    assert!(r.code == 0 || r.code == 2, "{r:?}");
    assert!(r.stdout.contains("iam_role.node"), "{r:?}");
}
