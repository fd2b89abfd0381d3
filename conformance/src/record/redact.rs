//! Redaction of secrets and prompt text from strings that leave a recording: credential-named
//! environment values, well-known token shapes (`sk-...`), and any long run of prompt text.

use std::collections::HashSet;

/// What replaces a credential.
pub const REDACTED: &str = "[redacted]";
/// What replaces prompt text.
pub const PROMPT_PLACEHOLDER: &str = "[recorded prompt]";
/// Runs of prompt text this long (in characters) or longer are replaced.
const PROMPT_GRAM_CHARS: usize = 12;
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

/// Redacts one recording: known secret values, token shapes, and the prompts' text.
#[derive(Debug, Default)]
pub struct Redactor {
    secrets: Vec<String>,
    prompts: Vec<String>,
    grams: HashSet<Vec<char>>,
}

impl Redactor {
    pub fn new(secrets: Vec<String>) -> Self {
        Self {
            secrets,
            ..Self::default()
        }
    }

    /// Everything of `prompt` (its whole text and every run of 12+ characters of it with some
    /// letters or digits) is replaced from now on.
    pub fn add_prompt(&mut self, prompt: &str) {
        if prompt.trim().is_empty() {
            return;
        }
        self.prompts.push(prompt.to_string());
        self.prompts
            .sort_by_key(|prompt| std::cmp::Reverse(prompt.len()));
        let chars: Vec<char> = prompt.chars().collect();
        for gram in chars.windows(PROMPT_GRAM_CHARS) {
            if gram.iter().filter(|c| c.is_alphanumeric()).count() >= 4 {
                self.grams.insert(gram.to_vec());
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
        let text = redact_token_shapes(&text);
        self.redact_prompt_text(&text)
    }

    fn redact_prompt_text(&self, text: &str) -> String {
        let mut text = text.to_string();
        for prompt in &self.prompts {
            if text.contains(prompt.as_str()) {
                text = text.replace(prompt.as_str(), PROMPT_PLACEHOLDER);
            }
        }
        if self.grams.is_empty() {
            return text;
        }
        let chars: Vec<char> = text.chars().collect();
        if chars.len() < PROMPT_GRAM_CHARS {
            return text;
        }
        let mut covered = vec![false; chars.len()];
        let mut any = false;
        for (start, gram) in chars.windows(PROMPT_GRAM_CHARS).enumerate() {
            if self.grams.contains(gram) {
                covered[start..start + PROMPT_GRAM_CHARS]
                    .iter_mut()
                    .for_each(|c| *c = true);
                any = true;
            }
        }
        if !any {
            return text;
        }
        let mut out = String::with_capacity(text.len());
        let mut index = 0;
        while index < chars.len() {
            if covered[index] {
                out.push_str(PROMPT_PLACEHOLDER);
                while index < chars.len() && covered[index] {
                    index += 1;
                }
            } else {
                out.push(chars[index]);
                index += 1;
            }
        }
        out
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
    fn secrets_from_values_are_redacted() {
        let redactor = Redactor::new(vec!["hunter2-very-secret".to_string()]);
        assert_eq!(redactor.redact("pw hunter2-very-secret!"), "pw [redacted]!");
    }

    #[test]
    fn prompt_fragments_are_redacted() {
        let mut redactor = Redactor::default();
        redactor.add_prompt("Create a landing page about CANARY-1234-abcd for me");
        assert_eq!(
            redactor.redact("Create a landing page about CANARY-1234-abcd for me"),
            PROMPT_PLACEHOLDER
        );
        let html = redactor.redact("<h1>landing page about CANARY-1234-abcd</h1>");
        assert!(!html.contains("CANARY"), "{html}");
        assert!(html.starts_with("<h1>"), "{html}");
        assert_eq!(
            redactor.redact("unrelated text here"),
            "unrelated text here"
        );
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
