//! JSON forms of the driver messages.
//!
//! The generated messages serialise with serde (field names as Rust spells them, enums as
//! numbers, `bytes` as arrays of numbers, oneofs as `{"Variant": value}`). Two forms are
//! derived from that:
//! * the **record** form ([`record`]), shown in reports: oneofs flattened to the field the
//!   proto names (`{"block": {"Attr": x}}` becomes `{"Attr": x}`), unset messages (null) left
//!   out, and bytes made readable ([`readable_bytes`]): a msgpack payload decoded to JSON
//!   beside its base64 (`{"msgpack": {...}, "base64": "..."}`), other bytes as their text
//!   (`{"text": "..."}`), and bytes that are neither as hex (`{"hex": "..."}`); never a list
//!   of numbers;
//! * the **protobuf JSON** form ([`protobuf_json`]), which grpcurl reads: the record form with
//!   the few fields whose proto names are not snake_case renamed (`ClientMaxPort`,
//!   `hostsConfig`, `PercentTicks`, ...) and every bytes field written as base64, as the
//!   protobuf JSON mapping requires.
//!
//! Only oneofs and renames of the Nomad plugin protos are known here; user maps (a task's env,
//! say) are never touched, because a rewrite applies only under the parent field that owns it.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::Serialize;
use serde_json::{Map, Value};

/// oneof fields and, for each variant as serde writes it, the proto field name.
const ONEOFS: &[(&str, &[(&str, &str)])] = &[
    (
        // hclspec.Spec.block
        "block",
        &[
            ("Object", "object"),
            ("Array", "array"),
            ("Attr", "Attr"),
            ("BlockValue", "block_value"),
            ("BlockAttrs", "block_attrs"),
            ("BlockList", "block_list"),
            ("BlockSet", "block_set"),
            ("BlockMap", "block_map"),
            ("Default", "default"),
            ("Literal", "literal"),
        ],
    ),
    (
        // structs.Attribute.value
        "value",
        &[
            ("FloatVal", "float_val"),
            ("IntVal", "int_val"),
            ("StringVal", "string_val"),
            ("BoolVal", "bool_val"),
        ],
    ),
];

/// Fields whose proto name differs from the Rust one, under the field that holds them.
const RENAMES: &[(&str, &str, &str)] = &[
    ("driver", "client_max_port", "ClientMaxPort"),
    ("driver", "client_min_port", "ClientMinPort"),
    ("driver", "topology", "Topology"),
    ("network_isolation_spec", "hosts_config", "hostsConfig"),
    ("isolation_spec", "hosts_config", "hostsConfig"),
    ("linux_resources", "percent_ticks", "PercentTicks"),
];

/// `bytes` fields of the driver, base and go-plugin protos.
const BYTES_FIELDS: &[&str] = &[
    "msgpack_config",
    "msgpack_driver_config",
    "driver_state",
    "data",
    "stdout",
    "stderr",
];

/// `bytes` fields that carry MessagePack.
const MSGPACK_FIELDS: &[&str] = &["msgpack_config", "msgpack_driver_config", "driver_state"];

/// The record form of a message (see the module docs).
pub fn record<T: Serialize>(message: &T) -> Value {
    let v = serde_json::to_value(message).unwrap_or(Value::Null);
    flatten(v)
}

fn flatten(v: Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                if v.is_null() {
                    continue;
                }
                if let Some(bytes) = as_bytes(&k, &v) {
                    out.insert(k.clone(), readable_bytes(&k, &bytes));
                    continue;
                }
                if let Some((_, variants)) = ONEOFS.iter().find(|(field, _)| *field == k)
                    && let Value::Object(inner) = &v
                    && inner.len() == 1
                    && let Some((variant, inner_value)) = inner.iter().next()
                    && let Some((_, proto)) = variants.iter().find(|(s, _)| s == variant)
                {
                    out.insert((*proto).to_owned(), flatten(inner_value.clone()));
                    continue;
                }
                out.insert(k, flatten(v));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(flatten).collect()),
        other => other,
    }
}

/// The protobuf JSON form of a message's record form (see the module docs).
pub fn protobuf_json(record: &Value) -> Value {
    rewrite(record, None)
}

fn rewrite(v: &Value, parent: Option<&str>) -> Value {
    match v {
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let name = RENAMES
                    .iter()
                    .find(|(p, from, _)| Some(*p) == parent && from == k)
                    .map(|(_, _, to)| (*to).to_owned())
                    .unwrap_or_else(|| k.clone());
                let value = match as_bytes(k, v) {
                    Some(bytes) => Value::String(STANDARD.encode(bytes)),
                    None => rewrite(v, Some(k)),
                };
                out.insert(name, value);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|i| rewrite(i, parent)).collect()),
        other => other.clone(),
    }
}

