//! `IBV_SIM_DEVICES` and the device families it may name.
//!
//! The variable is a comma-separated list of device names, each optionally
//! `name=GUID` (`0c42:a103:0012:3456`, `0x0c42a10300123456` or 16 hex
//! digits). A name starts with a known family prefix (`mlx5_0`, `rxe0`,
//! `siw_eth0`, ...), which decides node type, transport, link layer, vendor
//! and the OUI of the default GUID. Unset means `mlx5_0,mlx5_1`; set and
//! empty means no device. Anything malformed is an error that the device
//! list reports (stderr message, empty list, errno `EINVAL`).

use verbs_abi::{IBV_LINK_LAYER_ETHERNET, IBV_LINK_LAYER_INFINIBAND};

/// The environment variable naming the simulated devices.
pub const ENV_DEVICES: &str = "IBV_SIM_DEVICES";
/// The device list when the variable is unset.
pub const DEFAULT_DEVICES: &str = "mlx5_0,mlx5_1";

// `ibv_node_type` values used here.
crate::abi::values!(pub i32: ibv_node_type {
    NODE_CA = IBV_NODE_CA,
    NODE_RNIC = IBV_NODE_RNIC,
});
// `ibv_transport_type` values used here.
crate::abi::values!(pub i32: ibv_transport_type {
    TRANSPORT_IB = IBV_TRANSPORT_IB,
    TRANSPORT_IWARP = IBV_TRANSPORT_IWARP,
});

/// How a family derives its default node GUID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuidStyle {
    /// Vendor OUI, then `0x03`, then a serial (Mellanox, QLogic, ...).
    Oui,
    /// EUI-64 from the MAC address of the Ethernet device (`rxe`, `siw`, ...).
    Mac,
}

/// What a device family looks like to verbs.
#[derive(Debug)]
pub struct Family {
    /// Name prefix, e.g. `mlx5_`.
    pub prefix: &'static str,
    /// Kernel driver / provider name.
    pub driver: &'static str,
    pub node_type: i32,
    pub transport: i32,
    pub link_layer: u8,
    /// IEEE OUI of the vendor (for `GuidStyle::Mac`, of the NIC's MAC).
    pub oui: u32,
    pub guid_style: GuidStyle,
    /// `ibv_device_attr.vendor_id` / `vendor_part_id` / `hw_ver`.
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub fw_ver: &'static str,
    /// sysfs `board_id` (empty: none) and `hca_type`.
    pub board_id: &'static str,
    pub hca_type: &'static str,
    pub phys_ports: u8,
    /// Queue pair types the family supports (UD, UC besides RC).
    pub ud: bool,
    pub uc: bool,
    pub atomics: bool,
    pub srq_resize: bool,
    /// The real device's attributes, limits and provider rules.
    pub profile: &'static crate::profile::Profile,
}

const MLX_OUI: u32 = 0x0002c9;

