//! Adversarial streams for the framer + checker (issue 2 item 5): arbitrary sequences of valid and
//! mutated frames (shuffled, duplicated, truncated, foreign ids, non-UTF-8, split lines), pushed
//! through the framer in random chunkings, never panic; the verdict does not depend on the
//! chunking; and the checker reports `completed` only when the stream holds exactly one
//! `result: completed` for the active request after a session frame of that request. Every step
//! the checker hands out borrows its line, and converts to exactly the owned frame of that line.

use dsh_protocol::frames::Status;
use dsh_protocol::{
    LineEvent, LineFramer, RunContext, RuntimeFrame, Step, StreamChecker, Terminal,
};
use proptest::prelude::*;

const ACTIVE: &str = "r1";

#[derive(Debug, Clone)]
enum Piece {
    Ready,
    Session {
        request: &'static str,
        resumed: bool,
    },
    Text(&'static str),
    ToolCall(&'static str),
    ToolResult(&'static str),
    Usage,
    Completed {
        request: &'static str,
        session: &'static str,
    },
    Cancelled,
    Failed,
    ProtocolError,
    Empty,
    Garbage(Vec<u8>),
    /// A frame cut short at this fraction of its bytes.
    Truncated(Box<Piece>, u8),
    /// A frame with one byte replaced by an invalid UTF-8 byte.
    NonUtf8(Box<Piece>, u8),
    Crlf(Box<Piece>),
}

fn line_of(piece: &Piece) -> Vec<u8> {
    let text = match piece {
        Piece::Ready => r#"{"v":1,"type":"ready","runtime":"open-design","protocol_version":1,"plugin_version":"0.1.0","capabilities":{"session_resume":true,"session_cancel":true,"structured_events":true}}"#.to_string(),
        Piece::Session { request, resumed } => format!(r#"{{"v":1,"type":"session","request_id":"{request}","session_id":"s1","resumed":{resumed}}}"#),
        Piece::Text(request) => format!(r#"{{"v":1,"type":"text","request_id":"{request}","content":"hi"}}"#),
        Piece::ToolCall(id) => format!(r#"{{"v":1,"type":"tool_call","request_id":"r1","call_id":"{id}","name":"write_file","arguments":"{{}}"}}"#),
        Piece::ToolResult(id) => format!(r#"{{"v":1,"type":"tool_result","request_id":"r1","call_id":"{id}","name":"write_file","output":"ok","is_error":false}}"#),
        Piece::Usage => r#"{"v":1,"type":"usage","request_id":"r1","provider":"p","model":"m","input_tokens":3,"output_tokens":4}"#.to_string(),
        Piece::Completed { request, session } => format!(r#"{{"v":1,"type":"result","request_id":"{request}","status":"completed","session_id":"{session}","resume_rejected":false}}"#),
        Piece::Cancelled => r#"{"v":1,"type":"result","request_id":"r1","status":"cancelled","session_id":"s1","resume_rejected":false}"#.to_string(),
        Piece::Failed => r#"{"v":1,"type":"result","request_id":"r1","status":"failed","session_id":"s1","resume_rejected":false,"error":{"code":"E","message":"m"}}"#.to_string(),
        Piece::ProtocolError => r#"{"v":1,"type":"protocol_error","code":"E","message":"m"}"#.to_string(),
        Piece::Empty => String::new(),
        Piece::Garbage(bytes) => return bytes.clone(),
        Piece::Truncated(inner, fraction) => {
            let mut bytes = line_of(inner);
            bytes.truncate(bytes.len() * usize::from(*fraction) / 256);
            return bytes;
        }
        Piece::NonUtf8(inner, position) => {
            let mut bytes = line_of(inner);
            if !bytes.is_empty() {
                let slot = usize::from(*position) % bytes.len();
                bytes[slot] = 0xFF;
            }
            return bytes;
        }
        Piece::Crlf(inner) => {
            let mut bytes = line_of(inner);
            bytes.push(b'\r');
            return bytes;
        }
    };
    text.into_bytes()
}

fn valid_piece() -> impl Strategy<Value = Piece> {
    let request = prop_oneof![3 => Just(ACTIVE), 1 => Just("r0")];
    prop_oneof![
        Just(Piece::Ready),
        (request.clone(), any::<bool>())
            .prop_map(|(request, resumed)| Piece::Session { request, resumed }),
        request.clone().prop_map(Piece::Text),
        prop_oneof![Just("c1"), Just("c2")].prop_map(Piece::ToolCall),
        prop_oneof![Just("c1"), Just("c2")].prop_map(Piece::ToolResult),
        Just(Piece::Usage),
        (request, prop_oneof![Just("s1"), Just("s2")])
            .prop_map(|(request, session)| Piece::Completed { request, session }),
        Just(Piece::Cancelled),
        Just(Piece::Failed),
        Just(Piece::ProtocolError),
        Just(Piece::Empty),
    ]
}

fn piece() -> impl Strategy<Value = Piece> {
    prop_oneof![
        6 => valid_piece(),
        1 => proptest::collection::vec(any::<u8>(), 0..24).prop_map(Piece::Garbage),
        1 => (valid_piece(), any::<u8>()).prop_map(|(inner, cut)| Piece::Truncated(Box::new(inner), cut)),
        1 => (valid_piece(), any::<u8>()).prop_map(|(inner, at)| Piece::NonUtf8(Box::new(inner), at)),
        1 => valid_piece().prop_map(|inner| Piece::Crlf(Box::new(inner))),
    ]
}

/// A plausible run, then shuffled/duplicated/extended pieces.
fn stream() -> impl Strategy<Value = Vec<Piece>> {
    let plausible = vec![
        Piece::Ready,
        Piece::Session {
            request: ACTIVE,
            resumed: false,
        },
        Piece::Text(ACTIVE),
        Piece::ToolCall("c1"),
        Piece::ToolResult("c1"),
        Piece::Usage,
        Piece::Completed {
            request: ACTIVE,
            session: "s1",
        },
    ];
    (
        Just(plausible).prop_shuffle(),
        any::<bool>(),
        proptest::collection::vec((any::<prop::sample::Index>(), piece()), 0..6),
        proptest::collection::vec(any::<prop::sample::Index>(), 0..3),
    )
        .prop_map(|(shuffled, keep_order, inserts, duplicates)| {
            let mut pieces = if keep_order {
                let mut ordered = shuffled.clone();
                ordered.sort_by_key(order_key);
                ordered
            } else {
                shuffled
            };
            for (at, piece) in inserts {
                let slot = at.index(pieces.len() + 1);
                pieces.insert(slot, piece);
            }
            for at in duplicates {
                let copy = pieces[at.index(pieces.len())].clone();
                let slot = at.index(pieces.len() + 1);
                pieces.insert(slot, copy);
            }
            pieces
        })
}

fn order_key(piece: &Piece) -> usize {
    match piece {
        Piece::Ready => 0,
        Piece::Session { .. } => 1,
        Piece::Completed { .. } => 9,
        Piece::ToolResult(_) => 5,
        Piece::Usage => 6,
        _ => 3,
    }
}

fn encode(pieces: &[Piece], final_newline: bool) -> Vec<u8> {
    let mut bytes = Vec::new();
    for (index, piece) in pieces.iter().enumerate() {
        bytes.extend(line_of(piece));
        if final_newline || index + 1 < pieces.len() {
            bytes.push(b'\n');
        }
    }
    bytes
}

fn check(bytes: &[u8], cuts: &[prop::sample::Index], cancel_sent: bool) -> Terminal {
    let mut checker = StreamChecker::new(RunContext::new(ACTIVE));
    if cancel_sent {
        checker.note_cancel_sent();
    }
    let mut framer = LineFramer::with_limit(256);
    let mut offsets: Vec<usize> = cuts.iter().map(|cut| cut.index(bytes.len() + 1)).collect();
    offsets.push(0);
    offsets.push(bytes.len());
    offsets.sort_unstable();
    for window in offsets.windows(2) {
        for event in framer.push(&bytes[window[0]..window[1]]) {
            step_agrees(&event, checker.check_event(&event));
        }
    }
    if let Some(event) = framer.finish() {
        step_agrees(&event, checker.check_event(&event));
    }
    checker.finish()
}

/// The borrowed step is the owned one: `Step::into_owned` keeps it, and an accepted frame's
/// `into_owned()` is the frame `RuntimeFrame::parse_line` reads from the same line.
fn step_agrees(event: &LineEvent, step: Step<'_>) {
    assert_eq!(step.clone().into_owned(), step);
    if let Step::Accepted(frame) = step {
        let (LineEvent::Line { bytes, .. } | LineEvent::Truncated { bytes, .. }) = event else {
            panic!("a frame accepted without a line: {event:?}")
        };
        assert_eq!(Ok(frame.into_owned()), RuntimeFrame::parse_line(bytes));
    }
}

/// A piece as the checker sees it: a CRLF line is the same frame.
fn intact(piece: &Piece) -> &Piece {
    match piece {
        Piece::Crlf(inner) => intact(inner),
        other => other,
    }
}

/// The oracle: exactly one intact completed result for the active request, after an intact
/// session frame of the active request.
fn may_complete(pieces: &[Piece]) -> bool {
    let completed: Vec<usize> = pieces
        .iter()
        .enumerate()
        .filter(|(_, piece)| matches!(intact(piece), Piece::Completed { request, .. } if *request == ACTIVE))
        .map(|(index, _)| index)
        .collect();
    let [at] = completed[..] else { return false };
    pieces[..at]
        .iter()
        .any(|piece| matches!(intact(piece), Piece::Session { request, .. } if *request == ACTIVE))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn never_panics_and_only_completes_when_allowed(
        pieces in stream(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
        final_newline in any::<bool>(),
        cancel_sent in any::<bool>(),
    ) {
        let bytes = encode(&pieces, final_newline);
        let chunked = check(&bytes, &cuts, cancel_sent);
        let whole = check(&bytes, &[], cancel_sent);
        prop_assert_eq!(&chunked, &whole, "the verdict must not depend on chunking");
        if let Terminal::Result(result) = &chunked {
            if result.status == Status::Completed {
                prop_assert!(may_complete(&pieces), "completed without exactly one completed result after a session: {:?}", pieces);
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..512),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
    ) {
        let terminal = check(&bytes, &cuts, false);
        prop_assert!(!matches!(terminal, Terminal::Result(ref result) if result.status == Status::Completed));
    }
}

/// A large-case run of the same properties, for fuzzing locally (`cargo test -p dsh-protocol
/// --test it -- checker_props:: --ignored`).
#[test]
#[ignore = "long-running fuzz pass; run explicitly"]
fn fuzz_many_cases() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(200_000));
    runner
        .run(
            &(
                stream(),
                proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
                any::<bool>(),
            ),
            |(pieces, cuts, cancel_sent)| {
                let bytes = encode(&pieces, true);
                let chunked = check(&bytes, &cuts, cancel_sent);
                prop_assert_eq!(&chunked, &check(&bytes, &[], cancel_sent));
                if let Terminal::Result(result) = &chunked {
                    if result.status == Status::Completed {
                        prop_assert!(may_complete(&pieces));
                    }
                }
                Ok(())
            },
        )
        .expect("the checker's properties hold");
}
