//! The plugin's own configuration: the agent's `plugin "exec-reference" { config { ... } }`.
//!
//! ```hcl
//! config {
//!   enabled            = true   # false: the driver fingerprints as undetected
//!   fingerprint_period = "30s"  # how often the Fingerprint stream repeats itself
//!   extra_attributes   = { rack = "r1" }  # optional, no default: more node attributes
//! }
//! ```
//!
//! ConfigSchema returns the schema below; SetConfig decodes what Nomad made of it. Nomad calls
//! SetConfig twice: once in a short-lived launch that only validates the config (without
//! `nomad_config`), and once in the long-lived instance (with it). Both must succeed.
//!
//! With the no-config-schema variant the driver has no configuration: ConfigSchema returns no
//! spec, Nomad then sends SetConfig empty bytes, and the defaults apply.

use std::collections::BTreeMap;
use std::time::Duration;

use nomad_conform_proto::nomad::hclspec::Spec;

use crate::faults::{Fault, Faults};
use crate::hclspec::{attr, default, object};
use crate::msgpack::ConfigMap;
use crate::variants::{Variant, Variants};

const FINGERPRINT_PERIOD: &str = "fingerprint_period";
const ENABLED: &str = "enabled";
/// Optional and without a default, so go-cty sends it as nil when unset.
const EXTRA_ATTRIBUTES: &str = "extra_attributes";
const SCHEMA: &[&str] = &[ENABLED, EXTRA_ATTRIBUTES, FINGERPRINT_PERIOD];

/// The default of `fingerprint_period`, as the built-in drivers use.
pub const DEFAULT_FINGERPRINT_PERIOD: Duration = Duration::from_secs(30);

#[derive(Clone, Debug, PartialEq)]
pub struct PluginConfig {
    pub enabled: bool,
    pub fingerprint_period: Duration,
    /// Fingerprinted as `driver.exec-reference.<key>` node attributes.
    pub extra_attributes: BTreeMap<String, String>,
}

impl std::default::Default for PluginConfig {
    fn default() -> Self {
        PluginConfig {
            enabled: true,
            fingerprint_period: DEFAULT_FINGERPRINT_PERIOD,
            extra_attributes: BTreeMap::new(),
        }
    }
}

/// Whether the driver has a configuration at all: the no-config-schema variant has none, like
/// Nomad drivers whose ConfigSchema returns no spec.
fn takes_config(variants: &Variants) -> bool {
    !variants.has(Variant::NoConfigSchema)
}

/// The ConfigSchema answer: None for no spec.
pub fn schema(faults: &Faults, variants: &Variants) -> Option<Spec> {
    if !takes_config(variants) {
        return None;
    }
    let period_type = if faults.has(Fault::BadConfigSchema) {
        "strng"
    } else {
        "string"
    };
    Some(object(vec![
        (
            FINGERPRINT_PERIOD,
            default(attr(FINGERPRINT_PERIOD, period_type, false), "\"30s\""),
        ),
        (ENABLED, default(attr(ENABLED, "bool", false), "true")),
        (
            EXTRA_ATTRIBUTES,
            attr(EXTRA_ATTRIBUTES, "map(string)", false),
        ),
    ]))
}

/// Decodes SetConfig's `msgpack_config`; unset attributes take their defaults.
pub fn decode(bytes: &[u8], faults: &Faults, variants: &Variants) -> Result<PluginConfig, String> {
    if !takes_config(variants) {
        // Without a spec Nomad sends no bytes at all (not even an empty map, 0x80).
        return if bytes.is_empty() {
            Ok(PluginConfig::default())
        } else {
            Err("this driver takes no configuration (no-config-schema variant)".into())
        };
    }
    let map = ConfigMap::decode(bytes, SCHEMA)?;
    if faults.has(Fault::CtyOnly)
        && let Some(name) = map.first_missing(SCHEMA)
    {
        return Err(format!("attribute {name:?} is missing (cty-only fault)"));
    }
    if faults.has(Fault::SetConfigRejectsNil)
        && let Some(name) = map.first_nil()
    {
        return Err(format!(
            "attribute {name:?} is nil (set-config-rejects-nil fault)"
        ));
    }
    let mut config = PluginConfig::default();
    if let Some(enabled) = map.bool(ENABLED)? {
        config.enabled = enabled;
    }
    if let Some(extra) = map.string_map(EXTRA_ATTRIBUTES)? {
        config.extra_attributes = extra;
    }
    if let Some(period) = map.string(FINGERPRINT_PERIOD)? {
        config.fingerprint_period = parse_go_duration(&period)
            .filter(|d| !d.is_zero())
            .ok_or_else(|| {
                format!(
                    "{FINGERPRINT_PERIOD} {period:?} is not a positive duration such as \
                     \"30s\", \"1m30s\" or \"500ms\""
                )
            })?;
    }
    Ok(config)
}

