"""A variant written by ``kforge render`` (variant.json + variant.cubin), loaded and launched through the CUDA
driver API (ctypes, libcuda.so.1) in PyTorch's context and on PyTorch's current stream, so that it is timed by
the same CUDA events, on the same buffers, as the PyTorch experts.

Contracts:
- ``bind(manifest, buffers, constants)`` checks, without a GPU, that the harness's buffers are what the kernel
  description says (every buffer argument present, with the described element count and element size) and
  returns the launch's plan: the kernel parameters in order (buffer names, typed scalar values, or tensor maps:
  the manifest's layout, encoded over the named buffer by ``Variant``) and the ``__constant__`` uploads. A
  mismatch raises ValueError naming the argument. ``buffers`` maps an argument
  name to an object with ``numel()`` and ``element_size()`` (a torch.Tensor, or a stand-in in tests).
- ``Variant(folder, buffers, constants)`` (GPU) loads the CUBIN into the current context, opts in to the
  dynamic shared memory above 48 KiB the launch needs, uploads the constants, and ``launch()`` enqueues one
  launch on torch.cuda.current_stream(). Errors are RuntimeError with the driver's error name.
"""
from __future__ import annotations

import ctypes
import json
from pathlib import Path

# kf::dtype names (include/kforge/kernel.hpp) -> bytes and the ctypes type of a scalar parameter.
DTYPES = {
    "f32": (4, ctypes.c_float), "f64": (8, ctypes.c_double), "f16": (2, None), "bf16": (2, None),
    "i8": (1, ctypes.c_int8), "u8": (1, ctypes.c_uint8), "i16": (2, ctypes.c_int16), "u16": (2, ctypes.c_uint16),
    "i32": (4, ctypes.c_int32), "u32": (4, ctypes.c_uint32), "i64": (8, ctypes.c_int64), "u64": (8, ctypes.c_uint64),
}
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
# cuda.h's CUtensorMapDataType for each dtype (bit-exact copies: signed 8/16-bit as unsigned), and the swizzle
# and L2 promotion enums by byte count.
TENSOR_MAP_TYPES = {"u8": 0, "i8": 0, "u16": 1, "i16": 1, "u32": 2, "i32": 3, "u64": 4, "i64": 5, "f16": 6,
                    "f32": 7, "f64": 8, "bf16": 9}
TENSOR_MAP_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}
TENSOR_MAP_L2_PROMOTION = {0: 0, 64: 1, 128: 2, 256: 3}


class TensorMap(ctypes.Structure):
    """CUtensorMap: 128 opaque bytes (cuda.h aligns it to 64 or 128 bytes; the encoder gets an aligned copy)."""
    _fields_ = [("opaque", ctypes.c_uint64 * 16)]


def encode_tensor_map(driver, arg: dict, address: int) -> TensorMap:
    """cuTensorMapEncodeTiled of a render manifest's tensor_map argument over `address` (zeros when disabled)."""
    out = TensorMap()
    if not arg.get("enabled", True):
        return out
    rank = len(arg["dims"])
    # The driver wants the map 64-byte aligned (128 in CUDA 13's cuda.h): encode into an aligned scratch.
    raw = ctypes.create_string_buffer(128 + 128)
    aligned = (ctypes.addressof(raw) + 127) // 128 * 128
    u64s, u32s = ctypes.c_uint64 * 5, ctypes.c_uint32 * 5
    dims = u64s(*arg["dims"])
    strides = u64s(*arg["strides_bytes"])
    box = u32s(*arg["box"])
    element_strides = u32s(1, 1, 1, 1, 1)
    driver.check(driver.lib.cuTensorMapEncodeTiled(
        ctypes.c_void_p(aligned), TENSOR_MAP_TYPES[arg["type"]], ctypes.c_uint32(rank), ctypes.c_void_p(address),
        dims, strides, box, element_strides, 0, TENSOR_MAP_SWIZZLE[arg["swizzle"]],
        TENSOR_MAP_L2_PROMOTION[arg["l2_promotion"]], 1 if arg["oob_fill"] == "nan" else 0),
        f"cuTensorMapEncodeTiled({arg['name']})")
    ctypes.memmove(ctypes.addressof(out), aligned, 128)
    return out


def load_manifest(folder: Path) -> dict:
    path = Path(folder) / "variant.json"
    try:
        m = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: cannot read the manifest ({e})") from None
    for key in ("kernel", "arguments", "launch", "shape"):
        if key not in m:
            raise ValueError(f"{path}: no '{key}' (not written by kforge render?)")
    return m


