//! Progress of an apply or destroy on stderr: live bars with elapsed time on a
//! terminal (indicatif), plain lines otherwise, or JSON events on stdout with `--json`.

use std::io::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Terminal,
    Plain,
    Json,
}

/// How often long work reports that it is still going (`GPUSTACK_HEARTBEAT_SECONDS`, default 30).
pub fn heartbeat() -> Duration {
    crate::settings::get().heartbeat
}

pub struct Progress {
    mode: Mode,
    multi: MultiProgress,
    lines: Mutex<()>,
}

pub struct Task {
    bar: Option<ProgressBar>,
    started: Instant,
    pub label: String,
    address: String,
    past: &'static str,
}

impl Progress {
    pub fn new(mode: Mode) -> Progress {
        let target = if mode == Mode::Terminal { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        Progress { mode, multi: MultiProgress::with_draw_target(target), lines: Mutex::new(()) }
    }

    pub fn start(&self, address: &str, verb: &str, past: &'static str) -> Task {
        let label = format!("{address}: {verb}");
        let bar = match self.mode {
            Mode::Terminal => {
                let b = self.multi.add(ProgressBar::new_spinner());
                b.set_style(
                    ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                );
                b.set_message(label.clone());
                b.enable_steady_tick(Duration::from_millis(120));
                Some(b)
            }
            Mode::Plain => {
                self.line(&format!("{label}…"));
                None
            }
            Mode::Json => {
                self.event(serde_json::json!({"event": "start", "address": address, "operation": verb}));
                None
            }
        };
        Task { bar, started: Instant::now(), label, address: address.to_string(), past }
    }

    /// A failed operation: its text on stderr, or a `failed` event whose AWS parts are fields.
    pub fn finish_failed(&self, task: Task, address: &str, failure: &super::Failure) {
        if self.mode != Mode::Json {
            return self.finish(task, address, Err(&failure.text));
        }
        let secs = task.started.elapsed().as_secs_f64();
        let mut event = serde_json::Map::new();
        event.insert("event".into(), "failed".into());
        event.insert("address".into(), address.into());
        failure.json_fields(&mut event);
        event.insert("seconds".into(), secs.into());
        self.event(serde_json::Value::Object(event));
    }

    pub fn finish(&self, task: Task, address: &str, outcome: Result<&str, &str>) {
        let secs = task.started.elapsed().as_secs_f64();
        let text = match outcome {
            Ok(detail) => format!(
                "{}: {}{} ({secs:.1}s)",
                task.address,
                task.past,
                if detail.is_empty() { String::new() } else { format!(" {detail}") }
            ),
            Err(e) => format!("{} FAILED ({secs:.1}s): {e}", task.label),
        };
        match self.mode {
            Mode::Terminal => {
                if let Some(b) = task.bar {
                    b.finish_and_clear();
                    self.multi.remove(&b);
                }
                let _ = self.multi.println(text);
            }
            Mode::Plain => self.line(&text),
            Mode::Json => self.event(match outcome {
                Ok(detail) => {
                    serde_json::json!({"event": "done", "address": address, "detail": detail, "seconds": secs})
                }
                Err(e) => serde_json::json!({"event": "failed", "address": address, "error": e, "seconds": secs}),
            }),
        }
    }

    /// A heartbeat for long work: a line on plain output, an event in JSON (the terminal's
    /// spinner already shows the elapsed time).
    pub fn still(&self, task: &Task) {
        let secs = task.started.elapsed().as_secs();
        match self.mode {
            Mode::Terminal => {}
            Mode::Plain => self.line(&format!("{}… still going ({}m{:02}s elapsed)", task.label, secs / 60, secs % 60)),
            Mode::Json => self.event(serde_json::json!({"event": "waiting", "address": task.address, "seconds": secs})),
        }
    }

    /// A step of long work: the spinner's message on a terminal, a line otherwise.
    pub fn step(&self, task: &Task, step: &str) {
        match self.mode {
            Mode::Terminal => {
                if let Some(b) = &task.bar {
                    b.set_message(format!("{}: {step}", task.label));
                }
            }
            Mode::Plain => self.line(&format!("{}: {step}", task.address)),
            Mode::Json => self.event(serde_json::json!({"event": "step", "address": task.address, "step": step})),
        }
    }

    pub fn note(&self, text: &str) {
        match self.mode {
            Mode::Terminal => {
                let _ = self.multi.println(text);
            }
            Mode::Plain => self.line(text),
            Mode::Json => self.event(serde_json::json!({"event": "note", "message": text})),
        }
    }

    fn line(&self, text: &str) {
        let _g = self.lines.lock();
        eprintln!("{text}");
    }

    pub fn event(&self, v: serde_json::Value) {
        let _g = self.lines.lock();
        // A closed stdout must not stop an apply half-way: the event is dropped, the work
        // goes on and the exit code still says how it went (see cli::stdout).
        let _ = writeln!(std::io::stdout().lock(), "{v}");
    }
}
