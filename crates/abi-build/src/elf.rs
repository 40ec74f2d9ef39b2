//! Just enough of ELF64 (little-endian) to list a shared library's exported
//! symbols with their GNU versions: `.dynsym`, `.dynstr`, `.gnu.version`
//! and `.gnu.version_d`. Build scripts must not depend on binutils being
//! installed, so this reads the file itself.

use std::io;

use crate::{Abi, Kind, Node, Symbol};

const SHT_DYNSYM: u32 = 11;
const SHT_GNU_VERDEF: u32 = 0x6fff_fffd;
const SHT_GNU_VERSYM: u32 = 0x6fff_ffff;
const VER_FLG_BASE: u16 = 1;
const STB_GLOBAL: u8 = 1;
const STB_WEAK: u8 = 2;
const STT_OBJECT: u8 = 1;
const STT_FUNC: u8 = 2;
const SHN_UNDEF: u16 = 0;
const SHN_ABS: u16 = 0xfff1;

fn bad(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("not a usable ELF64 library: {what}"),
    )
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn u16(&self, at: usize) -> io::Result<u16> {
        let b = self.0.get(at..at + 2).ok_or_else(|| bad("truncated"))?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&self, at: usize) -> io::Result<u32> {
        let b = self.0.get(at..at + 4).ok_or_else(|| bad("truncated"))?;
        Ok(u32::from_le_bytes(b.try_into().unwrap()))
    }
    fn u64(&self, at: usize) -> io::Result<u64> {
        let b = self.0.get(at..at + 8).ok_or_else(|| bad("truncated"))?;
        Ok(u64::from_le_bytes(b.try_into().unwrap()))
    }
    fn cstr(&self, at: usize) -> io::Result<String> {
        let tail = self.0.get(at..).ok_or_else(|| bad("string out of range"))?;
        let end = tail
            .iter()
            .position(|&c| c == 0)
            .ok_or_else(|| bad("unterminated string"))?;
        Ok(String::from_utf8_lossy(&tail[..end]).into_owned())
    }
}

struct Section {
    kind: u32,
    offset: usize,
    size: usize,
    link: usize,
    entsize: usize,
}

pub(crate) fn read(bytes: &[u8]) -> io::Result<Abi> {
    let r = Reader(bytes);
    if bytes.get(..4) != Some(b"\x7fELF") || bytes.get(4) != Some(&2) || bytes.get(5) != Some(&1) {
        return Err(bad("not ELF64 little-endian"));
    }
    let shoff = r.u64(0x28)? as usize;
    let shentsize = r.u16(0x3a)? as usize;
    let shnum = r.u16(0x3c)? as usize;
    let sections = (0..shnum)
        .map(|i| {
            let at = shoff + i * shentsize;
            Ok(Section {
                kind: r.u32(at + 4)?,
                offset: r.u64(at + 0x18)? as usize,
                size: r.u64(at + 0x20)? as usize,
                link: r.u32(at + 0x28)? as usize,
                entsize: r.u64(at + 0x38)? as usize,
            })
        })
        .collect::<io::Result<Vec<_>>>()?;
    let find = |kind| sections.iter().find(|s| s.kind == kind);
    let dynsym = find(SHT_DYNSYM).ok_or_else(|| bad("no .dynsym"))?;
    let versym = find(SHT_GNU_VERSYM).ok_or_else(|| bad("no .gnu.version"))?;
    let verdef = find(SHT_GNU_VERDEF).ok_or_else(|| bad("no .gnu.version_d"))?;
    let dynstr = sections
        .get(dynsym.link)
        .ok_or_else(|| bad("bad .dynsym link"))?;
    let strtab = |off: u32| r.cstr(dynstr.offset + off as usize);

    // Version definitions: index -> name, in file order, with parents.
    let mut names_by_index = std::collections::BTreeMap::new();
    let mut nodes = Vec::new();
    let mut at = verdef.offset;
    loop {
        let flags = r.u16(at + 2)?;
        let index = r.u16(at + 4)?;
        let count = r.u16(at + 6)?;
        let aux = r.u32(at + 12)? as usize;
        let next = r.u32(at + 16)? as usize;
        let mut names = Vec::new();
        let mut aux_at = at + aux;
        for _ in 0..count {
            names.push(strtab(r.u32(aux_at)?)?);
            aux_at += r.u32(aux_at + 4)? as usize;
        }
        names_by_index.insert(index, names[0].clone());
        if flags & VER_FLG_BASE == 0 {
            nodes.push(Node {
                name: names[0].clone(),
                parent: names.get(1).cloned(),
            });
        }
        if next == 0 {
            break;
        }
        at += next;
    }

    let mut symbols = Vec::new();
    let count = dynsym.size / dynsym.entsize.max(1);
    for i in 1..count {
        let at = dynsym.offset + i * dynsym.entsize;
        let info = bytes[at + 4];
        let shndx = r.u16(at + 6)?;
        let (bind, kind) = (info >> 4, info & 0xf);
        if !(bind == STB_GLOBAL || bind == STB_WEAK) || shndx == SHN_UNDEF || shndx == SHN_ABS {
            continue;
        }
        let kind = match kind {
            STT_FUNC => Kind::Function,
            STT_OBJECT => Kind::Object,
            _ => continue,
        };
        let ver = r.u16(versym.offset + i * 2)?;
        let Some(version) = names_by_index.get(&(ver & 0x7fff)) else {
            continue;
        };
        if !nodes.iter().any(|n| &n.name == version) {
            continue; // the base version: an unversioned export
        }
        symbols.push(Symbol {
            name: strtab(r.u32(at)?)?,
            version: version.clone(),
            default: ver & 0x8000 == 0,
            kind,
            // A function's size says nothing about its ABI; an object's does.
            size: if kind == Kind::Object {
                r.u64(at + 16)?
            } else {
                0
            },
        });
    }
    symbols.sort_by(|a, b| (&a.name, &a.version).cmp(&(&b.name, &b.version)));
    Ok(Abi { nodes, symbols })
}
