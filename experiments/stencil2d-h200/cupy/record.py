#!/usr/bin/env python3
"""Brute-force the stencil2d space on the GPU at hand and write a Kernel Tuner cache file.

The minimal recorder behind kforge's embedded default (issue 2, item 9); kforge's own GPU engine
re-records the space with metrics (issue 3). For every configuration that the T1 file admits:
  1. compile with NVRTC (through CuPy), parameters injected as macros;
  2. check correctness on every check shape: fresh seeded normal inputs, output poisoned with NaN,
     compared with an independent CuPy array-expression reference (relative L2 error <= 1e-5, no NaN);
  3. warm up, then time 32 launches with CUDA events, each after an L2 flush outside the timed region.
Output: cache.json in Kernel Tuner's cache format (times in ms, "time" = mean of "times" as Kernel Tuner
stores it; kforge's replay evaluator uses the median of "times").

Usage: python3 experiments/stencil2d-h200/cupy/record.py [--out cache.json] [--limit N]
"""
import argparse, itertools, json, math, os, subprocess, sys, time
import numpy as np
import cupy as cp

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
T1 = json.load(open(os.path.join(HERE, "T1.json")))
SOURCE = open(os.path.join(HERE, "stencil2d.cu")).read()
NX, NY = T1["KernelSpecification"]["ProblemSize"]
C0, C1 = np.float32(0.6), np.float32(0.1)
CHECK_SHAPES = [(NY, NX), (777, 1000), (33, 65)]  # (ny, nx); the odd ones are multiples of no tile
REPEATS, WARMUP = 32, 3


def space():
    params = T1["ConfigurationSpace"]["TuningParameters"]
    names = [p["Name"] for p in params]
    values = [eval(p["Values"]) for p in params]
    conds = [c["Expression"] for c in T1["ConfigurationSpace"]["Conditions"]]
    for combo in itertools.product(*values):
        env = dict(zip(names, combo))
        if all(eval(c, {}, env) for c in conds):
            yield names, values, env


def reference(a):
    p = cp.pad(a, 1, mode="edge")
    return C0 * a + C1 * (p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:])


