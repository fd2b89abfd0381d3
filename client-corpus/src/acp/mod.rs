//! The ACP client corpus's own parts (`run --surface acp`, docs/surface-acp.md, "The client
//! corpus"): a client of `dsh --profile acp` is played and judged like an SDK client (the same
//! play, canary, teardown and report checks), plus what only ACP has: the driver contract's ACP
//! variables ([`contract`]) and what the client must have sent on the wire, judged from fake-dsh's
//! journal of everything it received ([`wire`]); and `--write-expectations`, which only the ACP
//! corpus takes among the client corpora ([`write_expectations`]).

pub mod contract;
pub mod wire;

/// `--write-expectations FILE` on `run --surface acp`: the run's failures as an expectations
/// file (the host run's format and wording, `dsh_results::expectations`), an entry already in
/// the `--expectations` file given keeping its reason. A client author starts from it and puts
/// each deviation's evidence in its reason by hand.
pub fn write_expectations(
    report: &dsh_results::model::SuiteReport,
    previous: Option<&dsh_results::expectations::Expectations>,
    path: &std::path::Path,
) -> Result<(), String> {
    dsh_results::expectations::Expectations::from_failures(report, previous).write(path)
}
