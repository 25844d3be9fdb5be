//! Reading a host volume plugin's stdout the way the Nomad client does: one `json.Unmarshal`
//! over the whole of stdout into a struct, with Go's decoding rules (keys matched
//! case-insensitively, the last occurrence winning; integers must be integer literals).

use serde_json::{Map, Value};

use super::env::json_kind;

/// Why stdout is not exactly one JSON value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StdoutProblem {
    Empty,
    /// Bigger than what the capture limit (stdout's and stderr's together) kept of it: the
    /// harness cannot see all of it.
    TooLarge {
        total: u64,
    },
    /// Not one JSON value; the decoder's message.
    NotJson(String),
}

impl std::fmt::Display for StdoutProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StdoutProblem::Empty => write!(f, "stdout is empty"),
            StdoutProblem::TooLarge { total } => write!(
                f,
                "stdout is {total} bytes, more than the capture limit keeps of it (one limit for stdout and stderr together; raise --capture-limit to inspect it)"
            ),
            StdoutProblem::NotJson(e) => write!(f, "stdout is not exactly one JSON value: {e}"),
        }
    }
}

/// Decode the whole of stdout as one JSON value. Surrounding whitespace is allowed, anything else
/// after the value is not (Go: "invalid character after top-level value").
pub fn single_json(stdout: Option<&[u8]>, total: u64) -> Result<Value, StdoutProblem> {
    let Some(bytes) = stdout else {
        return Err(StdoutProblem::TooLarge { total });
    };
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(StdoutProblem::Empty);
    }
    // Go's decoder takes any bytes inside a string and replaces invalid UTF-8 with U+FFFD;
    // outside a string they are a syntax error either way (U+FFFD is no JSON token either).
    let text = String::from_utf8_lossy(bytes);
    let depth = nesting_depth(text.as_bytes());
    if depth > GO_MAX_DEPTH {
        return Err(StdoutProblem::NotJson(format!(
            "exceeded max depth: {depth} nested arrays or objects, more than the {GO_MAX_DEPTH} Go's decoder allows"
        )));
    }
    let not_json = |e: serde_json::Error| StdoutProblem::NotJson(e.to_string());
    if depth <= SHALLOW_DEPTH {
        return serde_json::from_str(&text).map_err(not_json);
    }
    // Deeper than serde_json's own limit but within Go's: decoded on a thread with a stack
    // large enough for it, and only the top levels kept (Nomad reads top-level fields only).
    let owned = text.into_owned();
    std::thread::Builder::new()
        .name("dhv-deep-json".into())
        .stack_size(512 << 20)
        .spawn(move || {
            use serde::Deserialize as _;
            let mut de = serde_json::Deserializer::from_str(&owned);
            de.disable_recursion_limit();
            let v = Value::deserialize(&mut de).and_then(|v| de.end().map(|_| v));
            v.map(|v| shallow(v, 2)).map_err(not_json)
        })
        .map_err(|e| StdoutProblem::NotJson(format!("cannot decode a deeply nested value: {e}")))?
        .join()
        .unwrap_or_else(|_| {
            Err(StdoutProblem::NotJson(
                "cannot decode a deeply nested value".into(),
            ))
        })
}

/// The nesting Go's decoder allows (`maxNestingDepth` in encoding/json/scanner.go).
const GO_MAX_DEPTH: usize = 10_000;

/// Up to this nesting serde_json decodes on any thread (its own limit is 128).
const SHALLOW_DEPTH: usize = 100;

/// The deepest nesting of arrays and objects in `bytes`, brackets inside strings not counted.
fn nesting_depth(bytes: &[u8]) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in bytes {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// `v` with every array and object below `keep` levels emptied (dropped here, on the thread
/// whose stack can take it).
fn shallow(v: Value, keep: usize) -> Value {
    match v {
        Value::Array(_) if keep == 0 => Value::Array(Vec::new()),
        Value::Object(_) if keep == 0 => Value::Object(Map::new()),
        Value::Array(a) => Value::Array(a.into_iter().map(|x| shallow(x, keep - 1)).collect()),
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, x)| (k, shallow(x, keep - 1)))
                .collect(),
        ),
        other => other,
    }
}

/// The only char of `it`, if it has exactly one (Go's mappings are rune to rune).
fn one_char(mut it: impl Iterator<Item = char>) -> Option<char> {
    let c = it.next()?;
    it.next().is_none().then_some(c)
}

/// Go's case folding of a field name (encoding/json's foldName: ASCII letters upper-cased,
/// any other rune mapped through unicode.ToUpper(unicode.ToLower(r))), so that `"PATH"`,
/// `"Path"` and `"byteſ"` (U+017F folds to S) match as they do for Nomad.
fn go_fold(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii() {
                return c.to_ascii_uppercase();
            }
            let lower = one_char(c.to_lowercase()).unwrap_or(c);
            one_char(lower.to_uppercase()).unwrap_or(lower)
        })
        .collect()
}

