//! The member-level comparison of two runtimes' wires (the SDK differential test: the real
//! runtime against fake-dsh): every frame reduced to its member tree with what legitimately
//! differs between two runs (ids, times, durations, pids, temp paths, free text) replaced by
//! placeholders ([`Normalizer`]), the two frame lists aligned by their kind ([`frame_key`]), and
//! every difference (a member's path with the real and the fake value, or a frame only one side
//! sent) listed, minus the ones docs/surface-sdk.md allows with a reason ([`Allowance`]).
//! [`render`] prints them for a failing test.

use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Numbers whose value is a time, a duration, a count of tokens, a sequence number or a pid:
/// keys matched case-insensitively, as a whole or as a suffix.
const VOLATILE_NUMBER_SUFFIXES: &[&str] = &[
    "time", "time0", "ms", "at", "tokens", "seq", "seqs", "pid", "dt",
];

/// Strings that are free text (a prompt, a model's words, a tool's output or description, a
/// signature): their value never decides a client's path, so only their presence and type count.
const FREE_TEXT_KEYS: &[&str] = &[
    "text",
    "texts",
    "title",
    "description",
    "arguments",
    "signature",
    "content",
    "summary",
    "prompt",
    "output",
    "stdout",
    "stderr",
    "instructions",
    "lastAssistantMessage",
    "preview",
    "delta",
    "task",
    "args",
    "argumentsDelta",
    "system",
];

/// The value placeholders.
pub const UUID: &str = "<uuid>";
pub const TEXT: &str = "<text>";
pub const NUMBER: &str = "<number>";

/// Reduces frames to what two runs of a runtime must share.
#[derive(Clone, Debug, Default)]
pub struct Normalizer {
    /// Path prefixes (a run's temp world) and the placeholder each becomes, longest first.
    roots: Vec<(String, String)>,
}

impl Normalizer {
    /// A normalizer that writes `placeholder` for `root` (and anything under it) in strings.
    pub fn with_root(mut self, root: &str, placeholder: &str) -> Normalizer {
        self.roots.push((root.to_string(), placeholder.to_string()));
        self.roots
            .sort_by_key(|(root, _)| std::cmp::Reverse(root.len()));
        self
    }

    /// `value` with volatile leaves replaced, and runs of equal array elements merged into one
    /// (chunk counts follow the model server's chunking, not the runtime).
    pub fn normalize(&self, value: &Value) -> Value {
        self.normalize_under("", value)
    }

    fn normalize_under(&self, key: &str, value: &Value) -> Value {
        match value {
            Value::Object(members) => Value::Object(
                members
                    .iter()
                    .map(|(name, member)| (name.clone(), self.normalize_under(name, member)))
                    .collect::<Map<String, Value>>(),
            ),
            // A list of times or of text pieces follows the model server's chunking: one
            // placeholder for the whole list.
            Value::Array(items)
                if items.iter().all(Value::is_number) && is_volatile_number(key) =>
            {
                Value::String(NUMBER.into())
            }
            Value::Array(items)
                if !items.is_empty()
                    && items.iter().all(Value::is_string)
                    && FREE_TEXT_KEYS.contains(&key) =>
            {
                Value::String(TEXT.into())
            }
            Value::Array(items) => {
                let mut merged: Vec<Value> = Vec::new();
                for item in items {
                    let item = self.normalize_under(key, item);
                    if merged.last() != Some(&item) {
                        merged.push(item);
                    }
                }
                Value::Array(merged)
            }
            Value::Number(_) if is_volatile_number(key) => Value::String(NUMBER.into()),
            Value::String(text) => Value::String(self.normalize_string(key, text)),
            other => other.clone(),
        }
    }

    fn normalize_string(&self, key: &str, text: &str) -> String {
        if FREE_TEXT_KEYS.contains(&key) {
            return TEXT.into();
        }
        if is_iso_time(text) {
            return "<time>".into();
        }
        let mut text = replace_uuids(text);
        for (root, placeholder) in &self.roots {
            text = text.replace(root.as_str(), placeholder);
        }
        text
    }
}

/// Whether a number under `key` is a time, duration, token count, sequence number or pid.
fn is_volatile_number(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    VOLATILE_NUMBER_SUFFIXES
        .iter()
        .any(|suffix| key == *suffix || (key.len() > suffix.len() && key.ends_with(suffix)))
}

/// `2026-12-05T16:33:41...`: an ISO 8601 time.
fn is_iso_time(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() >= 19
        && bytes[..4].iter().all(u8::is_ascii_digit)
        && bytes[4] == b'-'
        && bytes[7] == b'-'
        && bytes[10] == b'T'
        && bytes[13] == b':'
}

