//! dsh-report's integration tests, against its library API, in one binary (one link instead of
//! one per file). `outputs`: the `run` outputs of a fixed suite (table, Markdown, JUnit, JSON)
//! and their guarantees; `matrix`: the matrix's files (report.json, report.md, report.html) and
//! exit codes; `diff`: two reports compared; `tools`: `merge` and `summary`; `browser`:
//! report.html in headless Chromium (skipped, saying so, without it). `support` is the fixed,
//! hand-built results model they share. One module alone:
//! `cargo test -p dsh-report --test it -- diff::`. Insta snapshots are
//! `snapshots/it__<module>__<name>.snap`. The `report`, `diff`, `summary` and `merge` commands
//! themselves are the CLI's tests (`conformance/tests/it/report_cli.rs`, `report_tools.rs`).

mod support;

mod browser;
mod diff;
mod matrix;
mod outputs;
mod tools;
