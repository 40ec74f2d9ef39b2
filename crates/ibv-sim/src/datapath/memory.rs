//! Memory access through keys: local (lkey) and remote (rkey) checks,
//! gathering a payload and scattering it.

use super::*;

pub(crate) fn copy_bytes(src: usize, dst: usize, n: usize) {
    if n > 0 {
        // SAFETY: both ranges were checked against registered MRs (or are
        // the program's inline buffers); they may overlap on loopback.
        unsafe { core::ptr::copy(src as *const u8, dst as *mut u8, n) };
    }
}

/// `[addr, addr + len)` through the local key `lkey`, pinned for a copy.
pub(super) fn local(
    pd: usize,
    lkey: u32,
    addr: u64,
    len: u64,
    need: u32,
) -> Result<mr::Pinned, c_int> {
    let m = mr::by_key(lkey).ok_or(WC_LOC_PROT_ERR)?;
    m.pin(addr, len, |info| {
        info.pd == pd && info.access & need == need
    })
    .ok_or(WC_LOC_PROT_ERR)
}

/// Remote memory through `rkey`, as the responder checks it, pinned for
/// a copy.
/// At an XRC receive QP (which has no PD) the keys are checked against
/// the PD of the XRC SRQ the request names (`srqn`), as the XRC transport
/// does; one not of the QP's domain is `IBV_WC_REM_INV_REQ_ERR`.
pub(crate) fn remote(
    dst: &QpShared,
    dst_access: u32,
    srqn: u32,
    rkey: u32,
    addr: u64,
    len: u64,
    need: u32,
) -> Result<mr::Pinned, c_int> {
    if dst_access & need == 0 {
        return Err(if dst.dev.profile().qp_access_inv_req {
            WC_REM_INV_REQ_ERR
        } else {
            WC_REM_ACCESS_ERR
        });
    }
    let pd = xrc_target(dst, srqn)?.map_or(dst.pd, |x| x.pd);
    if crate::mw::is_window_key(rkey) {
        return crate::mw::remote(dst, pd, rkey, addr, len, need);
    }
    let m = mr::by_key(rkey).ok_or(WC_REM_ACCESS_ERR)?;
    m.pin(addr, len, |info| info.pd == pd && info.access & need != 0)
        .ok_or(WC_REM_ACCESS_ERR)
}

/// Reads a work request's scatter/gather list.
pub(super) fn sges(list: *const ibv_sge, n: c_int) -> Vec<ibv_sge> {
    if list.is_null() || n <= 0 {
        return Vec::new();
    }
    // SAFETY: the program passes num_sge readable entries.
    unsafe { core::slice::from_raw_parts(list, n as usize) }.to_vec()
}

pub(crate) fn total_len(s: &[ibv_sge]) -> u64 {
    s.iter().map(|e| u64::from(e.length)).sum()
}

/// A requester's status for its own SGE refused (`Profile::lkey_qp_op_err`).
fn requester_status(src: &QpShared, status: c_int) -> c_int {
    if status == WC_LOC_PROT_ERR && src.dev.profile().lkey_qp_op_err {
        WC_LOC_QP_OP_ERR
    } else {
        status
    }
}

/// Gathers the payload of a send / write (through lkeys, or inline).
pub(crate) fn gather(src: &QpShared, list: &[ibv_sge], inline: bool) -> Result<Vec<u8>, c_int> {
    let mut out = Vec::with_capacity(total_len(list) as usize);
    for e in list {
        if e.length == 0 {
            continue;
        }
        let pinned = if inline {
            None
        } else {
            Some(
                local(src.pd, e.lkey, e.addr, u64::from(e.length), 0)
                    .map_err(|st| requester_status(src, st))?,
            )
        };
        let host = pinned.as_ref().map_or(e.addr as usize, |p| p.host);
        let at = out.len();
        out.resize(at + e.length as usize, 0);
        copy_bytes(host, out[at..].as_mut_ptr() as usize, e.length as usize);
    }
    Ok(out)
}

