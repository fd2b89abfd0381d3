//! `merge`, `summary` and `diff --allow-removed` through the CLI, on results of `run --shard K/N`
//! jobs against a canned shell driver: the commands' options, files and exit codes. What merge
//! and summary compute is dsh-report's own test (`report/tests/it/tools.rs`).

use dsh_test_support::shell_driver as shell_driver_support;

use assert_cmd::Command;
use predicates::str::contains;
use shell_driver_support::ShellDriverKit;

fn case(kit: &ShellDriverKit, id: &str, available: bool) {
    kit.write_case(
        id,
        &format!(
            r#"{{"v":1,"id":"{id}","summary":"s","spec":["5"],"rules":["s5.test-rule"],
               "steps":[{{"discover":{{}},"expect":{{"available":{available}}}}}]}}"#
        ),
    );
}

fn conformance() -> Command {
    Command::cargo_bin("dsh-conformance").expect("binary")
}

#[test]
fn shards_merge_into_one_report_that_summary_and_diff_accept() {
    let kit = ShellDriverKit::new(&shell_driver_support::canned_driver(""));
    for id in ["discovery.a", "discovery.b", "discovery.c"] {
        case(&kit, id, true);
    }
    case(&kit, "discovery.fails", false);
    let file = |name: &str| kit.path().join(name);
    for (shard, out) in [("1/2", "one.json"), ("2/2", "two.json")] {
        let mut run = Command::from_std(kit.run());
        run.args(["--shard", shard, "--json"]).arg(file(out));
        run.assert().code(predicates::ord::ge(0));
        assert!(file(out).is_file());
    }
    let mut whole = Command::from_std(kit.run());
    whole.arg("--json").arg(file("whole.json")).assert().code(1);
    conformance()
        .args(["merge", "--json"])
        .arg(file("merged.json"))
        .arg(file("one.json"))
        .arg(file("two.json"))
        .assert()
        .success()
        .stderr(contains("1 cells, 4 cases"));
    conformance()
        .arg("summary")
        .arg(file("merged.json"))
        .assert()
        .code(1)
        .stdout(contains("4 cases: 3 pass, 1 fail"))
        .stdout(contains("re-run: dsh-conformance run"));
    conformance()
        .arg("diff")
        .arg(file("whole.json"))
        .arg(file("merged.json"))
        .assert()
        .success()
        .stdout(contains("no regression"));
    conformance()
        .args(["merge", "--json"])
        .arg(file("twice.json"))
        .arg(file("one.json"))
        .arg(file("one.json"))
        .assert()
        .code(2)
        .stderr(contains("is in two shards"));

    // A vanished variant cell is a regression unless --allow-removed.
    let mut variant = Command::from_std(kit.run());
    variant
        .args(["--variant", "dsh-0.1.8", "--json"])
        .arg(file("variant.json"))
        .assert()
        .code(1);
    conformance()
        .args(["merge", "--json"])
        .arg(file("both.json"))
        .arg(file("whole.json"))
        .arg(file("variant.json"))
        .assert()
        .success();
    conformance()
        .arg("diff")
        .arg(file("both.json"))
        .arg(file("whole.json"))
        .assert()
        .code(1)
        .stdout(contains("REGRESSION"));
    conformance()
        .args(["diff", "--allow-removed"])
        .arg(file("both.json"))
        .arg(file("whole.json"))
        .assert()
        .success();
}