/// Every family the sim knows, longest prefixes first where they overlap.
pub static FAMILIES: &[Family] = &[
    Family {
        prefix: "mlx5_",
        driver: "mlx5",
        node_type: NODE_CA,
        transport: TRANSPORT_IB,
        link_layer: IBV_LINK_LAYER_INFINIBAND,
        oui: 0x0c42a1,
        guid_style: GuidStyle::Oui,
        vendor_id: 0x02c9,
        vendor_part_id: 4123,
        hw_ver: 0,
        fw_ver: "20.35.1012",
        board_id: "MT_0000000222",
        hca_type: "MT4123",
        phys_ports: 1,
        ud: true,
        uc: true,
        atomics: true,
        srq_resize: false,
        profile: &crate::profile::CONNECTX6,
    },
    Family {
        prefix: "mlx4_",
        driver: "mlx4",
        node_type: NODE_CA,
        transport: TRANSPORT_IB,
        link_layer: IBV_LINK_LAYER_INFINIBAND,
        oui: MLX_OUI,
        guid_style: GuidStyle::Oui,
        vendor_id: 0x02c9,
        vendor_part_id: 4099,
        hw_ver: 1,
        fw_ver: "2.42.5000",
        board_id: "MT_1090120019",
        hca_type: "MT4099",
        phys_ports: 2,
        ud: true,
        uc: true,
        atomics: true,
        srq_resize: false,
        profile: &crate::profile::CONNECTX3,
    },
    Family {
        prefix: "mthca",
        driver: "mthca",
        node_type: NODE_CA,
        transport: TRANSPORT_IB,
        link_layer: IBV_LINK_LAYER_INFINIBAND,
        oui: MLX_OUI,
        guid_style: GuidStyle::Oui,
        vendor_id: 0x02c9,
        vendor_part_id: 25418,
        hw_ver: 0xa0,
        fw_ver: "1.2.0",
        board_id: "MT_0150000001",
        hca_type: "MT25418",
        phys_ports: 2,
        ud: true,
        uc: true,
        atomics: true,
        srq_resize: true,
        profile: &crate::profile::CONNECTX6,
    },
    Family {
        prefix: "qib",
        driver: "ipathverbs",
        node_type: NODE_CA,
        transport: TRANSPORT_IB,
        link_layer: IBV_LINK_LAYER_INFINIBAND,
        oui: 0x001175,
        guid_style: GuidStyle::Oui,
        vendor_id: 0x1175,
        vendor_part_id: 29474,
        hw_ver: 2,
        fw_ver: "",
        board_id: "InfiniPath_QLE7340",
        hca_type: "InfiniPath_QLE7340",
        phys_ports: 1,
        ud: true,
        uc: true,
        atomics: true,
        srq_resize: true,
        profile: &crate::profile::CONNECTX6,
    },
    Family {
        prefix: "hfi1_",
        driver: "hfi1verbs",
        node_type: NODE_CA,
        transport: TRANSPORT_IB,
        link_layer: IBV_LINK_LAYER_INFINIBAND,
        oui: 0x001175,
        guid_style: GuidStyle::Oui,
        vendor_id: 0x1175,
        vendor_part_id: 9456,
        hw_ver: 0x11,
        fw_ver: "1.27.0",
        board_id: "Intel Omni-Path Host Fabric Interface Adapter 100 Series",
        hca_type: "",
        phys_ports: 1,
        ud: true,
        uc: true,
        atomics: true,
        srq_resize: true,
        profile: &crate::profile::CONNECTX6,
    },
    Family {
        prefix: "rxe",
        driver: "rxe",
        node_type: NODE_CA,
        transport: TRANSPORT_IB,
        link_layer: IBV_LINK_LAYER_ETHERNET,
        // QEMU/KVM virtio NIC, 52:54:00.
        oui: 0x525400,
        guid_style: GuidStyle::Mac,
        vendor_id: 0xffffff,
        vendor_part_id: 0,
        hw_ver: 0,
        fw_ver: "",
        board_id: "",
        hca_type: "",
        phys_ports: 1,
        ud: true,
        uc: true,
        atomics: true,
        srq_resize: true,
        profile: &crate::profile::RXE,
    },
    Family {
        prefix: "siw",
        driver: "siw",
        node_type: NODE_RNIC,
        transport: TRANSPORT_IWARP,
        link_layer: IBV_LINK_LAYER_ETHERNET,
        oui: 0x525400,
        guid_style: GuidStyle::Mac,
        vendor_id: 0x626d74,
        vendor_part_id: 0,
        hw_ver: 0,
        fw_ver: "0.0.0",
        board_id: "",
        hca_type: "",
        phys_ports: 1,
        ud: false,
        uc: false,
        atomics: false,
        srq_resize: true,
        profile: &crate::profile::SIW,
    },
    Family {
        prefix: "irdma",
        driver: "irdma",
        node_type: NODE_CA,
        transport: TRANSPORT_IB,
        link_layer: IBV_LINK_LAYER_ETHERNET,
        // Intel Corporate.
        oui: 0x3cfdfe,
        guid_style: GuidStyle::Mac,
        vendor_id: 0x8086,
        vendor_part_id: 5522,
        hw_ver: 2,
        fw_ver: "1.60",
        board_id: "",
        hca_type: "",
        phys_ports: 1,
        ud: true,
        uc: false,
        atomics: false,
        srq_resize: false,
        profile: &crate::profile::CONNECTX6,
    },
    Family {
        prefix: "i40iw",
        driver: "i40iw",
        node_type: NODE_RNIC,
        transport: TRANSPORT_IWARP,
        link_layer: IBV_LINK_LAYER_ETHERNET,
        oui: 0x3cfdfe,
        guid_style: GuidStyle::Mac,
        vendor_id: 0x8086,
        vendor_part_id: 14289,
        hw_ver: 0,
        fw_ver: "0.2",
        board_id: "",
        hca_type: "",
        phys_ports: 1,
        ud: false,
        uc: false,
        atomics: false,
        srq_resize: false,
        profile: &crate::profile::CONNECTX6,
    },
    Family {
        prefix: "cxgb4_",
        driver: "cxgb4",
        node_type: NODE_RNIC,
        transport: TRANSPORT_IWARP,
        link_layer: IBV_LINK_LAYER_ETHERNET,
        // Chelsio Communications.
        oui: 0x000743,
        guid_style: GuidStyle::Mac,
        vendor_id: 0x1425,
        vendor_part_id: 25620,
        hw_ver: 0,
        fw_ver: "1.27.1.0",
        board_id: "1425.6414",
        hca_type: "",
        phys_ports: 2,
        ud: false,
        uc: false,
        atomics: false,
        srq_resize: false,
        profile: &crate::profile::CONNECTX6,
    },
    Family {
        prefix: "bnxt_re",
        driver: "bnxt_re",
        node_type: NODE_CA,
        transport: TRANSPORT_IB,
        link_layer: IBV_LINK_LAYER_ETHERNET,
        // Broadcom.
        oui: 0x000af7,
        guid_style: GuidStyle::Mac,
        vendor_id: 0x14e4,
        vendor_part_id: 5968,
        hw_ver: 0,
        fw_ver: "224.0.110.0",
        board_id: "",
        hca_type: "",
        phys_ports: 1,
        ud: true,
        uc: false,
        atomics: true,
        srq_resize: false,
        profile: &crate::profile::CONNECTX6,
    },
    Family {
        prefix: "qedr",
        driver: "qedr",
        node_type: NODE_CA,
        transport: TRANSPORT_IB,
        link_layer: IBV_LINK_LAYER_ETHERNET,
        // QLogic.
        oui: 0x000e1e,
        guid_style: GuidStyle::Mac,
        vendor_id: 0x1077,
        vendor_part_id: 32880,
        hw_ver: 0,
        fw_ver: "8.59.1.0",
        board_id: "",
        hca_type: "",
        phys_ports: 1,
        ud: true,
        uc: false,
        atomics: true,
        srq_resize: false,
        profile: &crate::profile::CONNECTX6,
    },
    Family {
        prefix: "hns_",
        driver: "hns",
        node_type: NODE_CA,
        transport: TRANSPORT_IB,
        link_layer: IBV_LINK_LAYER_ETHERNET,
        // Huawei.
        oui: 0x00e0fc,
        guid_style: GuidStyle::Mac,
        vendor_id: 0x19e5,
        vendor_part_id: 41506,
        hw_ver: 0x21,
        fw_ver: "1.10.0",
        board_id: "",
        hca_type: "",
        phys_ports: 1,
        ud: true,
        uc: true,
        atomics: true,
        srq_resize: false,
        profile: &crate::profile::CONNECTX6,
    },
    Family {
        prefix: "ocrdma",
        driver: "ocrdma",
        node_type: NODE_CA,
        transport: TRANSPORT_IB,
        link_layer: IBV_LINK_LAYER_ETHERNET,
        // Emulex.
        oui: 0x0000c9,
        guid_style: GuidStyle::Mac,
        vendor_id: 0x10df,
        vendor_part_id: 1824,
        hw_ver: 0,
        fw_ver: "11.4.204.34",
        board_id: "",
        hca_type: "",
        phys_ports: 1,
        ud: true,
        uc: false,
        atomics: false,
        srq_resize: false,
        profile: &crate::profile::CONNECTX6,
    },
    Family {
        prefix: "vmw_pvrdma",
        driver: "vmw_pvrdma",
        node_type: NODE_CA,
        transport: TRANSPORT_IB,
        link_layer: IBV_LINK_LAYER_ETHERNET,
        // VMware.
        oui: 0x005056,
        guid_style: GuidStyle::Mac,
        vendor_id: 0x15ad,
        vendor_part_id: 2080,
        hw_ver: 1,
        fw_ver: "",
        board_id: "",
        hca_type: "",
        phys_ports: 1,
        ud: true,
        uc: false,
        atomics: false,
        srq_resize: false,
        profile: &crate::profile::CONNECTX6,
    },
];

