//! dsh-runtime-check's own integration tests in one binary (the other checks' tests drive the
//! CLI and live in the `conformance` crate). `acp_check`: the ACP checks against fake-dsh (both
//! personas) and, when `cargo xtask real-dsh --runtime-bin` has installed them, the real
//! runtimes, and the live member-level differential of the two.

mod acp_check;
