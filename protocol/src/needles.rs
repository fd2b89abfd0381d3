//! The encoded forms of a secret (a credential, a prompt) that redaction and leak scans look for
//! (spec 14: no credential or prompt in logs, stderr or argv), shared by the reference host's
//! redaction and the kit's scans so they agree on what counts as the secret.
//!
//! Besides the raw bytes: base64 (standard and URL-safe alphabets, each of the three alignments
//! the secret can take inside a longer encoded stream, so only the interior characters that do
//! not depend on neighbouring bytes are matched), percent-encoding of every byte or of all but
//! letters and digits (upper- and lower-case hex), JSON string escaping (`serde_json`'s and the all-`\uXXXX` form), and hex
//! (upper and lower case). Matching across write or frame boundaries is the caller's job (keep
//! a tail of [`longest`] bytes between chunks).

/// One encoded form: what it is (`base64`, `percent`, ...) and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Needle {
    pub encoding: &'static str,
    pub bytes: Vec<u8>,
}

/// Base64 forms shorter than this (interior characters) are dropped: they would match noise.
const MIN_BASE64_CHARS: usize = 8;

/// Every distinct encoded form of `secret`, the raw form first.
pub fn encoded_forms(secret: &str) -> Vec<Needle> {
    let raw = secret.as_bytes();
    let mut forms = vec![Needle {
        encoding: "raw",
        bytes: raw.to_vec(),
    }];
    let mut push = |encoding: &'static str, bytes: Vec<u8>| {
        if !bytes.is_empty() && !forms.iter().any(|form| form.bytes == bytes) {
            forms.push(Needle { encoding, bytes });
        }
    };
    for alphabet in [STANDARD, URL_SAFE] {
        for offset in 0..3 {
            push("base64", base64_interior(raw, offset, alphabet));
        }
    }
    let hex = |upper: bool| {
        raw.iter()
            .map(|byte| {
                if upper {
                    format!("{byte:02X}")
                } else {
                    format!("{byte:02x}")
                }
            })
            .collect::<String>()
    };
    for upper in [true, false] {
        for every_byte in [true, false] {
            push(
                "percent-encoded",
                percent(raw, upper, every_byte).into_bytes(),
            );
        }
    }
    push("JSON-escaped", json_escaped(secret).into_bytes());
    push("JSON-escaped", json_unicode_escaped(secret).into_bytes());
    push("hex", hex(false).into_bytes());
    push("hex", hex(true).into_bytes());
    forms
}

/// The longest form, for the tail a streaming scan keeps between chunks.
pub fn longest(forms: &[Needle]) -> usize {
    forms.iter().map(|form| form.bytes.len()).max().unwrap_or(0)
}

const STANDARD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL_SAFE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Standard base64 with padding (RFC 4648 section 4).
pub fn base64(bytes: &[u8]) -> String {
    let mut out: String = sextets(bytes, STANDARD)
        .into_iter()
        .map(char::from)
        .collect();
    while !out.len().is_multiple_of(4) {
        out.push('=');
    }
    out
}

/// The base64 characters of `bytes` in `alphabet`, without padding.
fn sextets(bytes: &[u8], alphabet: &[u8; 64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let triple = chunk.iter().enumerate().fold(0u32, |acc, (index, byte)| {
            acc | u32::from(*byte) << (16 - 8 * index)
        });
        for index in 0..=chunk.len() {
            out.push(alphabet[(triple >> (18 - 6 * index) & 0x3f) as usize]);
        }
    }
    out
}

/// The base64 characters of `raw` preceded by `offset` unknown bytes that depend on `raw` alone:
/// the partial first and last sextet groups are cut off.
fn base64_interior(raw: &[u8], offset: usize, alphabet: &[u8; 64]) -> Vec<u8> {
    let mut padded = vec![0u8; offset];
    padded.extend_from_slice(raw);
    let out = sextets(&padded, alphabet);
    // Characters before the secret's bits start, plus one mixing the prefix with the secret.
    let skip = (offset * 8).div_ceil(6);
    // The last character mixes the secret's final bits with what follows, unless aligned.
    let end_bits = (offset + raw.len()) * 8;
    let keep_end = end_bits / 6;
    let interior = out.get(skip..keep_end.min(out.len())).unwrap_or_default();
    if interior.len() < MIN_BASE64_CHARS {
        return Vec::new();
    }
    interior.to_vec()
}

