//! Exact decimal numbers, standing in for go-cty's 512-bit `cty.Number`.
//!
//! HCL and go-cty keep numbers as arbitrary-precision values; what reaches a driver depends on
//! the exact value (go-cty `msgpack.Marshal`): an exact int64 becomes a compact msgpack
//! integer, a non-integer that float64 holds exactly becomes a float64, anything else becomes
//! its decimal text. [`Number`] therefore keeps the decimal digits, not an `f64`.

use std::cmp::Ordering;
use std::fmt;

/// Largest decimal exponent accepted; beyond it a number is refused instead of expanded.
const MAX_EXPONENT: i64 = 10_000;

/// An exact decimal number (or ±infinity), as HCL and go-cty hold numbers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Number(Repr);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Repr {
    /// `(-1)^negative × 0.digits × 10^exp`; `digits` has no leading or trailing zeros, and
    /// zero is the empty string with `negative = false`, `exp = 0`.
    Finite {
        negative: bool,
        digits: String,
        exp: i64,
    },
    PosInf,
    NegInf,
}

/// How go-cty's msgpack encoder writes a number.
#[derive(Clone, Debug, PartialEq)]
pub enum WireNumber {
    /// An exact int64: a compact msgpack integer.
    Int(i64),
    /// A non-integer that float64 holds exactly, or ±infinity: msgpack float64 (`0xcb`).
    Float(f64),
    /// Anything else: a msgpack string with the plain decimal text.
    Decimal(String),
}

impl Number {
    /// Zero.
    pub fn zero() -> Number {
        Number(Repr::Finite {
            negative: false,
            digits: String::new(),
            exp: 0,
        })
    }

    /// The number equal to an `i64`.
    pub fn from_i64(v: i64) -> Number {
        Number::parse(&v.to_string()).unwrap_or_else(|_| Number::zero())
    }

    /// The number equal to a `u64`.
    pub fn from_u64(v: u64) -> Number {
        Number::parse(&v.to_string()).unwrap_or_else(|_| Number::zero())
    }

    /// The number an `f64` stands for, read as its shortest round-trip decimal (`0.1`, not
    /// `0.1000000000000000055…`), which is what someone writing the literal meant; `None` for NaN.
    pub fn from_f64(v: f64) -> Option<Number> {
        if v.is_nan() {
            return None;
        }
        if v.is_infinite() {
            return Some(Number(if v > 0.0 { Repr::PosInf } else { Repr::NegInf }));
        }
        Number::parse(&format!("{v:e}")).ok()
    }

    /// Parses decimal text the way go-cty's `ParseNumberVal` does (`5`, `-1.5`, `.5`, `1e3`,
    /// `Inf`); whitespace, hex and underscores are refused.
    pub fn parse(text: &str) -> Result<Number, String> {
        parse_decimal(text).ok_or_else(|| format!("{text:?} is not a number"))
    }

    /// Whether this is ±infinity.
    pub fn is_infinite(&self) -> bool {
        !matches!(self.0, Repr::Finite { .. })
    }

    /// Whether the value is a whole number (infinities are not).
    pub fn is_integer(&self) -> bool {
        match &self.0 {
            Repr::Finite { digits, exp, .. } => digits.is_empty() || (digits.len() as i64) <= *exp,
            _ => false,
        }
    }

    /// The value as an `i64`, if it is a whole number in range.
    pub fn to_i64(&self) -> Option<i64> {
        let (negative, digits, exp) = self.finite()?;
        if digits.is_empty() {
            return Some(0);
        }
        if !self.is_integer() || exp > 19 {
            return None;
        }
        let mut text = String::with_capacity(exp as usize + 1);
        if negative {
            text.push('-');
        }
        text.push_str(digits);
        for _ in digits.len()..exp as usize {
            text.push('0');
        }
        text.parse::<i64>().ok()
    }

