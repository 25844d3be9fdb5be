//! The environment Nomad gives a host volume plugin, variable for variable, in the order
//! Nomad's client builds it (client/hostvolumemanager/host_volume_plugin.go).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// DHV_PARAMETERS: Go's `json.Marshal` of the volume's `map[string]string`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parameters {
    /// The volume has no parameters: Go marshals the nil map as `null`.
    Null,
    /// Marshalled with keys sorted, compact; an empty map is `{}`.
    Map(BTreeMap<String, String>),
}

impl Parameters {
    /// Parse a user-supplied `--parameters` value: `null` or a JSON object of strings.
    pub fn parse(json: &str) -> Result<Parameters, String> {
        let value: serde_json::Value =
            serde_json::from_str(json).map_err(|e| format!("not valid JSON: {e}"))?;
        match value {
            serde_json::Value::Null => Ok(Parameters::Null),
            serde_json::Value::Object(map) => {
                let mut out = BTreeMap::new();
                for (k, v) in map {
                    match v {
                        serde_json::Value::String(s) => {
                            if k.contains('\0') || s.contains('\0') {
                                return Err(format!("parameter {k:?} contains a NUL byte"));
                            }
                            out.insert(k, s);
                        }
                        other => {
                            return Err(format!(
                                "parameter {k:?} is {}, but Nomad passes parameters as a map of strings",
                                json_kind(&other)
                            ));
                        }
                    }
                }
                Ok(Parameters::Map(out))
            }
            other => Err(format!(
                "expected a JSON object of strings or null, got {}",
                json_kind(&other)
            )),
        }
    }

    /// The parameters with one more entry (a `Null` becomes a one-entry map).
    pub fn with(&self, key: &str, value: &str) -> Parameters {
        let mut map = match self {
            Parameters::Null => BTreeMap::new(),
            Parameters::Map(m) => m.clone(),
        };
        map.insert(key.to_string(), value.to_string());
        Parameters::Map(map)
    }

    /// Values of parameters whose names suggest secrets (password, token...): reports redact
    /// them.
    pub fn secret_values(&self) -> Vec<&str> {
        match self {
            Parameters::Null => Vec::new(),
            Parameters::Map(m) => m
                .iter()
                .filter(|(k, _)| nomad_conform_reports::redact::is_secret_name(k))
                .map(|(_, v)| v.as_str())
                .collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Parameters::Null => true,
            Parameters::Map(m) => m.is_empty(),
        }
    }

    /// Exactly the bytes Go's encoding/json produces for this map.
    pub fn to_go_json(&self) -> String {
        match self {
            Parameters::Null => "null".into(),
            Parameters::Map(m) => {
                let mut out = String::from("{");
                for (i, (k, v)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&go_json_string(k));
                    out.push(':');
                    out.push_str(&go_json_string(v));
                }
                out.push('}');
                out
            }
        }
    }
}

/// A JSON string literal as Go's encoding/json writes it (HTML-safe escaping on, as with
/// `json.Marshal`): `<`, `>`, `&`, U+2028 and U+2029 are escaped as `\uXXXX`; `\b`, `\f`, `\n`,
/// `\r`, `\t` use short escapes (Go 1.22+); other control characters are `\u00XX`.
pub fn go_json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// What Nomad knows about a volume when it calls create or delete.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeRequest {
    pub volumes_dir: PathBuf,
    pub plugin_dir: PathBuf,
    pub node_pool: String,
    pub namespace: String,
    pub name: String,
    pub id: String,
    pub capacity_min: i64,
    pub capacity_max: i64,
    pub node_id: String,
    pub parameters: Parameters,
}

pub fn fingerprint_env() -> Vec<(String, String)> {
    vec![("DHV_OPERATION".into(), "fingerprint".into())]
}

