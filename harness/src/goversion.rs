//! The version grammar Nomad applies to the `version` a host-volume plugin reports.
//!
//! Nomad decodes that string with `NewVersion` from hashicorp/go-version v1.9. No Rust crate
//! speaks that dialect (it is looser than SemVer), so this module implements it from the
//! grammar:
//!
//! ```text
//! version    = [ "v" ] core [ prerelease ] [ "+" idents ]
//! core       = digits *( "." digits )            ; each run must fit in an i64
//! prerelease = "-" idents-starting-with-a-digit
//!            | [ "-" ] idents-starting-with-a-letter, "-" or "~"
//! idents     = ident *( "." ident )
//! ident      = 1*( ALPHA / DIGIT / "-" / "~" )
//! ```
//!
//! The input is taken as is: no whitespace is trimmed. Two corners of the Go pattern are easy
//! to miss and are reproduced here exactly:
//!
//! * the separating dash is optional before a letter, so `1.0beta` carries the prerelease
//!   `beta` (and prints as `1.0.0-beta`);
//! * a dash is itself one of the characters a letter-led prerelease may start with, so when
//!   the dash cannot act as a separator it becomes part of the prerelease: `1.0-` has the
//!   prerelease `-`, `1.0-.x` has `-.x`, while `1.0--x` has `-x` (the first dash separates).
//!
//! Comparison follows go-version's `Compare`, quirks included, which is why [`GoVersion`]
//! offers [`GoVersion::compare`] rather than implementing `Ord`; see that method.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// A version as go-version's `NewVersion` understands it.
///
/// Equality (`==`) is field equality and includes the original spelling; use
/// [`GoVersion::compare`] for go-version's notion of "same version".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoVersion {
    /// Numeric segments, padded with zeros to at least three.
    segments: Vec<i64>,
    /// Prerelease without the separating dash; empty when there is none.
    prerelease: String,
    /// Build metadata without the `+`; empty when there is none.
    metadata: String,
    /// The string that was parsed, verbatim.
    original: String,
}

/// Why a string is not a version go-version accepts.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GoVersionError {
    /// The string does not match the grammar at all.
    #[error("malformed version: {0:?}")]
    Malformed(String),
    /// The string matches the grammar but a numeric segment overflows an i64.
    #[error("error parsing version {input:?}: segment {segment:?} is not a 64-bit integer")]
    Segment { input: String, segment: String },
}

/// go-version pads shorter versions to MAJOR.MINOR.PATCH.
const MIN_SEGMENTS: usize = 3;

impl GoVersion {
    /// Parses `s` exactly as go-version's `NewVersion` does (without a prefix option).
    pub fn parse(s: &str) -> Result<GoVersion, GoVersionError> {
        let malformed = || GoVersionError::Malformed(s.to_owned());

        let body = s.strip_prefix('v').unwrap_or(s);

        // The numeric core is the longest run of digits and dots. Nothing after the core may
        // begin with a digit or a dot, so the core cannot end anywhere else.
        let core_len = body
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'.')
            .count();
        let (core, rest) = body.split_at(core_len);
        let raw_segments: Vec<&str> = core.split('.').collect();
        if raw_segments.iter().any(|seg| seg.is_empty()) {
            return Err(malformed());
        }

        // Neither prerelease nor metadata may contain '+', so the first one starts metadata.
        let (pre_part, metadata) = match rest.split_once('+') {
            Some((pre, meta)) if is_dotted_idents(meta) => (pre, meta),
            Some(_) => return Err(malformed()),
            None => (rest, ""),
        };
        let prerelease = split_prerelease(pre_part).ok_or_else(malformed)?;

        // Only a string that matches the grammar gets its numbers checked, as in Go.
        let mut segments = raw_segments
            .iter()
            .map(|seg| {
                seg.parse::<i64>().map_err(|_| GoVersionError::Segment {
                    input: s.to_owned(),
                    segment: (*seg).to_owned(),
                })
            })
            .collect::<Result<Vec<i64>, _>>()?;
        if segments.len() < MIN_SEGMENTS {
            segments.resize(MIN_SEGMENTS, 0);
        }

