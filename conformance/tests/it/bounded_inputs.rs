//! Every input file a user names is read bounded (issue 23 item 14): `merge`, `summary` and `diff`
//! reports, `run --expectations`, `report --config` and `model-server --script`. An endless
//! device (`/dev/zero`, which used to run until out of memory) and a huge sparse file both exit 2
//! with an error naming the file and the bound.

use assert_cmd::Command;
use dsh_report::document::ReportDocument;

/// Runs `dsh-conformance ARGS` and returns its stderr, asserting exit 2.
fn refused(args: &[&str]) -> String {
    let output = Command::cargo_bin("dsh-conformance")
        .unwrap()
        .args(args)
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    stderr
}

/// Every command with `input` in the place of each input file, one place at a time.
fn commands(input: &str, other: &str) -> Vec<Vec<String>> {
    let list: [&[&str]; 8] = [
        &["merge", "--out", "OUT", input],
        &["merge", "--out", "OUT", other, input],
        &["summary", input],
        &["diff", input, other],
        &["diff", other, input],
        &["run", "--host", "true", "--expectations", input],
        &["report", "--config", input],
        &["model-server", "--script", input],
    ];
    list.iter()
        .map(|args| args.iter().map(|arg| arg.to_string()).collect())
        .collect()
}

fn each_refuses(input: &str, dir: &std::path::Path) {
    // A valid (empty) report, so only `input` is wrong.
    let other = dir.join("small.json");
    let empty = ReportDocument::new(Vec::new(), Vec::new(), Vec::new(), Vec::new());
    std::fs::write(&other, serde_json::to_string(&empty).unwrap()).unwrap();
    let out = dir.join("merged.json");
    for args in commands(input, other.to_str().unwrap()) {
        let args: Vec<&str> = args
            .iter()
            .map(|arg| {
                if arg == "OUT" {
                    out.to_str().unwrap()
                } else {
                    arg.as_str()
                }
            })
            .collect();
        let stderr = refused(&args);
        assert!(
            stderr.contains(input) && stderr.contains("-byte bound ("),
            "{args:?}: {stderr}"
        );
    }
    assert!(!out.exists(), "nothing merged");
}

#[test]
fn an_endless_device_as_any_input_exits_2_naming_the_file_and_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    each_refuses("/dev/zero", dir.path());
}

#[test]
fn a_huge_file_as_any_input_exits_2_unread() {
    let dir = tempfile::tempdir().unwrap();
    let huge = dir.path().join("huge.json");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    each_refuses(huge.to_str().unwrap(), dir.path());
}
