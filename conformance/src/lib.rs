//! The conformance harness: fixture loading, the runner, verdicts and reports.
//!
//! - [`model`]: the results model every output renders.
//! - [`validate`]: `validate`, checking one captured stdout stream.
//! - [`run`]: `run`, the corpus against one host (runner, world, driver, verdicts).
//! - [`fixture`]: the typed case-file model.
//! - [`corpus`]: loading and linting the fixture corpus and its rule catalog.
//! - [`output`]: terminal table, JSON, JUnit XML, Markdown.
//! - [`check_runtime`]: `check-runtime`, the runtime-side checks.
//! - [`record`]: `record` and `fixture-from-transcript`.
//! - [`model_server`]: `model-server`, the CLI of the `dsh-model-server` crate.
//! - [`input`]: reading the files a user names as input, bounded.
//! - [`report`]: the hosts x variants matrix (HTML, JSON, Markdown) and `diff`.
//! - [`scratch`]: the kit's temp dirs (0700, marked, swept after a killed run).

pub mod check_runtime;
pub mod corpus;
pub mod fixture;
pub mod input;
pub mod model;
pub mod model_server;
pub mod output;
pub mod record;
pub mod report;
pub mod run;
pub mod scratch;
pub mod validate;
