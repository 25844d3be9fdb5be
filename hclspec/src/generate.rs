//! proptest strategies for configurations that are valid for a spec: the decoded values they
//! stand for, ready to [print as HCL](crate::print::config_to_hcl) or
//! [encode](crate::msgpack::encode_cty). Shrinking gives the smallest failing configuration.
//!
//! Choices: optional attributes are sometimes unset; block lists get between `min_items` and
//! `min_items + 3` blocks (capped by `max_items`); numbers include the msgpack width
//! boundaries, `i64` extremes and float64 values that are exact or not; strings include
//! quotes, backslashes, `${`, newlines and non-ASCII text. An `any` position gets a string,
//! number, bool, tuple or object — but one primitive type per collection, and strings only
//! inside block lists and sets, so that go-cty's unification leaves the values as generated.
//! A spec containing a `block_map` over `any` (on which Nomad panics) has no valid
//! configuration; its generated values do not decode.

use proptest::collection::{btree_map, vec};
use proptest::prelude::*;

use crate::number::Number;
use crate::print::absent_value;
use crate::spec::SpecTree;
use crate::types::Type;
use crate::value::{Value, canonical_set};

/// Values (as decoding produces them) of configurations valid for `spec`.
pub fn config_strategy(spec: &SpecTree) -> BoxedStrategy<Value> {
    spec_strategy(spec, false)
}

/// Values of type `ty` (never null at the top; `any` as described in the module docs).
pub fn value_strategy(ty: &Type) -> BoxedStrategy<Value> {
    typed(ty, false)
}

fn optional(s: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
    prop_oneof![1 => Just(Value::Null), 3 => s].boxed()
}

fn spec_strategy(spec: &SpecTree, uniform: bool) -> BoxedStrategy<Value> {
    match spec {
        SpecTree::Object(m) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            let parts: Vec<BoxedStrategy<Value>> =
                m.values().map(|s| spec_strategy(s, uniform)).collect();
            parts
                .prop_map(move |vals| Value::Object(keys.iter().cloned().zip(vals).collect()))
                .boxed()
        }
        SpecTree::Array(specs) => {
            let parts: Vec<BoxedStrategy<Value>> =
                specs.iter().map(|s| spec_strategy(s, uniform)).collect();
            parts.prop_map(Value::Tuple).boxed()
        }
        SpecTree::Attr { ty, required, .. } => {
            let s = typed(ty, uniform);
            if *required { s } else { optional(s) }
        }
        SpecTree::Block {
            required, nested, ..
        } => {
            let s = spec_strategy(nested, uniform);
            if *required { s } else { optional(s) }
        }
        SpecTree::BlockAttrs {
            element_type,
            required,
            ..
        } => {
            // Values of one block must share a type when `any` leaves room (see decode).
            let any_inside = element_type.has_any();
            let s = btree_map(identifier(), typed(element_type, true), 0..4)
                .prop_filter("block_attrs values of one type", move |m| {
                    let types: Vec<Type> = m.values().map(Value::ty).collect();
                    !any_inside || types.windows(2).all(|w| w[0] == w[1])
                })
                .prop_map(Value::Map)
                .boxed();
            if *required { s } else { optional(s) }
        }
        SpecTree::BlockList {
            min_items,
            max_items,
            nested,
            ..
        } => vec(
            spec_strategy(nested, true),
            count_range(*min_items, *max_items),
        )
        .prop_map(Value::List)
        .boxed(),
        SpecTree::BlockSet {
            min_items,
            max_items,
            nested,
            ..
        } => {
            let min = usize::try_from(*min_items).unwrap_or(usize::MAX);
            vec(
                spec_strategy(nested, true),
                count_range(*min_items, *max_items),
            )
            .prop_map(canonical_set)
            .prop_filter("duplicate blocks left fewer than min_items", move |s| {
                s.len() >= min
            })
            .prop_map(Value::Set)
            .boxed()
        }
        SpecTree::BlockMap { labels, nested, .. } => {
            block_map_level(labels.len(), spec_strategy(nested, uniform), true)
        }
        SpecTree::Default { primary, default } => {
            let fallback = match absent_value(default) {
                Some(v) => Just(v).boxed(),
                None => spec_strategy(default, uniform),
            };
            (spec_strategy(primary, uniform), fallback)
                .prop_map(|(p, d)| if p.is_null() { d } else { p })
                .boxed()
        }
        SpecTree::Literal { value, .. } => Just(value.clone()).boxed(),
    }
}

fn count_range(min: u64, max: u64) -> std::ops::RangeInclusive<usize> {
    let min = usize::try_from(min).unwrap_or(usize::MAX / 2);
    let mut hi = min.saturating_add(3);
    if max > 0 {
        hi = hi.min(usize::try_from(max).unwrap_or(usize::MAX));
    }
    min..=hi.max(min)
}

/// Nested maps keyed by block labels; only the outermost level may be empty.
fn block_map_level(levels: usize, leaf: BoxedStrategy<Value>, outer: bool) -> BoxedStrategy<Value> {
    let inner = if levels <= 1 {
        leaf
    } else {
        block_map_level(levels - 1, leaf, false)
    };
    let size = if outer { 0..3 } else { 1..3 };
    btree_map(label(), inner, size).prop_map(Value::Map).boxed()
}

