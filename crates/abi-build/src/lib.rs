//! Build-time helper: gives a Rust cdylib the exported ABI of rdma-core's
//! `libibverbs.so.1`, symbol versions included.
//!
//! Why it exists: rustc always adds its own anonymous version script. Under
//! lld a second script that *assigns* symbols to nodes is silently ignored,
//! and under GNU ld it is an error. What works is a script that only
//! *declares* the nodes, plus one `.symver NAME, NAME@@NODE` directive per
//! export in `global_asm!`, linked with lld. This crate writes both, from the
//! real library when it is installed or from the committed snapshot of
//! rdma-core 44 (`abi/libibverbs.so.1.abi`) when it is not.
//!
//! It also writes the shim's forwarding trampolines: one `jmp *slot(%rip)`
//! per symbol the shim does not implement, so that the shim can stand in for
//! the whole library without knowing those functions' signatures.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

mod elf;

/// Where Debian and most distributions install the real library.
pub const SYSTEM_LIBRARY_PATHS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/libibverbs.so.1",
    "/lib/x86_64-linux-gnu/libibverbs.so.1",
    "/usr/lib64/libibverbs.so.1",
    "/usr/lib/libibverbs.so.1",
];

/// Where Debian and most distributions install librdmacm.
pub const RDMACM_PATHS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/librdmacm.so.1",
    "/lib/x86_64-linux-gnu/librdmacm.so.1",
    "/usr/lib64/librdmacm.so.1",
    "/usr/lib/librdmacm.so.1",
];

/// The committed snapshot of rdma-core 44's ABI.
const SNAPSHOT_44: &str = include_str!("../../../abi/libibverbs.so.1.abi");
/// The committed snapshot of rdma-core 44's librdmacm ABI.
const RDMACM_SNAPSHOT_44: &str = include_str!("../../../abi/librdmacm.so.1.abi");

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Function,
    Object,
}

/// A version node (`IBVERBS_1.1`) and the node it inherits from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub name: String,
    pub parent: Option<String>,
}

/// One exported definition: `name@version` (or `name@@version` when default).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    pub version: String,
    /// `@@`: what a program links against today. `@` is a compat definition.
    pub default: bool,
    pub kind: Kind,
    /// Size in bytes (data objects are copied from the real library).
    pub size: u64,
}

/// A library's exported ABI: its version nodes and versioned symbols.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Abi {
    pub nodes: Vec<Node>,
    pub symbols: Vec<Symbol>,
}

/// One symbol the shim forwards blindly, with its slot index.
#[derive(Clone, Debug)]
pub struct Forwarded<'a> {
    pub index: usize,
    pub symbol: &'a Symbol,
}

impl Abi {
    /// Reads the exported ABI of an installed shared library.
    pub fn from_library(path: &Path) -> io::Result<Abi> {
        elf::read(&std::fs::read(path)?)
    }

    /// rdma-core 44's ABI, from the committed snapshot.
    pub fn rdma_core_44() -> Abi {
        Abi::parse(SNAPSHOT_44).expect("abi/libibverbs.so.1.abi is malformed")
    }

    /// rdma-core 44's librdmacm ABI, from the committed snapshot.
    pub fn librdmacm_44() -> Abi {
        Abi::parse(RDMACM_SNAPSHOT_44).expect("abi/librdmacm.so.1.abi is malformed")
    }

    /// The installed real library's ABI when there is one (and its path),
    /// else the rdma-core 44 snapshot. `IBV_SHIM_REAL_LIBRARY` names another file.
    pub fn installed_or_snapshot() -> (Abi, Option<PathBuf>) {
        println!("cargo:rerun-if-env-changed=IBV_SHIM_REAL_LIBRARY");
        let explicit = std::env::var_os("IBV_SHIM_REAL_LIBRARY").map(PathBuf::from);
        let candidates = explicit
            .into_iter()
            .chain(SYSTEM_LIBRARY_PATHS.iter().map(PathBuf::from));
        for path in candidates {
            println!("cargo:rerun-if-changed={}", path.display());
            if let Ok(abi) = Abi::from_library(&path) {
                let real = std::fs::canonicalize(&path).unwrap_or(path);
                return (abi, Some(real));
            }
        }
        println!("cargo:warning=libibverbs.so.1 not found: using the rdma-core 44 ABI snapshot");
        (Abi::rdma_core_44(), None)
    }

    /// The installed librdmacm's ABI (and its path), else the rdma-core 44
    /// snapshot.
    pub fn installed_or_snapshot_rdmacm() -> (Abi, Option<PathBuf>) {
        for path in RDMACM_PATHS.iter().map(PathBuf::from) {
            println!("cargo:rerun-if-changed={}", path.display());
            if let Ok(abi) = Abi::from_library(&path) {
                let real = std::fs::canonicalize(&path).unwrap_or(path);
                return (abi, Some(real));
            }
        }
        println!("cargo:warning=librdmacm.so.1 not found: using the rdma-core 44 ABI snapshot");
        (Abi::librdmacm_44(), None)
    }