def grid(cfg, ny, nx):
    bx, by = cfg["block_size_x"] * cfg["tile_size_x"], cfg["block_size_y"] * cfg["tile_size_y"]
    return ((nx + bx - 1) // bx, (ny + by - 1) // by, 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "cache.json"))
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args()

    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    l2 = dev.attributes["L2CacheSize"]
    flush = cp.empty(4 * l2 // 4, dtype=cp.float32)  # 4x L2, rewritten before each timed launch
    big_in = cp.empty((NY, NX), dtype=cp.float32)
    big_out = cp.empty((NY, NX), dtype=cp.float32)
    start_ev = [cp.cuda.Event() for _ in range(REPEATS)]
    end_ev = [cp.cuda.Event() for _ in range(REPEATS)]
    clocks = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu",
                             "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()

    cache, keys, tune_params = {}, None, None
    t_all = time.perf_counter()
    for i, (names, values, cfg) in enumerate(space()):
        if args.limit and i >= args.limit:
            break
        keys, tune_params = names, dict(zip(names, values))
        key = ",".join(str(cfg[n]) for n in names)
        rec = dict(cfg)
        t0 = time.perf_counter()
        opts = ("-std=c++17", "--gpu-architecture=sm_90") + tuple(f"-D{n}={cfg[n]}" for n in names)
        try:
            mod = cp.RawModule(code=SOURCE, options=opts, backend="nvrtc")
            fn = mod.get_function("stencil2d")
        except Exception as e:  # compile failure is data
            rec.update(time="CompilationFailedConfig", error=str(e)[:500], compile_time=1e3 * (time.perf_counter() - t0),
                       verification_time=0, benchmark_time=0, framework_time=0, strategy_time=0)
            cache[key] = rec
            continue
        t1 = time.perf_counter()
        block = (cfg["block_size_x"], cfg["block_size_y"], 1)
        status, err = "ok", None
        try:
            rng = cp.random.default_rng(1000 + i)
            for (ny, nx) in CHECK_SHAPES:
                a = big_in[:ny, :nx] if (ny, nx) == (NY, NX) else cp.empty((ny, nx), cp.float32)
                a[...] = rng.standard_normal((ny, nx), dtype=cp.float32)
                o = big_out if (ny, nx) == (NY, NX) else cp.empty((ny, nx), cp.float32)
                o.fill(cp.nan)  # poison: unwritten elements fail
                fn(grid(cfg, ny, nx), block, (a, o, np.int32(nx), np.int32(ny), C0, C1))
                cp.cuda.runtime.deviceSynchronize()
                ref = reference(a)
                if bool(cp.isnan(o).any()):
                    status, err = "wrong", f"NaN or unwritten output at shape {ny}x{nx}"
                    break
                rel = float(cp.linalg.norm(o - ref) / cp.linalg.norm(ref))
                if not rel <= 1e-5:
                    status, err = "wrong", f"relative error {rel:.3g} at shape {ny}x{nx}"
                    break
        except cp.cuda.driver.CUDADriverError as e:
            status, err = "launch", str(e)
        except cp.cuda.runtime.CUDARuntimeError as e:
            status, err = "launch", str(e)
        t2 = time.perf_counter()
        if status != "ok":
            rec.update(time="RuntimeFailedConfig" if status == "launch" else "InvalidConfig", error=err,
                       compile_time=1e3 * (t1 - t0), verification_time=1e3 * (t2 - t1), benchmark_time=0,
                       framework_time=0, strategy_time=0)
            cache[key] = rec
            print(f"[{i}] {key}: {status}: {err}", flush=True)
            continue
        args_ = (big_in, big_out, np.int32(NX), np.int32(NY), C0, C1)
        g = grid(cfg, NY, NX)
        for _ in range(WARMUP):
            fn(g, block, args_)
        for r in range(REPEATS):
            flush.fill(float(r))  # evict L2 outside the timed region
            start_ev[r].record()
            fn(g, block, args_)
            end_ev[r].record()
        end_ev[-1].synchronize()
        times = [cp.cuda.get_elapsed_time(start_ev[r], end_ev[r]) for r in range(REPEATS)]
        t3 = time.perf_counter()
        mean = float(np.mean(times))
        rec.update(time=mean, times=times, compile_time=1e3 * (t1 - t0), verification_time=1e3 * (t2 - t1),
                   benchmark_time=1e3 * (t3 - t2), framework_time=0.0, strategy_time=0,
                   **{"GB/s": 2 * NX * NY * 4 / (float(np.median(times)) * 1e-3) / 1e9},
                   timestamp=time.strftime("%Y-%m-%d %H:%M:%S+00:00", time.gmtime()))
        t4 = time.perf_counter()
        rec["framework_time"] = 1e3 * (t4 - t3)
        cache[key] = rec
        if i % 50 == 0:
            print(f"[{i}] {key}: median {np.median(times):.4f} ms  ({rec['GB/s']:.0f} GB/s)", flush=True)

    out = {
        "device_name": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
        "kernel_name": "stencil2d",
        "problem_size": [NX, NY],
        "tune_params_keys": keys,
        "tune_params": tune_params,
        "objective": "time",
        "recorded_by": "experiments/stencil2d-h200/record.py",
        "recorded_with": {"cupy": cp.__version__, "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
                          "driver": cp.cuda.runtime.driverGetVersion(), "l2_bytes": l2,
                          "nvidia_smi_clocks_before": clocks, "repeats": REPEATS, "warmup": WARMUP,
                          "check_shapes": CHECK_SHAPES, "l2_flush_bytes": int(flush.nbytes)},
        "cache": cache,
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=None, separators=(",", ":"))
    ok = [v for v in cache.values() if not isinstance(v["time"], str)]
    best = min(ok, key=lambda v: np.median(v["times"]))
    print(f"{len(cache)} configurations, {len(ok)} ok, in {time.perf_counter() - t_all:.0f} s; best "
          f"{ {n: best[n] for n in keys} } median {np.median(best['times']):.4f} ms ({best['GB/s']:.0f} GB/s)")


if __name__ == "__main__":
    main()
