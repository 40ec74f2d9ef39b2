//! The real rdma-core with devices but no hardware: a fake sysfs tree in a
//! private mount namespace.

use std::path::PathBuf;
use std::process::Command;

use super::*;

/// One device of the fake sysfs tree.
#[derive(Clone, Debug)]
pub struct FakeDevice {
    /// The verbs name (`rxe0`).
    pub name: &'static str,
    /// `node_guid` as sysfs writes it (`0c42:a103:0012:3456`).
    pub node_guid: &'static str,
    /// PCI modalias matched by the mlx4/mlx5 providers; rxe matches by name.
    pub modalias: Option<&'static str>,
    /// The provider ABI in `uverbsN/abi_version`.
    pub abi_version: u32,
}

impl FakeDevice {
    /// The GUID as `ibv_devices` prints it (`0c42a10300123456`).
    pub fn guid(&self) -> String {
        self.node_guid.replace(':', "")
    }
}

/// The three devices of the test bed: an rxe, an mlx5 (ConnectX-5) and an
/// mlx4 (ConnectX-3), in uverbs order.
pub const DEVICES: [FakeDevice; 3] = [
    FakeDevice {
        name: "rxe0",
        node_guid: "0c42:a103:0012:3456",
        modalias: None,
        abi_version: 2,
    },
    FakeDevice {
        name: "mlx5_0",
        node_guid: "9803:9b03:0011:2233",
        modalias: Some("pci:v000015B3d00001017sv000015B3sd00000008bc02sc00i00"),
        abi_version: 1,
    },
    FakeDevice {
        name: "mlx4_0",
        node_guid: "0002:c903:0044:5566",
        modalias: Some("pci:v000015B3d00001003sv000015B3sd00000006bc02sc00i00"),
        abi_version: 4,
    },
];

/// The real rdma-core with three devices and no hardware.
///
/// A fake sysfs tree (`SYSFS_PATH`) describes [`DEVICES`]; [`Testbed::command`]
/// runs a program in a private mount namespace ([`DevNamespace`]) where an
/// overlayfs over `/dev` adds `/dev/infiniband/uverbs0..2` as empty regular
/// files (never device nodes). The real libibverbs and its real provider
/// plugins then list the devices; `ibv_open_device` fails with ENOENT.
/// Needs root. The machine's own `/dev` is never touched.
pub struct Testbed {
    dir: TempDir,
    dev: DevNamespace,
}

impl Testbed {
    /// Builds the sysfs tree in a fresh temporary directory.
    pub fn new() -> Testbed {
        let dir = TempDir::new("testbed");
        let sys = dir.join("sys");
        let write = |path: PathBuf, text: String| {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        };
        write(sys.join("class/infiniband_verbs/abi_version"), "6\n".into());
        for (i, dev) in DEVICES.iter().enumerate() {
            let uverbs = sys.join(format!("class/infiniband_verbs/uverbs{i}"));
            write(uverbs.join("ibdev"), format!("{}\n", dev.name));
            write(uverbs.join("dev"), format!("231:{}\n", 192 + i));
            write(uverbs.join("abi_version"), format!("{}\n", dev.abi_version));
            let ib = sys.join("class/infiniband").join(dev.name);
            write(ib.join("node_type"), "1: CA\n".into());
            write(ib.join("node_guid"), format!("{}\n", dev.node_guid));
            std::fs::create_dir_all(ib.join("device")).unwrap();
            if let Some(modalias) = dev.modalias {
                write(ib.join("device/modalias"), format!("{modalias}\n"));
            }
        }
        Testbed {
            dir,
            dev: DevNamespace::new(UverbsNode::EmptyFile, DEVICES.len()),
        }
    }

    /// The devices the real library will list, in order.
    pub fn devices(&self) -> &'static [FakeDevice] {
        &DEVICES
    }

    /// The fake tree, as `SYSFS_PATH`.
    pub fn sysfs_path(&self) -> PathBuf {
        self.dir.join("sys")
    }

    /// A command that runs `prog` in the test bed. Add arguments, `env`
    /// (`LD_PRELOAD`, `IBV_SHIM_*`, ...) and run it as usual: the arguments
    /// and environment reach `prog`. `unshare` and `sh` exec into `prog`, so
    /// the child's pid is `prog`'s pid (the `%p` of a log file name).
    /// Stdin is /dev/null.
    pub fn command(&self, prog: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = self.dev.command(prog);
        cmd.env("SYSFS_PATH", self.sysfs_path());
        cmd
    }
}

impl Default for Testbed {
    fn default() -> Self {
        Testbed::new()
    }
}