/// A Go duration string (`time.ParseDuration`) without a sign: numbers, each with a unit of
/// ns, us, µs, ms, s, m or h, e.g. `1h30m`, `1.5s`, `250ms`.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    if text == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = text;
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_end..];
        total += number * seconds_per_unit;
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use rmpv::Value;

    use super::*;

    fn encode(pairs: Vec<(&str, Value)>) -> Vec<u8> {
        let map = Value::Map(
            pairs
                .into_iter()
                .map(|(k, v)| (Value::from(k), v))
                .collect(),
        );
        let mut bytes = Vec::new();
        rmpv::encode::write_value(&mut bytes, &map).unwrap();
        bytes
    }

    #[test]
    fn go_durations_parse() {
        assert_eq!(parse_go_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_go_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_go_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_go_duration("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_go_duration("0"), Some(Duration::ZERO));
        for bad in ["", "30", "s", "3x", "-1s", "1s2"] {
            assert_eq!(parse_go_duration(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn cty_and_plain_maps_decode_alike() {
        let faults = Faults::default();
        let none = Variants::default();
        let cty = encode(vec![
            ("enabled", Value::Nil),
            ("fingerprint_period", "2s".into()),
        ]);
        let plain = encode(vec![("fingerprint_period", "2s".into())]);
        for bytes in [cty, plain] {
            let config = decode(&bytes, &faults, &none).unwrap();
            assert_eq!(config.fingerprint_period, Duration::from_secs(2));
            assert!(config.enabled);
        }
        assert_eq!(
            decode(&[], &faults, &none).unwrap(),
            PluginConfig::default()
        );
        let off = decode(&encode(vec![("enabled", false.into())]), &faults, &none).unwrap();
        assert!(!off.enabled);
    }

    #[test]
    fn bad_values_are_refused() {
        let faults = Faults::default();
        let none = Variants::default();
        for pairs in [
            vec![("fingerprint_period", Value::from("soon"))],
            vec![("fingerprint_period", Value::from("0s"))],
            vec![("enabled", Value::from("yes"))],
            vec![("extra", Value::from(1))],
        ] {
            assert!(
                decode(&encode(pairs.clone()), &faults, &none).is_err(),
                "{pairs:?}"
            );
        }
    }

    #[test]
    fn faults_refuse_what_the_contract_allows() {
        let none = Variants::default();
        let plain = encode(vec![("enabled", true.into())]);
        assert!(decode(&plain, &Faults::new([Fault::CtyOnly]), &none).is_err());
        let cty = encode(vec![
            ("enabled", Value::Nil),
            ("fingerprint_period", Value::Nil),
        ]);
        assert!(decode(&cty, &Faults::new([Fault::SetConfigRejectsNil]), &none).is_err());
        assert!(decode(&cty, &Faults::default(), &none).is_ok());
    }

    #[test]
    fn without_a_schema_only_empty_bytes_are_accepted() {
        let no_schema = Variants::new([Variant::NoConfigSchema]);
        let faults = Faults::default();
        assert_eq!(schema(&faults, &no_schema), None);
        assert!(schema(&faults, &Variants::default()).is_some());
        assert_eq!(
            decode(&[], &faults, &no_schema).unwrap(),
            PluginConfig::default()
        );
        for bytes in [vec![0x80], encode(vec![("enabled", true.into())])] {
            let err = decode(&bytes, &faults, &no_schema).unwrap_err();
            assert!(err.contains("takes no configuration"), "{err}");
        }
    }
}
