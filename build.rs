//! Gives the shim rdma-core's exported ABI (see crates/abi-build):
//! the version nodes, `.symver` directives for the exports written in Rust,
//! and trampolines for everything else, all from the real libibverbs found
//! at build time (or the committed rdma-core 44 snapshot).

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    let (verbs, real) = abi_build::Abi::installed_or_snapshot();
    // librdmacm's symbols at its versions too: the shim stands in for it
    // (preloaded, as target/dropin/librdmacm.so.1, or by the dlopen hook).
    let (rdmacm, _) = abi_build::Abi::installed_or_snapshot_rdmacm();
    let abi = abi_build::Abi::merged(&[&verbs, &rdmacm]);
    abi.emit_link_args(&out, None);
    // Never unloaded: a dlclose() (drop-in mode, a plugin that probes verbs
    // and is closed again) must not run the exit report (and the leak exit
    // code) in the middle of the program, nor unmap code that the real
    // library's plugins and the atfork handlers still reference.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    // Start-up and hot code together: fewer 64 KiB code windows mapped
    // in every process (see the script).
    let hot = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap()).join("hot_text.ld");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-T,{}", hot.display());
    println!("cargo:rerun-if-changed=hot_text.ld");

    // `caller!` reads [rbp + 8], which is the return address only with frame
    // pointers (.cargo/config.toml). A RUSTFLAGS in the environment replaces
    // that file's flags: then rbp is any register of the caller's, and the
    // read would fault in the host program. Without them creation sites are
    // simply not recorded.
    println!("cargo:rustc-check-cfg=cfg(ibvshim_frame_pointers)");
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    let fp = flags
        .split('\x1f')
        .filter_map(|f| {
            f.strip_prefix("-C")
                .unwrap_or(f)
                .trim()
                .strip_prefix("force-frame-pointers")
        })
        .next_back()
        .is_some_and(|v| matches!(v, "" | "=yes" | "=y" | "=on" | "=true" | "=always"));
    if fp {
        println!("cargo:rustc-cfg=ibvshim_frame_pointers");
    } else {
        println!("cargo:warning=built without -C force-frame-pointers=yes (RUSTFLAGS overrides .cargo/config.toml): leak reports will not name creation sites");
    }

    let mut exports = abi_build::rust_exports(std::path::Path::new("src"));
    exports.extend(declared_exports(std::path::Path::new(DECLARATIONS)));
    std::fs::write(out.join("symver.s"), abi.symver_asm(&exports)).unwrap();

    let forwarded = abi.forwarded(&exports);
    std::fs::write(
        out.join("trampolines.s"),
        abi_build::trampolines_asm(&forwarded),
    )
    .unwrap();
    std::fs::write(
        out.join("forwarded.rs"),
        abi_build::trampolines_table(&forwarded),
    )
    .unwrap();

    let mut v = String::new();
    let real = real.map(|p| p.display().to_string());
    let real = real
        .as_deref()
        .unwrap_or(abi_build::SYSTEM_LIBRARY_PATHS[0]);
    writeln!(v, "/// The real library found when the shim was built.").unwrap();
    writeln!(v, "pub const BUILD_REAL_LIBRARY: &str = {real:?};").unwrap();
    writeln!(v, "/// Where distributions install the real library.").unwrap();
    writeln!(
        v,
        "pub const SYSTEM_LIBRARY_PATHS: &[&str] = &{:?};",
        abi_build::SYSTEM_LIBRARY_PATHS
    )
    .unwrap();
    writeln!(
        v,
        "/// The default version of each function of the real library."
    )
    .unwrap();
    writeln!(v, "pub fn version_of(name: &CStr) -> Option<&'static CStr> {{\n    Some(match name.to_bytes() {{").unwrap();
    for s in verbs.symbols.iter().filter(|s| s.default) {
        writeln!(v, "        b\"{}\" => c\"{}\",", s.name, s.version).unwrap();
    }
    writeln!(v, "        _ => return None,\n    }})\n}}").unwrap();
    writeln!(v, "/// The default version of each function of librdmacm.").unwrap();
    writeln!(v, "pub fn rdmacm_version_of(name: &CStr) -> Option<&'static CStr> {{\n    Some(match name.to_bytes() {{").unwrap();
    for s in rdmacm.symbols.iter().filter(|s| s.default) {
        writeln!(v, "        b\"{}\" => c\"{}\",", s.name, s.version).unwrap();
    }
    writeln!(v, "        _ => return None,\n    }})\n}}").unwrap();
    std::fs::write(out.join("versions.rs"), v).unwrap();
    println!("cargo:rerun-if-changed=build.rs");
}

/// The verb declarations (`trace_format::ibverbs!`).
const DECLARATIONS: &str = "crates/trace-format/src/decl.rs";

/// The exports the declarations generate whole (`= forward name(`): written
/// in Rust, so versioned by `.symver`, not forwarded by trampoline.
fn declared_exports(decl: &std::path::Path) -> Vec<String> {
    println!("cargo:rerun-if-changed={}", decl.display());
    let text = std::fs::read_to_string(decl).expect("the verb declarations");
    text.lines()
        .filter_map(|l| l.split(" = forward ").nth(1))
        .map(|rest| {
            rest.chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}
