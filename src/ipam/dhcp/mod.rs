//! dhcp IPAM: the container's address from the LAN's DHCP server, through a daemon that
//! holds the lease and renews it for as long as the container lives (`dhcp daemon`, the
//! same binary, as the reference's). The plugin asks the daemon over its unix socket in
//! the reference's protocol ([`rpc`]), so either side may be the reference's.
//!
//! * [`config`]: the IPAM config and the DHCP options it asks for;
//! * [`message`], [`frame`]: DHCP messages, in IPv4/UDP on the daemon's packet socket;
//! * [`gob`], [`rpc`]: Go's net/rpc over HTTP between plugin and daemon;
//! * [`daemon`]: the daemon (one thread, a poll loop), its leases' state machine, the
//!   container side (namespace, link, packet socket) and the lease records.
pub mod config;
pub mod daemon;
pub mod frame;
pub mod gob;
pub mod message;
pub mod rpc;

use crate::cni::error::code;
use crate::cni::{CniResult, Error, Plugin, Request};
use config::IpamConfig;
use rpc::{CallError, Client, CmdArgs};
use std::ffi::OsString;

pub struct Dhcp;

/// Said with every error of a daemon that does not answer.
const START_IT: &str = "is the DHCP daemon running? Start it with `cnibox dhcp daemon` (or `dhcp daemon` from \
     the CNI bin dir; the README has a systemd unit)";

/// The config as the plugin reads it: only where the daemon is; the daemon reads the rest.
fn load(req: &Request) -> Result<IpamConfig, Error> {
    IpamConfig::read(&req.config).map_err(|e| {
        Error::internal(format!(
            "error obtaining socketPath: error parsing socket path conf: {}",
            e.msg
        ))
    })
}

fn dial(conf: &IpamConfig) -> Result<Client, Error> {
    Client::dial(&conf.socket())
        .map_err(|e| Error::internal(format!("error dialing DHCP daemon: {e}")).with_details(START_IT))
}

/// What the daemon gets: the call's environment and config, the namespace made absolute
/// (the daemon runs elsewhere).
fn cmd_args(req: &Request) -> CmdArgs {
    let netns = match std::path::Path::new(&req.netns) {
        p if req.netns.is_empty() || p.is_absolute() => req.netns.clone(),
        p => std::env::current_dir()
            .map(|d| d.join(p).to_string_lossy().into_owned())
            .unwrap_or_else(|_| req.netns.clone()),
    };
    CmdArgs {
        container_id: req.container_id.clone(),
        netns,
        ifname: req.ifname.clone(),
        args: req.args.clone(),
        path: req.path.clone(),
        stdin: req.stdin.clone(),
    }
}

fn call(client: &mut Client, method: &str, req: &Request) -> Result<gob::Value, Error> {
    client.call(method, &cmd_args(req)).map_err(|e| call_error(method, e))
}

/// A call that failed, the daemon's refusal or a broken connection alike.
fn call_error(method: &str, e: CallError) -> Error {
    let why = match e {
        CallError::Server(m) | CallError::Broken(m) => m,
    };
    Error::internal(format!("error calling {method}: {why}"))
}

impl Plugin for Dhcp {
    fn about(&self) -> &'static str {
        concat!("CNI dhcp plugin cnibox ", env!("CARGO_PKG_VERSION"))
    }

    fn add(&self, req: &Request) -> Result<CniResult, Error> {
        let conf = load(req)?;
        let reply = call(&mut dial(&conf)?, "DHCP.Allocate", req)?;
        let r = rpc::result_of(&reply)
            .map_err(|e| Error::internal(format!("error calling DHCP.Allocate: a result that does not read: {e}")))?;
        Ok(crate::ipam::result(req, r.ips, r.routes, r.dns))
    }

    fn del(&self, req: &Request) -> Result<(), Error> {
        // releasing needs the socket only; a config ADD refuses still finds it
        let conf = crate::cni::config::del_config("dhcp", || load(req), IpamConfig::default);
        call(&mut dial(&conf)?, "DHCP.Release", req).map(drop)
    }

    /// The lease is held for the address the container has. A reference daemon has no
    /// `DHCP.Check`: then CHECK asks it as the reference's plugin does (`DHCP.Allocate`).
    fn check(&self, req: &Request) -> Result<(), Error> {
        let conf = load(req)?;
        let mut client = dial(&conf)?;
        match client.call("DHCP.Check", &cmd_args(req)) {
            Ok(_) => Ok(()),
            Err(CallError::Server(m)) if m.starts_with("rpc: can't find method") => {
                call(&mut client, "DHCP.Allocate", req).map(drop)
            }
            Err(e) => Err(call_error("DHCP.Check", e)),
        }
    }

    /// Ready when the daemon answers.
    fn status(&self, req: &Request) -> Result<(), Error> {
        let conf = load(req)?;
        dial(&conf).map(drop).map_err(|e| Error {
            code: code::PLUGIN_NOT_AVAILABLE,
            ..e
        })
    }

    fn command_line(&self, args: &[OsString]) -> Option<i32> {
        (args.first()? == "daemon").then(|| daemon::main(&args[1..]))
    }
}
