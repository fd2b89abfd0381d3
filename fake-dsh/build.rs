//! Links the `fake-dsh` binary as a position-dependent executable on Linux: a PIE's loader
//! applies about 19,000 relative relocations (writing the pages that hold them) before `main`,
//! a fixed-address binary none, which takes about a seventh off a start to `ready`
//! (docs/performance.md, "fake-dsh cold start"). The code stays position-independent; only the
//! link changes, so nothing else in the workspace is affected.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-link-arg-bin=fake-dsh=-no-pie");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
