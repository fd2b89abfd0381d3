//! The install pages' download-and-check snippets (docs/guide-typescript.md's npm route,
//! docs/install.md's archive route and pins), taken from the pages as written and run with `curl`
//! and `npm` stubbed (issue 33 item 12): the npm route installs only when both tarballs have a line
//! in the pinned checksums (docs/install.md) and match it (a pin file missing either line, or a wrong hash,
//! exits non-zero and never reaches `npm install`); the Go route likewise for its archive. The
//! pinned block itself is well-formed. Skipped, saying so, without `sha256sum`.

use crate::support;

use support::{describe, repo_root};

use sha2::{Digest, Sha256};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The pages that hold the download snippets and the pins.
const PAGES: [&str; 2] = ["docs/guide-typescript.md", "docs/install.md"];

/// The install pages' `sh` code blocks, in order.
fn sh_blocks() -> Vec<String> {
    let text: String = PAGES
        .iter()
        .map(|page| fs::read_to_string(repo_root().join(page)).expect(page))
        .collect::<Vec<_>>()
        .join("\n");
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match &mut current {
            None if line.trim_end() == "```sh" => current = Some(String::new()),
            Some(block) if line.trim_end() == "```" => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
            None => {}
        }
    }
    blocks
}

/// The one `sh` block holding every one of `markers`.
fn block_with(markers: &[&str]) -> String {
    let found: Vec<String> = sh_blocks()
        .into_iter()
        .filter(|block| markers.iter().all(|marker| block.contains(marker)))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one sh block of {PAGES:?} holds {markers:?}: {found:#?}"
    );
    found[0].clone()
}

