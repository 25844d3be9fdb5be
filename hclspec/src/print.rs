//! Printing values and configurations as HCL, for failure messages ("the smallest failing
//! config, as HCL") and for feeding generated configurations to the decoder.

use std::fmt::Write as _;

use crate::spec::SpecTree;
use crate::value::Value;

/// Prints a value as an HCL expression (`"a"`, `5`, `["x", 1]`, `{ name = "x" }`).
pub fn value_to_hcl(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// Prints the body of a `config { ... }` block that decodes, against `spec`, to `value`
/// (wire-equal: a `Literal` tuple may come back as a list).
///
/// Unset (null) attributes and absent blocks are left out; attribute names that are not HCL
/// identifiers cannot be written and are printed as a comment instead.
pub fn config_to_hcl(spec: &SpecTree, value: &Value) -> String {
    let mut out = String::new();
    write_spec(&mut out, spec, value, 0);
    out
}

/// An object key or type attribute name: bare when it is an identifier, quoted otherwise.
pub(crate) fn attribute_key(k: &str) -> String {
    // A dash is legal in an identifier, but `{a-b = 1}` reads like a subtraction: quote it.
    if is_identifier(k) && !k.contains('-') {
        k.to_string()
    } else {
        quote(k)
    }
}

/// Whether `s` can be written as a bare HCL identifier (and is not a keyword).
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !matches!(s, "true" | "false" | "null" | "for" | "in" | "if")
}

/// A quoted HCL string literal; `${` and `%{` are escaped as `$${` and `%%{`.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '$' | '%' if chars.peek() == Some(&'{') => {
                out.push(c);
                out.push(c);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_hcl_literal()),
        Value::String(s) => out.push_str(&quote(s)),
        Value::List(e) | Value::Set(e) | Value::Tuple(e) => {
            out.push('[');
            for (i, x) in e.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, x);
            }
            out.push(']');
        }
        Value::Map(m) | Value::Object(m) => {
            if m.is_empty() {
                out.push_str("{}");
                return;
            }
            out.push_str("{ ");
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&attribute_key(k));
                out.push_str(" = ");
                write_value(out, x);
            }
            out.push_str(" }");
        }
    }
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

fn write_attr(out: &mut String, name: &str, value: &Value, depth: usize) {
    indent(out, depth);
    if is_identifier(name) {
        let _ = writeln!(out, "{name} = {}", value_to_hcl(value));
    } else {
        let _ = writeln!(
            out,
            "# attribute {} = {} (not writable in HCL: the name is not an identifier)",
            quote(name),
            value_to_hcl(value)
        );
    }
}

fn write_block(
    out: &mut String,
    name: &str,
    labels: &[String],
    depth: usize,
    body: impl FnOnce(&mut String),
) {
    indent(out, depth);
    out.push_str(name);
    for l in labels {
        out.push(' ');
        out.push_str(&quote(l));
    }
    out.push_str(" {\n");
    body(out);
    indent(out, depth);
    out.push_str("}\n");
}

fn write_spec(out: &mut String, spec: &SpecTree, value: &Value, depth: usize) {
    match (spec, value) {
        (SpecTree::Object(m), Value::Object(vals)) => {
            for (k, s) in m {
                write_spec(out, s, vals.get(k).unwrap_or(&Value::Null), depth);
            }
        }
        (SpecTree::Array(specs), Value::Tuple(vals)) => {
            for (s, v) in specs.iter().zip(vals) {
                write_spec(out, s, v, depth);
            }
        }
        (SpecTree::Attr { name, .. }, v) if !v.is_null() => write_attr(out, name, v, depth),
        (
            SpecTree::Block {
                name,
                required,
                nested,
            },
            v,
        ) if !v.is_null() || *required => {
            write_block(out, name, &[], depth, |out| {
                write_spec(out, nested, v, depth + 1)
            });
        }
        (SpecTree::BlockAttrs { name, required, .. }, v) => match v {
            Value::Map(m) | Value::Object(m) => write_block(out, name, &[], depth, |out| {
                for (k, x) in m {
                    write_attr(out, k, x, depth + 1);
                }
            }),
            _ if *required => write_block(out, name, &[], depth, |_| {}),
            _ => {}
        },
        (
            SpecTree::BlockList { name, nested, .. } | SpecTree::BlockSet { name, nested, .. },
            Value::List(items) | Value::Set(items) | Value::Tuple(items),
        ) => {
            for item in items {
                write_block(out, name, &[], depth, |out| {
                    write_spec(out, nested, item, depth + 1)
                });
            }
        }
        (
            SpecTree::BlockMap {
                name,
                labels,
                nested,
            },
            v,
        ) => {
            let mut path = Vec::new();
            write_block_map(out, name, labels.len(), nested, v, &mut path, depth);
        }
        (SpecTree::Default { primary, default }, v) => {
            let from_default = absent_value(default).is_some_and(|d| d.to_json() == v.to_json())
                && absent_value(primary).is_some_and(|p| p.is_null());
            if !from_default {
                write_spec(out, primary, v, depth);
            }
        }
        _ => {}
    }
}

fn write_block_map(
    out: &mut String,
    name: &str,
    levels: usize,
    nested: &SpecTree,
    value: &Value,
    labels: &mut Vec<String>,
    depth: usize,
) {
    if labels.len() == levels {
        write_block(out, name, labels, depth, |out| {
            write_spec(out, nested, value, depth + 1)
        });
        return;
    }
    if let Value::Map(m) | Value::Object(m) = value {
        for (k, v) in m {
            labels.push(k.clone());
            write_block_map(out, name, levels, nested, v, labels, depth);
            labels.pop();
        }
    }
}

/// What a spec decodes to from an empty body, or `None` where that is an error.
pub(crate) fn absent_value(spec: &SpecTree) -> Option<Value> {
    Some(match spec {
        SpecTree::Object(m) => Value::Object(
            m.iter()
                .map(|(k, s)| absent_value(s).map(|v| (k.clone(), v)))
                .collect::<Option<_>>()?,
        ),
        SpecTree::Array(v) => Value::Tuple(v.iter().map(absent_value).collect::<Option<_>>()?),
        SpecTree::Attr { required, .. }
        | SpecTree::Block { required, .. }
        | SpecTree::BlockAttrs { required, .. } => {
            if *required {
                return None;
            }
            Value::Null
        }
        SpecTree::BlockList { min_items, .. } | SpecTree::BlockSet { min_items, .. } => {
            if *min_items > 0 {
                return None;
            }
            if matches!(spec, SpecTree::BlockSet { .. }) {
                Value::Set(Vec::new())
            } else {
                Value::List(Vec::new())
            }
        }
        SpecTree::BlockMap { .. } => Value::Map(Default::default()),
        SpecTree::Default { primary, default } => {
            let p = absent_value(primary)?;
            if p.is_null() {
                absent_value(default)?
            } else {
                p
            }
        }
        SpecTree::Literal { value, .. } => value.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_and_escapes() {
        assert_eq!(quote("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
        assert_eq!(quote("${x} %{y} $5"), "\"$${x} %%{y} $5\"");
        assert_eq!(attribute_key("name"), "name");
        assert_eq!(attribute_key("a b"), "\"a b\"");
        assert_eq!(attribute_key("true"), "\"true\"");
    }

    #[test]
    fn values_print_as_expressions() {
        let v = Value::Tuple(vec![Value::int(-5), Value::string("x"), Value::Null]);
        assert_eq!(value_to_hcl(&v), "[-5, \"x\", null]");
    }
}
