//! Builders for hclspec protobuf messages, as a driver's ConfigSchema would send them.
#![allow(dead_code)]

use nomad_conform_proto::nomad::hclspec as proto;
use proto::spec::Block as Kind;

pub fn spec(kind: Kind) -> proto::Spec {
    proto::Spec { block: Some(kind) }
}

pub fn object(attrs: Vec<(&str, proto::Spec)>) -> proto::Spec {
    spec(Kind::Object(proto::Object {
        attributes: attrs.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
    }))
}

pub fn array(values: Vec<proto::Spec>) -> proto::Spec {
    spec(Kind::Array(proto::Array { values }))
}

pub fn attr(name: &str, ty: &str, required: bool) -> proto::Spec {
    spec(Kind::Attr(proto::Attr {
        name: name.to_string(),
        r#type: ty.to_string(),
        required,
    }))
}

pub fn block(name: &str, required: bool, nested: Option<proto::Spec>) -> proto::Spec {
    spec(Kind::BlockValue(Box::new(proto::Block {
        name: name.to_string(),
        required,
        nested: nested.map(Box::new),
    })))
}

pub fn block_attrs(name: &str, ty: &str, required: bool) -> proto::Spec {
    spec(Kind::BlockAttrs(proto::BlockAttrs {
        name: name.to_string(),
        r#type: ty.to_string(),
        required,
    }))
}

pub fn block_list(name: &str, min: u64, max: u64, nested: Option<proto::Spec>) -> proto::Spec {
    spec(Kind::BlockList(Box::new(proto::BlockList {
        name: name.to_string(),
        min_items: min,
        max_items: max,
        nested: nested.map(Box::new),
    })))
}

pub fn block_set(name: &str, min: u64, max: u64, nested: Option<proto::Spec>) -> proto::Spec {
    spec(Kind::BlockSet(Box::new(proto::BlockSet {
        name: name.to_string(),
        min_items: min,
        max_items: max,
        nested: nested.map(Box::new),
    })))
}

pub fn block_map(name: &str, labels: &[&str], nested: Option<proto::Spec>) -> proto::Spec {
    spec(Kind::BlockMap(Box::new(proto::BlockMap {
        name: name.to_string(),
        labels: labels.iter().map(|l| l.to_string()).collect(),
        nested: nested.map(Box::new),
    })))
}

pub fn default(primary: Option<proto::Spec>, default: Option<proto::Spec>) -> proto::Spec {
    spec(Kind::Default(Box::new(proto::Default {
        primary: primary.map(Box::new),
        default: default.map(Box::new),
    })))
}

pub fn literal(value: &str) -> proto::Spec {
    spec(Kind::Literal(proto::Literal {
        value: value.to_string(),
    }))
}

/// A task config spec shaped like Nomad's raw_exec/exec/docker drivers'.
pub fn driver_like_spec() -> proto::Spec {
    object(vec![
        ("command", attr("command", "string", true)),
        ("args", attr("args", "list(string)", false)),
        ("image", attr("image", "string", false)),
        ("port_map", block_attrs("port_map", "number", false)),
        (
            "privileged",
            default(
                Some(attr("privileged", "bool", false)),
                Some(literal("false")),
            ),
        ),
    ])
}
