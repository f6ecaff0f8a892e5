//! Attribute schemas: what keys a resource kind accepts, their types, defaults
//! and change rules. Checking is offline and reports every problem with its span.

use std::collections::BTreeMap;

use super::diag::{Diagnostic, closest};
use super::expr::{Expr, ExprKind};
use crate::value::Value;

/// What the language knows of a resource kind: the name users write, its attributes and its
/// outputs. The kinds (`crate::resources`) implement it; the language sees nothing more of
/// them, so parsing a stack cannot reach AWS (Terraform's `configschema` is the model).
pub trait Schema: Send + Sync + 'static {
    /// The name users write: `[vpc.main]`.
    fn name(&self) -> &'static str;
    fn attrs(&self) -> &'static [Attr];
    fn outputs(&self) -> &'static [(&'static str, Ty)];
    /// Fills attributes implied by others before checking (a node group's template version
    /// follows its template).
    fn complete(&self, _attrs: &mut BTreeMap<String, Expr>) {}
}

/// What a change to an attribute does to the real object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnChange {
    Update,
    Replace,
}

#[derive(Clone, Copy, Debug)]
pub enum Ty {
    Str,
    Int,
    Bool,
    /// Money and other non-integral numbers (capacity blocks' `max_upfront_usd`).
    #[allow(dead_code)]
    Number,
    Enum(&'static [&'static str]),
    List(&'static Ty),
    /// A table with any string keys and values of one type.
    Map(&'static Ty),
    /// A table with fixed keys.
    Object(&'static [Attr]),
    /// Anything (passed through).
    Any,
}

#[derive(Clone, Copy, Debug)]
pub enum Default {
    None,
    Bool(bool),
    Int(i64),
    Str(&'static str),
    EmptyList,
    EmptyMap,
}

#[derive(Clone, Copy, Debug)]
pub struct Attr {
    pub name: &'static str,
    pub ty: Ty,
    pub required: bool,
    pub default: Default,
    pub on_change: OnChange,
    /// Derived from the other inputs by the kind (`normalize`), never written by users; it is
    /// in the schema so plans diff it (a launch template's generated user data).
    pub computed: bool,
}

impl Attr {
    pub const fn req(name: &'static str, ty: Ty, on_change: OnChange) -> Attr {
        Attr { name, ty, required: true, default: Default::None, on_change, computed: false }
    }
    pub const fn opt(name: &'static str, ty: Ty, default: Default, on_change: OnChange) -> Attr {
        Attr { name, ty, required: false, default, on_change, computed: false }
    }
    pub const fn computed(name: &'static str, ty: Ty, on_change: OnChange) -> Attr {
        Attr { name, ty, required: false, default: Default::None, on_change, computed: true }
    }
}

impl Default {
    pub fn value(&self) -> Option<Value> {
        match *self {
            Default::None => None,
            Default::Bool(b) => Some(Value::Bool(b)),
            Default::Int(n) => Some(Value::Int(n)),
            Default::Str(s) => Some(Value::str(s)),
            Default::EmptyList => Some(Value::List(vec![])),
            Default::EmptyMap => Some(Value::Table(BTreeMap::new())),
        }
    }
}

impl Ty {
    fn describe(&self) -> String {
        match self {
            Ty::Str => "a string".into(),
            Ty::Int => "an integer".into(),
            Ty::Bool => "a boolean (true or false)".into(),
            Ty::Number => "a number".into(),
            Ty::Enum(vs) => format!("one of {}", vs.iter().map(|v| format!("\"{v}\"")).collect::<Vec<_>>().join(", ")),
            Ty::List(t) => match t.describe().trim_start_matches("a ").trim_start_matches("an ") {
                // "a list of tables", "a list of strings"; "a list of one of …" stays as is.
                one if one.starts_with("one of") || one.starts_with("any") => format!("a list of {one}"),
                noun => match noun.split_once(' ') {
                    Some((head, rest)) => format!("a list of {head}s {rest}"),
                    None => format!("a list of {noun}s"),
                },
            },
            Ty::Map(_) | Ty::Object(_) => "a table".into(),
            Ty::Any => "any value".into(),
        }
    }
}

/// The declared type of a referenced output, so `"${x.y.z}"` can be type-checked.
pub type OutputType<'a> = &'a dyn Fn(&super::expr::OutputRef) -> Option<Ty>;

/// Checks `expr` against `ty`, pushing diagnostics. `what` names the attribute path.
pub fn check(expr: &Expr, ty: &Ty, what: &str, out_ty: OutputType, diags: &mut Vec<Diagnostic>) {
    let mismatch = |found: &str| {
        Diagnostic::error(format!("`{what}` must be {}, found {found}", ty.describe()), expr.span.clone())
    };
    if let Ty::Any = ty {
        return;
    }
    if let Some(r) = expr.as_single_ref() {
        // The referenced output's type decides; a list output may fill a list attribute.
        if let Some(rt) = out_ty(r)
            && !compatible(&rt, ty)
        {
            diags.push(mismatch(&format!("`{}.{}`, which is {}", r.address, r.output, rt.describe())));
        }
        return;
    }
    match (&expr.kind, ty) {
        (ExprKind::Template(_), Ty::Str | Ty::Enum(_)) => {}
        (ExprKind::Template(_), _) => diags.push(mismatch("a string")),
        (ExprKind::Value(v), _) => check_value(v, expr, ty, what, diags),
        (ExprKind::List(items), Ty::List(inner)) => {
            for (i, e) in items.iter().enumerate() {
                check(e, inner, &format!("{what}[{i}]"), out_ty, diags);
            }
        }
        (ExprKind::Table(t), Ty::Map(inner)) => {
            for (k, e) in t {
                check(e, inner, &format!("{what}.{k}"), out_ty, diags);
            }
        }
        (ExprKind::Table(t), Ty::Object(attrs)) => check_object(t, attrs, what, expr.span.clone(), out_ty, diags),
        (ExprKind::List(_), _) => diags.push(mismatch("a list")),
        (ExprKind::Table(_), _) => diags.push(mismatch("a table")),
    }
}

fn check_value(v: &Value, expr: &Expr, ty: &Ty, what: &str, diags: &mut Vec<Diagnostic>) {
    let ok = match (v, ty) {
        (Value::Str(s), Ty::Enum(vs)) => {
            if !vs.contains(&s.as_str()) {
                let mut d =
                    Diagnostic::error(format!("`{what}` must be {}, found \"{s}\"", ty.describe()), expr.span.clone());
                if let Some(c) = closest(s, vs.iter().copied()) {
                    d = d.help(format!("did you mean \"{c}\"?"));
                }
                diags.push(d);
            }
            true
        }
        (Value::Int(n), Ty::Int) => {
            if i32::try_from(*n).is_err() {
                diags.push(out_of_range(*n, expr, what));
            }
            true
        }
        (Value::Str(_), Ty::Str) | (Value::Int(_), Ty::Number) | (Value::Float(_), Ty::Number) => true,
        (Value::Bool(_), Ty::Bool) => true,
        (Value::List(items), Ty::List(inner)) => {
            for (i, item) in items.iter().enumerate() {
                let e = Expr::value(item.clone(), expr.span.clone());
                check_value(item, &e, inner, &format!("{what}[{i}]"), diags);
            }
            true
        }
        (Value::Table(t), Ty::Map(inner)) => {
            for (k, item) in t {
                let e = Expr::value(item.clone(), expr.span.clone());
                check_value(item, &e, inner, &format!("{what}.{k}"), diags);
            }
            true
        }
        _ => false,
    };
    if !ok {
        let mut d = Diagnostic::error(
            format!("`{what}` must be {}, found {}", ty.describe(), v.type_name()),
            expr.span.clone(),
        );
        if let (Value::Str(s), Ty::Int | Ty::Number) = (v, ty)
            && s.parse::<f64>().is_ok()
        {
            d = d.help(format!("write the number without quotes: {s}"));
        }
        if let (Value::Str(s), Ty::Bool) = (v, ty)
            && (s == "true" || s == "false")
        {
            d = d.help(format!("write the boolean without quotes: {s}"));
        }
        if let (Value::Str(_), Ty::List(_)) = (v, ty) {
            d = d.help("wrap the value in brackets: [\"...\"]");
        }
        diags.push(d);
    }
}

/// AWS's APIs take 32-bit integers (counts, sizes, ports, hours): a larger one would be cut
/// short on the way, so it is refused here, where it is written.
fn out_of_range(n: i64, expr: &Expr, what: &str) -> Diagnostic {
    Diagnostic::error(
        format!("`{what}` is {n}, outside the 32-bit integers AWS accepts ({} to {})", i32::MIN, i32::MAX),
        expr.span.clone(),
    )
    .help("check the number for extra digits; AWS takes integers up to 2147483647 here")
}

/// Checks a table against fixed attributes: unknown keys (with the closest valid one),
/// missing required keys, and each value's type.
pub fn check_object(
    t: &BTreeMap<String, Expr>,
    attrs: &[Attr],
    what: &str,
    span: super::expr::Span,
    out_ty: OutputType,
    diags: &mut Vec<Diagnostic>,
) {
    let path = |k: &str| if what.is_empty() { k.to_string() } else { format!("{what}.{k}") };
    for (k, e) in t {
        match attrs.iter().find(|a| a.name == k && !a.computed) {
            Some(a) => check(e, &a.ty, &path(k), out_ty, diags),
            None => diags.push(unknown_key(k, e, attrs.iter().filter(|a| !a.computed).map(|a| a.name), what)),
        }
    }
    for a in attrs.iter().filter(|a| a.required && !t.contains_key(a.name)) {
        diags.push(
            Diagnostic::error(format!("missing required attribute `{}`", path(a.name)), span.clone()).help(format!(
                "add `{} = ...` ({})",
                a.name,
                a.ty.describe()
            )),
        );
    }
}

pub fn unknown_key<'a>(k: &str, e: &Expr, valid: impl Iterator<Item = &'a str> + Clone, what: &str) -> Diagnostic {
    let place = if what.is_empty() { String::new() } else { format!(" in `{what}`") };
    let d = Diagnostic::error(format!("unknown key `{k}`{place}"), e.key_span.clone().or(e.span.clone()));
    match closest(k, valid.clone()) {
        Some(c) if c != k => d.help(format!("did you mean `{c}`? (keys are case-sensitive)")),
        _ => d.help(format!("valid keys: {}", valid.collect::<Vec<_>>().join(", "))),
    }
}

fn compatible(found: &Ty, want: &Ty) -> bool {
    match (found, want) {
        (_, Ty::Any) | (Ty::Any, _) => true,
        (Ty::Str, Ty::Str | Ty::Enum(_)) => true,
        (Ty::Int, Ty::Int | Ty::Number) | (Ty::Number, Ty::Number) | (Ty::Bool, Ty::Bool) => true,
        (Ty::List(a), Ty::List(b)) => compatible(a, b),
        (Ty::Map(_) | Ty::Object(_), Ty::Map(_) | Ty::Object(_)) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ATTRS: &[Attr] = &[
        Attr::req("cidr_block", Ty::Str, OnChange::Replace),
        Attr::opt("internet_gateway", Ty::Bool, Default::Bool(false), OnChange::Update),
    ];

    fn lit(v: Value) -> Expr {
        Expr::value(v, Some(0..1))
    }

    #[test]
    fn reports_unknown_missing_and_wrong_type_at_once() {
        let t = BTreeMap::from([
            ("Cidr_block".to_string(), lit(Value::str("10.0.0.0/16"))),
            ("internet_gateway".to_string(), lit(Value::str("true"))),
        ]);
        let mut d = vec![];
        check_object(&t, ATTRS, "", Some(0..1), &|_| None, &mut d);
        let msgs: Vec<_> = d.iter().map(|d| d.message.clone()).collect();
        assert_eq!(d.len(), 3, "{msgs:?}");
        assert!(msgs.iter().any(|m| m.contains("unknown key `Cidr_block`")));
        assert_eq!(d[0].help.as_deref(), Some("did you mean `cidr_block`? (keys are case-sensitive)"));
        assert!(msgs.iter().any(|m| m.contains("`internet_gateway` must be a boolean")));
        assert!(msgs.iter().any(|m| m.contains("missing required attribute `cidr_block`")));
    }

    #[test]
    fn numbers_accept_integers_and_any_accepts_anything() {
        let mut d = vec![];
        check(&lit(Value::Int(40000)), &Ty::Number, "max_upfront_usd", &|_| None, &mut d);
        check(&lit(Value::Float(0.5)), &Ty::Number, "x", &|_| None, &mut d);
        check(&lit(Value::List(vec![Value::Bool(true)])), &Ty::Any, "passthrough", &|_| None, &mut d);
        assert!(d.is_empty(), "{d:?}");
        check(&lit(Value::str("40000")), &Ty::Number, "max_upfront_usd", &|_| None, &mut d);
        assert_eq!(d[0].help.as_deref(), Some("write the number without quotes: 40000"));
    }

    #[test]
    fn integers_beyond_i32_are_refused_where_written() {
        let mut d = vec![];
        check(&lit(Value::Int(i64::from(i32::MAX))), &Ty::Int, "instance_count", &|_| None, &mut d);
        assert!(d.is_empty(), "{d:?}");
        check(&lit(Value::Int(3_000_000_000)), &Ty::Int, "instance_count", &|_| None, &mut d);
        check(&lit(Value::List(vec![Value::Int(-3_000_000_000)])), &Ty::List(&Ty::Int), "ports", &|_| None, &mut d);
        check(&lit(Value::Int(3_000_000_000)), &Ty::Number, "max_upfront_usd", &|_| None, &mut d);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(
            d[0].message.starts_with("`instance_count` is 3000000000, outside the 32-bit integers"),
            "{}",
            d[0].message
        );
        assert_eq!(d[0].span, Some(0..1));
        assert!(d[1].message.starts_with("`ports[0]` is -3000000000"), "{}", d[1].message);
    }

    #[test]
    fn enum_suggests_closest() {
        let mut d = vec![];
        check(&lit(Value::str("clustr")), &Ty::Enum(&["cluster", "spread"]), "strategy", &|_| None, &mut d);
        assert_eq!(d[0].help.as_deref(), Some("did you mean \"cluster\"?"));
    }
}