        Ok(GoVersion {
            segments,
            prerelease: prerelease.to_owned(),
            metadata: metadata.to_owned(),
            original: s.to_owned(),
        })
    }

    /// Numeric segments, padded with zeros to at least three (go-version's `Segments64`).
    pub fn segments(&self) -> &[i64] {
        &self.segments
    }

    /// Prerelease without its separating dash, or `""` when there is none.
    pub fn prerelease(&self) -> &str {
        &self.prerelease
    }

    /// Build metadata without the `+`, or `""` when there is none.
    pub fn metadata(&self) -> &str {
        &self.metadata
    }

    /// The string that was parsed, verbatim.
    pub fn original(&self) -> &str {
        &self.original
    }

    /// go-version's `Compare`, faithfully.
    ///
    /// This is deliberately not `Ord`: the relation it computes is not a total order.
    /// * It ignores metadata, so `1.0.0+a` and `1.0.0+b` compare equal though they differ.
    /// * Trailing zero segments are ignored, and when the segment lists differ in length the
    ///   prerelease is ignored too. Hence `1.0.0-beta` equals `1.0.0.0`, which equals `1.0.0`,
    ///   yet `1.0.0-beta` is less than `1.0.0`: the relation is not transitive.
    /// * Prerelease parts that are numerically equal but spelt differently (`01` and `1`, `0`
    ///   and `-0`) each compare less than the other, so it is not antisymmetric either.
    ///
    /// Prereleases are compared part by part (split on `.`). A part is numeric when it parses
    /// as a signed 64-bit integer (so `-3` is numeric and 20 nines are not). Numeric parts sort
    /// before textual ones, numbers compare by value, text compares bytewise, and a missing
    /// part is less than a numeric part but greater than a textual one.
    pub fn compare(&self, other: &Self) -> Ordering {
        // Go first compares the canonical strings; the canonical string determines segments,
        // prerelease and metadata uniquely, so comparing those fields is the same test.
        if self.segments == other.segments
            && self.prerelease == other.prerelease
            && self.metadata == other.metadata
        {
            return Ordering::Equal;
        }

        if self.segments == other.segments {
            return match (self.prerelease.is_empty(), other.prerelease.is_empty()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Greater,
                (false, true) => Ordering::Less,
                (false, false) => compare_prereleases(&self.prerelease, &other.prerelease),
            };
        }

        compare_segments(&self.segments, &other.segments)
    }
}

impl fmt::Display for GoVersion {
    /// The canonical form, as go-version's `String()`: segments without leading zeros,
    /// then `-prerelease` and `+metadata` when present.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.segments.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            write!(f, "{seg}")?;
        }
        if !self.prerelease.is_empty() {
            write!(f, "-{}", self.prerelease)?;
        }
        if !self.metadata.is_empty() {
            write!(f, "+{}", self.metadata)?;
        }
        Ok(())
    }
}

impl FromStr for GoVersion {
    type Err = GoVersionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        GoVersion::parse(s)
    }
}

/// Characters allowed in prerelease and metadata identifiers.
fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'~'
}

/// `ident *( "." ident )` with every identifier non-empty.
fn is_dotted_idents(s: &str) -> bool {
    s.split('.')
        .all(|ident| !ident.is_empty() && ident.bytes().all(is_ident_byte))
}

/// Takes what sits between the numeric core and the metadata and returns the prerelease it
/// denotes (`""` for none), or `None` if it is not a valid prerelease.
fn split_prerelease(part: &str) -> Option<&str> {
    let candidate = match part.as_bytes().first() {
        None => return Some(""),
        Some(b'-') => {
            let after_dash = &part[1..];
            // When an identifier character follows, the dash is a separator: either before a
            // digit-led prerelease or as the optional dash before a letter-led one. Otherwise
            // (nothing, or a dot, follows) the dash can only be the first character of a
            // letter-led prerelease. Had the separator reading failed validation, the other
            // reading would fail too, since prefixing a valid identifier with '-' keeps it
            // valid and vice versa.
            if after_dash.bytes().next().is_some_and(is_ident_byte) {
                after_dash
            } else {
                part
            }
        }
        // Without a dash, only a letter-led prerelease may follow the core.
        Some(b) if b.is_ascii_alphabetic() || *b == b'~' => part,
        Some(_) => return None,
    };
    is_dotted_idents(candidate).then_some(candidate)
}

