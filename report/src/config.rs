//! The `report` config: which hosts and runtime variants make the matrix, which clients (of the
//! SDK, headless and ACP surfaces) and runtime personas sit beside them, and the defaults when no
//! config is given (the reference host; the dsh versions the spec's version policy distinguishes;
//! no clients).

use dsh_engine::input::{read_bounded, MAX_CONFIG_BYTES};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A command-line word written `./x` or `../x` names a file next to the config: it becomes an
/// absolute path, because a driver runs with the case's temp root as its working directory.
fn relative_to(base: &Path, part: String) -> String {
    if part.starts_with("./") || part.starts_with("../") {
        base.join(part).to_string_lossy().into_owned()
    } else {
        part
    }
}

/// A host under test: a name for the report, the driver command line, and optionally the host's
/// expectations file (xfail list; a relative path is relative to the config file).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    pub name: String,
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expectations: Option<PathBuf>,
    /// The caller's variables this host's driver gets besides the allowlist (`run --pass-env`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pass_env: Vec<String>,
    /// The dialect this host is judged by (`run --dialect`; none: `opendesign`), so one matrix
    /// shows hosts of several dialects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialect: Option<String>,
}

/// A runtime variant: fake-dsh with this environment (`FAKE_DSH_VERSION`, ...) for every process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantSpec {
    pub name: String,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

/// A client under test (`run --surface sdk|headless|acp --host CLIENT`): a name for the report,
/// the surface it drives, its command, optionally its expectations file (relative to the config
/// file), and the runtime releases fake-dsh plays for it, one cell each (`run --persona`;
/// default: fake-dsh's own, 0.2.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSpec {
    pub name: String,
    pub surface: dsh_formats::client_case::ClientSurface,
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expectations: Option<PathBuf>,
    #[serde(default = "default_personas")]
    pub personas: Vec<String>,
}

fn default_personas() -> Vec<String> {
    vec![dsh_engine::surface::Persona::V021.name().to_string()]
}

impl ClientSpec {
    /// The report's variant name of this client's cell on `persona`.
    pub fn variant_name(persona: &str) -> String {
        format!("fake-dsh {persona}")
    }
}

/// The config file as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    #[serde(default)]
    hosts: Vec<HostSpec>,
    #[serde(default)]
    clients: Vec<ClientSpec>,
    variants: Option<Vec<VariantSpec>>,
    /// Whether the reference host is added before the config's hosts (default true).
    include_reference: Option<bool>,
}

/// The matrix to run: hosts x variants, in order, then each client x its personas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatrixConfig {
    pub hosts: Vec<HostSpec>,
    pub variants: Vec<VariantSpec>,
    pub clients: Vec<ClientSpec>,
}

/// The name the reference host has in reports.
pub const REFERENCE_HOST: &str = "reference";

/// The reference host: `dsh-host-driver` next to the running executable, else from `PATH`.
pub fn reference_host() -> HostSpec {
    let beside_me = std::env::current_exe().ok().and_then(|exe| {
        let candidate = exe
            .parent()?
            .join(format!("dsh-host-driver{}", std::env::consts::EXE_SUFFIX));
        candidate.is_file().then_some(candidate)
    });
    let program = beside_me.map_or_else(
        || "dsh-host-driver".to_string(),
        |path| path.display().to_string(),
    );
    HostSpec {
        name: REFERENCE_HOST.to_string(),
        command: vec![program],
        expectations: None,
        pass_env: Vec::new(),
        dialect: None,
    }
}

fn variant(name: &str) -> VariantSpec {
    let variant = dsh_host_corpus::Variant::named(name);
    VariantSpec {
        name: variant.name,
        env: variant.env,
    }
}

/// The variants the spec's version policy (section 5) tells apart among usable versions: a tested
/// version, a tested version written with a leading `v`, and a parseable but untested version;
/// plus `profile-next`, a newer profile plugin whose probe and ready carry a new
/// `compatibility_generation` and an unknown member. Each is named as `run --variant` knows it.
pub fn default_variants() -> Vec<VariantSpec> {
    ["dsh-0.1.7-rc.1", "dsh-v0.1.7", "dsh-0.1.8", "profile-next"]
        .into_iter()
        .map(variant)
        .collect()
}

impl MatrixConfig {
    /// The matrix without a config file: the reference host x the default variants.
    pub fn default_matrix() -> MatrixConfig {
        MatrixConfig {
            hosts: vec![reference_host()],
            variants: default_variants(),
            clients: Vec::new(),
        }
    }

