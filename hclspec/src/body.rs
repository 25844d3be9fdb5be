//! Input bodies (HCL native syntax or HCL's JSON syntax) and the content a schema picks out
//! of them (`hcl.Body.Content`, `JustAttributes`).

use std::collections::BTreeMap;

use hcl::eval::Context;

use crate::error::{DecodeError, child_path, shown};
use crate::spec::BodySchema;
use crate::value::Value;
use crate::{hcl_input, json_input};

/// A configuration body in either syntax.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Body<'a> {
    /// HCL native syntax, parsed by hcl-rs.
    Hcl(&'a hcl::Body),
    /// HCL's JSON syntax.
    Json(&'a serde_json::Value),
}

/// What a schema picked out of a body.
#[derive(Debug, Default)]
pub(crate) struct Content<'a> {
    /// Attribute values by name; `None` when the value did not evaluate (already reported).
    pub attrs: BTreeMap<String, Option<Value>>,
    /// Blocks of the schema's types, in source order.
    pub blocks: Vec<InputBlock<'a>>,
}

/// One block found in a body.
#[derive(Debug)]
pub(crate) struct InputBlock<'a> {
    /// Block type.
    pub type_name: String,
    /// Labels, outermost first.
    pub labels: Vec<String>,
    /// The block's body.
    pub body: Body<'a>,
}

impl<'a> Body<'a> {
    /// Attributes and blocks named by `schema`; anything else is an error, as hcldec's
    /// `Content` reports it, and so are missing required attributes.
    pub(crate) fn content(
        &self,
        schema: &BodySchema,
        path: &str,
        ctx: &Context,
        errs: &mut Vec<DecodeError>,
    ) -> Content<'a> {
        let content = match self {
            Body::Hcl(b) => hcl_input::content(b, schema, path, ctx, errs),
            Body::Json(v) => json_input::content(v, schema, path, ctx, errs),
        };
        let mut reported = Vec::new();
        for (name, required) in &schema.attrs {
            if *required && !content.attrs.contains_key(name) && !reported.contains(&name) {
                reported.push(name);
                errs.push(DecodeError::MissingAttribute {
                    path: child_path(path, name),
                });
            }
        }
        content
    }

    /// Every attribute of the body (a `block_attrs` block), in source order.
    pub(crate) fn just_attributes(
        &self,
        path: &str,
        ctx: &Context,
        errs: &mut Vec<DecodeError>,
    ) -> Vec<(String, Option<Value>)> {
        match self {
            Body::Hcl(b) => hcl_input::just_attributes(b, path, ctx, errs),
            Body::Json(v) => json_input::just_attributes(v, path, ctx, errs),
        }
    }
}

/// The error for a name the schema has no attribute for.
pub(crate) fn unsupported_argument(path: &str, name: &str, schema: &BodySchema) -> DecodeError {
    let hint = if schema.block(name).is_some() {
        format!(" (did you mean to define a block of type {name:?}?)")
    } else {
        suggestion(name, schema)
    };
    DecodeError::UnsupportedArgument {
        path: shown(path),
        name: name.to_string(),
        hint,
    }
}

/// The error for a block type the schema does not have.
pub(crate) fn unsupported_block(path: &str, name: &str, schema: &BodySchema) -> DecodeError {
    let hint = if schema.attr(name) {
        format!(" (did you mean to set the argument {name:?}? If so, use `{name} = ...`)")
    } else {
        suggestion(name, schema)
    };
    DecodeError::UnsupportedBlock {
        path: shown(path),
        name: name.to_string(),
        hint,
    }
}

/// " (did you mean \"x\"?)" when a schema name is within edit distance 2, as hcl suggests.
fn suggestion(name: &str, schema: &BodySchema) -> String {
    let names = schema
        .attrs
        .iter()
        .map(|(n, _)| n)
        .chain(schema.blocks.iter().map(|(n, _)| n));
    names
        .filter(|n| edit_distance(n, name) < 3)
        .min_by_key(|n| edit_distance(n, name))
        .map(|n| format!(" (did you mean {n:?}?)"))
        .unwrap_or_default()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}
