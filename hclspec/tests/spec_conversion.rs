//! What Nomad's `hclspecutils.Convert` accepts and rejects (helper/pluginutils/hclspecutils/dec.go).

mod common;

use std::collections::BTreeMap;

use common::*;
use nomad_conform_hclspec::{SpecError, SpecTree, Type, Value};
use nomad_conform_proto::nomad::hclspec as proto;

fn errors(spec: &proto::Spec) -> Vec<SpecError> {
    match SpecTree::from_proto(spec) {
        Ok(tree) => panic!("spec converted, expected an error: {tree:?}"),
        Err(e) => e.0,
    }
}

fn message(spec: &proto::Spec) -> String {
    SpecTree::from_proto(spec)
        .expect_err("spec must not convert")
        .to_string()
}

#[test]
fn rejections_table() {
    // (case, spec, substring of the message)
    let cases: Vec<(&str, proto::Spec, &str)> = vec![
        (
            "unknown type names the attribute",
            object(vec![("image", attr("", "strin", false))]),
            "attribute \"image\": unknown type expression \"strin\": no type named \"strin\"",
        ),
        (
            "empty type",
            object(vec![("a", attr("", "", false))]),
            "unknown type expression \"\"",
        ),
        (
            "quoted type",
            object(vec![("a", attr("", "\"string\"", false))]),
            "a type is required, not a string",
        ),
        (
            "bad nested type",
            object(vec![("a", attr("", "list(strng)", false))]),
            "no type named \"strng\"",
        ),
        (
            "attr without a name in an array",
            array(vec![attr("", "string", false)]),
            "element 0 (attribute): attribute spec has no name (Nomad: \"Missing name in attribute spec\")",
        ),
        (
            "attr without a name at the root",
            attr("", "string", false),
            "root spec: attribute spec has no name",
        ),
        (
            "attr inside default has no implied name",
            object(vec![(
                "foo",
                default(Some(attr("", "string", false)), Some(literal("\"x\""))),
            )]),
            "default \"foo\": primary attribute: attribute spec has no name",
        ),
        (
            "block without nested spec",
            object(vec![("b", block("b", false, None))]),
            "block \"b\": block spec has no nested spec (Nomad: \"Missing spec block\")",
        ),
        (
            "block_list without nested spec",
            object(vec![("l", block_list("l", 0, 0, None))]),
            "block_list spec has no nested spec",
        ),
        (
            "block_list without name",
            array(vec![block_list("", 0, 0, Some(attr("x", "string", false)))]),
            "block_list spec has no name (Nomad: \"Missing name in block_list spec\")",
        ),
        (
            "block_set without name",
            array(vec![block_set("", 0, 0, Some(attr("x", "string", false)))]),
            "Missing name in block_set spec",
        ),
        (
            "block_map without name",
            array(vec![block_map(
                "",
                &["k"],
                Some(attr("x", "string", false)),
            )]),
            "Missing name in block_map spec",
        ),
        (
            "block_map without labels",
            object(vec![(
                "m",
                block_map("m", &[], Some(attr("x", "string", false))),
            )]),
            "block_map \"m\": block_map spec has no labels (Nomad: \"Invalid block label name list\")",
        ),
        (
            "block_attrs without name",
            array(vec![block_attrs("", "string", false)]),
            "Missing name in block_attrs spec",
        ),
        (
            "block_attrs with a bad type",
            object(vec![("p", block_attrs("p", "nmber", false))]),
            "block_attrs \"p\": unknown type expression \"nmber\"",
        ),
        (
            "default without primary",
            object(vec![("d", default(None, Some(literal("1"))))]),
            "default \"d\": default spec has no primary spec (Nomad's Convert panics on this)",
        ),
        (
            "default without default",
            object(vec![("d", default(Some(attr("d", "number", false)), None))]),
            "default spec has no default spec",
        ),
        (
            "literal that is not an expression",
            object(vec![("l", literal("\"unterminated"))]),
            "literal \"l\": literal \"\\\"unterminated\" does not evaluate",
        ),
        (
            "literal with a variable",
            object(vec![("l", literal("var.x"))]),
            "does not evaluate",
        ),
        (
            "spec with no kind",
            object(vec![("x", proto::Spec { block: None })]),
            "spec \"x\": the spec has none of its kinds set (Nomad: \"Invalid spec block\")",
        ),
        (
            "nested error inside a block list",
            object(vec![(
                "mount",
                block_list(
                    "mount",
                    0,
                    0,
                    Some(object(vec![("target", attr("", "strin", true))])),
                ),
            )]),
            "block_list \"mount\": nested object: attribute \"target\": unknown type expression",
        ),
    ];
    for (case, spec, want) in cases {
        let msg = message(&spec);
        assert!(msg.contains(want), "{case}: message {msg:?} lacks {want:?}");
    }
}

#[test]
fn every_problem_is_reported() {
    let spec = object(vec![
        ("a", attr("", "nope", false)),
        ("b", block("b", false, None)),
    ]);
    let errs = errors(&spec);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert!(matches!(errs[0], SpecError::BadType { .. }));
    assert!(matches!(
        errs[1],
        SpecError::MissingNested { kind: "block", .. }
    ));
    assert_eq!(
        SpecTree::from_optional(None).unwrap_err().0,
        vec![SpecError::NilSpec]
    );
}

#[test]
fn accepted_specs_convert_like_nomad() {
    let spec = object(vec![
        ("foo", attr("", "string", false)),
        ("bar", attr("", "number", true)),
        ("renamed", attr("other", "bool", false)),
        (
            "obj",
            attr("", "object({name1 = string, name2 = bool})", false),
        ),
        (
            "sig",
            default(
                Some(attr("sig", "string", false)),
                Some(literal("\"SIGTERM\"")),
            ),
        ),
        ("rev", literal("reverse(\"hi\")")),
        // Nomad checks no name on a plain block spec.
        (
            "arr",
            array(vec![block("", false, Some(attr("x", "string", false)))]),
        ),
        (
            "ports",
            block_map("ports", &["label"], Some(attr("p", "number", false))),
        ),
    ]);
    let tree = SpecTree::from_proto(&spec).expect("converts");
    let SpecTree::Object(m) = &tree else {
        panic!("not an object")
    };
    assert_eq!(
        m["foo"],
        SpecTree::Attr {
            name: "foo".into(),
            ty: Type::String,
            required: false
        }
    );
    assert_eq!(
        m["renamed"],
        SpecTree::Attr {
            name: "other".into(),
            ty: Type::Bool,
            required: false
        }
    );
    assert_eq!(
        m["obj"],
        SpecTree::Attr {
            name: "obj".into(),
            ty: Type::Object(BTreeMap::from([
                ("name1".to_string(), Type::String),
                ("name2".to_string(), Type::Bool),
            ])),
            required: false,
        }
    );
    assert_eq!(
        m["rev"],
        SpecTree::Literal {
            source: "reverse(\"hi\")".into(),
            value: Value::string("ih")
        }
    );
    let SpecTree::Array(arr) = &m["arr"] else {
        panic!("not an array")
    };
    assert!(matches!(&arr[0], SpecTree::Block { name, .. } if name.is_empty()));
    // Object keys, not attribute names, name the decoded value's attributes.
    assert_eq!(
        tree.implied_type().to_string(),
        "object({arr = tuple([string]), bar = number, foo = string, \
         obj = object({name1 = string, name2 = bool}), ports = map(number), renamed = bool, \
         rev = string, sig = string})"
    );
}