/// A field of an object, looked up like Go's decoder: keys compared case-insensitively, the
/// last matching key in the document wins.
pub fn field<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    let name = go_fold(name);
    obj.iter()
        .rev()
        .find(|(k, _)| go_fold(k) == name)
        .map(|(_, v)| v)
}

/// What Nomad makes of a fingerprint response's version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VersionField {
    /// A string (not yet checked against the go-version grammar).
    Present(String),
    /// Missing or null: Nomad ends up with a nil version and the agent panics.
    Missing(&'static str),
    /// Decoding fails: the plugin is rejected.
    Invalid(String),
}

pub fn version_field(v: &Value) -> VersionField {
    match v {
        // `null` into a struct is a no-op in Go: the version stays nil.
        Value::Null => VersionField::Missing("stdout is null"),
        Value::Object(obj) => match field(obj, "version") {
            None => VersionField::Missing("the object has no \"version\" key"),
            Some(Value::Null) => VersionField::Missing("\"version\" is null"),
            Some(Value::String(s)) => VersionField::Present(s.clone()),
            Some(other) => VersionField::Invalid(format!(
                "\"version\" is {} ({other}), not a string",
                json_kind(other)
            )),
        },
        other => VersionField::Invalid(format!(
            "stdout is {}, not an object: Go cannot decode it into the fingerprint response",
            json_kind(other)
        )),
    }
}

/// A field as Go decodes it into a typed struct field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Field<T> {
    /// Not in the object: the Go zero value.
    Absent,
    /// JSON null: also leaves the Go zero value.
    Null,
    Value(T),
    /// The decode fails with this message.
    Invalid(String),
}

impl<T> Field<T> {
    /// The decode error, if the field does not decode.
    pub fn invalid(&self) -> Option<&str> {
        match self {
            Field::Invalid(e) => Some(e),
            _ => None,
        }
    }
}

/// A create (or delete) response: `{"path": string, "bytes": int64, "error": string}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateResponse {
    pub path: Field<String>,
    pub bytes: Field<i64>,
    pub error: Field<String>,
}

impl CreateResponse {
    /// The path Nomad stores ("" when absent or null), if the response decodes at all.
    pub fn stored_path(&self) -> Option<String> {
        match &self.path {
            Field::Value(p) => Some(p.clone()),
            Field::Absent | Field::Null => Some(String::new()),
            Field::Invalid(_) => None,
        }
    }
}

pub fn create_response(v: &Value) -> Result<CreateResponse, String> {
    let obj = match v {
        Value::Object(o) => o,
        // Go: unmarshalling null into a struct is a no-op, every field keeps its zero value.
        Value::Null => {
            return Ok(CreateResponse {
                path: Field::Absent,
                bytes: Field::Absent,
                error: Field::Absent,
            });
        }
        other => return Err(format!("stdout is {}, not a JSON object", json_kind(other))),
    };
    Ok(CreateResponse {
        path: string_field(obj, "path"),
        bytes: int64_field(obj, "bytes"),
        error: string_field(obj, "error"),
    })
}

fn string_field(obj: &Map<String, Value>, name: &str) -> Field<String> {
    match field(obj, name) {
        None => Field::Absent,
        Some(Value::Null) => Field::Null,
        Some(Value::String(s)) => Field::Value(s.clone()),
        Some(other) => Field::Invalid(format!(
            "\"{name}\" is {} ({other}), not a string",
            json_kind(other)
        )),
    }
}