    /// One ABI for a shim that stands in for several libraries: their
    /// version nodes and symbols together (the node names tell the
    /// libraries apart: `IBVERBS_*`, `RDMACM_*`).
    pub fn merged(libraries: &[&Abi]) -> Abi {
        Abi {
            nodes: libraries.iter().flat_map(|a| a.nodes.clone()).collect(),
            symbols: libraries.iter().flat_map(|a| a.symbols.clone()).collect(),
        }
    }

    /// The snapshot text format: `node NAME [PARENT]` and
    /// `func|object NAME VERSION default|compat SIZE`, `#` comments.
    pub fn parse(text: &str) -> Result<Abi, String> {
        let mut abi = Abi {
            nodes: Vec::new(),
            symbols: Vec::new(),
        };
        for (n, line) in text.lines().enumerate() {
            let f: Vec<&str> = line.split_whitespace().collect();
            match f.as_slice() {
                [] => {}
                [c, ..] if c.starts_with('#') => {}
                ["node", name] => abi.nodes.push(Node {
                    name: name.to_string(),
                    parent: None,
                }),
                ["node", name, parent] => abi.nodes.push(Node {
                    name: name.to_string(),
                    parent: Some(parent.to_string()),
                }),
                [kind @ ("func" | "object"), name, version, def @ ("default" | "compat"), size] => {
                    abi.symbols.push(Symbol {
                        name: name.to_string(),
                        version: version.to_string(),
                        default: *def == "default",
                        kind: if *kind == "func" {
                            Kind::Function
                        } else {
                            Kind::Object
                        },
                        size: size
                            .parse()
                            .map_err(|_| format!("line {}: bad size", n + 1))?,
                    })
                }
                _ => return Err(format!("line {}: cannot parse {line:?}", n + 1)),
            }
        }
        Ok(abi)
    }

    /// The snapshot text for this ABI (inverse of [`Abi::parse`]).
    pub fn to_text(&self, source: &str) -> String {
        let mut out = format!("# Exported ABI of {source}\n# Regenerate: make abi-snapshot\n");
        for n in &self.nodes {
            match &n.parent {
                Some(p) => writeln!(out, "node {} {p}", n.name).unwrap(),
                None => writeln!(out, "node {}", n.name).unwrap(),
            }
        }
        for s in &self.symbols {
            let kind = if s.kind == Kind::Function {
                "func"
            } else {
                "object"
            };
            let def = if s.default { "default" } else { "compat" };
            writeln!(out, "{kind} {} {} {def} {}", s.name, s.version, s.size).unwrap();
        }
        out
    }

    /// The default (`@@`) version of `name`, if the library exports it.
    pub fn default_version(&self, name: &str) -> Option<&str> {
        self.symbols
            .iter()
            .find(|s| s.name == name && s.default)
            .map(|s| s.version.as_str())
    }

    /// A version script that only declares the nodes (see the crate docs).
    pub fn version_script(&self) -> String {
        let mut out =
            String::from("/* Generated by abi-build: declares rdma-core's version nodes. */\n");
        for n in &self.nodes {
            match &n.parent {
                Some(p) => writeln!(out, "{} {{ }} {p};", n.name).unwrap(),
                None => writeln!(out, "{} {{ }};", n.name).unwrap(),
            }
        }
        out
    }

    /// Writes the version script into `out_dir` and tells cargo to link the
    /// cdylib with it, with lld, and with `soname` when given.
    pub fn emit_link_args(&self, out_dir: &Path, soname: Option<&str>) {
        let script = out_dir.join(format!("{}.map", soname.unwrap_or("libibverbs.so.1")));
        std::fs::write(&script, self.version_script()).expect("write version script");
        println!("cargo:rustc-cdylib-link-arg=-fuse-ld=lld");
        println!(
            "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
            script.display()
        );
        if let Some(soname) = soname {
            println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
        }
    }

    /// `.symver` directives for the Rust-defined exports in `exports`:
    /// `NAME@@VERSION` at the library's default version, and for a compat
    /// version `V` of `NAME` an alias of the Rust function
    /// `NAME__compat_V` (dots as underscores) when one exists.
    pub fn symver_asm(&self, exports: &BTreeSet<String>) -> String {
        let mut out = String::new();
        for s in &self.symbols {
            if s.default && exports.contains(&s.name) {
                writeln!(out, ".symver {0}, {0}@@{1}", s.name, s.version).unwrap();
            } else if !s.default {
                let local = compat_name(&s.name, &s.version);
                if exports.contains(&local) {
                    writeln!(out, ".symver {local}, {}@{}", s.name, s.version).unwrap();
                }
            }
        }
        out
    }