/// `v` and `p` as the snippet's first line sets them (`v=0.1.0; p=linux-x64; base=...`).
fn version_and_platform(snippet: &str) -> (String, String) {
    let first = snippet.lines().next().expect("a first line");
    let value = |name: &str| {
        first
            .split(';')
            .map(str::trim)
            .find_map(|part| part.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("the snippet's first line sets {name}: {first}"))
            .to_string()
    };
    (value("v"), value("p"))
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A temp dir to run a snippet in: `stubs/curl` does nothing (the test lays the downloads),
/// `stubs/npm` records its arguments in `npm-ran`.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::tempdir().expect("temp dir");
        let stubs = dir.path().join("stubs");
        fs::create_dir_all(&stubs).expect("mkdir");
        for (name, body) in [
            ("curl", "#!/bin/sh\nexit 0\n"),
            ("npm", "#!/bin/sh\necho \"$@\" >npm-ran\n"),
        ] {
            let path = stubs.join(name);
            fs::write(&path, body).expect("write");
            fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
        }
        Sandbox { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a download and returns its pin line.
    fn download(&self, name: &str, bytes: &[u8]) -> String {
        fs::write(self.path().join(name), bytes).expect("write");
        format!("{}  {name}\n", hex(bytes))
    }

    fn pins(&self, lines: &[&String]) {
        let text: String = lines.iter().map(|line| line.as_str()).collect();
        fs::write(self.path().join("pinned.sha256"), text).expect("write");
    }

    /// Runs `snippet` with bash in the sandbox, the stubs first on PATH.
    fn run(&self, snippet: &str) -> Output {
        let _ = fs::remove_file(self.path().join("npm-ran"));
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs: Vec<PathBuf> = vec![self.path().join("stubs")];
        dirs.extend(std::env::split_paths(&path));
        Command::new("bash")
            .args(["--noprofile", "--norc", "-c", snippet])
            .current_dir(self.path())
            .env("PATH", std::env::join_paths(dirs).expect("PATH"))
            .output()
            .expect("bash runs")
    }

    fn npm_ran(&self) -> bool {
        self.path().join("npm-ran").exists()
    }
}

fn sha256sum_missing() -> bool {
    let found = Command::new("sha256sum").arg("--version").output();
    if found.is_ok_and(|output| output.status.success()) {
        return false;
    }
    dsh_test_support::skip("no sha256sum");
    true
}

#[test]
fn the_npm_route_installs_only_tarballs_that_both_match_their_pins() {
    if sha256sum_missing() {
        return;
    }
    let snippet = block_with(&["pinned.sha256", "npm install"]);
    assert!(
        !snippet.contains("SHA256SUMS"),
        "the release's own SHA256SUMS is never trusted: {snippet}"
    );
    let (v, p) = version_and_platform(&snippet);
    let sandbox = Sandbox::new();
    let main = sandbox.download(&format!("dsh-conformance-{v}.tgz"), b"the main package\n");
    let platform = sandbox.download(
        &format!("dsh-conformance-{p}-{v}.tgz"),
        b"the platform package\n",
    );
    let other = format!("{}  dsh-conformance-{v}-{p}.tar.gz\n", hex(b"an archive"));

    for (what, pins, missing) in [
        (
            "the platform tarball's line missing",
            [&main, &other],
            &platform,
        ),
        (
            "the main tarball's line missing",
            [&other, &platform],
            &main,
        ),
    ] {
        sandbox.pins(&pins);
        let output = sandbox.run(&snippet);
        assert_ne!(
            output.status.code(),
            Some(0),
            "{what}: {}",
            describe(&output)
        );
        assert!(!sandbox.npm_ran(), "{what}: npm install ran");
        let name = missing.split_whitespace().nth(1).expect("a file name");
        assert!(
            String::from_utf8_lossy(&output.stderr)
                .contains(&format!("no pinned SHA-256 for {name}")),
            "{what}: the message names the file: {}",
            describe(&output)
        );
    }

    let wrong = format!(
        "{}  dsh-conformance-{p}-{v}.tgz\n",
        hex(b"a swapped tarball\n")
    );
    sandbox.pins(&[&main, &wrong]);
    let output = sandbox.run(&snippet);
    assert_ne!(output.status.code(), Some(0), "{}", describe(&output));
    assert!(
        !sandbox.npm_ran(),
        "npm install ran on a mismatching tarball"
    );

    sandbox.pins(&[&other, &platform, &main]);
    let output = sandbox.run(&snippet);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let args = fs::read_to_string(sandbox.path().join("npm-ran")).expect("npm install ran");
    assert!(
        args.contains("--offline") && args.contains(&format!("./dsh-conformance-{p}-{v}.tgz")),
        "{args}"
    );
}

#[test]
fn the_go_route_unpacks_only_an_archive_matching_its_pin() {
    if sha256sum_missing() {
        return;
    }
    let snippet = block_with(&["pinned.sha256", "tar -xzf"]);
    let (v, p) = version_and_platform(&snippet);
    let sandbox = Sandbox::new();
    let name = format!("dsh-conformance-{v}-{p}");
    let tree = sandbox.path().join("tree").join(&name);
    fs::create_dir_all(&tree).expect("mkdir");
    fs::write(tree.join("fake-dsh"), "#!/bin/sh\n").expect("write");
    let archive = sandbox.path().join("archive.tar.gz");
    let status = Command::new("tar")
        .arg("-czf")
        .arg(&archive)
        .arg("-C")
        .arg(sandbox.path().join("tree"))
        .arg(&name)
        .status()
        .expect("tar runs");
    assert!(status.success());
    let pin = sandbox.download(
        &format!("{name}.tar.gz"),
        &fs::read(&archive).expect("archive"),
    );
    let unpacked = sandbox.path().join(&name).join("fake-dsh");

    sandbox.pins(&[&format!("{}  dsh-conformance-{v}.tgz\n", hex(b"x"))]);
    let output = sandbox.run(&snippet);
    assert_ne!(output.status.code(), Some(0), "{}", describe(&output));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no pinned SHA-256"));
    assert!(!unpacked.exists(), "nothing unpacked without a pin");

    sandbox.pins(&[&format!("{}  {name}.tar.gz\n", hex(b"another archive"))]);
    let output = sandbox.run(&snippet);
    assert_ne!(output.status.code(), Some(0), "{}", describe(&output));
    assert!(!unpacked.exists(), "nothing unpacked on a mismatch");

    sandbox.pins(&[&pin]);
    let output = sandbox.run(&snippet);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    assert!(unpacked.is_file(), "unpacked");
}

#[test]
fn the_pinned_block_writes_only_well_formed_pins() {
    let block = block_with(&["cat >pinned.sha256"]);
    let sandbox = Sandbox::new();
    let output = sandbox.run(&block);
    assert_eq!(output.status.code(), Some(0), "{}", describe(&output));
    let pins = fs::read_to_string(sandbox.path().join("pinned.sha256")).expect("written");
    for line in pins.lines() {
        let (hash, file) = line.split_once("  ").unwrap_or(("", ""));
        assert!(
            hash.len() == 64
                && hash
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
                && file.starts_with("dsh-conformance-")
                && !file.contains(char::is_whitespace),
            "not `<sha256>  <file>`: {line:?}"
        );
    }
}
