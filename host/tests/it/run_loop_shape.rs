//! The reference host is the code adapter authors copy (issues 17 and 25): the run loop reads as
//! the spec's steps, each a small named function, and holds no deliberate bug: every mutant hook in
//! the host's modules is a `#[cfg(feature = "mutants")]` statement (the default build, which the
//! released driver is, compiles them out), and the deviant code lives in the mutant modules.

const RUN_RS: &str = include_str!("../../src/run.rs");

/// The host's modules an adapter author reads, `(file, text)`; the mutant modules and the mutant
/// driver are left out.
const HOST_MODULES: [(&str, &str); 15] = [
    ("codes.rs", include_str!("../../src/codes.rs")),
    ("discovery.rs", include_str!("../../src/discovery.rs")),
    ("driver.rs", include_str!("../../src/driver.rs")),
    ("events.rs", include_str!("../../src/events.rs")),
    ("host.rs", include_str!("../../src/host.rs")),
    ("models.rs", include_str!("../../src/models.rs")),
    ("process.rs", include_str!("../../src/process.rs")),
    ("redact.rs", include_str!("../../src/redact.rs")),
    ("run.rs", RUN_RS),
    ("run/pipes.rs", include_str!("../../src/run/pipes.rs")),
    (
        "session_store.rs",
        include_str!("../../src/session_store.rs"),
    ),
    ("setup.rs", include_str!("../../src/setup.rs")),
    (
        "short_command.rs",
        include_str!("../../src/short_command.rs"),
    ),
    (
        "stderr_capture.rs",
        include_str!("../../src/stderr_capture.rs"),
    ),
    (
        "bin/dsh-host-driver.rs",
        include_str!("../../src/bin/dsh-host-driver.rs"),
    ),
];

const GATE: &str = "#[cfg(feature = \"mutants\")]";

/// The lines of `text` that are code under a [`GATE`]: each gate covers the item, statement or
/// match arm that follows it, up to the first line at the gate's indentation that ends it.
fn gated_lines(text: &str) -> Vec<bool> {
    let lines: Vec<&str> = text.lines().collect();
    let mut gated = vec![false; lines.len()];
    let mut index = 0;
    while index < lines.len() {
        let line = lines[index];
        if line.trim() != GATE {
            index += 1;
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        gated[index] = true;
        index += 1;
        while index < lines.len() {
            gated[index] = true;
            let candidate = lines[index];
            let own_indent = candidate.len() - candidate.trim_start().len();
            let trimmed = candidate.trim_end();
            index += 1;
            if own_indent == indent
                && [";", "}", "},", ","]
                    .iter()
                    .any(|end| trimmed.ends_with(end))
            {
                break;
            }
        }
    }
    gated
}

#[test]
fn every_mutant_hook_is_gated_by_the_feature() {
    let mut loose = Vec::new();
    for (file, text) in HOST_MODULES {
        let gated = gated_lines(text);
        for (number, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if code.to_lowercase().contains("mutant") && !gated[number] {
                loose.push(format!("{file}:{}: {}", number + 1, line.trim()));
            }
        }
    }
    assert!(
        loose.is_empty(),
        "mutant code outside a `{GATE}` statement: {loose:#?}"
    );
}

#[test]
fn the_gate_check_sees_a_loose_hook() {
    let text = "fn f() {\n    #[cfg(feature = \"mutants\")]\n    let x = self.mutant_hook(x);\n    let y = mutant_thing();\n}\n";
    let gated = gated_lines(text);
    assert_eq!(gated, vec![false, true, true, false, false]);
}

/// The longest a function of the run loop may be, in lines (a screen).
const MAX_FUNCTION_LINES: usize = 60;

#[test]
fn no_mutant_is_named_in_the_run_loop() {
    let named: Vec<&str> = RUN_RS
        .lines()
        .filter(|line| line.contains("Mutant::") || line.contains("mutant("))
        .collect();
    assert!(named.is_empty(), "mutants named in run.rs: {named:#?}");
}

#[test]
fn an_attempt_is_the_spec_steps_in_order() {
    let attempt = RUN_RS
        .split("    async fn attempt(")
        .nth(1)
        .and_then(|rest| rest.split("\n    }\n").next())
        .expect("run.rs has `attempt`");
    let steps = [
        "spawn_runtime",
        "await_ready",
        "decide_session",
        "send_execute",
        "stream",
        "after_result",
        "reap",
        "conclude",
    ];
    let positions: Vec<usize> = steps
        .iter()
        .map(|step| {
            attempt
                .find(&format!(".{step}("))
                .unwrap_or_else(|| panic!("`attempt` does not call {step}"))
        })
        .collect();
    assert!(
        positions.windows(2).all(|pair| pair[0] < pair[1]),
        "the steps are called in the spec's order: {steps:?} at {positions:?}"
    );
}

#[test]
fn every_function_of_the_run_loop_fits_a_screen() {
    let lines: Vec<&str> = RUN_RS.lines().collect();
    let mut too_long = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let is_fn = [
            "fn ",
            "async fn ",
            "pub fn ",
            "pub async fn ",
            "pub(crate) fn ",
        ]
        .iter()
        .any(|prefix| trimmed.starts_with(prefix));
        if !is_fn || trimmed.ends_with(';') {
            continue;
        }
        let close = format!("{}}}", " ".repeat(indent));
        let length = lines[start..]
            .iter()
            .position(|candidate| *candidate == close)
            .map_or(usize::MAX, |end| end + 1);
        if length > MAX_FUNCTION_LINES {
            too_long.push(format!("{} ({length} lines)", trimmed));
        }
    }
    assert!(
        too_long.is_empty(),
        "functions longer than a screen: {too_long:#?}"
    );
}
