//! The ACP methods other than `session/prompt`, each with the real runtime's checks, messages
//! and results (facts F3, F4, F6): `initialize`, `authenticate`, `session/new`, `session/list`,
//! `session/resume`, `session/close`, `session/set_config_option`; and `-32601` for every other
//! method (`session/load`, `session/set_mode`, `session/set_model`, `session/fork`, ...).

use super::config::Config;
use super::rpc::{self, expected, tree};
use super::state::{lock, Agent, Session};
use super::wire::code;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A JSON-RPC error answer.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

/// `-32602 "Invalid params: <message>"`.
pub fn invalid(message: impl std::fmt::Display) -> RpcError {
    RpcError {
        code: code::INVALID_PARAMS,
        message: format!("Invalid params: {message}"),
        data: None,
    }
}

/// `-32602 "Invalid params"` with a zod tree.
pub fn zod(data: Value) -> RpcError {
    RpcError {
        code: code::INVALID_PARAMS,
        message: "Invalid params".to_string(),
        data: Some(data),
    }
}

/// `-32601`, its message holding literal double quotes (F2.3).
pub fn not_found(method: &str) -> RpcError {
    RpcError {
        code: code::METHOD_NOT_FOUND,
        message: format!("\"Method not found\": {method}"),
        data: Some(json!({"method": method})),
    }
}

pub type Answer = Result<Value, RpcError>;

/// The `initialize` result, exact on both releases (F3.1).
pub fn initialize_result() -> Value {
    json!({"protocolVersion": 1,
           "agentInfo": {"name": "deepseek-harness-acp", "version": "0.0.1"},
           "agentCapabilities": {"mcpCapabilities": {"http": true},
               "promptCapabilities": {"image": false, "audio": false, "embeddedContext": false},
               "sessionCapabilities": {"close": {}, "list": {}, "resume": {}}},
           "authMethods": []})
}

/// `initialize` (F3.2): any integer `protocolVersion` >= 0 gets protocol 1.
pub fn initialize(params: &Value) -> Answer {
    let version = params.get("protocolVersion");
    let problem = match version {
        Some(Value::Number(n)) if n.as_i64().is_some_and(|v| v < 0) => {
            Some("Too small: expected number to be >=0".to_string())
        }
        Some(Value::Number(n)) if n.as_u64().is_none() => {
            Some("Invalid input: expected int, received number".to_string())
        }
        Some(Value::Number(_)) => None,
        other => Some(expected("number", other)),
    };
    match problem {
        Some(message) => Err(zod(tree(&[("protocolVersion", message)]))),
        None => Ok(initialize_result()),
    }
}

/// A member that must be a string, or its zod message.
fn string_member<'a>(params: &'a Value, name: &str) -> Result<&'a str, String> {
    params
        .get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| expected("string", params.get(name)))
}

/// An absolute cwd, or the real runtime's refusal.
fn absolute(cwd: &str) -> Result<PathBuf, RpcError> {
    if Path::new(cwd).is_absolute() {
        Ok(PathBuf::from(cwd))
    } else {
        Err(invalid(format!("cwd must be an absolute path: {cwd}")))
    }
}

/// `session/new {cwd, mcpServers}` (F4.1, F4.2).
pub fn new_session(agent: &Agent, params: &Value) -> Answer {
    let cwd = string_member(params, "cwd");
    let servers = match params.get("mcpServers") {
        None => Err("Required value is missing".to_string()),
        Some(Value::Array(servers)) => Ok(servers.clone()),
        Some(other) => Err(expected("array", Some(other))),
    };
    let (cwd, servers) = match (cwd, servers) {
        (Ok(cwd), Ok(servers)) => (cwd, servers),
        (cwd, servers) => {
            let mut problems = Vec::new();
            if let Err(message) = cwd {
                problems.push(("cwd", message));
            }
            if let Err(message) = servers {
                problems.push(("mcpServers", message));
            }
            return Err(zod(tree(&problems)));
        }
    };
    let cwd = absolute(cwd)?;
    let extra = params["additionalDirectories"].as_array();
    if extra.is_some_and(|dirs| !dirs.is_empty()) {
        return Err(invalid("additionalDirectories is not supported"));
    }
    check_mcp_servers(&servers)?;
    let id = uuid::Uuid::new_v4().to_string();
    let stored = store_new(agent, &id, &cwd)?;
    let config = Config::new(agent.persona, agent.has_key);
    let options = config.options();
    let session = Session::new(&id, cwd, config, stored);
    lock(&agent.sessions).insert(id.clone(), Arc::new(session));
    Ok(json!({"sessionId": id, "configOptions": options}))
}

