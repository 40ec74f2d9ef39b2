//! The initramfs: a static busybox, the modules that reach the host's files
//! (virtio PCI, 9p, overlay, the control port; in the order `modprobe
//! --show-depends` gives), stage 1 as `/init`, stage 2 and its settings.
//! Written as an uncompressed cpio "newc" archive, which the kernel unpacks
//! as it is.

use crate::kernel::{run, Kernel};
use crate::{missing, Error};
use std::path::{Path, PathBuf};
use std::process::Command;

/// What stage 1 loads; their dependencies come first.
const EARLY_MODULES: &[&str] = &[
    "virtio_pci",
    "virtio_console",
    "9pnet_virtio",
    "9p",
    "overlay",
];

/// Stage 1 and stage 2.
const INIT: &str = include_str!("guest/init");
const STAGE2: &str = include_str!("guest/stage2");

/// A static busybox: `IBV_SHIM_VM_BUSYBOX`, else `/bin/busybox` (Debian's
/// busybox-static).
pub fn busybox() -> Result<PathBuf, Error> {
    let path = std::env::var_os("IBV_SHIM_VM_BUSYBOX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/bin/busybox"));
    let elf = std::fs::read(&path).map_err(|e| {
        missing(format!(
            "{}: {e}: the VM needs a static busybox (apt-get install busybox-static)",
            path.display()
        ))
    })?;
    if has_interpreter(&elf) {
        return Err(missing(format!(
            "{} is dynamically linked: the VM's initramfs needs a static busybox (apt-get install busybox-static)",
            path.display()
        )));
    }
    Ok(path)
}

/// Whether an ELF64 file names a program interpreter (is dynamically linked).
fn has_interpreter(elf: &[u8]) -> bool {
    let u16_at = |o: usize| {
        elf.get(o..o + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
    };
    let u32_at = |o: usize| {
        elf.get(o..o + 4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    };
    let u64_at = |o: usize| {
        elf.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()) as usize)
    };
    if elf.get(..5) != Some(b"\x7fELF\x02") {
        return true; // not an ELF64 file: not usable either way
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        return true;
    };
    (0..phnum).any(|i| u32_at(phoff + i * phentsize) == Some(3)) // PT_INTERP
}

/// The modules stage 1 loads, as paths, dependencies first.
fn early_modules(kernel: &Kernel) -> Result<Vec<PathBuf>, Error> {
    let mut order: Vec<PathBuf> = Vec::new();
    for m in EARLY_MODULES {
        let out = run(Command::new("modprobe")
            .arg("-d")
            .arg(&kernel.root)
            .arg("-S")
            .arg(&kernel.release)
            .arg("--show-depends")
            .arg(m))
        .map_err(|e| missing(format!("modprobe --show-depends {m} (kmod): {e}")))?;
        for line in String::from_utf8_lossy(&out).lines() {
            // "insmod /path/to/x.ko " or "builtin x"
            if let Some(path) = line.strip_prefix("insmod ") {
                let path = PathBuf::from(path.split_whitespace().next().unwrap_or(""));
                if !order.contains(&path) {
                    order.push(path);
                }
            }
        }
    }
    Ok(order)
}

/// Writes the initramfs for `kernel` to `out`, stage 2's settings `conf`
/// (shell assignments) beside it.
pub fn write(out: &Path, kernel: &Kernel, conf: &str) -> Result<(), Error> {
    let busybox = std::fs::read(busybox()?).map_err(|e| Error::Failed(e.to_string()))?;
    let mut cpio = Cpio::default();
    for dir in ["bin", "dev", "proc", "lib", "lib/modules", "newroot"] {
        cpio.dir(dir);
    }
    cpio.file("bin/busybox", 0o755, &busybox);
    cpio.file("init", 0o755, INIT.as_bytes());
    cpio.file("stage2", 0o644, STAGE2.as_bytes());
    cpio.file("vm.conf", 0o644, conf.as_bytes());
    let mut order = String::new();
    for path in early_modules(kernel)? {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let data =
            std::fs::read(&path).map_err(|e| Error::Failed(format!("{}: {e}", path.display())))?;
        if name.ends_with(".ko.xz") || name.ends_with(".ko.zst") || name.ends_with(".ko.gz") {
            return Err(Error::Failed(format!(
                "{}: compressed modules are not supported (busybox insmod loads plain .ko files)",
                path.display()
            )));
        }
        cpio.file(&format!("lib/modules/{name}"), 0o644, &data);
        order.push_str(&name);
        order.push('\n');
    }
    cpio.file("lib/modules/order", 0o644, order.as_bytes());
    std::fs::write(out, cpio.finish()).map_err(|e| Error::Failed(format!("{}: {e}", out.display())))
}

/// A cpio "newc" archive being built.
#[derive(Default)]
struct Cpio {
    bytes: Vec<u8>,
    ino: u32,
}

impl Cpio {
    fn entry(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.ino += 1;
        let fields = [
            self.ino,
            mode,
            0,
            0,
            1,
            0,
            data.len() as u32,
            0,
            0,
            0,
            0,
            name.len() as u32 + 1,
            0,
        ];
        self.bytes.extend_from_slice(b"070701");
        for f in fields {
            self.bytes.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(0);
        self.pad();
        self.bytes.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0);
        }
    }

    fn dir(&mut self, name: &str) {
        self.entry(name, 0o040755, &[]);
    }

    fn file(&mut self, name: &str, perm: u32, data: &[u8]) {
        self.entry(name, 0o100000 | perm, data);
    }

    fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, &[]);
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newc_archive_has_aligned_entries_and_a_trailer() {
        let mut c = Cpio::default();
        c.file("a", 0o644, b"xyz");
        let b = c.finish();
        assert_eq!(&b[..6], b"070701");
        assert!(b.len().is_multiple_of(4));
        let s = String::from_utf8_lossy(&b);
        assert!(s.contains("TRAILER!!!"));
        // The first entry's size field (7th) is 3.
        assert_eq!(&b[6 + 6 * 8..6 + 7 * 8], b"00000003");
    }

    #[test]
    fn a_dynamic_elf_is_told_from_a_static_one() {
        assert!(has_interpreter(&std::fs::read("/bin/sh").unwrap()));
        assert!(has_interpreter(b"not an elf"));
    }
}
