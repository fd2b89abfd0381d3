//! The conformance harness: fixture loading, the runner, verdicts and reports.
//!
//! - [`model`]: the results model every output renders.
//! - [`validate`]: `validate`, checking one captured stdout stream.
//! - [`run`]: `run`, the corpus against one host (runner, world, driver, verdicts).
//! - [`corpus`]: loading and linting the fixture corpus and its rule catalog.
//! - [`output`]: terminal table, JSON, JUnit XML, Markdown.
//! - [`report`]: the hosts x variants matrix (HTML, JSON, Markdown) and `diff`.

pub mod corpus;
pub mod model;
pub mod output;
pub mod report;
pub mod run;
pub mod validate;
