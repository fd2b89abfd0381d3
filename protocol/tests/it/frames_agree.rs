//! The typed frames and the JSON Schemas agree, in both directions: every generated typed frame
//! serializes to a document `frame.schema.json` accepts and that parses back to the same value,
//! and for mutated documents the schema and the hand-written parser accept exactly the same set.

use dsh_protocol::frames::{
    Capabilities, Delta, Execute, ModelInfo, ModelRoute, Models, ProtocolError, ReasoningOption,
    ResultFrame, RunError, RuntimeIdentity, Session, Status, TokenCounts, ToolCall, ToolResult,
    Usage, MAX_COUNT,
};
use dsh_protocol::{schema, HostCommand, RuntimeFrame};
use proptest::prelude::*;
use serde_json::{json, Value};

fn id() -> impl Strategy<Value = String> {
    "[a-z0-9-]{1,8}"
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z ]{0,6}",
        "\\PC{0,6}",
        Just("\u{2028}\"\\\n".to_string())
    ]
}

fn count() -> impl Strategy<Value = u64> {
    prop_oneof![0..1000u64, Just(MAX_COUNT)]
}

fn identity() -> impl Strategy<Value = RuntimeIdentity> {
    (
        prop_oneof![Just("open-design".to_string()), text()],
        0..3u64,
        id(),
        proptest::option::of("[A-Za-z0-9._:-]{1,12}"),
        any::<(bool, bool, bool)>(),
    )
        .prop_map(
            |(runtime, protocol_version, plugin_version, generation, caps)| RuntimeIdentity {
                runtime,
                protocol_version,
                plugin_version,
                compatibility_generation: generation,
                capabilities: Capabilities {
                    session_resume: caps.0,
                    session_cancel: caps.1,
                    structured_events: caps.2,
                },
            },
        )
}

fn models() -> impl Strategy<Value = Models> {
    let option = (text(), text(), proptest::option::of(any::<bool>()))
        .prop_map(|(id, name, default)| ReasoningOption { id, name, default });
    let model = (
        text(),
        text(),
        text(),
        text(),
        proptest::option::of(proptest::collection::vec(option, 0..3)),
    )
        .prop_map(
            |(provider, provider_name, id, name, reasoning_options)| ModelInfo {
                provider,
                provider_name,
                id,
                name,
                reasoning_options,
            },
        );
    (text(), proptest::collection::vec(model, 0..3))
        .prop_map(|(runtime, models)| Models { runtime, models })
}

fn result() -> impl Strategy<Value = ResultFrame> {
    (
        id(),
        prop_oneof![
            Just(Status::Completed),
            Just(Status::Cancelled),
            Just(Status::Failed)
        ],
        id(),
        any::<bool>(),
        proptest::option::of(id()),
        proptest::option::of(id()),
        proptest::option::of((id(), text())),
    )
        .prop_map(
            |(request_id, status, session_id, rejected, output, stop_reason, error)| {
                let error = match status {
                    Status::Failed => Some(error.unwrap_or(("E".to_string(), String::new()))),
                    _ => error,
                }
                .map(|(code, message)| RunError { code, message });
                ResultFrame {
                    request_id,
                    status,
                    session_id,
                    resume_rejected: rejected && status == Status::Failed,
                    output,
                    stop_reason,
                    error,
                }
            },
        )
}

fn frame() -> impl Strategy<Value = RuntimeFrame> {
    prop_oneof![
        identity().prop_map(RuntimeFrame::Probe),
        identity().prop_map(RuntimeFrame::Ready),
        models().prop_map(RuntimeFrame::Models),
        (id(), id(), any::<bool>()).prop_map(|(request_id, session_id, resumed)| {
            RuntimeFrame::Session(Session {
                request_id,
                session_id,
                resumed,
            })
        }),
        (id(), text()).prop_map(|(request_id, content)| RuntimeFrame::Thinking(Delta {
            request_id,
            content
        })),
        (id(), text()).prop_map(|(request_id, content)| RuntimeFrame::Text(Delta {
            request_id,
            content
        })),
        (id(), id(), id(), text()).prop_map(|(request_id, call_id, name, arguments)| {
            RuntimeFrame::ToolCall(ToolCall {
                request_id,
                call_id,
                name,
                arguments,
            })
        }),
        (id(), id(), id(), text(), any::<bool>()).prop_map(
            |(request_id, call_id, name, output, is_error)| {
                RuntimeFrame::ToolResult(ToolResult {
                    request_id,
                    call_id,
                    name,
                    output,
                    is_error,
                })
            }
        ),
        (
            id(),
            text(),
            text(),
            count(),
            count(),
            proptest::option::of(count()),
            proptest::option::of(count())
        )
            .prop_map(
                |(request_id, provider, model, input, output, read, write)| {
                    RuntimeFrame::Usage(Usage {
                        request_id,
                        provider,
                        model,
                        tokens: TokenCounts {
                            input_tokens: input,
                            output_tokens: output,
                            cache_read_tokens: read,
                            cache_write_tokens: write,
                        },
                    })
                }
            ),
        result().prop_map(RuntimeFrame::Result),
        (proptest::option::of(id()), id(), text()).prop_map(|(request_id, code, message)| {
            RuntimeFrame::ProtocolError(ProtocolError {
                request_id,
                code,
                message,
            })
        }),
    ]
}

