//! Type conversion of attribute values, following go-cty's `convert.Convert` (the "unsafe"
//! mode hcldec uses): number↔string, bool↔string (`"true"`, `"1"`, `"false"`, `"0"`),
//! tuple→list/set, object→map/object; element types of `list(any)`, `map(any)`, `set(any)`
//! are unified (number and bool join as string).

use std::collections::BTreeMap;

use crate::number::Number;
use crate::types::Type;
use crate::value::{Value, canonical_set};

/// Why a value does not convert to a type.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ConvertError {
    /// Where inside the value, relative to it: `""`, `[1]`, `.name`, `["key"]`.
    pub at: String,
    /// The type that was wanted there.
    pub expected: String,
    /// What was found there.
    pub found: String,
    /// go-cty's reason (`a number is required`, `attribute "x" is required`).
    pub reason: String,
}

/// Converts `value` to `ty` as go-cty's `convert.Convert` would.
pub(crate) fn convert(value: &Value, ty: &Type) -> Result<Value, ConvertError> {
    let mut at = String::new();
    conv(value, ty, &mut at)
}

fn fail(at: &str, ty: &Type, v: &Value, reason: impl Into<String>) -> ConvertError {
    ConvertError {
        at: at.to_string(),
        expected: ty.to_string(),
        found: v.describe(),
        reason: reason.into(),
    }
}

fn conv(v: &Value, ty: &Type, at: &mut String) -> Result<Value, ConvertError> {
    match (ty, v) {
        (_, Value::Null) => Ok(Value::Null),
        (Type::Any, _) => Ok(v.clone()),
        (Type::String, Value::String(_)) => Ok(v.clone()),
        (Type::String, Value::Number(n)) => Ok(Value::String(n.to_decimal_text())),
        (Type::String, Value::Bool(b)) => Ok(Value::String(b.to_string())),
        (Type::Number, Value::Number(_)) => Ok(v.clone()),
        (Type::Number, Value::String(s)) => Number::parse(s)
            .map(Value::Number)
            .map_err(|_| fail(at, ty, v, "a number is required")),
        (Type::Bool, Value::Bool(_)) => Ok(v.clone()),
        (Type::Bool, Value::String(s)) => match s.as_str() {
            "true" | "1" => Ok(Value::Bool(true)),
            "false" | "0" => Ok(Value::Bool(false)),
            other => {
                let lower = other.to_lowercase();
                let reason = if lower == "true" || lower == "false" {
                    format!("a bool is required; to convert from string, use lowercase \"{lower}\"")
                } else {
                    "a bool is required".to_string()
                };
                Err(fail(at, ty, v, reason))
            }
        },
        (Type::List(et), Value::List(e) | Value::Set(e) | Value::Tuple(e)) => {
            Ok(Value::List(convert_elements(e, et, ty, v, at)?))
        }
        (Type::Set(et), Value::List(e) | Value::Set(e) | Value::Tuple(e)) => Ok(Value::Set(
            canonical_set(convert_elements(e, et, ty, v, at)?),
        )),
        (Type::Map(et), Value::Map(m) | Value::Object(m)) => {
            let keys: Vec<&String> = m.keys().collect();
            let elems: Vec<Value> = m.values().cloned().collect();
            let mut converted = Vec::with_capacity(elems.len());
            for (k, e) in keys.iter().zip(&elems) {
                let len = at.len();
                at.push_str(&format!("[{k:?}]"));
                converted.push(conv(e, et, at)?);
                at.truncate(len);
            }
            let converted = unify_elements(converted, et, ty, v, at)?;
            Ok(Value::Map(
                keys.into_iter().cloned().zip(converted).collect(),
            ))
        }
        (Type::Tuple(ets), Value::Tuple(e)) => {
            if ets.len() != e.len() {
                return Err(fail(
                    at,
                    ty,
                    v,
                    format!("a tuple of {} element(s) is required", ets.len()),
                ));
            }
            let mut out = Vec::with_capacity(e.len());
            for (i, (x, t)) in e.iter().zip(ets).enumerate() {
                let len = at.len();
                at.push_str(&format!("[{i}]"));
                out.push(conv(x, t, at)?);
                at.truncate(len);
            }
            Ok(Value::Tuple(out))
        }
        (Type::Object(ats), Value::Object(m) | Value::Map(m)) => {
            let mut out = BTreeMap::new();
            for (name, t) in ats {
                let Some(x) = m.get(name) else {
                    return Err(fail(at, ty, v, format!("attribute {name:?} is required")));
                };
                let len = at.len();
                at.push('.');
                at.push_str(name);
                out.insert(name.clone(), conv(x, t, at)?);
                at.truncate(len);
            }
            // Attributes the type does not name are dropped, as go-cty does.
            Ok(Value::Object(out))
        }
        _ => Err(fail(at, ty, v, format!("{} required", friendly(ty)))),
    }
}

