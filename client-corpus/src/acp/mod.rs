//! The ACP client corpus's own parts (`run --surface acp`, docs/surface-acp.md, "The client
//! corpus"): a client of `dsh --profile acp` is played and judged like an SDK client (the same
//! play, canary, teardown and report checks), plus what only ACP has: the driver contract's ACP
//! variables ([`contract`]) and what the client must have sent on the wire, judged from fake-dsh's
//! journal of everything it received ([`wire`]).

pub mod contract;
pub mod wire;
