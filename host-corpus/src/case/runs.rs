//! The `run` and `concurrent` steps: send each run to the driver, follow its replies (sending
//! `cancel` on its trigger and starting the next concurrent run on its `start_on` event) until
//! every run has its outcome, then judge each run on its own journal entries with the global
//! checks and the step's expectations.

use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Instant;

use super::super::checks::{self, Fate, RunEvidence, Violation, RUN_CHECKS};
use super::super::driver::{Driver, DriverError};
use super::super::expect::{self, Miss, RunSeen};
use super::super::mapping_watch::{MappingWatch, Seen};
use super::super::verdict::{FindingKind, RULE_DRIVER_REPLY_VALID, RULE_NO_KILL_OTHER_RUNTIME};
use super::super::world::World;
use super::{Abort, Runner};
use dsh_engine::journal::{self, Entry, Journal};
use dsh_formats::case::{CancelOn, RunExpect, RunStep};

/// One run of a step, from its `run` request to its outcome.
pub(super) struct InFlight<'s> {
    id: String,
    run: &'s RunStep,
    expect: &'s RunExpect,
    /// The canonical project dir.
    cwd: PathBuf,
    /// The session the conversation was mapped to before this run.
    previous_session: Option<String>,
    /// The journal's length when the run was sent: its entries come after.
    from: usize,
    cancel_at: Option<Instant>,
    cancel_sent: bool,
    events: Vec<Value>,
    outcome: Option<Value>,
}

impl InFlight<'_> {
    /// Whether the driver reported an event of this type for the run.
    fn saw(&self, event_type: Option<&str>) -> bool {
        self.events
            .iter()
            .any(|event| event.get("type").and_then(Value::as_str) == event_type)
    }

    /// The event type whose first occurrence triggers the run's `cancel`.
    fn cancel_event(&self) -> Option<&str> {
        match &self.run.cancel_on {
            Some(CancelOn::Event(on)) => Some(on.event.as_str()),
            _ => None,
        }
    }
}

impl<'a> Runner<'a> {
    /// Plays the runs of one step (one, or several of a `concurrent` step) and judges each.
    pub(super) fn play_runs(
        &mut self,
        driver: &mut Driver,
        world: &World,
        journal: &Journal,
        index: usize,
        runs: &[(&'a RunStep, &'a RunExpect)],
    ) -> Result<(), Abort> {
        let id_of = |k: usize| match runs.len() {
            1 => format!("r{index}"),
            _ => format!("r{index}.{k}"),
        };
        let watch = self.watch_mapping(world, runs);
        let mut flights = vec![self.send_run(driver, world, journal, id_of(0), runs[0])?];
        let mut gave_up = false;
        while flights.iter().any(|flight| flight.outcome.is_none()) {
            let Some(reply) = self.next_reply(driver, &mut flights)? else {
                continue;
            };
            let had_outcome: Vec<bool> = flights.iter().map(|f| f.outcome.is_some()).collect();
            self.follow(driver, &mut flights, reply)?;
            let ended =
                (0..had_outcome.len()).find(|k| !had_outcome[*k] && flights[*k].outcome.is_some());
            if let Some(ended) = ended.filter(|_| flights.len() > 1) {
                self.check_at_outcome(world, journal, &flights, ended);
            }
            let next = flights.len();
            if gave_up || next == runs.len() {
                continue;
            }
            let trigger = runs[next].0.start_on.as_ref().map(|on| on.event.as_str());
            let previous = &flights[next - 1];
            if previous.saw(trigger) {
                let flight = self.send_run(driver, world, journal, id_of(next), runs[next])?;
                flights.push(flight);
            } else if previous.outcome.is_some() {
                self.never_started(&flights[next - 1], trigger.unwrap_or(""), runs.len() - next);
                gave_up = true;
            }
        }
        if let Some((expect, watch)) = watch {
            self.judge_mapping_write(&flights, expect, watch.finish());
        }
        self.judge_runs(world, journal, flights);
        Ok(())
    }

