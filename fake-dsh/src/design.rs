//! The HTML design file the default agent writes on a new session and edits on a resumed turn:
//! a small landing page whose hero block (accent colour, heading, revision) is what changes.

/// The palette a resumed turn cycles through when its prompt names no colour.
const PALETTE: [&str; 5] = ["#3b5bdb", "#e8590c", "#2f9e44", "#ae3ec9", "#c2255c"];
/// Colour words a prompt may name, and the accent each gives.
const COLOUR_WORDS: [(&str, &str); 11] = [
    ("red", "#e03131"),
    ("orange", "#e8590c"),
    ("yellow", "#f08c00"),
    ("green", "#2f9e44"),
    ("teal", "#0c8599"),
    ("blue", "#1971c2"),
    ("purple", "#7048e8"),
    ("pink", "#d6336c"),
    ("black", "#212529"),
    ("gray", "#495057"),
    ("grey", "#495057"),
];
const HERO_START: &str = "<section id=\"hero\"";
const HERO_END: &str = "</section>";

/// What the hero block shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hero {
    pub heading: String,
    pub accent: String,
    pub revision: usize,
}

/// The hero for a turn: the prompt's first quoted phrase as heading and first colour word as
/// accent, else defaults (the palette cycles with the revision so every edit changes the file).
pub fn hero_for(prompt: &str, revision: usize) -> Hero {
    let heading = quoted_phrase(prompt).unwrap_or_else(|| {
        if revision <= 1 {
            "Landing page".to_string()
        } else {
            format!("Landing page, revision {revision}")
        }
    });
    let accent = colour_in(prompt)
        .unwrap_or(PALETTE[revision.saturating_sub(1) % PALETTE.len()])
        .to_string();
    Hero {
        heading,
        accent,
        revision,
    }
}

fn quoted_phrase(prompt: &str) -> Option<String> {
    for (open, close) in [('"', '"'), ('\u{201c}', '\u{201d}')] {
        let Some(start) = prompt.find(open) else {
            continue;
        };
        let rest = &prompt[start + open.len_utf8()..];
        if let Some(end) = rest.find(close) {
            let phrase: String = rest[..end].trim().chars().take(80).collect();
            if !phrase.is_empty() {
                return Some(phrase);
            }
        }
    }
    None
}

fn colour_in(prompt: &str) -> Option<&'static str> {
    let lower = prompt.to_lowercase();
    lower
        .split(|c: char| !c.is_alphanumeric())
        .find_map(|word| COLOUR_WORDS.iter().find(|(name, _)| *name == word))
        .map(|(_, accent)| *accent)
}

/// HTML-escapes text for element content and attribute values.
pub fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            _ => escaped.push(c),
        }
    }
    escaped
}

/// The hero block.
pub fn hero_block(hero: &Hero) -> String {
    format!(
        "{HERO_START} class=\"hero\" style=\"--accent: {accent}\" data-revision=\"{revision}\">\n  \
         <h1>{heading}</h1>\n  \
         <p>Designed with DeepSeek Harness, revision {revision}.</p>\n  \
         <a class=\"cta\" href=\"#features\">Get started</a>\n\
         {HERO_END}",
        accent = escape(&hero.accent),
        revision = hero.revision,
        heading = escape(&hero.heading),
    )
}

/// The whole page.
pub fn page(hero: &Hero) -> String {
    format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
  body {{ margin: 0; font-family: system-ui, sans-serif; color: #1f2933; background: #f8fafc; }}
  .hero {{ padding: 96px 24px; text-align: center; background: var(--accent); color: #fff; }}
  .hero h1 {{ font-size: 3rem; margin: 0 0 16px; }}
  .cta {{ display: inline-block; padding: 12px 28px; border-radius: 999px; background: #fff;
         color: var(--accent); text-decoration: none; font-weight: 600; }}
  .features {{ display: grid; grid-template-columns: repeat(auto-fit, minmax(220px, 1fr)); gap: 24px;
              max-width: 960px; margin: 0 auto; padding: 64px 24px; }}
  .features article {{ background: #fff; border-radius: 12px; padding: 24px; box-shadow: 0 1px 3px #0002; }}
</style>
</head>
<body>
{hero}
<section id="features" class="features">
  <article><h2>Fast</h2><p>Loads instantly: one self-contained file.</p></article>
  <article><h2>Clear</h2><p>A single message, a single call to action.</p></article>
  <article><h2>Yours</h2><p>Ask for changes in the next turn.</p></article>
</section>
</body>
</html>
"#,
        title = escape(&hero.heading),
        hero = hero_block(hero),
    )
}

/// The hero block currently in a page, if it has one.
pub fn current_hero_block(page: &str) -> Option<&str> {
    let start = page.find(HERO_START)?;
    let end = page[start..].find(HERO_END)? + start + HERO_END.len();
    Some(&page[start..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_pick_heading_and_colour_and_revisions_change_the_block() {
        let first = hero_for("Create a landing page called \"Acme <Rockets>\"", 1);
        assert_eq!(first.heading, "Acme <Rockets>");
        assert!(page(&first).contains("<h1>Acme &lt;Rockets&gt;</h1>"));
        let second = hero_for("Make the hero green", 2);
        assert_eq!(second.accent, "#2f9e44");
        assert_ne!(hero_block(&first), hero_block(&second));
        let plain = hero_for("again", 3);
        assert_ne!(hero_block(&plain), hero_block(&hero_for("again", 4)));
    }

    #[test]
    fn the_hero_block_is_found_in_a_page() {
        let hero = hero_for("x", 1);
        let html = page(&hero);
        assert_eq!(current_hero_block(&html), Some(hero_block(&hero).as_str()));
        assert_eq!(current_hero_block("<html></html>"), None);
    }
}
