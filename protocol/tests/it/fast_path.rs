//! The fast path of frame parsing (`scan`, flat objects) changes nothing: for every input,
//! `RuntimeFrame::parse_str` (fast path first) and `RuntimeFrame::parse_str_general` (the general
//! parser alone) give the same frame or the same error. Inputs: generated objects built from the
//! members frames have and the JSON spellings the scanner must accept or decline (escapes,
//! surrogates, number forms, nesting, duplicate keys, whitespace), byte mutations of valid lines,
//! and every line of the fuzz corpus and the fixture transcripts.
//!
//! The same inputs hold the borrowed frames ([`FrameRef`], what the checker hands out) to the
//! owned ones: `into_owned()` of the borrowed frame is the owned frame, on both paths, and equals
//! the frame built by an independent owned route (`serde_json::Value`, then
//! `RuntimeFrame::from_value`); and a line without escapes is read without copying a string.

use dsh_protocol::frames::FRAME_TYPES;
use dsh_protocol::{FrameRef, RuntimeFrame};
use proptest::prelude::*;
use std::borrow::Cow;
use std::path::Path;

/// Asserts that both paths agree on `text`: a frame the fast path builds is the general parser's
/// frame, and `parse_str` (fast path first) answers exactly what the general parser does; and
/// that the borrowed frames agree with the owned ones ([`borrowed_agrees`]).
/// Returns whether the fast path took the line.
fn agree(text: &str) -> bool {
    let general = RuntimeFrame::parse_str_general(text);
    let fast = RuntimeFrame::parse_str_fast(text);
    if let Some(frame) = &fast {
        assert_eq!(
            Ok(frame),
            general.as_ref(),
            "the fast path accepted {text:?}"
        );
    }
    assert_eq!(RuntimeFrame::parse_str(text), general, "on {text:?}");
    borrowed_agrees(text, &general);
    fast.is_some()
}

/// The borrowed parse of `text`, on each path, is `owned` once converted (same frame, same
/// error); an accepted frame is also what the owned route through `serde_json::Value` builds;
/// and when `text` holds no escape, no string of the borrowed frame was copied.
fn borrowed_agrees(text: &str, owned: &Result<RuntimeFrame, dsh_protocol::FrameError>) {
    let borrowed = FrameRef::parse_str(text);
    assert_eq!(
        &borrowed.clone().map(FrameRef::into_owned),
        owned,
        "borrowed vs owned on {text:?}"
    );
    assert_eq!(
        FrameRef::parse_str_general(text).map(FrameRef::into_owned),
        *owned,
        "borrowed general path on {text:?}"
    );
    if let Some(fast) = FrameRef::parse_str_fast(text) {
        assert_eq!(
            Ok(&fast),
            borrowed.as_ref(),
            "borrowed fast path on {text:?}"
        );
    }
    assert_eq!(
        FrameRef::parse_line(text.as_bytes()).map(FrameRef::into_owned),
        RuntimeFrame::parse_line(text.as_bytes()),
        "parse_line on {text:?}"
    );
    let Ok(frame) = borrowed else { return };
    let value: serde_json::Value = serde_json::from_str(text).expect("an accepted frame is JSON");
    assert_eq!(
        RuntimeFrame::from_value(&value).as_ref(),
        Ok(&frame.clone().into_owned()),
        "the owned route through a Value on {text:?}"
    );
    assert_eq!(
        FrameRef::from(frame.clone().into_owned()),
        frame,
        "an owned frame converts back"
    );
    if !text.contains('\\') {
        for string in borrowed_strings(&frame) {
            assert!(
                matches!(string, Cow::Borrowed(_)),
                "`{string}` was copied out of {text:?}"
            );
        }
    }
}

/// The strings a borrowed frame may borrow from its line.
fn borrowed_strings<'f>(frame: &'f FrameRef<'_>) -> Vec<&'f Cow<'f, str>> {
    match frame {
        FrameRef::Session(f) => vec![&f.request_id, &f.session_id],
        FrameRef::Thinking(f) | FrameRef::Text(f) => vec![&f.request_id, &f.content],
        FrameRef::ToolCall(f) => vec![&f.request_id, &f.call_id, &f.name, &f.arguments],
        FrameRef::ToolResult(f) => vec![&f.request_id, &f.call_id, &f.name, &f.output],
        FrameRef::Usage(f) => vec![&f.request_id, &f.provider, &f.model],
        _ => Vec::new(),
    }
}

