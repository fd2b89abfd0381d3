//! dsh-conformance's end-to-end tests of the command line, in one binary (one link instead of one
//! per file): each drives the `dsh-conformance` binary as a user does (its options, exit codes,
//! output files and signals). What a command computes is its product crate's own test
//! (`<crate>/tests/it/`, against the typed API). `run`: `run_cli`, `run_signals`, `reuse`,
//! `safe_files`, `bounded_inputs`, `dialect_cli` (`run --dialect`), `supervise`; the corpus:
//! `corpus_cli` (`--version`, `corpus export`, the embedded corpus), `lint_cli`; the other
//! commands: `validate_cli`, `check_runtime_cli`, `record_cli`, `report_cli` (`report`, `diff`),
//! `report_tools` (`merge`, `summary`, `diff --allow-removed` on `run --shard` results),
//! `model_server_cli`; the client corpus
//! (`run --surface sdk|headless`): `client_corpus`, `client_kill_matrix`, `client_launcher`,
//! `official_python_client`. One module alone:
//! `cargo test -p dsh-conformance --test it -- run_cli::`. Their insta snapshots are
//! `snapshots/it__<module>__<name>.snap`. Shared helpers are `dsh-test-support`'s
//! (`shell_driver`, `corpus_copy`, `model_http`; `node_support` re-exports the workspace root).
//!
//! Beside this binary, each its own: `tests/corpus.rs` (the corpus through its own libtest-mimic
//! harness); `tests/differential.rs` and `tests/real_dsh.rs` (they run processes through
//! `dsh_runtime_check::output_within`, which makes the test process a child subreaper and kills the
//! children of the process it did not start itself: another test's, in a shared binary), and
//! `tests/sdk_differential.rs` (the same, against the real SDK runtime).

mod node_support;

/// The model server's loopback HTTP client, shared with that crate's own tests.
use dsh_test_support::model_http as model_server_support;

mod acp_client_corpus;
mod acp_record;
mod bounded_inputs;
mod check_runtime_cli;
mod client_corpus;
mod client_kill_matrix;
mod client_launcher;
mod corpus_cli;
mod dialect_cli;
mod lint_cli;
mod model_server_cli;
mod official_python_client;
mod record_cli;
mod report_cli;
mod report_clients;
mod report_tools;
mod reuse;
mod run_cli;
mod run_signals;
mod runtime_options;
mod safe_files;
mod supervise;
mod validate_cli;
