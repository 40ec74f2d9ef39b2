//! The shim's fixed memory: what it adds to a process whatever the number
//! of objects it tracks (the budget: at most 80 bytes per live object at
//! 100,000 live, where a fixed 2 MiB alone was 20 bytes an object).
//!
//! `tests/c/footprint/footprint.c` registers 1,000 MRs on the sim and reads
//! its own `/proc/self/smaps`: resident memory is page counts, not times,
//! so the bounds are firm, with room for the pages the kernel maps around
//! a fault (64 KiB windows) and for the C library's own variation.
//! Needs gcc, libibverbs-dev and a built shim and sim (`make test`).

mod common;

use common::*;

/// `footprint 1000` on a fabric of its own, direct or with the shim
/// preloaded at its default settings: (resident KiB, KiB of the shim's
/// file mappings resident).
fn footprint(shim: bool) -> (u64, u64) {
    let exe = cc(
        "footprint",
        &[&repo_dir().join("tests/c/footprint/footprint.c")],
        &["-libverbs"],
    );
    let fabric = FabricGuard(fabric_name(
        "footprint",
        if shim { "shim" } else { "direct" },
    ));
    let mut cmd = std::process::Command::new(&exe);
    cmd.arg("1000")
        .env("LD_LIBRARY_PATH", sim_dir())
        .env("IBV_SIM_FABRIC", &fabric.0)
        .env_remove("IBV_SIM_DEVICES");
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("IBV_SHIM_") {
            cmd.env_remove(k);
        }
    }
    if shim {
        preload_shim(&mut cmd);
    } else {
        cmd.env_remove("LD_PRELOAD");
    }
    let out = run(&mut cmd);
    let text = stdout(&out);
    let value = |key: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {key}\n{}", describe(&cmd, &out)))
    };
    (value("rss_kb"), value("shim_file_kb"))
}

/// The shim's own file (code, read-only data, relocated data) resident in
/// a process that opens a device and makes a PD and MRs: 644 KiB, of which
/// 240 KiB of code (4 fault-around windows: `hot_text.ld` lays the code
/// run at load and by the common verbs out together), 256 KiB of symbol
/// tables and read-only data the dynamic linker reads, and 148 KiB of
/// relocated and written data (which moves by a page or two with the
/// layout of the statics). It was 988 KiB (760 of code) when that code
/// was spread over the whole text; one more window of code is 64 KiB.
#[test]
fn the_shim_maps_at_most_672_kib_of_its_own_file() {
    let (_, file) = footprint(true);
    eprintln!("the shim's file mappings: {file} KiB resident (limit 672)");
    assert!(
        file <= 672,
        "the shim's file mappings: {file} KiB resident (limit 672)"
    );
}

/// Everything the shim adds with 1,000 objects live (its file, its static
/// tables, the registry's first pages, its heap): ~700-850 KiB. It was
/// ~2,000 KiB: the code above plus a 4 KiB slab page for each of 256
/// registry shards (64 now).
#[test]
fn the_shim_adds_at_most_1280_kib_with_1000_objects_live() {
    let (direct, _) = footprint(false);
    let (shim, _) = footprint(true);
    let added = shim as i64 - direct as i64;
    eprintln!(
        "resident with 1000 MRs: direct {direct} KiB, shim {shim} KiB: +{added} KiB (limit 1280)"
    );
    assert!(
        added <= 1280,
        "resident with 1000 MRs: direct {direct} KiB, shim {shim} KiB: +{added} KiB (limit 1280)"
    );
}
