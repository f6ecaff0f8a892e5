//! The value model shared by the stack language, plans and state.
//!
//! A `Value` is a TOML/JSON-like tree with one extra case, `Unknown`: a value that
//! will only be known after apply (an output of a resource not yet created).
//! State stores values as plain JSON; `Unknown` never reaches it.

use std::collections::BTreeMap;
use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Value>),
    Table(BTreeMap<String, Value>),
    /// Known only after apply.
    Unknown,
}

/// A resource's inputs or outputs: attribute name → value.
pub type Attrs = BTreeMap<String, Value>;

impl Value {
    pub fn str(s: impl Into<String>) -> Value {
        Value::Str(s.into())
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Int(n) => Some(*n as f64),
            Value::Float(f) => Some(*f),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(l) => Some(l),
            _ => None,
        }
    }

    pub fn as_table(&self) -> Option<&BTreeMap<String, Value>> {
        match self {
            Value::Table(t) => Some(t),
            _ => None,
        }
    }

    /// True when no part of the tree is `Unknown`.
    pub fn is_known(&self) -> bool {
        match self {
            Value::Unknown => false,
            Value::List(l) => l.iter().all(Value::is_known),
            Value::Table(t) => t.values().all(Value::is_known),
            _ => true,
        }
    }

    /// A short name of the value's type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::List(_) => "a list",
            Value::Table(_) => "a table",
            Value::Unknown => "a value known after apply",
        }
    }

    /// Converts to JSON; `Unknown` becomes null (callers check `is_known` first).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Value::Bool(b) => J::Bool(*b),
            Value::Int(i) => J::from(*i),
            Value::Float(f) => serde_json::Number::from_f64(*f).map(J::Number).unwrap_or(J::Null),
            Value::Str(s) => J::String(s.clone()),
            Value::List(l) => J::Array(l.iter().map(Value::to_json).collect()),
            Value::Table(t) => J::Object(t.iter().map(|(k, v)| (k.clone(), v.to_json())).collect()),
            Value::Unknown => J::Null,
        }
    }

    pub fn from_json(j: &serde_json::Value) -> Value {
        use serde_json::Value as J;
        match j {
            J::Null => Value::Unknown,
            J::Bool(b) => Value::Bool(*b),
            J::Number(n) => match n.as_i64() {
                Some(i) => Value::Int(i),
                None => Value::Float(n.as_f64().unwrap_or(0.0)),
            },
            J::String(s) => Value::Str(s.clone()),
            J::Array(a) => Value::List(a.iter().map(Value::from_json).collect()),
            J::Object(o) => Value::Table(o.iter().map(|(k, v)| (k.clone(), Value::from_json(v))).collect()),
        }
    }

    /// The text a value has when interpolated into a string.
    pub fn interpolate(&self) -> String {
        match self {
            Value::Str(s) => s.clone(),
            other => other.to_string(),
        }
    }
}

/// Renders values the way plans show them: strings quoted, tables inline.
impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Str(s) => write!(f, "{s:?}"),
            Value::List(l) => {
                f.write_str("[")?;
                for (i, v) in l.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
            Value::Table(t) => {
                f.write_str("{")?;
                for (i, (k, v)) in t.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, " {k} = {v}")?;
                }
                f.write_str(if t.is_empty() { "}" } else { " }" })
            }
            Value::Unknown => f.write_str("(known after apply)"),
        }
    }
}

pub fn attrs_to_json(a: &Attrs) -> serde_json::Map<String, serde_json::Value> {
    a.iter().map(|(k, v)| (k.clone(), v.to_json())).collect()
}

pub fn attrs_from_json(m: &serde_json::Map<String, serde_json::Value>) -> Attrs {
    m.iter().map(|(k, v)| (k.clone(), Value::from_json(v))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_keeps_types() {
        let v = Value::Table(BTreeMap::from([
            ("a".into(), Value::Int(3)),
            ("b".into(), Value::List(vec![Value::str("x"), Value::Bool(true)])),
        ]));
        assert_eq!(Value::from_json(&v.to_json()), v);
    }

    #[test]
    fn unknown_anywhere_is_not_known() {
        assert!(!Value::List(vec![Value::Int(1), Value::Unknown]).is_known());
        assert!(Value::List(vec![Value::Int(1)]).is_known());
    }
}
