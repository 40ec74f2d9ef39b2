//! Debian's own kernel package, unpacked in a cache outside any repository:
//! `boot/vmlinuz-KVER` and `lib/modules/KVER/` with a `modules.dep` made by
//! `depmod -b`. Found in `IBV_SHIM_VM_KERNEL` (a directory holding an
//! unpacked package), else in the cache; fetched there once with the
//! machine's own package tools (`apt-get download` of the package
//! `linux-image-amd64` depends on, `dpkg -x`).

use crate::{missing, Error};
use std::path::{Path, PathBuf};
use std::process::Command;

/// An unpacked kernel package.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// The package's root (holds `boot/` and `lib/modules/`).
    pub root: PathBuf,
    /// The kernel release, e.g. `6.1.0-57-amd64`.
    pub release: String,
}

impl Kernel {
    pub fn vmlinuz(&self) -> PathBuf {
        self.root
            .join("boot")
            .join(format!("vmlinuz-{}", self.release))
    }

    pub fn modules(&self) -> PathBuf {
        self.root.join("lib/modules").join(&self.release)
    }

    /// `IBV_SHIM_VM_KERNEL`, else the newest complete kernel in the cache,
    /// else one fetched into the cache now.
    pub fn find() -> Result<Kernel, Error> {
        if let Some(dir) = std::env::var_os("IBV_SHIM_VM_KERNEL") {
            let dir = PathBuf::from(dir);
            return Kernel::at(&dir).map_err(|why| {
                missing(format!(
                    "IBV_SHIM_VM_KERNEL={}: {why} (it names a directory holding an unpacked \
                     kernel package: boot/vmlinuz-VERSION and lib/modules/VERSION/)",
                    dir.display()
                ))
            });
        }
        let cache = cache_dir()?;
        if let Some(k) = newest_cached(&cache) {
            return Ok(k);
        }
        fetch(&cache)
    }

    /// The kernel unpacked at `root`, with its module index made if absent.
    pub fn at(root: &Path) -> Result<Kernel, String> {
        let modules = root.join("lib/modules");
        let release = std::fs::read_dir(&modules)
            .map_err(|e| format!("{}: {e}", modules.display()))?
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .find(|r| root.join("boot").join(format!("vmlinuz-{r}")).is_file())
            .ok_or_else(|| {
                format!(
                    "no boot/vmlinuz-VERSION beside lib/modules/VERSION in {}",
                    root.display()
                )
            })?;
        let k = Kernel {
            root: root.to_path_buf(),
            release,
        };
        if !k.modules().join("modules.dep").is_file() {
            run(Command::new("depmod").arg("-b").arg(root).arg(&k.release))
                .map_err(|e| format!("depmod: {e}"))?;
        }
        Ok(k)
    }
}

/// `$XDG_CACHE_HOME/ibv-shim/vm`, or `~/.cache/ibv-shim/vm`.
pub fn cache_dir() -> Result<PathBuf, Error> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .ok_or_else(|| {
            missing("neither XDG_CACHE_HOME nor HOME is set: no cache for the VM's kernel".into())
        })?;
    Ok(base.join("ibv-shim").join("vm"))
}

fn newest_cached(cache: &Path) -> Option<Kernel> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(cache)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.join(".complete").is_file())
        .collect();
    found.sort();
    found.iter().rev().find_map(|p| Kernel::at(p).ok())
}

/// The package name behind `linux-image-amd64` (Debian's current kernel).
fn package_name() -> Result<String, Error> {
    let out = Command::new("apt-cache")
        .args(["depends", "linux-image-amd64"])
        .output()
        .map_err(|e| missing(format!("apt-cache: {e}: cannot look up Debian's kernel package (set IBV_SHIM_VM_KERNEL to an unpacked kernel package instead)")))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("Depends: "))
        .map(str::trim)
        .find(|p| p.starts_with("linux-image-") && !p.contains('<'))
        .map(str::to_string)
        .ok_or_else(|| {
            missing(format!(
                "apt-cache depends linux-image-amd64 names no kernel package ({}); run apt-get update, \
                 or set IBV_SHIM_VM_KERNEL to an unpacked kernel package",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        })
}

/// Downloads and unpacks the kernel package into `cache/PACKAGE/`.
fn fetch(cache: &Path) -> Result<Kernel, Error> {
    let package = package_name()?;
    let dest = cache.join(&package);
    let part = cache.join(format!(".{package}.{}", std::process::id()));
    std::fs::create_dir_all(&part)
        .map_err(|e| Error::Failed(format!("{}: {e}", part.display())))?;
    let result = (|| {
        run(Command::new("apt-get")
            .args(["download", "-q"])
            .arg(&package)
            .current_dir(&part))
        .map_err(|e| missing(format!("apt-get download {package}: {e}")))?;
        let deb = std::fs::read_dir(&part)
            .ok()
            .and_then(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .find(|p| p.extension().is_some_and(|x| x == "deb"))
            })
            .ok_or_else(|| missing(format!("apt-get download {package} left no .deb")))?;
        run(Command::new("dpkg").arg("-x").arg(&deb).arg(&part))
            .map_err(|e| missing(format!("dpkg -x: {e}")))?;
        std::fs::remove_file(&deb).map_err(|e| Error::Failed(format!("{}: {e}", deb.display())))?;
        Kernel::at(&part).map_err(|e| Error::Failed(format!("{package}: {e}")))?;
        std::fs::write(part.join(".complete"), b"").map_err(|e| Error::Failed(e.to_string()))?;
        let _ = std::fs::remove_dir_all(&dest);
        std::fs::rename(&part, &dest)
            .map_err(|e| Error::Failed(format!("{}: {e}", dest.display())))?;
        Kernel::at(&dest).map_err(Error::Failed)
    })();
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&part);
    }
    result
}

/// Runs a command, its failure described with what it printed.
pub(crate) fn run(cmd: &mut Command) -> Result<Vec<u8>, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{}: {e}", cmd.get_program().to_string_lossy()))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(format!(
            "{} exited with {}: {}",
            cmd.get_program().to_string_lossy(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