fn convert_elements(
    elems: &[Value],
    et: &Type,
    ty: &Type,
    whole: &Value,
    at: &mut String,
) -> Result<Vec<Value>, ConvertError> {
    let mut out = Vec::with_capacity(elems.len());
    for (i, e) in elems.iter().enumerate() {
        let len = at.len();
        at.push_str(&format!("[{i}]"));
        out.push(conv(e, et, at)?);
        at.truncate(len);
    }
    unify_elements(out, et, ty, whole, at)
}

/// Collections hold one element type: where the wanted element type leaves room (`any`),
/// find a common type and convert every element to it, as go-cty's unification does.
fn unify_elements(
    elems: Vec<Value>,
    et: &Type,
    ty: &Type,
    whole: &Value,
    at: &mut String,
) -> Result<Vec<Value>, ConvertError> {
    if !et.has_any() || elems.len() < 2 {
        return Ok(elems);
    }
    let types: Vec<Type> = elems.iter().map(Value::ty).collect();
    let Some(common) = unify(&types) else {
        return Err(fail(
            at,
            ty,
            whole,
            "all elements must have the same type (they do not unify)",
        ));
    };
    elems.iter().map(|e| conv(e, &common, at)).collect()
}

/// A type every given type converts to, as go-cty's `UnifyUnsafe` finds it (simplified:
/// `null`'s type `any` is ignored; mixed primitives join as string only if a string is among
/// them).
pub(crate) fn unify(types: &[Type]) -> Option<Type> {
    let concrete: Vec<&Type> = types.iter().filter(|t| **t != Type::Any).collect();
    let Some(first) = concrete.first() else {
        return Some(Type::Any);
    };
    if concrete.iter().all(|t| t == first) {
        return Some((*first).clone());
    }
    let all = |f: fn(&Type) -> bool| concrete.iter().all(|t| f(t));
    let any = |f: fn(&Type) -> bool| concrete.iter().any(|t| f(t));
    if all(Type::is_primitive) {
        return any(|t| *t == Type::String).then_some(Type::String);
    }
    let elems_of = |t: &Type| -> Vec<Type> {
        match t {
            Type::List(e) | Type::Set(e) | Type::Map(e) => vec![(**e).clone()],
            Type::Tuple(e) => e.clone(),
            Type::Object(m) => m.values().cloned().collect(),
            _ => Vec::new(),
        }
    };
    let joined = |ts: &[&Type]| -> Option<Type> {
        let inner: Vec<Type> = ts.iter().flat_map(|t| elems_of(t)).collect();
        unify(&inner)
    };
    let is_map = |t: &Type| matches!(t, Type::Map(_));
    let is_obj = |t: &Type| matches!(t, Type::Object(_));
    let is_list = |t: &Type| matches!(t, Type::List(_));
    let is_tuple = |t: &Type| matches!(t, Type::Tuple(_));
    let is_set = |t: &Type| matches!(t, Type::Set(_));
    if any(is_map) && all(|t| matches!(t, Type::Map(_) | Type::Object(_))) {
        return joined(&concrete).map(|e| Type::Map(Box::new(e)));
    }
    if any(is_list) && all(|t| matches!(t, Type::List(_) | Type::Tuple(_))) {
        return joined(&concrete).map(|e| Type::List(Box::new(e)));
    }
    if all(is_set) {
        return joined(&concrete).map(|e| Type::Set(Box::new(e)));
    }
    if all(is_obj) {
        let names = |t: &Type| match t {
            Type::Object(m) => m.keys().cloned().collect::<Vec<_>>(),
            _ => Vec::new(),
        };
        let first_names = names(first);
        if concrete.iter().all(|t| names(t) == first_names) {
            let mut out = BTreeMap::new();
            for name in first_names {
                let across: Vec<Type> = concrete
                    .iter()
                    .filter_map(|t| match t {
                        Type::Object(m) => m.get(&name).cloned(),
                        _ => None,
                    })
                    .collect();
                out.insert(name, unify(&across)?);
            }
            return Some(Type::Object(out));
        }
        return joined(&concrete).map(|e| Type::Map(Box::new(e)));
    }
    if all(is_tuple) {
        let lens: Vec<usize> = concrete.iter().map(|t| elems_of(t).len()).collect();
        if lens.iter().all(|l| *l == lens[0]) {
            let mut out = Vec::with_capacity(lens[0]);
            for i in 0..lens[0] {
                let across: Vec<Type> = concrete.iter().map(|t| elems_of(t)[i].clone()).collect();
                out.push(unify(&across)?);
            }
            return Some(Type::Tuple(out));
        }
        return joined(&concrete).map(|e| Type::List(Box::new(e)));
    }
    None
}

