//! For the project's fuzz targets (`fuzz/`) and the test that replays their corpora: the
//! server's router on a fresh engine, with nothing listening. Not part of the public API.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::acl::{AclConfig, Capability, Policy, Token, WorkloadClaim};
use crate::clock::{Clock, Sleep};
use crate::engine::Engine;
use crate::http::{ListenerKind, router as http_router};
use crate::profile::Profile;

/// A clock that never moves: timers never fire, so one input gives one answer.
#[derive(Debug)]
struct Frozen {
    at: Instant,
}

impl Clock for Frozen {
    fn now(&self) -> Instant {
        self.at
    }

    fn wall(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_700_000_000)
    }

    fn sleep(&self, _: Duration) -> Sleep {
        Box::pin(std::future::pending())
    }
}

/// The tokens the router of [`router`] knows when its ACLs are on.
pub const TOKENS: [&str; 3] = ["fuzz-management", "fuzz-client", "fuzz-workload"];

/// The router of a reference server with Nomad's profile, on a clock that never moves. `mode`
/// picks the listener (bits 0-1: TCP, unix socket, Task API socket) and the ACLs (bit 2: on,
/// with a management, a client and a workload-identity token, [`TOKENS`]).
pub fn router(mode: u8) -> axum::Router {
    let kind = match mode & 3 {
        0 | 3 => ListenerKind::Tcp,
        1 => ListenerKind::Unix,
        _ => ListenerKind::TaskApi,
    };
    let acl = if mode & 4 != 0 {
        AclConfig::enabled()
            .with_policy(
                Policy::new("fuzz")
                    .path("default", "app/*", &[Capability::Read, Capability::Write])
                    .path("*", "locks/*", &[Capability::List, Capability::Destroy]),
            )
            .with_token(Token::management(TOKENS[0]))
            .with_token(Token::client(TOKENS[1], &["fuzz"]))
            .with_token(Token::workload(
                TOKENS[2],
                WorkloadClaim {
                    namespace: "default".into(),
                    job: "web".into(),
                    group: "g".into(),
                    task: "t".into(),
                },
                &[],
            ))
    } else {
        AclConfig::disabled()
    };
    let clock = Arc::new(Frozen { at: Instant::now() });
    http_router(Arc::new(Engine::new(Profile::nomad(), clock, acl)), kind)
}
