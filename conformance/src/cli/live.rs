//! The reporter the command line hands a run (`run`, `report`): each case printed as it finishes,
//! as a table line or a JSON line, with a progress line on a terminal
//! (`dsh_results::output::stream::LiveOutput`); every note on stderr after the command's name.

use dsh_results::model::CaseResult;
use dsh_results::output::stream::{ColorChoice, LiveOutput, StreamStyle};
use dsh_results::output::Format;
use dsh_results::reporter::{Reporter, RunStart};
use std::sync::Mutex;

/// Prints a run's cases live in a `--format`; a run (or a `report` cell) at a time.
pub struct LivePrinter {
    /// What a note starts with: `dsh-conformance run`, `dsh-conformance report`.
    command: &'static str,
    format: Format,
    color: ColorChoice,
    /// Whether a table run starts with the run's header lines (`run`: yes; `report`'s cells
    /// announce themselves on stderr).
    header: bool,
    live: Mutex<Option<LiveOutput>>,
}

impl LivePrinter {
    pub fn new(
        command: &'static str,
        format: Format,
        color: ColorChoice,
        header: bool,
    ) -> LivePrinter {
        LivePrinter {
            command,
            format,
            color,
            header,
            live: Mutex::new(None),
        }
    }

    fn with_live(&self, action: impl FnOnce(&LiveOutput)) {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(live) = live.as_ref() {
            action(live);
        }
    }
}

impl Reporter for LivePrinter {
    fn start(&self, start: &RunStart) {
        let style = match self.format {
            Format::Table => StreamStyle::Lines {
                color: self.color.resolve(),
                id_width: start.id_width,
            },
            Format::Jsonl => StreamStyle::Jsonl,
            Format::Json => StreamStyle::Quiet,
        };
        let live = LiveOutput::new(style, &start.host, &start.variant, start.total);
        if self.header && self.format == Format::Table {
            live.write(&start.header);
        }
        *self.live.lock().unwrap_or_else(|p| p.into_inner()) = Some(live);
    }

    fn case(&self, case: &CaseResult) {
        self.with_live(|live| live.case(case));
    }

    fn finish(&self) {
        if let Some(live) = self.live.lock().unwrap_or_else(|p| p.into_inner()).take() {
            live.finish();
        }
    }

    fn note(&self, text: &str) {
        eprintln!("{}: {text}", self.command);
    }
}