    /// A watch on `RUNTIME_DATA_DIR` when a run of the step sets `mapping_write`, with that run's
    /// expectations; the files holding a session an earlier outcome reported are the saved mappings.
    fn watch_mapping(
        &self,
        world: &World,
        runs: &[(&'a RunStep, &'a RunExpect)],
    ) -> Option<(&'a RunExpect, MappingWatch)> {
        let (_, expect) = runs
            .iter()
            .find(|(_, expect)| expect.mapping_write.is_some())?;
        let sessions: Vec<String> = self.conversations.values().cloned().collect();
        Some((expect, MappingWatch::start(&world.host_data(), &sessions)))
    }

    /// `mapping_write: "replace"`: no saved mapping was modified in place while the step's runs
    /// were in flight (I-C28); a watch that could not judge says why in the transcript.
    fn judge_mapping_write(&mut self, flights: &[InFlight], expect: &RunExpect, seen: Seen) {
        let ids: Vec<&str> = flights.iter().map(|flight| flight.id.as_str()).collect();
        let files = match seen {
            Seen::NotJudged(why) => {
                self.transcript
                    .push(format!("mapping_write not judged: {why}"));
                return;
            }
            Seen::InPlace(files) if files.is_empty() => return,
            Seen::InPlace(files) => files,
        };
        let names: Vec<String> = files
            .iter()
            .map(|file| format!("RUNTIME_DATA_DIR/{}", file.display()))
            .collect();
        let why = format!(
            "run {}: the host modified its saved session mapping {} in place; a crash mid-save \
             leaves it torn (write a temp file and rename it over the old one)",
            ids.join(", "),
            names.join(", ")
        );
        let miss = Miss {
            member: "mapping_write",
            why,
            // The expectation rests on I-C28 whether or not the case file says so.
            interpretation: Some("I-C28"),
        };
        self.misses(vec![miss], &expect.interpretations, &expect.rules);
    }

