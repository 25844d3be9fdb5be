//! Property tests over generated specs and generated configurations valid for them:
//! generate → encode → read back → equal; print as HCL → decode → same bytes.

mod common;

use common::*;
use nomad_conform_hclspec::{
    SpecTree, Value, config_strategy, config_to_hcl, decode_hcl, encode_cty, encode_plain,
    read_json, read_rmpv,
};
use nomad_conform_proto::nomad::hclspec as proto;
use proptest::collection::btree_map;
use proptest::prelude::*;

fn name() -> impl Strategy<Value = String> {
    "[a-z][a-z_]{0,5}".prop_filter("keyword", |s| {
        !matches!(s.as_str(), "true" | "false" | "null" | "for" | "in" | "if")
    })
}

/// HCL type expressions, up to three levels deep.
fn type_expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("string".to_string()),
        Just("number".to_string()),
        Just("bool".to_string()),
        Just("any".to_string()),
    ];
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|t| format!("list({t})")),
            inner.clone().prop_map(|t| format!("set({t})")),
            inner.clone().prop_map(|t| format!("map({t})")),
            btree_map(name(), inner.clone(), 0..3).prop_map(|m| {
                let attrs: Vec<String> = m.iter().map(|(k, t)| format!("{k} = {t}")).collect();
                format!("object({{{}}})", attrs.join(", "))
            }),
            proptest::collection::vec(inner, 0..3)
                .prop_map(|ts| format!("tuple([{}])", ts.join(", "))),
        ]
    })
}

fn primitive() -> impl Strategy<Value = (&'static str, &'static str)> {
    prop_oneof![
        Just(("bool", "true")),
        Just(("number", "1.5")),
        Just(("number", "-7")),
        Just(("string", "\"SIGTERM\"")),
    ]
}

/// An object spec of attributes only (a block's body), with unique names.
fn flat_object(no_any: bool) -> impl Strategy<Value = proto::Spec> {
    btree_map(name(), (type_expr(), any::<bool>()), 1..4).prop_map(move |m| {
        object(
            m.iter()
                .map(|(k, (t, req))| {
                    let t = if no_any {
                        t.replace("any", "string")
                    } else {
                        t.clone()
                    };
                    (k.as_str(), attr(k, &t, *req))
                })
                .collect(),
        )
    })
}

/// One entry of a root object spec, named `key`.
fn entry(key: String) -> BoxedStrategy<proto::Spec> {
    let k = key.clone();
    prop_oneof![
        4 => (type_expr(), any::<bool>()).prop_map(move |(t, r)| attr(&k, &t, r)),
        1 => {
            let k = key.clone();
            (type_expr(), any::<bool>()).prop_map(move |(t, r)| block_attrs(&k, &t, r))
        },
        1 => {
            let k = key.clone();
            (any::<bool>(), flat_object(false)).prop_map(move |(r, n)| block(&k, r, Some(n)))
        },
        1 => {
            let k = key.clone();
            (0u64..2, 0u64..3, flat_object(false)).prop_map(move |(min, extra, n)| {
                let max = if extra == 0 { 0 } else { min + extra };
                block_list(&k, min, max, Some(n))
            })
        },
        1 => {
            let k = key.clone();
            (0u64..2, flat_object(false)).prop_map(move |(min, n)| block_set(&k, min, 0, Some(n)))
        },
        1 => {
            let k = key.clone();
            (prop_oneof![Just(vec!["a"]), Just(vec!["a", "b"])], flat_object(true))
                .prop_map(move |(labels, n)| block_map(&k, &labels, Some(n)))
        },
        1 => {
            let k = key.clone();
            primitive().prop_map(move |(t, lit)| {
                default(Some(attr(&k, t, false)), Some(literal(lit)))
            })
        },
        1 => primitive().prop_map(|(_, lit)| literal(lit)),
    ]
    .boxed()
}

/// Root specs shaped like a driver's TaskConfigSchema.
fn root_spec() -> impl Strategy<Value = proto::Spec> {
    proptest::collection::btree_set(name(), 1..6).prop_flat_map(|keys| {
        let entries: Vec<BoxedStrategy<(String, proto::Spec)>> = keys
            .into_iter()
            .map(|k| entry(k.clone()).prop_map(move |s| (k.clone(), s)).boxed())
            .collect();
        entries.prop_map(|es| object(es.iter().map(|(k, s)| (k.as_str(), s.clone())).collect()))
    })
}

fn spec_and_config() -> impl Strategy<Value = (SpecTree, Value)> {
    root_spec().prop_flat_map(|proto_spec| {
        let tree = SpecTree::from_proto(&proto_spec).expect("generated spec converts");
        (Just(tree.clone()), config_strategy(&tree))
    })
}

/// Every msgpack map's keys are strictly ascending bytewise.
fn keys_sorted(v: &rmpv::Value) -> bool {
    match v {
        rmpv::Value::Map(pairs) => {
            let keys: Vec<&[u8]> = pairs
                .iter()
                .map(|(k, _)| k.as_str().map(str::as_bytes).unwrap_or(&[]))
                .collect();
            keys.windows(2).all(|w| w[0] < w[1]) && pairs.iter().all(|(_, x)| keys_sorted(x))
        }
        rmpv::Value::Array(items) => items.iter().all(keys_sorted),
        _ => true,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn encode_then_read_gives_the_value((_spec, value) in spec_and_config()) {
        let bytes = encode_cty(&value);
        prop_assert_eq!(read_json(&bytes).unwrap(), value.to_json());
        prop_assert!(keys_sorted(&read_rmpv(&bytes).unwrap()));
    }

    #[test]
    fn printed_hcl_decodes_to_the_same_bytes((spec, value) in spec_and_config()) {
        let hcl = config_to_hcl(&spec, &value);
        let decoded = decode_hcl(&spec, &hcl);
        prop_assert!(decoded.is_ok(), "config:\n{}\nerror: {}", hcl, decoded.unwrap_err());
        let decoded = decoded.unwrap();
        prop_assert_eq!(encode_cty(&decoded), encode_cty(&value), "config:\n{}", hcl);
    }

    #[test]
    fn plain_form_reads_back_to_the_given_fields((_spec, value) in spec_and_config()) {
        let fields = value.to_json();
        prop_assert_eq!(read_json(&encode_plain(&fields)).unwrap(), fields);
    }

    #[test]
    fn driver_like_configs_round_trip(value in config_strategy(&SpecTree::from_proto(&driver_like_spec()).unwrap())) {
        let spec = SpecTree::from_proto(&driver_like_spec()).unwrap();
        let hcl = config_to_hcl(&spec, &value);
        let decoded = decode_hcl(&spec, &hcl).map_err(|e| TestCaseError::fail(format!("{hcl}\n{e}")))?;
        prop_assert_eq!(&decoded.to_json(), &value.to_json(), "config:\n{}", hcl);
        let Value::Object(m) = &value else { return Err(TestCaseError::fail("not an object")) };
        // Every attribute is present, and the required one is never null.
        prop_assert_eq!(m.len(), 5);
        prop_assert!(!m["command"].is_null());
    }
}
