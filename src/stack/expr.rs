//! Expressions: attribute values as written, with `${...}` references.
//!
//! Variables (`${var.x}`) are substituted when the stack is loaded, so an `Expr`
//! only holds references to other resources' outputs (`${kind.name.output}`).
//! A string that is exactly one reference takes the referenced value's type;
//! otherwise parts are interpolated as text. `$${` writes a literal `${`.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::value::Value;

pub type Span = Option<Range<usize>>;

#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    /// Where the value is written.
    pub span: Span,
    /// Where the key that holds this value is written (for unknown-key errors).
    pub key_span: Span,
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    Value(Value),
    /// A string with at least one reference to a resource output.
    Template(Vec<Part>),
    List(Vec<Expr>),
    Table(BTreeMap<String, Expr>),
}

#[derive(Clone, Debug)]
pub enum Part {
    Lit(String),
    Ref(OutputRef),
}

/// `${kind.name.output}`.
#[derive(Clone, Debug)]
pub struct OutputRef {
    pub address: String,
    pub output: String,
    pub span: Span,
}

/// A reference as parsed from text, before variables are substituted.
#[derive(Clone, Debug, PartialEq)]
pub enum RawRef {
    Var(String),
    Output { address: String, output: String },
}

/// A piece of a string as parsed.
#[derive(Clone, Debug, PartialEq)]
pub enum RawPart {
    Lit(String),
    /// The reference, and its byte offset and length inside the string.
    Ref(RawRef, usize, usize),
}

/// Splits a string into literal text and references.
/// Errors carry the byte offset inside the string and a message.
pub fn parse_template(s: &str) -> Result<Vec<RawPart>, (usize, String)> {
    let mut parts = Vec::new();
    let mut lit = String::new();
    let mut rest = s;
    let mut offset = 0;
    while let Some(i) = rest.find('$') {
        lit.push_str(&rest[..i]);
        let after = &rest[i..];
        if let Some(tail) = after.strip_prefix("$${") {
            lit.push_str("${");
            rest = tail;
            offset += i + 3;
        } else if after.starts_with("${") {
            let Some(close) = after.find('}') else {
                return Err((offset + i, "`${` is not closed by `}`".into()));
            };
            let body = after[2..close].trim();
            let r = parse_ref(body).map_err(|m| (offset + i, m))?;
            if !lit.is_empty() {
                parts.push(RawPart::Lit(std::mem::take(&mut lit)));
            }
            parts.push(RawPart::Ref(r, offset + i, close + 1));
            rest = &after[close + 1..];
            offset += i + close + 1;
        } else {
            lit.push('$');
            rest = &after[1..];
            offset += i + 1;
        }
    }
    lit.push_str(rest);
    if !lit.is_empty() || parts.is_empty() {
        parts.push(RawPart::Lit(lit));
    }
    Ok(parts)
}

fn parse_ref(body: &str) -> Result<RawRef, String> {
    let segs: Vec<&str> = body.split('.').collect();
    let ident = |s: &str| {
        !s.is_empty()
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            && !s.starts_with(|c: char| c.is_ascii_digit())
    };
    if !segs.iter().all(|s| ident(s)) {
        return Err(format!("`${{{body}}}` is not a reference; write `${{var.NAME}}` or `${{KIND.NAME.OUTPUT}}`"));
    }
    match segs.as_slice() {
        ["var", name] => Ok(RawRef::Var(name.to_string())),
        [kind, name, output] => Ok(RawRef::Output { address: format!("{kind}.{name}"), output: output.to_string() }),
        _ => Err(format!("`${{{body}}}` is not a reference; write `${{var.NAME}}` or `${{KIND.NAME.OUTPUT}}`")),
    }
}

impl Expr {
    pub fn value(v: Value, span: Span) -> Expr {
        Expr { kind: ExprKind::Value(v), span, key_span: None }
    }

    /// Every output reference in this expression, depth first.
    pub fn refs(&self, out: &mut Vec<OutputRef>) {
        match &self.kind {
            ExprKind::Value(_) => {}
            ExprKind::Template(parts) => out.extend(parts.iter().filter_map(|p| match p {
                Part::Ref(r) => Some(r.clone()),
                Part::Lit(_) => None,
            })),
            ExprKind::List(items) => items.iter().for_each(|e| e.refs(out)),
            ExprKind::Table(t) => t.values().for_each(|e| e.refs(out)),
        }
    }

    /// The value, with references looked up by `lookup`.
    pub fn resolve(&self, lookup: &dyn Fn(&OutputRef) -> Value) -> Value {
        match &self.kind {
            ExprKind::Value(v) => v.clone(),
            ExprKind::Template(parts) => match parts.as_slice() {
                [Part::Ref(r)] => lookup(r),
                _ => {
                    let mut s = String::new();
                    for p in parts {
                        match p {
                            Part::Lit(l) => s.push_str(l),
                            Part::Ref(r) => match lookup(r) {
                                Value::Unknown => return Value::Unknown,
                                v => s.push_str(&v.interpolate()),
                            },
                        }
                    }
                    Value::Str(s)
                }
            },
            ExprKind::List(items) => Value::List(items.iter().map(|e| e.resolve(lookup)).collect()),
            ExprKind::Table(t) => Value::Table(t.iter().map(|(k, e)| (k.clone(), e.resolve(lookup))).collect()),
        }
    }

    /// The single reference this expression is exactly, if any.
    pub fn as_single_ref(&self) -> Option<&OutputRef> {
        match &self.kind {
            ExprKind::Template(parts) => match parts.as_slice() {
                [Part::Ref(r)] => Some(r),
                _ => None,
            },
            _ => None,
        }
    }

    pub fn as_literal(&self) -> Option<&Value> {
        match &self.kind {
            ExprKind::Value(v) => Some(v),
            _ => None,
        }
    }

    /// The entries of a table expression, written inline (each with its own span) or as one
    /// literal value (each with the table's span); empty for anything else.
    pub fn table_entries(&self) -> BTreeMap<String, Expr> {
        match &self.kind {
            ExprKind::Table(t) => t.clone(),
            ExprKind::Value(Value::Table(t)) => {
                t.iter().map(|(k, v)| (k.clone(), Expr::value(v.clone(), self.span.clone()))).collect()
            }
            _ => BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_literals_and_references() {
        let p = parse_template("llm-${var.env}-x").unwrap();
        assert_eq!(
            p,
            vec![
                RawPart::Lit("llm-".into()),
                RawPart::Ref(RawRef::Var("env".into()), 4, 10),
                RawPart::Lit("-x".into())
            ]
        );
    }

    #[test]
    fn output_reference_and_escape() {
        let p = parse_template("${ vpc.main.id }").unwrap();
        assert_eq!(p, vec![RawPart::Ref(RawRef::Output { address: "vpc.main".into(), output: "id".into() }, 0, 16)]);
        assert_eq!(parse_template("$${x}").unwrap(), vec![RawPart::Lit("${x}".into())]);
        assert_eq!(parse_template("a$b").unwrap(), vec![RawPart::Lit("a$b".into())]);
    }

    #[test]
    fn bad_references_are_errors() {
        assert!(parse_template("${vpc.main}").is_err());
        assert!(parse_template("${var.x").is_err());
        assert!(parse_template("${a b}").is_err());
    }
}