def bind(manifest: dict, buffers: dict, constants: dict | None = None) -> dict:
    """The launch plan of a manifest with these buffers (see the module's contract)."""
    constants = constants or {}
    params, uploads, outputs = [], [], []
    for a in manifest["arguments"]:
        name, kind, dtype = a["name"], a["kind"], a["type"]
        if dtype not in DTYPES:
            raise ValueError(f"argument {name}: unknown type {dtype}")
        size = DTYPES[dtype][0]
        if kind == "tensor_map":
            if a.get("enabled", True) and a.get("buffer") not in buffers:
                raise ValueError(f"argument {name}: the tensor map views buffer {a.get('buffer')}, which the harness "
                                 f"lacks (it has {sorted(buffers)})")
            params.append(("tensor_map", name, dtype, a))
            continue
        if kind == "scalar":
            ctype = DTYPES[dtype][1]
            if ctype is None:
                raise ValueError(f"argument {name}: scalars of type {dtype} are not supported")
            params.append(("scalar", name, dtype, a["value"]))
            continue
        source = constants if kind == "constant" else buffers
        if name not in source:
            raise ValueError(f"argument {name}: the harness has no {'constant' if kind == 'constant' else 'buffer'} "
                             f"of that name (it has {sorted(source)})")
        t = source[name]
        if t.element_size() != size:
            raise ValueError(f"argument {name}: the kernel reads {dtype} ({size} bytes), the harness's buffer has "
                             f"{t.element_size()}-byte elements")
        if t.numel() != a["count"]:
            raise ValueError(f"argument {name}: the kernel expects {a['count']} elements, the harness's buffer has "
                             f"{t.numel()}")
        if a.get("param", True) and kind != "constant":
            params.append(("buffer", name, dtype, None))
        if a.get("constant"):
            uploads.append((name, a["count"] * size))
        if a.get("role") in ("out", "inout"):
            outputs.append(name)
    return {"params": params, "uploads": uploads, "outputs": outputs}


class Driver:
    """The few driver API calls a launch needs (libcuda.so.1 through ctypes)."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")

    def check(self, result: int, what: str):
        if result != 0:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(result, ctypes.byref(name))
            raise RuntimeError(f"{what}: {name.value.decode() if name.value else result}")

    def ensure_context(self, device: int):
        """Makes the device's primary context (PyTorch's) current on this thread when none is."""
        self.check(self.lib.cuInit(0), "cuInit")
        ctx = ctypes.c_void_p()
        self.check(self.lib.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            dev = ctypes.c_int()
            self.check(self.lib.cuDeviceGet(ctypes.byref(dev), device), "cuDeviceGet")
            self.check(self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
            self.check(self.lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")


class Variant:
    """A rendered variant bound to torch tensors (see the module's contract)."""

    def __init__(self, folder: Path, buffers: dict, constants: dict | None = None, driver: Driver | None = None):
        import torch

        self.folder = Path(folder)
        self.manifest = load_manifest(self.folder)
        self.plan = bind(self.manifest, buffers, constants)
        self.buffers, self.constants = buffers, constants or {}
        self.torch = torch
        self.d = driver or Driver()
        self.d.ensure_context(torch.cuda.current_device())
        image = (self.folder / self.manifest.get("cubin_file", "variant.cubin")).read_bytes()
        self._image = ctypes.create_string_buffer(image, len(image))
        self.module = ctypes.c_void_p()
        self.d.check(self.d.lib.cuModuleLoadData(ctypes.byref(self.module), self._image), "cuModuleLoadData")
        self.function = ctypes.c_void_p()
        symbol = self.manifest.get("lowered_name") or self.manifest["entry"]
        self.d.check(self.d.lib.cuModuleGetFunction(ctypes.byref(self.function), self.module, symbol.encode()),
                     f"cuModuleGetFunction({symbol})")
        launch = self.manifest["launch"]
        self.grid, self.block, self.shared = launch["grid"], launch["block"], int(launch["shared_bytes"])
        if self.shared > 48 * 1024:
            self.d.check(self.d.lib.cuFuncSetAttribute(self.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                       self.shared), "cuFuncSetAttribute(dynamic shared memory)")
        self.upload_constants()
        # The parameter block: one ctypes object per kernel parameter, and an array of their addresses.
        self._values = []
        for kind, name, dtype, value in self.plan["params"]:
            if kind == "buffer":
                self._values.append(ctypes.c_uint64(buffers[name].data_ptr()))
            elif kind == "tensor_map":
                address = buffers[value["buffer"]].data_ptr() if value.get("enabled", True) else 0
                self._values.append(encode_tensor_map(self.d, value, address))
            else:
                self._values.append(DTYPES[dtype][1](value))
        self._params = (ctypes.c_void_p * max(1, len(self._values)))(
            *[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in self._values])

    def upload_constants(self):
        """Copies each constant argument's tensor into the module's __constant__ symbol of its name."""
        for name, nbytes in self.plan["uploads"]:
            ptr, size = ctypes.c_uint64(), ctypes.c_size_t()
            self.d.check(self.d.lib.cuModuleGetGlobal_v2(ctypes.byref(ptr), ctypes.byref(size), self.module,
                                                         name.encode()), f"cuModuleGetGlobal({name})")
            if size.value < nbytes:
                raise RuntimeError(f"__constant__ {name} holds {size.value} bytes; the argument has {nbytes}")
            src = self.constants.get(name, self.buffers.get(name))
            self.torch.cuda.synchronize()
            self.d.check(self.d.lib.cuMemcpyDtoD_v2(ptr, ctypes.c_uint64(src.data_ptr()), ctypes.c_size_t(nbytes)),
                         f"copy into __constant__ {name}")

    def output(self):
        """The tensor the kernel writes (the description's single out or inout buffer)."""
        outs = self.plan["outputs"]
        if len(outs) != 1:
            raise ValueError(f"{self.manifest['kernel']}: {len(outs)} written buffers; the harness compares one")
        return self.buffers[outs[0]]

    def launch(self):
        stream = ctypes.c_void_p(self.torch.cuda.current_stream().cuda_stream)
        g, b = self.grid, self.block
        self.d.check(self.d.lib.cuLaunchKernel(self.function, g[0], g[1], g[2], b[0], b[1], b[2], self.shared, stream,
                                               self._params, None), "cuLaunchKernel")
