//! The `fake-dsh` binary (installed as `dsh`): see the library's [`fake_dsh::run`].

fn main() {
    fake_dsh::run::main()
}
