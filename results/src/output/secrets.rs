//! Redacting a host command line before the kit echoes it anywhere (the header line, transcripts,
//! the pre-flight error, JUnit, Markdown, `report.json`): a credential given on the command line
//! must not land in a CI log or an uploaded artifact. The driver itself still gets the words as
//! written.
//!
//! Replaced by `[redacted]`: the value of `NAME=value` when `NAME` says it holds a credential
//! (`*KEY*`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*PASSWD*`, `*CREDENTIAL*`, see
//! [`is_credential_name`]); the value of `--flag=value` and of `--flag value` when the flag's
//! name says so (`--api-key`, `--token`, `--password`, ...); the password of a URL's
//! `user:password@`; and well-known token shapes (`sk-...`, `ghp_...`, `AKIA...`). The same
//! rules apply inside one word holding a whole shell line (`sh -c "API_TOKEN=x node d.mjs"`).

use crate::redact::{is_credential_name, redact_token_shapes, REDACTED};

/// The command line with every credential-looking value replaced (see the module doc).
pub fn redact_command(words: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(words.len());
    let mut value_follows = false;
    for word in words {
        if value_follows && !word.starts_with('-') {
            out.push(REDACTED.to_string());
            value_follows = false;
            continue;
        }
        value_follows = is_credential_flag(word);
        let redacted = if word.chars().any(char::is_whitespace) {
            redact_line(word)
        } else {
            redact_piece(word)
        };
        out.push(redacted);
    }
    out
}

/// The command line as the kit shows it: redacted, then joined as a shell would read it.
pub fn display_command(words: &[String]) -> String {
    super::escape::shell_join(&redact_command(words))
}

/// [`redact_command`] of the words of a shell line, keeping its spacing and quotes.
fn redact_line(line: &str) -> String {
    let pieces = shell_pieces(line);
    let mut out = String::with_capacity(line.len());
    let mut value_follows = false;
    for (separator, piece) in pieces {
        out.push_str(separator);
        if value_follows && !piece.is_empty() && !piece.starts_with('-') {
            out.push_str(REDACTED);
            value_follows = false;
            continue;
        }
        value_follows = is_credential_flag(piece);
        out.push_str(&redact_piece(piece));
    }
    out
}

/// Splits a shell line into (whitespace before, word) pairs; a quoted run (`'a b'`, `"a b"`)
/// stays inside its word. The pieces joined give the line back.
fn shell_pieces(line: &str) -> Vec<(&str, &str)> {
    let mut pieces = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        let word_start = rest
            .find(|c: char| !c.is_whitespace())
            .unwrap_or(rest.len());
        let (separator, after) = rest.split_at(word_start);
        let mut quote = None;
        let mut end = after.len();
        for (at, c) in after.char_indices() {
            match quote {
                Some(open) if c == open => quote = None,
                Some(_) => {}
                None if c == '\'' || c == '"' => quote = Some(c),
                None if c.is_whitespace() => {
                    end = at;
                    break;
                }
                None => {}
            }
        }
        pieces.push((separator, &after[..end]));
        rest = &after[end..];
    }
    pieces
}

/// One word: `NAME=secret`, `--flag=secret`, a URL's password, token shapes.
fn redact_piece(word: &str) -> String {
    let word = redact_token_shapes(word);
    if let Some((name, _)) = word.split_once('=') {
        let flag_name = name.trim_start_matches('-');
        if !flag_name.is_empty() && is_credential_name(&flag_name.replace('-', "_")) {
            return format!("{name}={REDACTED}");
        }
    }
    redact_url_password(&word)
}

/// `--token`, `--api-key`, `-password`: a flag whose value (the next word) is a credential.
fn is_credential_flag(word: &str) -> bool {
    let name = word.trim_start_matches('-');
    word.starts_with('-') && !word.contains('=') && is_credential_name(&name.replace('-', "_"))
}

/// `scheme://user:password@host` -> `scheme://user:[redacted]@host` (every URL in `text`).
fn redact_url_password(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let authority_start = at + 3;
        out.push_str(&rest[..authority_start]);
        let after = &rest[authority_start..];
        let authority_end = after
            .find(['/', '?', '#', ' ', '\'', '"'])
            .unwrap_or(after.len());
        let authority = &after[..authority_end];
        match authority.rfind('@').and_then(|at_sign| {
            let userinfo = &authority[..at_sign];
            userinfo
                .find(':')
                .map(|colon| (&userinfo[..colon], &authority[at_sign..]))
        }) {
            Some((user, host)) => {
                out.push_str(user);
                out.push(':');
                out.push_str(REDACTED);
                out.push_str(host);
            }
            None => out.push_str(authority),
        }
        rest = &after[authority_end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(list: &[&str]) -> Vec<String> {
        list.iter().map(|word| word.to_string()).collect()
    }

    #[test]
    fn credential_values_are_redacted_and_the_rest_kept() {
        let redacted = redact_command(&words(&[
            "env",
            "OPENAI_API_KEY=sk-abc",
            "GH_TOKEN=x1",
            "DB_PASSWORD=hunter2",
            "MODE=fast",
            "node",
            "/work/driver.mjs",
            "--token",
            "t0k3n",
            "--api-key=k3y",
            "--client-secret=s3",
            "--verbose",
            "--db",
            "postgres://me:pw@db.internal:5432/x",
        ]));
        assert_eq!(
            redacted,
            words(&[
                "env",
                "OPENAI_API_KEY=[redacted]",
                "GH_TOKEN=[redacted]",
                "DB_PASSWORD=[redacted]",
                "MODE=fast",
                "node",
                "/work/driver.mjs",
                "--token",
                "[redacted]",
                "--api-key=[redacted]",
                "--client-secret=[redacted]",
                "--verbose",
                "--db",
                "postgres://me:[redacted]@db.internal:5432/x",
            ])
        );
    }

    #[test]
    fn a_whole_shell_line_in_one_word_is_redacted_too() {
        let line = "API_TOKEN='a b c' node  /d.mjs --password p4ss --key=sk-0123456789abcdefghij";
        let redacted = redact_command(&words(&["sh", "-c", line]));
        assert_eq!(
            redacted[2],
            "API_TOKEN=[redacted] node  /d.mjs --password [redacted] --key=[redacted]"
        );
        for secret in ["a b c", "p4ss", "0123456789abcdef"] {
            assert!(!redacted[2].contains(secret), "{secret}");
        }
    }

    #[test]
    fn token_shapes_are_redacted_anywhere() {
        let redacted = redact_command(&words(&["driver", "ghp_abcdefghijklmnopqrstuvwxyz"]));
        assert_eq!(redacted, words(&["driver", "[redacted]"]));
    }
}
