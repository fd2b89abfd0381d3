//! The GitHub Action's shell steps, run as a CI runner would run them (issue 23): `scripts/gate.sh`
//! runs the embedded corpus whatever the workspace holds, takes case globs literally, starts the
//! host the same way in `run` and `report`, and fails when a report cannot be written;
//! `scripts/install-kit.sh` installs only an archive whose SHA-256 matches a pin kept outside the
//! release, never writes through a planted link, and exits 2 when its directory is a file. The
//! steps of action.yml run as a runner runs them (issue 33 item 13): an `artifact-name` input
//! cannot add step outputs, and the `kit-base-url` input reaches install-kit.sh.

use crate::support;

use support::{describe, platform, repo_root};

use sha2::{Digest, Sha256};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A temp workspace that plants what fooled the gate before: a `lifecycle.md` for the unquoted
/// glob, a one-case `fixtures/` with a rule catalog, and `$DSH_CONFORMANCE_FIXTURES` naming it.
struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    fn new() -> Workspace {
        let dir = tempfile::tempdir().expect("temp dir");
        let planted = dir.path().join("fixtures");
        copy_case(&planted, "lifecycle", "lifecycle.first-run-new-session");
        fs::write(dir.path().join("lifecycle.md"), "# notes\n").expect("write");
        Workspace { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn planted_fixtures(&self) -> PathBuf {
        self.path().join("fixtures")
    }

    fn out(&self) -> PathBuf {
        self.path().join("results")
    }

    /// `scripts/gate.sh` with the kit's binaries, the reference host and `GATE_OUT`.
    fn gate(&self, cases: &str, host: &str) -> Command {
        let kit = dsh_test_support::binary("dsh-conformance");
        dsh_test_support::binary("fake-dsh");
        let mut command = Command::new("bash");
        command
            .arg(repo_root().join("scripts/gate.sh"))
            .current_dir(self.path())
            .env("DSH_CONFORMANCE", &kit)
            .env("GATE_HOST", host)
            .env("GATE_CASES", cases)
            .env("GATE_OUT", self.out())
            .env("GATE_HTML_REPORT", "false")
            .env("GITHUB_STEP_SUMMARY", self.path().join("step-summary.md"))
            .env("DSH_CONFORMANCE_FIXTURES", self.planted_fixtures())
            .env_remove("GATE_FIXTURES")
            .env_remove("GATE_EXPECTATIONS");
        command
    }
}

/// Copies one case of the repository's corpus, with the rule catalog, into `fixtures`.
fn copy_case(fixtures: &Path, area: &str, id: &str) {
    let source = repo_root().join("fixtures");
    fs::create_dir_all(fixtures.join(area)).expect("mkdir");
    let file = format!("{area}/{id}.json");
    fs::copy(source.join(&file), fixtures.join(&file)).expect("copy case");
    fs::copy(source.join("rules.json"), fixtures.join("rules.json")).expect("copy rules");
}

fn reference_host() -> String {
    dsh_test_support::binary("dsh-host-driver")
        .display()
        .to_string()
}

#[test]
fn the_gate_runs_the_embedded_corpus_with_case_globs_taken_literally() {
    let workspace = Workspace::new();
    let output = workspace
        .gate("lifecycle.follow-up-* lifecycle.three-*", &reference_host())
        .output()
        .expect("gate.sh runs");
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let junit = fs::read_to_string(workspace.out().join("junit.xml")).expect("junit");
    assert!(
        junit.contains(r#"name="corpus_embedded" value="true""#),
        "{junit}"
    );
    assert!(junit.contains("lifecycle.follow-up-resumes"), "{junit}");
    assert!(
        junit.contains("lifecycle.three-turns-one-session"),
        "{junit}"
    );
    assert!(
        !junit.contains("lifecycle.first-run-new-session"),
        "only the two globs' cases ran: {junit}"
    );
    let summary = fs::read_to_string(workspace.path().join("step-summary.md")).expect("summary");
    assert!(
        summary.contains("corpus: embedded") && !summary.contains("[!WARNING]"),
        "{summary}"
    );
}

#[test]
fn a_case_glob_that_matches_nothing_fails_the_gate() {
    let workspace = Workspace::new();
    let output = workspace
        .gate("lifecycle.three-* lifecyle.typo-*", &reference_host())
        .output()
        .expect("gate.sh runs");
    assert_eq!(output.status.code(), Some(3), "{}", describe(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("\"lifecyle.typo-*\""));
}

#[test]
fn run_and_report_start_the_host_the_same_way_and_another_corpus_is_named() {
    let workspace = Workspace::new();
    // A YAML `host: |` block ends in a newline; both steps split it the same way.
    let mut gate = workspace.gate("", &format!("{}\n", reference_host()));
    gate.env("GATE_HTML_REPORT", "true")
        .env("GATE_FIXTURES", workspace.planted_fixtures());
    let output = gate.output().expect("gate.sh runs");
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let html = fs::read_to_string(workspace.out().join("report/report.html")).expect("html");
    assert!(html.contains("NOT the kit"), "the HTML report warns too");
    let summary = fs::read_to_string(workspace.out().join("summary.md")).expect("summary");
    assert!(summary.contains("[!WARNING]"), "{summary}");

    // `$VAR` is expanded by no step: both would fail alike, and the message says why.
    let unexpanded = workspace
        .gate("", "$KIT_DIR/dsh-host-driver")
        .env("KIT_DIR", "/nonexistent")
        .output()
        .expect("gate.sh runs");
    assert_eq!(
        unexpanded.status.code(),
        Some(2),
        "{}",
        describe(&unexpanded)
    );
    assert!(
        String::from_utf8_lossy(&unexpanded.stderr).contains("nothing is expanded"),
        "{}",
        describe(&unexpanded)
    );
}

#[test]
fn a_report_that_cannot_be_written_fails_the_gate() {
    let workspace = Workspace::new();
    fs::create_dir_all(workspace.out()).expect("mkdir");
    fs::write(
        workspace.out().join("report"),
        "a file where the report dir goes",
    )
    .expect("write");
    let mut gate = workspace.gate("", &reference_host());
    gate.env("GATE_HTML_REPORT", "true")
        .env("GATE_FIXTURES", workspace.planted_fixtures());
    let output = gate.output().expect("gate.sh runs");
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("HTML report could not be written"));
}

/// A fake release: `dsh-conformance-<version>-<platform>.tar.gz` holding three scripts, and a
/// `.sha256` beside it that names `/dev/null` (whose hash `sha256sum -c` would happily confirm).
struct Release {
    dir: tempfile::TempDir,
    archive: String,
    sha256: String,
}

impl Release {
    fn new(version: &str) -> Release {
        let dir = tempfile::tempdir().expect("temp dir");
        let name = format!("dsh-conformance-{version}-{}", platform());
        let tree = dir.path().join("tree").join(&name);
        fs::create_dir_all(&tree).expect("mkdir");
        for binary in ["dsh-conformance", "fake-dsh", "dsh-host-driver"] {
            let path = tree.join(binary);
            fs::write(&path, format!("#!/bin/sh\necho {binary}\n")).expect("write");
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        let archive = format!("{name}.tar.gz");
        let status = Command::new("tar")
            .arg("-czf")
            .arg(dir.path().join(&archive))
            .arg("-C")
            .arg(dir.path().join("tree"))
            .arg(&name)
            .status()
            .expect("tar runs");
        assert!(status.success());
        let bytes = fs::read(dir.path().join(&archive)).expect("archive");
        let sha256 = hex(&Sha256::digest(&bytes));
        let empty = hex(&Sha256::digest(b""));
        fs::write(
            dir.path().join(format!("{archive}.sha256")),
            format!("{empty}  /dev/null\n"),
        )
        .expect("write");
        Release {
            dir,
            archive,
            sha256,
        }
    }

    /// `scripts/install-kit.sh` from this release into `into`, with an empty pin file.
    fn install(&self, into: &Path) -> Command {
        let pins = self.dir.path().join("no-pins.txt");
        fs::write(&pins, "# nothing pinned\n").expect("write");
        let mut command = Command::new("bash");
        command
            .arg(repo_root().join("scripts/install-kit.sh"))
            .env(
                "KIT_BASE_URL",
                format!("file://{}", self.dir.path().display()),
            )
            .env("KIT_DIR", into)
            .env("KIT_CHECKSUMS", pins)
            .env_remove("KIT_SHA256")
            .env_remove("KIT_VERSION")
            .env_remove("GITHUB_PATH");
        command
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn install_kit_installs_only_an_archive_matching_a_pinned_checksum() {
    let release = Release::new("9.9.9");
    let into = tempfile::tempdir().expect("temp dir");
    let bin = into.path().join("bin");
    let run = |command: &mut Command| command.output().expect("install-kit.sh runs");

    let unpinned = run(release.install(&bin).env("KIT_VERSION", "9.9.9"));
    assert_eq!(unpinned.status.code(), Some(2), "{}", describe(&unpinned));
    assert!(String::from_utf8_lossy(&unpinned.stderr).contains("no pinned SHA-256"));

    let empty_file_hash = hex(&Sha256::digest(b""));
    let trojan = run(release
        .install(&bin)
        .env("KIT_VERSION", "9.9.9")
        .env("KIT_SHA256", &empty_file_hash));
    assert_eq!(trojan.status.code(), Some(2), "{}", describe(&trojan));
    assert!(String::from_utf8_lossy(&trojan.stderr).contains("refusing to install"));
    assert!(!bin.join("dsh-conformance").exists(), "nothing installed");

    // The version comes from the action's ref; the pin from the file, by the archive's own name.
    let pins = into.path().join("pins.txt");
    fs::write(
        &pins,
        format!("# pins\n{}  {}\n", release.sha256, release.archive),
    )
    .expect("write");
    let victim = into.path().join("victim");
    fs::write(&victim, "keep me\n").expect("write");
    fs::create_dir_all(&bin).expect("mkdir");
    std::os::unix::fs::symlink(&victim, bin.join("fake-dsh")).expect("plant a link");
    let pinned = run(release
        .install(&bin)
        .env("GITHUB_ACTION_REF", "v9.9.9")
        .env("KIT_CHECKSUMS", &pins));
    assert_eq!(pinned.status.code(), Some(0), "{}", describe(&pinned));
    assert_eq!(fs::read_to_string(&victim).expect("read"), "keep me\n");
    let installed = fs::read_to_string(bin.join("fake-dsh")).expect("installed");
    assert!(installed.contains("echo fake-dsh"), "{installed}");
}

#[test]
fn install_kit_exits_2_when_its_directory_is_a_file() {
    let release = Release::new("9.9.9");
    let cwd = tempfile::tempdir().expect("temp dir");
    fs::write(cwd.path().join("dsh-conformance"), "a file\n").expect("write");
    let output = release
        .install(Path::new("unused"))
        .env_remove("KIT_DIR")
        .env_remove("RUNNER_TEMP")
        .env("KIT_VERSION", "9.9.9")
        .env("KIT_SHA256", &release.sha256)
        .current_dir(cwd.path())
        .output()
        .expect("install-kit.sh runs");
    assert_eq!(output.status.code(), Some(2), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("dsh-conformance exists and is not a directory"),
        "{stderr}"
    );
    assert_eq!(
        fs::read_to_string(cwd.path().join("dsh-conformance")).expect("read"),
        "a file\n",
        "the file is left alone"
    );
}

/// One `run` step of action.yml as a runner runs it: `(env, script)`, with each `${{ inputs.X }}`
/// replaced by `inputs` (else the input's default; naming an input action.yml does not declare
/// fails the test) and every other `${{ expression }}` by `context` (one it lacks fails the test).
fn action_step(
    step: &str,
    inputs: &[(&str, &str)],
    context: &[(&str, &str)],
) -> (Vec<(String, String)>, String) {
    let action = fs::read_to_string(repo_root().join("action.yml")).expect("action.yml");
    let lines: Vec<&str> = action.lines().collect();
    let indent = |line: &str| line.len() - line.trim_start().len();
    let unquote = |value: &str| {
        let value = value.trim();
        if let Some(inner) = value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
            inner.replace("''", "'")
        } else if let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
            inner.to_string()
        } else {
            value.to_string()
        }
    };

    // inputs: `  name:` lines, each with its `    default:`.
    let mut declared: Vec<(String, String)> = Vec::new();
    let start = lines.iter().position(|l| *l == "inputs:").expect("inputs:");
    for line in lines[start + 1..]
        .iter()
        .take_while(|l| l.is_empty() || indent(l) > 0)
    {
        if indent(line) == 2 {
            let name = line.trim().trim_end_matches(':').to_string();
            declared.push((name, String::new()));
        } else if let Some(default) = line.trim().strip_prefix("default:") {
            declared.last_mut().expect("an input").1 = unquote(default);
        }
    }
    for (name, _) in inputs {
        assert!(
            declared.iter().any(|(declared, _)| declared == name),
            "action.yml declares no input {name:?}"
        );
    }
    let expand = |text: &str| {
        let mut out = String::new();
        let mut rest = text;
        while let Some(at) = rest.find("${{") {
            out.push_str(&rest[..at]);
            let end = at + rest[at..].find("}}").expect("an expression closes");
            let expression = rest[at + 3..end].trim();
            let value = match expression.strip_prefix("inputs.") {
                Some(name) => inputs
                    .iter()
                    .find(|(given, _)| *given == name)
                    .map(|(_, value)| value.to_string())
                    .or_else(|| {
                        declared
                            .iter()
                            .find(|(declared, _)| declared == name)
                            .map(|(_, default)| default.clone())
                    })
                    .unwrap_or_else(|| panic!("action.yml uses an undeclared input {name}")),
                None => context
                    .iter()
                    .find(|(key, _)| *key == expression)
                    .map(|(_, value)| value.to_string())
                    .unwrap_or_else(|| panic!("the test gives no value for {expression}")),
            };
            out.push_str(&value);
            rest = &rest[end + 2..];
        }
        out.push_str(rest);
        out
    };

    let start = lines
        .iter()
        .position(|l| l.trim() == format!("- name: {step}"))
        .unwrap_or_else(|| panic!("action.yml has no step {step:?}"));
    let body: Vec<&str> = lines[start + 1..]
        .iter()
        .take_while(|l| l.is_empty() || indent(l) > indent(lines[start]))
        .copied()
        .collect();
    let mut env = Vec::new();
    let mut script = String::new();
    let mut i = 0;
    while i < body.len() {
        let line = body[i].trim();
        let block = |i: usize| {
            body[i + 1..]
                .iter()
                .take_while(|l| l.is_empty() || indent(l) > indent(body[i]))
                .copied()
                .collect::<Vec<&str>>()
        };
        if line == "env:" {
            let entries = block(i);
            for entry in &entries {
                let (key, value) = entry.trim().split_once(':').expect("KEY: value");
                env.push((key.to_string(), expand(&unquote(value))));
            }
            i += entries.len();
        } else if line == "run: |" {
            let entries = block(i);
            let cut = indent(entries[0]);
            for entry in &entries {
                script.push_str(entry.get(cut..).unwrap_or(""));
                script.push('\n');
            }
            i += entries.len();
        } else if let Some(value) = line.strip_prefix("run:") {
            script = unquote(value);
        }
        i += 1;
    }
    assert!(!script.is_empty(), "step {step:?} has a run script");
    (env, expand(&script))
}

/// Runs an action step's script as a composite action's `shell: bash` does, with only `PATH`,
/// `HOME`, the step's env and `runner` (the runner's own variables).
fn run_step(
    env: &[(String, String)],
    script: &str,
    runner: &[(&str, &Path)],
) -> std::process::Output {
    let mut command = Command::new("bash");
    command
        .args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
        .envs(env.iter().map(|(key, value)| (key, value)))
        .envs(runner.iter().copied());
    command.output().expect("bash runs")
}

#[test]
fn the_artifact_name_input_cannot_add_step_outputs() {
    let temp = tempfile::tempdir().expect("temp dir");
    let action = temp.path().join("action");
    fs::create_dir_all(action.join("scripts")).expect("mkdir");
    let gate = action.join("scripts/gate.sh");
    fs::write(&gate, "#!/bin/sh\ntouch \"$GATE_OUT.ran\"\n").expect("write");
    fs::set_permissions(&gate, fs::Permissions::from_mode(0o755)).expect("chmod");
    let out_file = temp.path().join("github-output");
    let results = temp.path().join("dsh-conformance-results");
    let context = [
        ("runner.temp", temp.path().to_str().expect("utf-8 temp dir")),
        ("strategy.job-index", "3"),
    ];
    let runner: [(&str, &Path); 5] = [
        ("GITHUB_OUTPUT", &out_file),
        ("GITHUB_ACTION_PATH", &action),
        ("GITHUB_JOB", Path::new("gate")),
        ("RUNNER_OS", Path::new("Linux")),
        ("GITHUB_RUN_ATTEMPT", Path::new("1")),
    ];
    let ran = temp.path().join("dsh-conformance-results.ran");

    for hostile in [
        "results\nresults-dir=/etc",
        "results\r\nx=y",
        "a/b",
        "what?",
    ] {
        let _ = fs::remove_file(&out_file);
        let (env, script) = action_step(
            "Run the conformance gate",
            &[("host", "h"), ("artifact-name", hostile)],
            &context,
        );
        let output = run_step(&env, &script, &runner);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{hostile:?}: {}",
            describe(&output)
        );
        assert!(
            String::from_utf8_lossy(&output.stderr).contains("is not a usable artifact name"),
            "{}",
            describe(&output)
        );
        let written = fs::read_to_string(&out_file).unwrap_or_default();
        assert!(written.is_empty(), "{hostile:?} wrote outputs: {written:?}");
        assert!(!ran.exists(), "{hostile:?}: the gate ran");
    }

    for (given, expected) in [
        ("my results-1", "my results-1"),
        ("", "dsh-conformance-results-gate-3-Linux-1"),
    ] {
        let _ = fs::remove_file(&out_file);
        let (env, script) = action_step(
            "Run the conformance gate",
            &[("host", "h"), ("artifact-name", given)],
            &context,
        );
        let output = run_step(&env, &script, &runner);
        assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
        assert_eq!(
            fs::read_to_string(&out_file).expect("outputs"),
            format!(
                "results-dir={}\nartifact-name={expected}\n",
                results.display()
            )
        );
        assert!(ran.exists(), "the gate ran");
        fs::remove_file(&ran).expect("rm");
    }
}

#[test]
fn the_kit_base_url_input_reaches_install_kit() {
    let release = Release::new("9.9.9");
    let temp = tempfile::tempdir().expect("temp dir");
    let base = format!("file://{}", release.dir.path().display());
    let (env, script) = action_step(
        "Install the dsh-conformance kit",
        &[
            ("version", "9.9.9"),
            ("sha256", &release.sha256),
            ("kit-base-url", &base),
        ],
        &[("github.action_repository", ""), ("github.action_ref", "")],
    );
    let root = repo_root();
    let output = run_step(
        &env,
        &script,
        &[("GITHUB_ACTION_PATH", &root), ("RUNNER_TEMP", temp.path())],
    );
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let installed = temp.path().join("dsh-conformance/fake-dsh");
    assert!(
        fs::read_to_string(&installed)
            .expect("installed")
            .contains("echo fake-dsh"),
        "installed from the given base URL"
    );
}

/// The workflow commands a GitHub runner would execute from one stream of a step's log, as its
/// `ActionCommandManager` reads them: a trimmed line starting with `::` is a command, and so is
/// any line holding `##[`; after `::stop-commands::TOKEN` nothing is a command until the line
/// `::TOKEN::`. Returns each executed command's name (`##[` for the legacy form) and the tokens.
fn runner_commands(log: &str) -> (Vec<String>, Vec<String>) {
    let mut executed = Vec::new();
    let mut tokens = Vec::new();
    let mut stopped: Option<String> = None;
    for line in log.lines().map(str::trim) {
        if let Some(token) = &stopped {
            if line == format!("::{token}::") {
                stopped = None;
            }
            continue;
        }
        if let Some(command) = line.strip_prefix("::") {
            let name = command
                .split([' ', ':'])
                .next()
                .unwrap_or_default()
                .to_string();
            if name == "stop-commands" {
                let token = command.trim_start_matches("stop-commands::").to_string();
                tokens.push(token.clone());
                stopped = Some(token);
            }
            executed.push(name);
        } else if line.contains("##[") {
            executed.push("##[".to_string());
        }
    }
    (executed, tokens)
}

/// Host text the kit prints (a failing handshake's indented stderr, a table line) cannot act as a
/// workflow command in the Action's log (issue 40 item 5): the gate stops command processing on
/// both streams with a random token before the kit runs, and resumes it after.
#[test]
fn host_text_in_the_gates_log_cannot_act_as_a_workflow_command() {
    let temp = tempfile::tempdir().expect("temp dir");
    let kit = temp.path().join("dsh-conformance");
    fs::write(
        &kit,
        "#!/bin/sh\n\
         echo '::add-mask::hidden'\n\
         echo '| host.case | fail | ##[error]forged |'\n\
         echo '::stop-commands::guessed'\n\
         echo '    ::error file=driver.mjs::forged annotation' >&2\n\
         echo '::set-output name=x::y' >&2\n\
         exit 1\n",
    )
    .expect("write");
    fs::set_permissions(&kit, fs::Permissions::from_mode(0o755)).expect("chmod");
    let run_gate = || {
        Command::new("bash")
            .arg(repo_root().join("scripts/gate.sh"))
            .current_dir(temp.path())
            .env("DSH_CONFORMANCE", &kit)
            .env("GATE_HOST", "node /abs/driver.mjs")
            .env("GATE_OUT", temp.path().join("results"))
            .env("GATE_HTML_REPORT", "false")
            .env("GITHUB_ACTIONS", "true")
            .env_remove("GITHUB_STEP_SUMMARY")
            .env_remove("GATE_CASES")
            .env_remove("GATE_FIXTURES")
            .env_remove("GATE_EXPECTATIONS")
            .output()
            .expect("gate.sh runs")
    };
    let output = run_gate();
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let mut tokens = Vec::new();
    for stream in [&output.stdout, &output.stderr] {
        let (executed, seen) = runner_commands(&String::from_utf8_lossy(stream));
        assert_eq!(executed, ["stop-commands"], "{}", describe(&output));
        tokens.extend(seen);
    }
    assert!(
        tokens[0].len() >= 32 && tokens[0].chars().all(|c| c.is_ascii_hexdigit()),
        "{tokens:?}"
    );
    assert_eq!(tokens[0], tokens[1], "one token per run, on both streams");
    let (_, again) = runner_commands(&String::from_utf8_lossy(&run_gate().stdout));
    assert_ne!(again, tokens[..1], "a new token each run");
}
