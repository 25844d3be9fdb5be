//! HCL type constraints (`Attr.type`, `BlockAttrs.type`): the [`Type`] enum and the parser of
//! type expressions such as `list(object({name = string, port = number}))`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use hcl::{Expression, ObjectKey};

/// A type constraint, as go-cty models it (`any` is `cty.DynamicPseudoType`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Type {
    /// `string`
    String,
    /// `number`
    Number,
    /// `bool`
    Bool,
    /// `list(T)`
    List(Box<Type>),
    /// `set(T)`
    Set(Box<Type>),
    /// `map(T)`
    Map(Box<Type>),
    /// `object({name = T, ...})`
    Object(BTreeMap<String, Type>),
    /// `tuple([T, ...])`
    Tuple(Vec<Type>),
    /// `any`: whatever type the value has.
    Any,
}

impl Type {
    /// Parses an HCL type expression the way Nomad's `hclspecutils` evaluates `Attr.type`.
    ///
    /// Nomad quirk kept: the expression `null` means `any`.
    pub fn parse(src: &str) -> Result<Type, String> {
        // hclsyntax skips surrounding whitespace; hcl-rs does not.
        let expr = Expression::from_str(src.trim())
            .map_err(|e| format!("{src:?} is not an HCL expression: {}", one_line(&e)))?;
        type_from_expr(&expr)
    }

    /// Whether `any` occurs anywhere in this type.
    pub fn has_any(&self) -> bool {
        match self {
            Type::Any => true,
            Type::String | Type::Number | Type::Bool => false,
            Type::List(t) | Type::Set(t) | Type::Map(t) => t.has_any(),
            Type::Object(attrs) => attrs.values().any(Type::has_any),
            Type::Tuple(elems) => elems.iter().any(Type::has_any),
        }
    }

    /// Whether this is `string`, `number` or `bool`.
    pub fn is_primitive(&self) -> bool {
        matches!(self, Type::String | Type::Number | Type::Bool)
    }
}

impl FromStr for Type {
    type Err = String;

    fn from_str(s: &str) -> Result<Type, String> {
        Type::parse(s)
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::String => f.write_str("string"),
            Type::Number => f.write_str("number"),
            Type::Bool => f.write_str("bool"),
            Type::Any => f.write_str("any"),
            Type::List(t) => write!(f, "list({t})"),
            Type::Set(t) => write!(f, "set({t})"),
            Type::Map(t) => write!(f, "map({t})"),
            Type::Object(attrs) => {
                f.write_str("object({")?;
                for (i, (k, t)) in attrs.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{} = {t}", crate::print::attribute_key(k))?;
                }
                f.write_str("})")
            }
            Type::Tuple(elems) => {
                f.write_str("tuple([")?;
                for (i, t) in elems.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{t}")?;
                }
                f.write_str("])")
            }
        }
    }
}

fn type_from_expr(expr: &Expression) -> Result<Type, String> {
    match expr {
        Expression::Variable(v) => match v.as_str() {
            "string" => Ok(Type::String),
            "number" => Ok(Type::Number),
            "bool" => Ok(Type::Bool),
            "any" => Ok(Type::Any),
            other => Err(format!(
                "no type named {other:?} (expected string, number, bool, any, list(T), set(T), \
                 map(T), object({{...}}) or tuple([...]))"
            )),
        },
        Expression::Null => Ok(Type::Any),
        Expression::Parenthesis(inner) => type_from_expr(inner),
        Expression::FuncCall(call) => {
            let name = call.name.name.as_str();
            if !call.name.namespace.is_empty() || call.expand_final {
                return Err(format!("{name}(...) is not a type constructor here"));
            }
            let [arg] = call.args.as_slice() else {
                return Err(format!(
                    "{name}(...) takes exactly one argument, got {}",
                    call.args.len()
                ));
            };
            match name {
                "list" => Ok(Type::List(Box::new(type_from_expr(arg)?))),
                "set" => Ok(Type::Set(Box::new(type_from_expr(arg)?))),
                "map" => Ok(Type::Map(Box::new(type_from_expr(arg)?))),
                "tuple" => match arg {
                    Expression::Array(elems) => Ok(Type::Tuple(
                        elems.iter().map(type_from_expr).collect::<Result<_, _>>()?,
                    )),
                    _ => Err(
                        "tuple(...) needs a list of types, as in tuple([string, number])".into(),
                    ),
                },
                "object" => match arg {
                    Expression::Object(attrs) => {
                        let mut out = BTreeMap::new();
                        for (key, value) in attrs.iter() {
                            let key = match key {
                                ObjectKey::Identifier(id) => id.as_str().to_string(),
                                ObjectKey::Expression(Expression::String(s)) => s.clone(),
                                _ => {
                                    return Err(
                                        "object(...) attribute names must be names or quoted strings"
                                            .into(),
                                    );
                                }
                            };
                            out.insert(key, type_from_expr(value)?);
                        }
                        Ok(Type::Object(out))
                    }
                    _ => Err(
                        "object(...) needs a map of types, as in object({name = string})".into(),
                    ),
                },
                other => Err(format!(
                    "no type constructor named {other:?} (expected list, set, map, object or tuple)"
                )),
            }
        }
        other => Err(format!("a type is required, not {}", expr_kind(other))),
    }
}

fn expr_kind(expr: &Expression) -> &'static str {
    match expr {
        Expression::Null => "null",
        Expression::Bool(_) => "a bool",
        Expression::Number(_) => "a number",
        Expression::String(_) | Expression::TemplateExpr(_) => "a string",
        Expression::Array(_) => "a tuple",
        Expression::Object(_) => "an object",
        _ => "an expression",
    }
}

/// Squashes a multi-line parser message onto one line.
pub(crate) fn one_line(err: &dyn fmt::Display) -> String {
    err.to_string()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && *l != "|")
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_type_expressions() {
        assert_eq!(Type::parse("string"), Ok(Type::String));
        assert_eq!(Type::parse(" number "), Ok(Type::Number));
        assert_eq!(Type::parse("null"), Ok(Type::Any));
        assert_eq!(
            Type::parse("list(map(bool))"),
            Ok(Type::List(Box::new(Type::Map(Box::new(Type::Bool)))))
        );
        assert_eq!(
            Type::parse("object({a = string, \"b-c\" = set(number)})"),
            Ok(Type::Object(BTreeMap::from([
                ("a".to_string(), Type::String),
                ("b-c".to_string(), Type::Set(Box::new(Type::Number))),
            ])))
        );
        assert_eq!(
            Type::parse("tuple([string, any])"),
            Ok(Type::Tuple(vec![Type::String, Type::Any]))
        );
        assert_eq!(Type::parse("object({})"), Ok(Type::Object(BTreeMap::new())));
    }

    #[test]
    fn rejects_what_nomad_rejects() {
        for bad in [
            "",
            "strin",
            "\"string\"",
            "list",
            "list()",
            "list(string, number)",
            "object({a = 1})",
            "tuple(string)",
            "frob(string)",
            "5",
        ] {
            assert!(Type::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn display_round_trips() {
        for src in [
            "string",
            "list(set(number))",
            "object({a = bool, \"b-c\" = map(any)})",
            "tuple([string, number])",
        ] {
            let t = Type::parse(src).unwrap();
            assert_eq!(t.to_string(), src);
            assert_eq!(Type::parse(&t.to_string()), Ok(t));
        }
    }
}
