//! The two timing knobs every command shares, valid by construction: [`Jobs`] (how many cases or
//! checks run at once) and [`TimeScale`] (the factor every bound is multiplied by, with the one
//! floor rule of [`TimeScale::scale`]). The command line parses them with their `FromStr`; a
//! library caller builds them with [`Jobs::new`] and [`TimeScale::new`].

use std::fmt;
use std::num::NonZeroUsize;
use std::str::FromStr;
use std::time::Duration;

/// How many cases (or checks, or client runs) run in parallel: at least 1; by default the core
/// count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Jobs(NonZeroUsize);

impl Jobs {
    /// `n` jobs, or the usage error of `--jobs 0`.
    pub fn new(n: usize) -> Result<Jobs, String> {
        NonZeroUsize::new(n)
            .map(Jobs)
            .ok_or_else(|| format!("--jobs must be a whole number of at least 1, got {n}"))
    }

    /// One at a time.
    pub const ONE: Jobs = Jobs(NonZeroUsize::MIN);

    /// The core count (what the machine says is available; 1 when it cannot say).
    pub fn cores() -> Jobs {
        Jobs(std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN))
    }

    pub fn get(self) -> usize {
        self.0.get()
    }
}

impl Default for Jobs {
    fn default() -> Self {
        Jobs::cores()
    }
}

impl FromStr for Jobs {
    type Err = String;
    fn from_str(text: &str) -> Result<Jobs, String> {
        let n: usize = text
            .trim()
            .parse()
            .map_err(|_| format!("--jobs must be a whole number of at least 1, got {text:?}"))?;
        Jobs::new(n)
    }
}

impl fmt::Display for Jobs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The factor every time bound of a run is multiplied by (`--time-scale`, slow machines): a
/// finite number above 0 and at most [`TimeScale::MAX`]; 1 by default.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct TimeScale(f64);

impl TimeScale {
    /// The largest factor: every bound times 100 (a 40 s case limit becomes 67 minutes) is already
    /// more than any machine needs, and far below what a `Duration` holds.
    pub const MAX: f64 = 100.0;

    /// The most a factor below 1 shrinks a bound: to a tenth ([`TimeScale::scale`]).
    pub const MIN_SHRINK: f64 = 0.1;

    /// Unscaled.
    pub const ONE: TimeScale = TimeScale(1.0);

    /// `factor`, or the usage error naming the flag and the range.
    pub fn new(factor: f64) -> Result<TimeScale, String> {
        if factor.is_finite() && factor > 0.0 && factor <= Self::MAX {
            Ok(TimeScale(factor))
        } else {
            Err(out_of_range(&factor.to_string()))
        }
    }

    pub fn factor(self) -> f64 {
        self.0
    }

    /// The one floor rule for every scaled bound of the kit: `base` times the factor, but never
    /// below a tenth of `base` ([`TimeScale::MIN_SHRINK`]: a small factor speeds a test run up
    /// without making a grace or a client's timeout too short to mean anything) and never below
    /// 1 ms.
    pub fn scale(self, base: Duration) -> Duration {
        let factor = self.0.max(Self::MIN_SHRINK);
        base.mul_f64(factor).max(Duration::from_millis(1))
    }

    /// [`TimeScale::scale`] of `ms` milliseconds.
    pub fn scale_ms(self, ms: u64) -> Duration {
        self.scale(Duration::from_millis(ms))
    }
}

impl Default for TimeScale {
    fn default() -> Self {
        TimeScale::ONE
    }
}

fn out_of_range(text: &str) -> String {
    format!(
        "--time-scale must be a finite number above 0 and at most {}, got {text:?}",
        TimeScale::MAX
    )
}

impl FromStr for TimeScale {
    type Err = String;
    fn from_str(text: &str) -> Result<TimeScale, String> {
        let factor: f64 = text.trim().parse().map_err(|_| out_of_range(text))?;
        TimeScale::new(factor).map_err(|_| out_of_range(text))
    }
}

impl fmt::Display for TimeScale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_scale_is_finite_above_0_and_at_most_100() {
        for good in ["1", "0.2", "100", " 3 "] {
            assert!(good.parse::<TimeScale>().is_ok(), "{good}");
        }
        for bad in ["0", "-1", "1e300", "100.5", "inf", "-inf", "NaN", "", "two"] {
            let error = bad.parse::<TimeScale>().expect_err(bad);
            assert!(
                error.contains("--time-scale") && error.contains("above 0 and at most 100"),
                "{bad}: {error}"
            );
        }
        assert!(TimeScale::new(f64::INFINITY).is_err());
        assert_eq!(TimeScale::new(2.5).map(TimeScale::factor), Ok(2.5));
    }

    #[test]
    fn scaling_multiplies_and_shrinks_a_bound_at_most_tenfold_and_never_below_a_millisecond() {
        let second = Duration::from_secs(1);
        let scale = |factor: f64| TimeScale::new(factor).unwrap();
        assert_eq!(scale(2.0).scale(second), Duration::from_secs(2));
        assert_eq!(scale(0.5).scale(second), Duration::from_millis(500));
        assert_eq!(scale(0.01).scale(second), Duration::from_millis(100));
        assert_eq!(scale(0.01).scale(Duration::ZERO), Duration::from_millis(1));
        assert_eq!(TimeScale::ONE.scale_ms(40), Duration::from_millis(40));
    }

    #[test]
    fn jobs_are_at_least_one_and_default_to_the_core_count() {
        assert_eq!("3".parse::<Jobs>().map(Jobs::get), Ok(3));
        for bad in ["0", "-1", "", "two", "1.5"] {
            let error = bad.parse::<Jobs>().expect_err(bad);
            assert!(
                error.contains("--jobs must be a whole number of at least 1"),
                "{error}"
            );
        }
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        assert_eq!(Jobs::default().get(), cores);
    }
}
