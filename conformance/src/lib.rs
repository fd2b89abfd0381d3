//! The conformance harness: fixture loading, the runner, verdicts and reports.
//!
//! - [`model`]: the results model every output renders.
//! - [`codes`]: the error-code vocabulary (the kit's code classes, a host's declared codes) that
//!   the runner judges with and the results model describes.
//! - [`validate`]: `validate`, checking one captured stdout stream.
//! - [`run`]: `run`, the corpus against one host (runner, world, driver, verdicts).
//! - [`clients`]: `run --surface sdk|headless`, the client corpus for SDK and headless clients.
//! - [`sdk_check`]: `check-runtime --surface sdk|...|headless`, and the SDK wire driver.
//! - [`sdk_record`]: `sdk-scenario-from-transcript`, a recorded SDK session -> fake-dsh scenario.
//! - [`fixture`]: the typed case-file model.
//! - [`corpus`]: loading and linting the fixture corpus and its rule catalog.
//! - [`output`]: terminal table, JSON, JUnit XML, Markdown.
//! - [`check_runtime`]: `check-runtime`, the runtime-side checks.
//! - [`record`]: `record` and `fixture-from-transcript`.
//! - [`model_server`]: `model-server`, the CLI of the `dsh-model-server` crate.
//! - [`input`]: reading the files a user names as input, bounded.
//! - [`report`]: the hosts x variants matrix (HTML, JSON, Markdown) and `diff`.
//! - [`procfs`]: what `/proc` says about a process (the runner, `record` and `check-runtime`
//!   judge process trees with it).
//! - [`scratch`]: the kit's temp dirs (0700, marked, swept after a killed run).

pub mod check_runtime;
pub mod clients;
pub mod corpus;
pub mod fixture;
pub mod model_server;
pub mod record;
pub mod report;
pub mod run;
pub mod sdk_check;
pub mod sdk_record;
pub mod validate;