    /// `report --host CMD`: one host, its command split as `run --host` splits it, without the
    /// reference host; `variants` named as `run --variant` names them (none: the defaults).
    pub fn one_host(
        command: &str,
        name: Option<&str>,
        expectations: Option<&Path>,
        variants: &[String],
        pass_env: &[String],
    ) -> Result<MatrixConfig, String> {
        let host = HostSpec {
            name: name.unwrap_or("host").to_string(),
            command: dsh_engine::programs::absolute_paths(dsh_engine::programs::split_command(
                command,
            )?),
            expectations: expectations.map(Path::to_path_buf),
            pass_env: pass_env.to_vec(),
            dialect: None,
        };
        let config = MatrixConfig {
            hosts: vec![host],
            variants: if variants.is_empty() {
                default_variants()
            } else {
                variants.iter().map(|name| variant(name)).collect()
            },
            clients: Vec::new(),
        };
        config.check().map_err(|rule| format!("--host: {rule}"))?;
        Ok(config)
    }

    /// Parses a config file's text; `origin` names it in errors. Hosts listed add to the reference
    /// host unless one is named `reference` or `include_reference` is false; variants replace the
    /// defaults when given.
    pub fn parse(text: &str, origin: &Path) -> Result<MatrixConfig, String> {
        let file: ConfigFile = serde_json::from_str(text).map_err(|error| {
            format!(
                "{}:{}:{}: invalid report config: {error}",
                origin.display(),
                error.line(),
                error.column()
            )
        })?;
        let mut hosts = Vec::new();
        let lists_reference = file.hosts.iter().any(|host| host.name == REFERENCE_HOST);
        if file.include_reference.unwrap_or(true) && !lists_reference {
            hosts.push(reference_host());
        }
        let base = origin.parent().unwrap_or(Path::new(""));
        let base = std::path::absolute(base).unwrap_or_else(|_| base.to_path_buf());
        hosts.extend(file.hosts.into_iter().map(|mut host| {
            host.expectations = host.expectations.map(|path| base.join(path));
            host.command = host
                .command
                .into_iter()
                .map(|part| relative_to(&base, part))
                .collect();
            host
        }));
        let clients = file.clients.into_iter().map(|mut client| {
            client.expectations = client.expectations.map(|path| base.join(path));
            client.command = client
                .command
                .into_iter()
                .map(|part| relative_to(&base, part))
                .collect();
            client
        });
        let config = MatrixConfig {
            hosts,
            variants: file.variants.unwrap_or_else(default_variants),
            clients: clients.collect(),
        };
        config
            .check()
            .map_err(|rule| format!("{}: invalid report config: {rule}", origin.display()))?;
        Ok(config)
    }

    /// Each client named once (apart from the hosts too: a cell is named by host and variant),
    /// with a program, and personas fake-dsh plays.
    fn check_clients(&self) -> Result<(), String> {
        for (index, client) in self.clients.iter().enumerate() {
            let what = format!("client {:?}", client.name);
            if client.name.trim().is_empty() {
                return Err(format!("clients[{index}]: \"name\" must not be empty"));
            }
            if client
                .command
                .first()
                .is_none_or(|program| program.is_empty())
            {
                return Err(format!("{what}: \"command\" must start with a program"));
            }
            let hosts = self.hosts.iter().map(|host| &host.name);
            let earlier = self.clients[..index].iter().map(|client| &client.name);
            if hosts.chain(earlier).any(|name| *name == client.name) {
                return Err(format!("{what}: the name is used twice"));
            }
            if client.personas.is_empty() {
                return Err(format!("{what}: \"personas\" is empty (omit it for 0.2.1)"));
            }
            for persona in &client.personas {
                if dsh_engine::surface::Persona::named(persona).is_none() {
                    let known = dsh_engine::surface::Persona::ALL.map(|known| known.name());
                    return Err(format!(
                        "{what}: persona {persona:?} is none fake-dsh plays ({})",
                        known.join(", ")
                    ));
                }
            }
        }
        Ok(())
    }

    /// Reads and parses a config file.
    pub fn load(path: &Path) -> Result<MatrixConfig, String> {
        let text = read_bounded(path, "report config", MAX_CONFIG_BYTES)?;
        MatrixConfig::parse(&text, path)
    }

