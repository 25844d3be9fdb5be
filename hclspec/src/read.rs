//! Reading configuration bytes the way a driver does (the reverse of [`crate::msgpack`]): for
//! tests, and for a Rust driver handling `SetConfig` / `StartTask`.
//!
//! Like Go's `base.MsgPackDecode` (`RawToString`), both msgpack str and bin become strings.
//! Extension types are refused, and so are trailing bytes after the first value.

use serde_json::Value as J;

use crate::value::float_json;

/// Why bytes are not a readable configuration.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ReadError {
    /// Not msgpack, or cut short.
    #[error("failed to read msgpack: {0}")]
    Msgpack(String),
    /// Bytes left over after one complete value.
    #[error("failed to read msgpack: {0} byte(s) follow the first value")]
    TrailingBytes(usize),
    /// A string or bin that is not UTF-8.
    #[error("failed to read msgpack at {0}: string is not UTF-8")]
    NotUtf8(String),
    /// A map key that is not a string.
    #[error("failed to read msgpack at {path}: map key is {found}, expected a string")]
    NonStringKey {
        /// Where.
        path: String,
        /// What the key was.
        found: String,
    },
    /// An extension value (go-cty writes ext 0 only for unknown values, which Nomad never sends).
    #[error("failed to read msgpack at {path}: extension type {ext_type} is not configuration")]
    Extension {
        /// Where.
        path: String,
        /// The extension type number.
        ext_type: i8,
    },
}

/// Reads exactly one msgpack value.
pub fn read_rmpv(bytes: &[u8]) -> Result<rmpv::Value, ReadError> {
    let mut rest = bytes;
    let value =
        rmpv::decode::read_value(&mut rest).map_err(|e| ReadError::Msgpack(e.to_string()))?;
    if !rest.is_empty() {
        return Err(ReadError::TrailingBytes(rest.len()));
    }
    Ok(value)
}

/// Reads one msgpack value as JSON: integers stay integers, floats become JSON numbers
/// (non-finite ones the strings `+Inf`, `-Inf`, `NaN`), str and bin become strings.
pub fn read_json(bytes: &[u8]) -> Result<J, ReadError> {
    rmpv_to_json(&read_rmpv(bytes)?, "$")
}

/// Converts an already read msgpack value to JSON (see [`read_json`]).
pub fn rmpv_to_json(v: &rmpv::Value, path: &str) -> Result<J, ReadError> {
    use rmpv::Value as M;
    Ok(match v {
        M::Nil => J::Null,
        M::Boolean(b) => J::Bool(*b),
        M::Integer(i) => match (i.as_i64(), i.as_u64()) {
            (Some(x), _) => J::from(x),
            (None, Some(x)) => J::from(x),
            (None, None) => return Err(ReadError::Msgpack(format!("integer {i} out of range"))),
        },
        M::F32(f) => float_json(f64::from(*f)),
        M::F64(f) => float_json(*f),
        M::String(s) => match s.as_str() {
            Some(s) => J::String(s.to_string()),
            None => return Err(ReadError::NotUtf8(path.to_string())),
        },
        M::Binary(b) => match std::str::from_utf8(b) {
            Ok(s) => J::String(s.to_string()),
            Err(_) => return Err(ReadError::NotUtf8(path.to_string())),
        },
        M::Array(items) => J::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, x)| rmpv_to_json(x, &format!("{path}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        M::Map(pairs) => {
            let mut out = serde_json::Map::new();
            for (k, x) in pairs {
                let key = match k {
                    M::String(s) => s
                        .as_str()
                        .ok_or_else(|| ReadError::NotUtf8(path.to_string()))?
                        .to_string(),
                    M::Binary(b) => std::str::from_utf8(b)
                        .map_err(|_| ReadError::NotUtf8(path.to_string()))?
                        .to_string(),
                    other => {
                        return Err(ReadError::NonStringKey {
                            path: path.to_string(),
                            found: other.to_string(),
                        });
                    }
                };
                let child = format!("{path}.{key}");
                out.insert(key, rmpv_to_json(x, &child)?);
            }
            J::Object(out)
        }
        M::Ext(t, _) => {
            return Err(ReadError::Extension {
                path: path.to_string(),
                ext_type: *t,
            });
        }
    })
}
