//! Gives `libibv_sim.so` rdma-core 44's exported ABI: the SONAME
//! `libibverbs.so.1`, the `IBVERBS_1.x` version nodes, and one `.symver`
//! directive per export written in Rust (see crates/abi-build).
//!
//! Its own two exports are at `IBVSIM_1.0` (`SIM_ABI`).
//!
//! The sim always mirrors the committed rdma-core 44 snapshot, whatever
//! rdma-core the build machine has.
//!
//! A `.symver NAME, NAME@@VER` directive must be assembled in the same
//! object file as `NAME`, so each module of `src/exports/` gets its own
//! `symver_<module>.s`, included by a `global_asm!` in that module (rustc
//! keeps a module's items in one codegen unit).

use std::collections::BTreeSet;

/// The sim's own exports (`src/exports/witness.rs`), in a version node of
/// their own: no rdma-core name, and never unversioned.
const SIM_ABI: &str = "node IBVSIM_1.0\n\
                       func ibv_sim_keep_sent IBVSIM_1.0 default 0\n\
                       func ibv_sim_sent IBVSIM_1.0 default 0\n";
use std::path::{Path, PathBuf};

/// The stubs a `no_kernel_commands! { NAME(ARGS) ...; ... }` table in
/// `text` declares: each name followed by `(` at the table's top level.
fn table_exports(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let Some(start) = text.find("no_kernel_commands! {") else {
        return names;
    };
    let body = &text[start + "no_kernel_commands! {".len()..];
    let (mut depth, mut word) = (0usize, String::new());
    for line in body.lines().map(str::trim) {
        if line.starts_with("//") {
            continue;
        }
        for c in line.chars() {
            match c {
                '(' => {
                    if depth == 0 && !word.is_empty() {
                        names.insert(std::mem::take(&mut word));
                    }
                    depth += 1;
                }
                ')' => depth -= 1,
                '}' if depth == 0 => return names,
                c if depth == 0 && (c.is_alphanumeric() || c == '_') => word.push(c),
                _ if depth == 0 => word.clear(),
                _ => {}
            }
        }
        word.clear();
    }
    names
}

/// `#[no_mangle] ... extern "C" fn NAME` in one file (abi_build's rule),
/// and the stubs of a `no_kernel_commands!` table.
fn exports_of(file: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut names = table_exports(&text);
    let mut armed = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with("#[no_mangle]") || line.starts_with("#[unsafe(no_mangle)]") {
            armed = true;
        } else if armed && !line.starts_with("#[") && !line.starts_with("///") {
            if let Some(rest) = line.split("extern \"C\" fn ").nth(1) {
                names.insert(
                    rest.chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect(),
                );
            }
            armed = false;
        }
    }
    names
}

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let own = abi_build::Abi::parse(SIM_ABI).expect("SIM_ABI");
    let abi = abi_build::Abi::merged(&[&abi_build::Abi::rdma_core_44(), &own]);
    abi.emit_link_args(&out, Some("libibverbs.so.1"));

    // Every export must be in src/exports/ (checked: the union must equal
    // what abi_build finds in the whole crate, plus the table's stubs,
    // which abi_build's line rule cannot see).
    let mut all = abi_build::rust_exports(Path::new("src"));
    all.extend(table_exports(
        &std::fs::read_to_string("src/exports/private_cmd.rs").expect("private_cmd.rs"),
    ));
    let mut seen = BTreeSet::new();
    let dir = Path::new("src/exports");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("src/exports")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    for f in files {
        println!("cargo:rerun-if-changed={}", f.display());
        let names = exports_of(&f);
        seen.extend(names.iter().cloned());
        // `, remove` drops the helper name `NAME__compat_VER` from the symbol
        // table so it is not also exported unversioned (`Base`); rustc's own
        // version script still lists it, hence `--undefined-version`.
        let asm: String = abi
            .symver_asm(&names)
            .lines()
            .map(|l| {
                if l.contains("__compat_") && !l.contains("@@") {
                    format!("{l}, remove\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        let stem = f.file_stem().unwrap().to_string_lossy().into_owned();
        std::fs::write(out.join(format!("symver_{stem}.s")), asm).expect("write symver");
    }
    assert_eq!(
        seen, all,
        "every #[no_mangle] export must live in src/exports/"
    );
    println!("cargo:rustc-cdylib-link-arg=-Wl,--undefined-version");
    println!("cargo:rerun-if-changed=build.rs");
}