/// Go's decoding of a JSON number into int64: an integer literal (no fraction, no exponent)
/// within range. serde_json keeps integer literals as i64/u64 and everything else as f64, which
/// is exactly the distinction needed.
fn int64_field(obj: &Map<String, Value>, name: &str) -> Field<i64> {
    match field(obj, name) {
        None => Field::Absent,
        Some(Value::Null) => Field::Null,
        Some(Value::Number(n)) => match n.as_i64() {
            Some(i) => Field::Value(i),
            None if n.is_u64() => Field::Invalid(format!(
                "\"{name}\" is {n}, outside the range of a 64-bit signed integer"
            )),
            None => Field::Invalid(format!(
                "\"{name}\" is {n}, not an integer literal (Go cannot decode a fraction or an exponent into int64)"
            )),
        },
        Some(other) => Field::Invalid(format!(
            "\"{name}\" is {} ({other}), not a number",
            json_kind(other)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Value, StdoutProblem> {
        single_json(Some(s.as_bytes()), s.len() as u64)
    }

    #[test]
    fn whole_stdout_is_one_value() {
        assert!(parse("  {\"version\":\"1\"}\n\n").is_ok());
        assert!(matches!(parse("{} {}"), Err(StdoutProblem::NotJson(_))));
        assert!(matches!(
            parse("{}\nlog line"),
            Err(StdoutProblem::NotJson(_))
        ));
        assert_eq!(parse(" \n"), Err(StdoutProblem::Empty));
        assert_eq!(
            single_json(None, 10),
            Err(StdoutProblem::TooLarge { total: 10 })
        );
    }

    #[test]
    fn decoded_as_go_decodes() {
        // Invalid UTF-8 in a string becomes U+FFFD; outside a string it is an error.
        let v = single_json(Some(b"{\"error\":\"a\xffb\"}"), 12).unwrap();
        assert_eq!(v["error"], "a\u{fffd}b");
        assert!(single_json(Some(b"{\"a\":1}\xff"), 8).is_err());
        // Nesting beyond serde_json's 128 but within Go's 10000 decodes.
        let deep = |n: usize| {
            format!(
                "{{\"x\":{}{},\"path\":\"/p\"}}",
                "[".repeat(n),
                "]".repeat(n)
            )
        };
        let v = parse(&deep(5000)).unwrap();
        assert_eq!(create_response(&v).unwrap().path, Field::Value("/p".into()));
        assert!(
            matches!(parse(&deep(10_001)), Err(StdoutProblem::NotJson(e)) if e.contains("max depth"))
        );
        // Brackets inside strings do not count.
        assert_eq!(nesting_depth(br#"{"a":"[[[\"["}"#), 1);
        // Unicode case folding of keys: U+017F (long s) folds to S, as in Go.
        let v = parse("{\"byte\u{17f}\":7,\"PATH\":\"/q\"}").unwrap();
        let r = create_response(&v).unwrap();
        assert_eq!(r.bytes, Field::Value(7));
        assert_eq!(r.path, Field::Value("/q".into()));
        // A top-level null decodes into a struct as nothing at all.
        assert_eq!(create_response(&Value::Null).unwrap().path, Field::Absent);
    }

    #[test]
    fn version_like_nomad() {
        let v = |s: &str| version_field(&parse(s).unwrap());
        assert_eq!(
            v(r#"{"version":"1.0"}"#),
            VersionField::Present("1.0".into())
        );
        assert_eq!(v(r#"{"VERSION":"2"}"#), VersionField::Present("2".into()));
        assert_eq!(
            v(r#"{"version":"1","Version":"2"}"#),
            VersionField::Present("2".into())
        );
        assert!(matches!(v("{}"), VersionField::Missing(_)));
        assert!(matches!(v("null"), VersionField::Missing(_)));
        assert!(matches!(v(r#"{"version":null}"#), VersionField::Missing(_)));
        assert!(matches!(v(r#"{"version":1}"#), VersionField::Invalid(_)));
        assert!(matches!(v("[]"), VersionField::Invalid(_)));
    }

    #[test]
    fn bytes_like_go_int64() {
        let b = |s: &str| create_response(&parse(s).unwrap()).unwrap().bytes;
        assert_eq!(b(r#"{"bytes":5}"#), Field::Value(5));
        assert_eq!(b(r#"{"bytes":-5}"#), Field::Value(-5));
        assert_eq!(b(r#"{}"#), Field::Absent);
        assert_eq!(b(r#"{"bytes":null}"#), Field::Null);
        for bad in [
            r#"{"bytes":5.0}"#,
            r#"{"bytes":1e3}"#,
            r#"{"bytes":"5"}"#,
            r#"{"bytes":9223372036854775808}"#,
            r#"{"bytes":99999999999999999999999}"#,
        ] {
            assert!(matches!(b(bad), Field::Invalid(_)), "{bad}");
        }
        assert_eq!(
            b(r#"{"bytes":9223372036854775807}"#),
            Field::Value(i64::MAX)
        );
    }

    #[test]
    fn path_and_error() {
        let r = create_response(&parse(r#"{"Path":"/a","error":"x"}"#).unwrap()).unwrap();
        assert_eq!(r.path, Field::Value("/a".into()));
        assert_eq!(r.error, Field::Value("x".into()));
        let r = create_response(&parse(r#"{"path":null}"#).unwrap()).unwrap();
        assert_eq!(r.stored_path(), Some(String::new()));
        let r = create_response(&parse(r#"{"path":3}"#).unwrap()).unwrap();
        assert_eq!(r.stored_path(), None);
        assert!(create_response(&parse("[]").unwrap()).is_err());
    }
}
