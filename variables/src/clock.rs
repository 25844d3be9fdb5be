//! Time as the server sees it: a monotonic instant for timers and history, a wall clock for
//! `CreateTime`/`ModifyTime` (Unix nanoseconds, as Nomad stores them) and for reports, and
//! sleeping for lock timers.
//!
//! [`TokioClock`] follows tokio's clock, so a test that pauses tokio time
//! (`tokio::time::pause`, `#[tokio::test(start_paused = true)]`) drives lock expiry with
//! Nomad's real numbers in virtual time; its wall clock advances with that virtual time.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A future returned by [`Clock::sleep`].
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Source of time for the server's lock timers, history and variable timestamps.
pub trait Clock: Send + Sync + Debug + 'static {
    /// Monotonic now, used for timers and history ordering.
    fn now(&self) -> Instant;
    /// Wall-clock now, used for reports and variable timestamps.
    fn wall(&self) -> SystemTime;
    /// Completes after `duration` of this clock's time.
    fn sleep(&self, duration: Duration) -> Sleep;
    /// Wall clock as Unix nanoseconds (Nomad's `CreateTime`/`ModifyTime` format).
    fn unix_nanos(&self) -> i64 {
        self.wall()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }
}

/// The default clock: tokio's (possibly paused) time, with a wall clock anchored at creation.
#[derive(Debug, Clone)]
pub struct TokioClock {
    wall_base: SystemTime,
    mono_base: tokio::time::Instant,
}

impl TokioClock {
    /// A clock anchored at the current wall-clock time.
    pub fn new() -> Self {
        Self {
            wall_base: SystemTime::now(),
            mono_base: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Instant {
        tokio::time::Instant::now().into_std()
    }

    fn wall(&self) -> SystemTime {
        self.wall_base + tokio::time::Instant::now().duration_since(self.mono_base)
    }

    fn sleep(&self, duration: Duration) -> Sleep {
        Box::pin(tokio::time::sleep(duration))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn paused_time_moves_both_clocks() {
        let clock = TokioClock::new();
        let (mono, wall) = (clock.now(), clock.wall());
        clock.sleep(Duration::from_secs(30)).await;
        assert_eq!(clock.now() - mono, Duration::from_secs(30));
        assert_eq!(
            clock.wall().duration_since(wall).unwrap(),
            Duration::from_secs(30)
        );
        assert!(clock.unix_nanos() > 1_600_000_000_000_000_000);
    }
}
