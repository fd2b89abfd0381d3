//! dsh-model-server's integration tests in one binary (one link instead of one per file): each
//! module was a test file of its own. `serve`: the server over real sockets (scripted replies,
//! faults, the request log); `abuse`: hostile clients against small limits. `support` is their
//! loopback HTTP client, also used by the conformance crate's tests of the CLI.

mod support;

mod abuse;
mod messages;
mod real_runtime;
mod serve;
