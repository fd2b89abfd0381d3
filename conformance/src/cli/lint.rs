//! `lint` and `corpus`: the fixture tree's two corpora checked together (the host corpus's cases
//! and rule catalog, the client corpus's), and the corpus built into this binary.

use super::options::{heading, CorpusSource};
use dsh_engine::corpus::{embedded, interpretation_ids};
use dsh_host_corpus::corpus::{
    default_docs_dir, lint_with_docs, load_cases, load_rules, rules_markdown,
};
use std::fs;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub corpus: CorpusSource,
    /// Where docs/interpretations.md lives (default: `docs/` next to the fixtures directory).
    #[arg(long, value_name = "DIR", help_heading = heading::SELECTION)]
    pub docs: Option<PathBuf>,
    /// Also write the rule -> sentence -> cases table as Markdown to FILE (e.g. docs/rules.md).
    #[arg(long, value_name = "FILE", help_heading = heading::OUTPUT)]
    pub write_rules_md: Option<PathBuf>,
}

/// `dsh-conformance lint`: prints each problem; exit 0 clean, 1 problems, 2 no fixtures dir.
pub fn main(args: Args) -> ExitCode {
    let corpus = match args.corpus.choose() {
        Ok(corpus) => corpus,
        Err(message) => {
            eprintln!("dsh-conformance lint: {message}");
            return ExitCode::from(2);
        }
    };
    if let Some(note) = corpus.announcement() {
        eprintln!("dsh-conformance lint: {note}");
    }
    let fixtures_dir = corpus.path().to_path_buf();
    let docs_dir = args
        .docs
        .clone()
        .unwrap_or_else(|| default_docs_dir(&fixtures_dir));
    let mut errors = lint_with_docs(&fixtures_dir, &docs_dir);
    errors.extend(dsh_client_corpus::corpus::lint(&fixtures_dir, &docs_dir));
    for error in &errors {
        println!("{error}");
    }
    let (cases, _) = load_cases(&fixtures_dir);
    if let Some(target) = &args.write_rules_md {
        match load_rules(&fixtures_dir) {
            Ok(rules) => {
                if let Err(error) = fs::write(target, rules_markdown(&rules, &cases)) {
                    eprintln!(
                        "dsh-conformance lint: cannot write {}: {error}",
                        target.display()
                    );
                    return ExitCode::from(2);
                }
            }
            Err(error) => eprintln!(
                "dsh-conformance lint: not writing {}: {error}",
                target.display()
            ),
        }
    }
    if errors.is_empty() {
        let rules = load_rules(&fixtures_dir)
            .map(|rules| rules.len())
            .unwrap_or(0);
        println!(
            "ok: {} cases, {rules} rules, {} interpretation entries",
            cases.len(),
            interpretation_ids(&docs_dir).len()
        );
        ExitCode::SUCCESS
    } else {
        println!("{} problem(s) in {}", errors.len(), fixtures_dir.display());
        ExitCode::from(1)
    }
}

/// `dsh-conformance corpus`: the corpus built into this binary.
#[derive(Debug, clap::Args)]
pub struct CorpusArgs {
    #[command(subcommand)]
    pub command: CorpusCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum CorpusCommand {
    /// Write the embedded corpus to DIR/fixtures (plus DIR/docs/interpretations.md, which `lint`
    /// reads), to pin, read or extend it; `run` in DIR then finds it.
    Export {
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// Print the embedded corpus's case count and hashes.
    Info,
}

/// `dsh-conformance corpus export|info`: exit 0 done, 2 could not write.
pub fn corpus_main(args: CorpusArgs) -> ExitCode {
    match args.command {
        CorpusCommand::Export { dir } => match embedded::export(&dir) {
            Ok(fixtures) => {
                println!(
                    "wrote {} files ({} cases) to {}; corpus sha256 {}",
                    embedded::files().len(),
                    embedded::case_count(),
                    fixtures.display(),
                    embedded::case_hash()
                );
                ExitCode::SUCCESS
            }
            Err(message) => {
                eprintln!("dsh-conformance corpus export: {message}");
                ExitCode::from(2)
            }
        },
        CorpusCommand::Info => {
            println!("cases: {}", embedded::case_count());
            println!("files: {}", embedded::files().len());
            println!("corpus sha256: {}", embedded::case_hash());
            println!("tree sha256: {}", embedded::embedded_tree_hash());
            ExitCode::SUCCESS
        }
    }
}
