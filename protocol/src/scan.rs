//! The fast path of frame parsing: a scanner for the common shape of a frame line, one flat JSON
//! object whose members are strings, booleans, `null` or small non-negative integers.
//!
//! It never decides that a line is bad. It either recognises the line as a valid JSON object of
//! that shape and hands out its members (strings borrowed from the line unless they hold escapes,
//! keys checked for duplicates), or it declines with `None`, and the general parser
//! ([`crate::frames::RuntimeFrame::parse_str_general`]) reads the line and names what is wrong.
//! It declines, among others: nested objects and arrays, negative or fractional numbers, exponents,
//! integers of 20 digits or more, escaped keys, lone surrogate escapes, more than
//! [`MAX_MEMBERS`] members, and any byte JSON does not allow where it stands. So it can be no more
//! lenient than the general parser; `tests/it/fast_path.rs` checks that both agree, frame for
//! frame.

use serde::de::{self, Deserializer, Visitor};
use std::cell::Cell;

/// The most members the scanner handles; a line with more goes to the general parser.
pub const MAX_MEMBERS: usize = 12;

/// One member's value.
pub(crate) enum Scalar<'a> {
    /// A string without escapes, borrowed from the line.
    Str(&'a str),
    /// A string with escapes, decoded; the first read moves it out (a frame reads each member
    /// once), and a second read fails, which sends the line to the general parser.
    Escaped(Cell<Option<String>>),
    /// `true` and `false` are variants without payload: a one-byte payload beside the tag made
    /// every move of a member a partial-register copy that stalled store forwarding.
    /// `true` and `false` carry no payload beside the tag, so a member moves as whole words
    /// (a one-byte payload made every move a partial copy that stalled store forwarding).
    True,
    False,
    Null,
    UInt(u64),
}

/// The members of one scanned object, in order, keys unique.
pub(crate) struct Members<'a> {
    entries: [Option<(&'a str, Scalar<'a>)>; MAX_MEMBERS],
    len: usize,
}

impl<'a> Members<'a> {
    /// The value of member `name`, if present.
    pub(crate) fn get(&self, name: &str) -> Option<&Scalar<'a>> {
        self.entries[..self.len]
            .iter()
            .flatten()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value)
    }

    /// Adds a member; `None` when the key is a duplicate or there is no room.
    fn push(&mut self, key: &'a str, value: Scalar<'a>) -> Option<()> {
        if self.len == MAX_MEMBERS || self.get(key).is_some() {
            return None;
        }
        self.entries[self.len] = Some((key, value));
        self.len += 1;
        Some(())
    }
}

/// Scans `text` as one flat JSON object (see the module doc) and hands its members to `read`
/// (in place: the members never move); `None` when the scanner declines or `read` does.
pub(crate) fn object<'a, R>(
    text: &'a str,
    read: impl FnOnce(&Members<'a>) -> Option<R>,
) -> Option<R> {
    // Built entry by entry: an array literal of `None` became a 576-byte copy per line.
    let mut members = Members {
        entries: std::array::from_fn(|_| None),
        len: 0,
    };
    scan_into(text, &mut members)?;
    read(&members)
}

/// [`object`] without the reader, for the tests.
#[cfg(test)]
fn scan_object(text: &str) -> Option<Members<'_>> {
    let mut members = Members {
        entries: [const { None }; MAX_MEMBERS],
        len: 0,
    };
    scan_into(text, &mut members).map(|()| members)
}

/// Scans `text` into `members` (filled in place: they are large to move).
#[inline(always)]
fn scan_into<'a>(text: &'a str, members: &mut Members<'a>) -> Option<()> {
    let mut scanner = Scanner { text, at: 0 };
    scanner.skip_whitespace();
    scanner.expect(b'{')?;
    scanner.skip_whitespace();
    if scanner.peek() == Some(b'}') {
        scanner.at += 1;
    } else {
        loop {
            scanner.expect(b'"')?;
            let key = scanner.key()?;
            scanner.skip_whitespace();
            scanner.expect(b':')?;
            scanner.skip_whitespace();
            let value = scanner.value()?;
            members.push(key, value)?;
            scanner.skip_whitespace();
            match scanner.next()? {
                b',' => scanner.skip_whitespace(),
                b'}' => break,
                _ => return None,
            }
        }
    }
    scanner.skip_whitespace();
    (scanner.at == text.len()).then_some(())
}

