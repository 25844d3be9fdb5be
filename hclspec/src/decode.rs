//! Decoding configuration against a [`SpecTree`], following hcldec: required attributes and
//! blocks, type conversion, `Default`, `Literal`, block counts and labels, and no unknown
//! attributes or blocks.
//!
//! Not supported: `${...}` interpolation of variables (Nomad interpolates `${NOMAD_*}`,
//! `${attr.*}`, `${env[...]}` etc. before the driver sees the config; a harness writes the
//! final values). Function calls from Nomad's small stdlib do work.

use std::collections::BTreeMap;

use hcl::eval::Context;

use crate::body::{Body, Content, InputBlock};
use crate::convert::{convert, unify};
use crate::error::{DecodeError, DecodeErrors, child_path, shown};
use crate::spec::SpecTree;
use crate::value::{Value, canonical_set};
use crate::{eval, hcl_input, json_input};

/// Decodes HCL text (the body of a `config { ... }` block) against a spec.
pub fn decode_hcl(spec: &SpecTree, text: &str) -> Result<Value, DecodeErrors> {
    let body = hcl_input::parse(text).map_err(|e| DecodeErrors(vec![e]))?;
    decode_hcl_body(spec, &body)
}

/// Decodes an already parsed hcl-rs body against a spec.
pub fn decode_hcl_body(spec: &SpecTree, body: &hcl::Body) -> Result<Value, DecodeErrors> {
    run(spec, Body::Hcl(body))
}

/// Decodes JSON text (an object, as HCL's JSON syntax reads it) against a spec.
pub fn decode_json_str(spec: &SpecTree, text: &str) -> Result<Value, DecodeErrors> {
    let json = json_input::parse(text).map_err(|e| DecodeErrors(vec![e]))?;
    decode_json(spec, &json)
}

/// Decodes a JSON object against a spec; `{}` gives the defaults, as Nomad does for a plugin
/// without configuration.
pub fn decode_json(spec: &SpecTree, json: &serde_json::Value) -> Result<Value, DecodeErrors> {
    if !json.is_object() {
        return Err(DecodeErrors(vec![DecodeError::IncorrectJson {
            path: shown(""),
            message: "expected a JSON object holding the configuration".to_string(),
        }]));
    }
    run(spec, Body::Json(json))
}

fn run(spec: &SpecTree, body: Body<'_>) -> Result<Value, DecodeErrors> {
    let ctx = eval::context();
    let mut errs = Vec::new();
    let value = decode_body(body, spec, "", &ctx, &mut errs);
    if errs.is_empty() {
        Ok(value)
    } else {
        Err(DecodeErrors(errs))
    }
}

fn decode_body(
    body: Body<'_>,
    spec: &SpecTree,
    path: &str,
    ctx: &Context,
    errs: &mut Vec<DecodeError>,
) -> Value {
    let schema = spec.schema();
    let content = body.content(&schema, path, ctx, errs);
    decode_spec(spec, &content, path, ctx, errs)
}

fn blocks_of<'c, 'a>(content: &'c Content<'a>, name: &str) -> Vec<&'c InputBlock<'a>> {
    content
        .blocks
        .iter()
        .filter(|b| b.type_name == name)
        .collect()
}

