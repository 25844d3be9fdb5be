//! Builders for the HCL schemas (`hclspec.Spec`) that ConfigSchema and TaskConfigSchema
//! return. Nomad decodes the operator's HCL against them and sends the result as msgpack.
//!
//! Only what this driver needs: an Object of attributes, an Attr, and a Default whose fallback
//! is a Literal (an HCL expression string such as `"30s"` with its quotes, or `true`).

use nomad_conform_proto::nomad::hclspec::{Attr, Default, Literal, Object, Spec, spec::Block};

/// `{ name = <spec>, ... }`
pub fn object(attributes: Vec<(&str, Spec)>) -> Spec {
    Spec {
        block: Some(Block::Object(Object {
            attributes: attributes
                .into_iter()
                .map(|(name, spec)| (name.to_string(), spec))
                .collect(),
        })),
    }
}

/// An attribute of HCL type `type_expr` (`string`, `bool`, `list(string)`, ...).
pub fn attr(name: &str, type_expr: &str, required: bool) -> Spec {
    Spec {
        block: Some(Block::Attr(Attr {
            name: name.to_string(),
            r#type: type_expr.to_string(),
            required,
        })),
    }
}

/// `primary`, or the HCL expression `literal` when the operator leaves it out.
pub fn default(primary: Spec, literal: &str) -> Spec {
    Spec {
        block: Some(Block::Default(Box::new(Default {
            primary: Some(Box::new(primary)),
            default: Some(Box::new(Spec {
                block: Some(Block::Literal(Literal {
                    value: literal.to_string(),
                })),
            })),
        }))),
    }
}