const KEYS: [&str; 24] = [
    "v",
    "type",
    "request_id",
    "session_id",
    "resumed",
    "content",
    "call_id",
    "name",
    "arguments",
    "output",
    "is_error",
    "provider",
    "model",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "status",
    "resume_rejected",
    "stop_reason",
    "code",
    "message",
    "error",
    "x-extra",
];

/// JSON value spellings: what frames hold, and what the scanner must decline or get exactly right.
const VALUES: [&str; 44] = [
    "1",
    "0",
    "2",
    "01",
    "-1",
    "-0",
    "1.0",
    "1e0",
    "1E2",
    "9007199254740991",
    "9007199254740992",
    "12345678901234567890",
    "1234567890123456789",
    "true",
    "false",
    "null",
    "tru",
    r#""""#,
    r#""r1""#,
    r#""s1""#,
    r#""completed""#,
    r#""cancelled""#,
    r#""failed""#,
    r#""text""#,
    r#""tool_call""#,
    r#""a\nb\"c\\d\/e\bf\fg\rh\ti""#,
    r#""\u00e9\u2028\u0000""#,
    r#""\ud83d\ude00""#,
    r#""\ud800""#,
    r#""\udc00""#,
    r#""\ud800\u0041""#,
    r#""\uD83D\uDE00""#,
    r#""\x""#,
    r#""\u12""#,
    "\"tab\there\"",
    "\"é ü 😀\"",
    r#""{\"path\":\"index.html\"}""#,
    r#""{\"a\":1e400}""#,
    r#""not json""#,
    "{}",
    r#"{"code":"E","message":"m"}"#,
    r#"{"code":"E","code":"F","message":"m"}"#,
    "[]",
    r#"{"session_resume":true,"session_cancel":true,"structured_events":true}"#,
];

const SPACES: [&str; 5] = ["", "", " ", "\t", "\r\n "];

