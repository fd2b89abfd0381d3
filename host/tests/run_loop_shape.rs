//! The reference host's run loop is the code adapter authors copy (issue 17 item 7): it reads as
//! the spec's steps, each a small named function, and holds no deliberate bug (the mutants reach
//! it only through the seam in `mutants.rs`).

const RUN_RS: &str = include_str!("../src/run.rs");

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
