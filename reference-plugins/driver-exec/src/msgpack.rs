//! Reading a configuration map, as Nomad sends it in `SetConfig.msgpack_config` and
//! `TaskConfig.msgpack_driver_config` (contracts/task-drivers.md B.4).
//!
//! Two encodings reach a driver, and both must be accepted:
//! - **go-cty msgpack**, from Nomad: a map with *every* attribute of the schema, sorted, and
//!   `nil` for each attribute that was not set (and has no default);
//! - **plain msgpack**, from Nomad's Go test helpers and other hosts: a map with only the
//!   attributes that were given.
//!
//! So an attribute is *unset* when it is missing or nil; [`ConfigMap::get`] treats both the
//! same. An empty byte string is an empty map. Keys that are not in the schema are refused, as
//! HCL decoding against the schema would refuse them.

use rmpv::Value;

/// One decoded configuration map.
#[derive(Debug)]
pub struct ConfigMap {
    entries: Vec<(String, Value)>,
}

impl ConfigMap {
    /// Decodes `bytes`, refusing anything but a map with string keys from `schema`.
    pub fn decode(bytes: &[u8], schema: &[&str]) -> Result<ConfigMap, String> {
        if bytes.is_empty() {
            return Ok(ConfigMap {
                entries: Vec::new(),
            });
        }
        let mut reader = bytes;
        let value = rmpv::decode::read_value(&mut reader)
            .map_err(|err| format!("not valid MessagePack: {err}"))?;
        if !reader.is_empty() {
            return Err(format!(
                "{} bytes of trailing data after the MessagePack map",
                reader.len()
            ));
        }
        let Value::Map(pairs) = value else {
            return Err(format!("expected a MessagePack map, got {value}"));
        };
        let mut entries = Vec::with_capacity(pairs.len());
        for (key, value) in pairs {
            let Some(key) = key.as_str() else {
                return Err(format!("map key {key} is not a string"));
            };
            if !schema.contains(&key) {
                return Err(format!(
                    "unsupported attribute {key:?}; the schema has {}",
                    schema.join(", ")
                ));
            }
            entries.push((key.to_string(), value));
        }
        Ok(ConfigMap { entries })
    }

    /// The first attribute of `schema` that the map lacks (a go-cty map lacks none).
    pub fn first_missing<'a>(&self, schema: &[&'a str]) -> Option<&'a str> {
        schema
            .iter()
            .copied()
            .find(|name| !self.entries.iter().any(|(key, _)| key == name))
    }

    /// The first attribute whose value is nil (go-cty sends nil for every unset attribute).
    pub fn first_nil(&self) -> Option<&str> {
        self.entries
            .iter()
            .find(|(_, value)| value.is_nil())
            .map(|(key, _)| key.as_str())
    }

    /// The value of `key`, or None when it is missing or nil (unset either way).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .filter(|v| !v.is_nil())
    }

    pub fn string(&self, key: &str) -> Result<Option<String>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => s
                .as_str()
                .map(|s| Some(s.to_string()))
                .ok_or_else(|| format!("attribute {key:?} is not valid UTF-8")),
            Some(other) => Err(format!("attribute {key:?} must be a string, got {other}")),
        }
    }

    pub fn bool(&self, key: &str) -> Result<Option<bool>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Boolean(b)) => Ok(Some(*b)),
            Some(other) => Err(format!("attribute {key:?} must be a bool, got {other}")),
        }
    }

    /// A map of strings (an HCL `map(string)`).
    pub fn string_map(
        &self,
        key: &str,
    ) -> Result<Option<std::collections::BTreeMap<String, String>>, String> {
        let bad = || format!("attribute {key:?} must be a map of strings");
        match self.get(key) {
            None => Ok(None),
            Some(Value::Map(pairs)) => pairs
                .iter()
                .map(|(k, v)| match (k.as_str(), v.as_str()) {
                    (Some(k), Some(v)) => Ok((k.to_string(), v.to_string())),
                    _ => Err(bad()),
                })
                .collect::<Result<_, _>>()
                .map(Some),
            Some(_) => Err(bad()),
        }
    }

    /// A list of strings; an empty list stays `Some(vec![])`.
    pub fn strings(&self, key: &str) -> Result<Option<Vec<String>>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    item.as_str().map(str::to_string).ok_or_else(|| {
                        format!("attribute {key:?} must be a list of strings, has {item}")
                    })
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(other) => Err(format!(
                "attribute {key:?} must be a list of strings, got {other}"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(value: Value) -> Vec<u8> {
        let mut bytes = Vec::new();
        rmpv::encode::write_value(&mut bytes, &value).unwrap();
        bytes
    }

    fn map(pairs: Vec<(&str, Value)>) -> Vec<u8> {
        encode(Value::Map(
            pairs
                .into_iter()
                .map(|(k, v)| (Value::from(k), v))
                .collect(),
        ))
    }

    const SCHEMA: &[&str] = &["args", "command"];

    #[test]
    fn missing_and_nil_are_both_unset() {
        let cty = ConfigMap::decode(
            &map(vec![("args", Value::Nil), ("command", "sh".into())]),
            SCHEMA,
        )
        .unwrap();
        let plain = ConfigMap::decode(&map(vec![("command", "sh".into())]), SCHEMA).unwrap();
        for config in [cty, plain] {
            assert_eq!(config.string("command").unwrap().as_deref(), Some("sh"));
            assert_eq!(config.strings("args").unwrap(), None);
        }
        assert!(
            ConfigMap::decode(&[], SCHEMA)
                .unwrap()
                .get("command")
                .is_none()
        );
    }

    #[test]
    fn wrong_shapes_are_refused() {
        assert!(ConfigMap::decode(&encode(Value::from(3)), SCHEMA).is_err());
        assert!(ConfigMap::decode(&map(vec![("other", Value::Nil)]), SCHEMA).is_err());
        let config = ConfigMap::decode(&map(vec![("command", Value::from(3))]), SCHEMA).unwrap();
        assert!(config.string("command").is_err());
        let config = ConfigMap::decode(
            &map(vec![("args", Value::Array(vec![Value::from(1)]))]),
            SCHEMA,
        )
        .unwrap();
        assert!(config.strings("args").is_err());
        assert!(ConfigMap::decode(b"\xc1", SCHEMA).is_err());
    }

    #[test]
    fn missing_and_nil_attributes_are_found() {
        let plain = ConfigMap::decode(&map(vec![("command", "sh".into())]), SCHEMA).unwrap();
        assert_eq!(plain.first_missing(SCHEMA), Some("args"));
        assert_eq!(plain.first_nil(), None);
        let cty = ConfigMap::decode(
            &map(vec![("args", Value::Nil), ("command", "sh".into())]),
            SCHEMA,
        )
        .unwrap();
        assert_eq!(cty.first_missing(SCHEMA), None);
        assert_eq!(cty.first_nil(), Some("args"));
    }
}
