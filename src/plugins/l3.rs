//! The IPAM side of a plugin: delegate ADD and register its release for rollback.
use super::rollback::Rollback;
use crate::cni::{delegate, CniResult, Error, Request};

/// IPAM ADD; on any later failure of this ADD the rollback runs IPAM DEL.
pub fn add<'a>(ipam_type: &'a str, req: &'a Request, rollback: &mut Rollback<'a>) -> Result<CniResult, Error> {
    let mut del_req = req.clone();
    del_req.command = crate::cni::Command::Del;
    let result = delegate::add(ipam_type, req)?;
    rollback.push(format!("release addresses ({ipam_type} DEL)"), move || {
        delegate::del(ipam_type, &del_req).map_err(|e| e.to_string())
    });
    if result.ips.is_empty() {
        return Err(Error::internal("IPAM plugin returned missing IP config"));
    }
    Ok(result)
}
