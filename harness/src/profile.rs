//! Profiles: the numbers of a contract version (deadlines, grace periods), kept out of step code.
//!
//! `--profile NAME` picks an embedded profile; `--profile FILE` reads a TOML file and lays it
//! over the default profile, so a file needs only the values it changes.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::specs;

pub const DEFAULT_PROFILE: &str = "nomad-1.10";

#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("failed to read profile {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("failed to parse profile {name}: {message}")]
    Parse { name: String, message: String },
    #[error("unknown profile {name:?}: not a file, and not one of the built-in profiles ({known})")]
    Unknown { name: String, known: String },
    #[error(
        "profile {name}: [{table}] {key} is 0s: a deadline must be longer than zero (nothing can be done in no time)"
    )]
    ZeroDeadline {
        name: String,
        table: &'static str,
        key: &'static str,
    },
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    pub nomad_versions: String,
    #[serde(default)]
    pub description: String,
    pub dhv: DhvProfile,
    pub csi: CsiProfile,
    pub driver: DriverProfile,
    pub lock: LockProfile,
    pub harness: HarnessProfile,
}

/// The lock suite's numbers: which reference server (Nomad's TTL bounds, or scaled down), and
/// how long the harness waits for and tolerates what a lock client does.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockProfile {
    /// The reference Variables server's numbers: `nomad` (TTL 10s..24h, default 15s), or
    /// `fast` (all divided by 10: TTL from 1s).
    pub server: String,
    /// The application task's kill_timeout in the sidecar pattern (Nomad's default: 5 s).
    #[serde(with = "humantime_serde")]
    pub kill_timeout: Duration,
    /// How long a client may take to acquire a free lock and start the protected process.
    #[serde(with = "humantime_serde")]
    pub start_within: Duration,
    /// How long another holder keeps the lock while a client waits for it; and the least the
    /// renew clauses watch a client hold its own (two and a half of its TTLs, at most four
    /// times this).
    #[serde(with = "humantime_serde")]
    pub hold_for: Duration,
    /// Most acquire requests per second a waiting client may send ("retry with backoff").
    pub max_acquire_rate: f64,
    /// How long the protected process may still run after a renew conflict (or, in the
    /// sidecar pattern, the leader may take to exit).
    #[serde(with = "humantime_serde")]
    pub stop_within: Duration,
    /// How far past the TTL, counted from the last renew the server accepted, the protected
    /// process may still run when renews fail.
    #[serde(with = "humantime_serde")]
    pub lapse_tolerance: Duration,
    /// How long a client refused with 403 may take to exit.
    #[serde(with = "humantime_serde")]
    pub refusal_within: Duration,
    /// Most acquire attempts a client refused with 403 may make.
    pub refusal_max_attempts: usize,
    /// The least the singleton campaign runs (it runs as long as its scheduled faults need,
    /// sized from the clients' TTL and lock delay; more is a soak), and with how many clients.
    #[serde(with = "humantime_serde")]
    pub campaign: Duration,
    pub campaign_clients: usize,
    /// Measurement slack: how much two protected processes may seem to overlap, or one may
    /// seem to run past its lock, before it counts (probe timestamps are taken by the harness).
    #[serde(with = "humantime_serde")]
    pub overlap_tolerance: Duration,
}

impl LockProfile {
    /// The reference server's profile by name.
    pub fn server_profile(&self) -> Result<nomad_conform_variables::Profile, String> {
        match self.server.as_str() {
            "nomad" => Ok(nomad_conform_variables::Profile::nomad()),
            "fast" => Ok(nomad_conform_variables::Profile::fast()),
            other => Err(format!(
                "profile [lock] server = {other:?}: expected \"nomad\" or \"fast\""
            )),
        }
    }
}

