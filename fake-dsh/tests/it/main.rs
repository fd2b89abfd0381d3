//! fake-dsh's integration tests in one binary (one link instead of one per file): each module
//! was a test file of its own. `agent`: the default agent over `--stdio`; `cli`: the one-shot CLI
//! surfaces; `client_knobs`: the SDK scenario knobs of the deeper client corpus, on the wire;
//! `journal_members`: the journal members the harness judges hosts by; `multica`: the
//! `--profile multica` surfaces and the raw-line templates that let one scenario play on either
//! profile; `script`: every action of the scenario language; `scripted_sessions`: scripts that
//! play what a host's own tests need; `official_python_client`: the official Python client
//! 0.2.1 on fake-dsh (the example in `examples/official-python-client/`); `sdk_surfaces`: the SDK
//! surfaces (`--profile sdk|sdk-minimal|headless`, the personas) and their scenario knobs.
//! `acp_wire`: the ACP surface replaying the real runtime's wire captures member for member;
//! `acp_surface`: the ACP surface's command line, scenario knobs, adversarial plays, default
//! agent, cold resume and endings; `acp_python_sdk`: the official Python ACP SDK on fake-dsh
//! (the example in `examples/acp-client-python/`). `support` is their shared test world.

mod support;

mod acp_python_sdk;
mod acp_surface;
mod acp_wire;
mod agent;
mod cli;
mod client_knobs;
mod journal_members;
mod multica;
mod official_python_client;
mod script;
mod scripted_sessions;
mod sdk_surfaces;