/// Compares segment lists of different content; a shorter list is extended with zeros.
fn compare_segments(ours: &[i64], theirs: &[i64]) -> Ordering {
    let len = ours.len().max(theirs.len());
    let at = |segs: &[i64], i: usize| segs.get(i).copied().unwrap_or(0);
    (0..len)
        .map(|i| at(ours, i).cmp(&at(theirs, i)))
        .find(|ord| ord.is_ne())
        .unwrap_or(Ordering::Equal)
}

/// Compares two non-empty prereleases part by part; a missing part counts as `""`.
fn compare_prereleases(ours: &str, theirs: &str) -> Ordering {
    if ours == theirs {
        return Ordering::Equal;
    }
    let ours: Vec<&str> = ours.split('.').collect();
    let theirs: Vec<&str> = theirs.split('.').collect();
    let len = ours.len().max(theirs.len());
    (0..len)
        .map(|i| {
            compare_prerelease_part(
                ours.get(i).copied().unwrap_or(""),
                theirs.get(i).copied().unwrap_or(""),
            )
        })
        .find(|ord| ord.is_ne())
        .unwrap_or(Ordering::Equal)
}

/// One prerelease part against another, with go-version's rules (and asymmetries).
fn compare_prerelease_part(ours: &str, theirs: &str) -> Ordering {
    if ours == theirs {
        return Ordering::Equal;
    }
    let (our_value, ours_numeric) = parse_int_like_go(ours);
    let (their_value, theirs_numeric) = parse_int_like_go(theirs);

    // A missing part loses to a number and beats text.
    if ours.is_empty() {
        return if theirs_numeric {
            Ordering::Less
        } else {
            Ordering::Greater
        };
    }
    if theirs.is_empty() {
        return if ours_numeric {
            Ordering::Greater
        } else {
            Ordering::Less
        };
    }

    match (ours_numeric, theirs_numeric) {
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        (false, false) if ours > theirs => Ordering::Greater,
        // Two numbers, or text that sorts lower: go-version decides on the parsed values and
        // never answers "equal" here. For text those values are what Go's parser yields with
        // its error (see `parse_int_like_go`), normally 0 and 0, giving "less".
        _ if our_value > their_value => Ordering::Greater,
        _ => Ordering::Less,
    }
}