    /// Builds and sends the driver's `run` request.
    fn send_run<'s>(
        &mut self,
        driver: &mut Driver,
        world: &World,
        journal: &Journal,
        id: String,
        (run, expect): (&'s RunStep, &'s RunExpect),
    ) -> Result<InFlight<'s>, Abort> {
        let cwd = world.run_cwd(&run.cwd).map_err(|e| {
            self.kit(format!("cannot create the run cwd {}: {e}", run.cwd));
            Abort
        })?;
        let spelled = world.spelled_cwd(&cwd, run.cwd_form).map_err(|e| {
            self.kit(format!("cannot spell the run cwd {}: {e}", run.cwd));
            Abort
        })?;
        let conversation_id = format!("conv-{}", run.conversation);
        let mut request = json!({
            "v": 1, "type": "run", "id": id, "turn": self.turn, "conversation_id": conversation_id,
            "project_id": "proj-1", "cwd": spelled, "prompt": run.prompt,
            "bootstrap": world.bootstrap(&conversation_id),
            "model": {"provider": run.model.provider, "id": run.model.id}, "reasoning_effort": null,
        });
        super::models::pick_route(&mut request, run);
        self.turn += 1;
        let from = self.journal_length(journal);
        driver.send(&request, &mut self.transcript).map_err(|e| {
            self.driver_error(e, &format!("run {id}"));
            Abort
        })?;
        let cancel_at = match &run.cancel_on {
            Some(CancelOn::AfterMs(after)) => {
                Some(Instant::now() + self.env.scaled(after.after_ms))
            }
            _ => None,
        };
        Ok(InFlight {
            previous_session: self.conversations.get(&run.conversation).cloned(),
            id,
            run,
            expect,
            cwd,
            from,
            cancel_at,
            cancel_sent: false,
            events: Vec::new(),
            outcome: None,
        })
    }

    /// The driver's next reply, or `None` when a timed cancel fell due first (and was sent).
    fn next_reply(
        &mut self,
        driver: &mut Driver,
        flights: &mut [InFlight],
    ) -> Result<Option<Value>, Abort> {
        let due = flights
            .iter()
            .enumerate()
            .filter(|(_, flight)| !flight.cancel_sent && flight.outcome.is_none())
            .filter_map(|(at, flight)| flight.cancel_at.map(|when| (when, at)))
            .min();
        let wait_until = due.map_or(self.deadline, |(when, _)| when.min(self.deadline));
        let waiting: Vec<&str> = flights
            .iter()
            .filter(|flight| flight.outcome.is_none())
            .map(|flight| flight.id.as_str())
            .collect();
        let what = format!("the outcome of {}", waiting.join(" and "));
        match driver.recv(wait_until, &what, &mut self.transcript) {
            Ok(reply) => Ok(Some(reply)),
            Err(DriverError::Timeout(_)) if Instant::now() < self.deadline => {
                if let Some((_, at)) = due {
                    self.send_cancel(driver, &mut flights[at])?;
                }
                Ok(None)
            }
            Err(error) => {
                self.driver_error(error, &format!("run {}", waiting.join(", ")));
                Err(Abort)
            }
        }
    }

    /// Files one reply under the run it names (sending that run's `cancel` on its trigger).
    fn follow(
        &mut self,
        driver: &mut Driver,
        flights: &mut [InFlight],
        reply: Value,
    ) -> Result<(), Abort> {
        let kind = reply
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let reply_id = reply.get("id").and_then(Value::as_str).map(str::to_string);
        let at = flights.iter().position(|flight| {
            Some(flight.id.as_str()) == reply_id.as_deref() && flight.outcome.is_none()
        });
        let Some(at) = at else {
            let active: Vec<&str> = flights.iter().map(|flight| flight.id.as_str()).collect();
            self.host(
                FindingKind::HostFatal,
                RULE_DRIVER_REPLY_VALID,
                format!(
                    "during run {} the driver sent {kind} for {}",
                    active.join(", "),
                    reply_id.as_deref().unwrap_or("no id")
                ),
            );
            return Err(Abort);
        };
        let flight = &mut flights[at];
        match kind.as_str() {
            "event" => {
                let event = reply.get("event").cloned().unwrap_or(Value::Null);
                let event_type = event.get("type").and_then(Value::as_str).unwrap_or("");
                let triggers = flight.cancel_event() == Some(event_type);
                flight.events.push(event);
                if triggers && !flight.cancel_sent {
                    self.send_cancel(driver, flight)?;
                }
                Ok(())
            }
            "outcome" => {
                if flight.run.cancel_on.is_some() && !flight.cancel_sent {
                    let trigger = match flight.cancel_event() {
                        Some(event) => format!("no {event} event came"),
                        None => "the run ended first".to_string(),
                    };
                    let rule = self.case.first_rule().to_string();
                    let why = format!(
                        "run {}: cancel was never sent: {trigger} before the outcome",
                        flight.id
                    );
                    self.host(FindingKind::Untestable, &rule, why);
                }
                flight.outcome = Some(reply);
                Ok(())
            }
            "error" if flight.cancel_sent => {
                let message = reply.get("message").and_then(Value::as_str).unwrap_or("");
                let rule = self.case.first_rule().to_string();
                let why = format!("the driver rejected cancel of {}: {message}", flight.id);
                self.host(FindingKind::Untestable, &rule, why);
                Ok(())
            }
            _ => {
                let why = format!("during run {} the driver sent {kind}", flight.id);
                self.host(FindingKind::HostFatal, RULE_DRIVER_REPLY_VALID, why);
                Err(Abort)
            }
        }
    }

    fn send_cancel(&mut self, driver: &mut Driver, flight: &mut InFlight) -> Result<(), Abort> {
        flight.cancel_sent = true;
        let cancel = json!({"v": 1, "type": "cancel", "id": flight.id});
        driver.send(&cancel, &mut self.transcript).map_err(|e| {
            self.driver_error(e, &format!("cancel {}", flight.id));
            Abort
        })
    }

    /// A concurrent run's trigger never came: the case cannot test what it is for.
    fn never_started(&mut self, previous: &InFlight, trigger: &str, unsent: usize) {
        let rule = self.case.first_rule().to_string();
        let why = format!(
            "run {} ended without a {trigger} event, so the {unsent} run(s) meant to start on it \
             never ran alongside it",
            previous.id
        );
        self.host(FindingKind::Untestable, &rule, why);
    }

    /// Judges every run of the step on its own journal entries.
    fn judge_runs(&mut self, world: &World, journal: &Journal, flights: Vec<InFlight>) {
        let first = flights.iter().map(|flight| flight.from).min().unwrap_or(0);
        let entries = self.journal_since(journal, first);
        let trees = run_trees(&entries, &flights);
        self.check_overlap(&entries, &flights, &trees);
        for (k, flight) in flights.iter().enumerate() {
            let others: BTreeSet<i32> = trees
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != k)
                .flat_map(|(_, tree)| tree.iter().copied())
                .collect();
            let own: Vec<Entry> = entries
                .iter()
                .filter(|entry| entry.line >= flight.from)
                .filter(|entry| entry.pid().is_none_or(|pid| !others.contains(&pid)))
                .cloned()
                .collect();
            self.judge_run(world, journal, flight, &own);
        }
    }

    /// The global checks and the expectations of one run, over `entries` (the run's own).
    fn judge_run(
        &mut self,
        world: &World,
        journal: &Journal,
        flight: &InFlight,
        entries: &[Entry],
    ) {
        let Some(outcome) = flight.outcome.as_ref() else {
            return;
        };
        let run_pid = checks::stdio_starts(entries).first().copied();
        let process: Vec<&Entry> = entries
            .iter()
            .filter(|entry| run_pid.is_some() && entry.pid() == run_pid)
            .collect();
        let execute = process
            .iter()
            .find(|entry| entry.token() == "command:execute")
            .and_then(|entry| entry.command());
        let evidence = RunEvidence {
            entries,
            process: &process,
            execute,
            outcome,
            events: &flight.events,
            run: flight.run,
            cwd: &flight.cwd,
            world,
            journal,
            earlier_runs: &self.run_pids,
            claims_mcp: self
                .claimed_capabilities()
                .iter()
                .any(|claim| claim == "mcp"),
            tree_root: self.tree_root,
        };
        let violations: Vec<Violation> = RUN_CHECKS
            .iter()
            .flat_map(|check| check(&evidence))
            .collect();
        let seen = RunSeen {
            outcome,
            events: &flight.events,
            execute,
            process: &process,
            previous_session: flight.previous_session.as_deref(),
            world,
            cwd: &flight.cwd,
        };
        let after_retry = self.after_retry.remove(&flight.run.conversation);
        let judged = (self.env.dialect).run_expect(self.case, flight.expect, entries, after_retry);
        let mut violations = violations;
        judged.keep(&mut violations);
        if judged.fresh_retry {
            self.after_retry.insert(flight.run.conversation.clone());
        }
        let misses = expect::run(&judged.expect, &seen, self.codes());
        self.violations(violations, &format!("run {}", flight.id));
        self.misses(misses, &flight.expect.interpretations, &flight.expect.rules);
        self.run_pids.extend(checks::stdio_starts(entries));
        if let Some(session) = outcome.get("session_id").and_then(Value::as_str) {
            self.conversations
                .insert(flight.run.conversation.clone(), session.to_string());
        }
    }
}