fn member() -> impl Strategy<Value = (String, String)> {
    (
        prop_oneof![
            8 => proptest::sample::select(&KEYS[..]).prop_map(str::to_string),
            1 => Just(r#"\u0076"#.to_string()),
            1 => "[a-z_]{1,4}",
        ],
        prop_oneof![
            8 => proptest::sample::select(&VALUES[..]).prop_map(str::to_string),
            2 => proptest::sample::select(&FRAME_TYPES[..]).prop_map(|t| format!("\"{t}\"")),
            1 => "\\PC{0,8}".prop_map(|text| serde_json::to_string(&text).expect("a string")),
        ],
    )
}

/// A JSON-ish object text: a `v` and a `type` most of the time, then random members, with random
/// whitespace around the tokens and sometimes a broken ending.
fn object() -> impl Strategy<Value = String> {
    (
        proptest::option::weighted(0.9, proptest::sample::select(&VALUES[..3])),
        proptest::option::weighted(0.9, proptest::sample::select(&FRAME_TYPES[..])),
        proptest::collection::vec(member(), 0..9),
        proptest::collection::vec(proptest::sample::select(&SPACES[..]), 8),
        prop_oneof![8 => Just(""), 1 => Just(","), 1 => Just(" x"), 1 => Just("}")],
    )
        .prop_map(|(v, type_name, rest, spaces, tail)| {
            let mut members: Vec<(String, String)> = Vec::new();
            if let Some(v) = v {
                members.push(("v".into(), v.to_string()));
            }
            if let Some(type_name) = type_name {
                members.push(("type".into(), format!("\"{type_name}\"")));
            }
            members.extend(rest);
            let body: Vec<String> = members
                .iter()
                .enumerate()
                .map(|(index, (key, value))| {
                    let s = |n: usize| spaces[(index + n) % spaces.len()];
                    format!("{}\"{key}\"{}:{}{value}{}", s(0), s(1), s(2), s(3))
                })
                .collect();
            format!("{}{{{}{tail}}}{}", spaces[0], body.join(","), spaces[1])
        })
}

/// Valid lines of every common frame type.
const VALID: [&str; 7] = [
    r#"{"v":1,"type":"session","request_id":"r1","session_id":"s1","resumed":false}"#,
    r#"{"v":1,"type":"text","request_id":"r1","content":"I will write the page.\n"}"#,
    r#"{"v":1,"type":"thinking","request_id":"r1","content":"Considering the \u00e9 layout"}"#,
    r#"{"v":1,"type":"tool_call","request_id":"r1","call_id":"c1","name":"write_file","arguments":"{\"path\":\"index.html\"}"}"#,
    r#"{"v":1,"type":"tool_result","request_id":"r1","call_id":"c1","name":"write_file","output":"ok","is_error":false}"#,
    r#"{"v":1,"type":"usage","request_id":"r1","provider":"p","model":"m","input_tokens":3,"output_tokens":4,"cache_read_tokens":0}"#,
    r#"{"v":1,"type":"result","request_id":"r1","status":"completed","session_id":"s1","resume_rejected":false,"output":"done"}"#,
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn generated_objects_parse_the_same_on_both_paths(text in object()) {
        agree(&text);
    }

    #[test]
    fn mutated_valid_lines_parse_the_same_on_both_paths(
        line in proptest::sample::select(&VALID[..]),
        edits in proptest::collection::vec((any::<proptest::sample::Index>(), 0u8..3, any::<u8>()), 1..4),
    ) {
        let mut bytes = line.as_bytes().to_vec();
        for (at, kind, byte) in edits {
            let at = at.index(bytes.len() + 1);
            match kind {
                0 if at < bytes.len() => bytes[at] = byte,
                1 if at < bytes.len() => { bytes.remove(at); }
                _ => bytes.insert(at, byte),
            }
        }
        if let Ok(text) = std::str::from_utf8(&bytes) {
            agree(text);
        }
    }
}

#[test]
fn the_valid_lines_take_and_pass_the_fast_path() {
    for line in VALID {
        assert!(agree(line), "the fast path declined {line}");
        assert!(RuntimeFrame::parse_str(line).is_ok());
    }
}

/// Each member of each valid line dropped, or its value replaced by each of these spellings: the
/// edges the fast path's direct build of the common frames must decide exactly as the general
/// parser does (empty ids, escapes, counts at and past 2^53-1, wrong types, `null`).
const EDGE_VALUES: [&str; 16] = [
    r#""""#,
    r#""x""#,
    r#""a\nb""#,
    r#""\u0000""#,
    "0",
    "1",
    "2",
    "9007199254740991",
    "9007199254740992",
    "true",
    "false",
    "null",
    "1.0",
    "-1",
    "{}",
    "[]",
];

#[test]
fn every_member_of_the_valid_lines_edited_parses_the_same_on_both_paths() {
    let mut edited = 0;
    for line in VALID {
        let serde_json::Value::Object(members) =
            serde_json::from_str::<serde_json::Value>(line).expect("a valid line")
        else {
            panic!("{line} is an object")
        };
        for key in members.keys() {
            let mut without = members.clone();
            without.remove(key);
            agree(&serde_json::to_string(&without).expect("serializes"));
            for edge in EDGE_VALUES {
                let mut replaced = members.clone();
                let value = serde_json::from_str(edge).expect("an edge value is JSON");
                replaced.insert(key.clone(), value);
                agree(&serde_json::to_string(&replaced).expect("serializes"));
                edited += 1;
            }
        }
        let mut extra = members.clone();
        extra.insert("x-future".into(), serde_json::json!("kept out"));
        assert!(agree(&serde_json::to_string(&extra).expect("serializes")));
    }
    assert!(edited > 500, "{edited} edited lines");
}

/// Every line of every file under `dir`, on both paths.
fn agree_on_files(dir: &Path) -> usize {
    let mut lines = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(next) = pending.pop() {
        for entry in std::fs::read_dir(&next).expect("a readable corpus directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            let bytes = std::fs::read(&path).expect("a readable corpus file");
            for line in bytes.split(|&byte| byte == b'\n') {
                // Fuzz seeds start with a control byte; try the line with and without it.
                for candidate in [line, line.get(1..).unwrap_or_default()] {
                    if let Ok(text) = std::str::from_utf8(candidate) {
                        agree(text.strip_suffix('\r').unwrap_or(text));
                        lines += 1;
                    }
                }
            }
        }
    }
    lines
}

#[test]
fn the_fuzz_corpus_and_the_fixture_transcripts_parse_the_same_on_both_paths() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace");
    let fuzz = agree_on_files(&root.join("fuzz/corpus/checker"));
    let transcripts = agree_on_files(&root.join("fixtures/transcripts"));
    assert!(fuzz > 100, "the fuzz corpus has lines ({fuzz})");
    assert!(
        transcripts > 100,
        "the transcripts have lines ({transcripts})"
    );
}
