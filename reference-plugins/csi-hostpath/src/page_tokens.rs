//! The page tokens of ListVolumes and ListSnapshots.
//!
//! A token names the last id a page returned; the next page starts after it, so deleting
//! entries between pages does not break a listing. Callers must treat tokens as opaque, and
//! a token this plugin could not have issued is ABORTED (see `rpc::page`). Two formats:
//!
//! - by default, `n1.` followed by the hex of the last id;
//! - under the opaque-page-tokens variant, the plugin's own binary format in unpadded
//!   base64url: a version byte ([`OPAQUE_VERSION`]), the id's bytes, and a 4-byte FNV-1a
//!   checksum of the two. A token of the other format, of another version, or whose
//!   checksum does not match was not issued by this plugin.

use crate::variants::{Variant, Variants};

const HEX_PREFIX: &str = "n1.";

/// The first byte of an opaque token.
const OPAQUE_VERSION: u8 = 2;

const CHECKSUM_BYTES: usize = 4;

/// The token that makes the next page start after `last_id`.
pub fn encode(variants: &Variants, last_id: &str) -> String {
    // opaque-page-tokens: another format than the default one, refused by the default plugin
    // (and the default format refused by this one).
    if variants.has(Variant::OpaquePageTokens) {
        let mut bytes = vec![OPAQUE_VERSION];
        bytes.extend_from_slice(last_id.as_bytes());
        let checksum = fnv1a(&bytes);
        bytes.extend_from_slice(&checksum.to_be_bytes());
        return base64url(&bytes);
    }
    let hex: String = last_id.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{HEX_PREFIX}{hex}")
}

/// `Some(None)` for the empty token (the first page), `Some(Some(id))` for one this plugin
/// issued, `None` for anything else.
pub fn decode(variants: &Variants, token: &str) -> Option<Option<String>> {
    if token.is_empty() {
        return Some(None);
    }
    let bytes = if variants.has(Variant::OpaquePageTokens) {
        decode_opaque(token)?
    } else {
        decode_hex(token.strip_prefix(HEX_PREFIX)?)?
    };
    String::from_utf8(bytes).ok().map(Some)
}

/// The id in an opaque token, if its version and checksum are right.
fn decode_opaque(token: &str) -> Option<Vec<u8>> {
    let bytes = unbase64url(token)?;
    if bytes.len() < 1 + 1 + CHECKSUM_BYTES || bytes[0] != OPAQUE_VERSION {
        return None;
    }
    let (signed, checksum) = bytes.split_at(bytes.len() - CHECKSUM_BYTES);
    if fnv1a(signed).to_be_bytes() != checksum {
        return None;
    }
    Some(signed[1..].to_vec())
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if hex.is_empty() || !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|pair| u8::from_str_radix(pair, 16).ok())
        })
        .collect()
}

/// 32-bit FNV-1a: a checksum against typos and truncation, not a signature.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |hash, b| {
        (hash ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

const BASE64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Unpadded base64url (RFC 4648, section 5).
fn base64url(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(BASE64URL[(n >> (18 - 6 * i) & 63) as usize]));
        }
    }
    out
}

/// The bytes of unpadded base64url; `None` for anything else (other characters, padding, a
/// length no encoding has, or stray bits in the last character).
fn unbase64url(text: &str) -> Option<Vec<u8>> {
    let sextets: Vec<u32> = text
        .bytes()
        .map(|c| BASE64URL.iter().position(|b| *b == c).map(|p| p as u32))
        .collect::<Option<_>>()?;
    if sextets.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(sextets.len() * 3 / 4);
    for chunk in sextets.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, s)| n | s << (18 - 6 * i));
        let bytes = chunk.len() - 1;
        // The bits past the last whole byte must be zero, or the encoding is not ours.
        if n & ((1 << (24 - 8 * bytes)) - 1) != 0 {
            return None;
        }
        out.extend((0..bytes).map(|i| (n >> (16 - 8 * i)) as u8));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_round_trips() {
        for len in 0..10 {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 37 + 250) as u8).collect();
            let text = base64url(&bytes);
            assert!(!text.contains('='));
            assert_eq!(unbase64url(&text), Some(bytes));
        }
        assert_eq!(base64url(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64url(b"fo"), "Zm8");
        assert_eq!(unbase64url("Zm9="), None);
        assert_eq!(unbase64url("Z"), None);
        assert_eq!(unbase64url("Zm9"), None, "stray bits");
    }

    #[test]
    fn each_format_decodes_only_its_own_tokens() {
        let plain = Variants::default();
        let opaque = Variants::new([Variant::OpaquePageTokens]);
        for id in ["a", "0b7d2c4e-volume", "ünïcode"] {
            let hex = encode(&plain, id);
            let own = encode(&opaque, id);
            assert_ne!(hex, own);
            assert_eq!(decode(&plain, &hex), Some(Some(id.to_string())));
            assert_eq!(decode(&opaque, &own), Some(Some(id.to_string())));
            assert_eq!(decode(&plain, &own), None);
            assert_eq!(decode(&opaque, &hex), None);
        }
        assert_eq!(decode(&opaque, ""), Some(None));
    }

    #[test]
    fn forged_opaque_tokens_are_refused() {
        let opaque = Variants::new([Variant::OpaquePageTokens]);
        let token = encode(&opaque, "volume-1");
        // Another id with the old checksum.
        let mut bytes = unbase64url(&token).expect("ours");
        bytes[1] = b'W';
        assert_eq!(decode(&opaque, &base64url(&bytes)), None);
        // Another version with a right checksum.
        let mut other = vec![OPAQUE_VERSION + 1];
        other.extend_from_slice(b"volume-1");
        other.extend_from_slice(&fnv1a(&other).to_be_bytes());
        assert_eq!(decode(&opaque, &base64url(&other)), None);
        // Truncated, and not base64url at all.
        assert_eq!(decode(&opaque, &token[..token.len() - 2]), None);
        assert_eq!(decode(&opaque, "not-a-token!"), None);
        assert_eq!(decode(&opaque, &base64url(b"x")), None);
    }
}
