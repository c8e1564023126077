#!/usr/bin/env python3
"""Writes small torch.save-format checkpoints for checkpoint/torch_checkpoint.h's tests, with
Python's standard library only (no torch): zipfile (stored members) and pickle, laid out as
torch.save lays out a state dict (learned from the format torch writes, no torch code):

  <archive>/data.pkl    pickle of an OrderedDict (with a _metadata attribute, so BUILD is used)
                        whose tensors pickle as torch._utils._rebuild_tensor_v2(storage,
                        storage_offset, size, stride, requires_grad, backward_hooks) and whose
                        storages are persistent ids ('storage', torch.<Type>Storage, key,
                        location, numel)
  <archive>/data/<key>  each storage's raw little-endian bytes
  <archive>/byteorder   "little"
  <archive>/version     "3"

Stand-in `torch` / `torch._utils` modules make pickle write the same GLOBALs torch's do.

    python3 tests/checkpoint/goldens/torch_state_dict.py   # rewrites the .pth files here

Outputs: state_dict_p2.pth (protocol 2, torch.save's default), state_dict_p4.pth (protocol 4:
FRAME, MEMOIZE, STACK_GLOBAL, SHORT_BINUNICODE), nested_p2.pth ({"state_dict": ...,
"epoch": 3}). The tensors (tests/checkpoint/torch_checkpoint_test.cpp checks every value):
  "conv.weight"  float32 [2, 3] = 0.5 * (0..5)          storage 0 (6 floats)
  "conv.weight_t" float32 [3, 2] view of storage 0, stride (1, 3)
  "tail"         float32 [2] = storage 0 from offset 4  (2.0, 2.5)
  "codes"        int64 [4] = (-1, 0, 7, 2^40)           storage 1
  "half"         bfloat16 [3] = (1.0, -2.0, 0.5)        storage 2
  "empty"        float32 [0, 4]                         storage 3 (0 elements)
  "step"         the int 7 (not a tensor: skipped)
"""
import collections
import io
import os
import pickle
import struct
import sys
import types
import zipfile

torch = types.ModuleType("torch")
torch_utils = types.ModuleType("torch._utils")
sys.modules["torch"] = torch
sys.modules["torch._utils"] = torch_utils
torch._utils = torch_utils


def _storage_class(name):
    cls = type(name, (), {})
    cls.__module__ = "torch"
    setattr(torch, name, cls)
    return cls


FloatStorage = _storage_class("FloatStorage")
LongStorage = _storage_class("LongStorage")
BFloat16Storage = _storage_class("BFloat16Storage")


def _rebuild_tensor_v2(*args):
    raise RuntimeError("a stand-in: never called")


_rebuild_tensor_v2.__module__ = "torch._utils"
torch_utils._rebuild_tensor_v2 = _rebuild_tensor_v2


class Storage:
    def __init__(self, key, cls, data, numel):
        self.key, self.cls, self.data, self.numel = key, cls, data, numel


class Tensor:
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, size, stride, False, collections.OrderedDict())

    def __reduce_ex__(self, protocol):
        return (_rebuild_tensor_v2, self.args)


class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, Storage):
            return ("storage", obj.cls, obj.key, "cpu", obj.numel)
        return None


def bf16(x):
    return struct.pack("<f", x)[2:]


def state_dict():
    floats = Storage("0", FloatStorage, struct.pack("<6f", *[0.5 * i for i in range(6)]), 6)
    longs = Storage("1", LongStorage, struct.pack("<4q", -1, 0, 7, 1 << 40), 4)
    halves = Storage("2", BFloat16Storage, b"".join(bf16(x) for x in (1.0, -2.0, 0.5)), 3)
    empty = Storage("3", FloatStorage, b"", 0)
    out = collections.OrderedDict()
    out["conv.weight"] = Tensor(floats, 0, (2, 3), (3, 1))
    out["conv.weight_t"] = Tensor(floats, 0, (3, 2), (1, 3))
    out["tail"] = Tensor(floats, 4, (2,), (1,))
    out["codes"] = Tensor(longs, 0, (4,), (1,))
    out["half"] = Tensor(halves, 0, (3,), (1,))
    out["empty"] = Tensor(empty, 0, (0, 4), (4, 1))
    out["step"] = 7
    out._metadata = collections.OrderedDict([("", {"version": 1})])
    return out, [floats, longs, halves, empty]


def write(path, root, storages, protocol, archive):
    buffer = io.BytesIO()
    Pickler(buffer, protocol=protocol).dump(root)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr(f"{archive}/data.pkl", buffer.getvalue())
        zf.writestr(f"{archive}/byteorder", "little")
        for storage in storages:
            zf.writestr(f"{archive}/data/{storage.key}", storage.data)
        zf.writestr(f"{archive}/version", "3\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    sd, storages = state_dict()
    write(os.path.join(here, "state_dict_p2.pth"), sd, storages, 2, "state_dict_p2")
    write(os.path.join(here, "state_dict_p4.pth"), sd, storages, 4, "archive")
    nested = {"epoch": 3, "state_dict": sd}
    write(os.path.join(here, "nested_p2.pth"), nested, storages, 2, "nested")


if __name__ == "__main__":
    main()
