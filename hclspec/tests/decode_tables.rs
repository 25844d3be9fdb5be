//! Decoding HCL and JSON configuration against specs, as hcldec would.

mod common;

use common::*;
use nomad_conform_hclspec::{
    DecodeError, SpecTree, Value, decode_hcl, decode_json, decode_json_str,
};
use nomad_conform_proto::nomad::hclspec as proto;
use serde_json::json;

fn tree(spec: &proto::Spec) -> SpecTree {
    SpecTree::from_proto(spec).expect("spec converts")
}

enum Input {
    Hcl(&'static str),
    Json(serde_json::Value),
}

/// Decodes and returns the driver's view (JSON of the msgpack), or the error message.
fn run(spec: &SpecTree, input: &Input) -> Result<serde_json::Value, String> {
    let r = match input {
        Input::Hcl(text) => decode_hcl(spec, text),
        Input::Json(v) => decode_json(spec, v),
    };
    r.map(|v| v.to_json()).map_err(|e| e.to_string())
}

fn driver() -> SpecTree {
    tree(&driver_like_spec())
}

fn blocks() -> SpecTree {
    tree(&object(vec![
        (
            "resources",
            block(
                "resources",
                false,
                Some(object(vec![("cpu", attr("cpu", "number", false))])),
            ),
        ),
        (
            "mount",
            block_list(
                "mount",
                0,
                2,
                Some(object(vec![("target", attr("target", "string", true))])),
            ),
        ),
        (
            "tag",
            block_set("tag", 0, 0, Some(attr("v", "string", false))),
        ),
        (
            "service",
            block_map(
                "service",
                &["name"],
                Some(object(vec![("port", attr("port", "number", false))])),
            ),
        ),
        ("port_map", block_attrs("port_map", "number", false)),
    ]))
}

#[test]
fn successful_decodes() {
    use Input::*;
    let cases: Vec<(&str, SpecTree, Input, serde_json::Value)> = vec![
        (
            "hcl: set, unset, block_attrs and default",
            driver(),
            Hcl("command = \"/bin/sh\"\nargs = [\"-c\", \"sleep 1\"]\nport_map { http = 80 }"),
            json!({"args": ["-c", "sleep 1"], "command": "/bin/sh", "image": null,
                   "port_map": {"http": 80}, "privileged": false}),
        ),
        (
            "json: the same",
            driver(),
            Json(
                json!({"command": "/bin/sh", "args": ["-c", "sleep 1"], "port_map": {"http": 80}}),
            ),
            json!({"args": ["-c", "sleep 1"], "command": "/bin/sh", "image": null,
                   "port_map": {"http": 80}, "privileged": false}),
        ),
        (
            "json: a block as an array of objects (how Nomad stores HCL1-era configs)",
            driver(),
            Json(json!({"command": "x", "port_map": [{"http": 80}]})),
            json!({"args": null, "command": "x", "image": null, "port_map": {"http": 80},
                   "privileged": false}),
        ),
        (
            "an explicit value beats the default",
            driver(),
            Hcl("command = \"x\"\nprivileged = true"),
            json!({"args": null, "command": "x", "image": null, "port_map": null, "privileged": true}),
        ),
        (
            "null counts as unset for the default",
            driver(),
            Hcl("command = \"x\"\nprivileged = null"),
            json!({"args": null, "command": "x", "image": null, "port_map": null, "privileged": false}),
        ),
        (
            "conversions: string to number and bool, number to string",
            tree(&object(vec![
                ("n", attr("n", "number", false)),
                ("b", attr("b", "bool", false)),
                ("b1", attr("b1", "bool", false)),
                ("s", attr("s", "string", false)),
                ("l", attr("l", "list(string)", false)),
            ])),
            Hcl("n = \"5\"\nb = \"true\"\nb1 = \"0\"\ns = 1.5\nl = [1, true]"),
            json!({"n": 5, "b": true, "b1": false, "s": "1.5", "l": ["1", "true"]}),
        ),
        (
            "list(any) unifies number and string as string; objects drop extra attributes",
            tree(&object(vec![
                ("l", attr("l", "list(any)", false)),
                ("o", attr("o", "object({a = number})", false)),
            ])),
            Hcl("l = [1, \"x\"]\no = { a = \"2\", extra = true }"),
            json!({"l": ["1", "x"], "o": {"a": 2}}),
        ),
        (
            "hcl blocks: block, block list, block set, block map",
            blocks(),
            Hcl(
                "resources { cpu = 500 }\nmount { target = \"/a\" }\nmount { target = \"/b\" }\n\
                 tag { v = \"b\" }\ntag { v = \"a\" }\ntag { v = \"b\" }\n\
                 service \"web\" { port = 80 }\nservice \"db\" {}\n",
            ),
            json!({"mount": [{"target": "/a"}, {"target": "/b"}], "port_map": null,
                   "resources": {"cpu": 500}, "service": {"db": {"port": null}, "web": {"port": 80}},
                   "tag": ["a", "b"]}),
        ),
        (
            "json blocks: object, array, labels as nested keys, null block",
            blocks(),
            Json(json!({"resources": null, "mount": [{"target": "/a"}],
                        "service": {"web": {"port": 80}, "db": [{}]}, "tag": {"v": "x"},
                        "//": "comments are ignored"})),
            json!({"mount": [{"target": "/a"}], "port_map": null, "resources": null,
                   "service": {"db": {"port": null}, "web": {"port": 80}}, "tag": ["x"]}),
        ),
        (
            "absent blocks: null block, empty list, set and map",
            blocks(),
            Hcl(""),
            json!({"mount": [], "port_map": null, "resources": null, "service": {}, "tag": []}),
        ),
        (
            "json strings are templates: $${ is a literal ${",
            driver(),
            Json(json!({"command": "$${HOME}/x", "args": ["%%{ y }"]})),
            json!({"args": ["%{ y }"], "command": "${HOME}/x", "image": null, "port_map": null,
                   "privileged": false}),
        ),
        (
            "hcl functions from Nomad's stdlib",
            driver(),
            Hcl("command = upper(\"sh\")\nargs = concat([\"a\"], [\"b\"])"),
            json!({"args": ["a", "b"], "command": "SH", "image": null, "port_map": null,
                   "privileged": false}),
        ),
        (
            "array spec, literal, default whose default is another attribute",
            tree(&object(vec![
                (
                    "pair",
                    array(vec![attr("x", "number", false), literal("\"lit\"")]),
                ),
                (
                    "d",
                    default(
                        Some(attr("new_name", "string", false)),
                        Some(attr("old_name", "string", false)),
                    ),
                ),
            ])),
            Hcl("x = 1\nold_name = \"legacy\""),
            json!({"d": "legacy", "pair": [1, "lit"]}),
        ),
        (
            "numbers: exact int64, exact float, decimal text",
            tree(&object(vec![("n", attr("n", "list(number)", false))])),
            Json(json!({"n": [9007199254740993_i64, 0.5, 0.1, 18446744073709551615_u64]})),
            json!({"n": [9007199254740993_i64, 0.5, "0.1", "18446744073709551615"]}),
        ),
    ];
    for (case, spec, input, want) in cases {
        match run(&spec, &input) {
            Ok(got) => assert_eq!(got, want, "{case}"),
            Err(e) => panic!("{case}: {e}"),
        }
    }
}

#[test]
fn failing_decodes() {
    use Input::*;
    let cases: Vec<(&str, SpecTree, Input, &str)> = vec![
        (
            "required attribute missing",
            driver(),
            Hcl("image = \"x\""),
            "command: missing required argument",
        ),
        (
            "required attribute missing (json)",
            driver(),
            Json(json!({})),
            "command: missing required argument",
        ),
        (
            "unknown attribute, with a suggestion",
            driver(),
            Hcl("command = \"x\"\ncomand = \"y\""),
            "config: unsupported argument: no argument named \"comand\" is expected here (did you mean \"command\"?)",
        ),
        (
            "unknown json property",
            driver(),
            Json(json!({"command": "x", "bogus": 1})),
            "no argument named \"bogus\" is expected here",
        ),
        (
            "unknown block",
            driver(),
            Hcl("command = \"x\"\nnetwork { mode = \"host\" }"),
            "config: unsupported block type: blocks of type \"network\" are not expected here",
        ),
        (
            "an attribute written as a block",
            driver(),
            Hcl("command = \"x\"\nimage { }"),
            "blocks of type \"image\" are not expected here (did you mean to set the argument \"image\"?",
        ),
        (
            "a block written as an attribute",
            driver(),
            Hcl("command = \"x\"\nport_map = { http = 80 }"),
            "no argument named \"port_map\" is expected here (did you mean to define a block of type \"port_map\"?)",
        ),
        (
            "wrong type",
            driver(),
            Hcl("command = \"x\"\nprivileged = \"yes\""),
            "privileged: expected bool, got string \"yes\" (a bool is required)",
        ),
        (
            "wrong type in a list element",
            driver(),
            Hcl("command = \"x\"\nargs = [\"a\", [\"b\"]]"),
            "args[1]: expected string, got tuple of 1 element(s) (string required)",
        ),
        (
            "capitalised bool string",
            driver(),
            Json(json!({"command": "x", "privileged": "True"})),
            "use lowercase \"true\"",
        ),
        (
            "number that is not a number",
            driver(),
            Hcl("command = \"x\"\nport_map { http = \"eighty\" }"),
            "port_map.http: expected number, got string \"eighty\" (a number is required)",
        ),
        (
            "block inside block_attrs",
            driver(),
            Hcl("command = \"x\"\nport_map {\n  inner {\n  }\n}"),
            "port_map: blocks are not allowed here",
        ),
        (
            "interpolation is not supported",
            driver(),
            Hcl("command = \"${NOMAD_TASK_DIR}/run\""),
            "command: expression does not evaluate",
        ),
        (
            "duplicate block",
            blocks(),
            Hcl("resources {}\nresources {}"),
            "resources: duplicate block",
        ),
        (
            "too many blocks",
            blocks(),
            Hcl("mount { target = \"a\" }\nmount { target = \"b\" }\nmount { target = \"c\" }"),
            "mount: expected at most 2 block(s), found 3",
        ),
        (
            "required attribute inside a block list element",
            blocks(),
            Hcl("mount { target = \"a\" }\nmount { }"),
            "mount[1].target: missing required argument",
        ),
        (
            "block map without its label",
            blocks(),
            Hcl("service { port = 1 }"),
            "service: expected 1 label(s) (name), found 0",
        ),
        (
            "duplicate block map labels",
            blocks(),
            Hcl("service \"a\" {}\nservice \"a\" {}"),
            "service[\"a\"]: duplicate block",
        ),
        (
            "json block that is not an object",
            blocks(),
            Json(json!({"resources": "big"})),
            "resources: incorrect JSON value type",
        ),
        (
            "json block map without label keys",
            blocks(),
            Json(json!({"service": {}})),
            "missing block label",
        ),
        (
            "not hcl",
            driver(),
            Hcl("command = "),
            "failed to parse the configuration as HCL",
        ),
        (
            "too few blocks",
            tree(&object(vec![(
                "m",
                block_list("m", 1, 0, Some(attr("x", "string", false))),
            )])),
            Hcl(""),
            "m: expected at least 1 block(s), found 0",
        ),
        (
            "required block missing",
            tree(&object(vec![(
                "r",
                block("r", true, Some(attr("x", "string", false))),
            )])),
            Hcl(""),
            "r: missing required block",
        ),
        (
            "object type missing an attribute",
            tree(&object(vec![(
                "o",
                attr("o", "object({a = string, b = string})", false),
            )])),
            Hcl("o = { a = \"x\" }"),
            "o: expected object({a = string, b = string}), got object {a} (attribute \"b\" is required)",
        ),
        (
            "block map over any: Nomad's hcldec panics",
            tree(&object(vec![(
                "m",
                block_map("m", &["k"], Some(attr("x", "any", false))),
            )])),
            Hcl(""),
            "m: the block_map's nested spec has an `any` type (Nomad's hcldec panics",
        ),
        (
            "block_attrs over any with mixed types: cty.MapVal panics in Nomad",
            tree(&object(vec![("b", block_attrs("b", "any", false))])),
            Hcl("b {\n x = 1\n y = \"s\"\n}"),
            "b: the attributes of this block_attrs block (type any) have different types",
        ),
    ];
    for (case, spec, input, want) in cases {
        match run(&spec, &input) {
            Ok(v) => panic!("{case}: decoded to {v}, expected an error with {want:?}"),
            Err(msg) => assert!(msg.contains(want), "{case}: {msg:?} lacks {want:?}"),
        }
    }
}

#[test]
fn all_errors_are_collected() {
    let err = decode_hcl(&driver(), "bogus = 1\nprivileged = \"maybe\"").unwrap_err();
    assert_eq!(err.0.len(), 3, "{err}");
    assert!(matches!(err.0[0], DecodeError::UnsupportedArgument { .. }));
    assert!(
        err.0
            .iter()
            .any(|e| matches!(e, DecodeError::MissingAttribute { path } if path == "command"))
    );
    assert!(
        err.0
            .iter()
            .any(|e| matches!(e, DecodeError::IncorrectType { path, .. } if path == "privileged"))
    );
}

#[test]
fn tuples_and_lists_stay_apart_in_the_value() {
    let spec = tree(&object(vec![
        ("l", attr("l", "list(string)", false)),
        ("a", attr("a", "any", false)),
        (
            "d",
            default(Some(attr("d", "list(string)", false)), Some(literal("[]"))),
        ),
    ]));
    let v = decode_hcl(&spec, "l = [\"x\"]\na = [\"x\"]").unwrap();
    let Value::Object(m) = v else {
        panic!("not an object")
    };
    assert_eq!(m["l"], Value::List(vec![Value::string("x")]));
    assert_eq!(m["a"], Value::Tuple(vec![Value::string("x")]));
    // A Literal default keeps the literal's own type, as hcldec does.
    assert_eq!(m["d"], Value::Tuple(vec![]));
}

#[test]
fn json_text_and_non_objects() {
    let err = decode_json_str(&driver(), "[1]").unwrap_err();
    assert!(err.to_string().contains("expected a JSON object"), "{err}");
    let err = decode_json_str(&driver(), "{").unwrap_err();
    assert!(err.to_string().contains("as JSON"), "{err}");
    let ok = decode_json_str(&driver(), "{\"command\": \"x\"}").unwrap();
    assert_eq!(ok.to_json()["command"], json!("x"));
}