/// One device as configured.
#[derive(Debug, Clone)]
pub struct DeviceSpec {
    pub name: String,
    pub family: &'static Family,
    /// Explicit GUID (host byte order), if `name=GUID` was given.
    pub guid: Option<u64>,
}

/// The family a device name belongs to.
pub fn family_of(name: &str) -> Option<&'static Family> {
    FAMILIES
        .iter()
        .filter(|f| name.starts_with(f.prefix) && name.len() > f.prefix.len())
        .max_by_key(|f| f.prefix.len())
}

/// Parses a GUID: `xxxx:xxxx:xxxx:xxxx`, `0x` + up to 16 hex digits, or 16 hex digits.
pub fn parse_guid(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.contains(':') {
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() != 4 {
            return None;
        }
        let mut v = 0u64;
        for p in parts {
            if p.is_empty() || p.len() > 4 || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            v = (v << 16) | u64::from(u16::from_str_radix(p, 16).ok()?);
        }
        return Some(v);
    }
    let (digits, prefixed) = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(d) => (d, true),
        None => (s, false),
    };
    let ok_len = if prefixed {
        (1..=16).contains(&digits.len())
    } else {
        digits.len() == 16
    };
    if !ok_len || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() < 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

/// Parses an `IBV_SIM_DEVICES` value.
pub fn parse_devices(value: &str) -> Result<Vec<DeviceSpec>, String> {
    let mut out: Vec<DeviceSpec> = Vec::new();
    if value.trim().is_empty() {
        return Ok(out);
    }
    for (i, item) in value.split(',').enumerate() {
        let item = item.trim();
        if item.is_empty() {
            return Err(format!("entry {} is empty", i + 1));
        }
        let (name, guid) = match item.split_once('=') {
            Some((n, g)) => {
                let guid = parse_guid(g).ok_or_else(|| {
                    format!(
                        "bad GUID {g:?} for {n:?} (want xxxx:xxxx:xxxx:xxxx, 0x<hex> or 16 hex digits)"
                    )
                })?;
                (n.trim(), Some(guid))
            }
            None => (item, None),
        };
        if !valid_name(name) {
            return Err(format!(
                "bad device name {name:?} (1-63 characters of [A-Za-z0-9_.-])"
            ));
        }
        let family = family_of(name).ok_or_else(|| {
            let known: Vec<&str> = FAMILIES.iter().map(|f| f.prefix).collect();
            format!(
                "unknown device family in {name:?} (names start with one of: {}, then an index such as mlx5_0 or rxe0)",
                known.join(" ")
            )
        })?;
        if out.iter().any(|d| d.name == name) {
            return Err(format!("device {name:?} is listed twice"));
        }
        if out.len() >= 64 {
            return Err("more than 64 devices".to_string());
        }
        out.push(DeviceSpec {
            name: name.to_string(),
            family,
            guid,
        });
    }
    Ok(out)
}

