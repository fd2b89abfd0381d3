//! The kit's built binaries and the `dsh-conformance run` command line that plays the corpus
//! against the reference host with fake-dsh, shared by `suite`, `bench` and `mutants`.

use std::path::PathBuf;
use std::process::Command;

/// The kit's binaries in the target dir, and the repo's fixture corpus.
#[derive(Clone)]
pub struct Kit {
    pub fake_dsh: PathBuf,
    pub host_driver: PathBuf,
    pub conformance: PathBuf,
    pub fixtures: PathBuf,
}

impl Kit {
    /// The debug or release build of the kit's binaries (built by `build_kit_binaries`).
    pub fn built(release: bool) -> Kit {
        Kit {
            fake_dsh: crate::kit_binary("fake-dsh", release),
            host_driver: crate::kit_binary("dsh-host-driver", release),
            conformance: crate::kit_binary("dsh-conformance", release),
            fixtures: crate::workspace_root().join("fixtures"),
        }
    }

    /// `dsh-conformance run --host <driver> --fake-dsh <fake-dsh> --fixtures <corpus>`; the caller
    /// adds its own flags.
    pub fn conformance_run(&self) -> Command {
        let mut command = Command::new(&self.conformance);
        command
            .arg("run")
            .arg("--host")
            .arg(&self.host_driver)
            .arg("--fake-dsh")
            .arg(&self.fake_dsh)
            .arg("--fixtures")
            .arg(&self.fixtures);
        command
    }
}
