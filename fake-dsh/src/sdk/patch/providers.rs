//! 0.2.1's `llm-pi-ai` row on the full profiles (`sdk`, `headless`; `sdk-minimal` has none)
//! declares the providers a `--patch` overlay lists under its `config.providers`. A provider the
//! profile already declares (`deepseek-official`, the `llm-deepseek` row's) is a valid patch the
//! launcher takes, but the row then fails to activate: the runtime boots all the same and says so
//! on stderr in a warning block (observed on 0.2.1rc2):
//!
//! ```text
//! dsh: warning: 1 entry did not activate
//! llm-pi-ai (@deepseek-ai/dsh-llm-pi-ai): LlmError: configurable provider "deepseek-official" is already declared
//!     at ... (the runtime's stack, then the profile's frames)
//!
//! ```
//!
//! fake-dsh prints the block with the profile's two frames for the runtime's stack. The YAML read
//! is the block subset overlays are written in (see the parent module).

/// The providers the full profiles declare before `llm-pi-ai` activates.
const DECLARED: &[&str] = &["deepseek-official"];
/// The row that declares the patch's providers.
const ROW: &str = "llm-pi-ai";

/// The warning block for the overlay `texts` (in order) on `profile`, with the profile directory
/// under `home`; `None` when no `llm-pi-ai` patch names a declared provider.
pub fn warning(texts: &[String], profile: &str, home: &std::path::Path) -> Option<String> {
    let provider = texts
        .iter()
        .flat_map(|text| pi_ai_providers(text))
        .find(|provider| DECLARED.contains(&provider.as_str()))?;
    let frames = home.join("profiles").join(profile);
    let frames = frames.display();
    Some(format!(
        "dsh: warning: 1 entry did not activate\n\
         {ROW} (@deepseek-ai/dsh-llm-pi-ai): LlmError: configurable provider \"{provider}\" is \
         already declared\n    at file://{frames}/#{ROW}\n    at file://{frames}/#include\n\n"
    ))
}

/// The provider names the `llm-pi-ai` entries of one block-sequence overlay declare (an entry
/// that disables the row declares none).
fn pi_ai_providers(text: &str) -> Vec<String> {
    let mut providers = Vec::new();
    for entry in entries(text) {
        let is_row = entry
            .iter()
            .any(|line| key_value(line) == Some(("id", ROW)));
        let disabled = entry
            .iter()
            .any(|line| key_value(line) == Some(("disabled", "true")));
        if is_row && !disabled {
            providers.extend(children_of(&entry, "providers"));
        }
    }
    providers
}

/// The overlay's entries, each its lines (the `- ` of the first one replaced by spaces, so every
/// line keeps its column).
fn entries(text: &str) -> Vec<Vec<String>> {
    let mut entries: Vec<Vec<String>> = Vec::new();
    for line in text.lines() {
        let line = line.split(" #").next().unwrap_or_default().trim_end();
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if let Some(rest) = line.strip_prefix("- ") {
            entries.push(vec![format!("  {rest}")]);
        } else if let Some(entry) = entries.last_mut() {
            entry.push(line.to_string());
        }
    }
    entries
}

/// `key: value` of a line (value unquoted; empty for a mapping that opens below).
fn key_value(line: &str) -> Option<(&str, &str)> {
    let (key, value) = line.trim().split_once(':')?;
    let value = value.trim().trim_matches(['\'', '"']);
    Some((key.trim().trim_matches(['\'', '"']), value))
}

/// The keys of the mapping under the first `key:` line of `lines`: the lines indented one level
/// deeper than it, up to the first line not deeper.
fn children_of(lines: &[String], key: &str) -> Vec<String> {
    let indent = |line: &str| line.len() - line.trim_start().len();
    let Some(at) = lines
        .iter()
        .position(|line| key_value(line) == Some((key, "")))
    else {
        return Vec::new();
    };
    let parent = indent(&lines[at]);
    let body: Vec<&String> = lines[at + 1..]
        .iter()
        .take_while(|line| indent(line) > parent)
        .collect();
    let Some(child) = body.iter().map(|line| indent(line)).min() else {
        return Vec::new();
    };
    body.iter()
        .filter(|line| indent(line) == child)
        .filter_map(|line| key_value(line).map(|(name, _)| name.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFLICT: &str = "- id: llm-pi-ai\n  config:\n    providers:\n      deepseek-official:\n        \
        api: openai-completions\n        baseURL: http://127.0.0.1:9/v1\n        models:\n          \
        - id: deepseek-flash\n- id: hmr\n  disabled: true\n";

    #[test]
    fn a_declared_provider_in_the_pi_ai_row_is_warned_about_and_others_are_not() {
        assert_eq!(pi_ai_providers(CONFLICT), ["deepseek-official"]);
        let home = std::path::Path::new("/h");
        let block = warning(&[CONFLICT.to_string()], "sdk", home).unwrap();
        assert_eq!(
            block,
            "dsh: warning: 1 entry did not activate\nllm-pi-ai (@deepseek-ai/dsh-llm-pi-ai): \
             LlmError: configurable provider \"deepseek-official\" is already declared\n    at \
             file:///h/profiles/sdk/#llm-pi-ai\n    at file:///h/profiles/sdk/#include\n\n"
        );
        let own = CONFLICT.replace("deepseek-official:", "my-provider:");
        assert_eq!(pi_ai_providers(&own), ["my-provider"]);
        assert_eq!(warning(&[own], "sdk", home), None);
        let disabled = CONFLICT.replace("  config:", "  disabled: true\n  config:");
        assert!(pi_ai_providers(&disabled).is_empty());
        let other_row = CONFLICT.replace("id: llm-pi-ai", "id: llm-deepseek");
        assert!(pi_ai_providers(&other_row).is_empty());
    }
}