/// `text` with every UUID (8-4-4-4-12 hex digits) replaced by [`UUID`].
pub fn replace_uuids(text: &str) -> String {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let bytes = text.as_bytes();
    let uuid_at = |start: usize| -> bool {
        let mut at = start;
        for (n, len) in GROUPS.iter().enumerate() {
            if n > 0 {
                if bytes.get(at) != Some(&b'-') {
                    return false;
                }
                at += 1;
            }
            let group = bytes.get(at..at + len);
            if !group.is_some_and(|g| g.iter().all(u8::is_ascii_hexdigit)) {
                return false;
            }
            at += len;
        }
        !bytes.get(at).is_some_and(u8::is_ascii_hexdigit)
    };
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while at < bytes.len() {
        let boundary = at == 0 || !bytes[at - 1].is_ascii_hexdigit();
        if boundary && uuid_at(at) {
            out.push_str(UUID);
            at += 36;
        } else {
            let ch = text[at..].chars().next().unwrap_or_default();
            out.push(ch);
            at += ch.len_utf8().max(1);
        }
    }
    out
}

/// A normalized value's leaves by path (`params.event.data.message.content[0].type`), each as
/// its JSON text; an empty object or array is a leaf of its own.
pub fn flatten(value: &Value) -> BTreeMap<String, String> {
    let mut leaves = BTreeMap::new();
    flatten_into("", value, &mut leaves);
    leaves
}

fn flatten_into(path: &str, value: &Value, leaves: &mut BTreeMap<String, String>) {
    match value {
        Value::Object(members) if !members.is_empty() => {
            for (name, member) in members {
                let path = if path.is_empty() {
                    name.clone()
                } else {
                    format!("{path}.{name}")
                };
                flatten_into(&path, member, leaves);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (n, item) in items.iter().enumerate() {
                flatten_into(&format!("{path}[{n}]"), item, leaves);
            }
        }
        leaf => {
            leaves.insert(path.to_string(), leaf.to_string());
        }
    }
}

/// What a frame is, for aligning two wires: `event SESSION TYPE`, `status SESSION STATUS`,
/// `notify METHOD`, `response id=ID`, `error id=ID`, and for a headless `--json` line
/// `line TYPE [PHASE]`. Takes a normalized frame (a child
/// session's UUID is `<uuid>` then).
pub fn frame_key(frame: &Value) -> String {
    let params = &frame["params"];
    let text = |value: &Value| value.as_str().unwrap_or("?").to_string();
    match frame["method"].as_str() {
        Some("session.event") => format!(
            "event {} {}",
            text(&params["sessionId"]),
            text(&params["event"]["type"])
        ),
        Some("session.status") => format!(
            "status {} {}",
            text(&params["sessionId"]),
            text(&params["status"])
        ),
        Some(method) => format!("notify {method}"),
        None if frame.get("jsonrpc").is_none() && frame["type"].is_string() => {
            match frame["phase"].as_str() {
                Some(phase) => format!("line {} {phase}", text(&frame["type"])),
                None => format!("line {}", text(&frame["type"])),
            }
        }
        None if frame.get("error").is_some() => format!("error id={}", frame["id"]),
        None => format!("response id={}", frame["id"]),
    }
}

/// One difference between the real wire and the fake one.
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// The frame's key ([`frame_key`]), or `process` for the exit code, the stdout/stderr split
    /// and the files.
    pub frame: String,
    /// The member's path in the frame; `(frame)` when only one side sent the frame.
    pub member: String,
    /// The real runtime's value (`(absent)` when it has none).
    pub real: String,
    /// fake-dsh's value (`(absent)` when it has none).
    pub fake: String,
}

/// The path of a whole frame that only one side sent.
pub const WHOLE_FRAME: &str = "(frame)";
/// What a side without the member (or frame) shows.
pub const ABSENT: &str = "(absent)";

/// The frames in order, normalized, runs of equal consecutive `assistant/chunk` events merged.
pub fn normalize_frames(normalizer: &Normalizer, frames: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for frame in frames {
        let frame = normalizer.normalize(frame);
        let chunk = frame["params"]["event"]["type"] == "assistant/chunk";
        if chunk && out.last() == Some(&frame) {
            continue;
        }
        out.push(frame);
    }
    out
}

