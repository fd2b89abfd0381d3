//! The environment a host driver starts with: the caller's variables named in [`ALLOWED`] (and
//! every `LC_*`), the ones `--pass-env` names, and what the harness sets for the case; nothing
//! else. So a `DATABASE_URL`, a cloud token or a stray `FAKE_DSH_*` / `DSH_HOST_MUTANT` in the
//! caller's environment never reaches a driver, the runtime it starts, or a report (a fixture's
//! `stderr_env` can make the runtime print any variable it has).

/// The caller's variables every driver gets when they are set: what a program needs to start and
/// find its tools (`PATH`, `HOME`, the user, the locale, the time zone, the temp dir, the terminal
/// type), never a secret. `PATH` is the caller's with the case's `bin/` put first.
pub const ALLOWED: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
];

/// Prefixes of allowed variables (the locale categories).
const ALLOWED_PREFIXES: &[&str] = &["LC_"];

/// Names the harness sets itself, which `--pass-env` may not take from the caller.
const HARNESS_OWNED: &[&str] = &[
    "DSH_BIN",
    "DSH_HOME",
    "RUNTIME_DATA_DIR",
    "DEEPSEEK_API_KEY",
    "DSH_CONFORMANCE",
    crate::leftovers::CASE_TOKEN_ENV,
];

/// The prefix of fake-dsh's own inputs: a runtime change goes through `--variant-env` (named in
/// every report as the variant), never through the caller's environment.
const RUNTIME_PREFIX: &str = "FAKE_DSH_";

/// Checks a variable name: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn check_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let valid = chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"
        ))
    }
}

/// Checks one variable of a runtime variant (`--variant-env`, a report config's `variants[].env`),
/// which the case's `bin/dsh` wrapper exports: a valid name, and a value without a NUL byte (the
/// value is single-quoted in the wrapper, so any other byte is taken literally).
pub fn check_variant_env(name: &str, value: &str) -> Result<(), String> {
    check_name(name)?;
    if value.contains('\0') {
        return Err(format!("the value of {name} holds a NUL byte"));
    }
    Ok(())
}

/// Checks the `--pass-env` names: each a variable name, or a prefix ending in `*`
/// (`NODE_HOST_*`), and none the harness sets or fake-dsh reads.
pub fn check_pass_env(names: &[String]) -> Result<(), String> {
    for name in names {
        let stem = name.strip_suffix('*').unwrap_or(name);
        check_name(stem).map_err(|why| format!("--pass-env {name:?}: {why}"))?;
        let owned = HARNESS_OWNED
            .iter()
            .any(|owned| owned.starts_with(stem) && (stem == *owned || stem.len() < name.len()));
        if owned {
            return Err(format!(
                "--pass-env {name:?}: the harness sets it for every case (docs/host-driver.md, \"Environment\")"
            ));
        }
        if stem.starts_with(RUNTIME_PREFIX) || RUNTIME_PREFIX.starts_with(stem) {
            return Err(format!(
                "--pass-env {name:?}: fake-dsh's inputs change the runtime; use --variant-env, which every report names"
            ));
        }
    }
    Ok(())
}

/// The caller's variables a driver gets: [`ALLOWED`], `LC_*` and the `pass_env` names.
pub fn inherited(pass_env: &[String]) -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .filter(|(name, _)| allowed(name, pass_env))
        .collect()
}

fn allowed(name: &str, pass_env: &[String]) -> bool {
    ALLOWED.contains(&name)
        || ALLOWED_PREFIXES
            .iter()
            .any(|prefix| name.starts_with(prefix))
        || pass_env.iter().any(|pass| match pass.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == pass,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(check_name("FAKE_DSH_VERSION").is_ok());
        assert!(check_name("_x1").is_ok());
        for bad in ["", "1X", "A-B", "X;touch /tmp/p", "A B", "$(id)", "É"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn pass_env_refuses_what_the_harness_sets_and_runtime_inputs() {
        let names = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(check_pass_env(&names(&["NODE_HOST_*", "DSH_HOST_MUTANT", "GOPATH"])).is_ok());
        for bad in [
            "DSH_HOME",
            "DSH_*",
            "FAKE_DSH_VERSION",
            "FAKE_*",
            "*",
            "A;B",
            "X-*",
        ] {
            assert!(check_pass_env(&names(&[bad])).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_allowed_and_passed_names_are_inherited() {
        let pass = vec!["NODE_HOST_*".to_string(), "GOPATH".to_string()];
        for name in ["PATH", "HOME", "LC_ALL", "NODE_HOST_RUN_MS", "GOPATH"] {
            assert!(allowed(name, &pass), "{name}");
        }
        for name in [
            "DATABASE_URL",
            "AWS_SECRET_ACCESS_KEY",
            "FAKE_DSH_IDENTITY_PATCH",
            "DSH_HOST_MUTANT",
            "GOPATHX",
            "NODE_OPTIONS",
        ] {
            assert!(!allowed(name, &pass), "{name}");
        }
    }
}
