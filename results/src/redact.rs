//! Redaction of secrets and prompt text from strings that leave a recording: credential-named
//! environment values, well-known token shapes (`sk-...`), and whole occurrences of the prompts
//! (and their long lines), each also in its common encodings and, for prompts, re-cased.

/// What replaces a credential.
pub const REDACTED: &str = "[redacted]";
/// What replaces prompt text.
pub const PROMPT_PLACEHOLDER: &str = "[recorded prompt]";
/// Environment values shorter than this are not treated as secrets (too many false hits).
const MIN_SECRET_CHARS: usize = 8;

/// Whether an environment variable's name says it holds a credential.
pub fn is_credential_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"]
        .iter()
        .any(|word| upper.contains(word))
}

/// The credential-looking values of the current environment, longest first.
pub fn credential_values_from_env() -> Vec<String> {
    let mut values: Vec<String> = std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .filter(|(name, value)| {
            is_credential_name(name) && value.chars().count() >= MIN_SECRET_CHARS
        })
        .map(|(_, value)| value)
        .collect();
    values.sort_by_key(|value| std::cmp::Reverse(value.len()));
    values.dedup();
    values
}

/// Token prefixes whose following run of token characters is a credential.
const TOKEN_PREFIXES: &[(&str, usize)] = &[
    ("sk-", 16),
    ("ghp_", 20),
    ("gho_", 20),
    ("ghs_", 20),
    ("github_pat_", 20),
    ("xoxb-", 10),
    ("xoxp-", 10),
    ("AKIA", 16),
];

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '_'
}

/// The byte ranges of token-shaped credentials in `text` (what [`redact_token_shapes`] replaces).
fn token_shape_ranges(text: &str) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    for (prefix, min_len) in TOKEN_PREFIXES {
        for (at, _) in text.match_indices(prefix) {
            let starts_word = text[..at]
                .chars()
                .next_back()
                .is_none_or(|c| !is_token_char(c));
            let after = &text[at + prefix.len()..];
            let run = after
                .find(|c: char| !is_token_char(c))
                .unwrap_or(after.len());
            if starts_word && run >= *min_len {
                ranges.push((at, at + prefix.len() + run));
            }
        }
    }
    ranges
}

/// Replace token-shaped credentials (`sk-` followed by 16+ token characters, and the like).
pub fn redact_token_shapes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'scan: while !rest.is_empty() {
        for (prefix, min_len) in TOKEN_PREFIXES {
            if let Some(after) = rest.strip_prefix(prefix) {
                let starts_word = out.chars().next_back().is_none_or(|c| !is_token_char(c));
                let run = after
                    .find(|c: char| !is_token_char(c))
                    .unwrap_or(after.len());
                if starts_word && run >= *min_len {
                    out.push_str(REDACTED);
                    rest = &after[run..];
                    continue 'scan;
                }
            }
        }
        let next = rest.chars().next().expect("rest is not empty");
        out.push(next);
        rest = &rest[next.len_utf8()..];
    }
    out
}

/// The token-shaped credentials (see [`redact_token_shapes`]) in `text`, as they are written.
pub fn token_shapes(text: &str) -> Vec<String> {
    let mut found: Vec<String> = token_shape_ranges(text)
        .into_iter()
        .map(|(from, to)| text[from..to].to_string())
        .collect();
    found.sort();
    found.dedup();
    found
}

/// Base64 runs shorter than this many characters are not decoded: the shortest token shape
/// (`xoxb-` and 10 characters) takes 20.
const MIN_BASE64_RUN: usize = 20;

/// The sextet of a base64 character in either alphabet (standard `+/`, URL-safe `-_`).
fn sextet(byte: u8) -> Option<u32> {
    Some(match byte {
        b'A'..=b'Z' => byte - b'A',
        b'a'..=b'z' => byte - b'a' + 26,
        b'0'..=b'9' => byte - b'0' + 52,
        b'+' | b'-' => 62,
        b'/' | b'_' => 63,
        _ => return None,
    } as u32)
}

/// The bytes base64 `chars` (sextets only, no padding) decode to; a last group of 2 or 3
/// characters gives 1 or 2 bytes, a lone last character nothing.
fn decode_sextets(chars: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(chars.len() / 4 * 3 + 2);
    for group in chars.chunks(4) {
        let bits = group.iter().enumerate().fold(0u32, |acc, (index, c)| {
            acc | sextet(*c).unwrap_or(0) << (18 - 6 * index)
        });
        for index in 0..group.len().saturating_sub(1) {
            out.push((bits >> (16 - 8 * index) & 0xff) as u8);
        }
    }
    out
}

