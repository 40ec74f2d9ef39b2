//! The writer's output against serde_json's, value by value.

use super::*;

fn both<T: Serialize>(v: &T) -> (String, String) {
    let mut ours = Vec::new();
    v.serialize(&mut JsonWriter::new(&mut ours)).unwrap();
    (
        String::from_utf8(ours).unwrap(),
        serde_json::to_string(v).unwrap(),
    )
}

/// Below the top level, the output is serde_json's, byte for byte.
#[test]
fn writes_what_serde_json_writes() {
    let v = serde_json::json!({
        "s": "a\"b\\c\n\r\t\u{1}\u{1f}é€",
        "n": [0, 1, -1, u64::MAX, i64::MIN, 1.5, 1796102249.959, 0.1, null, true, false],
        "o": {"k": {"e": [], "f": {}}},
    });
    let nested = serde_json::json!([v.clone()]);
    let (ours, theirs) = both(&nested);
    assert_eq!(ours, theirs);
    let doc = serde_json::json!({ "objects": [v.clone(), v.clone()], "empty": [] });
    let (ours, theirs) = both(&doc);
    // The top object's lists: one element a line.
    assert_eq!(ours.replace('\n', ""), theirs);
    assert_eq!(ours.matches('\n').count(), 3, "{ours}");
    let back: serde_json::Value = serde_json::from_str(&ours).unwrap();
    assert_eq!(back, doc);
    // Addresses: ours writes the number, serde_json the model's text.
    use report_model::Address;
    let addrs = [0, 1, 0xf, 0x10, 0x7f00_0000_1000, u64::MAX].map(Address);
    let (ours, theirs) = both(&[[(addrs, Some(Address(0x5000)), None::<Address>)]]);
    assert_eq!(ours.replace('\n', ""), theirs);
    assert!(ours.contains("\"0xffffffffffffffff\""), "{ours}");
    // A report read back with the model writes as serde_json writes it.
    let (ours, theirs) = both(&report_model::Found::Close);
    assert_eq!(ours, theirs);
}

/// An object written with its device and site rendered before reads
/// exactly as serde_json writes it whole, escapes included.
#[test]
fn rendered_parts_write_what_serde_json_writes() {
    use report_model::{Address, Created, Detail, Found, Object, PdFields, Rendered};
    let object = Object {
        handle: Address(0x10),
        context: Some(Address(0x20)),
        device: Some("mlx5_\"0\u{1}".into()),
        guid: None,
        vendor: Some("NVIDIA/Mellanox".into()),
        parent: None,
        detail: Detail::Pd(PdFields { handle: 3 }),
        created: Created {
            thread: 7,
            time: Some(1796102249.959),
            module: Some("/bin/a b\\c".into()),
            symbol: None,
            offset: Some(0x1c),
            function: Some("main".into()),
            file: None,
            line: Some(12),
            build_id: Some("8d2a".into()),
            backtrace: Some(vec!["main (a.c:3)".into()]),
        },
        found: Found::Exit,
        suppressed: false,
        kept_by: None,
    };
    let device = render_fields(&object.device_part(), 1024).unwrap();
    let site = render_fields(&object.created.site(), 1024).unwrap();
    assert!(device.starts_with("\"device\":"), "{device}");
    for parts in [
        Rendered::default(),
        Rendered {
            device: Some(&device),
            site: None,
        },
        Rendered {
            device: Some(&device),
            site: Some(&site),
        },
    ] {
        let mut ours = Vec::new();
        let with = object.with(parts);
        with.serialize(&mut JsonWriter::new(&mut ours)).unwrap();
        let ours = String::from_utf8(ours).unwrap();
        assert_eq!(ours, serde_json::to_string(&object).unwrap(), "{parts:?}");
    }
    // Too little room: not rendered (the fields are written instead).
    assert_eq!(render_fields(&object.device_part(), 8), None);
}

#[test]
fn integers_are_written_as_serde_json_writes_them() {
    let mut v: Vec<u64> = (0..1000).collect();
    v.extend((0..64).flat_map(|s| [1u64 << s, (1u64 << s) - 1, (1u64 << s) + 1]));
    v.extend([99_999, 100_000, 207_287, 4_294_967_295, u64::MAX]);
    let (ours, theirs) = both(&[[v]]);
    assert_eq!(ours.replace('\n', ""), theirs);
    let i: Vec<i64> = [0, -1, -10, -99, -100, i64::MIN, i64::MAX].into();
    let (ours, theirs) = both(&[[i]]);
    assert_eq!(ours.replace('\n', ""), theirs);
}

/// Times (whole milliseconds) are written as ryu writes them.
#[test]
fn times_are_written_as_serde_json_writes_them() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut v = vec![
        1.0,
        1.5,
        1.25,
        1.125,
        10.0,
        1796102249.959,
        1796108709.21,
        1796108709.0,
    ];
    v.extend([
        8_589_934_591.999,
        8_589_934_592.0,
        0.5,
        0.001,
        0.0,
        -1.5,
        1e300,
    ]);
    for _ in 0..200_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let ms = x % 9_000_000_000_000;
        v.push(ms as f64 / 1000.0);
        v.push(f64::from_bits(x >> 2));
    }
    let (ours, theirs) = both(&[[v]]);
    assert_eq!(ours.replace('\n', ""), theirs);
}

#[test]
fn the_escape_scan_finds_every_byte_that_needs_one() {
    for len in 0..20 {
        for at in 0..len {
            for b in 0u8..=255 {
                let mut v = vec![b'a'; len];
                v[at] = b;
                assert_eq!(needs_escape(&v), !plain(b), "{v:?}");
            }
        }
    }
}

#[test]
fn what_the_model_does_not_use_is_an_error() {
    #[derive(serde::Serialize)]
    enum E {
        V(u8),
    }
    let mut out = Vec::new();
    assert!(E::V(1).serialize(&mut JsonWriter::new(&mut out)).is_err());
}