fn decode_spec(
    spec: &SpecTree,
    content: &Content<'_>,
    path: &str,
    ctx: &Context,
    errs: &mut Vec<DecodeError>,
) -> Value {
    match spec {
        SpecTree::Object(m) => Value::Object(
            m.iter()
                .map(|(k, s)| (k.clone(), decode_spec(s, content, path, ctx, errs)))
                .collect(),
        ),
        SpecTree::Array(v) => Value::Tuple(
            v.iter()
                .map(|s| decode_spec(s, content, path, ctx, errs))
                .collect(),
        ),
        SpecTree::Attr { name, ty, .. } => match content.attrs.get(name) {
            Some(Some(v)) => convert_or_report(v, ty, &child_path(path, name), errs),
            // Absent (a missing required one was reported with the content) or unevaluable.
            _ => Value::Null,
        },
        SpecTree::Block {
            name,
            required,
            nested,
        } => {
            let at = child_path(path, name);
            match single_block(content, name, *required, &at, errs) {
                Some(block) => decode_body(block.body, nested, &at, ctx, errs),
                None => Value::Null,
            }
        }
        SpecTree::BlockAttrs {
            name,
            element_type,
            required,
        } => {
            let at = child_path(path, name);
            match single_block(content, name, *required, &at, errs) {
                Some(block) => decode_block_attrs(block, element_type, at, ctx, errs),
                None => Value::Null,
            }
        }
        SpecTree::BlockList {
            name,
            min_items,
            max_items,
            nested,
        }
        | SpecTree::BlockSet {
            name,
            min_items,
            max_items,
            nested,
        } => {
            let at = child_path(path, name);
            let elems = decode_block_sequence(
                blocks_of(content, name),
                nested,
                (*min_items, *max_items),
                &at,
                ctx,
                errs,
            );
            if matches!(spec, SpecTree::BlockSet { .. }) {
                Value::Set(canonical_set(elems))
            } else {
                Value::List(elems)
            }
        }
        SpecTree::BlockMap {
            name,
            labels: _,
            nested,
        } => {
            let at = child_path(path, name);
            if spec.implied_type().has_any() {
                errs.push(DecodeError::NomadPanics {
                    path: at,
                    reason: "the block_map's nested spec has an `any` type".to_string(),
                });
                return Value::Null;
            }
            decode_block_map(blocks_of(content, name), name, nested, &at, ctx, errs)
        }
        SpecTree::Default { primary, default } => {
            let v = decode_spec(primary, content, path, ctx, errs);
            if v.is_null() {
                decode_spec(default, content, path, ctx, errs)
            } else {
                v
            }
        }
        SpecTree::Literal { value, .. } => value.clone(),
    }
}

/// The one block called `name` (a `block` or `block_attrs` spec): missing when required and
/// duplicated are reported; with several, the first is decoded.
fn single_block<'c, 'a>(
    content: &'c Content<'a>,
    name: &str,
    required: bool,
    at: &str,
    errs: &mut Vec<DecodeError>,
) -> Option<&'c InputBlock<'a>> {
    let blocks = blocks_of(content, name);
    let Some(first) = blocks.first() else {
        if required {
            errs.push(DecodeError::MissingBlock {
                path: at.to_string(),
            });
        }
        return None;
    };
    if blocks.len() > 1 {
        errs.push(DecodeError::DuplicateBlock {
            path: at.to_string(),
            detail: format!("only one {name:?} block is allowed, found {}", blocks.len()),
        });
    }
    Some(first)
}

/// A `block_attrs` block: its attributes as a map of `element_type`.
fn decode_block_attrs(
    block: &InputBlock<'_>,
    element_type: &crate::types::Type,
    at: String,
    ctx: &Context,
    errs: &mut Vec<DecodeError>,
) -> Value {
    let mut out = BTreeMap::new();
    for (k, v) in block.body.just_attributes(&at, ctx, errs) {
        let value = match v {
            Some(v) => convert_or_report(&v, element_type, &child_path(&at, &k), errs),
            None => Value::Null,
        };
        out.insert(k, value);
    }
    // hcldec builds the map with cty.MapVal, which panics unless every value has the same
    // type; only an `any` element type lets them differ.
    if element_type.has_any() {
        let types: Vec<_> = out.values().map(Value::ty).collect();
        if types.windows(2).any(|w| w[0] != w[1]) {
            errs.push(DecodeError::NomadPanics {
                path: at,
                reason: format!(
                    "the attributes of this block_attrs block (type {element_type}) have \
                     different types"
                ),
            });
            return Value::Null;
        }
    }
    Value::Map(out)
}