/// Token-shaped credentials written in base64 in `text` (a key that is in no environment the
/// converter sees, encoded by whoever wrote it): every run of [`MIN_BASE64_RUN`]+ base64
/// characters, of either alphabet, is decoded at each of its four alignments (the encoding may
/// start anywhere in the run) and searched for token shapes. The tokens are returned decoded:
/// give them to [`Redactor::add_secret`], whose encoded forms then find them where they are.
pub fn token_shapes_in_base64(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if sextet(bytes[at]).is_none() {
            at += 1;
            continue;
        }
        let end = bytes[at..]
            .iter()
            .position(|b| sextet(*b).is_none())
            .map_or(bytes.len(), |length| at + length);
        if end - at >= MIN_BASE64_RUN {
            for offset in 0..4 {
                let decoded = decode_sextets(&bytes[at + offset..end]);
                found.extend(token_shapes(&String::from_utf8_lossy(&decoded)));
            }
        }
        at = end;
    }
    found.sort();
    found.dedup();
    found
}

/// Redacts one recording: known secret values, token shapes, and the prompts' text, each in its
/// common encodings too (`dsh_protocol::needles`: base64, percent, JSON escapes, hex).
#[derive(Debug, Default)]
pub struct Redactor {
    /// Every form of every secret, longest first.
    secrets: Vec<String>,
    /// Every form of every prompt (and of its long lines), longest first; matched ignoring
    /// ASCII case, since a runtime may echo a prompt re-cased.
    prompts: Vec<String>,
}

/// Prompt lines this long (in characters) or longer are replaced on their own as well.
const MIN_PROMPT_LINE_CHARS: usize = 16;

/// Adds every encoded form of `text` to `forms`, keeping it sorted longest first.
fn add_forms(forms: &mut Vec<String>, text: &str) {
    for form in dsh_protocol::needles::encoded_forms(text) {
        if let Ok(form) = String::from_utf8(form.bytes) {
            if !forms.contains(&form) {
                forms.push(form);
            }
        }
    }
    forms.sort_by_key(|form| std::cmp::Reverse(form.len()));
}

/// `text` with every occurrence of `needle`, compared ignoring ASCII case, replaced. Matches
/// start on character boundaries (a UTF-8 lead byte only equals itself).
fn replace_ignoring_ascii_case(text: &str, needle: &str, with: &str) -> String {
    let (hay, pattern) = (text.as_bytes(), needle.as_bytes());
    if pattern.is_empty() || hay.len() < pattern.len() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let (mut copied, mut at) = (0, 0);
    while at + pattern.len() <= hay.len() {
        if hay[at..at + pattern.len()].eq_ignore_ascii_case(pattern) {
            out.push_str(&text[copied..at]);
            out.push_str(with);
            at += pattern.len();
            copied = at;
        } else {
            at += 1;
        }
    }
    out.push_str(&text[copied..]);
    out
}

impl Redactor {
    pub fn new(secrets: Vec<String>) -> Self {
        let mut redactor = Self::default();
        for secret in secrets {
            add_forms(&mut redactor.secrets, &secret);
        }
        redactor
    }

    /// Redacts `secret` from now on too, raw and encoded (a credential found in the recording
    /// itself rather than in the environment).
    pub fn add_secret(&mut self, secret: &str) {
        if secret.chars().count() >= MIN_SECRET_CHARS {
            add_forms(&mut self.secrets, secret);
        }
    }

    /// Every whole occurrence of `prompt` (and of each of its lines of 16+ characters) is
    /// replaced from now on, raw, re-cased or encoded; text the output merely shares with the
    /// prompt (a 12-character run) is kept.
    pub fn add_prompt(&mut self, prompt: &str) {
        if prompt.trim().is_empty() {
            return;
        }
        add_forms(&mut self.prompts, prompt);
        for line in prompt.lines().map(str::trim) {
            if line.chars().count() >= MIN_PROMPT_LINE_CHARS {
                add_forms(&mut self.prompts, line);
            }
        }
    }

