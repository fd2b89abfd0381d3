//! The case engine every corpus and check shares: the kit's temp dirs and the embedded fixture
//! tree, process ownership (spawning in a group, the per-case subreaper, reaping, the token
//! sweep for what a case left behind), the child environment allowlist, fake-dsh's journal as
//! typed entries, case selection by glob, and bounded reading and link-safe writing of files.
//!
//! It knows no corpus's rules and renders no verdict: the host corpus, the client corpus, the
//! runtime checks, `record` and `report` build on it, and it imports none of them (only
//! `dsh-protocol` and `dsh-formats` of the kit).
//!
//! - [`process`]: one owned process (its group, its pipes, killed with the group when dropped)
//!   and the subreaper's view of orphans; [`supervisor`]: the per-case subreaper and `supervise`;
//!   [`leftovers`]: the per-case token sweep; [`procfs`]: what `/proc` says about a process.
//! - [`interrupt`]: how a run stops on SIGINT/SIGTERM (the cases' groups killed, a second
//!   signal exits at once).
//! - [`child_env`]: the environment a driver or client starts with; [`journal`]: fake-dsh's
//!   journal read as [`dsh_formats::journal`] entries.
//! - [`corpus`]: the embedded tree and where a command takes its corpus from; [`selection`]: the
//!   case files found and the ones `--case`/`--section`/`--skip`/`--shard` select.
//! - [`scratch`]: temp dirs (0700, marked, swept after a killed run); [`input`]: files a user
//!   names, read bounded; [`files`]: output files written without following a link;
//!   [`random`]: tokens; [`programs`]: command lines split, programs found.
//! - [`surface`]: the one vocabulary of dsh's machine surfaces; [`timing`]: `Jobs` and
//!   `TimeScale`, valid by construction, with the one floor rule of a scaled bound.
//!
//! No command line here: the `dsh-conformance` binary parses its options into these types.

pub mod child_env;
pub mod corpus;
pub mod files;
pub mod input;
pub mod interrupt;
pub mod journal;
pub mod leftovers;
pub mod process;
pub mod procfs;
pub mod programs;
pub mod random;
pub mod scratch;
pub mod selection;
pub mod supervisor;
pub mod surface;
pub mod timing;
