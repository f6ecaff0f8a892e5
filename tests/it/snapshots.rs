//! Snapshot tests of what users read (issue 11 item 6): the offline plan, as text and as
//! JSON, of every shipped example; `--help` of every command; and, against the emulator, the
//! refreshing plan of the quickstart on an empty state and the `--json` events of its apply
//! and destroy. The diagnostics of `validate` are snapshotted beside their assertions in
//! validate.rs. Snapshots live in tests/it/snapshots/; a change to any of these texts fails
//! `cargo test` until the new snapshot is reviewed and committed (README, "Snapshot tests").
//!
//! Every run here is deterministic: a cleared environment (no `GPUSTACK_VAR_*`, no AWS
//! profile, no terminal), a fixed help width, and the parts that differ per run (AWS ids,
//! lineage, durations, the order of concurrent operations) normalised before comparing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::harness::{Env, Run, bin};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Asserts `text` against the snapshot `name`, with the command that produced it as the
/// snapshot's description (what a reviewer sees above the diff).
fn snapshot(name: &str, command: &str, text: &str) {
    let mut settings = insta::Settings::clone_current();
    settings.set_description(command);
    settings.set_omit_expression(true);
    settings.bind(|| insta::assert_snapshot!(name, text));
}

/// The outcome of a run as a reviewer reads it, with the repository's path cut from file
/// names (so `stacks/quickstart.toml` reads as typed, on any machine) and the temp dir named.
fn shown(r: &Run, tmp: &Path) -> String {
    let text = format!("{r:?}");
    redact_fetched(&text.replace(&format!("{}/", repo().display()), "").replace(&tmp.display().to_string(), "[tmp]"))
}