struct Scanner<'a> {
    text: &'a str,
    at: usize,
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Bytes of `word` that are zero get their high bit set (exact up to the first one, which is all
/// the caller reads).
fn zero_bytes(word: u64) -> u64 {
    word.wrapping_sub(ONES) & !word & HIGHS
}

/// The offset of the first byte of `bytes` that ends a plain run of string content: `"`, `\` or
/// a control character (below 0x20). Eight bytes at a time.
fn string_stop(bytes: &[u8]) -> Option<usize> {
    let mut offset = 0;
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let word = u64::from_le_bytes(word.try_into().expect("chunks of eight"));
        let stops = zero_bytes(word ^ (ONES * u64::from(b'"')))
            | zero_bytes(word ^ (ONES * u64::from(b'\\')))
            | (word.wrapping_sub(ONES * 0x20) & !word & HIGHS);
        if stops != 0 {
            return Some(offset + stops.trailing_zeros() as usize / 8);
        }
        offset += 8;
    }
    let tail = words.remainder();
    tail.iter()
        .position(|&byte| byte == b'"' || byte == b'\\' || byte < 0x20)
        .map(|index| offset + index)
}

impl<'a> Scanner<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.at += 1;
        Some(byte)
    }

    fn expect(&mut self, wanted: u8) -> Option<()> {
        (self.next()? == wanted).then_some(())
    }

    /// JSON's whitespace: space, tab, line feed, carriage return.
    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// The rest of a key after its opening quote; keys with escapes are declined.
    fn key(&mut self) -> Option<&'a str> {
        let start = self.at;
        let stop = start + string_stop(&self.bytes()[start..])?;
        if self.bytes()[stop] != b'"' {
            return None;
        }
        self.at = stop + 1;
        Some(&self.text[start..stop])
    }

    fn value(&mut self) -> Option<Scalar<'a>> {
        match self.next()? {
            b'"' => self.string(),
            b't' => self.literal(b"rue", Scalar::True),
            b'f' => self.literal(b"alse", Scalar::False),
            b'n' => self.literal(b"ull", Scalar::Null),
            first @ b'0'..=b'9' => self.integer(first).map(Scalar::UInt),
            _ => None,
        }
    }

    fn literal(&mut self, rest: &[u8], value: Scalar<'a>) -> Option<Scalar<'a>> {
        let end = self.at + rest.len();
        (self.bytes().get(self.at..end)? == rest).then(|| {
            self.at = end;
            value
        })
    }

    /// A non-negative integer of at most 19 digits without fraction or exponent (`0` alone, or no
    /// leading zero); anything else is declined.
    fn integer(&mut self, first: u8) -> Option<u64> {
        let start = self.at - 1;
        while self.peek().is_some_and(|byte| byte.is_ascii_digit()) {
            self.at += 1;
        }
        let digits = &self.text[start..self.at];
        let leading_zero = first == b'0' && digits.len() > 1;
        let continues = matches!(self.peek(), Some(b'.' | b'e' | b'E'));
        if leading_zero || continues || digits.len() > 19 {
            return None;
        }
        digits.parse().ok()
    }

    /// The rest of a string after its opening quote, borrowed unless it holds escapes.
    fn string(&mut self) -> Option<Scalar<'a>> {
        let start = self.at;
        let stop = start + string_stop(&self.bytes()[start..])?;
        if self.bytes()[stop] == b'"' {
            self.at = stop + 1;
            return Some(Scalar::Str(&self.text[start..stop]));
        }
        // Room for the rest of the line (up to 4 KiB), so a string with escapes rarely regrows.
        let rest = (self.text.len() - start).min(4096);
        let mut owned = String::with_capacity(rest.max(stop - start + 16));
        owned.push_str(&self.text[start..stop]);
        self.at = stop;
        loop {
            match self.next()? {
                b'"' => return Some(Scalar::Escaped(Cell::new(Some(owned)))),
                b'\\' => owned.push(self.escape()?),
                byte if byte < 0x20 => return None,
                _ => {
                    let run = self.at - 1;
                    let stop = self.at + string_stop(&self.bytes()[self.at..])?;
                    owned.push_str(&self.text[run..stop]);
                    self.at = stop;
                }
            }
        }
    }

    /// The character of an escape after its backslash; a lone surrogate is declined.
    fn escape(&mut self) -> Option<char> {
        Some(match self.next()? {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let unit = self.hex4()?;
                if (0xD800..0xDC00).contains(&unit) {
                    self.expect(b'\\')?;
                    self.expect(b'u')?;
                    let low = self.hex4()?;
                    if !(0xDC00..0xE000).contains(&low) {
                        return None;
                    }
                    let scalar = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                    return char::from_u32(scalar);
                }
                return char::from_u32(unit);
            }
            _ => return None,
        })
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.bytes().get(self.at..self.at + 4)?;
        if !digits.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        self.at += 4;
        u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    }
}