    /// Everything the shim does not implement itself: each gets a trampoline.
    pub fn forwarded(&self, implemented: &BTreeSet<String>) -> Vec<Forwarded<'_>> {
        self.symbols
            .iter()
            .filter(|s| !(s.default && implemented.contains(&s.name)))
            .filter(|s| !implemented.contains(&compat_name(&s.name, &s.version)))
            .enumerate()
            .map(|(index, symbol)| Forwarded { index, symbol })
            .collect()
    }
}

/// The Rust name of a compat (`@VERSION`) definition of `name`.
pub fn compat_name(name: &str, version: &str) -> String {
    format!("{name}__compat_{}", version.replace('.', "_"))
}

/// Assembly for the forwarding trampolines (x86_64, AT&T syntax).
///
/// Function `i` is `jmp *__ibvshim_slots+8*i(%rip)`: one indirect jump. Its
/// slot starts out pointing at a lazy stub that pushes `i` and enters
/// `__ibvshim_lazy_common`, which saves the argument registers, asks the
/// Rust resolver the resolver (the `{resolve}` operand) for the real address (loading the
/// real library on first use), stores it in the slot, restores the
/// registers and jumps there. The resolver also gets a pointer to the saved
/// registers (rax, r9, r8, rcx, rdx, rsi, rdi, upwards) so that, at trace
/// level, it can log each forwarded call's arguments and leave the slot
/// pointing at the stub. Data objects get storage of their size, filled
/// from the real library when it is loaded.
pub fn trampolines_asm(forwarded: &[Forwarded<'_>]) -> String {
    let mut t = String::from(".pushsection .text\n");
    let mut slots = String::from(
        ".pushsection .data.rel,\"aw\",@progbits\n.balign 8\n.globl __ibvshim_slots\n.hidden __ibvshim_slots\n__ibvshim_slots:\n",
    );
    let mut data = String::from(".pushsection .data\n");
    for f in forwarded {
        let (i, s) = (f.index, f.symbol);
        let at = if s.default { "@@" } else { "@" };
        match s.kind {
            Kind::Function => {
                writeln!(
                    t,
                    ".balign 16\n.globl __ibvshim_fwd_{i}\n.type __ibvshim_fwd_{i},@function\n__ibvshim_fwd_{i}:\n    jmp *__ibvshim_slots+{off}(%rip)\n.size __ibvshim_fwd_{i}, .-__ibvshim_fwd_{i}\n.symver __ibvshim_fwd_{i}, {name}{at}{ver}\n__ibvshim_lazy_{i}:\n    pushq ${i}\n    jmp __ibvshim_lazy_common",
                    off = 8 * i,
                    name = s.name,
                    ver = s.version
                )
                .unwrap();
                writeln!(slots, "    .quad __ibvshim_lazy_{i}").unwrap();
            }
            Kind::Object => {
                writeln!(
                    data,
                    ".balign 16\n.globl __ibvshim_obj_{i}\n.type __ibvshim_obj_{i},@object\n.size __ibvshim_obj_{i}, {size}\n__ibvshim_obj_{i}:\n    .zero {size}\n.symver __ibvshim_obj_{i}, {name}{at}{ver}",
                    size = s.size.max(1),
                    name = s.name,
                    ver = s.version
                )
                .unwrap();
                // An object's slot holds its storage's address, for the copy.
                writeln!(slots, "    .quad __ibvshim_obj_{i}").unwrap();
            }
        }
    }
    // The common lazy path. On entry: [rsp] = index, [rsp+8] = return address
    // of the original call, so rsp is 16-byte aligned here (the caller's was
    // 16-aligned before its call). 7 pushes + 136 bytes keep it aligned for
    // the call into Rust. rax is saved because variadic calls pass the count
    // of vector registers in al.
    t.push_str(
        "__ibvshim_lazy_common:
    pushq %rdi
    pushq %rsi
    pushq %rdx
    pushq %rcx
    pushq %r8
    pushq %r9
    pushq %rax
    subq $136, %rsp
    movdqu %xmm0, 0(%rsp)
    movdqu %xmm1, 16(%rsp)
    movdqu %xmm2, 32(%rsp)
    movdqu %xmm3, 48(%rsp)
    movdqu %xmm4, 64(%rsp)
    movdqu %xmm5, 80(%rsp)
    movdqu %xmm6, 96(%rsp)
    movdqu %xmm7, 112(%rsp)
    movq 192(%rsp), %rdi
    leaq 136(%rsp), %rsi
    call {resolve}
    movq %rax, %r11
    movdqu 0(%rsp), %xmm0
    movdqu 16(%rsp), %xmm1
    movdqu 32(%rsp), %xmm2
    movdqu 48(%rsp), %xmm3
    movdqu 64(%rsp), %xmm4
    movdqu 80(%rsp), %xmm5
    movdqu 96(%rsp), %xmm6
    movdqu 112(%rsp), %xmm7
    addq $136, %rsp
    popq %rax
    popq %r9
    popq %r8
    popq %rcx
    popq %rdx
    popq %rsi
    popq %rdi
    addq $8, %rsp
    jmp *%r11
.popsection
",
    );
    slots.push_str(".popsection\n");
    data.push_str(".popsection\n");
    format!("{t}{slots}{data}")
}

/// The library a version node belongs to (the shim's `real::Library`).
pub fn library_of(version: &str) -> &'static str {
    if version.starts_with("RDMACM_") {
        "Rdmacm"
    } else {
        "Ibverbs"
    }
}

