//! `abi-dump LIBRARY`: print a library's exported ABI in the snapshot format
//! (`make abi-snapshot` writes `abi/libibverbs.so.1.abi` with it).
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
use std::path::PathBuf;

fn main() {
    let Some(path) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: abi-dump /path/to/libibverbs.so.1");
        std::process::exit(2);
    };
    match abi_build::Abi::from_library(&path) {
        Ok(abi) => {
            let real = std::fs::canonicalize(&path).unwrap_or(path);
            print!("{}", abi.to_text(&real.display().to_string()));
        }
        Err(e) => {
            eprintln!("abi-dump: {}: {e}", path.display());
            std::process::exit(1);
        }
    }
}
