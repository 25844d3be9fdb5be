//! Fingerprint: the driver's health and node attributes, as a stream.
//!
//! Nomad opens the stream once per driver instance and waits for the first message before it
//! considers the driver fingerprinted, so the first message goes out at once. After that the
//! driver repeats itself every `fingerprint_period` (30 s by default, like the built-in
//! drivers), for as long as the client listens.
//!
//! A driver with `enabled = false` is UNDETECTED ("disabled"): Nomad does not schedule on it,
//! and the stream stays open (the undetected variant says the same of an enabled
//! one). Otherwise it is HEALTHY with the attributes
//! `driver.exec-reference = true` and `driver.exec-reference.version = "<plugin version>"`.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use nomad_conform_proto::nomad::drivers::FingerprintResponse;
use nomad_conform_proto::nomad::drivers::fingerprint_response::HealthState;
use nomad_conform_proto::nomad::structs::{Attribute, attribute};
use tokio::sync::mpsc;
use tokio_stream::Stream;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Status;

use crate::config::PluginConfig;
use crate::faults::{Fault, Faults};
use crate::plugin::{PLUGIN_NAME, Plugin};
use crate::variants::{Variant, Variants};

pub type FingerprintStream =
    Pin<Box<dyn Stream<Item = Result<FingerprintResponse, Status>> + Send>>;

pub fn stream(plugin: Arc<Plugin>) -> FingerprintStream {
    let (sender, receiver) = mpsc::channel(1);
    tokio::spawn(async move {
        let faults = &plugin.faults;
        if faults.has(Fault::FingerprintLate) {
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        loop {
            let config = plugin.config();
            let print = fingerprint(&config, faults, &plugin.variants);
            if sender.send(Ok(print)).await.is_err() {
                return; // The client went away.
            }
            if faults.has(Fault::FingerprintCloses) {
                return; // Dropping the sender ends the stream.
            }
            if faults.has(Fault::FingerprintOnce) {
                sender.closed().await;
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(config.fingerprint_period) => {}
                _ = sender.closed() => return,
            }
        }
    });
    Box::pin(ReceiverStream::new(receiver))
}

/// One fingerprint for the current config.
pub fn fingerprint(
    config: &PluginConfig,
    faults: &Faults,
    variants: &Variants,
) -> FingerprintResponse {
    if !config.enabled {
        return FingerprintResponse {
            health: HealthState::Undetected as i32,
            health_description: "disabled".into(),
            ..Default::default()
        };
    }
    if variants.has(Variant::Undetected) {
        return FingerprintResponse {
            health: HealthState::Undetected as i32,
            health_description: "exec runtime not found on this node (undetected variant)".into(),
            ..Default::default()
        };
    }
    let detected = Attribute {
        value: Some(attribute::Value::BoolVal(true)),
        unit: String::new(),
    };
    let version = Attribute {
        value: if faults.has(Fault::FingerprintEmptyAttribute) {
            None
        } else {
            Some(attribute::Value::StringVal(
                env!("CARGO_PKG_VERSION").into(),
            ))
        },
        unit: String::new(),
    };
    let health = if faults.has(Fault::FingerprintBadHealth) {
        7
    } else {
        HealthState::Healthy as i32
    };
    let mut attributes = HashMap::from([
        (format!("driver.{PLUGIN_NAME}"), detected),
        (format!("driver.{PLUGIN_NAME}.version"), version),
    ]);
    for (key, value) in &config.extra_attributes {
        attributes.insert(
            format!("driver.{PLUGIN_NAME}.{key}"),
            Attribute {
                value: Some(attribute::Value::StringVal(value.clone())),
                unit: String::new(),
            },
        );
    }
    // empty-health-description: Nomad needs no description for a healthy driver.
    let health_description = if variants.has(Variant::EmptyHealthDescription) {
        ""
    } else {
        "healthy"
    };
    FingerprintResponse {
        attributes,
        health,
        health_description: health_description.into(),
        err: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_enabled_driver_is_healthy_with_its_attributes() {
        let none = Variants::default();
        let print = fingerprint(&PluginConfig::default(), &Faults::default(), &none);
        assert_eq!(print.health, HealthState::Healthy as i32);
        assert_eq!(print.health_description, "healthy");
        assert_eq!(
            print.attributes["driver.exec-reference"].value,
            Some(attribute::Value::BoolVal(true))
        );
        assert!(matches!(
            print.attributes["driver.exec-reference.version"].value,
            Some(attribute::Value::StringVal(_))
        ));
    }

    #[test]
    fn a_disabled_driver_is_undetected() {
        let config = PluginConfig {
            enabled: false,
            ..Default::default()
        };
        let print = fingerprint(&config, &Faults::default(), &Variants::default());
        assert_eq!(print.health, HealthState::Undetected as i32);
        assert!(print.attributes.is_empty());
    }
}
