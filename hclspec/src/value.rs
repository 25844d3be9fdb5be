//! Decoded configuration values ([`Value`]), as go-cty would hold them after hcldec.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::number::{Number, WireNumber};
use crate::types::Type;

/// A configuration value after decoding against a spec (a stand-in for `cty.Value`).
///
/// Lists, sets and tuples are kept apart, and so are maps and objects, because HCL's type
/// conversion treats them differently; on the wire they all become msgpack arrays and maps.
/// A [`Value::Set`] is always canonical: no duplicates, in go-cty's element order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// An unset attribute or `null` (msgpack nil).
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An exact decimal number.
    Number(Number),
    /// A string.
    String(String),
    /// `list(T)`, or a block list.
    List(Vec<Value>),
    /// `set(T)`, or a block set (canonical order, no duplicates).
    Set(Vec<Value>),
    /// A tuple: `[...]` written in HCL and kept as written (type `any`, `Literal` values).
    Tuple(Vec<Value>),
    /// `map(T)`, a block map or `block_attrs`.
    Map(BTreeMap<String, Value>),
    /// An object: an `Object` spec, `object({...})`, or `{...}` written in HCL.
    Object(BTreeMap<String, Value>),
}

impl Value {
    /// A string value.
    pub fn string(s: impl Into<String>) -> Value {
        Value::String(s.into())
    }

    /// A number value from an `i64`.
    pub fn int(v: i64) -> Value {
        Value::Number(Number::from_i64(v))
    }

    /// Whether this is [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The type of this value, as go-cty would infer it (`null` has type `any`).
    pub fn ty(&self) -> Type {
        match self {
            Value::Null => Type::Any,
            Value::Bool(_) => Type::Bool,
            Value::Number(_) => Type::Number,
            Value::String(_) => Type::String,
            Value::List(elems) => Type::List(Box::new(element_type(elems.iter()))),
            Value::Set(elems) => Type::Set(Box::new(element_type(elems.iter()))),
            Value::Map(elems) => Type::Map(Box::new(element_type(elems.values()))),
            Value::Tuple(elems) => Type::Tuple(elems.iter().map(Value::ty).collect()),
            Value::Object(attrs) => {
                Type::Object(attrs.iter().map(|(k, v)| (k.clone(), v.ty())).collect())
            }
        }
    }

    /// What a driver sees after decoding the go-cty msgpack bytes into JSON: lists, sets and
    /// tuples as arrays, maps and objects as objects, numbers as go-cty writes them (exact
    /// int64 → integer, exact non-integer float64 → float, otherwise the decimal string;
    /// ±infinity as the strings `+Inf`/`-Inf`, since JSON has no infinity).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            Value::Null => J::Null,
            Value::Bool(b) => J::Bool(*b),
            Value::Number(n) => wire_number_json(&n.wire()),
            Value::String(s) => J::String(s.clone()),
            Value::List(e) | Value::Set(e) | Value::Tuple(e) => {
                J::Array(e.iter().map(Value::to_json).collect())
            }
            Value::Map(m) | Value::Object(m) => {
                J::Object(m.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
            }
        }
    }

    /// A short description for error messages: `string "abc"`, `number 5`, `tuple of 2`.
    pub fn describe(&self) -> String {
        match self {
            Value::Null => "null".into(),
            Value::Bool(b) => format!("bool {b}"),
            Value::Number(n) => format!("number {n}"),
            Value::String(s) => {
                let mut shown: String = s.chars().take(40).collect();
                if shown.len() < s.len() {
                    shown.push('…');
                }
                format!("string {shown:?}")
            }
            Value::List(e) => format!("list of {} element(s)", e.len()),
            Value::Set(e) => format!("set of {} element(s)", e.len()),
            Value::Tuple(e) => format!("tuple of {} element(s)", e.len()),
            Value::Map(m) => format!("map with {} key(s)", m.len()),
            Value::Object(m) => {
                let names: Vec<&str> = m.keys().map(String::as_str).collect();
                format!("object {{{}}}", names.join(", "))
            }
        }
    }
}

pub(crate) fn wire_number_json(w: &WireNumber) -> serde_json::Value {
    match w {
        WireNumber::Int(i) => serde_json::Value::from(*i),
        WireNumber::Float(f) => float_json(*f),
        WireNumber::Decimal(s) => serde_json::Value::String(s.clone()),
    }
}

