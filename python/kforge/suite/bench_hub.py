"""benchmark_hub's convolution kernel at the suite's image size, for the conv2d expert (issue 17, item 3).

    python -m kforge.suite.bench_hub T1_FOLDER --recording REC.json.gz --height 8192 --width 8192 \
        --filter 15 --top 8 --out DIR

T1_FOLDER is benchmark_hub's convolution folder (T1.json and the kernel file it names; read at run time from
../shared/data/tuning-spaces or the device bundle, never copied into the repository). The kernel fixes its
image size with two unconditional #defines (image_height, image_width); this writes DIR/<kernel file> with
those two lines set to the requested size (each must occur exactly once), DIR/kernel.yaml (a kforge kernel
description over the T1 file's parameters and conditions with the suite's shape {H, W, R}; the input is the
image with R - 1 border pixels, the filter both a parameter and the kernel's __constant__ d_filter, as the
T1 file says), DIR/configs.jsonl: the --top fastest configurations of the recording (a Kernel Tuner cache;
by its kforge median, `time_median`, else `time`), one {"configuration", "recorded_ms"} per line, fastest
first, and each configuration alone as DIR/config-<i>.json, for ``kforge render DIR/kernel.yaml --config
@DIR/config-<i>.json`` (then timed by kforge.suite.measure).
Errors (a missing file, a #define not found once, a recording without valid times) exit 2 naming the file.
"""
from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path


class BenchHubError(Exception):
    pass


def read_json(path: Path):
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError, EOFError) as e:
        raise BenchHubError(f"{path}: cannot read ({e})") from None


def resize_source(text: str, height: int, width: int, path: str = "the kernel") -> str:
    """The kernel's source with `#define image_height N` and `#define image_width N` set to the size."""
    for name, value in (("image_height", height), ("image_width", width)):
        pattern = re.compile(rf"^[ \t]*#[ \t]*define[ \t]+{name}[ \t]+\d+[ \t]*$", re.M)
        found = pattern.findall(text)
        if len(found) != 1:
            raise BenchHubError(f"{path}: expected one '#define {name} <number>' line, found {len(found)}")
        text = pattern.sub(f"#define {name} {value}", text)
    return text


def _values(entry: dict, where: str) -> list:
    v = entry.get("Values")
    if isinstance(v, str):  # T1 writes the list as a Python literal; these are plain integer lists
        try:
            v = json.loads(v)
        except json.JSONDecodeError:
            raise BenchHubError(f"{where}: Values {v!r} is not a plain list") from None
    if not isinstance(v, list) or not v:
        raise BenchHubError(f"{where}: no Values")
    return v


def description(t1: dict, kernel_file: str, filter_size: int, where: str = "T1.json") -> str:
    """The kernel description (YAML, which is a superset of the JSON written here) of the T1 file's kernel
    over its parameters and conditions, for the shape names H, W, R."""
    try:
        params = t1["ConfigurationSpace"]["TuningParameters"]
        conditions = [c["Expression"] for c in t1["ConfigurationSpace"].get("Conditions", [])]
        spec = t1["KernelSpecification"]
        name = spec["KernelName"]
    except (KeyError, TypeError) as e:
        raise BenchHubError(f"{where}: not benchmark_hub's convolution T1 file (missing {e})") from None
    parameters = []
    for i, p in enumerate(params):
        vals = _values(p, f"{where}: TuningParameters[{i}]")
        if p["Name"] in ("filter_height", "filter_width") and filter_size not in vals:
            raise BenchHubError(f"{where}: {p['Name']} takes {vals}, not the suite's {filter_size}")
        parameters.append({"name": p["Name"], "values": vals, "default": p.get("Default", vals[0])})
    names = {p["name"] for p in parameters}
    for needed in ("block_size_x", "block_size_y", "tile_size_x", "tile_size_y", "filter_height", "filter_width"):
        if needed not in names:
            raise BenchHubError(f"{where}: no tuning parameter {needed}")
    doc = {
        "name": "bench_hub_convolution",
        "source": kernel_file,
        "entry": name,
        "compiler_options": spec.get("CompilerOptions", []),
        "parameters": parameters,
        "constraints": conditions + [f"filter_height == {filter_size} and filter_width == {filter_size}"],
        "arguments": [
            {"name": "output", "buffer": "f32", "size": "H * W", "role": "out"},
            {"name": "input", "buffer": "f32", "size": "(H + R - 1) * (W + R - 1)", "fill": {"uniform": [-1, 1]}},
            {"name": "filter", "buffer": "f32", "size": "R * R", "fill": "normal"},
            {"name": "d_filter", "constant": "f32", "size": "R * R", "fill": "normal"},
        ],
        "grid": ["(W + block_size_x * tile_size_x - 1) // (block_size_x * tile_size_x)",
                 "(H + block_size_y * tile_size_y - 1) // (block_size_y * tile_size_y)"],
        "block": ["block_size_x", "block_size_y"],
        "shapes": {"time": [{"H": None, "W": None, "R": filter_size}], "check": []},
        "reference": "none",
        "roofline": {"bytes": "4 * (2 * H * W + R * R)", "flops": "2 * H * W * R * R"},
    }
    return doc


