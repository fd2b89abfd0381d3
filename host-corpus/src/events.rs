//! Judging a run's normalized events (spec 9) against a case's `events` and `events_include`.
//!
//! What spec 9 requires is strict: which event each frame becomes, in stream order, carrying which
//! value; `thinking_start` before the first `thinking_delta`. What it leaves open is an
//! interpretation, reported `informational`: how many `thinking_start`s a run has (one per reasoning
//! block, or one per run as OpenDesign's daemon sends), and whether an empty `thinking`/`text` frame
//! becomes an empty delta or nothing. Members a host adds to an event are allowed; `usage` may spell
//! its cache counts `cache_*` or OpenDesign's `cached_*`; the `status` label is free.

use serde_json::{Map, Value};

/// I-C17: an empty `thinking`/`text` frame becomes an empty delta.
pub const EMPTY_DELTA_ENTRY: &str = "I-C17";
/// I-C11: one `thinking_start` per reasoning block.
pub const THINKING_START_ENTRY: &str = "I-C11";

/// Suffix of an `events` entry for a delta whose frame was empty (`"thinking_delta:empty"`).
const EMPTY_SUFFIX: &str = ":empty";

/// An events expectation that did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub why: String,
    /// Set when only an interpretation was broken.
    pub interpretation: Option<&'static str>,
}

fn strict(why: String) -> Option<Mismatch> {
    Some(Mismatch {
        why,
        interpretation: None,
    })
}

/// One reported event as the sequence sees it: its type, and whether it is an empty delta.
fn sequence_entry(event: &Value) -> Option<(String, bool)> {
    let kind = event.get("type")?.as_str()?;
    if kind == "thinking_end" || kind == "error" {
        return None;
    }
    let empty = matches!(kind, "thinking_delta" | "text_delta")
        && event.get("delta").and_then(Value::as_str) == Some("");
    Some((kind.to_string(), empty))
}

/// Compares the reported events with the expected sequence of types.
pub fn compare_sequence(expected: &[String], events: &[Value]) -> Option<Mismatch> {
    let got: Vec<(String, bool)> = events.iter().filter_map(sequence_entry).collect();
    let want: Vec<(String, bool)> = expected
        .iter()
        .map(|entry| match entry.strip_suffix(EMPTY_SUFFIX) {
            Some(kind) => (kind.to_string(), true),
            None => (entry.clone(), false),
        })
        .collect();
    let types = |entries: &[(String, bool)], keep_starts: bool, keep_empty: bool| -> Vec<String> {
        entries
            .iter()
            .filter(|(kind, empty)| {
                (keep_starts || kind != "thinking_start") && (keep_empty || !empty)
            })
            .map(|(kind, _)| kind.clone())
            .collect()
    };
    let (got_strict, want_strict) = (types(&got, false, false), types(&want, false, false));
    if got_strict != want_strict {
        return strict(format!(
            "expected events {want_strict:?}, got {got_strict:?} (thinking_start and empty deltas set aside)"
        ));
    }
    if let Some(position) = delta_before_start(&got) {
        return strict(format!(
            "event {position} is a thinking_delta with no thinking_start before it (spec 9: thinking_start, then thinking_delta)"
        ));
    }
    let (got_all, want_all) = (types(&got, true, true), types(&want, true, true));
    if got_all == want_all {
        return None;
    }
    let only_starts_differ = types(&got, false, true) == types(&want, false, true);
    let interpretation = if only_starts_differ {
        THINKING_START_ENTRY
    } else {
        EMPTY_DELTA_ENTRY
    };
    Some(Mismatch {
        why: format!("expected events {want_all:?}, got {got_all:?}"),
        interpretation: Some(interpretation),
    })
}

/// The index of the first `thinking_delta` not preceded by any `thinking_start`.
fn delta_before_start(got: &[(String, bool)]) -> Option<usize> {
    let first_start = got.iter().position(|(kind, _)| kind == "thinking_start");
    got.iter()
        .position(|(kind, _)| kind == "thinking_delta")
        .filter(|delta| first_start.is_none_or(|start| start > *delta))
}

/// Checks that events matching `patterns` appear in this order.
pub fn compare_include(patterns: &[Map<String, Value>], events: &[Value]) -> Option<Mismatch> {
    let mut remaining = events.iter();
    for pattern in patterns {
        let found = remaining
            .by_ref()
            .any(|event| matches_pattern(pattern, &normalized(event)));
        if !found {
            return strict(format!(
                "no event matching {} (in order) among the run's events",
                Value::Object(pattern.clone())
            ));
        }
    }
    None
}

/// An event with OpenDesign's `cached_*` usage spelling also readable as `cache_*`.
fn normalized(event: &Value) -> Value {
    let mut event = event.clone();
    if let Some(usage) = event.get_mut("usage").and_then(Value::as_object_mut) {
        for (theirs, ours) in [
            ("cached_read_tokens", "cache_read_tokens"),
            ("cached_write_tokens", "cache_write_tokens"),
        ] {
            if let Some(value) = usage.get(theirs).cloned() {
                usage.entry(ours).or_insert(value);
            }
        }
    }
    event
}

/// Each member of the pattern is in the event: objects as a subset (a host may add members),
/// everything else (the tool's `input` included) by equality.
fn matches_pattern(pattern: &Map<String, Value>, event: &Value) -> bool {
    pattern.iter().all(|(key, want)| match event.get(key) {
        None => false,
        Some(got) if key == "input" => got == want,
        Some(got) => subset(want, got),
    })
}

