//! Shared objects: their dynamic symbols, the real libibverbs.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;

/// The versioned dynamic symbols of a shared object, from `objdump -T`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DynSymbol {
    pub name: String,
    /// `IBVERBS_1.1`, `Base`, or empty when objdump printed none.
    pub version: String,
    /// True for the default version (`@@`), false for a hidden one (`(...)`).
    pub default: bool,
    /// True for `*UND*` (a reference, not a definition).
    pub undefined: bool,
    /// The raw objdump line.
    pub line: String,
}

/// Runs `objdump -T` on `lib` and parses every symbol line.
pub fn dynamic_symbols(lib: &Path) -> Vec<DynSymbol> {
    let mut cmd = Command::new("objdump");
    cmd.arg("-T").arg(lib);
    let output = run(&mut cmd);
    assert!(output.status.success(), "{}", describe(&cmd, &output));
    let text = stdout(&output);
    text.lines()
        .filter_map(|line| {
            // 0000000000011620 g    DF .text	0000000000000005  IBVERBS_1.1 ibv_get_device_name
            // 0000000000000000      DF *UND*	0000000000000000  GLIBC_2.2.5 dlsym
            let (head, tail) = line.split_once('\t')?;
            if head.len() < 17 || !head.as_bytes()[..16].iter().all(u8::is_ascii_hexdigit) {
                return None;
            }
            let mut words = tail.split_whitespace();
            let _size = words.next()?;
            let rest: Vec<&str> = words.collect();
            let (version, name) = match rest.as_slice() {
                [name] => ("", *name),
                [version, name] => (*version, *name),
                // "(IBVERBS_1.0)" may be followed by nothing else; anything longer
                // keeps the last word as the name.
                [.., version, name] => (*version, *name),
                [] => return None,
            };
            let default = !version.starts_with('(');
            Some(DynSymbol {
                name: name.to_string(),
                version: version.trim_matches(|c| c == '(' || c == ')').to_string(),
                default,
                undefined: head.contains("*UND*"),
                line: line.to_string(),
            })
        })
        .collect()
}

/// The real `libibverbs.so.1` this machine's programs link to.
pub fn real_libibverbs() -> PathBuf {
    let mut cmd = Command::new("gcc");
    cmd.arg("-print-file-name=libibverbs.so.1");
    let output = run(&mut cmd);
    let path = PathBuf::from(stdout(&output).trim());
    assert!(
        path.is_absolute() && path.exists(),
        "libibverbs.so.1 not found (is libibverbs-dev installed?)\n{}",
        describe(&cmd, &output)
    );
    path
}
