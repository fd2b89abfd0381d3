//! fake-dsh: the user's official `dsh` with the open-design (or multica) profile, as far as a
//! host can see, with no model, key or network. A believable default agent, scripted adversarial scenarios
//! (`FAKE_DSH_SCENARIO`), a journal of what the host did (`FAKE_DSH_JOURNAL`) and a watchdog.
//!
//! - [`cli`]: the command line; [`run`]: the entry point.
//! - [`frames`]: the frames it writes, as JSON values; [`output`]: how they reach stdout.
//! - [`scenario`]: the scenario language; [`stdio`]: the `--stdio` mode and script player;
//!   [`agent`]: the default agent's turn; [`design`]: the HTML file it writes; [`project`]: the
//!   rule for every file an agent writes (inside the cwd, never through a link).
//! - [`inbox`]: host commands from stdin; [`journal`]: the journal; [`process`]: signals,
//!   watchdog, grandchildren; [`home`]: `DSH_HOME` and the profile; [`sessions`]: session records;
//!   [`profile`]: the per-profile identity table (`open-design`, `multica`).
//! - [`sdk`]: the SDK JSON-RPC runtime surfaces; [`headless`]: `--profile headless TASK`.
//! - [`acp`]: the Agent Client Protocol surface (`--profile acp`).

pub mod acp;
pub mod agent;
pub mod cli;
pub mod design;
pub mod frames;
pub mod headless;
pub mod home;
pub mod inbox;
pub mod journal;
pub mod output;
pub mod process;
pub mod profile;
pub mod project;
pub mod run;
pub mod scenario;
pub mod sdk;
pub mod sessions;
pub mod stdio;