/// Reads `IBV_SIM_DEVICES` (default `mlx5_0,mlx5_1`).
pub fn devices_from_env() -> Result<Vec<DeviceSpec>, String> {
    match std::env::var(ENV_DEVICES) {
        Ok(v) => parse_devices(&v),
        Err(std::env::VarError::NotPresent) => parse_devices(DEFAULT_DEVICES),
        Err(std::env::VarError::NotUnicode(_)) => Err("the value is not valid UTF-8".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_two_mlx5() {
        let d = parse_devices(DEFAULT_DEVICES).unwrap();
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].name, "mlx5_0");
        assert_eq!(d[0].family.driver, "mlx5");
    }

    #[test]
    fn guids_parse() {
        assert_eq!(
            parse_guid("0c42:a103:0012:3456"),
            Some(0x0c42_a103_0012_3456)
        );
        assert_eq!(
            parse_guid("0x0c42a10300123456"),
            Some(0x0c42_a103_0012_3456)
        );
        assert_eq!(parse_guid("0c42a10300123456"), Some(0x0c42_a103_0012_3456));
        assert_eq!(parse_guid("0c42:a103:0012"), None);
        assert_eq!(parse_guid("xyz"), None);
        assert_eq!(parse_guid("123"), None);
    }

    #[test]
    fn families_and_errors() {
        let d = parse_devices(
            "rxe0, siw0=0x5054:00ff:fe12:3456"
                .replace("0x5054", "5054")
                .as_str(),
        )
        .unwrap();
        assert_eq!(d[0].family.driver, "rxe");
        assert_eq!(d[1].family.driver, "siw");
        assert_eq!(d[1].guid, Some(0x5054_00ff_fe12_3456));
        assert!(parse_devices("mlx5_0,,mlx5_1").is_err());
        assert!(parse_devices("foo0").is_err());
        assert!(parse_devices("mlx5_0,mlx5_0").is_err());
        assert!(parse_devices("mlx5_0=zz").is_err());
        assert!(parse_devices("mlx5_").is_err());
        assert!(parse_devices("").unwrap().is_empty());
    }
}
