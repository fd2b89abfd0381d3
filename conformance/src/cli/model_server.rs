//! `model-server`: the kit's scripted model endpoint on loopback, served until SIGINT or SIGTERM
//! (`dsh_runtime_check::model_server`).

use super::options::heading;
use dsh_runtime_check::model_server::{serve, ServeOptions};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The script of replies (JSON, see docs/runtime-checks.md); without it, the default script:
    /// a `write` of index.html, then a short final text.
    #[arg(long, value_name = "FILE", help_heading = heading::RUNTIME)]
    pub script: Option<PathBuf>,
    /// The port on 127.0.0.1 (0: any free one).
    #[arg(long, default_value_t = 0, help_heading = heading::RUNTIME)]
    pub port: u16,
    /// Also write the base URL (and a newline) to this file once the server listens (written
    /// beside it, then renamed over it; a symbolic link is refused).
    #[arg(long, value_name = "FILE", help_heading = heading::OUTPUT)]
    pub url_file: Option<PathBuf>,
    /// Write one JSON line per request received to this new file (an existing path is refused).
    #[arg(long, value_name = "FILE", help_heading = heading::OUTPUT)]
    pub log: Option<PathBuf>,
}

/// Prints the base URL once listening; exit 0 after a stop signal, 2 when the script or a file
/// is unusable.
pub fn main(args: Args) -> ExitCode {
    let options = ServeOptions {
        script: args.script,
        port: args.port,
        url_file: args.url_file,
        log: args.log,
    };
    let served = serve(&options, &mut |url| {
        println!("{url}");
        std::io::stdout().flush().ok();
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("dsh-conformance model-server: {message}");
            ExitCode::from(2)
        }
    }
}
