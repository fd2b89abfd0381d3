//! What a JSON text costs once parsed into a `serde_json::Value`, estimated from the text in one
//! linear pass without parsing it, so a body whose parsed form would take far more memory than
//! its bytes (`{"a":0}` a million times: 8 MB of text, about 700 MB parsed) is refused before
//! it is parsed.
//!
//! The estimate follows `serde_json`'s layout (no `preserve_order`) and errs on the high side:
//! every value takes a 32-byte slot, an element of an array another 32 (a `Vec` grown by
//! doubling); an object's members live in B-tree nodes of up to eleven (one node, about 640
//! bytes, for its first member, and a share of one for each further member); a key or a string
//! takes its bytes (as written, escapes included) on the heap, with the allocator's 32-byte
//! minimum. The text need not be valid JSON: the estimate of a malformed text is still linear
//! and bounded by its length times a constant.

/// The slot every value takes.
const VALUE: usize = 32;
/// What a `Vec`'s spare capacity may add per element.
const ELEMENT_SLACK: usize = 32;
/// One B-tree node, taken by an object's first member.
const FIRST_MEMBER: usize = 640;
/// A further member's share of a node (nodes are at least half full) and its key's header.
const FURTHER_MEMBER: usize = 120;
/// The smallest heap allocation a non-empty string takes.
const MIN_ALLOCATION: usize = 32;
/// Nesting tracked exactly; deeper levels (which `serde_json` refuses past 128 anyway) are
/// costed as if each member were an object's first.
const MAX_TRACKED_DEPTH: usize = 256;

/// One open container: an object (and whether it has a member yet, and whether the next string
/// is a key) or an array.
#[derive(Clone, Copy)]
enum Open {
    Object { has_member: bool, expects_key: bool },
    Array,
}

/// The estimated bytes `serde_json::from_slice::<Value>(text)` would allocate; the scan stops as
/// soon as the estimate passes `limit` (returning a figure above it).
pub fn parsed_cost(text: &[u8], limit: usize) -> usize {
    let mut cost = 0usize;
    let mut open: Vec<Open> = Vec::new();
    let mut depth = 0usize;
    let mut previous = b'[';
    let mut at = 0;
    while at < text.len() && cost <= limit {
        let byte = text[at];
        at += 1;
        if byte.is_ascii_whitespace() {
            continue;
        }
        let untracked = depth > open.len();
        let top = if untracked { None } else { open.last_mut() };
        match byte {
            b'"' => {
                let start = at;
                at = string_end(text, at);
                let bytes = at.saturating_sub(start + 1);
                let heap = if bytes == 0 {
                    0
                } else {
                    bytes.max(MIN_ALLOCATION)
                };
                match top {
                    Some(Open::Object {
                        has_member,
                        expects_key,
                    }) if *expects_key => {
                        cost += heap
                            + if *has_member {
                                FURTHER_MEMBER
                            } else {
                                FIRST_MEMBER
                            };
                        *has_member = true;
                        *expects_key = false;
                    }
                    None if untracked => cost += heap + FIRST_MEMBER,
                    top => cost += heap + slot(top.as_deref()),
                }
            }
            b'{' | b'[' => {
                cost += slot(top.as_deref());
                depth += 1;
                if depth <= MAX_TRACKED_DEPTH {
                    open.push(if byte == b'{' {
                        Open::Object {
                            has_member: false,
                            expects_key: true,
                        }
                    } else {
                        Open::Array
                    });
                }
            }
            b'}' | b']' => {
                if !untracked {
                    open.pop();
                }
                depth = depth.saturating_sub(1);
            }
            b',' => {
                if let Some(Open::Object { expects_key, .. }) = top {
                    *expects_key = true;
                }
            }
            b':' => {}
            // The first byte of a number, `true`, `false` or `null`.
            _ if matches!(previous, b'[' | b',' | b':') => cost += slot(top.as_deref()),
            _ => {}
        }
        previous = byte;
    }
    cost
}

/// The slot of a value inside `container`.
fn slot(container: Option<&Open>) -> usize {
    match container {
        Some(Open::Array) => VALUE + ELEMENT_SLACK,
        _ => VALUE,
    }
}

/// The index just past the string's closing quote (or the text's end), given the index just
/// past its opening one.
fn string_end(text: &[u8], mut at: usize) -> usize {
    while at < text.len() {
        match text[at] {
            b'\\' => at += 2,
            b'"' => return at + 1,
            _ => at += 1,
        }
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_small_objects_cost_far_more_than_their_bytes_and_long_strings_about_their_bytes() {
        let objects = format!("[{}]", [r#"{"a":0}"#; 10_000].join(","));
        let cost = parsed_cost(objects.as_bytes(), usize::MAX);
        assert!(cost > 600 * 10_000, "{cost}");
        let long =
            serde_json::json!({ "messages": [{ "role": "user", "content": "x".repeat(1 << 20) }] })
                .to_string();
        let cost = parsed_cost(long.as_bytes(), usize::MAX);
        assert!(cost > 1 << 20 && cost < (1 << 20) + 4096, "{cost}");
    }

    #[test]
    fn keys_are_told_from_string_values_and_escaped_quotes_do_not_end_a_string() {
        let one_member = parsed_cost(br#"{"k":"v"}"#, usize::MAX);
        assert_eq!(one_member, 2 * VALUE + FIRST_MEMBER + 2 * MIN_ALLOCATION);
        let two_members = parsed_cost(br#"{"k":"v","l":"w"}"#, usize::MAX);
        assert_eq!(
            two_members,
            one_member + VALUE + FURTHER_MEMBER + 2 * MIN_ALLOCATION
        );
        let escaped = parsed_cost(br#"["a\"],[{{{{", 1]"#, usize::MAX);
        assert_eq!(
            escaped,
            VALUE + 2 * (VALUE + ELEMENT_SLACK) + MIN_ALLOCATION
        );
    }

    #[test]
    fn the_scan_stops_past_its_limit_and_deep_nesting_stays_linear() {
        let objects = format!("[{}]", [r#"{"a":0}"#; 100_000].join(","));
        let cost = parsed_cost(objects.as_bytes(), 1 << 20);
        assert!(cost > 1 << 20 && cost < (1 << 20) + 1024, "{cost}");
        let deep = "[".repeat(1_000_000);
        let cost = parsed_cost(deep.as_bytes(), usize::MAX);
        assert!(cost >= 1_000_000 * VALUE, "{cost}");
        assert_eq!(parsed_cost(b"", usize::MAX), 0);
        assert_eq!(
            parsed_cost(b"\"unterminated", usize::MAX),
            VALUE + MIN_ALLOCATION
        );
    }
}
