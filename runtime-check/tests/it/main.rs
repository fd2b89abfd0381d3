//! dsh-runtime-check's integration tests in one binary (one link instead of one per file).
//! `check_runtime`: the open-design surface's checks against fake-dsh (the default agent passes
//! every check; each adversarial scenario fails the check that guards its rule);
//! `sdk_check_runtime`: the SDK and headless surfaces' checks (fake-dsh, a runtime that echoes,
//! the real SDK runtime when installed); `acp_check`: the ACP checks against fake-dsh (both
//! personas) and, when `cargo xtask real-dsh --runtime-bin` has installed them, the real
//! runtimes, and the live member-level differential of the two. One module alone:
//! `cargo test -p dsh-runtime-check --test it -- check_runtime::`.

mod acp_check;
mod check_runtime;
mod sdk_check_runtime;
