//! Who made a device: from its name's driver family (rdma-core's provider
//! names, as the kernel names devices: `mlx5_0`, `bnxt_re0`, `rxe0`), else
//! from the IEEE OUI in its GUID (an InfiniBand GUID starts with the
//! vendor's OUI; a RoCE/iWARP one is the EUI-64 of a MAC address: OUI with
//! the universal/local bit flipped, then `ff:fe`). Computed only when a
//! device is shown (a log line, a report): a match on a short string.

/// Driver families by device-name prefix, longest first where they share
/// a start.
const FAMILIES: &[(&str, &str)] = &[
    ("mlx5", "NVIDIA/Mellanox"),
    ("mlx4", "NVIDIA/Mellanox"),
    ("mthca", "NVIDIA/Mellanox"),
    ("irdma", "Intel"),
    ("i40iw", "Intel"),
    ("nes", "Intel"),
    ("hfi1", "Intel (Omni-Path)"),
    ("qib", "Intel/QLogic"),
    ("ipath", "QLogic"),
    ("bnxt_re", "Broadcom"),
    ("cxgb", "Chelsio"),
    ("iwcxgb", "Chelsio"),
    ("hns", "Huawei"),
    ("qedr", "Marvell/QLogic"),
    ("efa", "AWS EFA"),
    ("rdmap", "AWS EFA"),
    ("erdma", "Alibaba"),
    ("mana", "Microsoft"),
    ("ocrdma", "Emulex"),
    ("vmw_pvrdma", "VMware"),
    ("ehca", "IBM"),
    ("rxe", "soft-RoCE (rxe)"),
    ("siw", "soft-iWARP (siw)"),
];

/// IEEE OUIs of RDMA vendors (and of the NICs soft-RoCE runs over).
const OUIS: &[(u32, &str)] = &[
    (0x0002c9, "NVIDIA/Mellanox"),
    (0x0c42a1, "NVIDIA/Mellanox"),
    (0x248a07, "NVIDIA/Mellanox"),
    (0x506b4b, "NVIDIA/Mellanox"),
    (0x98039b, "NVIDIA/Mellanox"),
    (0xb8599f, "NVIDIA/Mellanox"),
    (0xec0d9a, "NVIDIA/Mellanox"),
    (0x1c34da, "NVIDIA/Mellanox"),
    (0x043f72, "NVIDIA/Mellanox"),
    (0x08c0eb, "NVIDIA/Mellanox"),
    (0xb8cef6, "NVIDIA/Mellanox"),
    (0xe41d2d, "NVIDIA/Mellanox"),
    (0xf45214, "NVIDIA/Mellanox"),
    (0x7cfe90, "NVIDIA/Mellanox"),
    (0x946dae, "NVIDIA/Mellanox"),
    (0xa088c2, "NVIDIA/Mellanox"),
    (0x001175, "Intel/QLogic"),
    (0x00066a, "Intel/QLogic"),
    (0x3cfdfe, "Intel"),
    (0x001b21, "Intel"),
    (0x6805ca, "Intel"),
    (0xa0369f, "Intel"),
    (0x40a6b7, "Intel"),
    (0xb49691, "Intel"),
    (0x000743, "Chelsio"),
    (0x000af7, "Broadcom"),
    (0x001018, "Broadcom"),
    (0xbc97e1, "Broadcom"),
    (0x000e1e, "Marvell/QLogic"),
    (0x00c0dd, "Marvell/QLogic"),
    (0xf4e9d4, "Marvell/QLogic"),
    (0x001b32, "Marvell/QLogic"),
    (0x00e0fc, "Huawei"),
    (0x001882, "Huawei"),
    (0x0000c9, "Emulex"),
    (0x005056, "VMware"),
    (0x525400, "QEMU/KVM virtual NIC"),
];

/// The vendor of a device named `name` whose GUID is `guid` (network byte
/// order, as `ibv_get_device_guid` returns it); `None` when neither tells.
pub fn vendor(name: &str, guid: Option<u64>) -> Option<&'static str> {
    FAMILIES
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|(_, v)| *v)
        .or_else(|| guid.and_then(|g| by_oui(u64::from_be(g))))
}

/// The vendor of the OUI in a GUID (host byte order).
fn by_oui(guid: u64) -> Option<&'static str> {
    let b = guid.to_be_bytes();
    let oui = match (b[3], b[4]) {
        // EUI-64 from a MAC: the MAC's OUI has the U/L bit flipped.
        (0xff, 0xfe) => u32::from_be_bytes([0, b[0] ^ 0x02, b[1], b[2]]),
        _ => u32::from_be_bytes([0, b[0], b[1], b[2]]),
    };
    OUIS.iter().find(|(o, _)| *o == oui).map(|(_, v)| *v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_family_then_by_oui() {
        let be = |g: u64| Some(g.to_be());
        assert_eq!(vendor("mlx5_0", None), Some("NVIDIA/Mellanox"));
        assert_eq!(vendor("bnxt_re1", None), Some("Broadcom"));
        assert_eq!(vendor("efa_0", None), Some("AWS EFA"));
        assert_eq!(
            vendor("rxe0", be(0x5054_00ff_fe12_3456)),
            Some("soft-RoCE (rxe)")
        );
        // A renamed device: an InfiniBand GUID's OUI.
        assert_eq!(
            vendor("ibp1s0", be(0x0002_c903_0000_1234)),
            Some("NVIDIA/Mellanox")
        );
        // A RoCE GUID from MAC 00:07:43:12:34:56 (Chelsio).
        assert_eq!(
            vendor("rocep1s0", be(0x0207_43ff_fe12_3456)),
            Some("Chelsio")
        );
        assert_eq!(vendor("rocep2s0", be(0x3efd_feff_fe00_0001)), Some("Intel"));
        assert_eq!(vendor("x0", be(0x1234_5678_9abc_def0)), None);
        assert_eq!(vendor("x0", None), None);
    }
}