    /// The value as an `f64` if float64 holds it exactly (infinities included).
    pub fn to_f64_exact(&self) -> Option<f64> {
        match &self.0 {
            Repr::PosInf => Some(f64::INFINITY),
            Repr::NegInf => Some(f64::NEG_INFINITY),
            Repr::Finite { .. } => {
                let f = self.to_f64_lossy();
                if !f.is_finite() {
                    return None;
                }
                // Rust prints the exact binary expansion when asked for enough digits (a
                // float64 needs at most 767 significant digits), so compare digit for digit.
                let exact = Number::parse(&format!("{f:.800e}")).ok()?;
                (exact == *self).then_some(f)
            }
        }
    }

    /// The nearest `f64` (correctly rounded).
    pub fn to_f64_lossy(&self) -> f64 {
        match &self.0 {
            Repr::PosInf => f64::INFINITY,
            Repr::NegInf => f64::NEG_INFINITY,
            Repr::Finite {
                negative,
                digits,
                exp,
            } => {
                if digits.is_empty() {
                    return 0.0;
                }
                let sign = if *negative { "-" } else { "" };
                format!("{sign}0.{digits}e{exp}").parse().unwrap_or(0.0)
            }
        }
    }

    /// How go-cty's msgpack encoder writes this number (see [`WireNumber`]).
    pub fn wire(&self) -> WireNumber {
        match &self.0 {
            Repr::PosInf => WireNumber::Float(f64::INFINITY),
            Repr::NegInf => WireNumber::Float(f64::NEG_INFINITY),
            Repr::Finite { .. } => {
                if let Some(i) = self.to_i64() {
                    WireNumber::Int(i)
                } else if let (false, Some(f)) = (self.is_integer(), self.to_f64_exact()) {
                    WireNumber::Float(f)
                } else {
                    WireNumber::Decimal(self.to_decimal_text())
                }
            }
        }
    }

    /// Plain decimal text without exponent, as Go's `big.Float.Text('f', -1)` writes it
    /// (`1000000000000000000000`, `0.0000001`, `+Inf`); go-cty uses it for number→string.
    pub fn to_decimal_text(&self) -> String {
        let (negative, digits, exp) = match &self.0 {
            Repr::PosInf => return "+Inf".to_string(),
            Repr::NegInf => return "-Inf".to_string(),
            Repr::Finite {
                negative,
                digits,
                exp,
            } => (*negative, digits.as_str(), *exp),
        };
        if digits.is_empty() {
            return "0".to_string();
        }
        let mut out = String::new();
        if negative {
            out.push('-');
        }
        let len = digits.len() as i64;
        if exp <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-exp) as usize));
            out.push_str(digits);
        } else if len <= exp {
            out.push_str(digits);
            out.extend(std::iter::repeat_n('0', (exp - len) as usize));
        } else {
            out.push_str(&digits[..exp as usize]);
            out.push('.');
            out.push_str(&digits[exp as usize..]);
        }
        out
    }

    /// Text an HCL number literal accepts (plain when short, `1.5e+300` otherwise); negative
    /// numbers start with `-`, which HCL reads as unary minus. Infinities have no literal and
    /// print as `1e+99999` / `-1e+99999`.
    pub fn to_hcl_literal(&self) -> String {
        let (negative, digits, exp) = match &self.0 {
            Repr::PosInf => return "1e+99999".to_string(),
            Repr::NegInf => return "-1e+99999".to_string(),
            Repr::Finite {
                negative,
                digits,
                exp,
            } => (*negative, digits.as_str(), *exp),
        };
        if (-5..=21).contains(&exp) {
            return self.to_decimal_text();
        }
        let sign = if negative { "-" } else { "" };
        let (first, rest) = digits.split_at(1);
        let e = exp - 1;
        let e_sign = if e < 0 { "-" } else { "+" };
        if rest.is_empty() {
            format!("{sign}{first}e{e_sign}{}", e.abs())
        } else {
            format!("{sign}{first}.{rest}e{e_sign}{}", e.abs())
        }
    }

    /// Go's `big.Float.String()` (`Text('g', 10)`): the text go-cty hashes a number with when
    /// it orders the elements of a set of compound values.
    pub fn to_go_g10(&self) -> String {
        let (negative, digits, exp) = match &self.0 {
            Repr::PosInf => return "+Inf".to_string(),
            Repr::NegInf => return "-Inf".to_string(),
            Repr::Finite {
                negative,
                digits,
                exp,
            } => (*negative, digits.clone(), *exp),
        };
        if digits.is_empty() {
            return "0".to_string();
        }
        let (digits, dp) = round_digits(&digits, exp, 10);
        let nd = digits.len() as i64;
        let mut eprec = 10;
        if eprec > nd && nd >= dp {
            eprec = nd;
        }
        let x = dp - 1;
        let mut out = String::new();
        if negative {
            out.push('-');
        }
        if x < -4 || x >= eprec {
            let prec = 10.min(nd);
            out.push_str(&digits[..1]);
            if prec > 1 {
                out.push('.');
                out.push_str(&digits[1..prec as usize]);
            }
            out.push('e');
            out.push(if x < 0 { '-' } else { '+' });
            if x.abs() < 10 {
                out.push('0');
            }
            out.push_str(&x.abs().to_string());
        } else {
            let rounded = Number(Repr::Finite {
                negative: false,
                digits,
                exp: dp,
            });
            out.push_str(&rounded.to_decimal_text());
        }
        out
    }

    fn finite(&self) -> Option<(bool, &str, i64)> {
        match &self.0 {
            Repr::Finite {
                negative,
                digits,
                exp,
            } => Some((*negative, digits.as_str(), *exp)),
            _ => None,
        }
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hcl_literal())
    }
}

