//! Cutting text for reports.

/// The longest prefix of `text` of at most `max` bytes that ends on a character boundary.
pub fn head(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    #[test]
    fn heads_end_on_a_character_boundary() {
        assert_eq!(super::head("abc", 8), "abc");
        assert_eq!(super::head("aé", 2), "a");
        assert_eq!(super::head("aé", 3), "aé");
    }
}
