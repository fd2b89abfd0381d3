//! dsh-host's integration tests that run the library host in this process, in one binary (one
//! link instead of one per file): each module was a test file of its own. `cancel`, `runs` and
//! `stderr`: runs against fake-dsh; `discovery_setup`: discovery and setup; `mutants`: every mutant
//! switches on its bug; `run_loop_shape`: the run loop reads as the spec's steps; `session_store`:
//! atomic writes of the session store. `support` is their shared world (also used by the three
//! binaries beside this one).
//!
//! Three test files stay binaries of their own, because they need the process to themselves:
//! `tests/daemons.rs` makes it a child subreaper (`adopt_orphans`) and runs one host at a time so
//! an orphan without a tree token is attributed; `tests/run_props.rs` measures the process's peak RSS
//! during one run at a time; and `tests/driver.rs` starts `dsh-host-driver` processes as direct
//! children of the test process, which the in-process host's teardown here would take for adopted
//! orphans and kill.

mod support;

mod cancel;
mod discovery_setup;
mod mutants;
mod run_loop_shape;
mod runs;
mod session_store;
mod stderr;
