//! Fuzzes the line framer and the strict checker together: the input's first byte picks the
//! run context and chunk size, the rest is the runtime's stdout. Nothing may panic, the verdict
//! must not depend on how the bytes are chunked, and a `completed` verdict names its session.
#![no_main]

use dsh_protocol::frames::Status;
use dsh_protocol::{LineFramer, RunContext, StreamChecker, Terminal};
use libfuzzer_sys::fuzz_target;

fn check(bytes: &[u8], chunk: usize, control: u8) -> Terminal {
    let context = if control & 1 == 0 {
        RunContext::new("r1")
    } else {
        RunContext::resuming("r1", "s1")
    };
    let mut checker = StreamChecker::new(context);
    if control & 2 != 0 {
        checker.note_cancel_sent();
    }
    let mut framer = LineFramer::with_limit(4096);
    for piece in bytes.chunks(chunk.max(1)) {
        for event in framer.push(piece) {
            checker.check_event(&event);
        }
    }
    if let Some(event) = framer.finish() {
        checker.check_event(&event);
    }
    checker.finish()
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, stream)) = data.split_first() else {
        return;
    };
    let chunked = check(stream, usize::from(control >> 2) + 1, control);
    let whole = check(stream, stream.len(), control);
    assert_eq!(chunked, whole, "the verdict must not depend on chunking");
    if let Terminal::Result(result) = &whole {
        if result.status == Status::Completed {
            // A completed run always went through a validated session frame.
            assert!(result.session_id.is_some());
        }
    }
});