impl VolumeRequest {
    /// The create environment, in Nomad's order. There is no DHV_CREATED_PATH on create.
    pub fn create_env(&self) -> Vec<(String, String)> {
        let pairs = [
            ("DHV_OPERATION", "create".to_string()),
            ("DHV_VOLUMES_DIR", self.volumes_dir.display().to_string()),
            ("DHV_PLUGIN_DIR", self.plugin_dir.display().to_string()),
            ("DHV_NODE_POOL", self.node_pool.clone()),
            ("DHV_NAMESPACE", self.namespace.clone()),
            ("DHV_VOLUME_NAME", self.name.clone()),
            ("DHV_VOLUME_ID", self.id.clone()),
            ("DHV_CAPACITY_MIN_BYTES", self.capacity_min.to_string()),
            ("DHV_CAPACITY_MAX_BYTES", self.capacity_max.to_string()),
            ("DHV_NODE_ID", self.node_id.clone()),
            ("DHV_PARAMETERS", self.parameters.to_go_json()),
        ];
        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    /// The delete environment, in Nomad's order. There are no capacity variables on delete.
    pub fn delete_env(&self, created_path: &str) -> Vec<(String, String)> {
        let pairs = [
            ("DHV_OPERATION", "delete".to_string()),
            ("DHV_VOLUMES_DIR", self.volumes_dir.display().to_string()),
            ("DHV_PLUGIN_DIR", self.plugin_dir.display().to_string()),
            ("DHV_NODE_POOL", self.node_pool.clone()),
            ("DHV_CREATED_PATH", created_path.to_string()),
            ("DHV_NAMESPACE", self.namespace.clone()),
            ("DHV_VOLUME_NAME", self.name.clone()),
            ("DHV_VOLUME_ID", self.id.clone()),
            ("DHV_NODE_ID", self.node_id.clone()),
            ("DHV_PARAMETERS", self.parameters.to_go_json()),
        ];
        pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
    }

    /// The delete Nomad issues when it fails to save a newly created volume in client state:
    /// DHV_CREATED_PATH is the volumes directory itself, name and namespace are empty.
    pub fn auto_delete_env(&self) -> Vec<(String, String)> {
        let quirk = VolumeRequest {
            name: String::new(),
            namespace: String::new(),
            ..self.clone()
        };
        quirk.delete_env(&self.volumes_dir.display().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> VolumeRequest {
        VolumeRequest {
            volumes_dir: "/v".into(),
            plugin_dir: "/p".into(),
            node_pool: "default".into(),
            namespace: "default".into(),
            name: "vol".into(),
            id: "id".into(),
            capacity_min: 0,
            capacity_max: 0,
            node_id: "node".into(),
            parameters: Parameters::Null,
        }
    }

    #[test]
    fn go_json_matches_go() {
        // Values checked against Go's json.Marshal(map[string]string{...}).
        let p = Parameters::parse(r#"{"b":"<x>&","a":"q\"\\\n\u0001\u2028é"}"#).unwrap();
        assert_eq!(
            p.to_go_json(),
            r#"{"a":"q\"\\\n\u0001\u2028é","b":"\u003cx\u003e\u0026"}"#
        );
        assert_eq!(Parameters::Null.to_go_json(), "null");
        assert_eq!(Parameters::Map(BTreeMap::new()).to_go_json(), "{}");
        assert_eq!(go_json_string("\u{8}\u{c}\t\r"), r#""\b\f\t\r""#);
    }

    #[test]
    fn parameters_must_be_strings() {
        assert!(Parameters::parse("null").unwrap() == Parameters::Null);
        assert!(
            Parameters::parse(r#"{"a":1}"#)
                .unwrap_err()
                .contains("map of strings")
        );
        assert!(Parameters::parse("[1]").unwrap_err().contains("an array"));
        assert!(
            Parameters::parse("{")
                .unwrap_err()
                .contains("not valid JSON")
        );
    }

    #[test]
    fn env_lists_are_nomads() {
        let r = request();
        let create: Vec<String> = r.create_env().into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            create,
            [
                "DHV_OPERATION",
                "DHV_VOLUMES_DIR",
                "DHV_PLUGIN_DIR",
                "DHV_NODE_POOL",
                "DHV_NAMESPACE",
                "DHV_VOLUME_NAME",
                "DHV_VOLUME_ID",
                "DHV_CAPACITY_MIN_BYTES",
                "DHV_CAPACITY_MAX_BYTES",
                "DHV_NODE_ID",
                "DHV_PARAMETERS"
            ]
        );
        let delete = r.delete_env("/v/id");
        assert!(
            delete
                .iter()
                .any(|(k, v)| k == "DHV_CREATED_PATH" && v == "/v/id")
        );
        assert!(!delete.iter().any(|(k, _)| k.starts_with("DHV_CAPACITY")));
        let quirk = r.auto_delete_env();
        let get = |k: &str| quirk.iter().find(|(n, _)| n == k).unwrap().1.clone();
        assert_eq!(get("DHV_CREATED_PATH"), "/v");
        assert_eq!(get("DHV_VOLUME_NAME"), "");
        assert_eq!(get("DHV_NAMESPACE"), "");
        assert_eq!(get("DHV_VOLUME_ID"), "id");
    }
}