/// Every difference between two normalized wires: the frames aligned by key (a longest common
/// subsequence, so one missing frame shows as one difference, not as a shift of all after it),
/// the member trees of aligned frames compared leaf by leaf.
pub fn compare(real: &[Value], fake: &[Value]) -> Vec<Difference> {
    let real_keys: Vec<String> = real.iter().map(frame_key).collect();
    let fake_keys: Vec<String> = fake.iter().map(frame_key).collect();
    let mut differences = Vec::new();
    for step in align(&real_keys, &fake_keys) {
        match step {
            Aligned::Both(r, f) => {
                differences.extend(compare_members(&real_keys[r], &real[r], &fake[f]));
            }
            Aligned::RealOnly(r) => differences.push(Difference {
                frame: real_keys[r].clone(),
                member: WHOLE_FRAME.into(),
                real: format!("frame {}", r + 1),
                fake: ABSENT.into(),
            }),
            Aligned::FakeOnly(f) => differences.push(Difference {
                frame: fake_keys[f].clone(),
                member: WHOLE_FRAME.into(),
                real: ABSENT.into(),
                fake: format!("frame {}", f + 1),
            }),
        }
    }
    differences
}

/// The leaves of two frames of the same key that differ.
fn compare_members(key: &str, real: &Value, fake: &Value) -> Vec<Difference> {
    let real = flatten(real);
    let fake = flatten(fake);
    let mut paths: Vec<&String> = real.keys().chain(fake.keys()).collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .filter(|path| real.get(*path) != fake.get(*path))
        .map(|path| Difference {
            frame: key.to_string(),
            member: path.clone(),
            real: real.get(path).cloned().unwrap_or_else(|| ABSENT.into()),
            fake: fake.get(path).cloned().unwrap_or_else(|| ABSENT.into()),
        })
        .collect()
}

/// One step of an alignment.
#[derive(Debug, PartialEq)]
enum Aligned {
    Both(usize, usize),
    RealOnly(usize),
    FakeOnly(usize),
}

