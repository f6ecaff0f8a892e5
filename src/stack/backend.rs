//! `[stack.backend]`: where the stack's state lives. Only `s3 = { bucket, key, region }`
//! exists; without it state is a local file. `key` may use `${var.*}` (a pipeline keys
//! its environments by variable) but never a resource output: state must be found before
//! anything is created. This module checks the declaration; `state::backend` uses it.

use std::collections::BTreeMap;

use super::diag::Diagnostic;
use super::expr::{Expr, ExprKind, Span};
use super::schema;
use crate::value::Value;

/// The S3 object that holds the stack's state, as declared.
#[derive(Clone, Debug, PartialEq)]
pub struct S3Backend {
    pub bucket: String,
    pub key: String,
    /// `None`: the stack's region.
    pub region: Option<String>,
}

const BACKENDS: &[&str] = &["s3"];
const S3_KEYS: &[&str] = &["bucket", "key", "region"];
const EXAMPLE: &str =
    "write:\n  [stack.backend]\n  s3 = { bucket = \"my-team-gpustack-state\", key = \"envs/${var.env}.json\" }";

/// Checks `stack.backend` (the expression of its table) and returns the declaration.
pub fn parse(e: &Expr, diags: &mut Vec<Diagnostic>) -> Option<S3Backend> {
    let ExprKind::Table(m) = &e.kind else {
        diags.push(Diagnostic::error("`stack.backend` must be a table", e.span.clone()).help(EXAMPLE));
        return None;
    };
    for (k, v) in m.iter().filter(|(k, _)| !BACKENDS.contains(&k.as_str())) {
        diags.push(schema::unknown_key(k, v, BACKENDS.iter().copied(), "stack.backend"));
    }
    let s3 = m.get("s3")?;
    let ExprKind::Table(s) = &s3.kind else {
        diags.push(Diagnostic::error("`stack.backend.s3` must be a table", s3.span.clone()).help(EXAMPLE));
        return None;
    };
    for (k, v) in s.iter().filter(|(k, _)| !S3_KEYS.contains(&k.as_str())) {
        diags.push(schema::unknown_key(k, v, S3_KEYS.iter().copied(), "stack.backend.s3"));
    }
    let span = s3.span.clone().or(s3.key_span.clone());
    let bucket = string(s, "bucket", &span, diags);
    let key = string(s, "key", &span, diags);
    let region = s.get("region").map(|_| string(s, "region", &span, diags));
    let mut ok = true;
    if let Some(why) = bucket.as_deref().and_then(bucket_problem) {
        diags.push(
            Diagnostic::error(
                format!("`{}` is not a valid S3 bucket name: {why}", bucket.as_deref().unwrap_or_default()),
                value_span(s, "bucket"),
            )
            .help(
                "bucket names are 3-63 characters of a-z, 0-9, '.' and '-', starting and ending with a letter or digit",
            ),
        );
        ok = false;
    }
    if let Some(key) = key.as_deref()
        && (key.is_empty() || key.starts_with('/') || key.ends_with('/'))
    {
        diags.push(
            Diagnostic::error(format!("`{key}` is not a usable state key"), value_span(s, "key"))
                .help("name an object, without a leading or trailing '/': key = \"envs/${var.env}.json\""),
        );
        ok = false;
    }
    match (bucket, key, region) {
        (Some(bucket), Some(key), None) if ok => Some(S3Backend { bucket, key, region: None }),
        (Some(bucket), Some(key), Some(Some(region))) if ok => Some(S3Backend { bucket, key, region: Some(region) }),
        _ => None,
    }
}

fn value_span(s: &BTreeMap<String, Expr>, k: &str) -> Span {
    s.get(k).and_then(|e| e.span.clone())
}

fn string(s: &BTreeMap<String, Expr>, k: &str, table: &Span, diags: &mut Vec<Diagnostic>) -> Option<String> {
    let Some(e) = s.get(k) else {
        diags.push(
            Diagnostic::error(format!("missing required attribute `stack.backend.s3.{k}`"), table.clone())
                .help(EXAMPLE),
        );
        return None;
    };
    match e.as_literal() {
        Some(Value::Str(v)) => Some(v.clone()),
        _ => {
            let d = Diagnostic::error(
                format!("`stack.backend.s3.{k}` must be a string known before apply"),
                e.span.clone(),
            );
            diags.push(d.help(
                "variables (${var.env}) are fine; resource outputs are not, because state is read before anything exists",
            ));
            None
        }
    }
}

fn bucket_problem(b: &str) -> Option<&'static str> {
    let edge_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !(3..=63).contains(&b.len()) {
        Some("it must be 3 to 63 characters long")
    } else if !b.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-') {
        Some("it may only hold a-z, 0-9, '.' and '-'")
    } else if !edge_ok(b.chars().next()) || !edge_ok(b.chars().last()) {
        Some("it must start and end with a letter or digit")
    } else if b.contains("..") {
        Some("it must not hold two dots in a row")
    } else {
        None
    }
}
