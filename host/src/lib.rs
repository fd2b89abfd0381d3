//! The reference host: the host side of the open-design profile contract, implemented once.
//!
//! - [`discovery`]: find `dsh`, read its version, pass the probe gate (spec 5).
//! - [`setup`]: verify the pinned bundle's SHA-256, install it, probe again (spec 4).
//! - [`session_store`]: the conversation -> session mapping with its compatibility key (spec 7).
//! - [`run`]: one turn over the stdio protocol, cancellation and cleanup (spec 6-10).
//! - [`events`]: frames -> OpenDesign events (spec 9).
//! - [`models`]: the `--models` catalog and the picked route (spec 12).
//! - [`process`]: the platform part: owning, signalling and reaping a process tree.
//! - [`driver`]: the driver protocol of docs/host-driver.md, used by `dsh-host-driver`.
//! - [`host`]: the host as one value: configuration (environment, bounds, session store) and the
//!   operations the driver calls.
//! - [`codes`]: the host-side `DSH_PROFILE_*` code vocabulary.
//! - [`redact`]: what the host keeps or logs, with prompts and secrets taken out (spec 6, 14).
//! - [`short_command`]: one short-lived `dsh` subcommand (`--version`, `--probe`, `plugin add`)
//!   with a time bound.
//! - [`stderr_capture`]: the runtime's stderr drained into a bounded buffer (spec 6).
//! - `mutants` (the `mutants` feature only, never in a release): deliberate bugs for the kit's
//!   mutant gallery, switched on by `dsh-host-mutant-driver --mutant <name>`.

pub mod codes;
pub mod discovery;
pub mod driver;
pub mod events;
pub mod host;
pub mod models;
#[cfg(feature = "mutants")]
pub mod mutants;
pub mod process;
pub mod redact;
pub mod run;
pub mod session_store;
pub mod setup;
pub mod short_command;
pub mod stderr_capture;

pub use host::{Host, HostConfig};
pub use run::{CancelSignal, Outcome, RunBounds, RunRequest};
