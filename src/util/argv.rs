//! Command lines of the tool applets (cnitool, oci-hook, oci-wrap, install).
use std::ffi::OsString;

/// argh over the OsString arguments of a tool applet. On `--help` the help goes to stdout
/// and Err(0) comes back; on a usage error the message goes to stderr and Err(2).
pub fn parse_args<T: argh::FromArgs>(cmd: &str, args: &[OsString]) -> Result<T, i32> {
    let Some(strs) = args.iter().map(|a| a.to_str()).collect::<Option<Vec<_>>>() else {
        eprintln!("{cmd}: arguments must be UTF-8");
        return Err(2);
    };
    T::from_args(&[cmd], &strs).map_err(|e| {
        if e.status.is_ok() {
            print!("{}", e.output);
            0
        } else {
            eprint!("{}", e.output);
            2
        }
    })
}
