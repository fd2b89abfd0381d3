//! The results of a run and how they are written: the results model every output renders
//! ([`model`]: a suite of case results, each with its verdict, blame and rule), the error-code
//! vocabulary it describes ([`codes`]), the expectations file both corpora read
//! ([`expectations`]: known failures as `xfail`), the renderers ([`output`]: the live table, JSON and
//! JSONL, JUnit XML, Markdown), the [`reporter`] a run streams its cases to, credential
//! redaction for anything echoed ([`redact`]), and the
//! `run` command's options every corpus shares, typed ([`run_args`]: one grammar, one exit code,
//! the same output files; the command line that parses them is the `dsh-conformance` binary's).
//!
//! It judges nothing and starts nothing: the host corpus and the client corpus fill the model,
//! `report` aggregates it. It imports only `dsh-engine` of the kit (safe file writes, the shard
//! type).

pub mod codes;
pub mod expectations;
pub mod model;
pub mod output;
pub mod redact;
pub mod reporter;
pub mod run_args;