fn command() -> impl Strategy<Value = HostCommand> {
    prop_oneof![
        (
            id(),
            prop_oneof![
                Just("/tmp/p".to_string()),
                Just("C:\\p".to_string()),
                Just("\\\\srv\\p".to_string())
            ],
            text(),
            proptest::option::of(id()),
            proptest::option::of((id(), id())),
            proptest::option::of(id()),
        )
            .prop_map(|(request_id, cwd, prompt, resume, route, effort)| {
                HostCommand::Execute(Execute {
                    request_id,
                    cwd,
                    prompt,
                    resume_session_id: resume,
                    model: route.map(|(provider, id)| ModelRoute { provider, id }),
                    reasoning_effort: effort,
                    mcp_servers: Vec::new(),
                })
            }),
        id().prop_map(HostCommand::cancel),
    ]
}

/// A JSON value that replaces a member in a mutation.
fn replacement() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        Just(json!("")),
        Just(json!("x")),
        Just(json!("completed")),
        Just(json!(0)),
        Just(json!(1)),
        Just(json!(1.0)),
        Just(json!(2)),
        Just(json!(-1)),
        Just(json!(1.5)),
        Just(json!(1e300)),
        Just(json!(true)),
        Just(json!(false)),
        Just(json!([])),
        Just(json!([true])),
        Just(json!({})),
        Just(json!({"code": "E", "message": "m"})),
        Just(json!({"provider": "p", "id": "m"})),
        Just(json!({"session_resume": true})),
        Just(json!([{"id": "a", "name": "b"}])),
    ]
}

#[derive(Debug, Clone)]
enum Mutation {
    Remove(usize),
    Replace(usize, Value),
    /// Replace a member one level down (inside an object or array member).
    ReplaceNested(usize, usize, Value),
    Add(String, Value),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (0..12usize).prop_map(Mutation::Remove),
        (0..12usize, replacement()).prop_map(|(index, value)| Mutation::Replace(index, value)),
        (0..12usize, 0..4usize, replacement())
            .prop_map(|(index, inner, value)| Mutation::ReplaceNested(index, inner, value)),
        (
            prop_oneof![
                Just("type".to_string()),
                Just("v".to_string()),
                Just("error".to_string()),
                "[a-z_]{1,6}"
            ],
            replacement()
        )
            .prop_map(|(key, value)| Mutation::Add(key, value)),
    ]
}

fn mutate(document: &mut Value, mutation: &Mutation) {
    let Value::Object(map) = document else { return };
    let keys: Vec<String> = map.keys().cloned().collect();
    match mutation {
        Mutation::Remove(index) => {
            map.remove(&keys[index % keys.len()]);
        }
        Mutation::Replace(index, value) => {
            map.insert(keys[index % keys.len()].clone(), value.clone());
        }
        Mutation::ReplaceNested(index, inner, value) => {
            match map.get_mut(&keys[index % keys.len()]) {
                Some(Value::Object(nested)) if !nested.is_empty() => {
                    let key = nested.keys().nth(inner % nested.len()).cloned();
                    if let Some(key) = key {
                        nested.insert(key, value.clone());
                    }
                }
                Some(Value::Array(items)) if !items.is_empty() => {
                    let slot = inner % items.len();
                    items[slot] = value.clone();
                }
                _ => {}
            }
        }
        Mutation::Add(key, value) => {
            map.insert(key.clone(), value.clone());
        }
    }
}

