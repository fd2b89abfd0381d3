//! Spec 6: "OD launches `dsh --profile open-design --stdio` for a run" — every `--stdio` process of
//! the run names the profile the case's world installed (`--profile <name>`, the dialect's:
//! `open-design`, or `multica` under `run --dialect multica`). Other arguments are judged by their
//! own rules (a resume id in argv by `s7.resume-not-cli-argument`).

use super::{RunEvidence, Violation};
use dsh_engine::journal::Entry;

pub const RULE_LAUNCH_STDIO: &str = "s6.launch-stdio";

pub fn check(evidence: &RunEvidence) -> Vec<Violation> {
    let profile = evidence.world.profile();
    evidence
        .entries
        .iter()
        .filter(|entry| entry.event() == "start")
        .filter_map(Entry::argv)
        .filter(|argv| argv.iter().any(|arg| arg == "--stdio"))
        .find(|argv| !names_profile(argv, profile))
        .map(|argv| {
            let args = argv.get(1..).unwrap_or_default().join(" ");
            Violation::new(
                RULE_LAUNCH_STDIO,
                format!(
                    "a run's dsh was launched with `{args}`; expected `--profile {profile} --stdio` (the profile this case's Harness home holds)"
                ),
            )
        })
        .into_iter()
        .collect()
}

/// Whether `argv` holds `--profile <profile>` (or `--profile=<profile>`).
fn names_profile(argv: &[String], profile: &str) -> bool {
    argv.windows(2)
        .any(|pair| pair[0] == "--profile" && pair[1] == profile)
        || argv
            .iter()
            .any(|arg| arg.strip_prefix("--profile=") == Some(profile))
}

#[cfg(test)]
mod tests {
    use super::names_profile;

    #[test]
    fn the_profile_must_be_the_worlds() {
        let argv = |args: &[&str]| -> Vec<String> { args.iter().map(|a| a.to_string()).collect() };
        assert!(names_profile(
            &argv(&["dsh", "--profile", "multica", "--stdio"]),
            "multica"
        ));
        assert!(names_profile(
            &argv(&["dsh", "--stdio", "--profile=multica"]),
            "multica"
        ));
        assert!(!names_profile(
            &argv(&["dsh", "--profile", "open-design", "--stdio"]),
            "multica"
        ));
        assert!(!names_profile(
            &argv(&["dsh", "--stdio", "multica"]),
            "multica"
        ));
    }
}
