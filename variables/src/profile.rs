//! The numbers the server enforces, in one struct, with Nomad's real values and a scaled-down
//! profile for fast tests.
//!
//! Source: contract B.3 (constants in `nomad/structs/variables.go`: minimum TTL 10s, maximum
//! 24h, default TTL 15s, default lock delay 15s; the leader's timer runs for 2 × TTL) and C.4
//! (variables are limited to 64 KiB of keys plus values). Scaling divides every duration by
//! one integer, so a fast profile keeps Nomad's proportions (delay = 1.5 × minimum TTL, timer
//! = 2 × TTL). Error texts stay Nomad's exact wording in every profile (for example "TTL must
//! be between 10 seconds and 24 hours"), because clients may match them.

use std::time::Duration;

/// Lock and size limits the reference server enforces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    /// Short name for reports (`nomad`, `fast`, ...).
    pub name: String,
    /// Every duration below is Nomad's value divided by this number (1 for Nomad's own).
    pub scale_divisor: u32,
    /// Shortest TTL an acquire may ask for (Nomad: 10s).
    pub lock_ttl_min: Duration,
    /// Longest TTL an acquire may ask for (Nomad: 24h).
    pub lock_ttl_max: Duration,
    /// TTL used when a lock asks for none (Nomad: 15s).
    pub lock_ttl_default: Duration,
    /// Lock delay used when a lock asks for none (Nomad: 15s); no bound applies to an
    /// explicit delay other than being non-negative.
    pub lock_delay_default: Duration,
    /// The leader's timer runs for this many TTLs before the lock delay starts (Nomad: 2).
    pub ttl_timer_multiplier: u32,
    /// Largest sum of item key and value bytes (Nomad: 65536); not scaled.
    pub max_variable_size: u64,
}

impl Profile {
    /// Nomad's real numbers (contract B.3).
    pub fn nomad() -> Self {
        Self {
            name: "nomad".to_string(),
            scale_divisor: 1,
            lock_ttl_min: Duration::from_secs(10),
            lock_ttl_max: Duration::from_secs(24 * 3600),
            lock_ttl_default: Duration::from_secs(15),
            lock_delay_default: Duration::from_secs(15),
            ttl_timer_multiplier: 2,
            max_variable_size: 65_536,
        }
    }

    /// Nomad's numbers divided by 10: TTL 1s..2h24m, default TTL and delay 1.5s.
    pub fn fast() -> Self {
        Self::nomad().scaled("fast", 10)
    }

    /// A copy with every duration divided by `divisor` (0 is treated as 1) and a new name.
    pub fn scaled(&self, name: &str, divisor: u32) -> Self {
        let divisor = divisor.max(1);
        Self {
            name: name.to_string(),
            scale_divisor: self.scale_divisor.saturating_mul(divisor),
            lock_ttl_min: self.lock_ttl_min / divisor,
            lock_ttl_max: self.lock_ttl_max / divisor,
            lock_ttl_default: self.lock_ttl_default / divisor,
            lock_delay_default: self.lock_delay_default / divisor,
            ttl_timer_multiplier: self.ttl_timer_multiplier,
            max_variable_size: self.max_variable_size,
        }
    }
}

impl Default for Profile {
    fn default() -> Self {
        Self::nomad()
    }
}

/// Nanoseconds of a duration, saturating at `i64::MAX` like a Go `time.Duration`.
pub(crate) fn nanos(duration: Duration) -> i64 {
    i64::try_from(duration.as_nanos()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nomad_numbers() {
        let p = Profile::nomad();
        assert_eq!(p.lock_ttl_min, Duration::from_secs(10));
        assert_eq!(p.lock_ttl_max, Duration::from_secs(86_400));
        assert_eq!(p.lock_ttl_default, Duration::from_secs(15));
        assert_eq!(p.lock_delay_default, Duration::from_secs(15));
        assert_eq!(p.ttl_timer_multiplier, 2);
    }

    #[test]
    fn fast_scales_every_duration_by_ten() {
        let p = Profile::fast();
        assert_eq!(p.scale_divisor, 10);
        assert_eq!(p.lock_ttl_min, Duration::from_secs(1));
        assert_eq!(p.lock_ttl_max, Duration::from_secs(8_640));
        assert_eq!(p.lock_ttl_default, Duration::from_millis(1_500));
        assert_eq!(p.lock_delay_default, Duration::from_millis(1_500));
        assert_eq!(p.ttl_timer_multiplier, 2);
        assert_eq!(p.max_variable_size, 65_536);
    }
}
