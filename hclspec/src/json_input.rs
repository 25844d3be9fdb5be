//! JSON input, read the way HCL's JSON syntax reads a body (this is also how Nomad itself
//! decodes task and plugin configuration: it JSON-encodes the stored config map and parses
//! that with `hcl/json`).
//!
//! A property is an attribute or a block depending on the spec. A block's value is an object
//! (one block), an array of objects (several blocks) or `null` (none); block labels are
//! nested object keys. Strings are templates (`$${` is a literal `${`). `"//"` keys are
//! comments.

use hcl::eval::Context;

use crate::body::{Body, Content, InputBlock, unsupported_argument};
use crate::error::{DecodeError, child_path, shown};
use crate::eval::eval_json_string;
use crate::number::Number;
use crate::spec::BodySchema;
use crate::value::Value;

/// Parses JSON text.
pub(crate) fn parse(text: &str) -> Result<serde_json::Value, DecodeError> {
    serde_json::from_str(text).map_err(|e| DecodeError::Syntax {
        syntax: "JSON",
        message: e.to_string(),
    })
}

pub(crate) fn content<'a>(
    body: &'a serde_json::Value,
    schema: &BodySchema,
    path: &str,
    ctx: &Context,
    errs: &mut Vec<DecodeError>,
) -> Content<'a> {
    let mut content = Content::default();
    for (name, value) in properties(body, path, None, errs) {
        if name == "//" {
            continue;
        }
        if schema.attr(name) {
            let at = child_path(path, name);
            if content.attrs.contains_key(name) {
                errs.push(DecodeError::DuplicateAttribute { path: at });
                continue;
            }
            let value = match json_value(value, ctx) {
                Ok(v) => Some(v),
                Err(message) => {
                    errs.push(DecodeError::Expression { path: at, message });
                    None
                }
            };
            content.attrs.insert(name.clone(), value);
        } else if let Some(labels) = schema.block(name) {
            let at = child_path(path, name);
            unpack_block(
                value,
                name,
                labels,
                &mut Vec::new(),
                &at,
                &mut content,
                errs,
            );
        } else {
            errs.push(unsupported_argument(path, name, schema));
        }
    }
    content
}

pub(crate) fn just_attributes(
    body: &serde_json::Value,
    path: &str,
    ctx: &Context,
    errs: &mut Vec<DecodeError>,
) -> Vec<(String, Option<Value>)> {
    let Some(obj) = body.as_object() else {
        errs.push(DecodeError::IncorrectJson {
            path: shown(path),
            message: format!(
                "expected a JSON object setting the arguments for this block, found {}",
                kind(body)
            ),
        });
        return Vec::new();
    };
    obj.iter()
        .filter(|(k, _)| k.as_str() != "//")
        .map(|(k, v)| {
            let value = match json_value(v, ctx) {
                Ok(v) => Some(v),
                Err(message) => {
                    errs.push(DecodeError::Expression {
                        path: child_path(path, k),
                        message,
                    });
                    None
                }
            };
            (k.clone(), value)
        })
        .collect()
}

/// The properties of a body: an object's, or those of every object in an array; null has none.
fn properties<'a>(
    v: &'a serde_json::Value,
    path: &str,
    label: Option<&str>,
    errs: &mut Vec<DecodeError>,
) -> Vec<(&'a String, &'a serde_json::Value)> {
    let purpose = match label {
        Some(l) => format!("to give the {l:?} labels of this block"),
        None => "to define arguments and child blocks".to_string(),
    };
    match v {
        serde_json::Value::Null => Vec::new(),
        serde_json::Value::Object(o) => o.iter().collect(),
        serde_json::Value::Array(items) => {
            let mut out = Vec::new();
            for item in items {
                match item {
                    serde_json::Value::Object(o) => out.extend(o.iter()),
                    other => errs.push(DecodeError::IncorrectJson {
                        path: shown(path),
                        message: format!("expected a JSON object {purpose}, found {}", kind(other)),
                    }),
                }
            }
            out
        }
        other => {
            errs.push(DecodeError::IncorrectJson {
                path: shown(path),
                message: format!(
                    "expected a JSON object or an array of objects {purpose}, found {}",
                    kind(other)
                ),
            });
            Vec::new()
        }
    }
}

fn unpack_block<'a>(
    v: &'a serde_json::Value,
    type_name: &str,
    labels_left: &[String],
    labels_used: &mut Vec<String>,
    path: &str,
    content: &mut Content<'a>,
    errs: &mut Vec<DecodeError>,
) {
    if let Some((label, rest)) = labels_left.split_first() {
        let props = properties(v, path, Some(label), errs);
        if props.is_empty() {
            errs.push(DecodeError::IncorrectJson {
                path: path.to_string(),
                message: format!(
                    "missing block label: expected at least one property, whose name gives \
                     the {type_name:?} block's {label:?} label, found {}",
                    kind(v)
                ),
            });
        }
        for (key, inner) in props {
            labels_used.push(key.clone());
            let at = format!("{path}[{key:?}]");
            unpack_block(inner, type_name, rest, labels_used, &at, content, errs);
            labels_used.pop();
        }
        return;
    }
    let mut push = |body: &'a serde_json::Value| {
        content.blocks.push(InputBlock {
            type_name: type_name.to_string(),
            labels: labels_used.clone(),
            body: Body::Json(body),
        });
    };
    match v {
        serde_json::Value::Null => {}
        serde_json::Value::Object(_) => push(v),
        serde_json::Value::Array(items) => items.iter().for_each(push),
        other => errs.push(DecodeError::IncorrectJson {
            path: path.to_string(),
            message: format!(
                "expected a JSON object or an array of objects, representing one or more \
                 {type_name:?} blocks, found {}",
                kind(other)
            ),
        }),
    }
}

/// An attribute value written in JSON: strings are templates, arrays are tuples, objects are
/// objects.
fn json_value(v: &serde_json::Value, ctx: &Context) -> Result<Value, String> {
    Ok(match v {
        serde_json::Value::String(s) => eval_json_string(s, ctx)?,
        serde_json::Value::Array(items) => Value::Tuple(
            items
                .iter()
                .map(|i| json_value(i, ctx))
                .collect::<Result<_, _>>()?,
        ),
        serde_json::Value::Object(o) => {
            let mut out = std::collections::BTreeMap::new();
            for (k, item) in o {
                let key = match eval_json_string(k, ctx)? {
                    Value::String(s) => s,
                    other => {
                        return Err(format!(
                            "object key must be a string, got {}",
                            other.describe()
                        ));
                    }
                };
                out.insert(key, json_value(item, ctx)?);
            }
            Value::Object(out)
        }
        other => plain_json_value(other),
    })
}

/// A JSON value taken literally (no templates): arrays become tuples, objects objects.
pub(crate) fn plain_json_value(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => Value::Number(json_number(n)),
        serde_json::Value::String(s) => Value::String(s.clone()),
        serde_json::Value::Array(a) => Value::Tuple(a.iter().map(plain_json_value).collect()),
        serde_json::Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| (k.clone(), plain_json_value(v)))
                .collect(),
        ),
    }
}

fn json_number(n: &serde_json::Number) -> Number {
    if let Some(i) = n.as_i64() {
        Number::from_i64(i)
    } else if let Some(u) = n.as_u64() {
        Number::from_u64(u)
    } else {
        n.as_f64()
            .and_then(Number::from_f64)
            .unwrap_or_else(Number::zero)
    }
}

fn kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a bool",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}
