//! dsh-host-corpus's integration tests in one binary (one link instead of one per file).
//! Through the library: `corpus_lint` (the lint of host cases and the rule catalog, on the real
//! corpus and broken copies of it) and `embedded_corpus` (the corpus the kit embeds, and where a
//! command finds its corpus). Whole runs of the corpus against hosts: `hostile_drivers` (shell
//! drivers that attack the harness), `wrong_hosts` (hosts with the wrong process or session
//! handling), `mutants` (the reference host's kill matrix), `node_host` (the Node.js example
//! host) and `go_host` (the Go example host under `--dialect multica`, and its mutants). Those
//! run the corpus the way a user's `dsh-conformance run` does, as that binary
//! (`dsh_test_support::binary`): on Linux every driver then runs under the per-case subreaper,
//! which only the kit's own binary provides (`dsh_engine::supervisor::wrap`), and the escaped
//! daemons these tests plant are judged as a user's run judges them. The ones that need `node`
//! or Go say `test-skipped: <name>: <why>` without them. One module alone:
//! `cargo test -p dsh-host-corpus --test it -- mutants::`.
//! The `run` and `lint` commands' own options and exit codes are the CLI's tests
//! (`conformance/tests/it/`).

mod corpus_lint;
mod embedded_corpus;
mod go_host;
mod hostile_drivers;
mod mutants;
mod node_host;
mod wrong_hosts;
