//! Programs in a private mount namespace whose `/dev` has the
//! `/dev/infiniband/uverbsN` entries this machine lacks (it has no RDMA
//! hardware): an overlayfs over `/dev` adds them. The machine's own `/dev`
//! is never touched. Needs root.

use std::process::{Command, Stdio};

use super::*;

/// What `/dev/infiniband/uverbsN` is in the namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UverbsNode {
    /// An empty regular file: the real libibverbs finds the device and its
    /// open fails (the fake-sysfs test bed, [`Testbed`]).
    EmptyFile,
    /// A character device with the kernel's uverbs numbers (231:192+N),
    /// mode 0666, as on a machine with the hardware. Only `stat()`ed: UCX
    /// lists a verbs device only if this is a character device it may read
    /// and write. The sim never opens it; nothing here may (no driver).
    CharDevice,
}

/// `devns.sh NS_DIR N_NODES KIND PROGRAM ARGS...`, run by `sh` in the new
/// mount namespace: sets it up, then execs the program. The setup commands
/// run without the caller's LD_PRELOAD / LD_LIBRARY_PATH; the program gets
/// them back.
const DEVNS_SH: &str = r#"
set -e
ns=$1; n=$2; kind=$3; shift 3
if [ "${LD_PRELOAD+set}" = set ]; then tb_preload=$LD_PRELOAD; unset LD_PRELOAD; fi
if [ "${LD_LIBRARY_PATH+set}" = set ]; then tb_libpath=$LD_LIBRARY_PATH; unset LD_LIBRARY_PATH; fi
mount -t tmpfs -o mode=0755 ibv-testbed "$ns"
mkdir -p "$ns/upper/infiniband" "$ns/work" "$ns/dev"
i=0
while [ "$i" -lt "$n" ]; do
    node="$ns/upper/infiniband/uverbs$i"
    case $kind in
        file) : > "$node" ;;
        chr) mknod -m 0666 "$node" c 231 $((192 + i)) ;;
        *) echo "devns.sh: bad kind $kind" >&2; exit 2 ;;
    esac
    i=$((i + 1))
done
mount -t overlay overlay -o "lowerdir=/dev,upperdir=$ns/upper,workdir=$ns/work" "$ns/dev"
for sub in /dev/*/; do
    sub=${sub%/}
    if mountpoint -q "$sub"; then mount --rbind "$sub" "$ns/dev/${sub#/dev/}"; fi
done
mount --move "$ns/dev" /dev
if [ "${tb_preload+set}" = set ]; then LD_PRELOAD=$tb_preload; export LD_PRELOAD; fi
if [ "${tb_libpath+set}" = set ]; then LD_LIBRARY_PATH=$tb_libpath; export LD_LIBRARY_PATH; fi
exec "$@"
"#;

/// A private `/dev` with `nodes` uverbs entries of one kind; each
/// [`DevNamespace::command`] gets a namespace of its own.
pub struct DevNamespace {
    dir: TempDir,
    nodes: usize,
    kind: UverbsNode,
}

impl DevNamespace {
    pub fn new(kind: UverbsNode, nodes: usize) -> DevNamespace {
        let dir = TempDir::new("devns");
        std::fs::create_dir_all(dir.join("ns")).unwrap();
        std::fs::write(dir.join("devns.sh"), DEVNS_SH).unwrap();
        DevNamespace { dir, nodes, kind }
    }

    /// A command that runs `prog` in a fresh private mount namespace with
    /// the uverbs entries. Add arguments and `env` as usual: they reach
    /// `prog`. `unshare` and `sh` exec into `prog`, so the child's pid is
    /// `prog`'s pid (the `%p` of a log file name). Stdin is /dev/null.
    pub fn command(&self, prog: impl AsRef<std::ffi::OsStr>) -> Command {
        let kind = match self.kind {
            UverbsNode::EmptyFile => "file",
            UverbsNode::CharDevice => "chr",
        };
        let mut cmd = Command::new("unshare");
        cmd.args(["-m", "--propagation", "private", "sh"])
            .arg(self.dir.join("devns.sh"))
            .arg(self.dir.join("ns"))
            .arg(self.nodes.to_string())
            .arg(kind)
            .arg(prog)
            .stdin(Stdio::null());
        cmd
    }
}
