//! Queries over a checked stack that rules and kinds both ask: an attribute's literal value,
//! the resource a reference names, whether two expressions name one object. The language
//! layer, so kinds (`crate::resources`) use them without importing the rules.

use crate::stack::{Expr, Resource, Stack};
use crate::value::Value;

/// An attribute's value when it is known offline (no references to other resources).
pub(crate) fn lit(r: &Resource, k: &str) -> Option<Value> {
    r.attrs.get(k).map(|e| e.resolve(&|_| Value::Unknown)).filter(Value::is_known)
}

pub(crate) fn lit_str(r: &Resource, k: &str) -> Option<String> {
    lit(r, k).and_then(|v| v.as_str().map(str::to_string))
}

pub(crate) fn span(r: &Resource, k: &str) -> crate::stack::Span {
    r.attrs.get(k).and_then(|e| e.span.clone()).or(r.span.clone())
}

/// The stack resource an attribute refers to (`"${kind.name.out}"`).
pub(crate) fn target<'a>(stack: &'a Stack, r: &Resource, attr: &str) -> Option<&'a Resource> {
    stack.get(&r.attrs.get(attr)?.as_single_ref()?.address)
}

/// The stack resource of `kind` an attribute refers to.
pub(crate) fn referenced<'a>(stack: &'a Stack, r: &Resource, attr: &str, kind: &str) -> Option<&'a Resource> {
    target(stack, r, attr).filter(|t| t.kind.name() == kind)
}

pub(crate) fn strings(v: Option<Value>) -> Vec<String> {
    v.as_ref()
        .and_then(Value::as_list)
        .unwrap_or_default()
        .iter()
        .filter_map(|x| x.as_str().map(str::to_string))
        .collect()
}

pub(crate) fn node_groups(stack: &Stack) -> impl Iterator<Item = &Resource> {
    stack.resources.iter().filter(|r| r.kind.name() == "node_group")
}

/// Two expressions name the same object: references to one resource (whatever output, so
/// `${iam_role.node.name}` and `${iam_role.node.arn}` agree), or equal literals.
pub(crate) fn same_object(a: Option<&Expr>, b: Option<&Expr>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => match (a.as_single_ref(), b.as_single_ref()) {
            (Some(x), Some(y)) => x.address == y.address,
            (None, None) => a.as_literal().is_some() && a.as_literal() == b.as_literal(),
            _ => false,
        },
        _ => false,
    }
}

/// `(key, value, effect)` of each taint in a `[{ key, value, effect }]` attribute, as written
/// (EKS spellings of the effect): a pool's `node_taints`, a node group's `taints`.
pub(crate) fn taints(r: &Resource, attr: &str) -> Vec<(String, String, String)> {
    let list = lit(r, attr);
    list.as_ref()
        .and_then(Value::as_list)
        .unwrap_or_default()
        .iter()
        .filter_map(Value::as_table)
        .map(|t| {
            let get = |k: &str| t.get(k).map(Value::interpolate).unwrap_or_default();
            (get("key"), get("value"), get("effect"))
        })
        .collect()
}