/// Moves a decoded string out of its member; an error on the second read.
fn take(text: &Cell<Option<String>>) -> Result<String, serde_json::Error> {
    text.take()
        .ok_or_else(|| de::Error::custom("a member with escapes was read twice"))
}

/// Reads a [`Scalar`] through serde, the way `serde_json` reads the same JSON value, so the typed
/// extraction of [`crate::frames`] runs unchanged over scanned members (a string without escapes
/// is handed out borrowed from the line, as `serde_json` does).
pub(crate) struct ScalarDeserializer<'s, 'a>(pub(crate) &'s Scalar<'a>);

impl<'de> Deserializer<'de> for ScalarDeserializer<'_, 'de> {
    type Error = serde_json::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Scalar::Str(text) => visitor.visit_borrowed_str(text),
            Scalar::Escaped(text) => visitor.visit_string(take(text)?),
            Scalar::True => visitor.visit_bool(true),
            Scalar::False => visitor.visit_bool(false),
            Scalar::Null => visitor.visit_unit(),
            Scalar::UInt(value) => visitor.visit_u64(*value),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Scalar::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        let escaped;
        let text = match self.0 {
            Scalar::Str(text) => *text,
            Scalar::Escaped(text) => {
                escaped = take(text)?;
                escaped.as_str()
            }
            _ => return Err(de::Error::custom("an enum must be a string")),
        };
        visitor.visit_enum(de::value::StrDeserializer::<Self::Error>::new(text))
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit
        unit_struct newtype_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_stop_finds_the_first_special_byte_in_every_position() {
        for length in 0..20 {
            for position in 0..length {
                for special in [b'"', b'\\', 0x00, 0x1f] {
                    let mut bytes = vec![b'a'; length];
                    bytes[position] = special;
                    assert_eq!(string_stop(&bytes), Some(position), "{bytes:?}");
                }
            }
            assert_eq!(string_stop(&vec![0xC3; length]), None);
            assert_eq!(string_stop(&vec![0x7f; length]), None);
        }
    }

    #[test]
    fn scans_a_flat_object_borrowing_plain_strings() {
        let members = scan_object(
            r#" {"v":1,"type":"text","a":"x\ny\u00e9\ud83d\ude00","b":true,"c":null} "#,
        )
        .expect("a flat object");
        assert!(matches!(members.get("v"), Some(Scalar::UInt(1))));
        assert!(matches!(members.get("type"), Some(Scalar::Str("text"))));
        let Some(Scalar::Escaped(decoded)) = members.get("a") else {
            panic!("`a` holds escapes");
        };
        assert_eq!(decoded.take().as_deref(), Some("x\nyé😀"));
        assert!(matches!(members.get("b"), Some(Scalar::True)));
        assert!(matches!(members.get("c"), Some(Scalar::Null)));
        assert!(members.get("d").is_none());
    }

    #[test]
    fn an_escaped_member_read_twice_fails_the_second_time() {
        let members = scan_object(r#"{"a":"x\ty"}"#).expect("a flat object");
        let member = members.get("a").expect("present");
        assert_eq!(
            <String as serde::Deserialize>::deserialize(ScalarDeserializer(member)).ok(),
            Some("x\ty".to_string())
        );
        assert!(<String as serde::Deserialize>::deserialize(ScalarDeserializer(member)).is_err());
    }

    #[test]
    fn declines_what_it_does_not_handle_or_json_forbids() {
        for text in [
            r#"{"a":1,"a":2}"#,
            r#"{"a":1,}"#,
            r#"{"a":-1}"#,
            r#"{"a":1.5}"#,
            r#"{"a":1e3}"#,
            r#"{"a":01}"#,
            r#"{"a":12345678901234567890}"#,
            r#"{"a":{}}"#,
            r#"{"a":[]}"#,
            r#"{"\u0061":1}"#,
            r#"{"a":"\ud800"}"#,
            r#"{"a":"\udc00\ud800"}"#,
            r#"{"a":"\x"}"#,
            "{\"a\":\"\t\"}",
            r#"{"a":tru}"#,
            r#"{"a":1} x"#,
            r#"{"a" 1}"#,
            r#"[1]"#,
            "",
        ] {
            assert!(scan_object(text).is_none(), "{text}");
        }
    }
}
