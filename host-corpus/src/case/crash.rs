//! The `crash_mid_save` step: a crash in the middle of the host's save of a session mapping,
//! whatever way the host writes it. The driver is restarted with a soft `RLIMIT_FSIZE` of half
//! the smallest file under `RUNTIME_DATA_DIR` that holds the conversation's session (its saved
//! mapping, or the database holding it), so any rewrite of that mapping fails part-way; the run
//! is sent; then the driver's process group is SIGKILLed (if the limit did not end it first) and
//! a new driver starts without the limit. A host that truncated its mapping and wrote it again
//! has lost it; a host that writes a new file and renames it over the old one, or a database with
//! a journal, still holds the old one. Nothing the limited driver did is judged (a canary in its
//! stderr and what it left running still are, as after `restart` with `kill`); the steps after
//! this one judge the outcome.

use std::sync::LazyLock;

use super::super::mapping_watch;
use super::super::world::World;
use super::{Abort, Runner, SHUTDOWN_BOUND_MS};
use dsh_engine::journal::Journal;
use dsh_formats::case::{RunExpect, RunStep};

use super::super::driver::Driver;

/// The crashed run's expectations: none.
static NOTHING_EXPECTED: LazyLock<RunExpect> = LazyLock::new(RunExpect::default);

impl<'a> Runner<'a> {
    pub(super) fn crash_mid_save(
        &mut self,
        driver: &mut Option<Driver>,
        world: &mut World,
        journal: &Journal,
        index: usize,
        run: &'a RunStep,
    ) -> Result<(), Abort> {
        let Some(active) = driver.as_mut() else {
            return Err(Abort);
        };
        // The drivers from here on are the case's own, never kept for another case.
        self.reusable = false;
        let bound = self.env.scaled(SHUTDOWN_BOUND_MS).min(self.remaining());
        let stopped = active.shutdown(bound, &mut self.transcript);
        self.sweep_leftovers(world, journal);
        self.collect_stderr_hits(active, true);
        if let Err(error) = stopped {
            self.driver_error(error, "crash_mid_save (shutdown of the driver before it)");
            return Err(Abort);
        }
        let limit = self.save_limit(world, &run.conversation);
        let judged = self.findings.len();
        let noted = self.early_exit.clone();
        self.fsize_limit = limit;
        *driver = self.start_driver(world);
        self.fsize_limit = None;
        if let Some(limited) = driver.as_mut() {
            let expect: &'a RunExpect = &NOTHING_EXPECTED;
            let ended = self.play_runs(limited, world, journal, index, &[(run, expect)]);
            if ended.is_err() {
                self.transcript
                    .push("crash_mid_save: the limited driver ended the run early".to_string());
            }
        } else {
            self.transcript.push(
                "crash_mid_save: the driver did not start under the limit; nothing was saved"
                    .to_string(),
            );
        }
        // The limited driver's run is not judged: it was crashed on purpose (nor is a crash of
        // it before its first reply a broken driver).
        self.early_exit = noted;
        for finding in self.findings.split_off(judged) {
            self.transcript.push(format!(
                "crash_mid_save: not judged: {}: {}",
                finding.rule, finding.why
            ));
        }
        self.transcript.push(
            "crash_mid_save: SIGKILL to the driver's process group; a new driver starts without \
             the limit"
                .to_string(),
        );
        if let Some(crashed) = driver.as_mut() {
            crashed.kill();
            crashed.wait_stderr_drained(self.env.scaled(SHUTDOWN_BOUND_MS).min(self.remaining()));
            self.collect_stderr_hits(crashed, true);
        }
        self.sweep_leftovers(world, journal);
        *driver = self.start_driver(world);
        driver.as_ref().map(|_| ()).ok_or(Abort)
    }

    /// Half the size of the smallest file under `RUNTIME_DATA_DIR` holding the conversation's
    /// session, said in the transcript; `None` (no limit: a crash right after the run instead)
    /// when no file holds it.
    fn save_limit(&mut self, world: &World, conversation: &str) -> Option<u64> {
        let data = world.host_data();
        let session = self.conversations.get(conversation).cloned();
        let smallest = session
            .iter()
            .flat_map(|session| mapping_watch::held_files(&data, std::slice::from_ref(session)))
            .filter_map(|file| Some((std::fs::metadata(&file).ok()?.len(), file)))
            .min();
        let Some((size, file)) = smallest else {
            self.transcript.push(format!(
                "crash_mid_save: no file under RUNTIME_DATA_DIR holds conversation {conversation}'s \
                 session; the driver is killed after the run instead"
            ));
            return None;
        };
        let limit = size / 2;
        self.transcript.push(format!(
            "crash_mid_save: RLIMIT_FSIZE {limit} bytes for the driver (half of RUNTIME_DATA_DIR/{}, \
             {size} bytes)",
            file.strip_prefix(&data).unwrap_or(&file).display()
        ));
        Some(limit)
    }
}