/// A float as JSON; non-finite values (which JSON cannot hold) become `+Inf`, `-Inf`, `NaN`.
pub(crate) fn float_json(f: f64) -> serde_json::Value {
    match serde_json::Number::from_f64(f) {
        Some(n) => serde_json::Value::Number(n),
        None if f.is_nan() => serde_json::Value::String("NaN".into()),
        None if f > 0.0 => serde_json::Value::String("+Inf".into()),
        None => serde_json::Value::String("-Inf".into()),
    }
}

fn element_type<'a>(elems: impl Iterator<Item = &'a Value>) -> Type {
    let types: Vec<Type> = elems.map(Value::ty).collect();
    crate::convert::unify(&types).unwrap_or(Type::Any)
}

/// Puts set elements in go-cty's canonical form: duplicates removed, then ordered the way
/// `cty.Set` iterates (strings bytewise, numbers by value, false before true, nulls last,
/// compound values by their go-cty hash text).
pub(crate) fn canonical_set(elems: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(elems.len());
    for e in elems {
        if !out.contains(&e) {
            out.push(e);
        }
    }
    out.sort_by(cty_set_order);
    out
}

fn cty_set_order(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Greater,
        (_, Value::Null) => Ordering::Less,
        (Value::String(x), Value::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Value::Number(x), Value::Number(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        _ => set_hash_text(a).as_bytes().cmp(set_hash_text(b).as_bytes()),
    }
}

/// go-cty's set hash text of a value (`appendSetHashBytes`), used to order compound elements.
pub(crate) fn set_hash_text(v: &Value) -> String {
    let mut out = String::new();
    push_hash_text(v, &mut out);
    out
}

fn push_hash_text(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push('~'),
        Value::Number(n) => out.push_str(&n.to_go_g10()),
        Value::Bool(b) => out.push(if *b { 'T' } else { 'F' }),
        Value::String(s) => out.push_str(&go_quote(s)),
        Value::Map(m) => {
            out.push('{');
            for (k, e) in m {
                out.push_str(&go_quote(k));
                out.push(':');
                push_hash_text(e, out);
                out.push(';');
            }
            out.push('}');
        }
        Value::List(e) | Value::Set(e) => {
            out.push('[');
            for x in e {
                push_hash_text(x, out);
                out.push(';');
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('<');
            for x in m.values() {
                push_hash_text(x, out);
                out.push(';');
            }
            out.push('>');
        }
        Value::Tuple(e) => {
            out.push('<');
            for x in e {
                push_hash_text(x, out);
                out.push(';');
            }
            out.push('>');
        }
    }
}

/// Approximates Go's `strconv.Quote` (control characters escaped, other text kept).
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c if (c as u32) < 0x80 && c.is_control() => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(pairs: &[(&str, Value)]) -> Value {
        Value::Object(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn sets_dedupe_and_order_like_cty() {
        let s = canonical_set(vec![
            Value::string("b"),
            Value::Null,
            Value::string("a"),
            Value::string("b"),
        ]);
        assert_eq!(s, vec![Value::string("a"), Value::string("b"), Value::Null]);
        let n = canonical_set(vec![Value::int(10), Value::int(9), Value::int(-1)]);
        assert_eq!(n, vec![Value::int(-1), Value::int(9), Value::int(10)]);
        let b = canonical_set(vec![Value::Bool(true), Value::Bool(false)]);
        assert_eq!(b, vec![Value::Bool(false), Value::Bool(true)]);
    }

    #[test]
    fn compound_set_elements_order_by_hash_text() {
        // Hash texts: <"x";10;> and <"x";9;>; '1' (0x31) sorts before '9' (0x39).
        let a = obj(&[("n", Value::string("x")), ("p", Value::int(9))]);
        let b = obj(&[("n", Value::string("x")), ("p", Value::int(10))]);
        assert_eq!(set_hash_text(&a), "<\"x\";9;>");
        assert_eq!(canonical_set(vec![a.clone(), b.clone()]), vec![b, a]);
    }

    #[test]
    fn json_view_uses_wire_numbers() {
        let v = Value::Tuple(vec![
            Value::int(5),
            Value::Number(Number::parse("1.5").unwrap()),
            Value::Number(Number::parse("0.1").unwrap()),
        ]);
        assert_eq!(v.to_json(), serde_json::json!([5, 1.5, "0.1"]));
    }
}