/// Parses a decimal i64 the way Go's `strconv.ParseInt(s, 10, 64)` does and returns the
/// value together with whether parsing succeeded.
///
/// On failure the value is the one Go hands back beside its error, since go-version still
/// looks at it: 0 for a malformed string, or the clamped bound (`i64::MAX` / `i64::MIN`) when
/// the digits overflow before any non-digit is reached.
fn parse_int_like_go(s: &str) -> (i64, bool) {
    let (negative, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() {
        return (0, false);
    }
    let overflow = if negative { i64::MIN } else { i64::MAX };

    // Accumulate as u64 first, scanning left to right: whichever comes first, a non-digit or
    // an overflow of the u64, decides the kind of failure.
    let mut magnitude: u64 = 0;
    for b in digits.bytes() {
        if !b.is_ascii_digit() {
            return (0, false);
        }
        match magnitude
            .checked_mul(10)
            .and_then(|m| m.checked_add(u64::from(b - b'0')))
        {
            Some(m) => magnitude = m,
            None => return (overflow, false),
        }
    }

    let value = if negative {
        // i64::MIN has no positive counterpart, so negate in i128.
        i64::try_from(-i128::from(magnitude)).ok()
    } else {
        i64::try_from(magnitude).ok()
    };
    match value {
        Some(v) => (v, true),
        None => (overflow, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v(s: &str) -> GoVersion {
        GoVersion::parse(s).unwrap_or_else(|e| panic!("{s:?} should parse: {e}"))
    }

    fn canonical(s: &str) -> String {
        v(s).to_string()
    }

    fn cmp(a: &str, b: &str) -> Ordering {
        v(a).compare(&v(b))
    }

    fn is_malformed(s: &str) -> bool {
        GoVersion::parse(s) == Err(GoVersionError::Malformed(s.to_owned()))
    }

    #[test]
    fn canonical_forms_of_checked_examples() {
        assert_eq!(canonical("1"), "1.0.0");
        assert_eq!(canonical("v1.2"), "1.2.0");
        assert_eq!(canonical("1.2.3.4"), "1.2.3.4");
        assert_eq!(canonical("1.0beta"), "1.0.0-beta");
        assert_eq!(canonical("1.0.0-beta1+abc"), "1.0.0-beta1+abc");
    }

    #[test]
    fn rejects_malformed_inputs() {
        for s in [
            "abc",
            "",
            " 1.0.0",
            "1.0.0 ",
            "v",
            "1.",
            ".1",
            "1..2",
            "1.0.0+",
            "vv1",
            "V1.0",
            "1.2.beta",
            "1.21.beta",
            "foo1.2.3",
            "\n1.2",
            "1.0-1..2",
            "1.0+a..b",
            "1.0+a+b",
            "1.0-a b",
            "1.0_1",
            "1.0-é",
            "-1.0",
        ] {
            assert!(
                is_malformed(s),
                "{s:?} should be malformed: {:?}",
                GoVersion::parse(s)
            );
        }
    }

    #[test]
    fn trailing_dash_is_a_prerelease_like_go() {
        // The dash is in the character class of letter-led prereleases, so go-version's own
        // test suite expects "1.0-" to parse.
        let ver = v("1.0.0-");
        assert_eq!(ver.prerelease(), "-");
        assert_eq!(ver.to_string(), "1.0.0--");
        assert_eq!(canonical("1.0.0--"), "1.0.0--");
        assert_eq!(v("1.0-.x").prerelease(), "-.x");
        assert_eq!(v("1.0--x").prerelease(), "-x");
        assert_eq!(v("1.0--1").prerelease(), "-1");
        assert_eq!(v("1.0~x").prerelease(), "~x");
        assert_eq!(v("1.0-~").prerelease(), "~");
    }

    #[test]
    fn accessors() {
        let ver = v("v1.04.0-rc.1+build.7");
        assert_eq!(ver.segments(), &[1, 4, 0]);
        assert_eq!(ver.prerelease(), "rc.1");
        assert_eq!(ver.metadata(), "build.7");
        assert_eq!(ver.original(), "v1.04.0-rc.1+build.7");
        assert_eq!(ver.to_string(), "1.4.0-rc.1+build.7");
        assert_eq!("1.2".parse::<GoVersion>(), Ok(v("1.2")));
    }

    #[test]
    fn prerelease_without_dash_and_metadata() {
        let ver = v("1.7rc2");
        assert_eq!(ver.segments(), &[1, 7, 0]);
        assert_eq!(ver.prerelease(), "rc2");
        let ver = v("1.2.0-metadata-1.2.0+metadata~dist");
        assert_eq!(ver.prerelease(), "metadata-1.2.0");
        assert_eq!(ver.metadata(), "metadata~dist");
        let ver = v("1+meta.2");
        assert_eq!(ver.prerelease(), "");
        assert_eq!(ver.metadata(), "meta.2");
        assert_eq!(ver.to_string(), "1.0.0+meta.2");
    }

    #[test]
    fn leading_zeros_are_dropped() {
        assert_eq!(canonical("1.04.0"), "1.4.0");
        assert_eq!(canonical("17.03.0-ce"), "17.3.0-ce");
        assert_eq!(canonical("007"), "7.0.0");
        // The prerelease is kept verbatim.
        assert_eq!(canonical("1.0-007"), "1.0.0-007");
    }

    #[test]
    fn numeric_led_prerelease() {
        let ver = v("1.0-1a");
        assert_eq!(ver.prerelease(), "1a");
        assert_eq!(ver.to_string(), "1.0.0-1a");
        assert_eq!(v("1.2.0-7.Y.0").prerelease(), "7.Y.0");
    }

    #[test]
    fn huge_segment_is_a_segment_error() {
        let input = "1.99999999999999999999.0";
        let err = GoVersion::parse(input).unwrap_err();
        assert_eq!(
            err,
            GoVersionError::Segment {
                input: input.to_owned(),
                segment: "99999999999999999999".to_owned(),
            }
        );
        assert!(err.to_string().starts_with("error parsing version"));
        // i64::MAX itself is fine; one more is not.
        assert_eq!(v("9223372036854775807").segments()[0], i64::MAX);
        assert!(matches!(
            GoVersion::parse("9223372036854775808"),
            Err(GoVersionError::Segment { .. })
        ));
        // The grammar is checked before the numbers, as in Go.
        assert!(is_malformed("99999999999999999999 "));
    }

    #[test]
    fn ordering_examples() {
        assert_eq!(cmp("1.0.0-rc.1", "1.0.0-rc.2"), Ordering::Less);
        assert_eq!(cmp("1.0.0-rc.2", "1.0.0-rc.1"), Ordering::Greater);
        assert_eq!(cmp("1.0.0-beta", "1.0.0"), Ordering::Less);
        assert_eq!(cmp("1.2", "1.2.0"), Ordering::Equal);
        assert_eq!(cmp("1.0.0.1", "1.0.0"), Ordering::Greater);
        assert_eq!(cmp("1.0.0", "1.0.0.0"), Ordering::Equal);
        assert_eq!(cmp("1.2.3", "1.4.5"), Ordering::Less);
        assert_eq!(cmp("1.2", "1.1.4"), Ordering::Greater);
        assert_eq!(cmp("1.2+foo", "1.2+beta"), Ordering::Equal);
        assert_eq!(cmp("v1.2.0.0.1", "v1.2"), Ordering::Greater);
        assert_eq!(cmp("v1.2", "v1.2.0.0.1"), Ordering::Less);
        assert_eq!(cmp("1.7rc2", "1.7rc1"), Ordering::Greater);
        assert_eq!(
            cmp("1.2.0", "1.2.0-X-1.2.0+metadata~dist"),
            Ordering::Greater
        );
        assert_eq!(cmp("1.2-beta.2", "1.2-beta.11"), Ordering::Less);
        assert_eq!(cmp("1.2-beta", "1.2-beta.3"), Ordering::Less);
        assert_eq!(cmp("1.2-alpha", "1.2-beta.3"), Ordering::Less);
        assert_eq!(cmp("1.2-beta", "1.2-alpha.3"), Ordering::Greater);
        // A missing part beats a textual one, and numbers sort before text.
        assert_eq!(cmp("1.0-rc", "1.0-rc.a"), Ordering::Greater);
        assert_eq!(cmp("1.0-1", "1.0-a"), Ordering::Less);
        // "-3" is numeric to Go.
        assert_eq!(cmp("1.0-x.-3", "1.0-x.2"), Ordering::Less);
    }

    #[test]
    fn go_comparison_quirks_are_kept() {
        // Not transitive: the prerelease is ignored when segment counts differ.
        assert_eq!(cmp("1.0.0-beta", "1.0.0.0"), Ordering::Equal);
        assert_eq!(cmp("1.0.0.0", "1.0.0"), Ordering::Equal);
        assert_eq!(cmp("1.0.0-beta", "1.0.0"), Ordering::Less);
        // Not antisymmetric: equal numbers spelt differently are each "less".
        assert_eq!(cmp("1.0-rc.01", "1.0-rc.1"), Ordering::Less);
        assert_eq!(cmp("1.0-rc.1", "1.0-rc.01"), Ordering::Less);
        // Out-of-range digits are text to Go, but carry i64::MAX into the tie-break.
        let huge = "1.0-99999999999999999999";
        assert_eq!(cmp(huge, "1.0-a"), Ordering::Greater);
        assert_eq!(cmp("1.0-a", huge), Ordering::Greater);
    }

    #[test]
    fn parse_int_like_go_matches_strconv() {
        assert_eq!(parse_int_like_go("42"), (42, true));
        assert_eq!(parse_int_like_go("-42"), (-42, true));
        assert_eq!(parse_int_like_go("+7"), (7, true));
        assert_eq!(parse_int_like_go("007"), (7, true));
        assert_eq!(parse_int_like_go("-9223372036854775808"), (i64::MIN, true));
        assert_eq!(parse_int_like_go("9223372036854775808"), (i64::MAX, false));
        assert_eq!(parse_int_like_go("-9223372036854775809"), (i64::MIN, false));
        assert_eq!(
            parse_int_like_go("99999999999999999999x"),
            (i64::MAX, false)
        );
        assert_eq!(parse_int_like_go("9x9999999999999999999"), (0, false));
        assert_eq!(parse_int_like_go(""), (0, false));
        assert_eq!(parse_int_like_go("-"), (0, false));
        assert_eq!(parse_int_like_go("--1"), (0, false));
    }

    /// A version string built from the grammar, with what parsing it must yield.
    #[derive(Clone, Debug)]
    struct Generated {
        input: String,
        /// The optional `v` and the numeric segments as spelt in `input`.
        core_input: String,
        segments: Vec<i64>,
        prerelease: String,
        metadata: String,
    }

    impl Generated {
        fn canonical(&self) -> String {
            let mut out = self
                .segments
                .iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(".");
            if !self.prerelease.is_empty() {
                out.push('-');
                out.push_str(&self.prerelease);
            }
            if !self.metadata.is_empty() {
                out.push('+');
                out.push_str(&self.metadata);
            }
            out
        }
    }

    /// An identifier whose first character matches `first` (a character class). Identifiers
    /// that Go reads as numbers are kept in their canonical spelling, so that generated
    /// versions stay clear of the antisymmetry quirk of `compare`.
    fn ident(first: &'static str) -> impl Strategy<Value = String> {
        proptest::string::string_regex(&format!("{first}[0-9A-Za-z~-]{{0,7}}"))
            .expect("valid identifier pattern")
            .prop_filter("numbers spelt canonically", |s| {
                let (value, numeric) = parse_int_like_go(s);
                !numeric || value.to_string() == *s
            })
    }

    /// `first(.any)*` with up to three further identifiers.
    fn dotted(first: &'static str) -> impl Strategy<Value = String> {
        (
            ident(first),
            prop::collection::vec(ident("[0-9A-Za-z~-]"), 0..3),
        )
            .prop_map(|(head, tail)| {
                std::iter::once(head)
                    .chain(tail)
                    .collect::<Vec<_>>()
                    .join(".")
            })
    }

    /// (text in the input, expected prerelease) for each way of writing a prerelease.
    fn prerelease() -> impl Strategy<Value = (String, String)> {
        prop_oneof![
            // Dash, then digit-led.
            dotted("[0-9]").prop_map(|p| (format!("-{p}"), p)),
            // Dash, then letter-led (the body may itself start with a dash: "--x").
            dotted("[A-Za-z~-]").prop_map(|p| (format!("-{p}"), p)),
            // No dash: must start with a letter or '~'.
            dotted("[A-Za-z~]").prop_map(|p| (p.clone(), p)),
            // A dash that cannot separate joins the prerelease: "-" or "-.x".
            prop::option::of(dotted("[0-9A-Za-z~-]")).prop_map(|rest| {
                let p = rest.map_or_else(|| "-".to_owned(), |r| format!("-.{r}"));
                (p.clone(), p)
            }),
        ]
    }

    fn generated(
        segment_values: impl Strategy<Value = u32> + 'static,
    ) -> impl Strategy<Value = Generated> {
        (
            any::<bool>(),
            prop::collection::vec((segment_values, 0usize..3), 1..6),
            prop::option::of(prerelease()),
            prop::option::of(dotted("[0-9A-Za-z~-]")),
        )
            .prop_map(|(v_prefix, segs, pre, meta)| {
                let mut input = String::from(if v_prefix { "v" } else { "" });
                input.push_str(
                    &segs
                        .iter()
                        .map(|(value, zeros)| format!("{}{value}", "0".repeat(*zeros)))
                        .collect::<Vec<_>>()
                        .join("."),
                );
                let mut segments: Vec<i64> =
                    segs.iter().map(|(value, _)| i64::from(*value)).collect();
                segments.resize(segments.len().max(MIN_SEGMENTS), 0);
                let core_input = input.clone();
                let (pre_text, prerelease) = pre.unwrap_or_default();
                input.push_str(&pre_text);
                let metadata = meta.unwrap_or_default();
                if !metadata.is_empty() {
                    input.push('+');
                    input.push_str(&metadata);
                }
                Generated {
                    input,
                    core_input,
                    segments,
                    prerelease,
                    metadata,
                }
            })
    }

    /// Versions from a small pool, so that pairs often share segments or prereleases.
    fn pooled() -> impl Strategy<Value = GoVersion> {
        let part = prop::sample::select(vec![
            "alpha", "beta", "rc", "0", "1", "2", "10", "-1", "x-y", "~", "-", "1a", "B",
        ]);
        (
            prop::collection::vec(0i64..3, 1..5),
            prop::option::of(prop::collection::vec(part.clone(), 1..4)),
            prop::option::of(part),
        )
            .prop_map(|(segs, pre, meta)| {
                let mut s = segs
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(".");
                if let Some(parts) = pre {
                    s.push('-');
                    s.push_str(&parts.join("."));
                }
                if let Some(m) = meta {
                    s.push('+');
                    s.push_str(m);
                }
                v(&s)
            })
    }

    fn any_generated_version() -> impl Strategy<Value = GoVersion> {
        prop_oneof![
            generated(any::<u32>()).prop_map(|g| v(&g.input)),
            generated(0u32..3).prop_map(|g| v(&g.input)),
            pooled(),
        ]
    }

    fn check_no_panic(s: &str) -> Result<(), TestCaseError> {
        if let Ok(ver) = GoVersion::parse(s) {
            // Whatever parses has a canonical form that parses to itself.
            let again = GoVersion::parse(&ver.to_string());
            prop_assert_eq!(again.map(|a| a.to_string()), Ok(ver.to_string()));
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn generated_versions_parse_and_canonicalise_idempotently(g in generated(any::<u32>())) {
            let ver = GoVersion::parse(&g.input);
            prop_assert!(ver.is_ok(), "{:?} failed: {:?}", g.input, ver);
            let ver = ver.unwrap();
            prop_assert_eq!(ver.segments(), g.segments.as_slice());
            prop_assert_eq!(ver.prerelease(), g.prerelease.as_str());
            prop_assert_eq!(ver.metadata(), g.metadata.as_str());
            prop_assert_eq!(ver.original(), g.input.as_str());
            let shown = ver.to_string();
            prop_assert_eq!(&shown, &g.canonical());
            let again = GoVersion::parse(&shown).unwrap();
            prop_assert_eq!(again.to_string(), shown);
            prop_assert_eq!(again.compare(&ver), Ordering::Equal);
        }

        #[test]
        fn parse_never_panics_on_any_string(s in ".*") {
            check_no_panic(&s)?;
        }

        #[test]
        fn parse_never_panics_on_version_like_strings(s in "[v0123456789.+~abcZ -]{0,24}") {
            check_no_panic(&s)?;
        }

        #[test]
        fn compare_is_antisymmetric_and_respects_canonical_equality(
            a in any_generated_version(),
            b in any_generated_version(),
        ) {
            prop_assert_eq!(a.compare(&a), Ordering::Equal);
            prop_assert_eq!(a.compare(&b), b.compare(&a).reverse(), "{} vs {}", a, b);
            if a.to_string() == b.to_string() {
                prop_assert_eq!(a.compare(&b), Ordering::Equal);
            }
        }

        #[test]
        fn prerelease_sorts_before_release(
            g in generated(any::<u32>()),
            (pre_text, _) in prerelease(),
            other_meta in prop::option::of("[a-z0-9]{1,4}"),
        ) {
            let mut with = format!("{}{pre_text}", g.core_input);
            if !g.metadata.is_empty() {
                with.push('+');
                with.push_str(&g.metadata);
            }
            let mut without = g.core_input.clone();
            if let Some(m) = other_meta {
                without.push('+');
                without.push_str(&m);
            }
            let (with, without) = (v(&with), v(&without));
            prop_assert_eq!(with.compare(&without), Ordering::Less, "{} vs {}", with, without);
            prop_assert_eq!(without.compare(&with), Ordering::Greater);
        }
    }
}
