//! What the tests that run example hosts and clients share, from `dsh-test-support`: the
//! workspace root and a finished command described for a failure message.

#![allow(unused_imports)]

pub use dsh_test_support::{describe, workspace_root as repo_root};