    /// Secrets first (so a secret inside a prompt is never half-kept), then prompt text.
    pub fn redact(&self, text: &str) -> String {
        let mut text = text.to_string();
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), REDACTED);
            }
        }
        let mut text = redact_token_shapes(&text);
        for prompt in &self.prompts {
            text = replace_ignoring_ascii_case(&text, prompt, PROMPT_PLACEHOLDER);
        }
        text
    }

    /// Redacts a run of consecutive pieces of one stream (the `content` of adjacent `text`
    /// frames): a secret, token or prompt split across two or more pieces is cut out of each of
    /// them (the piece where it starts gets the placeholder), then each piece is redacted on its
    /// own. The number of pieces never changes.
    pub fn redact_pieces(&self, pieces: &[String]) -> Vec<String> {
        let joined: String = pieces.concat();
        let mut starts = Vec::with_capacity(pieces.len());
        let mut at = 0;
        for piece in pieces {
            starts.push(at);
            at += piece.len();
        }
        let piece_of = |offset: usize| starts.partition_point(|start| *start <= offset) - 1;
        let crossing: Vec<(usize, usize, &str)> = self
            .match_ranges(&joined)
            .into_iter()
            .filter(|(from, to, _)| *to > *from && piece_of(*from) != piece_of(to - 1))
            .collect();
        let mut out: Vec<String> = Vec::with_capacity(pieces.len());
        for (index, piece) in pieces.iter().enumerate() {
            let (begin, end) = (starts[index], starts[index] + piece.len());
            let mut kept = String::new();
            let mut cursor = begin;
            for (match_from, match_to, placeholder) in &crossing {
                let (from, to) = ((*match_from).max(begin), (*match_to).min(end));
                if from >= to || from < cursor {
                    continue;
                }
                kept.push_str(joined.get(cursor..from).unwrap_or(""));
                // Only the piece where the match starts says so; later pieces just lose their part.
                if *match_from >= begin {
                    kept.push_str(placeholder);
                }
                cursor = to;
            }
            kept.push_str(joined.get(cursor..end).unwrap_or(""));
            out.push(self.redact(&kept));
        }
        out
    }

    /// Byte ranges of `text` that [`Redactor::redact`] would replace, with their placeholder.
    fn match_ranges(&self, text: &str) -> Vec<(usize, usize, &'static str)> {
        let mut ranges = Vec::new();
        for secret in &self.secrets {
            for (at, _) in text.match_indices(secret.as_str()) {
                ranges.push((at, at + secret.len(), REDACTED));
            }
        }
        ranges.extend(
            token_shape_ranges(text)
                .into_iter()
                .map(|(from, to)| (from, to, REDACTED)),
        );
        let lower = text.to_ascii_lowercase();
        for prompt in &self.prompts {
            let prompt = prompt.to_ascii_lowercase();
            for (at, _) in lower.match_indices(prompt.as_str()) {
                ranges.push((at, at + prompt.len(), PROMPT_PLACEHOLDER));
            }
        }
        ranges.sort_unstable();
        let mut merged: Vec<(usize, usize, &'static str)> = Vec::new();
        for range in ranges {
            match merged.last_mut() {
                Some(last) if range.0 < last.1 => last.1 = last.1.max(range.1),
                _ => merged.push(range),
            }
        }
        merged
    }

    /// Redact every string (keys included) inside a JSON value.
    pub fn redact_json(&self, value: &serde_json::Value) -> serde_json::Value {
        map_strings(value, &|text| self.redact(text))
    }
}

