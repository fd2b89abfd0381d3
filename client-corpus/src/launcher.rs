//! The case's runtime launcher (docs/sdk-clients.md, "The driver contract"): an executable
//! `#!/bin/sh` file under the case's root that carries the case's configuration of fake-dsh (its
//! journal, scenario, watchdog, the case token, the persona's arguments, and `DSH_HOME` unless the
//! client set its own) and `exec`s fake-dsh with the client's arguments after its own. A client
//! that starts the runtime by that one path configures it whatever environment it passes down (an
//! allowlist of PATH, HOME and the key, as production clients do), and the runtime's argv still
//! holds every argument the client gave it (the key canary looks there).
//!
//! Every value is written single-quoted, byte for byte (a `'` as `'\''`), so a temp path holding
//! spaces, quotes, `$`, backquotes or newlines reaches fake-dsh unchanged.

use dsh_engine::programs::shell_quote_bytes as quote;
use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The name of the launcher under the case's root: `bin/dsh`.
pub const LAUNCHER: &str = "bin/dsh";

/// What one case's launcher does.
#[derive(Debug, Clone)]
pub struct Launcher {
    pub fake_dsh: PathBuf,
    /// fake-dsh's arguments before the client's, always (the persona's).
    pub fixed_args: Vec<String>,
    /// The surface's arguments (`--profile sdk`), before the client's when those name no
    /// `--profile` of their own (a client that starts `dsh --profile sdk` itself, as the official
    /// ones do, is not given a second one).
    pub profile_args: Vec<String>,
    /// Variables exported whatever the client's environment says (the case's configuration).
    pub env: Vec<(&'static str, OsString)>,
    /// `DSH_HOME` when the client's environment has none, or an empty one.
    pub dsh_home: PathBuf,
}

impl Launcher {
    /// The names of the variables the launcher sets for every runtime it starts: a runtime
    /// whose journal `start` entry lacks one was not started through it nor with its
    /// environment.
    pub fn configured_names(&self) -> Vec<&'static str> {
        self.env.iter().map(|(name, _)| *name).collect()
    }

    /// The script's bytes.
    pub fn script(&self) -> Vec<u8> {
        let mut script = b"#!/bin/sh\n# dsh-conformance: fake-dsh configured for one client case \
             (docs/sdk-clients.md, \"The driver contract\").\n"
            .to_vec();
        for (name, value) in &self.env {
            script.extend_from_slice(format!("{name}=").as_bytes());
            script.extend(quote(value.as_bytes()));
            script.extend_from_slice(format!("\nexport {name}\n").as_bytes());
        }
        script.extend_from_slice(b"if [ -z \"${DSH_HOME-}\" ]; then\n  DSH_HOME=");
        script.extend(quote(self.dsh_home.as_os_str().as_bytes()));
        script.extend_from_slice(b"\n  export DSH_HOME\nfi\n");
        let fixed = self.command(&self.fixed_args);
        let mut with_profile = self.fixed_args.clone();
        with_profile.extend(self.profile_args.iter().cloned());
        script.extend_from_slice(
            b"for arg in \"$@\"; do\n  case $arg in\n    --profile|--profile=*) exec ",
        );
        script.extend_from_slice(&fixed);
        script.extend_from_slice(b" \"$@\" ;;\n  esac\ndone\nexec ");
        script.extend(self.command(&with_profile));
        script.extend_from_slice(b" \"$@\"\n");
        script
    }

    /// fake-dsh's path and `args`, quoted.
    fn command(&self, args: &[String]) -> Vec<u8> {
        let mut words = quote(self.fake_dsh.as_os_str().as_bytes());
        for arg in args {
            words.push(b' ');
            words.extend(quote(arg.as_bytes()));
        }
        words
    }

    /// Writes the launcher as `root/bin/dsh` (mode 0700) and returns its path.
    pub fn write(&self, root: &Path) -> Result<PathBuf, String> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let path = root.join(LAUNCHER);
        let dir = path.parent().unwrap_or(root);
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o700)
            .open(&path)
            .and_then(|mut file| file.write_all(&self.script()))
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;
    use std::process::Command;

    /// A launcher whose "fake-dsh" is a script printing its argv and the configured variables,
    /// one per line, all under a directory whose name holds every character a shell minds.
    fn hostile_root() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join(OsString::from_vec(
            b"it's a \"$HOME\" `id` \\ *\nroot".to_vec(),
        ));
        std::fs::create_dir_all(&root).unwrap();
        (dir, root)
    }

    fn launcher(root: &Path) -> Launcher {
        use std::os::unix::fs::PermissionsExt;
        let echo = root.join("fake 'dsh'");
        std::fs::write(
            &echo,
            "#!/bin/sh\nfor a in \"$0\" \"$@\"; do printf 'arg:%s\\n' \"$a\"; done\n\
             printf 'journal:%s\\nhome:%s\\n' \"$FAKE_DSH_JOURNAL\" \"$DSH_HOME\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&echo, std::fs::Permissions::from_mode(0o755)).unwrap();
        Launcher {
            fake_dsh: echo,
            fixed_args: vec!["--persona".into(), "0.1.5".into()],
            profile_args: vec!["--profile".into(), "sdk".into()],
            env: vec![("FAKE_DSH_JOURNAL", root.join("journal's.jsonl").into())],
            dsh_home: root.join("dsh-home"),
        }
    }

    /// What the launcher at `path` passes on, started with an empty environment but `extra`.
    fn started(path: &Path, args: &[&str], extra: &[(&str, &str)]) -> Vec<String> {
        let output = Command::new(path)
            .args(args)
            .env_clear()
            .envs(extra.iter().copied())
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout)
            .unwrap()
            .split("\narg:")
            .flat_map(|part| part.split("\njournal:"))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn the_launcher_passes_hostile_paths_and_the_clients_argv_unchanged() {
        let (_dir, root) = hostile_root();
        let launcher = launcher(&root);
        let path = launcher.write(&root).unwrap();
        let fake = launcher.fake_dsh.display().to_string();
        let journal = root.join("journal's.jsonl").display().to_string();
        let home = root.join("dsh-home").display().to_string();
        let seen = started(&path, &["a b", "$x", "it's"], &[]);
        assert_eq!(seen[0], format!("arg:{fake}"));
        assert_eq!(
            &seen[1..7],
            ["--persona", "0.1.5", "--profile", "sdk", "a b", "$x"]
        );
        assert_eq!(seen[7], "it's");
        assert_eq!(seen[8], format!("{journal}\nhome:{home}\n"));
        // The client's own profile is not doubled, and its own DSH_HOME is kept.
        let seen = started(&path, &["--profile", "sdk"], &[("DSH_HOME", "/mine")]);
        assert_eq!(&seen[1..5], ["--persona", "0.1.5", "--profile", "sdk"]);
        assert_eq!(seen[5], format!("{journal}\nhome:/mine\n"));
        assert_eq!(launcher.configured_names(), ["FAKE_DSH_JOURNAL"]);
    }

    #[test]
    fn quoting_is_byte_exact() {
        assert_eq!(quote(b"plain"), b"'plain'");
        assert_eq!(quote(b"it's"), b"'it'\\''s'");
        assert_eq!(quote(b""), b"''");
    }
}