fn subset(want: &Value, got: &Value) -> bool {
    match (want, got) {
        (Value::Object(want), Value::Object(got)) => want
            .iter()
            .all(|(key, value)| got.get(key).is_some_and(|got| subset(value, got))),
        _ => want == got,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|name| name.to_string()).collect()
    }

    fn events(list: &[Value]) -> Vec<Value> {
        list.to_vec()
    }

    #[test]
    fn exact_sequence_passes_and_extra_members_are_allowed() {
        let got = events(&[
            json!({"type": "status", "label": "working", "sessionId": "s"}),
            json!({"type": "thinking_start"}),
            json!({"type": "thinking_delta", "delta": "a"}),
            json!({"type": "text_delta", "delta": "b"}),
            json!({"type": "thinking_end"}),
        ]);
        let want = names(&["status", "thinking_start", "thinking_delta", "text_delta"]);
        assert_eq!(compare_sequence(&want, &got), None);
    }

    #[test]
    fn one_thinking_start_per_run_is_informational() {
        let want = names(&[
            "status",
            "thinking_start",
            "thinking_delta",
            "text_delta",
            "thinking_start",
            "thinking_delta",
        ]);
        let got = events(&[
            json!({"type": "status"}),
            json!({"type": "thinking_start"}),
            json!({"type": "thinking_delta", "delta": "a"}),
            json!({"type": "text_delta", "delta": "b"}),
            json!({"type": "thinking_delta", "delta": "c"}),
        ]);
        let mismatch = compare_sequence(&want, &got).expect("differs");
        assert_eq!(mismatch.interpretation, Some(THINKING_START_ENTRY));
    }

    #[test]
    fn dropped_empty_delta_is_informational_but_a_dropped_real_one_fails() {
        let want = names(&[
            "status",
            "thinking_start",
            "thinking_delta:empty",
            "text_delta",
        ]);
        let dropped = events(&[
            json!({"type": "status"}),
            json!({"type": "thinking_start"}),
            json!({"type": "text_delta", "delta": "ok"}),
        ]);
        let mismatch = compare_sequence(&want, &dropped).expect("differs");
        assert_eq!(mismatch.interpretation, Some(EMPTY_DELTA_ENTRY));
        let relayed = events(&[
            json!({"type": "status"}),
            json!({"type": "thinking_start"}),
            json!({"type": "thinking_delta", "delta": ""}),
            json!({"type": "text_delta", "delta": "ok"}),
        ]);
        assert_eq!(compare_sequence(&want, &relayed), None);
        let lost_text = events(&[json!({"type": "status"}), json!({"type": "thinking_start"})]);
        let mismatch = compare_sequence(&want, &lost_text).expect("differs");
        assert_eq!(mismatch.interpretation, None);
    }

    #[test]
    fn a_delta_before_any_thinking_start_fails() {
        let want = names(&["status", "thinking_start", "thinking_delta"]);
        let got = events(&[
            json!({"type": "status"}),
            json!({"type": "thinking_delta", "delta": "a"}),
            json!({"type": "thinking_start"}),
        ]);
        let mismatch = compare_sequence(&want, &got).expect("differs");
        assert_eq!(mismatch.interpretation, None);
        assert!(mismatch.why.contains("no thinking_start before it"));
    }

    #[test]
    fn order_is_strict() {
        let want = names(&["status", "text_delta", "tool_use"]);
        let got = events(&[
            json!({"type": "status"}),
            json!({"type": "tool_use"}),
            json!({"type": "text_delta", "delta": "x"}),
        ]);
        assert_eq!(
            compare_sequence(&want, &got).map(|m| m.interpretation),
            Some(None)
        );
    }

    #[test]
    fn include_accepts_both_usage_spellings_and_extra_members() {
        let pattern =
            json!({"type": "usage", "usage": {"input_tokens": 3, "cache_read_tokens": 2}});
        let pattern = vec![pattern.as_object().unwrap().clone()];
        let opendesign = json!({"type": "usage", "provider": "p", "model": "m",
            "usage": {"input_tokens": 3, "output_tokens": 1, "cached_read_tokens": 2, "cached_write_tokens": 0, "total_tokens": 4}});
        assert_eq!(compare_include(&pattern, &[opendesign]), None);
        let wrong = json!({"type": "usage", "usage": {"input_tokens": 3, "cached_read_tokens": 9}});
        assert!(compare_include(&pattern, &[wrong]).is_some());
    }

    #[test]
    fn include_compares_tool_input_exactly_and_in_order() {
        let patterns: Vec<Map<String, Value>> = [
            json!({"type": "tool_use", "input": {"path": "a"}}),
            json!({"type": "text_delta", "delta": "x"}),
        ]
        .iter()
        .map(|p| p.as_object().unwrap().clone())
        .collect();
        let extra_input = json!({"type": "tool_use", "input": {"path": "a", "more": 1}});
        let text = json!({"type": "text_delta", "delta": "x"});
        assert!(compare_include(&patterns, &[extra_input, text.clone()]).is_some());
        let exact = json!({"type": "tool_use", "id": "c1", "input": {"path": "a"}});
        assert_eq!(
            compare_include(&patterns, &[exact.clone(), text.clone()]),
            None
        );
        assert!(compare_include(&patterns, &[text, exact]).is_some());
    }
}