def top_configurations(recording: dict, names: list[str], top: int, where: str = "recording") -> list[dict]:
    """The `top` fastest configurations of a Kernel Tuner cache, by time_median (kforge's) else time."""
    cache = recording.get("cache") if isinstance(recording, dict) else None
    if not isinstance(cache, dict):
        raise BenchHubError(f"{where}: no 'cache' object (not a Kernel Tuner cache)")
    rows = []
    for key, entry in cache.items():
        t = entry.get("time_median", entry.get("time"))
        if isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0:
            missing = [n for n in names if n not in entry]
            if missing:
                raise BenchHubError(f"{where}: entry {key} lacks {missing}")
            rows.append((float(t), key, {n: entry[n] for n in names}))
    if not rows:
        raise BenchHubError(f"{where}: no configuration with a valid time")
    rows.sort(key=lambda r: (r[0], r[1]))
    return [{"configuration": r[2], "recorded_ms": r[0]} for r in rows[:top]]


def prepare(t1_folder: Path, recording: Path, height: int, width: int, filter_size: int, top: int,
            out: Path) -> list[dict]:
    t1_path = t1_folder / "T1.json"
    t1 = read_json(t1_path)
    try:
        kernel_file = t1["KernelSpecification"]["KernelFile"]
    except (KeyError, TypeError):
        raise BenchHubError(f"{t1_path}: no KernelSpecification.KernelFile") from None
    src_path = t1_folder / kernel_file
    try:
        text = src_path.read_text()
    except OSError as e:
        raise BenchHubError(f"{src_path}: cannot read ({e})") from None
    doc = description(t1, kernel_file, filter_size, str(t1_path))
    doc["shapes"]["time"] = [{"H": height, "W": width, "R": filter_size}]
    names = [p["name"] for p in doc["parameters"]]
    configs = top_configurations(read_json(recording), names, top, str(recording))
    out.mkdir(parents=True, exist_ok=True)
    (out / kernel_file).write_text(resize_source(text, height, width, str(src_path)))
    (out / "kernel.yaml").write_text(
        f"# Generated by kforge.suite.bench_hub from {t1_path.name} and {kernel_file} (benchmark_hub's convolution,\n"
        f"# image set to {height} x {width}); for `kforge render`, not a search space of the suite.\n"
        + json.dumps(doc, indent=1) + "\n")
    with open(out / "configs.jsonl", "w", encoding="utf-8") as f:
        for i, c in enumerate(configs):
            f.write(json.dumps(c) + "\n")
            (out / f"config-{i}.json").write_text(json.dumps(c["configuration"]) + "\n")
    return configs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("t1_folder", type=Path)
    ap.add_argument("--recording", type=Path, required=True)
    ap.add_argument("--height", type=int, required=True)
    ap.add_argument("--width", type=int, required=True)
    ap.add_argument("--filter", type=int, required=True)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    try:
        configs = prepare(args.t1_folder, args.recording, args.height, args.width, args.filter, args.top, args.out)
    except BenchHubError as e:
        print(f"kforge.suite.bench_hub: {e}", file=sys.stderr)
        return 2
    print(f"{len(configs)} configurations of benchmark_hub's convolution at {args.height} x {args.width} "
          f"(recorded {configs[0]['recorded_ms']:.4f} .. {configs[-1]['recorded_ms']:.4f} ms) -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
