//! Gives `libibv_sim_cm.so` rdma-core 44's librdmacm ABI: the SONAME
//! `librdmacm.so.1`, the `RDMACM_1.x` version nodes, one `.symver` per
//! export (each module of `src/exports/` gets its own `symver_<module>.s`,
//! assembled beside its functions), and `DT_NEEDED libibverbs.so.1`: the
//! library reaches verbs only through the public verbs API, whichever
//! libibverbs the program runs on (the sim, the shim, the real one).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let abi = abi_build::Abi::librdmacm_44();
    abi.emit_link_args(&out, Some("librdmacm.so.1"));
    println!("cargo:rustc-link-lib=dylib=ibverbs");

    let all = abi_build::rust_exports(Path::new("src"));
    let mut seen = BTreeSet::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir("src/exports")
        .expect("src/exports")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    for f in files {
        println!("cargo:rerun-if-changed={}", f.display());
        let names = abi_build::rust_exports_of_file(&f);
        seen.extend(names.iter().cloned());
        let stem = f.file_stem().unwrap().to_string_lossy().into_owned();
        std::fs::write(out.join(format!("symver_{stem}.s")), abi.symver_asm(&names))
            .expect("write symver");
    }
    assert_eq!(
        seen, all,
        "every #[no_mangle] export must live in src/exports/"
    );
    let missing: Vec<&str> = abi
        .symbols
        .iter()
        .filter(|s| !seen.contains(&s.name))
        .map(|s| s.name.as_str())
        .collect();
    assert!(
        missing.is_empty(),
        "librdmacm symbols not exported: {missing:?}"
    );
    println!("cargo:rerun-if-changed=build.rs");
}