/// The payload of a send / write to another process, as [`payload`] finds it.
pub(crate) enum Payload {
    /// Gathered into a buffer of ours.
    Owned(Vec<u8>),
    /// One range of the program's registered memory (host address and
    /// length), read in place: the fabric copies it into the peer's ring
    /// without a gathered copy in between.
    InPlace(usize, usize),
}

impl Payload {
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Payload::Owned(v) => v,
            // SAFETY: the range was checked against a registered MR of the
            // program through its lkey (`payload`), and the program leaves
            // a posted buffer alone until its completion, which comes
            // after this borrow ends (the READ response reads an MR the
            // same way).
            Payload::InPlace(host, n) => unsafe {
                core::slice::from_raw_parts(*host as *const u8, *n)
            },
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Payload::Owned(v) => v.len(),
            Payload::InPlace(_, n) => *n,
        }
    }
}

/// A send's or write's source, gathered (through lkeys, or inline), and
/// kept for a checker while the sim keeps sources (`witness`).
pub(crate) fn source(src: &QpShared, w: &SendWr, inline: bool) -> Result<Vec<u8>, c_int> {
    let data = gather(src, &w.sge, inline)?;
    if !inline && crate::witness::keeping() {
        src.sent.keep(src.cap.max_send_wr, w.wr_id, &w.sge, &data);
    }
    Ok(data)
}

/// The payload of a send / write to another process: a single non-inline
/// entry is read in place (the common case, and a 64 KiB write's copy
/// saved), anything else gathered, and everything gathered while the sim
/// keeps sources (`source`: what is kept is then what goes out).
pub(crate) fn payload(src: &QpShared, w: &SendWr, inline: bool) -> Result<Payload, c_int> {
    match w.sge.as_slice() {
        [e] if !inline && e.length > 0 && !crate::witness::keeping() => {
            let n = u64::from(e.length);
            // Not held: `dereg` settles the outbox, which reads it, first.
            let host = local(src.pd, e.lkey, e.addr, n, 0)
                .map_err(|st| requester_status(src, st))?
                .host;
            Ok(Payload::InPlace(host, n as usize))
        }
        _ => source(src, w, inline).map(Payload::Owned),
    }
}

/// Scatters `data` through a receive (or read response) scatter list of
/// `owner`: `LOC_LEN_ERR` when it does not fit, `LOC_PROT_ERR` on a bad key.
pub(crate) fn scatter(owner_pd: usize, list: &[ibv_sge], data: &[&[u8]]) -> Result<(), c_int> {
    let need: u64 = data.iter().map(|d| d.len() as u64).sum();
    if need > total_len(list) {
        return Err(WC_LOC_LEN_ERR);
    }
    // Check every target first (nothing is written through a list with a
    // bad entry), then pin and fill one at a time: a thread holding one
    // pin never waits for another (`mr::Pinned`).
    let mut targets = Vec::with_capacity(list.len());
    let mut left = need;
    for e in list {
        if left == 0 {
            break;
        }
        let n = u64::from(e.length).min(left);
        if n == 0 {
            continue;
        }
        drop(local(owner_pd, e.lkey, e.addr, n, LOCAL_WRITE)?);
        targets.push((e, n));
        left -= n;
    }
    let mut src = data.iter().flat_map(|d| d.chunks(1 << 30)).peekable();
    let mut cur: &[u8] = src.next().unwrap_or(&[]);
    for (e, n) in targets {
        let pinned = local(owner_pd, e.lkey, e.addr, n, LOCAL_WRITE)?;
        let mut room = n as usize;
        let mut dst = pinned.host;
        while room > 0 {
            while cur.is_empty() {
                match src.next() {
                    Some(c) => cur = c,
                    None => return Ok(()),
                }
            }
            let n = room.min(cur.len());
            copy_bytes(cur.as_ptr() as usize, dst, n);
            cur = &cur[n..];
            dst += n;
            room -= n;
        }
    }
    Ok(())
}
