//! dsh-protocol's integration tests in one binary (one link instead of one per file): each
//! module was a test file of its own. `checker_rules`: one test per strict stream rule;
//! `checker_props`: adversarial streams through the framer and checker (proptest); `fast_path`: the
//! fast parsing path against the general parser; `frames_agree`: the typed frames against the JSON
//! Schemas. One module alone: `cargo test -p dsh-protocol --test it -- checker_props::`.

mod checker_props;
mod checker_rules;
mod fast_path;
mod frames_agree;
