//! One stdin line as the agent's JSON-RPC transport reads it (facts F2.2, F2.3: the behaviour
//! of `@agentclientprotocol/sdk` 1.4.0, which the real runtime bundles), and the zod-shaped
//! `-32602` data the real runtime answers malformed params with.

use serde_json::{json, Value};

/// What one line is.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request (an `id` member, `null` included, and a string `method`).
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    /// A notification (a `method`, no `id`).
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// A response to one of the agent's requests (an `id`, no `method`).
    Response { id: Value, answer: Answer },
    /// A JSON array: the connection closes (F2.5).
    Batch,
    /// An error the transport answers itself, with `id: null`.
    Refused {
        code: i64,
        message: &'static str,
        data: Option<Value>,
    },
    /// Blank: ignored.
    Blank,
}

/// What a response carried.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Result(Value),
    Error(Value),
    /// Neither `result` nor `error` (`{"jsonrpc":"2.0","id":1}`).
    Empty,
}

/// Classifies one line (its line ending and surrounding blanks trimmed, as the SDK does).
pub fn classify(bytes: &[u8]) -> Incoming {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if text.is_empty() {
        return Incoming::Blank;
    }
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return refused(super::wire::code::PARSE_ERROR, "Parse error", None);
    };
    let Value::Object(members) = &value else {
        return if value.is_array() {
            Incoming::Batch
        } else {
            refused(invalid(), "Invalid request", Some(value))
        };
    };
    if members.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return refused(invalid(), "Invalid request", Some(value.clone()));
    }
    let params = members.get("params").cloned();
    match (members.get("method"), members.get("id")) {
        (Some(Value::String(method)), Some(id)) => Incoming::Request {
            id: id.clone(),
            method: method.clone(),
            params,
        },
        (Some(Value::String(method)), None) => Incoming::Notification {
            method: method.clone(),
            params,
        },
        (None, Some(id)) => Incoming::Response {
            id: id.clone(),
            answer: match (members.get("result"), members.get("error")) {
                (_, Some(error)) => Answer::Error(error.clone()),
                (Some(result), None) => Answer::Result(result.clone()),
                (None, None) => Answer::Empty,
            },
        },
        _ => refused(invalid(), "Invalid request", Some(value.clone())),
    }
}

fn invalid() -> i64 {
    super::wire::code::INVALID_REQUEST
}

fn refused(code: i64, message: &'static str, data: Option<Value>) -> Incoming {
    Incoming::Refused {
        code,
        message,
        data,
    }
}

/// zod's name for a value's type (`undefined` for a missing member).
pub fn type_name(value: Option<&Value>) -> &'static str {
    match value {
        None => "undefined",
        Some(Value::Null) => "null",
        Some(Value::Bool(_)) => "boolean",
        Some(Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Array(_)) => "array",
        Some(Value::Object(_)) => "object",
    }
}

/// zod's message for a value of the wrong type.
pub fn expected(kind: &str, got: Option<&Value>) -> String {
    format!(
        "Invalid input: expected {kind}, received {}",
        type_name(got)
    )
}

/// A zod error tree: `{"_errors": [], "<member>": {"_errors": [<message>]}, ...}`.
pub fn tree(members: &[(&str, String)]) -> Value {
    let mut tree = json!({"_errors": []});
    for (member, message) in members {
        tree[*member] = json!({"_errors": [message]});
    }
    tree
}

/// The data of a request whose `params` is not an object (F2.3).
pub fn params_not_object(params: Option<&Value>) -> Value {
    json!({"_errors": [expected("object", params)]})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused_with(line: &str) -> (i64, Option<Value>) {
        match classify(line.as_bytes()) {
            Incoming::Refused { code, data, .. } => (code, data),
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn every_line_shape_of_the_facts() {
        assert_eq!(refused_with("this is not json"), (-32700, None));
        assert_eq!(refused_with("42"), (-32600, Some(json!(42))));
        assert_eq!(refused_with("null"), (-32600, Some(Value::Null)));
        let no_version = r#"{"id":900,"method":"bogus/method"}"#;
        assert_eq!(
            refused_with(no_version),
            (-32600, Some(serde_json::from_str(no_version).unwrap()))
        );
        assert_eq!(
            refused_with(r#"{"jsonrpc":"1.0","id":3,"method":"m"}"#).0,
            -32600
        );
        assert_eq!(classify(b"[]"), Incoming::Batch);
        assert_eq!(classify(b"  \r\n"), Incoming::Blank);
        assert_eq!(
            classify(b"{\"jsonrpc\":\"2.0\",\"id\":1}\r\n"),
            Incoming::Response {
                id: json!(1),
                answer: Answer::Empty
            }
        );
        assert!(matches!(
            classify(br#" {"jsonrpc":"2.0","id":null,"method":"x"} "#),
            Incoming::Request {
                id: Value::Null,
                ..
            }
        ));
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","id":1.5,"method":"x","params":{}}"#),
            Incoming::Request { id, params: Some(_), .. } if id == json!(1.5)
        ));
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","method":"session/cancel"}"#),
            Incoming::Notification { params: None, .. }
        ));
    }

    #[test]
    fn zod_trees_read_like_the_real_ones() {
        assert_eq!(
            tree(&[("protocolVersion", expected("number", None))]).to_string(),
            r#"{"_errors":[],"protocolVersion":{"_errors":["Invalid input: expected number, received undefined"]}}"#
        );
        assert_eq!(
            params_not_object(None).to_string(),
            r#"{"_errors":["Invalid input: expected object, received undefined"]}"#
        );
    }
}
