//! The typed model of one case file (fixture v1, docs/fixture-format.md) and its loading: the
//! shared model in `dsh_formats::case`, under the harness's own name for it.

pub use dsh_formats::case::*;
