//! Making untrusted text (case summaries, `why` lines, transcripts, host commands) safe to put in a
//! terminal, XML or HTML, Markdown, or a shell command line.

/// Whether a character could move the cursor, change colours, reorder text or break a line when
/// printed (C0/C1 controls, DEL, line/paragraph separators, bidi and zero-width format
/// characters), or is one XML 1.0 forbids (U+FFFE, U+FFFF): shown as `\u{..}` in every output.
fn is_disruptive(c: char) -> bool {
    c.is_control()
        || !is_xml_char(c)
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}')
        || matches!(c, '\u{2066}'..='\u{2069}' | '\u{FEFF}')
}

/// A character written as the visible text `\u{..}` (lowercase hex).
fn visible(c: char) -> String {
    format!("\\u{{{:x}}}", c as u32)
}

/// One line of text for a terminal: every disruptive character (escape sequences, CR, LF, tabs,
/// bidi overrides) is shown as `\u{..}`, so a hostile host cannot rewrite the screen.
pub fn terminal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_disruptive(c) {
            out.push_str(&visible(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether XML 1.0 allows this character at all (`Char` production).
pub(crate) fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Text for an XML writer that escapes markup itself (`quick-junit`): only the characters XML 1.0
/// forbids (NUL, most C0 controls, U+FFFE/F) are written as the visible text `\u{..}`.
pub fn xml_chars(text: &str) -> String {
    text.chars()
        .map(|c| {
            if is_xml_char(c) {
                c.to_string()
            } else {
                visible(c)
            }
        })
        .collect()
}

/// HTML text or a double- or single-quoted attribute value. Controls other than tab and newline are
/// written as the visible text `\u{..}`.
pub fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' => out.push(c),
            c if c.is_control() || !is_xml_char(c) => out.push_str(&visible(c)),
            c => out.push(c),
        }
    }
    out
}

/// Text inside a Markdown table cell or paragraph: one line, with Markdown and HTML punctuation
/// backslash-escaped so it renders literally (GFM allows escaping any ASCII punctuation).
pub fn markdown_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in terminal(text).chars() {
        if matches!(
            c,
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '~' | '&' | '#' | '!' | '$'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The length of the longest run of backticks in `text` (a Markdown fence must be longer).
pub fn longest_backtick_run(text: &str) -> usize {
    text.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

/// A Markdown code span holding `text` literally, usable inside a table cell.
pub fn markdown_code(text: &str) -> String {
    let line = terminal(text);
    let fence = "`".repeat(longest_backtick_run(&line) + 1);
    // A pipe splits a GFM table cell even inside a code span unless escaped.
    let body = line.replace('|', "\\|");
    let pad = if body.starts_with('`') || body.ends_with('`') || body.is_empty() {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{body}{pad}{fence}")
}

/// Whether a word needs no quoting in a POSIX shell.
fn is_shell_safe(word: &str) -> bool {
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:=@%+,-".contains(c))
}

/// One shell word, single-quoted only when it needs to be.
pub fn shell_word(word: &str) -> String {
    if is_shell_safe(word) {
        word.to_string()
    } else {
        shell_quote(word)
    }
}

/// One shell word, always single-quoted (`'` written as `'\''`).
pub use dsh_engine::programs::shell_quote;

/// A command line a POSIX shell splits back into exactly `args`.
pub fn shell_join(args: &[String]) -> String {
    args.iter()
        .map(|arg| shell_word(arg))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The last `lines` lines of a process's stderr (a driver's, a runtime's), escaped for a terminal and indented.
pub fn stderr_tail(bytes: &[u8], lines: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let all: Vec<&str> = text.lines().collect();
    let start = all.len().saturating_sub(lines);
    all[start..]
        .iter()
        .map(|line| format!("    {}", terminal(line)))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_neutralises_escape_sequences_and_line_breaks() {
        assert_eq!(terminal("a\u{1b}[2Jb\r\nc"), "a\\u{1b}[2Jb\\u{d}\\u{a}c");
        assert_eq!(terminal("x\u{202e}y\u{2028}"), "x\\u{202e}y\\u{2028}");
        assert_eq!(terminal("plain café"), "plain café");
        assert_eq!(terminal("a\u{fffe}b\u{ffff}"), "a\\u{fffe}b\\u{ffff}");
    }

    #[test]
    fn xml_chars_shows_forbidden_characters_and_keeps_the_rest() {
        assert_eq!(xml_chars("<a & \"b\">\u{0}"), "<a & \"b\">\\u{0}");
        assert_eq!(xml_chars("l1\nl2\t\r"), "l1\nl2\t\r");
        assert_eq!(xml_chars("\u{1b}[31m\u{fffe}"), "\\u{1b}[31m\\u{fffe}");
    }

    #[test]
    fn html_escapes_markup_and_quotes() {
        assert_eq!(
            html("<script>'x'&</script>"),
            "&lt;script&gt;&#39;x&#39;&amp;&lt;/script&gt;"
        );
        assert_eq!(html("\u{7}"), "\\u{7}");
    }

    #[test]
    fn markdown_text_renders_punctuation_literally() {
        assert_eq!(
            markdown_text("a|b *c* <d>\n"),
            "a\\|b \\*c\\* \\<d\\>\\\\u{a}"
        );
    }

    #[test]
    fn markdown_code_picks_a_fence_longer_than_any_backtick_run() {
        assert_eq!(markdown_code("id.x"), "`id.x`");
        assert_eq!(markdown_code("a``b"), "```a``b```");
        assert_eq!(markdown_code("`x"), "`` `x ``");
        assert_eq!(markdown_code("a|b"), "`a\\|b`");
    }

    #[test]
    fn shell_join_round_trips_awkward_words() {
        let args = vec![
            "node".to_string(),
            "my host.js".to_string(),
            "it's".to_string(),
        ];
        assert_eq!(shell_join(&args), r"node 'my host.js' 'it'\''s'");
        assert_eq!(shell_word(""), "''");
        assert_eq!(shell_word("dsh-host-driver"), "dsh-host-driver");
    }
}