/// Stores a new session in the home (claimed first), when there is one.
fn store_new(
    agent: &Agent,
    id: &str,
    cwd: &Path,
) -> Result<Option<super::store::Stored>, RpcError> {
    let Some(store) = &agent.store else {
        return Ok(None);
    };
    let internal = |details: String| RpcError {
        code: code::INTERNAL_ERROR,
        message: "Internal error".to_string(),
        data: Some(json!({"details": details})),
    };
    agent.claim_home().map_err(internal)?;
    store.create(id, cwd).map(Some).map_err(internal)
}

/// `mcpServers`' rules (F4.2): each server's shape, unique names, then its connection. fake-dsh
/// speaks no MCP: a stdio server whose command is an executable file counts as connected (the
/// real one's `/bin/true` did), any HTTP server fails to connect.
fn check_mcp_servers(servers: &[Value]) -> Result<(), RpcError> {
    let mut names = std::collections::HashSet::new();
    for (index, server) in servers.iter().enumerate() {
        match server["type"].as_str() {
            Some("sse") => {
                return Err(invalid(format!(
                    "mcpServers[{index}] transport sse is not supported"
                )))
            }
            Some("http") => {
                let url = server["url"].as_str().unwrap_or_default();
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(invalid(format!(
                        "mcpServers[{index}].url must be an absolute HTTP(S) URL"
                    )));
                }
            }
            _ => {
                let command = server["command"].as_str().unwrap_or_default();
                if !Path::new(command).is_absolute() {
                    return Err(invalid(format!(
                        "mcpServers[{index}].command must be an absolute path"
                    )));
                }
            }
        }
        let name = server["name"]
            .as_str()
            .unwrap_or_default()
            .trim()
            .to_lowercase();
        if !names.insert(name.clone()) {
            return Err(invalid(format!(
                "mcpServers contains duplicate normalized name: {name}"
            )));
        }
    }
    for server in servers {
        let connects = server["type"].as_str().is_none_or(|t| t == "stdio")
            && executable(Path::new(server["command"].as_str().unwrap_or_default()));
        if !connects {
            let name = server["name"].as_str().unwrap_or_default();
            return Err(RpcError {
                code: code::INTERNAL_ERROR,
                message: "Internal error".to_string(),
                data: Some(json!({"details": format!(
                    "mcp-client({name}): initial connection or tool synchronization failed")})),
            });
        }
    }
    Ok(())
}

fn executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The cursor fake-dsh hands out past 100 sessions (the real one's format is not observed).
const CURSOR_PREFIX: &str = "fake-dsh-offset:";
const PAGE: usize = 100;

/// `session/list {cwd?, cursor?}` (F4.3): the stored sessions not open in this process, newest
/// first, 100 a page.
pub fn list(agent: &Agent, params: &Value) -> Answer {
    let offset = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(cursor) => cursor
            .as_str()
            .and_then(|c| c.strip_prefix(CURSOR_PREFIX))
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| invalid("session/list cursor is invalid"))?,
    };
    let cwd = match params["cwd"].as_str() {
        Some(cwd) => Some(absolute(cwd)?),
        None => None,
    };
    let open: Vec<String> = lock(&agent.sessions).keys().cloned().collect();
    let found: Vec<Value> = agent
        .store
        .iter()
        .flat_map(|store| store.list())
        .filter(|found| !open.contains(&found.id))
        .filter(|found| cwd.as_ref().is_none_or(|cwd| Path::new(&found.cwd) == cwd))
        .map(|found| json!({"sessionId": found.id, "cwd": found.cwd}))
        .collect();
    let page: Vec<Value> = found.iter().skip(offset).take(PAGE).cloned().collect();
    let mut result = json!({"sessions": page});
    if found.len() > offset + PAGE {
        result["nextCursor"] = json!(format!("{CURSOR_PREFIX}{}", offset + PAGE));
    }
    Ok(result)
}

/// `session/resume {sessionId, cwd, mcpServers?}` (F4.4): a session an earlier process stored,
/// no history replayed; `{configOptions}`.
pub fn resume(agent: &Agent, params: &Value) -> Answer {
    let (id, cwd) = match (
        string_member(params, "sessionId"),
        string_member(params, "cwd"),
    ) {
        (Ok(id), Ok(cwd)) => (id, cwd),
        (id, cwd) => {
            let problems: Vec<(&str, String)> = [("sessionId", id.err()), ("cwd", cwd.err())]
                .into_iter()
                .filter_map(|(name, problem)| problem.map(|p| (name, p)))
                .collect();
            return Err(zod(tree(&problems)));
        }
    };
    let cwd = absolute(cwd)?;
    if agent.session(id).is_some() {
        return Err(invalid(format!("session is already active: {id}")));
    }
    let not_resumable = || invalid(format!("session is not resumable: {id}"));
    let store = agent.store.as_ref().ok_or_else(not_resumable)?;
    let found = store.find(id).ok_or_else(not_resumable)?;
    if Path::new(&found.cwd) != cwd {
        return Err(invalid(format!(
            "session cwd does not match: {}",
            cwd.display()
        )));
    }
    let stored = store.open(&found).map_err(invalid)?;
    let config = Config::new(agent.persona, agent.has_key);
    let options = config.options();
    let session = Session::new(id, cwd, config, Some(stored));
    lock(&agent.sessions).insert(id.to_string(), Arc::new(session));
    Ok(json!({"configOptions": options}))
}

