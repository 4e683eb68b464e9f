"""kforge.triton.cupti_metrics: how per-kernel CUPTI values combine into a call's, where the library is
found, and that without a driver the profiler says why instead of crashing (the GPU half runs in
scripts/device-program)."""

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kforge.triton import cupti_metrics as cm

ROOT = Path(__file__).resolve().parents[2]


def kernel(ms, **metrics):
    return {"name": "k", "metrics": {cm.DURATION: ms, **metrics}}


def test_counts_sum_and_rates_weigh_by_duration():
    ranges = [kernel(1.0, **{"dram__bytes_read.sum": 100.0, "dram__throughput.avg.pct_of_peak_sustained_elapsed": 90.0}),
              kernel(3.0, **{"dram__bytes_read.sum": 50.0, "dram__throughput.avg.pct_of_peak_sustained_elapsed": 10.0})]
    out = cm.aggregate(ranges, ["dram__bytes_read.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                                cm.DURATION])
    assert out["dram__bytes_read.sum"] == 150.0
    assert out["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx((90 * 1 + 10 * 3) / 4)
    assert out[cm.DURATION] == 4.0


def test_combine_kinds_follow_the_metric_names():
    assert cm.combine_kind("smsp__inst_executed.sum") == "sum"
    assert cm.combine_kind("sm__cycles_elapsed.avg.per_second") == "weighted"
    assert cm.combine_kind("sm__warps_active.avg.pct_of_peak_sustained_active") == "weighted"
    assert cm.combine_kind("l1tex__t_sector_hit_rate.pct") == "weighted"
    assert cm.combine_kind("dram__bytes_read.sum.per_second") == "weighted"
    assert cm.combine_kind("launch__registers_per_thread.max") == "max"
    assert cm.combine_kind("sm__cycles_active.avg") == "weighted"


def test_missing_values_are_left_out_not_zero():
    ranges = [kernel(1.0, **{"a.sum": None, "b.avg": math.nan}), kernel(2.0, **{"a.sum": 7.0})]
    out = cm.aggregate(ranges, ["a.sum", "b.avg", "c.sum"])
    assert out == {"a.sum": 7.0}


def test_weights_fall_back_to_equal_without_durations():
    ranges = [{"name": "k", "metrics": {"x.avg": 10.0}}, {"name": "k", "metrics": {"x.avg": 30.0}}]
    assert cm.aggregate(ranges, ["x.avg"]) == {"x.avg": 20.0}


def test_the_library_is_found_through_the_environment(tmp_path, monkeypatch):
    lib = tmp_path / "libkforge_cupti.so"
    lib.write_bytes(b"")
    monkeypatch.setenv("KFORGE_CUPTI_LIBRARY", str(lib))
    assert cm.find_library() == lib
    monkeypatch.delenv("KFORGE_CUPTI_LIBRARY")
    worker_bin = tmp_path / "bundle" / "bin"
    worker_bin.mkdir(parents=True)
    (tmp_path / "bundle" / "lib").mkdir()
    bundled = tmp_path / "bundle" / "lib" / "libkforge_cupti.so"
    bundled.write_bytes(b"")
    monkeypatch.setenv("KFORGE_WORKER", str(worker_bin / "kforge-worker"))
    assert cm.find_library() == bundled


def test_a_library_that_does_not_load_is_reported(tmp_path):
    bad = tmp_path / "libkforge_cupti.so"
    bad.write_bytes(b"not an ELF file")
    with pytest.raises(cm.ProfilerUnavailable, match="cannot load"):
        cm.CuptiProfiler(0, library=bad)


BUILT = ROOT / "build" / cm.LIBRARY_NAME


@pytest.mark.skipif(not BUILT.is_file(), reason="build/libkforge_cupti.so not built (scripts/build)")
def test_without_a_driver_the_profiler_says_why():
    # In a child process: a machine with a driver would open the profiler instead (then there is no
    # current context, which the library must also report as a sentence).
    code = ("from kforge.triton.cupti_metrics import CuptiProfiler, ProfilerUnavailable\n"
            "try:\n    CuptiProfiler(0, library=%r)\nexcept ProfilerUnavailable as e:\n    print('UNAVAILABLE', e)\n"
            % str(BUILT))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "python")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("UNAVAILABLE ")
    assert ("libcuda.so.1" in out.stdout) or ("no CUDA context is current" in out.stdout), out.stdout
