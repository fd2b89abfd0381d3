//! dsh-record's integration tests in one binary. `record`: the open-design surface recorded and
//! turned into a case file (`fixture-from-transcript`); `sdk_record`: SDK sessions recorded and
//! turned into fake-dsh scenarios (`sdk-scenario-from-transcript`) that replay to the same wire.
//! The recording proxy is a process of its own by nature: it pipes its own stdin and stdout to
//! the runtime, forwards the signals it receives to the runtime's group and becomes the child
//! subreaper of the daemons the runtime leaves, so these tests start it as a user does, as
//! `dsh-conformance record` (`dsh_test_support::binary`), with a tiny host of their own in
//! front of it. One module alone: `cargo test -p dsh-record --test it -- sdk_record::`.

mod record;
mod sdk_record;
