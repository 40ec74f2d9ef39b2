# The fake-sysfs test bed for the REAL libibverbs, for bench/run.sh.
# Sourced (POSIX sh). Needs root (or a user namespace) for the mount namespace.
#
# libibverbs scans $SYSFS_PATH/class/infiniband_verbs/uverbsN and stat()s
# /dev/infiniband/uverbsN: three devices (rxe0, mlx5_0, mlx4_0) that the real
# provider plugins match, so the real library lists them, names them and
# reads their GUIDs. ibv_open_device fails (no kernel driver answers).

# testbed_tree DIR: writes the fake sysfs tree under DIR.
testbed_tree() {
    _tb=$1
    mkdir -p "$_tb/class/infiniband_verbs"
    echo 6 > "$_tb/class/infiniband_verbs/abi_version"
    _n=0
    # name  provider-abi  node_guid  modalias (empty: matched by name)
    while read -r _name _abi _guid _alias; do
        _u="$_tb/class/infiniband_verbs/uverbs$_n"
        mkdir -p "$_u"
        echo "$_name" > "$_u/ibdev"
        echo "231:19$_n" > "$_u/dev"
        echo "$_abi" > "$_u/abi_version"
        _d="$_tb/class/infiniband/$_name"
        mkdir -p "$_d/device"
        echo "1: CA" > "$_d/node_type"
        echo "$_guid" > "$_d/node_guid"
        [ "$_alias" = "-" ] || echo "$_alias" > "$_d/device/modalias"
        _n=$((_n + 1))
    done <<TREE
rxe0 2 0c42:a1ff:fe00:0001 -
mlx5_0 1 0c42:a103:0012:3456 pci:v000015B3d00001017sv000015B3sd00000008bc02sc00i00
mlx4_0 4 0002:c903:0045:6789 pci:v000015B3d00001003sv000015B3sd00000006bc02sc00i00
TREE
    TESTBED_DEVICES=$_n
}

# testbed_dev SCRATCH: inside a private mount namespace, puts an overlayfs
# over /dev (upper layer on a tmpfs mounted at SCRATCH, so it works whatever
# filesystem SCRATCH is on) and creates the empty files
# /dev/infiniband/uverbsN there; the machine's /dev is untouched. A fresh
# tmpfs goes over /dev/shm, which the overlay hides.
testbed_dev() {
    _s=$1
    mkdir -p "$_s" && mount -t tmpfs tmpfs "$_s" || return 1
    mkdir -p "$_s/upper" "$_s/work"
    mount -t overlay overlay -o "lowerdir=/dev,upperdir=$_s/upper,workdir=$_s/work" /dev || return 1
    mount -t tmpfs tmpfs /dev/shm 2>/dev/null || true
    mkdir -p /dev/infiniband || return 1
    _i=0
    while [ "$_i" -lt "${TESTBED_DEVICES:-3}" ]; do
        : > "/dev/infiniband/uverbs$_i" || return 1
        _i=$((_i + 1))
    done
}