/// A longest-common-subsequence alignment of two key lists.
fn align(real: &[String], fake: &[String]) -> Vec<Aligned> {
    let (n, m) = (real.len(), fake.len());
    // lcs[i][j]: the common subsequence length of real[i..] and fake[j..].
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if real[i] == fake[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut steps = Vec::new();
    while i < n || j < m {
        if i < n && j < m && real[i] == fake[j] {
            steps.push(Aligned::Both(i, j));
            i += 1;
            j += 1;
        } else if j == m || (i < n && lcs[i + 1][j] >= lcs[i][j + 1]) {
            steps.push(Aligned::RealOnly(i));
            i += 1;
        } else {
            steps.push(Aligned::FakeOnly(j));
            j += 1;
        }
    }
    steps
}

/// A difference docs/surface-sdk.md allows, with its reason: a row of the table under the
/// heading [`ALLOWANCES_HEADING`], `| release | frame | member | reason |`, the first three in
/// backticks, `*` matching any run of characters.
#[derive(Clone, Debug, PartialEq)]
pub struct Allowance {
    pub release: String,
    pub frame: String,
    pub member: String,
    pub reason: String,
    /// The line of the row in the document.
    pub line: usize,
}

/// The heading of the allowances' section in docs/surface-sdk.md.
pub const ALLOWANCES_HEADING: &str = "## Differences fake-dsh keeps";

/// The allowances of the table under [`ALLOWANCES_HEADING`] in `markdown` (up to the next `## `
/// heading); an error names the line of a row that is not `| \`..\` | \`..\` | \`..\` | reason |`
/// or has no reason.
pub fn parse_allowances(markdown: &str) -> Result<Vec<Allowance>, String> {
    let mut inside = false;
    let mut allowances = Vec::new();
    for (n, line) in markdown.lines().enumerate() {
        if line.starts_with("## ") {
            inside = line.trim_end() == ALLOWANCES_HEADING;
            continue;
        }
        let row = line.trim();
        if !inside
            || !row.starts_with('|')
            || row.starts_with("|--")
            || row.starts_with("| release")
        {
            continue;
        }
        allowances.push(parse_row(row, n + 1)?);
    }
    if allowances.is_empty() {
        return Err(format!("no allowance table under {ALLOWANCES_HEADING:?}"));
    }
    Ok(allowances)
}

fn parse_row(row: &str, line: usize) -> Result<Allowance, String> {
    let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
    let code = |cell: &str| -> Option<String> {
        let inner = cell.strip_prefix('`')?.strip_suffix('`')?;
        (!inner.is_empty()).then(|| inner.to_string())
    };
    match cells.as_slice() {
        [release, frame, member, reason @ ..] if !reason.join(" | ").trim().is_empty() => {
            match (code(release), code(frame), code(member)) {
                (Some(release), Some(frame), Some(member)) => Ok(Allowance {
                    release,
                    frame,
                    member,
                    reason: reason.join(" | "),
                    line,
                }),
                _ => Err(format!(
                    "line {line}: release, frame and member must each be in backticks: {row}"
                )),
            }
        }
        _ => Err(format!(
            "line {line}: an allowance row is `| release | frame | member | reason |`: {row}"
        )),
    }
}

impl Allowance {
    /// Whether this allowance covers `difference` on `release`.
    pub fn covers(&self, release: &str, difference: &Difference) -> bool {
        glob(&self.release, release)
            && glob(&self.frame, &difference.frame)
            && glob(&self.member, &difference.member)
    }
}

/// `pattern` with `*` matching any run of characters, against all of `text`.
pub fn glob(pattern: &str, text: &str) -> bool {
    let Some((first, rest)) = pattern.split_once('*') else {
        return pattern == text;
    };
    let Some(mut left) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = rest.split('*').collect();
    for (n, part) in parts.iter().enumerate() {
        if n + 1 == parts.len() {
            return left.len() >= part.len() && left.ends_with(part);
        }
        match left.find(part) {
            Some(at) => left = &left[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// The differences no allowance covers.
pub fn unexplained(
    release: &str,
    differences: Vec<Difference>,
    allowances: &[Allowance],
) -> Vec<Difference> {
    differences
        .into_iter()
        .filter(|d| !allowances.iter().any(|a| a.covers(release, d)))
        .collect()
}

/// The differences, one per line: `FRAME  MEMBER: real VALUE | fake VALUE`.
pub fn render(differences: &[Difference]) -> String {
    let shorten = |value: &str| -> String {
        if value.chars().count() > 120 {
            format!("{}...", value.chars().take(117).collect::<String>())
        } else {
            value.to_string()
        }
    };
    differences
        .iter()
        .map(|d| {
            format!(
                "  {}  {}:\n      real {}\n      fake {}\n",
                d.frame,
                d.member,
                shorten(&d.real),
                shorten(&d.fake)
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(kind: &str, data: Value) -> Value {
        json!({"jsonrpc": "2.0", "method": "session.event",
               "params": {"sessionId": "s-1", "event": {"type": kind, "seq": 3, "time": 17, "data": data}}})
    }

    #[test]
    fn volatile_leaves_become_placeholders_and_the_rest_stays() {
        let normalizer = Normalizer::default().with_root("/tmp/w1", "<world>");
        let frame = event(
            "tool/result",
            json!({"turn": 1, "durationMs": 12, "id": "b7d4eb35-1003-43d7-af7c-db4d9c1f4410",
                   "path": "/tmp/w1/project/index.html", "text": "hello",
                   "callId": "toolu_1_0", "startedAt": "2026-12-05T16:33:41.000Z"}),
        );
        let data = &normalizer.normalize(&frame)["params"]["event"];
        assert_eq!(data["seq"], NUMBER);
        assert_eq!(data["time"], NUMBER);
        let data = &data["data"];
        assert_eq!(data["turn"], 1);
        assert_eq!(data["durationMs"], NUMBER);
        assert_eq!(data["id"], UUID);
        assert_eq!(data["path"], "<world>/project/index.html");
        assert_eq!(data["text"], TEXT);
        assert_eq!(data["callId"], "toolu_1_0");
        assert_eq!(data["startedAt"], "<time>");
    }

    #[test]
    fn uuids_inside_strings_are_replaced_but_not_longer_hex_runs() {
        assert_eq!(
            replace_uuids("session-0b7d4eb3-1003-43d7-af7c-db4d9c1f4410 x"),
            "session-0b7d4eb3-1003-43d7-af7c-db4d9c1f4410 x"
                .replace("0b7d4eb3-1003-43d7-af7c-db4d9c1f4410", UUID)
        );
        assert_eq!(
            replace_uuids("ab7d4eb35-1003-43d7-af7c-db4d9c1f4410"),
            "ab7d4eb35-1003-43d7-af7c-db4d9c1f4410"
        );
        assert_eq!(replace_uuids("naïve café"), "naïve café");
    }

    #[test]
    fn runs_of_equal_array_items_merge_but_different_ones_stay() {
        let normalizer = Normalizer::default();
        let value = json!({"texts": ["a", "b", "c"], "dt": [1, 2], "kinds": ["x", "x", "y"],
                           "blocks": [{"text": "a"}, {"text": "b"}], "seqs": []});
        assert_eq!(
            normalizer.normalize(&value),
            json!({"texts": TEXT, "dt": NUMBER, "kinds": ["x", "y"], "blocks": [{"text": TEXT}],
                   "seqs": NUMBER})
        );
    }

    #[test]
    fn a_missing_member_and_a_type_change_are_each_one_difference_with_their_path() {
        let real = vec![event(
            "assistant/message",
            json!({"usage": {"inputTokens": 3}, "turn": 1}),
        )];
        let fake = vec![event("assistant/message", json!({"turn": "1"}))];
        let normalizer = Normalizer::default();
        let differences = compare(
            &normalize_frames(&normalizer, &real),
            &normalize_frames(&normalizer, &fake),
        );
        assert_eq!(
            differences,
            vec![
                Difference {
                    frame: "event s-1 assistant/message".into(),
                    member: "params.event.data.turn".into(),
                    real: "1".into(),
                    fake: "\"1\"".into(),
                },
                Difference {
                    frame: "event s-1 assistant/message".into(),
                    member: "params.event.data.usage.inputTokens".into(),
                    real: format!("\"{NUMBER}\""),
                    fake: ABSENT.into(),
                },
            ]
        );
        assert!(render(&differences).contains("params.event.data.usage.inputTokens"));
    }

    #[test]
    fn a_frame_only_one_side_sends_is_one_difference_and_the_rest_still_aligns() {
        let status = json!({"jsonrpc": "2.0", "method": "session.status",
                            "params": {"sessionId": "s-1", "status": "idle"}});
        let real = vec![event("turn/start", json!({})), status.clone()];
        let fake = vec![
            event("turn/start", json!({})),
            event("subagent/finished", json!({})),
            status,
        ];
        let differences = compare(&real, &fake);
        assert_eq!(differences.len(), 1, "{differences:?}");
        assert_eq!(differences[0].frame, "event s-1 subagent/finished");
        assert_eq!(differences[0].member, WHOLE_FRAME);
        assert_eq!(differences[0].real, ABSENT);
    }

    #[test]
    fn the_same_frames_in_another_order_differ() {
        let a = event("a", json!({}));
        let b = event("b", json!({}));
        let differences = compare(&[a.clone(), b.clone()], &[b, a]);
        assert_eq!(differences.len(), 2, "{differences:?}");
    }

    #[test]
    fn equal_consecutive_chunks_merge() {
        let chunk = event(
            "assistant/chunk",
            json!({"chunk": {"type": "text", "text": "a"}}),
        );
        let other = event(
            "assistant/chunk",
            json!({"chunk": {"type": "text", "text": "bc"}}),
        );
        assert_eq!(
            normalize_frames(&Normalizer::default(), &[chunk, other]).len(),
            1
        );
    }

    #[test]
    fn allowances_come_from_the_table_and_cover_by_glob() {
        let doc = "# x\n## Other\n| a | b |\n## Differences fake-dsh keeps\n\n\
                   | release | frame | member | reason |\n|---|---|---|---|\n\
                   | `0.2.*` | `event * request/header` | `params.event.data.header.tools*` | \
                   the catalogue is the runtime's |\n## Next\n| x | y |\n";
        let allowances = parse_allowances(doc).unwrap();
        assert_eq!(allowances.len(), 1);
        assert_eq!(allowances[0].line, 8);
        let difference = Difference {
            frame: "event s-1 request/header".into(),
            member: "params.event.data.header.tools[3].name".into(),
            real: "\"read\"".into(),
            fake: ABSENT.into(),
        };
        assert!(allowances[0].covers("0.2.1", &difference));
        assert!(!allowances[0].covers("0.1.5", &difference));
        assert!(unexplained("0.2.1", vec![difference], &allowances).is_empty());
    }

    #[test]
    fn a_malformed_allowance_row_names_its_line() {
        let doc = "## Differences fake-dsh keeps\n| release | frame | member | reason |\n\
                   | 0.2.1 | `x` | `y` | why |\n";
        let error = parse_allowances(doc).unwrap_err();
        assert!(error.starts_with("line 3:"), "{error}");
        let doc = "## Differences fake-dsh keeps\n| `0.2.1` | `x` | `y` |  |\n";
        assert!(parse_allowances(doc).unwrap_err().starts_with("line 2:"));
        assert!(parse_allowances("## Other\n").is_err());
    }

    #[test]
    fn glob_matches_whole_strings() {
        assert!(glob("a*c", "abbc"));
        assert!(glob("*", ""));
        assert!(glob("a*b*c", "a-b-c"));
        assert!(!glob("a*c", "abcd"));
        assert!(!glob("abc", "ab"));
        assert!(glob("*.usage*", "params.event.data.usage.inputTokens"));
    }
}
