//! The `fake-dsh` binary (installed as `dsh`): see the library's [`fake_dsh::run`].

fn main() {
    dsh_protocol::lifeline::watch(|| {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGTERM);
    });
    fake_dsh::run::main()
}