/// Percent-encoding of every byte, or of every byte but ASCII letters and digits (what URL
/// encoders that also escape `-`, `.`, `_`, `~` produce).
fn percent(raw: &[u8], upper: bool, every_byte: bool) -> String {
    raw.iter()
        .map(|&byte| match () {
            _ if !every_byte && byte.is_ascii_alphanumeric() => (byte as char).to_string(),
            _ if upper => format!("%{byte:02X}"),
            _ => format!("%{byte:02x}"),
        })
        .collect()
}

/// The secret as it appears inside a JSON string written by `serde_json` (no quotes).
fn json_escaped(secret: &str) -> String {
    let quoted = serde_json::to_string(secret).expect("strings serialize");
    quoted[1..quoted.len() - 1].to_string()
}

/// The secret with every character written as `\uXXXX` (surrogate pairs above the BMP).
fn json_unicode_escaped(secret: &str) -> String {
    let mut units = [0u16; 2];
    secret
        .chars()
        .flat_map(|c| c.encode_utf16(&mut units).to_vec())
        .map(|unit| format!("\\u{unit:04x}"))
        .collect()
}

/// Whether any form occurs in `haystack`; the matching form's encoding.
pub fn find_any<'a>(haystack: &[u8], forms: &'a [Needle]) -> Option<&'a Needle> {
    forms.iter().find(|form| {
        !form.bytes.is_empty()
            && haystack.len() >= form.bytes.len()
            && haystack
                .windows(form.bytes.len())
                .any(|window| window == form.bytes.as_slice())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"\xff\xfe\x00x"), "//4AeA==");
    }

    #[test]
    fn base64_is_found_whatever_precedes_and_follows_the_secret() {
        let secret = "sk-canary-0123456789abcdef";
        let forms = encoded_forms(secret);
        for prefix in ["", "a", "ab", "abc", "Authorization: Bearer "] {
            for suffix in ["", "x", "xy"] {
                let encoded = base64(format!("{prefix}{secret}{suffix}").as_bytes());
                let hit = find_any(encoded.as_bytes(), &forms);
                assert_eq!(
                    hit.map(|form| form.encoding),
                    Some("base64"),
                    "{prefix:?}{suffix:?}"
                );
            }
        }
        assert!(find_any(base64(b"unrelated text here").as_bytes(), &forms).is_none());
    }

    #[test]
    fn percent_json_and_hex_forms_are_found() {
        let secret = "sk-canary \"é\"/1";
        let forms = encoded_forms(secret);
        let samples = [
            (
                "percent-encoded",
                "x=%73%6B%2D%63%61%6E%61%72%79%20%22%C3%A9%22%2F%31&".to_string(),
            ),
            (
                "percent-encoded",
                "x=%73%6b%2d%63%61%6e%61%72%79%20%22%c3%a9%22%2f%31&".to_string(),
            ),
            (
                "JSON-escaped",
                serde_json::json!({ "k": secret }).to_string(),
            ),
            (
                "JSON-escaped",
                secret
                    .encode_utf16()
                    .map(|u| format!("\\u{u:04x}"))
                    .collect::<String>(),
            ),
            (
                "hex",
                secret
                    .bytes()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>(),
            ),
            (
                "hex",
                secret
                    .bytes()
                    .map(|b| format!("{b:02X}"))
                    .collect::<String>(),
            ),
        ];
        for (encoding, text) in samples {
            let hit = find_any(text.as_bytes(), &forms);
            assert_eq!(hit.map(|form| form.encoding), Some(encoding), "{text}");
        }
        assert_eq!(
            longest(&forms),
            forms.iter().map(|f| f.bytes.len()).max().unwrap()
        );
    }
}
