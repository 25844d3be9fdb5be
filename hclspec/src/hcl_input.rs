//! HCL native syntax input: the body of `config { ... }` in a jobspec, or of
//! `plugin "x" { config { ... } }` in an agent configuration, parsed with hcl-rs.

use hcl::eval::Context;
use hcl::{BlockLabel, Structure};

use crate::body::{Body, Content, InputBlock, unsupported_argument, unsupported_block};
use crate::error::{DecodeError, child_path, shown};
use crate::eval::eval_expression;
use crate::spec::BodySchema;
use crate::value::Value;

/// Parses HCL text into a body.
pub(crate) fn parse(text: &str) -> Result<hcl::Body, DecodeError> {
    hcl::parse(text).map_err(|e| DecodeError::Syntax {
        syntax: "HCL",
        message: crate::types::one_line(&e),
    })
}

pub(crate) fn content<'a>(
    body: &'a hcl::Body,
    schema: &BodySchema,
    path: &str,
    ctx: &Context,
    errs: &mut Vec<DecodeError>,
) -> Content<'a> {
    let mut content = Content::default();
    for structure in body.iter() {
        match structure {
            Structure::Attribute(attr) => {
                let name = attr.key.as_str();
                if !schema.attr(name) {
                    errs.push(unsupported_argument(path, name, schema));
                    continue;
                }
                let at = child_path(path, name);
                if content.attrs.contains_key(name) {
                    errs.push(DecodeError::DuplicateAttribute { path: at });
                    continue;
                }
                let value = match eval_expression(&attr.expr, ctx) {
                    Ok(v) => Some(v),
                    Err(message) => {
                        errs.push(DecodeError::Expression { path: at, message });
                        None
                    }
                };
                content.attrs.insert(name.to_string(), value);
            }
            Structure::Block(block) => {
                let name = block.identifier();
                let Some(label_names) = schema.block(name) else {
                    errs.push(unsupported_block(path, name, schema));
                    continue;
                };
                let labels: Vec<String> = block
                    .labels()
                    .iter()
                    .map(|l| match l {
                        BlockLabel::String(s) => s.clone(),
                        BlockLabel::Identifier(id) => id.as_str().to_string(),
                    })
                    .collect();
                if labels.len() != label_names.len() {
                    errs.push(DecodeError::WrongLabels {
                        path: child_path(path, name),
                        expected: label_names.len(),
                        names: label_names.join(", "),
                        found: labels.len(),
                    });
                    continue;
                }
                content.blocks.push(InputBlock {
                    type_name: name.to_string(),
                    labels,
                    body: Body::Hcl(block.body()),
                });
            }
        }
    }
    content
}

pub(crate) fn just_attributes(
    body: &hcl::Body,
    path: &str,
    ctx: &Context,
    errs: &mut Vec<DecodeError>,
) -> Vec<(String, Option<Value>)> {
    let mut out: Vec<(String, Option<Value>)> = Vec::new();
    for structure in body.iter() {
        match structure {
            Structure::Block(block) => errs.push(DecodeError::BlocksNotAllowed {
                path: shown(path),
                name: block.identifier().to_string(),
            }),
            Structure::Attribute(attr) => {
                let name = attr.key.as_str();
                let at = child_path(path, name);
                if out.iter().any(|(n, _)| n == name) {
                    errs.push(DecodeError::DuplicateAttribute { path: at });
                    continue;
                }
                let value = match eval_expression(&attr.expr, ctx) {
                    Ok(v) => Some(v),
                    Err(message) => {
                        errs.push(DecodeError::Expression { path: at, message });
                        None
                    }
                };
                out.push((name.to_string(), value));
            }
        }
    }
    out
}
