//! One driver for many cases (capability `reuse`, docs/host-driver.md "Serving many cases"): a
//! worker starts the driver once, without any case's environment, and hands it each case's world
//! in a `case` request; a case that ends cleanly (no driver fault, no restart) gives the driver
//! back for the next case, after the same end-of-case checks a stopped driver gets: nothing the
//! case started is alive (every `dsh` the case's wrapper runs carries the case's token, so an
//! escaped process is found while the driver lives on), and stderr/stdout are scanned for this
//! case's secrets only.

use serde_json::{json, Map, Value};
use std::time::Duration;

use super::super::driver::{Driver, DriverSpec};
use super::super::transcript::Transcript;
use super::super::world::World;
use super::Runner;
use dsh_engine::journal::Journal;
use dsh_formats::case::Case;

/// The capability a driver claims to serve many cases.
pub const REUSE: &str = "reuse";

/// How long a kept driver's case waits before its leftover sweep (before `--time-scale`), so a
/// runtime the driver started just before its last reply has exec'd the case's `dsh` wrapper and
/// carries the case's token.
const SETTLE_MS: u64 = 100;

/// A driver kept between the cases of one worker, with its handshake reply.
pub struct ReusedDriver {
    driver: Driver,
    handshake: Value,
}

impl ReusedDriver {
    /// Stops the driver when its worker is done (`shutdown`; its group is killed in any case).
    pub fn finish(mut self, bound: Duration) {
        let _ = self.driver.shutdown(bound, &mut Transcript::default());
    }
}

/// Whether the case's runtime starts daemons that leave its process group (`spawn_child` with
/// `detach`): only the per-case supervisor of a driver of the case's own finds those whatever
/// their environment, so such a case gets its own driver.
pub fn detaches_daemons(case: &Case) -> bool {
    case.runtime.actions().any(|action| action.detaches())
}

/// Whether a handshake reply claims `reuse`.
pub fn claims_reuse(handshake: &Value) -> bool {
    handshake
        .get("capabilities")
        .and_then(Value::as_array)
        .is_some_and(|claimed| claimed.iter().any(|claim| claim.as_str() == Some(REUSE)))
}

impl Runner<'_> {
    /// The worker's reused driver (started now if the worker has none), serving this case.
    /// A driver that turns out not to claim `reuse` is stopped and the case gets its own.
    pub(super) fn reused_driver(&mut self, world: &World) -> Option<Driver> {
        let pooled = match self.pooled.take() {
            Some(pooled) => pooled,
            None => self.start_unassigned()?,
        };
        if !claims_reuse(&pooled.handshake) {
            pooled.finish(self.env.scaled(super::SHUTDOWN_BOUND_MS));
            self.handshake = None;
            return self.start_driver(world);
        }
        self.serve_case(pooled, world)
    }

    /// Starts a driver that belongs to no case yet: no case's variables in its environment, the
    /// temp dir as its working directory.
    fn start_unassigned(&mut self) -> Option<ReusedDriver> {
        let spec = DriverSpec {
            command: self.env.host.clone(),
            cwd: std::env::temp_dir(),
            env: dsh_engine::child_env::inherited(&self.env.pass_env)
                .into_iter()
                .chain([("DSH_CONFORMANCE".to_string(), "1".to_string())])
                .collect(),
            stderr_needles: Vec::new(),
            fsize_limit: None,
        };
        self.transcript.push(format!(
            "== start driver (to serve many cases): {}",
            dsh_results::output::secrets::display_command(&spec.command)
        ));
        let driver = match Driver::start(&spec, Vec::new()) {
            Ok(driver) => driver,
            Err(error) => {
                self.driver_error(error, "starting the driver");
                return None;
            }
        };
        let driver = self.handshake(driver)?;
        let handshake = self.handshake.clone().unwrap_or(Value::Null);
        Some(ReusedDriver { driver, handshake })
    }

    /// Hands the driver this case's world (`case` -> `case_ready`).
    fn serve_case(&mut self, pooled: ReusedDriver, world: &World) -> Option<Driver> {
        let ReusedDriver {
            mut driver,
            handshake,
        } = pooled;
        self.vocabulary = super::Vocabulary::from_handshake(&handshake).unwrap_or(None);
        self.handshake = Some(handshake);
        let spec = self.driver_spec(world);
        driver.begin_case(&spec.stderr_needles, &self.stdout_needles(world));
        let env: Map<String, Value> = spec
            .env
            .into_iter()
            .map(|(name, value)| (name, Value::String(value)))
            .collect();
        self.transcript.push(format!(
            "== reuse driver pid {} for this case",
            driver.pid()
        ));
        let request = json!({"v": 1, "type": "case", "id": "case", "env": env, "cwd": spec.cwd});
        match self.request(&mut driver, &request, "case_ready", None) {
            Ok(_) => {
                self.reusable = true;
                Some(driver)
            }
            Err(_) => None,
        }
    }

    /// The end of a case in a reused driver that stays alive: the checks a stopped driver gets,
    /// then the driver goes back to the worker.
    pub(super) fn keep_driver(
        &mut self,
        driver: Driver,
        world: &World,
        journal: &Journal,
        judged: bool,
    ) {
        std::thread::sleep(self.env.scaled(SETTLE_MS));
        if judged {
            self.check_all_reaped(world, journal, "after the case's last reply");
        }
        self.sweep_leftovers(world, journal);
        self.collect_stderr_hits(&driver, false);
        self.transcript
            .push("== driver kept for the worker's next case".to_string());
        let handshake = self.handshake.clone().unwrap_or(Value::Null);
        self.pooled = Some(ReusedDriver { driver, handshake });
    }
}