/// How Nomad's client times a task driver plugin, and how long the harness waits for what it
/// observes.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriverProfile {
    /// go-plugin's StartTimeout: how long the host waits for the handshake line.
    #[serde(with = "humantime_serde")]
    pub start_timeout: Duration,
    /// How long the first fingerprint may take (Nomad batches first fingerprints for 50 s).
    #[serde(with = "humantime_serde")]
    pub fingerprint_deadline: Duration,
    /// How long to wait for a second fingerprint (built-in drivers resend every 30 s).
    #[serde(with = "humantime_serde")]
    pub fingerprint_period: Duration,
    /// Driver/Shutdown's deadline and the grace before SIGKILL when Nomad stops a plugin.
    #[serde(with = "humantime_serde")]
    pub shutdown_timeout: Duration,
    /// The harness's deadline for one unary RPC (Nomad sets none on most of them).
    #[serde(with = "humantime_serde")]
    pub rpc_deadline: Duration,
    /// How long a task's processes may still be seen once the driver said the task ended (the
    /// kernel reaping them); not a deadline on the driver.
    #[serde(with = "humantime_serde")]
    pub stop_margin: Duration,
    /// The harness's safety cap on StartTask, RecoverTask, StopTask and DestroyTask, which
    /// Nomad's client calls with no deadline at all (plugins/drivers/client.go), and on the
    /// WaitTask after a stop or destroy: an image pull may take minutes; only a driver that
    /// never answers fails, and a slow answer is reported as slow.
    #[serde(with = "humantime_serde")]
    pub task_call_deadline: Duration,
    /// TaskStats' collection interval (the client's default is 1 s).
    #[serde(with = "humantime_serde")]
    pub stats_interval: Duration,
    /// How long an exec streaming case may take (Nomad's conformance suite gives 30 s).
    #[serde(with = "humantime_serde")]
    pub exec_deadline: Duration,
    /// Generated task configurations tried by DRIVER-GENERATED-CONFIGS.
    pub generated_cases: u32,
}

/// Timeouts Nomad applies to CSI calls.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CsiProfile {
    #[serde(with = "humantime_serde")]
    pub plugin_info_deadline: Duration,
    #[serde(with = "humantime_serde")]
    pub probe_deadline: Duration,
    #[serde(with = "humantime_serde")]
    pub health_timeout: Duration,
    #[serde(with = "humantime_serde")]
    pub rpc_deadline: Duration,
}

impl CsiProfile {
    /// A deadline by the name the specs use.
    pub fn deadline(&self, name: &str) -> Option<Duration> {
        match name {
            "plugin info" => Some(self.plugin_info_deadline),
            "probe" => Some(self.probe_deadline),
            "health" => Some(self.health_timeout),
            "rpc" => Some(self.rpc_deadline),
            _ => None,
        }
    }
}

/// Deadlines of the dynamic host volume plugin contract.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DhvProfile {
    #[serde(with = "humantime_serde")]
    pub fingerprint_discovery_deadline: Duration,
    #[serde(with = "humantime_serde")]
    pub fingerprint_documented_deadline: Duration,
    #[serde(with = "humantime_serde")]
    pub create_deadline: Duration,
    #[serde(with = "humantime_serde")]
    pub delete_deadline: Duration,
}

impl DhvProfile {
    /// A deadline by the name the specs use (`Then the call completes within the "create"
    /// deadline`).
    pub fn deadline(&self, name: &str) -> Option<Duration> {
        match name {
            "fingerprint discovery" => Some(self.fingerprint_discovery_deadline),
            "fingerprint documented" => Some(self.fingerprint_documented_deadline),
            "create" => Some(self.create_deadline),
            "delete" => Some(self.delete_deadline),
            _ => None,
        }
    }

    /// The deadline a fingerprint call runs under: the longer of the two, so that both clauses
    /// can be judged from one call.
    pub fn fingerprint_kill_deadline(&self) -> Duration {
        self.fingerprint_discovery_deadline
            .max(self.fingerprint_documented_deadline)
    }
}

/// How the harness itself behaves; not numbers of any Nomad contract.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HarnessProfile {
    #[serde(with = "humantime_serde")]
    pub output_close_grace: Duration,
    #[serde(with = "humantime_serde")]
    pub stray_settle: Duration,
    #[serde(with = "humantime_serde")]
    pub shrink_budget: Duration,
    #[serde(with = "humantime_serde")]
    pub launch_timeout: Duration,
}

