//! The default agent's turn on the ACP surface, the kit's default model conversation (the same
//! replies the kit's model server scripts for the real runtime's captures): it writes
//! `index.html` (the landing page of [`crate::design`]) and says so; when the page already
//! exists and the session has not read it, or the prompt asks for green (the kit's script reads
//! before it recolours), it reads the page first, then writes the new one.

use dsh_formats::acp_scenario::{AcpToolCall, AcpTurn, Reply};
use serde_json::json;

/// The default agent's turn for a prompt; `must_read`: `index.html` exists and this session
/// has not read it (a write would be refused), or the prompt asks for green.
pub fn default_turn(prompt: &str, must_read: bool) -> AcpTurn {
    let green = prompt.to_lowercase().contains("green");
    let revision = if green || must_read { 2 } else { 1 };
    let page = crate::design::page(&crate::design::hero_for(prompt, revision));
    let write = reply(
        if green {
            "Now I make it green."
        } else {
            "I will write the page."
        },
        None,
        Some(tool(
            "write",
            json!({"file_path": "index.html", "content": page}),
        )),
    );
    let done = reply("The file is written.", Some("I wrote index.html."), None);
    let replies = if must_read {
        let read = tool("read", json!({"file_path": "index.html"}));
        vec![
            reply("I read the page first.", None, Some(read)),
            write,
            done,
        ]
    } else {
        vec![write, done]
    };
    AcpTurn {
        replies,
        ..AcpTurn::default()
    }
}

fn reply(reasoning: &str, text: Option<&str>, call: Option<AcpToolCall>) -> Reply {
    Reply {
        reasoning: Some(reasoning.to_string()),
        text: text.map(str::to_string),
        tool_calls: call.into_iter().collect(),
        ..Reply::default()
    }
}

fn tool(name: &str, arguments: serde_json::Value) -> AcpToolCall {
    AcpToolCall {
        name: name.to_string(),
        arguments,
        delay_ms: 0,
        permission_id: Default::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_page_is_written_and_an_existing_one_read_first() {
        let first = default_turn("Make a landing page", false);
        assert_eq!(first.replies.len(), 2);
        assert_eq!(first.replies[0].tool_calls[0].name, "write");
        assert_eq!(
            first.replies[1].text.as_deref(),
            Some("I wrote index.html.")
        );
        let green = default_turn("Now make it green", true);
        let names: Vec<&str> = green
            .replies
            .iter()
            .flat_map(|r| r.tool_calls.iter().map(|c| c.name.as_str()))
            .collect();
        assert_eq!(names, ["read", "write"]);
        assert_eq!(
            green.replies[1].reasoning.as_deref(),
            Some("Now I make it green.")
        );
    }
}
