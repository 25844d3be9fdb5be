//! JSON forms of the driver messages.
//!
//! The generated messages serialise with serde (field names as Rust spells them, enums as
//! numbers, `bytes` as arrays of numbers, oneofs as `{"Variant": value}`). Two forms are
//! derived from that:
//! * the **record** form ([`record`]), shown in reports: oneofs flattened to the field the
//!   proto names (`{"block": {"Attr": x}}` becomes `{"Attr": x}`), unset messages (null) left
//!   out, bytes kept as number arrays; msgpack payloads are listed beside it as base64
//!   ([`payloads`]);
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

/// A msgpack payload found in a message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Payload {
    /// Dotted path of the field (`task.msgpack_driver_config`, `handle.driver_state`).
    pub path: String,
    pub bytes: usize,
    /// The bytes, base64 (standard alphabet, padded).
    pub base64: String,
}

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

/// The bytes of a `bytes` field as serde wrote it (an array of numbers 0-255).
fn as_bytes(key: &str, v: &Value) -> Option<Vec<u8>> {
    if !BYTES_FIELDS.contains(&key) {
        return None;
    }
    v.as_array()?
        .iter()
        .map(|n| n.as_u64().and_then(|n| u8::try_from(n).ok()))
        .collect()
}

/// Every msgpack payload in a record-form message.
pub fn payloads(record: &Value) -> Vec<Payload> {
    let mut found = Vec::new();
    walk(record, "", &mut found);
    found
}

fn walk(v: &Value, path: &str, found: &mut Vec<Payload>) {
    match v {
        Value::Object(map) => {
            for (k, v) in map {
                let here = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                if MSGPACK_FIELDS.contains(&k.as_str())
                    && let Some(bytes) = as_bytes(k, v)
                {
                    found.push(Payload {
                        path: here,
                        bytes: bytes.len(),
                        base64: STANDARD.encode(&bytes),
                    });
                } else {
                    walk(v, &here, found);
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, &format!("{path}[{i}]"), found);
            }
        }
        _ => {}
    }
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
        assert_eq!(rec["msgpack_config"], json!([128]));
        assert_eq!(
            protobuf_json(&rec),
            json!({
                "msgpack_config": "gA==",
                "nomad_config": {"driver": {"ClientMaxPort": 14512, "ClientMinPort": 14000}},
                "plugin_api_version": "v0.1.0"
            })
        );
        assert_eq!(
            payloads(&rec),
            [Payload {
                path: "msgpack_config".into(),
                bytes: 1,
                base64: "gA==".into()
            }]
        );
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
        assert_eq!(
            payloads(&record(&req))[0].path,
            "task.msgpack_driver_config"
        );
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
