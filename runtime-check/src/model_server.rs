//! `dsh-conformance model-server`'s work: the [`dsh_model_server`] crate served as a command. It
//! reads the script (bounded), creates the log and writes the URL file without following links,
//! hands the URL to its caller and serves until SIGINT or SIGTERM.

use dsh_engine::input::{read_bounded, MAX_CONFIG_BYTES};
use dsh_model_server::script::Script;
use dsh_model_server::{default_script, files, ModelServer, Options};
use std::path::PathBuf;

/// What `model-server` serves and where it says so.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// The script of replies (JSON, see docs/runtime-checks.md); `None`: the default script, a
    /// `write` of index.html, then a short final text.
    pub script: Option<PathBuf>,
    /// The port on 127.0.0.1 (0: any free one).
    pub port: u16,
    /// Also write the base URL (and a newline) to this file once the server listens (written
    /// beside it, then renamed over it; a symbolic link is refused).
    pub url_file: Option<PathBuf>,
    /// Write one JSON line per request received to this new file (an existing path is refused).
    pub log: Option<PathBuf>,
}

/// Serves until SIGINT or SIGTERM; `listening` gets the base URL once the server listens (the
/// command line prints it). `Err`: the script or a file is unusable (exit 2).
pub fn serve(args: &ServeOptions, listening: &mut dyn FnMut(&str)) -> Result<(), String> {
    use nix::sys::signal::{SigSet, Signal};
    let script = match &args.script {
        None => default_script(),
        Some(path) => {
            let text = read_bounded(path, "the script", MAX_CONFIG_BYTES)?;
            Script::parse(&text).map_err(|e| format!("script {}: {e}", path.display()))?
        }
    };
    let log_file = args.log.as_deref().map(files::create_log).transpose()?;
    // Block the stop signals before any thread starts, so only the wait below receives them.
    let mut stop = SigSet::empty();
    stop.add(Signal::SIGINT);
    stop.add(Signal::SIGTERM);
    stop.thread_block()
        .map_err(|e| format!("cannot block signals: {e}"))?;
    let options = Options {
        port: args.port,
        log_file,
        limits: dsh_model_server::Limits {
            // Nothing reads the log in memory: the file has it.
            remembered_log_bytes: 0,
            ..Default::default()
        },
    };
    let server = ModelServer::start_with(script, options)
        .map_err(|e| format!("cannot listen on 127.0.0.1:{}: {e}", args.port))?;
    if let Some(path) = &args.url_file {
        files::write_url_file(path, server.url())?;
    }
    listening(server.url());
    stop.wait()
        .map_err(|e| format!("waiting for a signal: {e}"))?;
    drop(server);
    Ok(())
}
