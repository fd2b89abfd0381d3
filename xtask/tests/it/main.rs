//! xtask's integration tests in one binary (one link instead of one per file): each module was
//! a test file of its own. `action_scripts`: the GitHub Action's shell steps; `dist`: `cargo xtask
//! dist` and an offline npm install of its packages; `docs_links`: every relative link and path the
//! docs name exists; `install`: `install-fake-dsh` keeps a real `dsh`; `npm_shim`: the npm package's
//! JavaScript shim; `python_wheel`: the wheel in a fresh venv, offline, and the example app's
//! pytest suite on it (fake-dsh's personas, xdist, the real runtime); `readme_checksums`: the README's download checks against
//! pinned checksums; `readme_dependencies`: every dependency is chosen or explained. `support` is what
//! they share.

mod support;

mod action_scripts;
mod dist;
mod docs_links;
mod install;
mod npm_shim;
mod python_wheel;
mod readme_checksums;
mod readme_dependencies;