/// Parses through the hot path (the line parser), as the checker does.
fn parse_document(document: &Value) -> Result<RuntimeFrame, String> {
    let line = serde_json::to_string(document).expect("serializes");
    RuntimeFrame::parse_line(line.as_bytes()).map_err(|error| error.message)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn typed_frames_serialize_to_schema_valid_documents(frame in frame()) {
        let document = frame.to_value();
        if let Err(errors) = schema::validate("frame.schema.json", &document) {
            let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
            prop_assert!(false, "{document}: {errors:?}");
        }
        prop_assert_eq!(RuntimeFrame::parse_line(frame.to_line().trim_end().as_bytes()), Ok(frame.clone()));
        prop_assert_eq!(serde_json::from_value::<RuntimeFrame>(document).map_err(|e| e.to_string()), Ok(frame));
    }

    #[test]
    fn typed_commands_serialize_to_schema_valid_documents(command in command()) {
        let document = command.to_value();
        if let Err(errors) = schema::validate("command.schema.json", &document) {
            let errors: Vec<String> = errors.iter().map(ToString::to_string).collect();
            prop_assert!(false, "{document}: {errors:?}");
        }
        prop_assert_eq!(HostCommand::parse_line(command.to_line().trim_end().as_bytes()), Ok(command));
    }

    #[test]
    fn schema_and_parser_accept_the_same_mutated_frames(
        frame in frame(),
        mutations in proptest::collection::vec(mutation(), 1..3),
    ) {
        let mut document = frame.to_value();
        for mutation in &mutations {
            mutate(&mut document, mutation);
        }
        let schema_verdict = schema::validate("frame.schema.json", &document);
        let parsed = parse_document(&document);
        match (&schema_verdict, &parsed) {
            (Ok(()), Ok(parsed)) => {
                // Schema-valid documents parse back to the same value, unknown members dropped.
                let again = parse_document(&parsed.to_value());
                prop_assert_eq!(again.as_ref(), Ok(parsed));
                prop_assert!(schema::is_valid("frame.schema.json", &parsed.to_value()));
            }
            (Err(_), Err(_)) => {}
            (schema_verdict, parsed) => {
                prop_assert!(false, "disagreement on {document}: schema {schema_verdict:?}, parser {parsed:?}");
            }
        }
    }

    #[test]
    fn schema_and_parser_accept_the_same_mutated_commands(
        command in command(),
        mutations in proptest::collection::vec(mutation(), 1..3),
    ) {
        let mut document = command.to_value();
        for mutation in &mutations {
            mutate(&mut document, mutation);
        }
        let schema_ok = schema::is_valid("command.schema.json", &document);
        let parsed = HostCommand::from_value(&document);
        prop_assert_eq!(schema_ok, parsed.is_ok(), "{} -> {:?}", document, parsed);
    }
}

/// A result frame built from members, the rest of it valid.
fn result_document(members: Value) -> Value {
    let mut document = json!({"v": 1, "type": "result", "request_id": "r1", "status": "failed",
        "session_id": "od-1", "resume_rejected": false, "error": {"code": "E", "message": "m"}});
    for (name, value) in members.as_object().expect("an object of members") {
        document[name] = value.clone();
    }
    document
}

#[test]
fn schema_and_parser_both_refuse_null_session_ids_and_null_members() {
    let refused = [
        json!({"session_id": null}),
        json!({"session_id": ""}),
        json!({"status": "cancelled", "session_id": null, "error": null}),
        json!({"status": "completed", "output": null}),
        json!({"status": "completed", "stop_reason": null}),
        json!({"status": "completed", "error": null}),
        json!({"error": null}),
        json!({"status": "completed", "output": ""}),
    ];
    for members in refused {
        let document = result_document(members);
        assert!(
            !schema::is_valid("frame.schema.json", &document),
            "schema accepts {document}"
        );
        let parsed = parse_document(&document);
        assert!(parsed.is_err(), "parser accepts {document}: {parsed:?}");
    }
    let accepted =
        result_document(json!({"status": "cancelled", "error": {"code": "C", "message": ""}}));
    assert!(schema::is_valid("frame.schema.json", &accepted));
    assert!(parse_document(&accepted).is_ok());
}

#[test]
fn an_execute_without_model_is_valid_and_a_null_model_is_not() {
    let mut document = json!({"v": 1, "type": "execute", "request_id": "r1", "cwd": "/p",
        "prompt": "x", "mcp_servers": []});
    assert!(schema::is_valid("command.schema.json", &document));
    match HostCommand::from_value(&document) {
        Ok(HostCommand::Execute(execute)) => assert_eq!(execute.model, None),
        other => panic!("{other:?}"),
    }
    document["model"] = Value::Null;
    assert!(!schema::is_valid("command.schema.json", &document));
    assert!(HostCommand::from_value(&document).is_err());
}
