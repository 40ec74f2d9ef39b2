#!/usr/bin/python3
"""pyverbs end to end: list the devices, open the first, allocate a PD,
register an MR, then close everything in order. Prints one line per step.
Exit status: 0 done, 2 no device, 3 the device would not open."""

import sys

import pyverbs.enums as e
from pyverbs.device import Context, get_device_list
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError

devices = get_device_list()
for dev in devices:
    print(f"device {dev.name.decode()} guid {dev.guid:#x}")
if not devices:
    print("no device")
    sys.exit(2)
name = devices[0].name.decode()
try:
    ctx = Context(name=name)
except PyverbsError as err:
    print(f"open {name}: {err}")
    sys.exit(3)
pd = PD(ctx)
mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
print(f"opened {name}, pd, mr length {mr.length} lkey {mr.lkey:#x}")
mr.close()
pd.close()
ctx.close()
print("closed")
