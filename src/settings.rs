//! Tuning read from the environment: `GPUSTACK_SETTLE_SECONDS`, `GPUSTACK_POLL_MAX_SECONDS`,
//! `GPUSTACK_HEARTBEAT_SECONDS` and `GPUSTACK_PARALLELISM_<SERVICE>`. Every value is read and
//! range-checked once, when a command starts: a bad one (`NaN`, `inf`, `-1`, `1e400`, `0`
//! slots) is a usage error that names the variable and its range, never a panic or a silent
//! default deep inside an apply. `GPUSTACK_VAR_*` (stack variables) are the stack's business.

use std::sync::OnceLock;
use std::time::Duration;

/// A setting in seconds: its variable, default and allowed range.
struct Seconds {
    var: &'static str,
    default: f64,
    min: f64,
    max: f64,
}

/// How long recovery waits before looking again for a create of an interrupted run.
const SETTLE: Seconds = Seconds { var: "GPUSTACK_SETTLE_SECONDS", default: 5.0, min: 0.0, max: 3600.0 };
/// The longest pause between status probes (probes start 0.25 s apart and back off).
const POLL_MAX: Seconds = Seconds { var: "GPUSTACK_POLL_MAX_SECONDS", default: 15.0, min: 0.05, max: 15.0 };
/// How often long work says it is still going, when progress is not a terminal spinner.
const HEARTBEAT: Seconds = Seconds { var: "GPUSTACK_HEARTBEAT_SECONDS", default: 30.0, min: 0.1, max: 86400.0 };

/// The services whose concurrent calls `GPUSTACK_PARALLELISM_<NAME>` limits (`aws::Service::name`).
const PARALLELISM_SERVICES: [&str; 7] = ["ec2", "iam", "eks", "ssm", "quotas", "sqs", "events"];
/// Concurrent calls per service: at least one, and few enough that AWS's throttling, not the
/// tool, is the limit people meet.
const PARALLELISM_RANGE: std::ops::RangeInclusive<usize> = 1..=1024;

#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    pub settle: Duration,
    pub poll_max: Duration,
    pub heartbeat: Duration,
    /// Overrides per service name; `None` keeps the service's default.
    parallelism: [(&'static str, Option<usize>); 7],
}

impl Default for Settings {
    fn default() -> Settings {
        Settings::from_env(|_| None).unwrap_or_else(|_| unreachable!("the defaults are in range"))
    }
}

impl Settings {
    /// Reads every setting through `lookup` (the process environment, or a table in tests).
    /// An unset or empty variable keeps its default.
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<Settings, String> {
        let get = |var: &str| lookup(var).filter(|v| !v.trim().is_empty());
        let secs = |s: &Seconds| -> Result<Duration, String> {
            let Some(raw) = get(s.var) else { return Ok(Duration::from_secs_f64(s.default)) };
            match raw.trim().parse::<f64>() {
                Ok(v) if v.is_finite() && (s.min..=s.max).contains(&v) => Ok(Duration::from_secs_f64(v)),
                _ => Err(format!(
                    "{}={raw} is not valid: write a number of seconds from {} to {} (default {})",
                    s.var, s.min, s.max, s.default
                )),
            }
        };
        let mut parallelism = PARALLELISM_SERVICES.map(|name| (name, None));
        for (name, slot) in &mut parallelism {
            let var = format!("GPUSTACK_PARALLELISM_{}", name.to_uppercase());
            let Some(raw) = get(&var) else { continue };
            match raw.trim().parse::<usize>() {
                Ok(n) if PARALLELISM_RANGE.contains(&n) => *slot = Some(n),
                _ => {
                    return Err(format!(
                        "{var}={raw} is not valid: write a whole number of concurrent calls from {} to {}",
                        PARALLELISM_RANGE.start(),
                        PARALLELISM_RANGE.end()
                    ));
                }
            }
        }
        Ok(Settings { settle: secs(&SETTLE)?, poll_max: secs(&POLL_MAX)?, heartbeat: secs(&HEARTBEAT)?, parallelism })
    }

    /// The `GPUSTACK_PARALLELISM_<NAME>` override for a service, if one is set.
    pub fn parallelism(&self, service: &str) -> Option<usize> {
        self.parallelism.iter().find(|(name, _)| *name == service).and_then(|(_, n)| *n)
    }
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

/// Reads the process environment once; the CLI calls this before running any command.
pub fn init_from_env() -> Result<(), String> {
    let lookup = |k: &str| std::env::var_os(k).map(|v| v.to_string_lossy().into_owned());
    let settings = Settings::from_env(lookup)?;
    let _ = SETTINGS.set(settings);
    Ok(())
}

/// The settings of this run (the defaults if the environment was never read, as in unit tests).
pub fn get() -> &'static Settings {
    SETTINGS.get_or_init(Settings::default)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(pairs: &[(&str, &str)]) -> Result<Settings, String> {
        Settings::from_env(|k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn defaults_and_overrides() {
        let d = with(&[]).unwrap();
        assert_eq!(
            (d.settle, d.poll_max, d.heartbeat),
            (Duration::from_secs(5), Duration::from_secs(15), Duration::from_secs(30))
        );
        assert_eq!(d.parallelism("ec2"), None);
        let s = with(&[
            ("GPUSTACK_POLL_MAX_SECONDS", "0.2"),
            ("GPUSTACK_PARALLELISM_IAM", "2"),
            ("GPUSTACK_SETTLE_SECONDS", " "),
        ])
        .unwrap();
        assert_eq!(s.poll_max, Duration::from_millis(200));
        assert_eq!(s.parallelism("iam"), Some(2));
        assert_eq!(s.settle, Duration::from_secs(5));
    }

    #[test]
    fn absurd_values_name_the_variable_and_range() {
        for var in ["GPUSTACK_SETTLE_SECONDS", "GPUSTACK_POLL_MAX_SECONDS", "GPUSTACK_HEARTBEAT_SECONDS"] {
            for bad in ["NaN", "inf", "-inf", "-1", "1e400", "ten", "99999999999999999999"] {
                let e = with(&[(var, bad)]).unwrap_err();
                assert!(e.starts_with(&format!("{var}={bad} is not valid")), "{e}");
                assert!(e.contains(" from ") && e.contains(" to "), "{e}");
            }
        }
        for bad in ["0", "-1", "NaN", "1e3", "99999999999999999999", "4096"] {
            let e = with(&[("GPUSTACK_PARALLELISM_EC2", bad)]).unwrap_err();
            assert!(e.starts_with("GPUSTACK_PARALLELISM_EC2="), "{e}");
            assert!(e.contains("from 1 to 1024"), "{e}");
        }
    }
}
