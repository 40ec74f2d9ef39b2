//! What each process of the run told the launcher through the shim
//! (`IBV_SHIM_STATUS_DIR`): `<pid>.started` (`<pid> <executable>`) when it
//! first used verbs, `<pid>.signal` (the number) when a termination signal
//! it had left at the default action killed it. A process that started
//! but wrote no report did not reach its exit.

use std::path::Path;

/// A process that used verbs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    pub pid: u64,
    /// Its executable (`/proc/self/exe`), empty if unknown.
    pub program: String,
    /// The signal that killed it, if the shim saw it.
    pub signal: Option<i32>,
}

/// The processes that noted themselves in `dir`, by pid.
pub fn read(dir: &Path) -> Vec<Started> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<Started> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name();
            let pid: u64 = name.to_str()?.strip_suffix(".started")?.parse().ok()?;
            let text = crate::files::read_text(&e.path(), 64 << 10).ok()?;
            let program = text
                .trim_end_matches('\n')
                .split_once(' ')
                .map_or(String::new(), |(_, p)| p.to_string());
            let signal = crate::files::read_text(&dir.join(format!("{pid}.signal")), 64)
                .ok()
                .and_then(|s| s.trim().parse().ok());
            Some(Started {
                pid,
                program,
                signal,
            })
        })
        .collect();
    out.sort_by_key(|s| s.pid);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_read_and_strays_ignored() {
        let dir = crate::environment::private_dir().unwrap();
        std::fs::write(dir.join("12.started"), "12 /usr/bin/rping\n").unwrap();
        std::fs::write(dir.join("12.signal"), "15\n").unwrap();
        std::fs::write(dir.join("7.started"), "7 /bin/prog with space\n").unwrap();
        std::fs::write(dir.join("x.started"), "x\n").unwrap();
        std::fs::write(dir.join("ibv-shim-report.7.json"), "{}").unwrap();
        assert_eq!(
            read(&dir),
            [
                Started {
                    pid: 7,
                    program: "/bin/prog with space".into(),
                    signal: None
                },
                Started {
                    pid: 12,
                    program: "/usr/bin/rping".into(),
                    signal: Some(15)
                },
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
