//! A stable stand-in for fuzzing (the cargo-fuzz target is in `fuzz/`, for nightly):
//! thousands of mutated versions of every shipped stack go through the check
//! `gpustack validate` runs ([`Stack::from_bytes`]), in process. Bytes are flipped, keys
//! dropped and renamed, values retyped, references broken, lines doubled, swapped and cut.
//! Every input must end without a panic, within a time bound, and with a `file:line:column`
//! on every error. Deterministic: a failure names its file and seed, and prints the input.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::stack::{Source, VarSources};

/// Mutated versions per shipped stack file (`MUTATIONS_PER_FILE` overrides it for a longer
/// run, `MUTATIONS_SEED` starts elsewhere).
const PER_FILE: usize = 1200;
/// The longest any one input may take (a debug build on a busy 2-core machine checks one in
/// about a millisecond): longer is a hang.
const PER_INPUT: Duration = Duration::from_secs(10);

/// SplitMix64: small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }

    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

/// Values of every TOML type, and strings AWS or the parser should refuse.
const VALUES: &[&str] = &[
    "0",
    "-1",
    "65536",
    "3000000000",
    "9223372036854775807",
    "1.5",
    "nan",
    "inf",
    "-inf",
    "1e400",
    "true",
    "\"\"",
    "\"x\"",
    "\"true\"",
    "\"42\"",
    "[]",
    "{}",
    "[1, \"a\", true]",
    "{ a = 1, b = [2] }",
    "[{ protocol = \"tcp\", from_port = 70000, to_port = 1 }]",
    "\"${var.nope}\"",
    "\"${vpc.nope.id}\"",
    "\"${\"",
    "\"$${x}\"",
    "\"${var.env}${var.env}\"",
    "\"10.0.0.0/33\"",
    "\"10.0.0.1/16\"",
    "\"256.0.0.0/16\"",
    "\"us-east-1a\"",
    "\"aws:x\"",
    "{ \"aws:owner\" = \"x\" }",
    "1979-05-27T07:32:00Z",
    "\"é€😀\"",
    "'''\nmulti\nline'''",
];

/// Texts to drop in anywhere: structure, escapes, multi-byte characters.
const SNIPPETS: &[&str] = &[
    "[", "]", "{", "}", "=", "\"", "'", "${", "}", "$", ".", ",", "#", "\n", "\\", "é", "€", "😀", "\u{0}", "[[x]]\n",
];