impl Profile {
    /// Load by embedded name or file path (any path, UTF-8 or not); `None` gives the default
    /// profile.
    pub fn load(spec: Option<&Path>) -> Result<Profile, ProfileError> {
        let base_text =
            specs::embedded_profile(DEFAULT_PROFILE).ok_or_else(|| ProfileError::Unknown {
                name: DEFAULT_PROFILE.into(),
                known: specs::embedded_profile_names().join(", "),
            })?;
        let mut base: toml::Value = parse_toml(DEFAULT_PROFILE, base_text)?;
        let spec = spec.unwrap_or(Path::new(DEFAULT_PROFILE));
        let shown = spec.display().to_string();
        let name = shown.as_str();
        let overlay_text = if let Some(text) = spec.to_str().and_then(specs::embedded_profile) {
            text.to_string()
        } else if spec.is_file() {
            std::fs::read_to_string(spec).map_err(|source| ProfileError::Read {
                path: name.into(),
                source,
            })?
        } else {
            return Err(ProfileError::Unknown {
                name: name.into(),
                known: specs::embedded_profile_names().join(", "),
            });
        };
        let overlay = parse_toml(name, &overlay_text)?;
        merge(&mut base, overlay);
        let profile: Profile =
            base.try_into()
                .map_err(|e: toml::de::Error| ProfileError::Parse {
                    name: name.into(),
                    message: e.to_string(),
                })?;
        match profile
            .deadlines()
            .into_iter()
            .find(|(_, _, d)| d.is_zero())
        {
            Some((table, key, _)) => Err(ProfileError::ZeroDeadline {
                name: name.into(),
                table,
                key,
            }),
            None => Ok(profile),
        }
    }

    /// Every number of the profile that is a deadline or a length of time something is given
    /// (as `[table]`, key, value): none of them may be zero. Tolerances, margins and graces
    /// may be.
    fn deadlines(&self) -> Vec<(&'static str, &'static str, Duration)> {
        let (dhv, csi, driver, lock, harness) = (
            &self.dhv,
            &self.csi,
            &self.driver,
            &self.lock,
            &self.harness,
        );
        vec![
            (
                "dhv",
                "fingerprint_discovery_deadline",
                dhv.fingerprint_discovery_deadline,
            ),
            (
                "dhv",
                "fingerprint_documented_deadline",
                dhv.fingerprint_documented_deadline,
            ),
            ("dhv", "create_deadline", dhv.create_deadline),
            ("dhv", "delete_deadline", dhv.delete_deadline),
            ("csi", "plugin_info_deadline", csi.plugin_info_deadline),
            ("csi", "probe_deadline", csi.probe_deadline),
            ("csi", "health_timeout", csi.health_timeout),
            ("csi", "rpc_deadline", csi.rpc_deadline),
            ("driver", "start_timeout", driver.start_timeout),
            (
                "driver",
                "fingerprint_deadline",
                driver.fingerprint_deadline,
            ),
            ("driver", "fingerprint_period", driver.fingerprint_period),
            ("driver", "shutdown_timeout", driver.shutdown_timeout),
            ("driver", "rpc_deadline", driver.rpc_deadline),
            ("driver", "task_call_deadline", driver.task_call_deadline),
            ("driver", "stats_interval", driver.stats_interval),
            ("driver", "exec_deadline", driver.exec_deadline),
            ("lock", "start_within", lock.start_within),
            ("lock", "hold_for", lock.hold_for),
            ("lock", "stop_within", lock.stop_within),
            ("lock", "refusal_within", lock.refusal_within),
            ("harness", "launch_timeout", harness.launch_timeout),
        ]
    }
}

fn parse_toml(name: &str, text: &str) -> Result<toml::Value, ProfileError> {
    toml::from_str(text).map_err(|e: toml::de::Error| ProfileError::Parse {
        name: name.into(),
        message: e.to_string(),
    })
}

