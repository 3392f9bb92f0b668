//! The nftables backend (being written: waits for the nf_tables netlink layer).
use super::config::Conf;
use super::{Attachment, Claim};
use crate::cni::Error;
use ipnetwork::IpNetwork;

pub fn kernel_has_nf_tables() -> bool {
    false
}

pub fn claims(_v6: bool) -> Result<Vec<Claim>, Error> {
    Ok(vec![])
}

pub fn forward(_conf: &Conf, _att: Attachment, _container: IpNetwork) -> Result<(), Error> {
    Err(Error::internal("nftables backend: WIP"))
}

pub fn check(_conf: &Conf, _att: Attachment, _container: IpNetwork) -> Result<(), Error> {
    Err(Error::internal("nftables backend: WIP"))
}

pub fn teardown(_att: Attachment) -> Result<(), Error> {
    Ok(())
}

pub fn gc(_network: &str, _valid: &[(String, String)]) -> Result<(), Error> {
    Ok(())
}
