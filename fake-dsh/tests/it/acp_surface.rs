//! fake-dsh's ACP surface beyond the captures: its command line, the default agent, scenario
//! knobs (adversarial ones included), cold resume across processes, and endings mid-turn.