/// Lay `overlay` over `base`: tables merge key by key, anything else replaces.
fn merge(base: &mut toml::Value, overlay: toml::Value) {
    match (base, overlay) {
        (toml::Value::Table(b), toml::Value::Table(o)) => {
            for (k, v) in o {
                match b.get_mut(&k) {
                    Some(existing) => merge(existing, v),
                    None => {
                        b.insert(k, v);
                    }
                }
            }
        }
        (b, o) => *b = o,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_profile_has_the_contract_numbers() {
        let p = Profile::load(None).unwrap();
        assert_eq!(p.name, "nomad-1.10");
        assert_eq!(p.dhv.fingerprint_discovery_deadline, Duration::from_secs(1));
        assert_eq!(
            p.dhv.fingerprint_documented_deadline,
            Duration::from_secs(5)
        );
        assert_eq!(p.dhv.create_deadline, Duration::from_secs(60));
        assert_eq!(p.dhv.deadline("delete"), Some(Duration::from_secs(60)));
        assert_eq!(p.dhv.fingerprint_kill_deadline(), Duration::from_secs(5));
        assert_eq!(p.csi.deadline("plugin info"), Some(Duration::from_secs(1)));
        assert_eq!(p.csi.rpc_deadline, Duration::from_secs(120));
    }

    #[test]
    fn the_fast_profile_shortens_only_the_harness_waits() {
        let fast = Profile::load(Some(Path::new("fast"))).unwrap();
        let base = Profile::load(None).unwrap();
        assert_eq!(fast.name, "fast");
        assert!(fast.driver.fingerprint_period < base.driver.fingerprint_period);
        assert_eq!(base.driver.start_timeout, Duration::from_secs(60));
        // Deadlines Nomad enforces on DHV and CSI plugins are the same.
        assert_eq!(fast.dhv.create_deadline, base.dhv.create_deadline);
        assert_eq!(fast.csi.probe_deadline, base.csi.probe_deadline);
    }

    #[test]
    fn file_overlays_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("p.toml");
        std::fs::write(&f, "name = \"short\"\n[dhv]\ncreate_deadline = \"2s\"\n").unwrap();
        let p = Profile::load(Some(&f)).unwrap();
        assert_eq!(p.name, "short");
        assert_eq!(p.dhv.create_deadline, Duration::from_secs(2));
        assert_eq!(p.dhv.delete_deadline, Duration::from_secs(60));
    }

    #[test]
    fn bad_profiles_are_reported() {
        let err = Profile::load(Some(Path::new("no-such-profile")))
            .unwrap_err()
            .to_string();
        assert!(err.contains("nomad-1.10"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("p.toml");
        std::fs::write(&f, "[dhv]\ncreate_deadline = \"soon\"\n").unwrap();
        assert!(matches!(
            Profile::load(Some(&f)),
            Err(ProfileError::Parse { .. })
        ));
        std::fs::write(&f, "[dhv]\ncreat_deadline = \"1s\"\n").unwrap();
        let err = Profile::load(Some(&f)).unwrap_err().to_string();
        assert!(err.contains("creat_deadline"), "{err}");
    }

    #[test]
    fn a_zero_deadline_is_refused_and_a_zero_tolerance_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("p.toml");
        let load = |text: &str| {
            std::fs::write(&f, text).unwrap();
            Profile::load(Some(&f)).map_err(|e| e.to_string())
        };
        for (table, key) in [
            ("dhv", "create_deadline"),
            ("csi", "probe_deadline"),
            ("driver", "start_timeout"),
            ("lock", "stop_within"),
            ("harness", "launch_timeout"),
        ] {
            let err = load(&format!("[{table}]\n{key} = \"0s\"\n")).unwrap_err();
            assert!(
                err.contains(&format!("[{table}] {key} is 0s")) && err.contains("deadline"),
                "{err}"
            );
        }
        assert!(load("[lock]\noverlap_tolerance = \"0s\"\n").is_ok());
        // The campaign's time is the least it lasts (0: as long as its schedule needs).
        assert!(load("[lock]\ncampaign = \"0s\"\n").is_ok());
        // The built-in profiles have none.
        for name in specs::embedded_profile_names() {
            Profile::load(Some(Path::new(name))).unwrap();
        }
    }
}
