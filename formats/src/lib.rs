//! dsh-formats: the one typed model of each file format the kit defines for itself, shared by
//! the runtime (`fake-dsh`), the harness (`dsh-conformance run`) and `record`.
//!
//! - [`case`]: a case file (fixture v1, docs/fixture-format.md, `schemas/fixture.schema.json`).
//! - [`client_case`]: a client case and the client rule catalog (`schemas/client-case.schema.json`,
//!   `schemas/client-rules.schema.json`, docs/sdk-clients.md).
//! - [`scenario`]: a fake-dsh scenario, a case's `runtime` (`schemas/scenario.schema.json`).
//! - [`sdk_scenario`]: the SDK surfaces' scenario, a client case's `runtime`
//!   (`schemas/sdk-scenario.schema.json`).
//! - [`acp_scenario`]: the ACP surface's scenario (`schemas/acp-scenario.schema.json`).
//! - [`acp_client_case`]: an ACP client case's own members (a client case's `acp`).
//! - [`journal`]: one line of fake-dsh's journal (docs/journal.md, `schemas/journal.schema.json`).
//!
//! Each type serializes to and parses from exactly its schema's shape, and each loader checks what
//! the schema alone cannot, so adding a scenario action or a step is one change here that the
//! compiler then checks in every reader and writer. The schemas themselves stay files in
//! `schemas/`, embedded by `dsh-protocol`.

pub mod acp_client_case;
pub mod acp_scenario;
pub mod case;
pub mod client_case;
pub mod journal;
pub mod scenario;
pub mod sdk_scenario;