/// The blocks of a `block_list` or `block_set`, each decoded, their count checked against
/// `(min_items, max_items)` (a max of 0 is no limit).
fn decode_block_sequence(
    blocks: Vec<&InputBlock<'_>>,
    nested: &SpecTree,
    (min_items, max_items): (u64, u64),
    at: &str,
    ctx: &Context,
    errs: &mut Vec<DecodeError>,
) -> Vec<Value> {
    let elems: Vec<Value> = blocks
        .iter()
        .enumerate()
        .map(|(i, b)| decode_body(b.body, nested, &format!("{at}[{i}]"), ctx, errs))
        .collect();
    let found = elems.len();
    if (found as u64) < min_items {
        errs.push(DecodeError::TooFewBlocks {
            path: at.to_string(),
            min: min_items,
            found,
        });
    } else if max_items > 0 && found as u64 > max_items {
        errs.push(DecodeError::TooManyBlocks {
            path: at.to_string(),
            max: max_items,
            found,
        });
    }
    if nested.implied_type().has_any() && elems.len() > 1 {
        unify_blocks(elems, at, errs)
    } else {
        elems
    }
}

/// The labelled blocks of a `block_map`, nested by their labels; a repeated label set is
/// reported.
fn decode_block_map(
    blocks: Vec<&InputBlock<'_>>,
    name: &str,
    nested: &SpecTree,
    at: &str,
    ctx: &Context,
    errs: &mut Vec<DecodeError>,
) -> Value {
    let mut root = BTreeMap::new();
    for block in blocks {
        let mut label_path = at.to_string();
        for l in &block.labels {
            label_path.push_str(&format!("[{l:?}]"));
        }
        let value = decode_body(block.body, nested, &label_path, ctx, errs);
        if !insert_labelled(&mut root, &block.labels, value) {
            let shown_labels: Vec<String> = block.labels.iter().map(|l| format!("{l:?}")).collect();
            errs.push(DecodeError::DuplicateBlock {
                path: label_path,
                detail: format!(
                    "a {name:?} block with labels {} was already defined; the labels must be unique",
                    shown_labels.join(" ")
                ),
            });
        }
    }
    Value::Map(root)
}

fn convert_or_report(
    v: &Value,
    ty: &crate::types::Type,
    at: &str,
    errs: &mut Vec<DecodeError>,
) -> Value {
    match convert(v, ty) {
        Ok(v) => v,
        Err(e) => {
            errs.push(DecodeError::IncorrectType {
                path: format!("{at}{}", e.at),
                expected: e.expected,
                found: e.found,
                reason: e.reason,
            });
            Value::Null
        }
    }
}

/// Blocks of one type must share a type; where `any` leaves room, convert them to a common one.
fn unify_blocks(elems: Vec<Value>, at: &str, errs: &mut Vec<DecodeError>) -> Vec<Value> {
    let types: Vec<_> = elems.iter().map(Value::ty).collect();
    let Some(common) = unify(&types) else {
        errs.push(DecodeError::InconsistentBlocks {
            path: at.to_string(),
            reason: "their values have no common type".to_string(),
        });
        return elems;
    };
    let mut out = Vec::with_capacity(elems.len());
    for (i, e) in elems.into_iter().enumerate() {
        match convert(&e, &common) {
            Ok(v) => out.push(v),
            Err(err) => {
                errs.push(DecodeError::InconsistentBlocks {
                    path: at.to_string(),
                    reason: format!(
                        "block {i}: expected {}, got {} ({})",
                        err.expected, err.found, err.reason
                    ),
                });
                out.push(e);
            }
        }
    }
    out
}

/// Puts a block's value into nested maps keyed by its labels; false if that key is taken.
fn insert_labelled(root: &mut BTreeMap<String, Value>, labels: &[String], value: Value) -> bool {
    let Some((last, outer)) = labels.split_last() else {
        return false;
    };
    let mut map = root;
    for l in outer {
        let entry = map
            .entry(l.clone())
            .or_insert_with(|| Value::Map(BTreeMap::new()));
        match entry {
            Value::Map(inner) => map = inner,
            _ => return false,
        }
    }
    if map.contains_key(last) {
        return false;
    }
    map.insert(last.clone(), value);
    true
}