    fn check(&self) -> Result<(), String> {
        if self.hosts.is_empty() {
            return Err(
                "no hosts (add one to \"hosts\" or drop \"include_reference\": false)".into(),
            );
        }
        if self.variants.is_empty() {
            return Err("\"variants\" is empty (omit it for the defaults)".into());
        }
        for (index, host) in self.hosts.iter().enumerate() {
            if host.name.trim().is_empty() {
                return Err(format!("hosts[{index}]: \"name\" must not be empty"));
            }
            if host
                .command
                .first()
                .is_none_or(|program| program.is_empty())
            {
                return Err(format!(
                    "host {:?}: \"command\" must start with a program",
                    host.name
                ));
            }
            if self.hosts[..index]
                .iter()
                .any(|earlier| earlier.name == host.name)
            {
                return Err(format!("host name {:?} is used twice", host.name));
            }
            dsh_engine::child_env::check_pass_env(&host.pass_env)
                .map_err(|why| format!("host {:?}: \"pass_env\": {why}", host.name))?;
            if let Some(dialect) = &host.dialect {
                dsh_host_corpus::dialect::Dialect::named(dialect)
                    .map_err(|why| format!("host {:?}: \"dialect\": {why}", host.name))?;
            }
        }
        self.check_clients()?;
        for (index, variant) in self.variants.iter().enumerate() {
            if variant.name.trim().is_empty() {
                return Err(format!("variants[{index}]: \"name\" must not be empty"));
            }
            if self.variants[..index]
                .iter()
                .any(|earlier| earlier.name == variant.name)
            {
                return Err(format!("variant name {:?} is used twice", variant.name));
            }
            for (name, value) in &variant.env {
                dsh_engine::child_env::check_variant_env(name, value)
                    .map_err(|why| format!("variant {:?}: \"env\": {why}", variant.name))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_hosts_add_to_the_reference_host() {
        let text = r#"{"hosts":[{"name":"node","command":["node","host.js"]}]}"#;
        let config = MatrixConfig::parse(text, Path::new("c.json")).unwrap();
        let names: Vec<&str> = config.hosts.iter().map(|host| host.name.as_str()).collect();
        assert_eq!(names, ["reference", "node"]);
        assert_eq!(config.variants, default_variants());
    }

    #[test]
    fn a_listed_reference_host_replaces_the_default_one() {
        let text = r#"{"hosts":[{"name":"reference","command":["dsh-host-driver"]}],
                       "variants":[{"name":"dsh-0.1.7-rc.1","env":{"FAKE_DSH_VERSION":"0.1.7-rc.1"}}]}"#;
        let config = MatrixConfig::parse(text, Path::new("c.json")).unwrap();
        assert_eq!(config.hosts[0].command, ["dsh-host-driver"]);
        assert_eq!(config.hosts.len(), 1);
        assert_eq!(config.variants.len(), 1);
    }

    #[test]
    fn dot_relative_command_words_are_relative_to_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        std::fs::write(
            &path,
            r#"{"hosts":[{"name":"node","command":["node","./host/driver.mjs","--flag"]}]}"#,
        )
        .unwrap();
        let config = MatrixConfig::load(&path).unwrap();
        let node = config
            .hosts
            .iter()
            .find(|host| host.name == "node")
            .unwrap();
        assert_eq!(
            node.command,
            [
                "node".to_string(),
                dir.path()
                    .join("./host/driver.mjs")
                    .to_string_lossy()
                    .into_owned(),
                "--flag".to_string()
            ]
        );
    }

    #[test]
    fn expectations_paths_are_relative_to_the_config_file() {
        let text =
            r#"{"hosts":[{"name":"node","command":["node"],"expectations":"node.xfail.json"}]}"#;
        let config = MatrixConfig::parse(text, Path::new("ci/matrix.json")).unwrap();
        assert_eq!(
            config.hosts[1].expectations,
            Some(std::path::absolute("ci/node.xfail.json").unwrap())
        );
    }

    #[test]
    fn a_host_may_name_its_dialect() {
        let text = r#"{"hosts":[{"name":"go","command":["go-host"],"dialect":"multica"}]}"#;
        let config = MatrixConfig::parse(text, Path::new("c.json")).unwrap();
        assert_eq!(config.hosts[0].dialect, None);
        assert_eq!(config.hosts[1].dialect.as_deref(), Some("multica"));
    }

    #[test]
    fn bad_configs_name_the_file_and_the_rule() {
        let cases = [
            (
                r#"{"hosts":[{"name":"a","command":[]}]}"#,
                "\"command\" must start with a program",
            ),
            (
                r#"{"hosts":[{"name":"a","command":["x"]},{"name":"a","command":["y"]}]}"#,
                "used twice",
            ),
            (r#"{"include_reference":false}"#, "no hosts"),
            (r#"{"variants":[]}"#, "\"variants\" is empty"),
            (
                r#"{"hosts":[{"name":"a","command":["x"],"extra":1}]}"#,
                "unknown field",
            ),
            ("{\n  \"hosts\": 3\n}", "c.json:2:"),
            (
                r#"{"variants":[{"name":"v","env":{"X;touch pwned;Y":"1"}}]}"#,
                "is not an environment variable name",
            ),
            (
                r#"{"variants":[{"name":"v","env":{"X":"a\u0000b"}}]}"#,
                "NUL",
            ),
            (
                r#"{"hosts":[{"name":"a","command":["x"],"pass_env":["FAKE_DSH_VERSION"]}]}"#,
                "\"pass_env\"",
            ),
            (
                r#"{"hosts":[{"name":"a","command":["x"],"dialect":"nope"}]}"#,
                "\"dialect\": unknown dialect \"nope\"",
            ),
        ];
        for (text, expected) in cases {
            let error = MatrixConfig::parse(text, Path::new("c.json")).unwrap_err();
            assert!(error.starts_with("c.json"), "{error}");
            assert!(
                error.contains(expected),
                "{error} should mention {expected}"
            );
        }
    }
}
