//! Remote state on S3, through the real binary against the emulator's S3: one
//! writer across machines, a lock that outlives a killed holder and is freed only
//! by its id, no lost update (a changed state stops the run and leaves a rescue
//! file), lineage and serial kept by every command, one-line errors for a missing
//! or denied bucket, and kill -9 recovery with the journal in S3.

use std::path::Path;
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use crate::harness::{Env, network_stack};

const BUCKET: &str = "team-gpustack-state";

fn backend(key: &str) -> String {
    format!("\n[stack.backend]\ns3 = {{ bucket = \"{BUCKET}\", key = \"{key}\" }}\n")
}

/// An emulator with the state bucket, and `s.toml` (the network stack `name`) keeping its state at `key`.
fn s3_env(name: &str, key: &str) -> Env {
    let env = Env::new();
    env.emu.create_bucket(BUCKET);
    env.write("s.toml", &network_stack(name, &backend(key)));
    env
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).unwrap()
}

fn stored(env: &Env, key: &str) -> Option<serde_json::Value> {
    env.emu.s3_get(BUCKET, key).map(|(b, _)| json(&b))
}

fn pending(st: &serde_json::Value) -> usize {
    st.get("pending").and_then(|p| p.as_array()).map_or(0, Vec::len)
}

fn spawn(env: &Env, dir: &Path, args: &[&str]) -> Child {
    env.command(args).current_dir(dir).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Waits for a child in a thread, timing it from now.
fn timed(child: Child) -> std::thread::JoinHandle<(Output, Duration)> {
    let started = Instant::now();
    std::thread::spawn(move || {
        let out = child.wait_with_output().unwrap();
        (out, started.elapsed())
    })
}

/// Polls S3 until `ready` holds for the stored state (the apply is past that point).
fn wait_for_state(env: &Env, key: &str, child: &mut Child, ready: impl Fn(&serde_json::Value) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !stored(env, key).is_some_and(|s| ready(&s)) {
        assert!(child.try_wait().unwrap().is_none(), "the apply finished before the point the test waits for");
        assert!(Instant::now() < deadline, "the apply never reached the point the test waits for");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn converged_once(env: &Env, name: &str, key: &str) {
    assert_eq!(env.tagged(name).counts(), (1, 2, 1, 1, 1, 1, 1, 1), "every object exactly once");
    let plan = env.run(&["plan", "s.toml", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "converged:\n{plan:?}");
    let st = stored(env, key).expect("state in S3");
    assert_eq!(pending(&st), 0, "nothing pending: {st}");
    assert_eq!(st["resources"].as_object().unwrap().len(), 6);
    assert!(env.emu.s3_get(BUCKET, &format!("{key}.lock")).is_none(), "the lock is released");
}

#[test]
fn s3_two_machines_at_once_one_runs_the_other_fails_fast_naming_it() {
    let key = "envs/twins.json";
    let env = s3_env("twins", key);
    let other = tempfile::tempdir().unwrap();
    std::fs::copy(env.path("s.toml"), other.path().join("s.toml")).unwrap();
    env.emu.set_latency(100);
    let args = ["apply", "s.toml", "--auto-approve"];
    let (a, b) = (spawn(&env, env.dir.path(), &args), spawn(&env, other.path(), &args));
    let pids = [a.id(), b.id()];
    let (a, b) = (timed(a).join().unwrap(), timed(b).join().unwrap());
    env.emu.set_latency(0);
    let runs = [&a, &b];
    let winners: Vec<usize> = (0..2).filter(|&i| runs[i].0.status.success()).collect();
    assert_eq!(winners.len(), 1, "exactly one runs:\n{}\n{}", text(&a.0), text(&b.0));
    let (w, l) = (winners[0], 1 - winners[0]);
    let (lost, took) = (&runs[l].0, runs[l].1);
    let stderr = String::from_utf8_lossy(&lost.stderr);
    assert_eq!(lost.status.code(), Some(1), "{}", text(lost));
    assert!(took < Duration::from_secs(5), "the loser fails fast, not after the winner ({took:?})");
    assert!(
        stderr.contains(&format!("s3://{BUCKET}/{key} is locked by pid {} on ", pids[w])),
        "names the holder: {stderr}"
    );
    assert!(stderr.contains("running `gpustack apply s.toml`") && stderr.contains(" ago)"), "{stderr}");
    assert!(stderr.contains("--lock-timeout") && stderr.contains("gpustack force-unlock "), "{stderr}");
    converged_once(&env, "twins", key);
}

#[test]
fn s3_lock_timeout_runs_after_the_holder() {
    let key = "envs/queue.json";
    let env = s3_env("queue", key);
    let other = tempfile::tempdir().unwrap();
    std::fs::copy(env.path("s.toml"), other.path().join("s.toml")).unwrap();
    env.emu.set_latency(100);
    let args = ["apply", "s.toml", "--auto-approve", "--lock-timeout", "90s"];
    let (a, b) = (timed(spawn(&env, env.dir.path(), &args)), timed(spawn(&env, other.path(), &args)));
    let (a, b) = (a.join().unwrap(), b.join().unwrap());
    env.emu.set_latency(0);
    assert!(
        a.0.status.success() && b.0.status.success(),
        "both run, one after the other:\n{}\n{}",
        text(&a.0),
        text(&b.0)
    );
    // The second saw the first's state: it had nothing left to do.
    let later = if a.1 > b.1 { &a.0 } else { &b.0 };
    let out = String::from_utf8_lossy(&later.stdout);
    assert!(out.contains("No changes") || out.contains("0 to add"), "the waiter planned on the first's state:\n{out}");
    converged_once(&env, "queue", key);
}

#[test]
fn s3_a_killed_holder_leaves_a_lock_that_only_its_id_frees() {
    let key = "envs/killed.json";
    let env = s3_env("killed", key);
    env.emu.set_latency(150);
    let mut child = env
        .command(&["apply", "s.toml", "--auto-approve"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_state(&env, key, &mut child, |s| pending(s) > 0);
    let pid = child.id();
    child.kill().unwrap(); // SIGKILL: no chance to release
    child.wait().unwrap();
    env.emu.set_latency(0);

    let lock_key = format!("{key}.lock");
    let (lock, etag) = env.emu.s3_get(BUCKET, &lock_key).expect("the lock outlives its killed holder");
    let lock = json(&lock);
    let id = lock["id"].as_str().unwrap().to_string();
    assert_eq!(lock["pid"].as_u64(), Some(pid as u64));
    for field in ["who", "host", "command", "created"] {
        assert!(lock[field].as_str().is_some_and(|v| !v.is_empty()), "lock has {field}: {lock}");
    }

    let blocked = env.run(&["plan", "s.toml"]);
    assert_eq!(blocked.code, 1, "{blocked:?}");
    assert!(blocked.stderr.contains(&format!("is locked by pid {pid} on ")), "{blocked:?}");
    assert!(
        blocked.stderr.contains("running `gpustack apply s.toml`") && blocked.stderr.contains(" ago)"),
        "{blocked:?}"
    );
    assert!(blocked.stderr.contains(&format!("gpustack force-unlock {id} --stack s.toml")), "{blocked:?}");

    let wrong = env.run(&["force-unlock", "00000000-0000-4000-8000-000000000000", "--stack", "s.toml"]);
    assert_eq!(wrong.code, 1, "{wrong:?}");
    assert!(wrong.stderr.contains("nothing was changed") && wrong.stderr.contains(&id), "{wrong:?}");
    assert_eq!(env.emu.s3_get(BUCKET, &lock_key).map(|(_, e)| e), Some(etag), "a wrong id changes nothing");

    let shown = env.run(&["force-unlock", "--stack", "s.toml"]);
    assert_eq!(shown.code, 1, "without an id it only shows the holder: {shown:?}");
    assert!(shown.stderr.contains(&format!("gpustack force-unlock {id} --stack s.toml")), "{shown:?}");

    let right = env.ok(&["force-unlock", &id, "--stack", "s.toml"]);
    assert!(right.stdout.contains("Unlocked"), "{right:?}");
    assert!(env.emu.s3_get(BUCKET, &lock_key).is_none(), "the right id deletes the lock");

    env.ok(&["apply", "s.toml", "--auto-approve"]);
    converged_once(&env, "killed", key);
}

#[test]
fn s3_state_changed_behind_the_lock_stops_the_apply_and_keeps_a_rescue_file() {
    let key = "envs/tamper.json";
    let env = s3_env("tamper", key);
    env.emu.set_latency(100);
    let mut child = spawn(&env, env.dir.path(), &["apply", "s.toml", "--auto-approve"]);
    wait_for_state(&env, key, &mut child, |s| pending(s) > 0);
    // Someone writes the state behind the lock (a force-unlock and another run, a manual push).
    let mut theirs = stored(&env, key).unwrap();
    let lineage = theirs["lineage"].as_str().unwrap().to_string();
    theirs["serial"] = 1000.into();
    theirs["outputs"]["written_by"] = "someone else".into();
    let theirs = serde_json::to_vec_pretty(&theirs).unwrap();
    env.emu.s3_put(BUCKET, key, &theirs);
    let out = child.wait_with_output().unwrap();
    env.emu.set_latency(0);
    let stderr = String::from_utf8_lossy(&out.stderr);

    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(stderr.contains("was changed by someone else") && stderr.contains("nothing was overwritten"), "{stderr}");
    let rescue = std::fs::read_dir(env.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("gpustack-rescue-tamper-") && n.ends_with(".json"))
        .unwrap_or_else(|| panic!("no rescue file:\n{}", text(&out)));
    assert!(stderr.contains(&rescue), "prints the rescue file's path: {stderr}");
    assert!(
        stderr.contains("gpustack state pull --stack s.toml") && stderr.contains("gpustack state push "),
        "{stderr}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(env.path(&rescue)).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the rescue file is private");
    let ours = json(&std::fs::read(env.path(&rescue)).unwrap());
    assert_eq!(ours["lineage"], lineage.as_str());
    assert_eq!(env.emu.s3_get(BUCKET, key).unwrap().0, theirs, "nothing in S3 was overwritten");
    assert!(env.emu.s3_get(BUCKET, &format!("{key}.lock")).is_none(), "the lock is released");

    // The operator compares, then keeps theirs... no: ours is right. A plain push is refused
    // (its serial is lower), --force pushes it, and the next apply converges.
    let refused = env.run(&["state", "push", &rescue, "--stack", "s.toml"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(refused.stderr.contains("lower than the stored 1000"), "{refused:?}");
    env.ok(&["state", "push", &rescue, "--stack", "s.toml", "--force"]);
    assert_eq!(stored(&env, key).unwrap()["serial"], 1001, "a forced push lands above the stored serial");
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    converged_once(&env, "tamper", key);
}

#[test]
fn s3_plan_apply_destroy_pull_push_and_migrate_keep_lineage_and_serial() {
    let key = "envs/moved.json";
    let url = format!("s3://{BUCKET}/{key}");
    let env = Env::new();
    env.emu.create_bucket(BUCKET);
    env.write("s.toml", &network_stack("moved", ""));
    // Local first, as today.
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let local = env.state("moved");
    let (lineage, serial) = (local["lineage"].clone(), local["serial"].as_u64().unwrap());

    // Local → S3, under both locks: the same lineage and serial.
    let moved = env.ok(&["state", "migrate", "--stack", "s.toml", "--to", &url]);
    assert!(moved.stdout.contains(&format!("serial {serial}")), "{moved:?}");
    let st = stored(&env, key).unwrap();
    assert_eq!((st["lineage"].clone(), st["serial"].as_u64().unwrap()), (lineage.clone(), serial));
    assert!(env.emu.s3_get(BUCKET, &format!("{key}.lock")).is_none());
    let again = env.run(&["state", "migrate", "--stack", "s.toml", "--to", &url]);
    assert_eq!(again.code, 0, "migrating twice is a no-op: {again:?}");

    // The stack now points at S3: plan reads it and writes nothing.
    env.write("s.toml", &network_stack("moved", &backend(key)));
    assert_eq!(env.run(&["plan", "s.toml", "--detailed-exitcode"]).code, 0);
    assert_eq!(stored(&env, key).unwrap()["serial"].as_u64(), Some(serial), "plan never writes");

    // pull prints exactly what is stored; pushing it back is a no-op.
    let pulled = env.ok(&["state", "pull", "--stack", "s.toml"]);
    assert_eq!(pulled.stdout.as_bytes(), env.emu.s3_get(BUCKET, key).unwrap().0.as_slice());
    env.write("pulled.json", &pulled.stdout);
    let same = env.ok(&["state", "push", "pulled.json", "--stack", "s.toml"]);
    assert!(same.stdout.contains("nothing to push"), "{same:?}");
    // Another lineage, or an older serial, is refused without --force.
    let mut other = json(pulled.stdout.as_bytes());
    other["lineage"] = "00000000-0000-4000-8000-000000000000".into();
    other["serial"] = (serial + 5).into();
    env.write("other.json", &serde_json::to_string_pretty(&other).unwrap());
    let refused = env.run(&["state", "push", "other.json", "--stack", "s.toml"]);
    assert!(refused.code == 1 && refused.stderr.contains("lineage"), "{refused:?}");
    let mut older = json(pulled.stdout.as_bytes());
    older["serial"] = (serial - 1).into();
    env.write("older.json", &serde_json::to_string_pretty(&older).unwrap());
    let refused = env.run(&["state", "push", "older.json", "--state", &url, "--stack", "s.toml"]);
    assert!(refused.code == 1 && refused.stderr.contains("lower"), "{refused:?}");
    assert_eq!(stored(&env, key).unwrap()["serial"].as_u64(), Some(serial), "refused pushes change nothing");
    // A newer serial of the same lineage is pushed as it is.
    let mut newer = json(pulled.stdout.as_bytes());
    newer["serial"] = (serial + 1).into();
    env.write("newer.json", &serde_json::to_string_pretty(&newer).unwrap());
    env.ok(&["state", "push", "newer.json", "--stack", "s.toml"]);
    let serial = serial + 1;
    assert_eq!(stored(&env, key).unwrap()["serial"].as_u64(), Some(serial));

    // Apply and destroy on S3 keep the lineage and only ever raise the serial.
    env.write(
        "s.toml",
        &network_stack("moved", &format!("{}\n[placement_group.extra]\nstrategy = \"spread\"\n", backend(key))),
    );
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let after_apply = stored(&env, key).unwrap();
    assert_eq!(after_apply["lineage"], lineage);
    assert!(after_apply["serial"].as_u64().unwrap() > serial);
    let list = env.ok(&["state", "list", "--stack", "s.toml"]);
    assert!(list.stdout.contains("placement_group.extra"), "{list:?}");
    assert_eq!(
        env.ok(&["output", "vpc_id", "--stack", "s.toml"]).stdout.trim(),
        after_apply["outputs"]["vpc_id"].as_str().unwrap()
    );

    // S3 → local, back again: the same lineage and serial.
    let back = env.path("back.json");
    env.ok(&["state", "migrate", "--stack", "s.toml", "--to", back.to_str().unwrap()]);
    let local = json(&std::fs::read(&back).unwrap());
    assert_eq!((local["lineage"].clone(), local["serial"].clone()), (lineage.clone(), after_apply["serial"].clone()));

    env.ok(&["destroy", "s.toml", "--auto-approve"]);
    let destroyed = stored(&env, key).unwrap();
    assert_eq!(destroyed["lineage"], lineage);
    assert!(destroyed["serial"].as_u64() > after_apply["serial"].as_u64());
    assert!(destroyed["resources"].as_object().unwrap().is_empty());
    assert_eq!(env.tagged("moved").total(), 0);
}

#[test]
fn s3_missing_bucket_and_denied_access_are_one_line_errors() {
    let env = Env::new();
    env.write("s.toml", &network_stack("nobucket", &backend("envs/x.json")));
    let plan = env.run(&["plan", "s.toml"]);
    assert_eq!(plan.code, 1, "{plan:?}");
    let lines: Vec<&str> = plan.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {plan:?}");
    assert!(
        lines[0].starts_with("error: ") && lines[0].contains(&format!("bucket `{BUCKET}` does not exist")),
        "{plan:?}"
    );
    assert!(lines[0].contains(&format!("s3://{BUCKET}/envs/x.json")), "{plan:?}");
    let pull = env.run(&["state", "pull", "--state", &format!("s3://{BUCKET}/envs/x.json"), "--stack", "s.toml"]);
    assert!(pull.code == 1 && pull.stderr.lines().count() == 1 && pull.stderr.contains("does not exist"), "{pull:?}");

    env.emu.create_bucket(BUCKET);
    env.emu.control("POST", &format!("/_gpustack/s3/deny?bucket={BUCKET}"));
    let apply = env.run(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(apply.code, 1, "{apply:?}");
    let lines: Vec<&str> = apply.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {apply:?}");
    assert!(lines[0].contains(&format!("access denied to s3://{BUCKET}/envs/x.json")), "{apply:?}");
    assert!(lines[0].contains("s3:PutObject") && lines[0].contains("s3:ListBucket"), "names what to grant: {apply:?}");
    assert_eq!(env.tagged("nobucket").total(), 0, "nothing was created");
}

#[test]
fn s3_conflicting_conditional_writes_are_retried() {
    let key = "envs/race.json";
    let env = s3_env("race", key);
    // The lock and the first state writes meet 409 ConditionalRequestConflict.
    env.emu.control("POST", "/_gpustack/s3/conflict?n=3");
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    converged_once(&env, "race", key);
}

/// The crash tests of crash.rs, with the journal in S3: kill -9 once the stored journal shows
/// `recorded` finished resources and an operation in flight, then apply again.
fn s3_crash_then_recover(recorded: usize, after: Duration) {
    let key = "envs/crash.json";
    let env = s3_env("crash", key);
    env.emu.set_latency(60);
    let mut child = env
        .command(&["apply", "s.toml", "--auto-approve"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_state(&env, key, &mut child, |s| {
        s["resources"].as_object().map_or(0, |r| r.len()) >= recorded && pending(s) > 0
    });
    std::thread::sleep(after);
    assert!(child.try_wait().unwrap().is_none(), "the apply finished before the kill");
    child.kill().unwrap();
    child.wait().unwrap();
    env.emu.set_latency(0);
    let lock = env.emu.s3_get(BUCKET, &format!("{key}.lock")).expect("the killed run's lock stays");
    let id = json(&lock.0)["id"].as_str().unwrap().to_string();
    env.ok(&["force-unlock", &id, "--stack", "s.toml"]);
    let again = env.run(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(again.code, 0, "recovery apply:\n{again:?}");
    converged_once(&env, "crash", key);
}

#[test]
fn s3_kill_9_as_the_first_create_starts() {
    s3_crash_then_recover(0, Duration::ZERO);
}

#[test]
fn s3_kill_9_mid_apply() {
    s3_crash_then_recover(3, Duration::ZERO);
}

/// Late: results ride on later writes with S3, so "4 of 6 recorded" may never be stored
/// while something is pending; wait from "3 recorded" instead.
#[test]
fn s3_kill_9_late_in_apply() {
    s3_crash_then_recover(3, Duration::from_millis(150));
}

/// PUTs per apply of stacks/quickstart.toml with S3 state (reported in the note).
#[test]
fn s3_puts_per_apply_for_quickstart_stay_few() {
    let env = Env::new();
    env.emu.create_bucket(BUCKET);
    let stack = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("stacks/quickstart.toml");
    let url = format!("s3://{BUCKET}/quickstart.json");
    env.emu.reset_requests();
    // admin_cidr: main's quickstart asks for it; where it is undeclared this is only a warning.
    env.ok(&[
        "apply",
        stack.to_str().unwrap(),
        "--auto-approve",
        "--state",
        &url,
        "--var",
        "admin_cidr=198.51.100.7/32",
    ]);
    let puts = |suffix: &str| {
        env.emu
            .requests()
            .iter()
            .filter(|(svc, action)| svc == "s3" && action == &format!("PUT /{BUCKET}/quickstart.json{suffix}"))
            .count()
    };
    let (state_puts, lock_puts) = (puts(""), puts(".lock"));
    let resources = stored(&env, "quickstart.json").unwrap()["resources"].as_object().unwrap().len();
    eprintln!("quickstart apply with S3 state: {resources} resources, {state_puts} state PUTs, {lock_puts} lock PUT");
    assert_eq!(lock_puts, 1);
    assert!(state_puts <= resources + 2, "group commit keeps state PUTs at most one per resource + 2: {state_puts}");
}

#[test]
fn s3_backend_declarations_are_checked_with_file_line_and_help() {
    let env = Env::new();
    let bad = network_stack(
        "decl",
        "\n[stack.backend]\ns3 = { bucket = \"b\", key = \"envs/${vpc.main.id}.json\", regoin = \"x\" }\n",
    );
    env.write("s.toml", &bad);
    let r = env.run(&["validate", "s.toml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("`stack.backend.s3.key` must be a string known before apply"), "{r:?}");
    assert!(r.stderr.contains("unknown key `regoin`") && r.stderr.contains("did you mean `region`"), "{r:?}");
    assert!(r.stderr.contains("not a valid S3 bucket name"), "{r:?}");
    assert!(r.stderr.contains("s.toml:") && r.stderr.contains("help:"), "file:line:column and help: {r:?}");
    // Variables are fine in the key.
    let good =
        network_stack("decl-${var.env}", &format!("\n[vars]\nenv = \"pr-7\"\n{}", backend("envs/${var.env}.json")));
    env.write("s.toml", &good);
    let ok = env.ok(&["validate", "s.toml", "--var", "env=pr-8"]);
    assert!(ok.stdout.contains("decl-pr-8"), "{ok:?}");
}

#[test]
fn pipeline_example_stacks_validate() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/pipeline");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "toml") {
            let env_dir = tempfile::tempdir().unwrap();
            let out = std::process::Command::new(crate::harness::bin())
                .args(["validate", p.to_str().unwrap(), "--var", "env=pr-42"])
                .current_dir(env_dir.path())
                .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
                .env("NO_COLOR", "1")
                .output()
                .unwrap();
            assert!(out.status.success(), "{} does not validate:\n{}", p.display(), text(&out));
            n += 1;
        }
    }
    assert!(n >= 1, "examples/pipeline holds the stacks the workflow uses");
}

/// Issue 18 item 19 / audit S1, S2: the example workflow serialises the jobs of one pull
/// request, waits on destroy longer than a first apply takes, and keeps the rescue file of a
/// failed run (it is written to the working directory, `src/state/rescue.rs`).
#[test]
fn pipeline_example_serialises_pull_request_jobs_and_keeps_rescue_files() {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/pipeline/github-actions.yml");
    let flow: serde_yaml_ng::Value = serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let jobs = flow["jobs"].as_mapping().unwrap();
    for (name, job) in jobs {
        let name = name.as_str().unwrap();
        let steps = job["steps"].as_sequence().unwrap();
        let runs: Vec<&str> =
            steps.iter().filter_map(|s| s["run"].as_str()).filter(|r| r.contains("gpustack ")).collect();
        if runs.iter().any(|r| r.contains("gpustack apply") || r.contains("gpustack destroy")) {
            let rescue = steps.iter().any(|s| {
                s["if"].as_str() == Some("failure()")
                    && s["uses"].as_str().is_some_and(|u| u.starts_with("actions/upload-artifact@"))
                    && s["with"]["path"].as_str() == Some("gpustack-rescue-*.json")
            });
            assert!(rescue, "{name} uploads gpustack-rescue-*.json on failure");
        }
        if name == "preview" || name == "destroy-preview" {
            assert_eq!(job["concurrency"]["group"].as_str(), Some("gpustack-pr-${{ github.event.number }}"), "{name}");
            assert_eq!(job["concurrency"]["cancel-in-progress"].as_bool(), Some(false), "{name}");
        }
    }
    // Review r18 B1: a cancel signals only the step's entry process, so gpustack must be it.
    for (name, job) in jobs {
        for step in job["steps"].as_sequence().unwrap() {
            let Some(run) = step["run"].as_str() else { continue };
            let calls: Vec<&str> = run.lines().map(str::trim).filter(|l| l.contains("gpustack ")).collect();
            if let Some(last) = calls.iter().rev().find(|l| !l.starts_with("run=") && !l.contains("gh ")) {
                assert!(last.starts_with("exec gpustack "), "{name:?}: `{last}` must be exec'd");
            }
        }
    }
    // Review r18 M1: the preview checks the pull request is still open before applying.
    let preview: Vec<&str> =
        jobs.get("preview").unwrap()["steps"].as_sequence().unwrap().iter().filter_map(|s| s["run"].as_str()).collect();
    let check =
        preview.iter().position(|r| r.contains("gh pr view") && r.contains("--json state") && r.contains("OPEN"));
    let apply = preview.iter().position(|r| r.contains("gpustack apply"));
    assert!(check.is_some() && check < apply, "the preview checks the PR is open before applying: {preview:?}");
    assert_eq!(flow["permissions"]["pull-requests"].as_str(), Some("read"), "gh pr view needs it");
    let destroy = jobs.get("destroy-preview").unwrap()["steps"].as_sequence().unwrap();
    assert!(
        destroy
            .iter()
            .filter_map(|s| s["run"].as_str())
            .any(|r| r.contains("gpustack destroy") && r.contains("--lock-timeout 60m")),
        "the destroy waits out a first apply"
    );
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: sending a signal to our own child process.
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
}

/// Issue 18 item 19 / audit S5: SIGTERM (what a CI cancel sends after SIGINT, and what `kill`
/// sends) is handled like the first Ctrl-C: in-flight calls finish and are recorded, the S3
/// lock is released, and the exit is non-zero.
#[test]
fn s3_sigterm_finishes_in_flight_work_and_releases_the_lock() {
    let key = "envs/term.json";
    let env = s3_env("term", key);
    env.emu.set_latency(100);
    let mut child = spawn(&env, env.dir.path(), &["apply", "s.toml", "--auto-approve"]);
    wait_for_state(&env, key, &mut child, |s| pending(s) > 0);
    signal(&child, libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Interrupted: finishing the"), "{}", text(&out));
    assert!(env.emu.s3_get(BUCKET, &format!("{key}.lock")).is_none(), "the lock is released: {}", text(&out));
    assert_eq!(stored(&env, key).map(|s| pending(&s)), Some(0), "in-flight work recorded");
    env.emu.set_latency(0);
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    converged_once(&env, "term", key);
}

/// A second interrupt (Ctrl-C twice, or GitHub's SIGTERM 7.5 s after its SIGINT) exits at
/// once, skipping `Drop`: the S3 lock is still released first, within seconds.
#[test]
fn s3_a_second_interrupt_exits_at_once_and_releases_the_lock() {
    let key = "envs/twice.json";
    let env = s3_env("twice", key);
    env.emu.set_latency(300);
    let mut child = spawn(&env, env.dir.path(), &["apply", "s.toml", "--auto-approve"]);
    wait_for_state(&env, key, &mut child, |s| pending(s) > 0);
    signal(&child, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(50));
    signal(&child, libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Second interrupt: exiting now"), "{}", text(&out));
    assert!(env.emu.s3_get(BUCKET, &format!("{key}.lock")).is_none(), "the lock is released: {}", text(&out));
    env.emu.set_latency(0);
    let again = env.run(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(again.code, 0, "no force-unlock needed: {again:?}");
    converged_once(&env, "twice", key);
}

/// Issue 18 item 19 / audit S3: the lock PUT lands, but every answer to it (the SDK's three
/// attempts) is lost: the lock object holds our id, so it is ours, not an orphan.
#[test]
fn s3_a_lock_whose_answers_were_lost_is_taken_not_orphaned() {
    let key = "envs/lostlock.json";
    let env = s3_env("lostlock", key);
    env.emu.control("POST", &format!("/_gpustack/s3/lost?n=3&key={key}.lock"));
    let r = env.run(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(env.emu.s3_get(BUCKET, &format!("{key}.lock")).is_none(), "the lock is released");
    converged_once(&env, "lostlock", key);
}

/// Issue 18 item 20 / audit S4: a state write lands but its answers are lost; the next write
/// must not be refused as "changed by someone else" (the object is exactly what we sent).
#[test]
fn s3_a_state_write_whose_answers_were_lost_is_no_false_change() {
    let key = "envs/lostwrite.json";
    let env = s3_env("lostwrite", key);
    env.emu.control("POST", &format!("/_gpustack/s3/lost?n=3&key={key}"));
    let r = env.run(&["apply", "s.toml", "--auto-approve"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stderr.contains("changed by someone else"), "{r:?}");
    converged_once(&env, "lostwrite", key);
}

/// Audit S6: 409 ConditionalRequestConflict on every lock attempt ends, with S3's error,
/// instead of retrying for ever.
#[test]
fn s3_endless_lock_conflicts_end_in_an_error() {
    let env = s3_env("conflicts", "envs/conflicts.json");
    env.emu.control("POST", "/_gpustack/s3/conflict?n=1000000");
    let started = Instant::now();
    let r = env.run(&["plan", "s.toml"]);
    env.emu.control("POST", "/_gpustack/s3/conflict?n=0");
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("ConditionalRequestConflict"), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(90), "bounded: {:?}", started.elapsed());
}

/// The `run:` text of the first step of `job` in the example workflow that runs `gpustack <verb>`.
fn workflow_step(job: &str, verb: &str) -> String {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/pipeline/github-actions.yml");
    let flow: serde_yaml_ng::Value = serde_yaml_ng::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let steps = flow["jobs"][job]["steps"].as_sequence().unwrap();
    let run = steps.iter().filter_map(|s| s["run"].as_str()).find(|r| r.contains(&format!("gpustack {verb}"))).unwrap();
    run.replace("${{ github.event.number }}", "42")
}

/// Runs `script` as a GitHub `run:` step does (`bash -e <file>`, shell: bash; its own process
/// group standing in for the job's process tree), with gpustack on PATH and `$STACK=s.toml`.
fn spawn_step(env: &Env, script: &str) -> Child {
    let file = env.write("step.sh", script);
    let gp = env.command(&[]);
    let mut c = std::process::Command::new("bash");
    for (k, v) in gp.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    let bin_dir = Path::new(crate::harness::bin()).parent().unwrap().to_path_buf();
    let path = std::env::join_paths(
        std::iter::once(bin_dir).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())),
    )
    .unwrap();
    use std::os::unix::process::CommandExt;
    c.arg("-e")
        .arg(&file)
        .env("PATH", path)
        .env("STACK", "s.toml")
        .current_dir(env.dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    c.spawn().unwrap()
}

/// GitHub's cancel as the runner sends it (actions/runner ProcessInvoker.cs: `kill(_proc.Id, …)`
/// on the entry process only): SIGINT, SIGTERM a little later (7.5 s on GitHub), then 2.5 s
/// for the process to go before the whole tree is killed (SIGKILL to the process group).
fn cancel_like_github(mut step: Child) -> Output {
    signal(&step, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(300));
    signal(&step, libc::SIGTERM);
    let deadline = Instant::now() + Duration::from_millis(2500);
    while step.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: killing the process group the test made for the step.
    unsafe { libc::killpg(step.id() as libc::pid_t, libc::SIGKILL) };
    std::thread::sleep(Duration::from_millis(200)); // the killed orphan's sockets close
    step.wait_with_output().unwrap()
}

/// Review r18 B1: the example workflow's apply step, cancelled the way GitHub cancels it,
/// releases the S3 lock because it `exec`s gpustack; the same step without `exec` (bash
/// forks gpustack, waits through the SIGINT, dies on the SIGTERM, and the orphan is killed)
/// leaves the lock behind.
#[test]
fn s3_a_github_cancel_of_the_workflow_step_reaches_gpustack_and_frees_the_lock() {
    let key = "envs/cancel.json";
    let lock = format!("{key}.lock");
    let script = workflow_step("preview", "apply");
    assert!(script.starts_with("exec gpustack apply"), "{script}");

    let env = s3_env("cancel", key);
    env.emu.set_latency(100);
    let mut step = spawn_step(&env, &script);
    wait_for_state(&env, key, &mut step, |s| pending(s) > 0);
    let out = cancel_like_github(step);
    assert!(matches!(out.status.code(), Some(1 | 130)), "gpustack exits non-zero itself: {}", text(&out));
    assert!(env.emu.s3_get(BUCKET, &lock).is_none(), "the lock is released: {}", text(&out));
    env.emu.set_latency(0);
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    converged_once(&env, "cancel", key);

    // For contrast, the step as it was: bash is the entry process, gpustack its child.
    let plain = script.replacen("exec gpustack", "gpustack", 1);
    let env = s3_env("cancel", key);
    env.emu.set_latency(100);
    let mut step = spawn_step(&env, &plain);
    wait_for_state(&env, key, &mut step, |s| pending(s) > 0);
    let out = cancel_like_github(step);
    assert_eq!(out.status.code(), None, "bash died of the SIGTERM: {}", text(&out));
    assert!(env.emu.s3_get(BUCKET, &lock).is_some(), "without exec the killed gpustack orphans the lock");
}

/// Review r18 B2: `plan` holds the S3 lock through its refresh; SIGTERM (and, through the
/// workflow's exec'd plan step, GitHub's SIGINT) releases it and exits non-zero instead of the
/// default kill, which left the lock behind.
#[test]
fn s3_plan_interrupted_mid_refresh_releases_the_lock() {
    let key = "envs/planterm.json";
    let lock = format!("{key}.lock");
    let env = s3_env("planterm", key);
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let wait_for_lock = |child: &mut Child| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while env.emu.s3_get(BUCKET, &lock).is_none() {
            assert!(child.try_wait().unwrap().is_none(), "the plan finished before it was interrupted");
            assert!(Instant::now() < deadline, "the plan never took the lock");
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(300)); // into the refresh
    };
    env.emu.set_latency(200);
    let mut child = spawn(&env, env.dir.path(), &["plan", "s.toml"]);
    wait_for_lock(&mut child);
    signal(&child, libc::SIGTERM);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Interrupted: nothing was changed"), "{}", text(&out));
    assert!(env.emu.s3_get(BUCKET, &lock).is_none(), "the lock is released: {}", text(&out));

    let mut step = spawn_step(&env, &workflow_step("plan-production", "plan"));
    wait_for_lock(&mut step);
    let out = cancel_like_github(step);
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    assert!(env.emu.s3_get(BUCKET, &lock).is_none(), "the lock is released: {}", text(&out));
    env.emu.set_latency(0);
    assert_eq!(env.run(&["plan", "s.toml", "--detailed-exitcode"]).code, 0, "no force-unlock needed");
}

/// Review r18 m6: `state migrate` holds two S3 locks; a second signal releases both within one
/// 2 s budget (GitHub kills 2.5 s after its SIGTERM), not 2 s each.
#[test]
fn s3_migrate_releases_both_locks_within_one_budget() {
    let key = "envs/from.json";
    let env = s3_env("budget", key);
    env.ok(&["apply", "s.toml", "--auto-approve"]);
    let to = format!("s3://{BUCKET}/envs/to.json");
    // Every S3 call now takes 1.8 s: two lock deletes one after the other would take 3.6 s.
    env.emu.set_latency(1800);
    let mut child = spawn(&env, env.dir.path(), &["state", "migrate", "--stack", "s.toml", "--to", &to]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while env.emu.s3_get(BUCKET, "envs/to.json.lock").is_none() {
        assert!(child.try_wait().unwrap().is_none(), "the migrate finished before it held both locks");
        assert!(Instant::now() < deadline, "the migrate never took the second lock");
    }
    signal(&child, libc::SIGINT);
    std::thread::sleep(Duration::from_millis(50));
    let (out, took) = timed_after_signal(child, libc::SIGTERM);
    env.emu.set_latency(0);
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    assert!(took < Duration::from_millis(2500), "both locks within 2 s, not 2 s each: {took:?}\n{}", text(&out));
}

/// Sends `sig` and times the exit from then.
fn timed_after_signal(child: Child, sig: libc::c_int) -> (Output, Duration) {
    signal(&child, sig);
    timed(child).join().unwrap()
}
