//! Waiting for the plugin to be ready, as Nomad does before it calls anything else: Probe, each
//! with the profile's probe timeout, the first at once and then 5 seconds after the previous one
//! answered, until one reports ready or the health timeout (counted from the plugin's start) runs
//! out (`client/allocrunner/taskrunner/plugin_supervisor_hook.go`, ensureSupervisorLoop). A plugin
//! that is not ready by then is restarted and never registered: Nomad calls nothing else on it.

use std::time::{Duration, Instant};

use crate::plugins::csi::{Connection, Rpc, call, pb};

/// How long Nomad waits after a Probe that did not report ready before it probes again.
pub const NOMAD_PROBE_INTERVAL: Duration = Duration::from_secs(5);

/// What Nomad's start-up probes saw.
#[derive(Clone, Debug, Default)]
pub struct Readiness {
    /// Every probe made, with when it answered (from the start) and whether it said ready.
    pub probes: Vec<(Duration, Rpc, bool)>,
    /// When a probe first answered ready, counted from the start; `None`: not within the health
    /// timeout.
    pub ready_after: Option<Duration>,
    /// The health timeout the probes were held to.
    pub health_timeout: Duration,
    /// What the start was: the plugin's own start (`--launch`), or the harness's first contact.
    pub counted_from: &'static str,
}

impl Readiness {
    pub fn ready(&self) -> bool {
        self.ready_after.is_some()
    }

    /// Both plugins of a split run (a node plugin and its controller, each a task of its own
    /// that Nomad supervises apart): ready when both are, at the later time; otherwise what the
    /// one that is not ready saw.
    pub fn and(self, other: Readiness) -> Readiness {
        match (self.ready_after, other.ready_after) {
            (Some(a), Some(b)) => {
                let mut probes = self.probes;
                probes.extend(other.probes);
                Readiness {
                    probes,
                    ready_after: Some(a.max(b)),
                    ..self
                }
            }
            (None, _) => self,
            (Some(_), None) => other,
        }
    }

    /// Why the plugin is not ready, in a line: the probes made and the last answer.
    pub fn why_not(&self) -> String {
        let last = self
            .probes
            .last()
            .map(|(_, r, _)| r.outcome())
            .unwrap_or_else(|| "no probe was made".into());
        format!(
            "no Probe reported ready within the health timeout of {} counted from {} ({} probe{} at Nomad's interval of {}; the last answered {last})",
            crate::fmt_duration(self.health_timeout),
            self.counted_from,
            self.probes.len(),
            if self.probes.len() == 1 { "" } else { "s" },
            crate::fmt_duration(NOMAD_PROBE_INTERVAL),
        )
    }
}

/// Probe's `ready`: absent means ready.
pub fn probe_says_ready(resp: &pb::ProbeResponse) -> bool {
    resp.ready != Some(false)
}

/// Probe the plugin as Nomad's supervisor does while its task starts, from `started`.
pub async fn wait_ready(
    conn: &Connection,
    started: Instant,
    counted_from: &'static str,
    probe_deadline: Duration,
    health_timeout: Duration,
) -> Readiness {
    let mut out = Readiness {
        health_timeout,
        counted_from,
        ..Readiness::default()
    };
    loop {
        let elapsed = started.elapsed();
        if elapsed >= health_timeout {
            return out;
        }
        // The probe's context is cut by the health timeout too.
        let deadline = probe_deadline.min(health_timeout - elapsed);
        let mut c = conn.identity();
        let (rpc, resp) = call(
            "Identity",
            "Probe",
            pb::ProbeRequest {},
            deadline,
            |r| async move { c.probe(r).await },
        )
        .await;
        let answered = started.elapsed();
        let ready = resp.as_ref().is_some_and(probe_says_ready) && answered <= health_timeout;
        out.probes.push((answered, rpc, ready));
        if ready {
            out.ready_after = Some(answered);
            return out;
        }
        let next = answered + NOMAD_PROBE_INTERVAL;
        if next >= health_timeout {
            return out;
        }
        tokio::time::sleep_until((started + next).into()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(ready_after: Option<u64>, from: &'static str) -> Readiness {
        Readiness {
            ready_after: ready_after.map(Duration::from_secs),
            health_timeout: Duration::from_secs(30),
            counted_from: from,
            ..Readiness::default()
        }
    }

    #[test]
    fn a_split_plugin_is_ready_when_both_halves_are() {
        let both = seen(Some(1), "node").and(seen(Some(6), "controller"));
        assert_eq!(both.ready_after, Some(Duration::from_secs(6)));
        let controller_late = seen(Some(1), "node").and(seen(None, "controller"));
        assert!(!controller_late.ready());
        assert_eq!(controller_late.counted_from, "controller");
        let node_late = seen(None, "node").and(seen(Some(1), "controller"));
        assert!(!node_late.ready());
        assert_eq!(node_late.counted_from, "node");
    }

    #[test]
    fn an_absent_ready_is_ready() {
        assert!(probe_says_ready(&pb::ProbeResponse { ready: None }));
        assert!(probe_says_ready(&pb::ProbeResponse { ready: Some(true) }));
        assert!(!probe_says_ready(&pb::ProbeResponse { ready: Some(false) }));
    }
}
