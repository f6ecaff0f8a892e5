//! Diagnostics: problems found in a stack file, with the place they were found.
//!
//! A diagnostic carries a byte span into its source; rendering turns it into
//! `file:line:column`, the offending line and a caret, plus a `help:` line that
//! says what to do. Nothing here knows about AWS.

use std::fmt::Write as _;
use std::ops::Range;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

#[derive(Clone, Debug)]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
    pub span: Option<Range<usize>>,
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn error(message: impl Into<String>, span: Option<Range<usize>>) -> Self {
        Diagnostic { severity: Severity::Error, message: message.into(), span, help: None }
    }

    pub fn warning(message: impl Into<String>, span: Option<Range<usize>>) -> Self {
        Diagnostic { severity: Severity::Warning, message: message.into(), span, help: None }
    }

    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// A stack file's text with a line index, so spans turn into line:column fast.
#[derive(Clone, Debug)]
pub struct Source {
    pub path: PathBuf,
    pub text: String,
    line_starts: Vec<usize>,
}

impl Source {
    pub fn new(path: impl Into<PathBuf>, text: String) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Source { path: path.into(), text, line_starts }
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&s| s <= offset) - 1;
        let start = self.line_starts[line];
        let before = self.text.get(start..offset).unwrap_or_default();
        // A byte-order mark is invisible: it is not a column.
        let before = if line == 0 { before.trim_start_matches('\u{FEFF}') } else { before };
        let col = self.text.get(start..offset).map_or(offset - start, |_| before.chars().count()) + 1;
        (line + 1, col)
    }

    fn line_text(&self, line: usize) -> &str {
        let start = self.line_starts[line - 1];
        let end = self.line_starts.get(line).copied().unwrap_or(self.text.len());
        let text = self.text[start..end].trim_end_matches(['\n', '\r']);
        if line == 1 { text.trim_start_matches('\u{FEFF}') } else { text }
    }

    /// `file:line:col` of a span, or just the file.
    pub fn location(&self, span: &Option<Range<usize>>) -> String {
        match span {
            Some(s) => {
                let (l, c) = self.line_col(s.start);
                format!("{}:{l}:{c}", self.path.display())
            }
            None => self.path.display().to_string(),
        }
    }

    /// Renders one diagnostic for a person.
    pub fn render(&self, d: &Diagnostic, color: bool) -> String {
        let (label, code) = match d.severity {
            Severity::Error => ("error", "31"),
            Severity::Warning => ("warning", "33"),
        };
        let mut out = String::new();
        let label = if color { format!("\x1b[1;{code}m{label}\x1b[0m") } else { label.to_string() };
        let _ = writeln!(out, "{label}: {}", d.message);
        // The arrow lines up with the gutter of the line number below it, as in rustc.
        let gutter = d.span.as_ref().map_or(1, |s| self.line_col(s.start).0.to_string().len());
        let _ = writeln!(out, "{:gutter$}--> {}", "", self.location(&d.span));
        if let Some(span) = &d.span {
            let (line, col) = self.line_col(span.start);
            let text = self.line_text(line);
            let (end_line, end_col) = self.line_col(span.end.max(span.start + 1) - 1);
            let width = if end_line == line { (end_col + 1).saturating_sub(col).max(1) } else { 1 };
            let _ = writeln!(out, "{:gutter$} |", "");
            let _ = writeln!(out, "{line} | {text}");
            let _ = writeln!(out, "{:gutter$} | {}{}", "", " ".repeat(col - 1), "^".repeat(width));
        }
        if let Some(help) = &d.help {
            let _ = writeln!(out, "  help: {help}");
        }
        out
    }

    /// The JSON form of a diagnostic, for pipelines.
    pub fn to_json(&self, d: &Diagnostic) -> serde_json::Value {
        let (line, column) = d.span.as_ref().map(|s| self.line_col(s.start)).unzip();
        serde_json::json!({
            "severity": d.severity,
            "message": d.message,
            "file": self.path.display().to_string(),
            "line": line,
            "column": column,
            "help": d.help,
        })
    }
}

/// Diagnostics of one file; an error if any of them is an error.
#[derive(Debug)]
pub struct Diagnostics {
    pub source: Source,
    pub items: Vec<Diagnostic>,
}

impl Diagnostics {
    pub fn render(&self, color: bool) -> String {
        let mut out = String::new();
        for d in &self.items {
            out.push_str(&self.source.render(d, color));
            out.push('\n');
        }
        let errors = self.items.iter().filter(|d| d.is_error()).count();
        let warnings = self.items.len() - errors;
        if errors > 0 {
            let _ = writeln!(
                out,
                "{} has {errors} error{} and {warnings} warning{}.",
                self.source.path.display(),
                plural(errors),
                plural(warnings)
            );
        }
        out
    }
}

impl std::fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(false))
    }
}

impl std::error::Error for Diagnostics {}

pub fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// The candidate closest to `word` by edit distance, if it is close enough to be a likely typo.
/// Case differences count as nearly free, so `Match` suggests `match`.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = word.to_ascii_lowercase();
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        let cl = c.to_ascii_lowercase();
        // A key that starts with a valid key (or is its start) is most likely that key.
        let prefix = cl.len() >= 3 && lower.len() >= 3 && (lower.starts_with(&cl) || cl.starts_with(&lower));
        let d = if c.eq_ignore_ascii_case(word) {
            0
        } else if prefix {
            1
        } else {
            edit_distance(&lower, &cl)
        };
        if best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, c));
        }
    }
    let limit = (word.chars().count() / 3).max(2);
    best.filter(|(d, _)| *d <= limit).map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_are_one_based() {
        let s = Source::new("x.toml", "a = 1\nbc = 2\n".into());
        assert_eq!(s.line_col(0), (1, 1));
        assert_eq!(s.line_col(6), (2, 1));
        assert_eq!(s.line_col(8), (2, 3));
    }

    #[test]
    fn closest_prefers_case_insensitive_match() {
        assert_eq!(closest("Cidr_block", ["cidr_block", "vpc"]), Some("cidr_block"));
        assert_eq!(closest("cidr_blok", ["cidr_block", "vpc"]), Some("cidr_block"));
        assert_eq!(closest("zzzzzz", ["cidr_block", "vpc"]), None);
        assert_eq!(closest("cidr_blok", ["protocol", "cidr", "self"]), Some("cidr"));
    }

    #[test]
    fn render_names_file_line_column_and_help() {
        let s = Source::new("s.toml", "[vpc.main]\ncidr = 1\n".into());
        let d = Diagnostic::error("unknown key `cidr`", Some(11..15)).help("did you mean `cidr_block`?");
        let out = s.render(&d, false);
        assert!(out.contains("s.toml:2:1"), "{out}");
        assert!(out.contains("^^^^"), "{out}");
        assert!(out.contains("help: did you mean `cidr_block`?"), "{out}");
    }
}