/// Rust source describing the trampolines: `FORWARDED[i] = (name, version, is_object, size)`.
pub fn trampolines_table(forwarded: &[Forwarded<'_>]) -> String {
    let mut out = format!(
        "/// Generated by abi-build: the symbols forwarded by trampoline, by slot.\npub static FORWARDED: [Forwarded; {}] = [\n",
        forwarded.len()
    );
    for f in forwarded {
        writeln!(
            out,
            "    Forwarded {{ name: c\"{}\", version: c\"{}\", library: Library::{}, object: {}, size: {} }},",
            f.symbol.name,
            f.symbol.version,
            library_of(&f.symbol.version),
            f.symbol.kind == Kind::Object,
            f.symbol.size
        )
        .unwrap();
    }
    out.push_str("];\n");
    out
}

/// Names of `#[no_mangle]` `extern "C"` functions in the `.rs` files under
/// `dir`: the Rust-defined exports, which get `.symver` directives.
pub fn rust_exports(dir: &Path) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        println!("cargo:rerun-if-changed={}", d.display());
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                names.extend(rust_exports_of_file(&p));
            }
        }
    }
    names
}

/// The `#[no_mangle]` `extern "C"` functions of one `.rs` file.
pub fn rust_exports_of_file(file: &Path) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut armed = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with("#[no_mangle]") || line.starts_with("#[unsafe(no_mangle)]") {
            armed = true;
        } else if armed && !line.starts_with("#[") && !line.starts_with("///") {
            if let Some(rest) = line.split("extern \"C\" fn ").nth(1) {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.insert(name);
            }
            armed = false;
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_round_trips() {
        let abi = Abi::rdma_core_44();
        assert_eq!(Abi::parse(&abi.to_text("x")).unwrap(), abi);
        assert_eq!(
            abi.default_version("ibv_get_device_list"),
            Some("IBVERBS_1.1")
        );
        assert_eq!(
            abi.default_version("ibv_get_device_index"),
            Some("IBVERBS_1.9")
        );
        assert!(abi.nodes.iter().any(|n| n.name == "IBVERBS_PRIVATE_34"));
    }

    #[test]
    fn snapshot_matches_installed_rdma_core_44() {
        // Only meaningful where rdma-core 44 itself is installed.
        for p in SYSTEM_LIBRARY_PATHS {
            let real = std::fs::canonicalize(p).unwrap_or_default();
            if real.to_string_lossy().ends_with("libibverbs.so.1.14.44.0") {
                assert_eq!(Abi::from_library(&real).unwrap(), Abi::rdma_core_44());
                return;
            }
        }
    }

    #[test]
    fn rdmacm_snapshot_matches_installed_rdma_core_44() {
        let abi = Abi::librdmacm_44();
        assert_eq!(abi.default_version("rdma_establish"), Some("RDMACM_1.2"));
        let real =
            std::fs::canonicalize("/usr/lib/x86_64-linux-gnu/librdmacm.so.1").unwrap_or_default();
        if real.to_string_lossy().ends_with("librdmacm.so.1.3.44.0") {
            assert_eq!(Abi::from_library(&real).unwrap(), abi);
        }
    }

    #[test]
    fn forwarded_excludes_what_rust_implements() {
        let abi = Abi::rdma_core_44();
        let implemented: BTreeSet<String> = [
            "ibv_get_device_list".to_string(),
            compat_name("ibv_get_device_list", "IBVERBS_1.0"),
        ]
        .into();
        let fwd = abi.forwarded(&implemented);
        assert!(!fwd.iter().any(|f| f.symbol.name == "ibv_get_device_list"));
        assert!(fwd.iter().any(|f| f.symbol.name == "ibv_get_device_name"));
        let asm = abi.symver_asm(&implemented);
        assert!(asm.contains(".symver ibv_get_device_list, ibv_get_device_list@@IBVERBS_1.1"));
        assert!(asm
            .contains("ibv_get_device_list__compat_IBVERBS_1_0, ibv_get_device_list@IBVERBS_1.0"));
    }
}
