//! The one vocabulary of dsh's machine surfaces: what `--surface` names in every command (`run`,
//! `check-runtime`, `record`). A command that cannot do a surface says so itself
//! ([`Surface::unsupported`]); the value is never rejected as unknown. And the runtime releases
//! fake-dsh plays ([`Persona`], `--persona`, fake-dsh's own word).

use std::fmt;

/// A machine surface of dsh (docs/sdk-surfaces.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Surface {
    /// `dsh --profile open-design --stdio`: the profile stdio protocol (the host corpus).
    #[default]
    OpenDesign,
    /// `dsh --profile sdk`: the SDK's newline JSON-RPC runtime.
    Sdk,
    /// `dsh --profile sdk-minimal`: the same wire with the minimal tool set.
    SdkMinimal,
    /// The 0.1.1 `dsh-jsonrpc-agent` binary (its config preset).
    JsonrpcAgent,
    /// `dsh --profile headless TASK`: one task, the final text on stdout.
    Headless,
    /// `dsh --profile acp` (`dsh acp` on 0.2.1): an Agent Client Protocol v1 agent.
    Acp,
}

impl Surface {
    /// Every surface, in the order help texts list them.
    pub const ALL: [Surface; 6] = [
        Surface::OpenDesign,
        Surface::Sdk,
        Surface::SdkMinimal,
        Surface::JsonrpcAgent,
        Surface::Headless,
        Surface::Acp,
    ];

    /// The name `--surface` takes, and reports print.
    pub fn name(self) -> &'static str {
        match self {
            Surface::OpenDesign => "open-design",
            Surface::Sdk => "sdk",
            Surface::SdkMinimal => "sdk-minimal",
            Surface::JsonrpcAgent => "jsonrpc-agent",
            Surface::Headless => "headless",
            Surface::Acp => "acp",
        }
    }

    /// The surface named `name` ([`Surface::name`]).
    pub fn named(name: &str) -> Option<Surface> {
        Surface::ALL
            .into_iter()
            .find(|surface| surface.name() == name)
    }

    /// Whether the runtime speaks the SDK's JSON-RPC wire (`sdk`, `sdk-minimal`,
    /// `jsonrpc-agent`).
    pub fn is_json_rpc(self) -> bool {
        matches!(
            self,
            Surface::Sdk | Surface::SdkMinimal | Surface::JsonrpcAgent
        )
    }

    /// The usage error of a `command` that cannot do this surface: what it can do instead
    /// (`supported`). Exit 2 with it.
    pub fn unsupported(self, command: &str, supported: &[Surface]) -> String {
        let names: Vec<&str> = supported.iter().map(|surface| surface.name()).collect();
        format!(
            "{command} cannot do --surface {self} (it does {})",
            names.join(", ")
        )
    }
}

impl fmt::Display for Surface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<dsh_formats::client_case::ClientSurface> for Surface {
    fn from(surface: dsh_formats::client_case::ClientSurface) -> Self {
        match surface {
            dsh_formats::client_case::ClientSurface::Sdk => Surface::Sdk,
            dsh_formats::client_case::ClientSurface::Headless => Surface::Headless,
            dsh_formats::client_case::ClientSurface::Acp => Surface::Acp,
        }
    }
}

/// A runtime release fake-dsh plays (`--persona`, the word fake-dsh itself takes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Persona {
    /// 0.2.1: fake-dsh's default (`session/resume`, `session/working-directory/*`).
    V021,
    /// 0.1.5: `dsh --profile sdk|sdk-minimal|headless`.
    V015,
    /// 0.1.1: the `dsh-jsonrpc-agent` binary (SDK clients only).
    V011,
}

impl Persona {
    /// Every persona, newest first.
    pub const ALL: [Persona; 3] = [Persona::V021, Persona::V015, Persona::V011];

    /// The variable fake-dsh reads its persona from when no `--persona` is given.
    pub const ENV: &'static str = "FAKE_DSH_PERSONA";

    /// The version `--persona` takes.
    pub fn name(self) -> &'static str {
        match self {
            Persona::V021 => "0.2.1",
            Persona::V015 => "0.1.5",
            Persona::V011 => "0.1.1",
        }
    }

    /// The persona of version `name` ([`Persona::name`]).
    pub fn named(name: &str) -> Option<Persona> {
        Persona::ALL
            .into_iter()
            .find(|persona| persona.name() == name)
    }
}

impl fmt::Display for Persona {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_surface_is_found_by_its_name() {
        for surface in Surface::ALL {
            assert_eq!(Surface::named(surface.name()), Some(surface));
        }
        assert_eq!(Surface::named("open_design"), None);
        for persona in Persona::ALL {
            assert_eq!(Persona::named(persona.name()), Some(persona));
        }
        assert_eq!(Persona::named("0.3.0"), None);
    }

    #[test]
    fn an_unsupported_surface_names_the_command_and_what_it_does() {
        let message = Surface::SdkMinimal.unsupported("run", &[Surface::OpenDesign, Surface::Sdk]);
        assert_eq!(
            message,
            "run cannot do --surface sdk-minimal (it does open-design, sdk)"
        );
    }
}
