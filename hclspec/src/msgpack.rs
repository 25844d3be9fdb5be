//! Encoding configuration the two ways a driver can receive it.
//!
//! [`encode_cty`] writes what Nomad sends (`SetConfig.msgpack_config`,
//! `TaskConfig.msgpack_driver_config`): go-cty's `msgpack.Marshal(val, val.Type())`, encoded by
//! vmihailenco/msgpack with compact integers and no compact floats:
//!
//! | value | bytes |
//! |---|---|
//! | null (an unset attribute) | `c0` |
//! | bool | `c2` / `c3` |
//! | exact int64 | smallest form: fixint `00`–`7f`, negative fixint `e0`–`ff`, then `cc` u8, `cd` u16, `ce` u32, `cf` u64 for positives and `d0` i8, `d1` i16, `d2` i32, `d3` i64 for negatives |
//! | non-integer exact in float64, ±Inf | `cb` + 8 bytes (never `ca` float32) |
//! | any other number | its decimal text as a string |
//! | string | fixstr `a0`–`bf`, `d9` str8, `da` str16, `db` str32 |
//! | list, set, tuple | fixarray `90`–`9f`, `dc`, `dd` |
//! | map, object | fixmap `80`–`8f`, `de`, `df`; keys sorted bytewise (an object has every attribute of its spec, nil where unset) |
//!
//! [`encode_plain`] writes what Nomad's own driver tests send (`EncodeConcreteDriverConfig`):
//! hashicorp/go-msgpack (`base.MsgpackHandle`, `WriteExt` off) encoding a Go
//! `map[string]interface{}` holding only the given fields. Differences from the go-cty form:
//! strings never use `d9` str8 (the pre-2013 "raw" format: fixstr, `da`, `db`); integers are
//! Go `int`s, so positives above 127 are written signed (`d1` i16, `d2` i32, `d3` i64 — never
//! `cc`..`ce`), except integers above `i64::MAX`, written as Go `uint64` (`cf`); keys keep the
//! given order (Go's map order is random anyway). Both forms are plain msgpack maps that a Go
//! driver decodes with `base.MsgPackDecode` into its config struct, and `rmp-serde` or
//! [`crate::read`] decode in Rust.

use crate::number::WireNumber;
use crate::value::Value;

/// Encodes a decoded value as go-cty msgpack, byte for byte as Nomad sends it.
pub fn encode_cty(value: &Value) -> Vec<u8> {
    let mut buf = Vec::new();
    write_cty(&mut buf, value);
    buf
}

fn write_cty(buf: &mut Vec<u8>, value: &Value) {
    // Writing into a Vec<u8> cannot fail (rmp's error type for it is `Infallible`).
    match value {
        Value::Null => {
            let _ = rmp::encode::write_nil(buf);
        }
        Value::Bool(b) => {
            let _ = rmp::encode::write_bool(buf, *b);
        }
        Value::Number(n) => match n.wire() {
            WireNumber::Int(i) => {
                let _ = rmp::encode::write_sint(buf, i);
            }
            WireNumber::Float(f) => {
                let _ = rmp::encode::write_f64(buf, f);
            }
            WireNumber::Decimal(s) => {
                let _ = rmp::encode::write_str(buf, &s);
            }
        },
        Value::String(s) => {
            let _ = rmp::encode::write_str(buf, s);
        }
        Value::List(e) | Value::Set(e) | Value::Tuple(e) => {
            let _ = rmp::encode::write_array_len(buf, len32(e.len()));
            e.iter().for_each(|x| write_cty(buf, x));
        }
        Value::Map(m) | Value::Object(m) => {
            // BTreeMap<String, _> iterates in bytewise key order, as Go's sort.Strings sorts.
            let _ = rmp::encode::write_map_len(buf, len32(m.len()));
            for (k, v) in m {
                let _ = rmp::encode::write_str(buf, k);
                write_cty(buf, v);
            }
        }
    }
}

fn len32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Encodes JSON-shaped fields as go-msgpack would encode the same Go map (see module docs).
pub fn encode_plain(value: &serde_json::Value) -> Vec<u8> {
    let mut buf = Vec::new();
    write_plain(&mut buf, value);
    buf
}

fn write_plain(buf: &mut Vec<u8>, value: &serde_json::Value) {
    use serde_json::Value as J;
    match value {
        J::Null => buf.push(0xc0),
        J::Bool(b) => buf.push(if *b { 0xc3 } else { 0xc2 }),
        J::Number(n) => {
            if let Some(i) = n.as_i64() {
                go_int(buf, i);
            } else if let Some(u) = n.as_u64() {
                buf.push(0xcf);
                buf.extend_from_slice(&u.to_be_bytes());
            } else {
                buf.push(0xcb);
                buf.extend_from_slice(&n.as_f64().unwrap_or(0.0).to_bits().to_be_bytes());
            }
        }
        J::String(s) => {
            legacy_len(buf, s.len(), 32, 0xa0, 0xda, 0xdb);
            buf.extend_from_slice(s.as_bytes());
        }
        J::Array(items) => {
            legacy_len(buf, items.len(), 16, 0x90, 0xdc, 0xdd);
            items.iter().for_each(|x| write_plain(buf, x));
        }
        J::Object(m) => {
            legacy_len(buf, m.len(), 16, 0x80, 0xde, 0xdf);
            for (k, v) in m {
                legacy_len(buf, k.len(), 32, 0xa0, 0xda, 0xdb);
                buf.extend_from_slice(k.as_bytes());
                write_plain(buf, v);
            }
        }
    }
}

/// go-msgpack's `EncodeInt`: fixints, then signed widths only.
fn go_int(buf: &mut Vec<u8>, i: i64) {
    if (-32..=127).contains(&i) {
        buf.push(i as u8);
    } else if i > 127 {
        if i <= i64::from(i16::MAX) {
            buf.push(0xd1);
            buf.extend_from_slice(&(i as i16).to_be_bytes());
        } else if i <= i64::from(i32::MAX) {
            buf.push(0xd2);
            buf.extend_from_slice(&(i as i32).to_be_bytes());
        } else {
            buf.push(0xd3);
            buf.extend_from_slice(&i.to_be_bytes());
        }
    } else if i >= i64::from(i8::MIN) {
        buf.push(0xd0);
        buf.push(i as i8 as u8);
    } else if i >= i64::from(i16::MIN) {
        buf.push(0xd1);
        buf.extend_from_slice(&(i as i16).to_be_bytes());
    } else if i >= i64::from(i32::MIN) {
        buf.push(0xd2);
        buf.extend_from_slice(&(i as i32).to_be_bytes());
    } else {
        buf.push(0xd3);
        buf.extend_from_slice(&i.to_be_bytes());
    }
}

/// A container or string header without an 8-bit length form.
fn legacy_len(buf: &mut Vec<u8>, len: usize, fix_limit: usize, fix: u8, b16: u8, b32: u8) {
    if len < fix_limit {
        buf.push(fix | len as u8);
    } else if len <= usize::from(u16::MAX) {
        buf.push(b16);
        buf.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        buf.push(b32);
        buf.extend_from_slice(&len32(len).to_be_bytes());
    }
}
