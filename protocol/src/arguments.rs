//! The one definition of "JSON arguments" (`tool_call.arguments`, spec 6) that the strict checker
//! and the reference host share, so a call the checker accepts is one the host can parse.
//!
//! `arguments` holds one JSON document (RFC 8259) with three bounds a host parser must not
//! discover on its own: every number fits an IEEE double (`1e400` is rejected), every `\u`
//! escape forms a Unicode scalar value (a lone surrogate is rejected), and nesting is at most
//! [`MAX_ARGUMENTS_DEPTH`] arrays/objects deep. [`check`] validates without building a value
//! (the checker's hot path); [`parse`] builds it (the host); both run the same parser.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;

/// The deepest nesting of arrays and objects accepted inside `arguments`: serde_json's own
/// recursion limit (128, which stops at the 128th level), so the host's parser and the checker
/// agree by construction.
pub const MAX_ARGUMENTS_DEPTH: usize = 127;

/// Why a string is not acceptable JSON arguments; `Display` names the rule broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentsError {
    pub message: String,
}

impl fmt::Display for ArgumentsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ArgumentsError {}

impl From<serde_json::Error> for ArgumentsError {
    fn from(error: serde_json::Error) -> Self {
        let detail = crate::frames::strip_position(&error.to_string());
        let message = if detail.contains("recursion limit") {
            format!("nested deeper than {MAX_ARGUMENTS_DEPTH} arrays/objects")
        } else if detail.contains("number out of range") {
            "a number outside the IEEE double range (e.g. 1e400)".to_string()
        } else if detail.contains("surrogate") || detail.contains("end of hex escape") {
            format!("a lone surrogate escape ({detail})")
        } else {
            detail
        };
        ArgumentsError { message }
    }
}

/// Checks `text` against the rules without building a value.
pub fn check(text: &str) -> Result<(), ArgumentsError> {
    serde_json::from_str::<Checked>(text)?;
    Ok(())
}

/// Parses `text` as arguments (same acceptance as [`check`]).
pub fn parse(text: &str) -> Result<Value, ArgumentsError> {
    Ok(serde_json::from_str(text)?)
}

/// Visits every value like `serde_json::Value` would (numbers parsed, escapes decoded), keeping
/// nothing.
struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_unit<E: de::Error>(self) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        while map.next_key::<Checked>()?.is_some() {
            map.next_value::<Checked>()?;
        }
        Ok(Checked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_and_parse_agree_on_hostile_arguments() {
        let depth = MAX_ARGUMENTS_DEPTH;
        let deep_ok = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let one_more = format!("{{\"a\":{}{}}}", "[".repeat(depth), "]".repeat(depth));
        let too_deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let cases: [(&str, Option<&str>); 10] = [
            ("{\"path\":\"index.html\"}", None),
            ("[1.5e300, -0, 18446744073709551616]", None),
            ("\"\\ud83d\\ude00\"", None),
            (&deep_ok, None),
            ("1e400", Some("IEEE double")),
            ("{\"n\":-1e400}", Some("IEEE double")),
            ("\"\\ud800\"", Some("lone surrogate")),
            ("{\"k\\udc00\":1}", Some("lone surrogate")),
            (&one_more, Some("nested deeper than 127")),
            (&too_deep, Some("nested deeper than 127")),
        ];
        for (text, rejected) in cases {
            let checked = check(text);
            let parsed = parse(text);
            assert_eq!(checked.is_ok(), parsed.is_ok(), "{text:.40}");
            match rejected {
                None => assert!(checked.is_ok(), "{text:.40}: {checked:?}"),
                Some(rule) => {
                    let message = checked.expect_err("rejected").message;
                    assert!(message.contains(rule), "{text:.40}: {message}");
                    assert_eq!(parsed.expect_err("rejected").message, message);
                }
            }
        }
    }
}