/// One mutation of `text`; returns the new bytes and what was done.
fn mutate(text: &str, addresses: &[String], keys: &[String], rng: &mut Rng) -> (Vec<u8>, String) {
    if text.is_empty() {
        return (rng.pick(SNIPPETS).as_bytes().to_vec(), "an empty file given a snippet".into());
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let assignment_lines: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.contains(" = ") && !l.trim_start().starts_with('#'))
        .map(|(i, _)| i)
        .collect();
    let join = |ls: &[String]| ls.concat().into_bytes();
    let mut owned: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    match rng.below(12) {
        0 => {
            // A byte flipped to any value: may break UTF-8.
            let mut b = text.as_bytes().to_vec();
            let i = rng.below(b.len());
            b[i] = rng.next() as u8;
            (b, format!("byte {i} flipped"))
        }
        1 => {
            // A snippet inserted at a byte offset, possibly inside a character.
            let mut b = text.as_bytes().to_vec();
            let i = rng.below(b.len() + 1);
            let s = rng.pick(SNIPPETS);
            b.splice(i..i, s.bytes());
            (b, format!("{s:?} inserted at byte {i}"))
        }
        2 => {
            let i = rng.below(owned.len());
            owned.remove(i);
            (join(&owned), format!("line {} dropped", i + 1))
        }
        3 if !assignment_lines.is_empty() => {
            // A key renamed: mis-cased, misspelt, or another kind's key.
            let i = *rng.pick(&assignment_lines);
            let (k, v) = owned[i].split_once(" = ").map(|(k, v)| (k.to_string(), v.to_string())).unwrap_or_default();
            let key = k.trim();
            let new = match rng.below(4) {
                0 => key.to_uppercase(),
                1 => format!("{key}x"),
                2 => key.chars().skip(1).collect(),
                _ => rng.pick(keys).clone(),
            };
            owned[i] = format!("{new} = {v}");
            (join(&owned), format!("line {}: key `{key}` renamed `{new}`", i + 1))
        }
        4 if !assignment_lines.is_empty() => {
            // A value retyped.
            let i = *rng.pick(&assignment_lines);
            let key = owned[i].split_once(" = ").map(|(k, _)| k.to_string()).unwrap_or_default();
            let v = rng.pick(VALUES);
            owned[i] = format!("{key} = {v}\n");
            (join(&owned), format!("line {}: value of `{}` made {v}", i + 1, key.trim()))
        }
        5 => {
            // A reference broken: unknown address or output, unclosed, or pointed elsewhere
            // (which can close a cycle).
            let refs: Vec<usize> = text.match_indices("${").map(|(i, _)| i).collect();
            if refs.is_empty() {
                return (text.as_bytes().to_vec(), "no reference to break".into());
            }
            let at = *rng.pick(&refs);
            let end = text[at..].find('}').map_or(text.len(), |e| at + e + 1);
            let other = if addresses.is_empty() { "vpc.main".to_string() } else { rng.pick(addresses).clone() };
            let new = match rng.below(6) {
                0 => format!("${{{other}.id}}"),
                1 => format!("${{{other}.nope}}"),
                2 => "${nope.main.id}".to_string(),
                3 => "${var.undeclared}".to_string(),
                4 => "${".to_string(),
                _ => format!("${{{other}}}"),
            };
            let mut s = text.to_string();
            s.replace_range(at..end, &new);
            (s.into_bytes(), format!("reference at byte {at} made {new}"))
        }
        6 => {
            let i = rng.below(owned.len());
            let l = owned[i].clone();
            owned.insert(i, l);
            (join(&owned), format!("line {} doubled", i + 1))
        }
        7 => {
            let (i, j) = (rng.below(owned.len()), rng.below(owned.len()));
            owned.swap(i, j);
            (join(&owned), format!("lines {} and {} swapped", i + 1, j + 1))
        }
        8 => {
            let i = rng.below(text.len() + 1);
            (text.as_bytes()[..i].to_vec(), format!("cut at byte {i}"))
        }
        9 => {
            // A table header changed: unknown kind, bad name, array of tables, nesting.
            let headers: Vec<usize> =
                owned.iter().enumerate().filter(|(_, l)| l.starts_with('[')).map(|(i, _)| i).collect();
            if headers.is_empty() {
                return (text.as_bytes().to_vec(), "no header".into());
            }
            let i = *rng.pick(&headers);
            let h = owned[i].trim().trim_matches(['[', ']']).to_string();
            let new = match rng.below(5) {
                0 => format!("[{h}x]"),
                1 => format!("[[{h}]]"),
                2 => format!("[{h}.extra]"),
                3 => format!("[{}]", h.split('.').next().unwrap_or_default()),
                _ => format!("[{}.\"9 bad\"]", h.split('.').next().unwrap_or_default()),
            };
            owned[i] = format!("{new}\n");
            (join(&owned), format!("line {}: header [{h}] made {new}", i + 1))
        }
        10 if assignment_lines.len() >= 2 => {
            // Two values swapped between keys: types and meanings cross.
            let (i, j) = (*rng.pick(&assignment_lines), *rng.pick(&assignment_lines));
            let split = |l: &str| l.split_once(" = ").map(|(k, v)| (k.to_string(), v.to_string())).unwrap_or_default();
            let ((ki, vi), (kj, vj)) = (split(&owned[i]), split(&owned[j]));
            owned[i] = format!("{ki} = {vj}");
            owned[j] = format!("{kj} = {vi}");
            (join(&owned), format!("values of lines {} and {} swapped", i + 1, j + 1))
        }
        _ => {
            // A character replaced at a character boundary (stays UTF-8).
            let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
            let i = *rng.pick(&bounds);
            let len = text[i..].chars().next().map_or(0, char::len_utf8);
            let s = rng.pick(SNIPPETS);
            let mut t = text.to_string();
            t.replace_range(i..i + len, s);
            (t.into_bytes(), format!("character at byte {i} made {s:?}"))
        }
    }
}

/// What validate does with one input; panics (caught by the caller) on a broken promise.
fn check(bytes: Vec<u8>) {
    let env = |k: &str| (k == "admin_cidr").then(|| "198.51.100.7/32".to_string());
    let vars = VarSources { cli: &[], env: &env };
    match super::from_bytes(Path::new("m.toml"), bytes, &vars) {
        Ok(stack) => {
            for w in &stack.warnings {
                let _ = stack.source.render(w, false);
            }
        }
        Err(d) => {
            assert!(d.items.iter().any(|x| x.is_error()), "rejected without an error");
            for item in &d.items {
                if item.is_error() {
                    let span =
                        item.span.clone().unwrap_or_else(|| panic!("error without a location: {}", item.message));
                    assert!(
                        span.start <= span.end && span.end <= d.source.text.len(),
                        "span {span:?} outside the file"
                    );
                }
                let _ = d.source.to_json(item);
            }
            let rendered = d.render(false);
            assert!(rendered.contains("--> m.toml:"), "{rendered}");
        }
    }
}