impl Ord for Number {
    fn cmp(&self, other: &Self) -> Ordering {
        fn rank(n: &Number) -> i8 {
            match &n.0 {
                Repr::NegInf => -2,
                Repr::PosInf => 2,
                Repr::Finite {
                    negative, digits, ..
                } => {
                    if digits.is_empty() {
                        0
                    } else if *negative {
                        -1
                    } else {
                        1
                    }
                }
            }
        }
        let (ra, rb) = (rank(self), rank(other));
        if ra != rb || ra.abs() != 1 {
            return ra.cmp(&rb);
        }
        let (Some((_, da, ea)), Some((_, db, eb))) = (self.finite(), other.finite()) else {
            return Ordering::Equal;
        };
        // Same sign, both non-zero: compare magnitudes, then flip for negatives.
        let magnitude = ea.cmp(&eb).then_with(|| da.cmp(db));
        if ra < 0 {
            magnitude.reverse()
        } else {
            magnitude
        }
    }
}

impl PartialOrd for Number {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Rounds `0.digits × 10^exp` to `prec` significant digits (half to even), returning the
/// trimmed digits and the new decimal-point position.
fn round_digits(digits: &str, exp: i64, prec: usize) -> (String, i64) {
    if digits.len() <= prec {
        return (digits.to_string(), exp);
    }
    let bytes = digits.as_bytes();
    let mut kept: Vec<u8> = bytes[..prec].to_vec();
    let next = bytes[prec];
    let rest_nonzero = bytes[prec + 1..].iter().any(|&b| b != b'0');
    let last_odd = (kept[prec - 1] - b'0') % 2 == 1;
    let round_up = next > b'5' || (next == b'5' && (rest_nonzero || last_odd));
    let mut dp = exp;
    if round_up {
        let mut i = prec;
        loop {
            if i == 0 {
                kept.insert(0, b'1');
                kept.pop();
                dp += 1;
                break;
            }
            i -= 1;
            if kept[i] == b'9' {
                kept[i] = b'0';
            } else {
                kept[i] += 1;
                break;
            }
        }
    }
    while kept.last() == Some(&b'0') {
        kept.pop();
    }
    (String::from_utf8(kept).unwrap_or_default(), dp)
}

fn parse_decimal(text: &str) -> Option<Number> {
    let (negative, rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "Inf" || rest == "inf" {
        return Some(Number(if negative { Repr::NegInf } else { Repr::PosInf }));
    }
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let (int_part, frac_part) = match mantissa.find('.') {
        Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
        None => (mantissa, ""),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    if !int_part.bytes().all(|b| b.is_ascii_digit())
        || !frac_part.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let mut e10: i64 = match exponent {
        None => 0,
        Some(e) => {
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // Cap the exponent text before parsing so that huge exponents are refused, not wrapped.
            if digits.trim_start_matches('0').len() > 12 {
                return None;
            }
            e.parse::<i64>().ok()?
        }
    };
    let mut all = String::with_capacity(int_part.len() + frac_part.len());
    all.push_str(int_part);
    all.push_str(frac_part);
    e10 += int_part.len() as i64;
    let leading = all.len() - all.trim_start_matches('0').len();
    let digits = all
        .trim_start_matches('0')
        .trim_end_matches('0')
        .to_string();
    if digits.is_empty() {
        return Some(Number::zero());
    }
    let exp = e10 - leading as i64;
    if !(-MAX_EXPONENT..=MAX_EXPONENT).contains(&exp) {
        return None;
    }
    Some(Number(Repr::Finite {
        negative,
        digits,
        exp,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> Number {
        Number::parse(s).expect(s)
    }

    #[test]
    fn parses_and_normalises() {
        assert_eq!(n("5"), n("5.0"));
        assert_eq!(n("5"), n("0.5e1"));
        assert_eq!(n("-0"), Number::zero());
        assert_eq!(n(".5"), n("0.5"));
        assert_eq!(n("5."), n("5"));
        assert_ne!(n("5"), n("-5"));
        for bad in [
            "", "-", ".", "1e", "0x10", " 1", "1_000", "e5", "1.2.3", "abc",
        ] {
            assert!(Number::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn wire_forms_follow_go_cty() {
        assert_eq!(n("127").wire(), WireNumber::Int(127));
        assert_eq!(n("-9223372036854775808").wire(), WireNumber::Int(i64::MIN));
        assert_eq!(n("1.5").wire(), WireNumber::Float(1.5));
        // 0.1 is not exact in binary: decimal text.
        assert_eq!(n("0.1").wire(), WireNumber::Decimal("0.1".into()));
        // Integers outside int64 are decimal text even when float64 could hold them.
        assert_eq!(
            n("9223372036854775808").wire(),
            WireNumber::Decimal("9223372036854775808".into())
        );
        assert_eq!(
            n("1e21").wire(),
            WireNumber::Decimal("1000000000000000000000".into())
        );
        assert_eq!(
            Number::from_f64(f64::INFINITY).unwrap().wire(),
            WireNumber::Float(f64::INFINITY)
        );
    }

    #[test]
    fn exact_f64_detection() {
        assert_eq!(n("0.5").to_f64_exact(), Some(0.5));
        assert_eq!(n("0.1").to_f64_exact(), None);
        // The exact expansion of float64(0.1) is exact.
        assert_eq!(
            n("0.1000000000000000055511151231257827021181583404541015625").to_f64_exact(),
            Some(0.1)
        );
        assert_eq!(Number::from_f64(0.1).unwrap(), n("0.1"));
    }

    #[test]
    fn decimal_text_and_ordering() {
        assert_eq!(n("1e-7").to_decimal_text(), "0.0000001");
        assert_eq!(n("-123.45").to_decimal_text(), "-123.45");
        assert_eq!(n("100").to_decimal_text(), "100");
        assert!(n("-2") < n("-1"));
        assert!(n("-1") < n("0"));
        assert!(n("0.5") < n("1"));
        assert!(n("99") < n("100"));
        assert!(Number::from_f64(f64::NEG_INFINITY).unwrap() < n("-1e300"));
    }

    #[test]
    fn go_g10_text() {
        assert_eq!(n("5").to_go_g10(), "5");
        assert_eq!(n("1.5").to_go_g10(), "1.5");
        assert_eq!(n("100").to_go_g10(), "100");
        assert_eq!(n("12345678901").to_go_g10(), "1.23456789e+10");
        assert_eq!(n("0.00001").to_go_g10(), "1e-05");
        assert_eq!(n("-0.25").to_go_g10(), "-0.25");
    }

    #[test]
    fn hcl_literals() {
        assert_eq!(n("1.5e300").to_hcl_literal(), "1.5e+300");
        assert_eq!(n("-42").to_hcl_literal(), "-42");
        assert_eq!(n("1e-7").to_hcl_literal(), "1e-7");
    }
}
