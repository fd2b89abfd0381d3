//! dsh-conformance's integration tests that only start processes (the kit's binaries, fake-dsh,
//! shell-script hosts) or call pure library code, in one binary (one link instead of one per
//! file): each module was a test file of its own. The CLI: `run_cli`, `run_signals`, `reuse`,
//! `safe_files`, `bounded_inputs`, `hostile_drivers`, `supervise`, `validate_cli`, `record`,
//! `check_runtime`, `model_server`, `model_server_abuse`; the corpus: `corpus_lint`,
//! `embedded_corpus`, `dialect_cli` (`run --dialect`), `mutants` (the kill matrix), `wrong_hosts`, `node_host` (the Node.js
//! example host), `go_host` (the Go example host under `--dialect multica`, and its mutants); the SDK surfaces: `sdk_record`, `sdk_check_runtime`; the client corpus:
//! `client_corpus`, `client_kill_matrix`, `client_launcher`, `official_python_client`; reports: `report_matrix`, `report_outputs`,
//! `report_diff`, `report_tools`, `report_browser`. One module alone:
//! `cargo test -p dsh-conformance --test it -- run_cli::`. Their insta snapshots are
//! `snapshots/it__<module>__<name>.snap`.
//!
//! Beside this binary, each its own: `tests/corpus.rs` (the corpus through its own libtest-mimic
//! harness); `tests/differential.rs` and `tests/real_dsh.rs` (they run processes through
//! `dsh_runtime_check::output_within`, which makes the test process a child subreaper and kills the
//! children of the process it did not start itself: another test's, in a shared binary), and
//! `tests/sdk_differential.rs` (the same, against the real SDK runtime).

mod node_support;
mod report_support;
mod shell_driver_support;

/// The model server's loopback HTTP client, shared with that crate's own tests.
use dsh_test_support::model_http as model_server_support;

mod acp_client_corpus;
mod bounded_inputs;
mod check_runtime;
mod client_corpus;
mod client_kill_matrix;
mod client_launcher;
mod corpus_lint;
mod dialect_cli;
mod embedded_corpus;
mod go_host;
mod hostile_drivers;
mod model_server;
mod model_server_abuse;
mod mutants;
mod node_host;
mod official_python_client;
mod record;
mod report_browser;
mod report_diff;
mod report_matrix;
mod report_outputs;
mod report_tools;
mod reuse;
mod run_cli;
mod run_signals;
mod safe_files;
mod sdk_check_runtime;
mod sdk_record;
mod supervise;
mod validate_cli;
mod wrong_hosts;
