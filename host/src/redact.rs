//! Redaction of text the host keeps or logs: the turn's prompt and bootstrap, and the value of
//! every environment variable whose name looks like a credential, become `[redacted]`, raw or in
//! any of the common encodings (base64, percent, JSON escapes, hex).

/// What a redacted secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// Credential values shorter than this are not treated as secrets (they would redact noise).
const MIN_SECRET_CHARS: usize = 6;
/// Prompt lines shorter than this are not redacted on their own (the whole prompt still is).
const MIN_PROMPT_LINE_CHARS: usize = 16;

/// Whether an environment variable's name looks like it holds a credential.
pub fn looks_like_credential(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    const SUFFIXES: &[&str] = &[
        "KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "PWD",
        "CREDENTIAL",
        "CREDENTIALS",
        "AUTH",
        "COOKIE",
    ];
    const INFIXES: &[&str] = &[
        "API_KEY",
        "APIKEY",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "TOKEN",
        "CREDENTIAL",
        "PRIVATE_KEY",
    ];
    let suffix = SUFFIXES
        .iter()
        .any(|suffix| name == *suffix || name.ends_with(&format!("_{suffix}")));
    // `PWD` alone is the shell's working directory, not a password.
    (suffix && name != "PWD" && name != "OLDPWD")
        || INFIXES.iter().any(|infix| name.contains(infix))
}

/// A set of secret strings to remove from text.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so a secret containing another is replaced whole.
    needles: Vec<String>,
}

impl Redactor {
    /// Redact the credential-looking variables of this process's environment.
    pub fn from_process_env() -> Self {
        let mut redactor = Self::default();
        redactor.add_credentials(std::env::vars_os().filter_map(|(name, value)| {
            Some((name.into_string().ok()?, value.into_string().ok()?))
        }));
        redactor
    }

    /// Add the values of those `(name, value)` pairs whose name looks like a credential.
    pub fn add_credentials(&mut self, vars: impl IntoIterator<Item = (String, String)>) {
        for (name, value) in vars {
            if looks_like_credential(&name) && value.trim().chars().count() >= MIN_SECRET_CHARS {
                self.add_secret(value.trim());
            }
        }
    }

    /// Add prompt text: the whole text, and each long enough line of it.
    pub fn add_prompt(&mut self, prompt: &str) {
        if prompt.trim().is_empty() {
            return;
        }
        self.add_secret(prompt);
        for line in prompt.lines().map(str::trim) {
            if line.chars().count() >= MIN_PROMPT_LINE_CHARS {
                self.add_secret(line);
            }
        }
    }

    /// Add one string, with its encoded forms (base64 in any alignment, percent-encoding, JSON
    /// escapes, hex: `dsh_protocol::needles`, the forms the conformance kit scans for).
    pub fn add_secret(&mut self, secret: &str) {
        if secret.is_empty() {
            return;
        }
        for form in dsh_protocol::needles::encoded_forms(secret) {
            let Ok(form) = String::from_utf8(form.bytes) else {
                continue;
            };
            if !self.needles.contains(&form) {
                self.needles.push(form);
            }
        }
        self.needles
            .sort_by_key(|needle| std::cmp::Reverse(needle.len()));
    }

    /// The longest secret, in bytes: how much slack a bounded buffer needs so that a secret
    /// straddling its cut is still seen whole.
    pub fn longest_secret(&self) -> usize {
        self.needles.first().map_or(0, String::len)
    }

    pub fn redact(&self, text: &str) -> String {
        let mut text = text.to_string();
        for needle in &self.needles {
            if text.contains(needle.as_str()) {
                text = text.replace(needle.as_str(), REDACTED);
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names() {
        for name in [
            "DEEPSEEK_API_KEY",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "my_api_key",
            "NPM_AUTH",
        ] {
            assert!(looks_like_credential(name), "{name}");
        }
        for name in ["PATH", "HOME", "DSH_HOME", "PWD", "KEYBOARD_LAYOUT", "TERM"] {
            assert!(!looks_like_credential(name), "{name}");
        }
    }

    #[test]
    fn redacts_credentials_and_prompt_lines() {
        let mut redactor = Redactor::default();
        redactor.add_credentials([
            (
                "DEEPSEEK_API_KEY".to_string(),
                "sk-canary-123456".to_string(),
            ),
            ("SHORT_KEY".to_string(), "1".to_string()),
            ("PATH".to_string(), "/usr/bin".to_string()),
        ]);
        redactor.add_prompt("Create a landing page for the bakery\nok");
        let text =
            "key=sk-canary-123456 path=/usr/bin 1 echo: Create a landing page for the bakery";
        assert_eq!(
            redactor.redact(text),
            "key=[redacted] path=/usr/bin 1 echo: [redacted]"
        );
        assert_eq!(
            redactor.longest_secret(),
            "Create a landing page for the bakery\nok".len() * 6,
            "the all-\\u escaped form of the prompt is the longest"
        );
    }

    #[test]
    fn encoded_credentials_are_redacted() {
        let mut redactor = Redactor::default();
        redactor.add_secret("sk-canary-123456");
        for text in [
            "auth=c2stY2FuYXJ5LTEyMzQ1Ng==",
            "url=sk%2Dcanary%2D123456&x",
            "hex=736b2d63616e6172792d313233343536",
        ] {
            let redacted = redactor.redact(text);
            assert!(redacted.contains(REDACTED), "{text} -> {redacted}");
        }
    }
}