/// A copy of a JSON value with `rewrite` applied to every string in it, object keys included.
pub fn map_strings(
    value: &serde_json::Value,
    rewrite: &dyn Fn(&str) -> String,
) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(text) => Value::String(rewrite(text)),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| map_strings(item, rewrite))
                .collect(),
        ),
        Value::Object(members) => Value::Object(
            members
                .iter()
                .map(|(key, item)| (rewrite(key), map_strings(item, rewrite)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names() {
        assert!(is_credential_name("DEEPSEEK_API_KEY"));
        assert!(is_credential_name("github_token"));
        assert!(is_credential_name("MY_SECRET"));
        assert!(!is_credential_name("PATH"));
    }

    #[test]
    fn token_shapes_are_redacted_whole() {
        assert_eq!(
            redact_token_shapes("key=sk-abcdefghijklmnop1234 rest"),
            "key=[redacted] rest"
        );
        assert_eq!(redact_token_shapes("task-sk-short"), "task-sk-short");
        assert_eq!(
            redact_token_shapes("a desk-abcdefghijklmnopqrstuv"),
            "a desk-abcdefghijklmnopqrstuv"
        );
        assert_eq!(redact_token_shapes("ünïcode sk-"), "ünïcode sk-");
    }

    #[test]
    fn a_secret_or_token_split_across_pieces_is_cut_from_each() {
        let redactor = Redactor::new(vec!["hunter2-very-secret".to_string()]);
        let pieces = |parts: &[&str]| parts.iter().map(|p| p.to_string()).collect::<Vec<_>>();
        assert_eq!(
            redactor.redact_pieces(&pieces(&["pw hunter2-", "very-", "secret! ok"])),
            ["pw [redacted]", "", "! ok"]
        );
        assert_eq!(
            redactor.redact_pieces(&pieces(&["key sk-abcdefgh", "ijklmnop1234 done"])),
            ["key [redacted]", " done"]
        );
        let joined: String = redactor
            .redact_pieces(&pieces(&["a sk-", "abcdefghijklmnopqrst", "uvw b"]))
            .concat();
        assert_eq!(joined, "a [redacted] b");
        // Nothing split: each piece is redacted on its own, unchanged count.
        assert_eq!(
            redactor.redact_pieces(&pieces(&["plain", "hunter2-very-secret"])),
            ["plain", "[redacted]"]
        );
        let mut prompts = Redactor::default();
        prompts.add_prompt("Create a landing page for the roastery");
        assert_eq!(
            prompts
                .redact_pieces(&pieces(&[
                    "You said: create a LANDING",
                    " page for the roastery."
                ]))
                .concat(),
            format!("You said: {PROMPT_PLACEHOLDER}.")
        );
    }

    #[test]
    fn a_token_in_base64_is_found_at_any_alignment_and_then_redacted() {
        let token = "sk-sdkCanary0123456789abcdefghij";
        for prefix in ["", " ", "a ", "Bearer "] {
            let encoded = dsh_protocol::needles::base64(format!("{prefix}{token}").as_bytes());
            let url_safe = encoded.replace('/', "_").replace('+', "-");
            let text = format!("auth: {encoded}; url-safe: {url_safe}");
            assert_eq!(token_shapes_in_base64(&text), [token], "{prefix:?}: {text}");
            let mut redactor = Redactor::default();
            for found in token_shapes_in_base64(&text) {
                redactor.add_secret(&found);
            }
            let redacted = redactor.redact(&text);
            assert!(redacted.contains(REDACTED), "{prefix:?}: {redacted}");
            assert!(
                token_shapes_in_base64(&redacted).is_empty(),
                "{prefix:?}: {redacted}"
            );
        }
        assert!(token_shapes_in_base64("plain words and c2hvcnQ= base64").is_empty());
        assert_eq!(
            token_shapes("a sk-abcdefghijklmnop1234 b sk-short"),
            ["sk-abcdefghijklmnop1234"]
        );
    }

    #[test]
    fn secrets_from_values_are_redacted() {
        let redactor = Redactor::new(vec!["hunter2-very-secret".to_string()]);
        assert_eq!(redactor.redact("pw hunter2-very-secret!"), "pw [redacted]!");
    }

    #[test]
    fn whole_prompts_are_redacted_raw_recased_and_encoded() {
        let prompt = "Create a landing page about CANARY-1234-abcd for me";
        let mut redactor = Redactor::default();
        redactor.add_prompt(prompt);
        assert_eq!(redactor.redact(prompt), PROMPT_PLACEHOLDER);
        let escaped = serde_json::to_string(&format!("say \"{prompt}\"\n")).unwrap();
        for text in [
            format!("You said: {}", prompt.to_uppercase()),
            escaped.replace("CANARY", "canary"),
            format!("b64 {}", dsh_protocol::needles::base64(prompt.as_bytes())),
        ] {
            let redacted = redactor.redact(&text);
            assert!(
                redacted.contains(PROMPT_PLACEHOLDER),
                "{text} -> {redacted}"
            );
            assert!(
                !redacted.to_lowercase().contains("canary-1234"),
                "{redacted}"
            );
        }
        // Output that only shares a 12-character run with the prompt is not mangled.
        let html = "<h1>A landing page about our bakery</h1>";
        assert_eq!(redactor.redact(html), html);
        assert_eq!(
            redactor.redact("unrelated text here"),
            "unrelated text here"
        );
    }

    #[test]
    fn encoded_secrets_are_redacted() {
        let redactor = Redactor::new(vec!["hunter2-very-secret".to_string()]);
        for text in [
            "pw=hunter2%2Dvery%2Dsecret".to_string(),
            format!(
                "auth {}",
                dsh_protocol::needles::base64(b"hunter2-very-secret")
            ),
            "68756e746572322d766572792d736563726574".to_string(),
        ] {
            assert!(redactor.redact(&text).contains(REDACTED), "{text}");
        }
    }

    #[test]
    fn json_strings_and_keys_are_redacted() {
        let redactor = Redactor::new(vec!["abcdefgh12345".to_string()]);
        let value = serde_json::json!({"abcdefgh12345": ["x abcdefgh12345", 3]});
        assert_eq!(
            redactor.redact_json(&value),
            serde_json::json!({"[redacted]": ["x [redacted]", 3]})
        );
    }
}