fn typed(ty: &Type, uniform: bool) -> BoxedStrategy<Value> {
    match ty {
        Type::String => string().prop_map(Value::String).boxed(),
        Type::Number => number().prop_map(Value::Number).boxed(),
        Type::Bool => any::<bool>().prop_map(Value::Bool).boxed(),
        Type::List(et) => collection(et, uniform, Value::List),
        Type::Set(et) => collection(et, uniform, |v| Value::Set(canonical_set(v))),
        Type::Map(et) => {
            let et = one_primitive_for_any(et, uniform);
            et.prop_flat_map(move |et| {
                btree_map(string(), typed(&et, true), 0..4).prop_map(Value::Map)
            })
            .boxed()
        }
        Type::Object(attrs) => {
            let keys: Vec<String> = attrs.keys().cloned().collect();
            let parts: Vec<BoxedStrategy<Value>> =
                attrs.values().map(|t| typed(t, uniform)).collect();
            parts
                .prop_map(move |vals| Value::Object(keys.iter().cloned().zip(vals).collect()))
                .boxed()
        }
        Type::Tuple(ts) => {
            let parts: Vec<BoxedStrategy<Value>> = ts.iter().map(|t| typed(t, uniform)).collect();
            parts.prop_map(Value::Tuple).boxed()
        }
        Type::Any if uniform => string().prop_map(Value::String).boxed(),
        Type::Any => prop_oneof![
            string().prop_map(Value::String),
            number().prop_map(Value::Number),
            any::<bool>().prop_map(Value::Bool),
            vec(string().prop_map(Value::String), 0..3).prop_map(Value::Tuple),
            btree_map(identifier(), string().prop_map(Value::String), 0..3).prop_map(Value::Object),
        ]
        .boxed(),
    }
}

/// A collection of one element type; for an `any` element type, one primitive is chosen.
fn collection(et: &Type, uniform: bool, make: fn(Vec<Value>) -> Value) -> BoxedStrategy<Value> {
    one_primitive_for_any(et, uniform)
        .prop_flat_map(move |et| vec(typed(&et, true), 0..4).prop_map(make))
        .boxed()
}

fn one_primitive_for_any(et: &Type, uniform: bool) -> BoxedStrategy<Type> {
    if *et == Type::Any && !uniform {
        prop_oneof![Just(Type::String), Just(Type::Number), Just(Type::Bool)].boxed()
    } else if *et == Type::Any {
        Just(Type::String).boxed()
    } else {
        Just(et.clone()).boxed()
    }
}

fn string() -> BoxedStrategy<String> {
    prop_oneof![
        6 => "[a-zA-Z0-9 _./:=-]{0,12}",
        1 => Just(String::new()),
        1 => Just("${NOMAD_TASK_DIR} %{ if x }".to_string()),
        1 => Just("quote \" back\\slash".to_string()),
        1 => Just("line\nbreak\ttab".to_string()),
        1 => Just("héllo 日本 🚀".to_string()),
        1 => Just("x".repeat(40)),
        1 => Just("y".repeat(300)),
    ]
    .boxed()
}

fn number() -> BoxedStrategy<Number> {
    let edges: Vec<i64> = vec![
        0,
        1,
        -1,
        127,
        128,
        255,
        256,
        65_535,
        65_536,
        4_294_967_295,
        4_294_967_296,
        i64::MAX,
        -32,
        -33,
        -128,
        -129,
        -32_768,
        -32_769,
        -2_147_483_648,
        -2_147_483_649,
        i64::MIN,
    ];
    prop_oneof![
        3 => proptest::sample::select(edges).prop_map(Number::from_i64),
        3 => any::<i64>().prop_map(Number::from_i64),
        1 => (i64::MAX as u64 + 1..=u64::MAX).prop_map(Number::from_u64),
        2 => any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| Number::from_f64(f).unwrap_or_else(Number::zero)),
        2 => proptest::sample::select(vec!["0.1", "1.5", "-2.25", "3.14159", "1e-7", "2.5e300"])
            .prop_map(|s| Number::parse(s).unwrap_or_else(|_| Number::zero())),
    ]
    .boxed()
}

/// HCL identifiers usable as attribute names.
fn identifier() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,7}".prop_filter("keyword", |s| crate::print::is_identifier(s))
}

/// Block labels: printable text without template or escape characters.
fn label() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 _.-]{1,8}"
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    #[test]
    fn block_counts_stay_within_bounds() {
        let spec = SpecTree::BlockList {
            name: "b".into(),
            min_items: 2,
            max_items: 3,
            nested: Box::new(SpecTree::Literal {
                source: "1".into(),
                value: Value::int(1),
            }),
        };
        let strategy = config_strategy(&spec);
        let mut runner = TestRunner::deterministic();
        for _ in 0..50 {
            let v = strategy.new_tree(&mut runner).unwrap().current();
            let Value::List(items) = v else {
                panic!("not a list")
            };
            assert!((2..=3).contains(&items.len()), "{} blocks", items.len());
        }
    }

    #[test]
    fn typed_values_have_their_type() {
        let mut runner = TestRunner::deterministic();
        let strategy = value_strategy(&Type::parse("map(number)").unwrap());
        for _ in 0..50 {
            let Value::Map(m) = strategy.new_tree(&mut runner).unwrap().current() else {
                panic!("not a map")
            };
            assert!(m.values().all(|v| matches!(v, Value::Number(_))));
        }
    }
}
