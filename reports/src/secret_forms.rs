//! The forms a secret takes in text. A value is rarely printed as it is: a plugin logs its
//! parameters as JSON, a shell prints a variable quoted, a page escapes `"` as `&quot;`, a URL
//! carries `%22`. Redaction ([`crate::redact::Redactor`]) looks for every form here, so that a
//! secret holding `"`, `\`, `'`, a non-ASCII character or a newline is hidden as surely as a
//! plain one.
//!
//! The forms are the value itself, each of [`ENCODINGS`] applied to it, and each applied to
//! another's result (a JSON document inside a shell-quoted word, JSON inside a web page); and
//! the same for every line of a multi-line value (a plugin that logs line by line). Forms
//! shorter than [`MIN_SECRET_LEN`] are left out: a short line of a long secret is ordinary
//! text, and redacting it would mangle every report.

use std::collections::BTreeSet;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use crate::redact::MIN_SECRET_LEN;

type Encoding = fn(&str) -> String;

/// How text is escaped on its way into output, one function each.
pub const ENCODINGS: &[(&str, Encoding)] = &[
    ("json", json),
    ("json, non-ASCII as \\u", json_ascii),
    ("json as Go writes it", json_go),
    ("inside shell double quotes", shell_double),
    ("inside shell single quotes", shell_single),
    ("inside shell single quotes, \"'\" form", shell_single_alt),
    ("XML", xml),
    ("HTML, numeric quotes", html_numeric),
    ("HTML, Python's html.escape", html_python),
    ("URL (percent-encoding)", url),
    ("URL form (space as +)", url_form),
    ("Rust debug", rust_debug),
];

/// Every form of `secret` (itself included) at least [`MIN_SECRET_LEN`] bytes long.
pub fn forms(secret: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut values = vec![secret];
    if secret.contains(['\n', '\r']) {
        values.extend(secret.lines().map(str::trim).filter(|l| !l.is_empty()));
    }
    for value in values {
        out.insert(value.to_string());
        for (_, outer) in ENCODINGS {
            let once = outer(value);
            for (_, inner) in ENCODINGS {
                out.insert(inner(&once));
            }
            out.insert(once);
        }
    }
    out.retain(|f| f.len() >= MIN_SECRET_LEN);
    out
}

/// A JSON string's content, as serde_json writes it (the least escaping JSON allows).
pub fn json(s: &str) -> String {
    let quoted = serde_json::to_string(s).unwrap_or_default();
    quoted[1..quoted.len() - 1].to_string()
}

/// JSON with every character outside ASCII as `\uXXXX` (Python's `json.dumps` by default).
fn json_ascii(s: &str) -> String {
    let mut out = String::new();
    for c in json(s).chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

/// JSON as Go's `encoding/json` writes it: `<`, `>`, `&`, U+2028 and U+2029 escaped.
fn json_go(s: &str) -> String {
    json(s)
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// What stands for `s` between double quotes in a POSIX shell.
fn shell_double(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if matches!(c, '$' | '`' | '"' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// What stands for `s` between single quotes: a quote closes, is escaped and reopens.
fn shell_single(s: &str) -> String {
    s.replace('\'', r"'\''")
}

fn shell_single_alt(s: &str) -> String {
    s.replace('\'', r#"'"'"'"#)
}

fn xml_with(s: &str, quot: &str, apos: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str(quot),
            '\'' => out.push_str(apos),
            c => out.push(c),
        }
    }
    out
}

/// XML text and attributes (`&quot;`, `&apos;`), as quick-xml writes them.
fn xml(s: &str) -> String {
    xml_with(s, "&quot;", "&apos;")
}

/// HTML as Go's `html.EscapeString` and minijinja write it (`&#34;`, `&#39;`).
fn html_numeric(s: &str) -> String {
    xml_with(s, "&#34;", "&#39;")
}

/// HTML as Python's `html.escape` writes it (`&quot;`, `&#x27;`).
fn html_python(s: &str) -> String {
    xml_with(s, "&quot;", "&#x27;")
}

/// Characters a URL component keeps as they are: letters, digits and `-._~`.
const URL_COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

fn url(s: &str) -> String {
    utf8_percent_encode(s, URL_COMPONENT).to_string()
}

/// `application/x-www-form-urlencoded`: a space is `+`.
fn url_form(s: &str) -> String {
    s.split(' ').map(url).collect::<Vec<_>>().join("+")
}

/// As Rust's `{:?}` writes a string's content (the reports' argv lines).
fn rust_debug(s: &str) -> String {
    s.escape_debug().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "Sup3r\"Sécret'x\\9";

    fn has(form: &str) {
        let all = forms(SECRET);
        assert!(all.contains(form), "{form:?} is not among {all:#?}");
    }

    #[test]
    fn each_encoding() {
        has(SECRET);
        has(r#"Sup3r\"Sécret'x\\9"#); // JSON
        has(r#"Sup3r\"S\u00e9cret'x\\9"#); // JSON, ASCII only
        has(r#"Sup3r\"Sécret'x\\9"#); // shell double quotes
        has(r#"Sup3r"Sécret'\''x\9"#); // shell single quotes
        has(r#"Sup3r"Sécret'"'"'x\9"#);
        has("Sup3r&quot;Sécret&apos;x\\9"); // XML
        has("Sup3r&#34;Sécret&#39;x\\9"); // HTML
        has("Sup3r&quot;Sécret&#x27;x\\9");
        has("Sup3r%22S%C3%A9cret%27x%5C9"); // URL
        has(r#"Sup3r\"Sécret\'x\\9"#); // Rust debug
        assert_eq!(json_go("a<b>&c"), r"a\u003cb\u003e\u0026c");
        assert_eq!(url_form("a b&c"), "a+b%26c");
        assert_eq!(json_ascii("😀"), r"\ud83d\ude00");
    }

    #[test]
    fn one_encoding_inside_another() {
        // JSON parameters inside a shell word, in double and in single quotes.
        has(r#"Sup3r\\\"Sécret'x\\\\9"#);
        has(r#"Sup3r\"Sécret'\''x\\9"#);
        // JSON inside a web page.
        has("Sup3r\\&#34;Sécret&#39;x\\\\9");
        // JSON inside a URL.
        has("Sup3r%5C%22S%C3%A9cret%27x%5C%5C9");
    }

    #[test]
    fn lines_of_a_multi_line_value_but_not_short_ones() {
        let all = forms("first-line-abc\n  second\"line \nxy\r\nlast");
        for form in ["first-line-abc", "second\"line", r#"second\"line"#, "last"] {
            assert!(all.contains(form), "{form:?} missing from {all:#?}");
        }
        assert!(all.contains(r#"first-line-abc\n  second\"line \nxy\r\nlast"#));
        // "xy" is too short to redact anywhere: it would mangle ordinary text.
        assert!(!all.contains("xy"), "{all:#?}");
        assert!(all.iter().all(|f| f.len() >= MIN_SECRET_LEN));
    }

    #[test]
    fn a_plain_secret_has_one_form() {
        assert_eq!(
            forms("plain-Token_1.x~"),
            BTreeSet::from(["plain-Token_1.x~".to_string()])
        );
    }
}