impl Runner<'_> {
    /// Right after run `ended` of several in flight got its outcome: none of its own processes
    /// is alive any more (spec 10 step 5, judged now, not once every run has ended), and no
    /// process of a run whose outcome is not read yet was killed by the ending run's teardown
    /// ("No operation may kill another conversation's runtime", spec 10). That is judged on
    /// evidence only ([`checks::fate`]): `/proc` is probed first, the journal re-read after it.
    fn check_at_outcome(
        &mut self,
        world: &World,
        journal: &Journal,
        flights: &[InFlight],
        ended: usize,
    ) {
        let first = flights.iter().map(|flight| flight.from).min().unwrap_or(0);
        let entries = self.journal_since(journal, first);
        let trees = run_trees(&entries, flights);
        let Some(own_tree) = trees.get(ended) else {
            return;
        };
        let own: Vec<Entry> = entries
            .iter()
            .filter(|entry| entry.pid().is_some_and(|pid| own_tree.contains(&pid)))
            .cloned()
            .collect();
        let during = format!("run {}", flights[ended].id);
        if let Some(alive) = checks::still_alive(journal, &own, self.tree_root) {
            let violations = checks::reaped_violations(
                &own,
                &alive,
                "after the host's reply, while another run was in flight",
            );
            self.violations(violations, &during);
        }
        let others: Vec<usize> = (0..trees.len())
            .filter(|other| *other != ended && flights[*other].outcome.is_none())
            .collect();
        // The probe, then everything written since (a dead process writes nothing more).
        let probed: Vec<Vec<(i32, bool)>> = others
            .iter()
            .map(|other| {
                trees[*other]
                    .iter()
                    .map(|pid| (*pid, dsh_engine::procfs::is_live(*pid)))
                    .collect()
            })
            .collect();
        let after = self.journal_since(journal, first);
        let supervisor_killed: Vec<i32> = dsh_engine::supervisor::peek(&world.supervisor_report())
            .iter()
            .map(|leftover| leftover.pid)
            .collect();
        for (other, probed) in others.into_iter().zip(probed) {
            let mine: Vec<Entry> = after
                .iter()
                .filter(|entry| entry.pid().is_some_and(|pid| trees[other].contains(&pid)))
                .cloned()
                .collect();
            let run = checks::OtherRun {
                root: checks::stdio_starts(&mine).first().copied(),
                cancel_sent: flights[other].cancel_sent,
                journal_after_probe: &after,
                supervisor_killed: &supervisor_killed,
            };
            let (mut killed, mut unclear) = (Vec::new(), Vec::new());
            for (pid, live) in probed {
                match checks::fate(pid, live, &run) {
                    Fate::NotKilled(_) => {}
                    Fate::Killed(evidence) => killed.push(evidence),
                    Fate::CannotTell(why) => unclear.push(why),
                }
            }
            if !killed.is_empty() {
                let why = format!(
                    "process(es) of run {} (another conversation, still in flight) were killed when run {} ended: {}; its teardown killed them",
                    flights[other].id,
                    flights[ended].id,
                    killed.join("; ")
                );
                self.violations(
                    vec![Violation::new(RULE_NO_KILL_OTHER_RUNTIME, why)],
                    &during,
                );
            }
            // After the evidence of a kill, so a case with both fails rather than goes untestable.
            for why in unclear {
                let why = format!(
                    "{during} ended while run {} was in flight: {why}",
                    flights[other].id
                );
                self.host(FindingKind::Untestable, RULE_NO_KILL_OTHER_RUNTIME, why);
            }
        }
    }

    /// A `concurrent` step tests runs in flight together: each run's runtime must send `ready`
    /// before the previous run's runtime sent its result (or exited), as the journal orders them.
    /// A driver that claims `concurrent` but runs one turn at a time makes the case untestable; so
    /// does a machine too slow for a runtime started alongside the other to get ready in time,
    /// which the finding says instead of blaming the driver.
    fn check_overlap(&mut self, entries: &[Entry], flights: &[InFlight], trees: &[BTreeSet<i32>]) {
        let root = |tree: &BTreeSet<i32>| {
            let mine: Vec<Entry> = entries
                .iter()
                .filter(|entry| entry.pid().is_some_and(|pid| tree.contains(&pid)))
                .cloned()
                .collect();
            checks::stdio_starts(&mine).first().copied()
        };
        let line_of = |pid: i32, tokens: &[&str]| {
            entries
                .iter()
                .find(|entry| entry.pid() == Some(pid) && tokens.contains(&entry.token().as_str()))
                .map(|entry| entry.line)
        };
        for k in 1..trees.len().min(flights.len()) {
            let (Some(earlier), Some(later)) = (root(&trees[k - 1]), root(&trees[k])) else {
                continue;
            };
            let ended = line_of(earlier, &["frame:result", "exit"]);
            let ready = line_of(later, &["frame:ready"]);
            let started = line_of(later, &["start"]);
            let (a, b) = (&flights[k - 1].id, &flights[k].id);
            if let Some(why) = not_in_flight_together(a, b, started, ready, ended) {
                let rule = self.case.first_rule().to_string();
                self.host(FindingKind::Untestable, &rule, why);
            }
        }
    }
}

