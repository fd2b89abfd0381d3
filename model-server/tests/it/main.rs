//! dsh-model-server's integration tests in one binary (one link instead of one per file): each
//! module was a test file of its own. `serve`: the server over real sockets (scripted replies,
//! faults, the request log); `messages`: the Anthropic Messages route the same way; `abuse`:
//! hostile clients against small limits; `process_abuse`: a load-and-abuse run against the
//! server as a process of its own (`dsh-conformance model-server`, so its resident memory and its
//! file descriptors are its own to measure and exhaust); `real_runtime`: the real dsh 0.2.1 (and
//! the Python clients) driven through it, when installed. `support` is their loopback HTTP
//! client, `dsh_test_support::model_http`, which the conformance crate's tests of the CLI use too.

pub(crate) use dsh_test_support::model_http as support;

mod abuse;
mod messages;
mod process_abuse;
mod real_runtime;
mod serve;
