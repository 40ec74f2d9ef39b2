//! The files the launcher reads and writes, under hostile conditions: a
//! report directory shared with others (`/tmp`), a path someone made a
//! FIFO, a device or a symbolic link.
//!
//! - [`read_text`]: only a regular file (opened non-blocking, so a FIFO
//!   cannot hang the open; checked with `fstat` on the descriptor that is
//!   then read), at most a given size.
//! - [`write_replacing`]: a symbolic link or anything but a regular file at
//!   the target is refused; the text goes to an `O_EXCL|O_NOFOLLOW`
//!   temporary in the target's directory, renamed into place, so a link
//!   planted after the check is replaced, never followed.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The largest report read: a shim report holds at most 3.67 million
/// objects (the registry's bound), about 400 bytes each.
pub const MAX_REPORT: u64 = 2 << 30;

/// What a file that is not a regular one is.
fn what(t: std::fs::FileType) -> &'static str {
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "not a regular file"
    }
}

/// Reads `path` as UTF-8 text: a regular file of at most `limit` bytes.
/// The error says why (`not a regular file: a FIFO`, `larger than ...`).
pub fn read_text(path: &Path, limit: u64) -> Result<String, String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| e.to_string())?;
    let m = f.metadata().map_err(|e| e.to_string())?;
    if !m.file_type().is_file() {
        return Err(format!(
            "not a regular file: {}",
            match what(m.file_type()) {
                "not a regular file" => "something else",
                w => w,
            }
        ));
    }
    if m.len() > limit {
        return Err(format!(
            "{} bytes, larger than any report ({limit} bytes at most)",
            m.len()
        ));
    }
    let mut bytes = Vec::new();
    // The file may grow after the fstat: the bound holds whatever it does.
    f.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > limit {
        return Err(format!("larger than any report ({limit} bytes at most)"));
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
}

/// Checks that `path` may be replaced: absent, or a regular file (not a
/// symbolic link to one). The error says what is there.
pub fn check_target(path: &Path) -> Result<(), String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => Ok(()),
        Ok(m) if m.file_type().is_symlink() => Err(
            "it is a symbolic link, which is not followed: remove it or name another file".into(),
        ),
        Ok(m) => Err(format!("it is {}, not a regular file", what(m.file_type()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// Writes `bytes` to `path` (mode `mode`, less the umask) through a fresh
/// temporary in its directory, renamed over it: readers never see half a
/// file, and nothing at `path` is followed or written into. Refused when
/// `path` is a symbolic link or not a regular file ([`check_target`]).
pub fn write_replacing(path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    check_target(path)?;
    let name = path
        .file_name()
        .ok_or_else(|| "names no file".to_string())?
        .to_string_lossy()
        .into_owned();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let (tmp, mut f) = temporary(&dir, &name, mode)?;
    let written = f.write_all(bytes).and_then(|()| f.flush());
    drop(f);
    let renamed = written.and_then(|()| std::fs::rename(&tmp, path));
    renamed.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        e.to_string()
    })
}

/// A new file `DIR/.NAME.<pid>.<n>`, made with `O_EXCL|O_NOFOLLOW`: never
/// one someone else made or linked there.
fn temporary(dir: &Path, name: &str, mode: u32) -> Result<(PathBuf, File), String> {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut last = String::new();
    for attempt in 0..100u32 {
        let tmp = dir.join(format!(
            ".{name}.{}.{:08x}",
            std::process::id(),
            seed.wrapping_add(attempt.wrapping_mul(0x9e37_79b9))
        ));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&tmp)
        {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = e.to_string(),
            Err(e) => return Err(format!("cannot create a file in {}: {e}", dir.display())),
        }
    }
    Err(format!("cannot create a file in {}: {last}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_are_read_and_within_the_limit() {
        let dir = crate::environment::private_dir().unwrap();
        let f = dir.join("r.json");
        std::fs::write(&f, "{}").unwrap();
        assert_eq!(read_text(&f, 10).unwrap(), "{}");
        assert!(read_text(&f, 1).unwrap_err().contains("larger than"));
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(
            read_text(&fifo, 10).unwrap_err(),
            "not a regular file: a FIFO"
        );
        assert!(read_text(Path::new("/dev/zero"), 10)
            .unwrap_err()
            .contains("a character device"));
        assert!(read_text(&dir, 10).unwrap_err().contains("directory"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_link_or_special_file_is_never_written_through() {
        let dir = crate::environment::private_dir().unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let link = dir.join("out.json");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let e = write_replacing(&link, b"x", 0o644).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(write_replacing(&dir, b"x", 0o644)
            .unwrap_err()
            .contains("a directory"));
        // A regular file is replaced, nothing left beside it.
        let out = dir.join("new.json");
        write_replacing(&out, b"one", 0o644).unwrap();
        write_replacing(&out, b"two", 0o644).unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "two");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 3, "{names:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