/// Why runs `a` and `b` were never in flight together, by the journal lines (0-based) of `b`'s
/// runtime's start and ready and of the end (result or exit) of `a`'s; `None` when they were.
/// The journal's order is the one clock: a runtime started before the other ended was run
/// alongside it, however late its ready came on a busy machine.
fn not_in_flight_together(
    a: &str,
    b: &str,
    started: Option<usize>,
    ready: Option<usize>,
    ended: Option<usize>,
) -> Option<String> {
    let (ready, ended) = (ready?, ended?);
    if ready < ended {
        return None;
    }
    Some(match started.filter(|started| *started < ended) {
        Some(started) => format!(
            "run {b}'s runtime started (journal line {}) while run {a}'s was in flight but sent ready (line {}) only after run {a}'s runtime had ended (line {}): the machine was too slow for the runs to overlap, so the case could not test them in flight together this time",
            started + 1,
            ready + 1,
            ended + 1
        ),
        None => format!(
            "run {b}'s runtime sent ready (journal line {}) only after run {a}'s runtime had ended (line {}): the driver claims `concurrent` but ran the turns one at a time, so they were never in flight together",
            ready + 1,
            ended + 1
        ),
    })
}

/// Each run's process tree: the first `--stdio` process started after it was sent that no
/// earlier run owns, with its descendants. One run alone owns everything after it.
fn run_trees(entries: &[Entry], flights: &[InFlight]) -> Vec<BTreeSet<i32>> {
    let mut trees: Vec<BTreeSet<i32>> = Vec::new();
    if flights.len() < 2 {
        return trees;
    }
    for flight in flights {
        let owned: BTreeSet<i32> = trees.iter().flatten().copied().collect();
        let mine: Vec<Entry> = entries
            .iter()
            .filter(|entry| entry.line >= flight.from)
            .filter(|entry| entry.pid().is_none_or(|pid| !owned.contains(&pid)))
            .cloned()
            .collect();
        let tree = checks::stdio_starts(&mine)
            .first()
            .map(|root| journal::tree_of(entries, *root))
            .unwrap_or_default();
        trees.push(tree);
    }
    trees
}

#[cfg(test)]
mod tests {
    use super::not_in_flight_together;

    #[test]
    fn runs_in_flight_together_by_the_journal_s_order() {
        // b ready (line 5) before a's result (line 8): together.
        assert_eq!(
            not_in_flight_together("r0.0", "r0.1", Some(3), Some(5), Some(8)),
            None
        );
        // b started (line 3) while a was in flight, ready (line 9) after a's end (line 8): a slow
        // machine, not a serial driver.
        let slow = not_in_flight_together("r0.0", "r0.1", Some(3), Some(9), Some(8))
            .expect("never together");
        assert!(
            slow.contains("too slow") && !slow.contains("one at a time"),
            "{slow}"
        );
        // b started only after a's end: the driver ran them one at a time.
        let serial = not_in_flight_together("r0.0", "r0.1", Some(9), Some(10), Some(8))
            .expect("never together");
        assert!(serial.contains("ran the turns one at a time"), "{serial}");
        // Nothing to judge without b's ready or a's end.
        assert_eq!(
            not_in_flight_together("r0.0", "r0.1", None, None, Some(8)),
            None
        );
    }
}
