//! A temp kit for testing the harness with a host written as a shell script: the script, a
//! fixtures dir, a dir where the script records pids (`HOSTILE_PID_DIR`), and the
//! `dsh-conformance run` command line against them.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The loop of a driver that answers handshake, discover (dsh available) and shutdown.
const CANNED_LOOP: &str = r#"while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
  case "$line" in
    *'"type":"handshake"'*)
      printf '%s\n' '{"v":1,"type":"handshake","driver":"sh-canned","version":"0.0.1","capabilities":["discover"]}' ;;
    *'"type":"discover"'*)
      printf '{"v":1,"type":"discovered","id":"%s","available":true,"version":"0.1.7-rc.1","warnings":[],"diagnostic":null,"code":null}\n' "$id" ;;
    *'"type":"shutdown"'*)
      printf '%s\n' '{"v":1,"type":"bye"}'
      exit 0 ;;
  esac
done
"#;

/// A canned driver script: `prelude` (shell lines run at start, in the driver's cwd), then
/// answers to handshake, discover (dsh available) and shutdown.
pub fn canned_driver(prelude: &str) -> String {
    format!("#!/bin/sh\n{prelude}\n{CANNED_LOOP}")
}

pub struct ShellDriverKit {
    dir: tempfile::TempDir,
}

impl ShellDriverKit {
    /// A fresh temp dir holding `script` as an executable `driver.sh`.
    pub fn new(script: &str) -> ShellDriverKit {
        let kit = ShellDriverKit {
            dir: tempfile::tempdir().expect("temp dir"),
        };
        fs::write(kit.driver(), script).expect("write driver");
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(kit.driver(), fs::Permissions::from_mode(0o755)).expect("chmod");
        fs::create_dir_all(kit.fixtures()).expect("fixtures dir");
        fs::create_dir_all(kit.pid_dir()).expect("pid dir");
        kit
    }
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
    pub fn fixtures(&self) -> PathBuf {
        self.path().join("fixtures")
    }
    pub fn driver(&self) -> PathBuf {
        self.path().join("driver.sh")
    }
    pub fn pid_dir(&self) -> PathBuf {
        self.path().join("pids")
    }
    /// Writes case `id` (its JSON text) where the corpus layout puts it: `<area>/<id>.json`.
    pub fn write_case(&self, id: &str, text: &str) {
        let area = id.split('.').next().expect("area");
        let dir = self.fixtures().join(area);
        fs::create_dir_all(&dir).expect("area dir");
        fs::write(dir.join(format!("{id}.json")), text).expect("write case");
    }
    /// `dsh-conformance run` of `fixtures` against `host`, with fake-dsh and the pid dir.
    pub fn command(&self, fixtures: &Path, host: &str) -> Command {
        let mut command = Command::new(crate::binary("dsh-conformance"));
        command
            .arg("run")
            .arg("--host")
            .arg(host)
            .arg("--fixtures")
            .arg(fixtures)
            .arg("--fake-dsh")
            .arg(crate::binary("fake-dsh"))
            .args(["--pass-env", "HOSTILE_PID_DIR"])
            .env("HOSTILE_PID_DIR", self.pid_dir())
            .current_dir(self.path());
        command
    }
    /// Every pid the driver recorded (files `<mode>.pids` in the pid dir), with that mode.
    pub fn recorded_pids(&self) -> Vec<(String, i32)> {
        let mut pids = Vec::new();
        for entry in fs::read_dir(self.pid_dir()).expect("pid dir").flatten() {
            let mode = entry.file_name().to_string_lossy().replace(".pids", "");
            let text = fs::read_to_string(entry.path()).unwrap_or_default();
            pids.extend(
                text.split_whitespace()
                    .filter_map(|pid| pid.parse().ok())
                    .map(|pid| (mode.clone(), pid)),
            );
        }
        pids
    }
    /// The command against this kit's own fixtures and driver.
    pub fn run(&self) -> Command {
        self.command(&self.fixtures(), &self.driver().display().to_string())
    }
}