/// The time prices were read ("fetched 2026-11-26T10:57:54Z", plan::cost) becomes `[time]`.
fn redact_fetched(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("fetched ") {
        let (head, tail) = rest.split_at(i + "fetched ".len());
        out.push_str(head);
        let stamp = tail.get(..20).filter(|t| {
            t.bytes().enumerate().all(|(i, b)| match i {
                4 | 7 => b == b'-',
                10 => b == b'T',
                13 | 16 => b == b':',
                19 => b == b'Z',
                _ => b.is_ascii_digit(),
            })
        });
        match stamp {
            Some(_) => {
                out.push_str("[time]");
                rest = &tail[20..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

/// gpustack in `dir` with nothing from the caller's environment: no AWS configuration or
/// credentials, no `GPUSTACK_*` variable, no colour, help wrapped at 100 columns.
fn isolated(dir: &Path, args: &[&str]) -> Run {
    let out = Command::new(bin())
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("HOME", dir)
        .env("AWS_CONFIG_FILE", dir.join("no-aws-config"))
        .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("no-aws-credentials"))
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("NO_COLOR", "1")
        // clap's wrap_help takes the width of a terminal on stdin, stdout or stderr (none
        // here), else COLUMNS; the CLI caps it at 100.
        .env("COLUMNS", "100")
        .stdin(Stdio::null())
        .output()
        .expect("run gpustack");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `stacks/quickstart.toml` → `stacks_quickstart`: a snapshot name from a shipped file.
fn slug(file: &Path) -> String {
    let rel = file.strip_prefix(repo()).unwrap_or(file).with_extension("");
    rel.to_string_lossy().replace(['/', '\\', '.', '-'], "_")
}

/// The quickstart's API allowlist has no default on purpose; every other example ignores it.
const ADMIN_CIDR: &str = "admin_cidr=198.51.100.7/32";

#[test]
fn offline_plan_of_every_shipped_example() {
    let dir = tempfile::tempdir().unwrap();
    for file in crate::offline::shipped() {
        let path = file.to_string_lossy().into_owned();
        let name = slug(&file);
        let shown_path = file.strip_prefix(repo()).unwrap().display().to_string();
        for (kind, json) in [("plan", false), ("plan_json", true)] {
            let mut args = vec!["plan", path.as_str(), "--refresh=false", "--var", ADMIN_CIDR];
            // A HyperPod example creates its EKS cluster too: planned whole only with the
            // opt-out (its refusal without it is tested in tests/it/hyperpod.rs).
            if std::fs::read_to_string(&file).unwrap().contains("[hyperpod_cluster.") {
                args.push("--hyperpod-chart-installed");
            }
            if json {
                args.push("--json");
            }
            let r = isolated(dir.path(), &args);
            assert_eq!(r.code, 0, "{args:?}:\n{r:?}");
            let command = format!("gpustack {}", args.join(" ").replace(&path, &shown_path));
            snapshot(&format!("{kind}__{name}"), &command, &shown(&r, dir.path()));
        }
    }
}

/// The subcommands a `--help` lists under `Commands:`, without clap's own `help`.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        // A command starts its line after two spaces; a wrapped description is indented more.
        .filter_map(|l| l.strip_prefix("  ").filter(|rest| !rest.starts_with(' ')))
        .filter_map(|rest| rest.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(String::from)
        .collect()
}

#[test]
fn help_of_every_command() {
    let dir = tempfile::tempdir().unwrap();
    // Depth-first from `gpustack` itself: each help names the commands below it.
    let mut todo: Vec<Vec<String>> = vec![vec![]];
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let r = isolated(dir.path(), &args);
        assert_eq!(r.code, 0, "{args:?}:\n{r:?}");
        assert_eq!(r.stderr, "", "{args:?}");
        let name = std::iter::once("gpustack").chain(path.iter().map(String::as_str)).collect::<Vec<_>>().join("__");
        snapshot(&format!("help__{name}"), &format!("gpustack {}", args.join(" ")), &r.stdout);
        seen += 1;
        for sub in subcommands(&r.stdout).into_iter().rev() {
            let mut next = path.clone();
            next.push(sub);
            todo.push(next);
        }
    }
    // gpustack, its ten commands and the five of `state`.
    assert!(seen >= 16, "only {seen} helps: is the Commands: list still parsed?");
}

/// Replaces what differs from run to run inside a JSON value: durations, the state's
/// lineage and serial (the journal group-commits writes, so an apply's count of them varies;
/// no state yet is serial 0, kept), and the random part of AWS ids and of the EKS endpoint.
fn redact(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                match (k.as_str(), &*v) {
                    ("seconds", Value::Number(_)) => *v = Value::from("[seconds]"),
                    ("lineage", Value::String(_)) => *v = Value::from("[lineage]"),
                    ("serial", Value::Number(n)) if n.as_u64() != Some(0) => *v = Value::from("[serial]"),
                    _ => redact(v),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact),
        Value::String(s) => *s = redact_fetched(&redact_ids(s)),
        _ => {}
    }
}

/// Every run of 12 or more hex digits (with at least one digit) becomes `[id]`:
/// `vpc-0a1b2c3d4e5f67890` → `vpc-[id]`. Names and words are shorter or not hex.
fn redact_ids(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        let hex =
            word.len() >= 12 && word.chars().all(|c| c.is_ascii_hexdigit()) && word.chars().any(|c| c.is_ascii_digit());
        out.push_str(if hex { "[id]" } else { word });
        word.clear();
    };
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// A `--json` event stream as a reviewer reads it: the plan event pretty-printed, every other
/// event on its line, ids and times redacted. Operations on independent resources run
/// concurrently, so their events interleave differently from run to run: the events between
/// the plan and the summary are put in plan order, each resource's own events kept in the
/// order they came (which is deterministic).
fn events(stdout: &str) -> String {
    let mut events: Vec<Value> =
        stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
    events.iter_mut().for_each(redact);
    assert_eq!(events.first().map(|e| &e["event"]), Some(&Value::from("plan")), "{stdout}");
    assert_eq!(events.last().map(|e| &e["event"]), Some(&Value::from("summary")), "{stdout}");
    let order: Vec<String> = events[0]["plan"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["address"].as_str().unwrap().to_string())
        .collect();
    let n = events.len();
    events[1..n - 1].sort_by_key(|e| {
        let address = e["address"].as_str().unwrap_or_default();
        order.iter().position(|a| a == address).unwrap_or(usize::MAX)
    });
    let mut text = format!("{}\n", serde_json::to_string_pretty(&events[0]).unwrap());
    for e in &events[1..] {
        text.push_str(&serde_json::to_string(e).unwrap());
        text.push('\n');
    }
    text
}

#[test]
fn quickstart_refreshing_plan_and_json_events_of_apply_and_destroy() {
    let env = Env::new();
    let file = repo().join("stacks/quickstart.toml").to_string_lossy().into_owned();
    let run = |args: &[&str]| {
        let mut all = vec![args[0], file.as_str(), "--var", ADMIN_CIDR];
        all.extend(&args[1..]);
        let mut c = env.command(&all);
        // Only what the test sets: no stack variable from the caller, no heartbeat events.
        for (k, _) in std::env::vars() {
            if k.starts_with("GPUSTACK_VAR_") {
                c.env_remove(k);
            }
        }
        c.env("GPUSTACK_HEARTBEAT_SECONDS", "86400");
        let out = c.output().expect("run gpustack");
        let r = Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        };
        assert_eq!(r.code, 0, "{all:?}:\n{r:?}");
        let command = format!("gpustack {}", all.join(" ")).replace(&format!("{}/", repo().display()), "");
        (r, command)
    };

    let (r, command) = run(&["plan"]);
    snapshot("refreshing_plan__stacks_quickstart", &command, &shown(&r, env.dir.path()));
    let (r, command) = run(&["plan", "--json"]);
    let mut plan: Value = serde_json::from_str(&r.stdout).unwrap();
    redact(&mut plan);
    let text = format!("{}\n--- stderr\n{}", serde_json::to_string_pretty(&plan).unwrap(), r.stderr);
    snapshot("refreshing_plan_json__stacks_quickstart", &command, &text);

    let (r, command) = run(&["apply", "--auto-approve", "--json"]);
    snapshot("apply_events__stacks_quickstart", &command, &format!("{}--- stderr\n{}", events(&r.stdout), r.stderr));
    let (r, command) = run(&["destroy", "--auto-approve", "--json"]);
    snapshot("destroy_events__stacks_quickstart", &command, &format!("{}--- stderr\n{}", events(&r.stdout), r.stderr));
}
