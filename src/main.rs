//! The `cnibox` binary: everything lives in the library; this only hands argv to the applet table.
fn main() {
    std::process::exit(cnibox::applets::main(std::env::args_os().collect()));
}