/// The bytes of a `bytes` field: as serde wrote it (an array of numbers 0-255), or in the
/// record form's readable forms (see [`readable_bytes`]).
fn as_bytes(key: &str, v: &Value) -> Option<Vec<u8>> {
    if !BYTES_FIELDS.contains(&key) {
        return None;
    }
    match v {
        Value::Array(items) => items
            .iter()
            .map(|n| n.as_u64().and_then(|n| u8::try_from(n).ok()))
            .collect(),
        Value::Object(form) => {
            if let Some(b64) = form.get("base64").and_then(Value::as_str) {
                STANDARD.decode(b64).ok()
            } else if let Some(text) = form.get("text").and_then(Value::as_str) {
                Some(text.as_bytes().to_vec())
            } else {
                crate::hex::decode(form.get("hex")?.as_str()?)
            }
        }
        _ => None,
    }
}

/// The record form of a `bytes` field: a msgpack field that decodes is shown as JSON beside
/// its base64 (which grpcurl's reproduce line needs exactly); bytes that are UTF-8 text as
/// that text; anything else as hex.
pub fn readable_bytes(key: &str, bytes: &[u8]) -> Value {
    let mut form = Map::new();
    if MSGPACK_FIELDS.contains(&key) {
        if let Ok(decoded) = nomad_conform_hclspec::read_json(bytes) {
            form.insert("msgpack".into(), decoded);
            form.insert("base64".into(), Value::String(STANDARD.encode(bytes)));
            return Value::Object(form);
        }
    } else if let Ok(text) = std::str::from_utf8(bytes) {
        form.insert("text".into(), Value::String(text.to_owned()));
        return Value::Object(form);
    }
    form.insert("hex".into(), Value::String(crate::hex::encode(bytes)));
    Value::Object(form)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugins::driver::{base, drivers, hclspec, structs};
    use serde_json::json;
    use std::collections::HashMap;

    #[test]
    fn set_config_renames_and_base64() {
        let req = base::SetConfigRequest {
            msgpack_config: vec![0x80],
            nomad_config: Some(base::NomadConfig {
                driver: Some(base::NomadDriverConfig {
                    client_max_port: 14512,
                    client_min_port: 14000,
                    topology: None,
                }),
            }),
            plugin_api_version: "v0.1.0".into(),
        };
        let rec = record(&req);
        // An empty msgpack map, decoded, beside its base64.
        assert_eq!(
            rec["msgpack_config"],
            json!({"msgpack": {}, "base64": "gA=="})
        );
        assert_eq!(
            protobuf_json(&rec),
            json!({
                "msgpack_config": "gA==",
                "nomad_config": {"driver": {"ClientMaxPort": 14512, "ClientMinPort": 14000}},
                "plugin_api_version": "v0.1.0"
            })
        );
    }

    #[test]
    fn bytes_are_never_lists_of_numbers() {
        // Not msgpack: hex, and back to the same bytes for grpcurl.
        let req = base::SetConfigRequest {
            msgpack_config: vec![0xc1, 0x00],
            ..Default::default()
        };
        let rec = record(&req);
        assert_eq!(rec["msgpack_config"], json!({"hex": "c100"}));
        assert_eq!(protobuf_json(&rec)["msgpack_config"], json!("wQA="));
        // Output bytes that are text: the text.
        let out = drivers::ExecTaskStreamingResponse {
            stdout: Some(drivers::ExecTaskStreamingIoOperation {
                data: b"hello\n".to_vec(),
                close: false,
            }),
            ..Default::default()
        };
        let rec = record(&out);
        assert_eq!(rec["stdout"]["data"], json!({"text": "hello\n"}));
        assert_eq!(protobuf_json(&rec)["stdout"]["data"], json!("aGVsbG8K"));
        assert!(!rec.to_string().contains("[104"), "{rec}");
    }

    #[test]
    fn user_maps_are_left_alone() {
        let task = drivers::TaskConfig {
            env: HashMap::from([
                ("topology".to_string(), "x".to_string()),
                ("data".to_string(), "y".to_string()),
            ]),
            msgpack_driver_config: vec![1, 2],
            ..Default::default()
        };
        let req = drivers::StartTaskRequest { task: Some(task) };
        let j = protobuf_json(&record(&req));
        assert_eq!(j["task"]["env"], json!({"topology": "x", "data": "y"}));
        assert_eq!(j["task"]["msgpack_driver_config"], json!("AQI="));
    }

    #[test]
    fn oneofs_are_flattened() {
        let spec = hclspec::Spec {
            block: Some(hclspec::spec::Block::Object(hclspec::Object {
                attributes: HashMap::from([(
                    "value".to_string(),
                    hclspec::Spec {
                        block: Some(hclspec::spec::Block::Attr(hclspec::Attr {
                            name: "value".into(),
                            r#type: "string".into(),
                            required: true,
                        })),
                    },
                )]),
            })),
        };
        assert_eq!(
            record(&spec),
            json!({"object": {"attributes": {"value": {"Attr": {"name": "value", "type": "string", "required": true}}}}})
        );
        let attr = structs::Attribute {
            value: Some(structs::attribute::Value::StringVal("1.0".into())),
            unit: String::new(),
        };
        assert_eq!(record(&attr), json!({"string_val": "1.0", "unit": ""}));
    }
}
