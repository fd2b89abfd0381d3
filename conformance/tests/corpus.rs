//! The whole fixture corpus against the reference host `dsh-host-driver`, one libtest trial per
//! case id, so `cargo test -p dsh-conformance --test corpus -- cancel.` runs just those cases.
//! A case passes when its verdict is pass, informational or skipped (capability not claimed).
//! `DSH_CONFORMANCE_TIME_SCALE` scales every case's timeout on slow machines.

use dsh_engine::selection::Selection;
use dsh_host_corpus::{Suite, SuiteConfig, Variant};
use dsh_results::model::Verdict;
use libtest_mimic::{Arguments, Failed, Trial};
use std::path::PathBuf;
use std::sync::Arc;

fn main() {
    let arguments = Arguments::from_args();
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures");
    let time_scale = std::env::var("DSH_CONFORMANCE_TIME_SCALE")
        .ok()
        .and_then(|scale| scale.parse().ok())
        .unwrap_or_default();
    let config = SuiteConfig {
        host: vec![dsh_test_support::binary("dsh-host-driver")
            .display()
            .to_string()],
        host_name: None,
        fixtures,
        selection: Selection::default(),
        jobs: dsh_engine::timing::Jobs::ONE,
        time_scale,
        fake_dsh: dsh_test_support::binary("fake-dsh"),
        variant: Variant::default(),
        expectations: None,
        verify: 1,
        driver_per_case: false,
        corpus_source: None,
        pass_env: Vec::new(),
        dialect: dsh_host_corpus::dialect::Dialect::gen1(),
    };
    let suite = match Suite::prepare(&config) {
        Ok(suite) => Arc::new(suite),
        Err(error) => {
            eprintln!("corpus: the harness cannot run: {error}");
            std::process::exit(2);
        }
    };
    let trials = suite
        .entries()
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            let suite = Arc::clone(&suite);
            Trial::test(entry.id.clone(), move || {
                let (result, _) = suite.run_entry(&suite.entries()[index]);
                match result.verdict {
                    Verdict::Pass | Verdict::Informational | Verdict::Skipped => Ok(()),
                    verdict => {
                        let mut message = format!(
                            "{}: {} [{}]\nre-run: dsh-conformance run --case {} --verbose\n",
                            verdict.as_str(),
                            result.why.as_deref().unwrap_or("-"),
                            result.rule.as_deref().unwrap_or("-"),
                            result.id
                        );
                        for line in &result.transcript {
                            message.push_str(line);
                            message.push('\n');
                        }
                        Err(Failed::from(message))
                    }
                }
            })
        })
        .collect();
    libtest_mimic::run(&arguments, trials).exit();
}
