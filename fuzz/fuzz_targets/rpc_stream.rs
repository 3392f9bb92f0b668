//! A connection's bytes as the daemon reads them: the HTTP head, then gob messages (type
//! definitions and values), fed in two pieces split where the first byte says, as a slow
//! client would send them. Every call found is answered, which encodes a reply.
#![no_main]
use cnibox::ipam::dhcp::rpc::{Incoming, ServerConn};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, data)) = data.split_first() else { return };
    let cut = usize::from(cut).min(data.len());
    let mut conn = ServerConn::default();
    conn.input.extend_from_slice(b"CONNECT /_goRPC_ HTTP/1.0\n\n");
    for piece in [&data[..cut], &data[cut..]] {
        conn.input.extend_from_slice(piece);
        loop {
            match conn.next_incoming() {
                Ok(Some(Incoming::Call(call))) => {
                    let _ = conn.reply(&call.method, call.seq, Err(call.args.container_id));
                }
                Ok(Some(_)) => {}
                Ok(None) => break,
                // the daemon closes the connection
                Err(_) => return,
            }
        }
    }
});