/// The open session a request names, or `unknown session`.
pub fn named_session(agent: &Agent, params: &Value) -> Result<Arc<Session>, RpcError> {
    let id = string_member(params, "sessionId")
        .map_err(|message| zod(tree(&[("sessionId", message)])))?;
    agent
        .session(id)
        .ok_or_else(|| invalid(format!("unknown session: {id}")))
}

/// `session/close {sessionId}` (F4.5): a prompt in flight is answered `cancelled` first.
pub fn close(agent: &Agent, params: &Value) -> Answer {
    let session = named_session(agent, params)?;
    let running = lock(&session.turn).clone();
    if let Some(turn) = running {
        turn.cancel();
        turn.wait_done();
    }
    lock(&agent.sessions).remove(&session.id);
    Ok(json!({}))
}

/// `session/set_config_option {sessionId, configId, value}` (F6): the whole new state.
pub fn set_config_option(agent: &Agent, params: &Value) -> Answer {
    let value = match params.get("value") {
        Some(Value::String(value)) => value,
        other => {
            return Err(zod(tree(&[
                ("type", "Invalid input: expected \"boolean\"".to_string()),
                ("value", expected("string", other)),
            ])))
        }
    };
    let session = named_session(agent, params)?;
    let config_id = params["configId"].as_str().unwrap_or_default();
    let mut state = lock(&session.state);
    state.config.set(config_id, value).map_err(invalid)?;
    Ok(json!({"configOptions": state.config.options()}))
}

/// Whether a request's `params` is an object, else the transport's `-32602` (F2.3).
pub fn object_params(params: Option<&Value>) -> Result<&Value, RpcError> {
    match params {
        Some(params @ Value::Object(_)) => Ok(params),
        other => Err(zod(rpc::params_not_object(other))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialize_checks_its_protocol_version_like_zod() {
        assert_eq!(
            initialize(&json!({"protocolVersion": 999})),
            Ok(initialize_result())
        );
        let error = initialize(&json!({"protocolVersion": -1})).unwrap_err();
        assert_eq!(
            error.data.unwrap()["protocolVersion"]["_errors"][0],
            "Too small: expected number to be >=0"
        );
        let error = initialize(&json!({"protocolVersion": "1"})).unwrap_err();
        assert_eq!(error.message, "Invalid params");
        assert_eq!(
            error.data.unwrap()["protocolVersion"]["_errors"][0],
            "Invalid input: expected number, received string"
        );
    }

    #[test]
    fn mcp_servers_are_checked_in_the_real_order() {
        let message = |servers: Value| {
            check_mcp_servers(servers.as_array().unwrap())
                .unwrap_err()
                .message
        };
        assert_eq!(
            message(json!([{"name": "rel", "command": "relative/mcp"}])),
            "Invalid params: mcpServers[0].command must be an absolute path"
        );
        assert_eq!(
            message(json!([{"type": "sse", "name": "s", "url": "http://127.0.0.1:9/sse"}])),
            "Invalid params: mcpServers[0] transport sse is not supported"
        );
        assert_eq!(
            message(json!([{"type": "http", "name": "h", "url": "ftp://127.0.0.1/x"}])),
            "Invalid params: mcpServers[0].url must be an absolute HTTP(S) URL"
        );
        assert_eq!(
            message(json!([{"name": "dup", "command": "/bin/true"},
                           {"name": "dup", "command": "/bin/true"}])),
            "Invalid params: mcpServers contains duplicate normalized name: dup"
        );
        let gone = check_mcp_servers(&[json!({"name": "gone", "command": "/nonexistent/mcp"})])
            .unwrap_err();
        assert_eq!(
            (gone.code, gone.message.as_str()),
            (-32603, "Internal error")
        );
        assert_eq!(
            gone.data.unwrap()["details"],
            "mcp-client(gone): initial connection or tool synchronization failed"
        );
        assert!(check_mcp_servers(&[json!({"name": "noargs", "command": "/bin/true"})]).is_ok());
    }
}