fn friendly(ty: &Type) -> String {
    match ty {
        Type::String | Type::Number | Type::Bool => ty.to_string(),
        Type::List(e) => format!("list of {}", friendly(e)),
        Type::Set(e) => format!("set of {}", friendly(e)),
        Type::Map(e) => format!("map of {}", friendly(e)),
        Type::Object(_) => "object".into(),
        Type::Tuple(_) => "tuple".into(),
        Type::Any => "any".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> Value {
        Value::string(x)
    }

    fn t(src: &str) -> Type {
        Type::parse(src).unwrap()
    }

    #[test]
    fn primitive_conversions() {
        assert_eq!(convert(&s("5"), &Type::Number), Ok(Value::int(5)));
        assert_eq!(convert(&Value::int(5), &Type::String), Ok(s("5")));
        assert_eq!(convert(&Value::Bool(true), &Type::String), Ok(s("true")));
        assert_eq!(convert(&s("1"), &Type::Bool), Ok(Value::Bool(true)));
        assert_eq!(convert(&s("0"), &Type::Bool), Ok(Value::Bool(false)));
        let err = convert(&s("True"), &Type::Bool).unwrap_err();
        assert!(err.reason.contains("use lowercase \"true\""), "{err:?}");
        let err = convert(&s("five"), &Type::Number).unwrap_err();
        assert_eq!(err.reason, "a number is required");
        let err = convert(&Value::Bool(true), &Type::Number).unwrap_err();
        assert_eq!(err.reason, "number required");
        assert_eq!(err.found, "bool true");
    }

    #[test]
    fn collections_convert_elementwise() {
        let tuple = Value::Tuple(vec![Value::int(1), s("2")]);
        assert_eq!(
            convert(&tuple, &t("list(number)")),
            Ok(Value::List(vec![Value::int(1), Value::int(2)]))
        );
        // list(any) unifies number and string as string.
        assert_eq!(
            convert(&tuple, &t("list(any)")),
            Ok(Value::List(vec![s("1"), s("2")]))
        );
        let bad = Value::Tuple(vec![Value::int(1), Value::Bool(true)]);
        assert!(convert(&bad, &t("list(any)")).is_err());
        let err = convert(&Value::Tuple(vec![s("x")]), &t("list(number)")).unwrap_err();
        assert_eq!(err.at, "[0]");
    }

    #[test]
    fn objects_need_every_attribute_and_drop_extras() {
        let v = Value::Object(BTreeMap::from([
            ("a".to_string(), Value::int(1)),
            ("z".to_string(), Value::int(2)),
        ]));
        assert_eq!(
            convert(&v, &t("object({a = string})")),
            Ok(Value::Object(BTreeMap::from([("a".to_string(), s("1"))])))
        );
        let err = convert(&v, &t("object({b = string})")).unwrap_err();
        assert_eq!(err.reason, "attribute \"b\" is required");
        assert_eq!(
            convert(&v, &t("map(string)")),
            Ok(Value::Map(BTreeMap::from([
                ("a".to_string(), s("1")),
                ("z".to_string(), s("2")),
            ])))
        );
    }

    #[test]
    fn unify_rules() {
        assert_eq!(unify(&[Type::Number, Type::String]), Some(Type::String));
        assert_eq!(unify(&[Type::Number, Type::Bool]), None);
        assert_eq!(unify(&[Type::Any, Type::Bool]), Some(Type::Bool));
        assert_eq!(
            unify(&[t("tuple([string])"), t("tuple([string, string])")]),
            Some(t("list(string)"))
        );
        assert_eq!(
            unify(&[t("object({a = number})"), t("object({b = number})")]),
            Some(t("map(number)"))
        );
    }
}