fn shipped_stacks() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![];
    for dir in ["stacks", "examples", "examples/pipeline"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else { continue };
        files.extend(entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "toml")));
    }
    files.sort();
    files
}

/// `[kind.name]` addresses and `key =` names of the shipped stacks, to rename and point to.
fn vocabulary(texts: &[String]) -> (Vec<String>, Vec<String>) {
    let (mut addresses, mut keys) = (vec![], vec![]);
    for t in texts {
        for l in t.lines() {
            if let Some(h) = l.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                addresses.push(h.to_string());
            } else if let Some((k, _)) = l.split_once(" = ") {
                keys.push(k.trim().to_string());
            }
        }
    }
    for v in [&mut addresses, &mut keys] {
        v.sort();
        v.dedup();
    }
    (addresses, keys)
}

#[test]
fn mutated_shipped_stacks_never_panic_hang_or_lose_the_location() {
    let files = shipped_stacks();
    assert!(files.len() >= 5, "shipped stacks not found: {files:?}");
    let texts: Vec<String> = files.iter().map(|f| std::fs::read_to_string(f).unwrap()).collect();
    for (f, t) in files.iter().zip(&texts) {
        let env = |k: &str| (k == "admin_cidr").then(|| "198.51.100.7/32".to_string());
        let vars = VarSources { cli: &[], env: &env };
        if let Err(d) = super::check(Source::new(f, t.clone()), &vars) {
            panic!("a shipped stack must validate:\n{}", d.render(false));
        }
    }
    let (addresses, keys) = vocabulary(&texts);
    let per_file = std::env::var("MUTATIONS_PER_FILE").ok().and_then(|v| v.parse().ok()).unwrap_or(PER_FILE);
    let first_seed: u64 = std::env::var("MUTATIONS_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    let total = per_file * texts.len();

    // The inputs run on a worker; this thread is the watchdog for hangs.
    let done = Arc::new(AtomicUsize::new(0));
    let current: Arc<Mutex<(String, Vec<u8>)>> = Arc::default();
    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let started = Instant::now();
    let worker = {
        let (done, current, failures) = (done.clone(), current.clone(), failures.clone());
        std::thread::spawn(move || {
            for (f, text) in files.iter().zip(&texts) {
                for seed in first_seed..first_seed + per_file as u64 {
                    let mut rng = Rng(seed ^ 0x5EED);
                    let mut bytes = text.as_bytes().to_vec();
                    let mut what = vec![];
                    for _ in 0..1 + rng.below(3) {
                        // Text mutations need text: once the bytes are not UTF-8, stop there.
                        let Ok(t) = std::str::from_utf8(&bytes) else { break };
                        let (b, w) = mutate(t, &addresses, &keys, &mut rng);
                        bytes = b;
                        what.push(w);
                    }
                    let label = format!("{} seed {seed}: {}", f.display(), what.join("; "));
                    *current.lock().unwrap() = (label.clone(), bytes.clone());
                    if let Err(p) = std::panic::catch_unwind(|| check(bytes.clone())) {
                        let msg = p
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("{label}\n  {msg}\n--- input\n{}\n---", String::from_utf8_lossy(&bytes)));
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let (mut last, mut since) = (0, Instant::now());
    while !worker.is_finished() {
        std::thread::sleep(Duration::from_millis(20));
        let n = done.load(Ordering::Relaxed);
        if n != last {
            (last, since) = (n, Instant::now());
        } else if since.elapsed() > PER_INPUT {
            let (label, bytes) = current.lock().unwrap().clone();
            panic!("no answer in {PER_INPUT:?} (a hang): {label}\n--- input\n{}", String::from_utf8_lossy(&bytes));
        }
    }
    worker.join().unwrap();
    let failures = failures.lock().unwrap();
    eprintln!("{total} mutated stacks validated in {:.1?}; {} failed", started.elapsed(), failures.len());
    assert_eq!(done.load(Ordering::Relaxed), total);
    assert!(
        failures.is_empty(),
        "{} of {total} inputs failed; the first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(5)].join("\n\n")
    );
}
