//! The sysfs view of the simulated devices, for `ibv_read_sysfs_file`
//! (which `ibv_devinfo` uses for `board_id`) and `ibv_get_sysfs_path`.
//! Paths outside the simulated devices are read from the real file system.

use core::ffi::{c_char, c_int, CStr};
use std::ffi::CString;

use once_cell::sync::OnceCell;

use crate::device::{self, SimDevice};
use crate::guard::set_errno;

fn guid_str(g: u64) -> String {
    format!(
        "{:04x}:{:04x}:{:04x}:{:04x}",
        g >> 48,
        (g >> 32) & 0xffff,
        (g >> 16) & 0xffff,
        g & 0xffff
    )
}

fn gid_str(g: &[u8; 16]) -> String {
    g.chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect::<Vec<_>>()
        .join(":")
}

fn ibdev_file(d: &SimDevice, file: &str) -> Option<String> {
    let f = d.family;
    Some(match file {
        "node_guid" => guid_str(d.guid),
        "sys_image_guid" => guid_str(d.guid),
        "node_type" => {
            if f.node_type == crate::config::NODE_RNIC {
                "4: RNIC".into()
            } else {
                "1: CA".into()
            }
        }
        "fw_ver" if !f.fw_ver.is_empty() => f.fw_ver.into(),
        "hca_type" if !f.hca_type.is_empty() => f.hca_type.into(),
        "board_id" if !f.board_id.is_empty() => f.board_id.into(),
        "hw_rev" => format!("0x{:x}", f.hw_ver),
        "node_desc" => format!("ibv-sim {}", d.name),
        _ => {
            let rest = file.strip_prefix("ports/")?;
            let (port, rest) = rest.split_once('/')?;
            let port: u32 = port.parse().ok()?;
            let p = d.port_attr(port)?;
            match rest {
                "state" => "4: ACTIVE".into(),
                "phys_state" => "5: LinkUp".into(),
                "lid" => format!("0x{:x}", p.lid),
                "sm_lid" => format!("0x{:x}", p.sm_lid),
                "lid_mask_count" => "0".into(),
                "cap_mask" => format!("0x{:08x}", p.port_cap_flags),
                "link_layer" => if d.is_ethernet() {
                    "Ethernet"
                } else {
                    "InfiniBand"
                }
                .into(),
                "rate" => "100 Gb/sec (4X EDR)".into(),
                _ => {
                    let (dir, index) = rest.rsplit_once('/')?;
                    let index: u32 = index.parse().ok()?;
                    match dir {
                        "gids" => {
                            let g = d.gid(port, index).ok()?.map_or([0u8; 16], |(g, _)| g);
                            gid_str(&g)
                        }
                        "gid_attrs/types" => match d.gid(port, index).ok()?? {
                            (_, device::GID_TYPE_ROCE_V2) => "RoCE v2".into(),
                            _ => "IB/RoCE v1".into(),
                        },
                        "pkeys" => format!("0x{:04x}", d.pkey(port, index)?),
                        _ => return None,
                    }
                }
            }
        }
    })
}

/// Contents of a simulated sysfs file, if `path` is one.
pub fn simulated(path: &str) -> Option<String> {
    let devs = device::devices().ok()?;
    if path == "/sys/class/infiniband_verbs/abi_version" {
        return Some("6".into());
    }
    for d in devs {
        let ib = d.ibdev_path();
        if let Some(file) = path.strip_prefix(&ib).and_then(|r| r.strip_prefix('/')) {
            return ibdev_file(d, file);
        }
        let uv = d.dev_path();
        if let Some(file) = path.strip_prefix(&uv).and_then(|r| r.strip_prefix('/')) {
            return match file {
                "ibdev" => Some(d.name.clone()),
                "abi_version" => Some("1".into()),
                "dev" => Some(format!("231:{}", 192 + d.index)),
                _ => None,
            };
        }
    }
    None
}

fn under_sim(path: &str) -> bool {
    path.starts_with("/sys/class/infiniband/") || path.starts_with("/sys/class/infiniband_verbs/")
}

/// Copies file contents into the caller's buffer the way rdma-core does:
/// a trailing newline becomes the terminator; contents that would not fit
/// with a terminator are an error.
fn deliver(data: &[u8], buf: *mut c_char, size: usize) -> c_int {
    let n = data.len().min(size);
    if n == 0 {
        return 0;
    }
    // SAFETY: the caller provides `size` writable bytes at buf.
    let out = unsafe { core::slice::from_raw_parts_mut(buf.cast::<u8>(), size) };
    out[..n].copy_from_slice(&data[..n]);
    let mut len = n;
    if out[len - 1] == b'\n' {
        len -= 1;
        out[len] = 0;
    } else if len < size {
        out[len] = 0;
    } else {
        return -1;
    }
    len as c_int
}

/// `ibv_read_sysfs_file`: bytes read (without the newline) or -1 with errno.
pub fn read_file(dir: *const c_char, file: *const c_char, buf: *mut c_char, size: usize) -> c_int {
    if dir.is_null() || file.is_null() || buf.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: the caller passes NUL-terminated strings.
    let (d, f) = unsafe { (CStr::from_ptr(dir), CStr::from_ptr(file)) };
    let path = format!("{}/{}", d.to_string_lossy(), f.to_string_lossy());
    if under_sim(&path) {
        if let Some(mut s) = simulated(&path) {
            s.push('\n');
            return deliver(s.as_bytes(), buf, size);
        }
        if device::devices().is_ok_and(|v| v.iter().any(|d| path.starts_with(&d.ibdev_path()))) {
            set_errno(libc::ENOENT);
            return -1;
        }
    }
    match std::fs::File::open(&path) {
        Ok(mut fh) => {
            use std::io::Read;
            let mut data = vec![0u8; size];
            match fh.read(&mut data) {
                Ok(n) => deliver(&data[..n], buf, size),
                Err(e) => {
                    set_errno(e.raw_os_error().unwrap_or(libc::EIO));
                    -1
                }
            }
        }
        Err(e) => {
            set_errno(e.raw_os_error().unwrap_or(libc::ENOENT));
            -1
        }
    }
}

/// `ibv_get_sysfs_path`: `$SYSFS_PATH` (honoured only when not setuid) or `/sys`.
pub fn sysfs_path() -> *const c_char {
    static PATH: OnceCell<CString> = OnceCell::new();
    PATH.get_or_init(|| {
        // SAFETY: plain libc call.
        let secure = unsafe { libc::getauxval(libc::AT_SECURE) } != 0;
        let env = if secure {
            None
        } else {
            std::env::var("SYSFS_PATH").ok()
        };
        let p = env
            .map(|p| p.trim_end_matches('/').to_string())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "/sys".to_string());
        CString::new(p).unwrap_or_else(|_| c"/sys".into())
    })
    .as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(guid_str(0x0c42_a103_0012_3456), "0c42:a103:0012:3456");
        let mut g = [0u8; 16];
        g[0] = 0xfe;
        g[1] = 0x80;
        assert_eq!(gid_str(&g), "fe80:0000:0000:0000:0000:0000:0000:0000");
    }
}
