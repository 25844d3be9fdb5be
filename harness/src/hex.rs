//! Lowercase hexadecimal, two digits a byte, no separators: driver payloads that are not text
//! in the driver record (`plugins::driver::protojson`), and magic numbers and masks in
//! binfmt_misc entries (`executable`).

use std::fmt::Write as _;

pub fn encode(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The bytes of `text`, or `None` when it is not an even number of hex digits.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trips_and_refuses_what_is_not_hex() {
        let bytes = [0x00, 0x7f, 0x80, 0xff];
        assert_eq!(super::encode(&bytes), "007f80ff");
        assert_eq!(super::decode("007F80ff").unwrap(), bytes);
        assert_eq!(super::decode("abc"), None);
        assert_eq!(super::decode("zz"), None);
        assert_eq!(super::decode("é0"), None);
    }
}
