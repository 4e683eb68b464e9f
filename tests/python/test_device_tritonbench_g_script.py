"""scripts/device-tritonbench-g search, its control flow without a GPU: kforge, the importer, the final
measurement, the bounded-compile check and nvidia-smi are stand-ins that record what they were asked and
run out of GPU memory where a test says so. What is checked is the script's own logic: which operators are
searched with how many workers, which are measured, set aside and archived."""
import json
import os
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import shutil

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "device-tritonbench-g"

# The Python the script calls ($KFORGE_PYTHON): the three GPU modules are stand-ins, anything else (the
# script's inline programs, accept.trials_line) runs on the real interpreter.
FAKE_PYTHON = r'''#!{python}
import json, os, sys
argv = sys.argv[1:]
log = os.environ["FAKE_LOG"]
def record(*words):
    with open(log, "a") as f:
        f.write(" ".join(map(str, words)) + "\n")
if argv[:2] == ["-m", "kforge.tritonbench_g.importer"]:
    out = argv[argv.index("--out") + 1]
    workers = int(argv[argv.index("--workers") + 1])
    ops = (argv[argv.index("--ops") + 1].split(",") if "--ops" in argv
           else os.environ["FAKE_OPS"].split())
    os.makedirs(out, exist_ok=True)
    json.dump([{{"op": op, "status": "ready"}} for op in ops], open(os.path.join(out, "index.json"), "w"))
    for op in ops:
        os.makedirs(os.path.join(out, op), exist_ok=True)
        for arm in ("kforge", "random"):
            json.dump({{"op": op, "workers": workers}}, open(os.path.join(out, op, arm + ".json"), "w"))
    record("import", workers, ",".join(ops))
    print(f"{{len(ops)}} operators: {{len(ops)}} ready")
elif argv[:2] == ["-m", "kforge.triton.bounded_compile"]:
    print('{{"ok": true}}')
elif argv[:2] == ["-m", "kforge.tritonbench_g.measure"]:
    problem, runs = argv[2], argv[argv.index("--runs") + 1]
    config = json.load(open(os.path.join(problem, "kforge.json")))
    if config["op"] in os.environ.get("FAKE_SLOW", "").split():
        import time
        time.sleep(30)
    json.dump({{"op": config["op"], "workers": config["workers"]}}, open(os.path.join(runs, "final.json"), "w"))
    record("measure", config["op"], config["workers"])
    print(f"{{config['op']}}: 3 sizes measured in 0.1 s; correct {{{{'kforge': True}}}}")
else:
    os.execv(sys.executable, [sys.executable] + argv)
'''

# kforge: `run --quiet CONFIG` runs out of GPU memory in the setup where $FAKE_OOM lists "op:workers".
FAKE_KFORGE = r'''#!/usr/bin/env bash
case $1 in
run)
  config=$3
  read -r op workers < <({python} -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c["op"], c["workers"])' "$config")
  arm=$(basename "$config" .json)
  echo "run $op $arm $workers" >> "$FAKE_LOG"
  if [[ " $FAKE_OOM " == *" $op:$workers "* ]]; then
    echo "kforge: the original program cannot serve as the reference, so no variant can be checked:"
    echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB."
    exit 1
  fi
  echo "best: 1.0 ms"
  ;;
export) ;;
esac
'''


NEEDS_TOOLS = pytest.mark.skipif(
    sys.platform != "linux" or not all(shutil.which(t) for t in ("bash", "flock", "timeout", "tar", "sed", "awk")),
    reason="the device script needs Linux with bash, flock, timeout, tar, sed and awk")


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _search(tmp_path: Path, ops: str, oom: str, set_aside: tuple = (), **env_extra) -> dict:
    """``scripts/device-tritonbench-g search`` over the runnable operators ``ops`` (KF_OPS unless a test
    passes KF_OPS=""), a campaign of the test's own with ``set_aside`` in its set-aside.jsonl."""
    fake = tmp_path / "fake"
    (fake / "bin").mkdir(parents=True)
    _executable(fake / "python", FAKE_PYTHON.format(python=sys.executable))
    _executable(fake / "bin" / "kforge", FAKE_KFORGE.format(python=sys.executable))
    _executable(fake / "bin" / "nvidia-smi", "#!/bin/sh\necho 'Fake GPU, 81559'\n")
    (tmp_path / "data" / "perf").mkdir(parents=True)
    runnable = tmp_path / "runnable.jsonl"
    runnable.write_text("".join(json.dumps({"op": op, "runnable": True}) + "\n" for op in ops.split()))
    out, log = tmp_path / "out", tmp_path / "calls.log"
    results = tmp_path / "results"
    results.mkdir()
    (results / "set-aside.jsonl").write_text("".join(json.dumps({"op": op}) + "\n" for op in set_aside))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KF_", "KFORGE_"))}  # the caller's settings
    env.update(OUT=str(out), KF_WORK=str(tmp_path / "work"), KF_TBG_DATA=str(tmp_path / "data"),
               KFORGE_PYTHON=str(fake / "python"), KF_BIN=str(fake / "bin"), KF_RUNNABLE=str(runnable),
               KF_RESULTS=str(results), KF_OPS=ops, FAKE_OPS=ops, FAKE_OOM=oom, FAKE_LOG=str(log),
               PATH=f"{fake / 'bin'}:{os.environ['PATH']}", KF_SEARCH_S="1", KF_WORKERS="4")
    env.update(env_extra)
    env = {k: v for k, v in env.items() if v != ""}
    done = subprocess.run([str(SCRIPT), "search"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    archived = set()
    if (out / "runs.tgz").exists():
        with tarfile.open(out / "runs.tgz") as tar:
            archived = {Path(n).parts[1] for n in tar.getnames() if n.endswith("final.json")}
    return {"calls": log.read_text().splitlines(), "summary": (out / "summary.txt").read_text(),
            "progress": (out / "progress.log").read_text(), "archived": archived, "out": out}


@NEEDS_TOOLS
def test_out_of_memory_alone_is_retried_with_half_the_workers_down_to_one(tmp_path):
    # fake_ok never runs out; fake_big runs out with 4 and 2 workers and fits with 1.
    r = _search(tmp_path, "fake_ok fake_big", oom="fake_big:4 fake_big:2")
    searches = [c for c in r["calls"] if c.startswith("run fake_big kforge")]
    assert searches == ["run fake_big kforge 4", "run fake_big kforge 2", "run fake_big kforge 1"]
    # An original that cannot serve as the reference stops the other arm.
    assert not any(c.startswith("run fake_big random") and not c.endswith(" 1") for c in r["calls"])
    # Measured once, with the worker count that fitted; a search out of memory is not measured.
    assert [c for c in r["calls"] if c.startswith("measure")] == ["measure fake_ok 4", "measure fake_big 1"]
    assert r["progress"].count("fake_big: final measurement skipped") == 2
    assert "searched again with 2 workers: fake_big" in r["summary"]
    assert "searched again with 1 workers: fake_big" in r["summary"]
    assert r["archived"] == {"fake_ok", "fake_big"}
    # Each out-of-memory search comes back as a log and a set-aside record.
    assert sorted(p.name for p in (r["out"] / "oom").iterdir()) == ["fake_big.w2.search.log",
                                                                   "fake_big.w4.search.log"]
    records = [json.loads(l) for l in (r["out"] / "set-aside.jsonl").read_text().splitlines()]
    assert [(x["op"], x["workers"], x["gpu"], x["memory_mib"]) for x in records] == [
        ("fake_big", 4, "Fake GPU", 81559), ("fake_big", 2, "Fake GPU", 81559)]


@NEEDS_TOOLS
def test_out_of_memory_with_one_worker_is_set_aside_and_the_retries_stop(tmp_path):
    r = _search(tmp_path, "fake_huge", oom="fake_huge:4 fake_huge:2 fake_huge:1")
    assert [c for c in r["calls"] if c.startswith("run")] == [
        "run fake_huge kforge 4", "run fake_huge kforge 2", "run fake_huge kforge 1"]
    assert not [c for c in r["calls"] if c.startswith("measure")]
    assert r["archived"] == set()
    assert len((r["out"] / "set-aside.jsonl").read_text().splitlines()) == 3


@NEEDS_TOOLS
def test_kf_oom_workers_bounds_the_retries(tmp_path):
    r = _search(tmp_path, "fake_big", oom="fake_big:4 fake_big:2", KF_OOM_WORKERS="2")
    assert [c for c in r["calls"] if c.startswith("run")] == ["run fake_big kforge 4", "run fake_big kforge 2"]
    off = _search(tmp_path / "off", "fake_big", oom="fake_big:4", KF_OOM_WORKERS="0")
    assert [c for c in off["calls"] if c.startswith("run")] == ["run fake_big kforge 4"]


@NEEDS_TOOLS
def test_out_of_memory_beside_others_is_searched_again_alone_then_with_fewer_workers(tmp_path):
    r = _search(tmp_path, "fake_a fake_b", oom="fake_b:4", KF_OPS_AT_ONCE="2")
    assert [c for c in r["calls"] if c.startswith("run fake_b kforge")] == [
        "run fake_b kforge 4", "run fake_b kforge 4", "run fake_b kforge 2"]
    assert "fake_b: out of GPU memory with 2 operators at once" in r["summary"]
    assert sorted(c for c in r["calls"] if c.startswith("measure")) == ["measure fake_a 4", "measure fake_b 2"]
    assert r["archived"] == {"fake_a", "fake_b"}


@NEEDS_TOOLS
def test_the_retries_stop_at_their_deadline(tmp_path):
    r = _search(tmp_path, "fake_ok fake_big", oom="fake_big:4", KF_OOM_DEADLINE_S="-1")
    assert [c for c in r["calls"] if c.startswith("run fake_big")] == ["run fake_big kforge 4"]
    assert "deadline: fake_big (out of memory alone) left for a later call" in r["summary"]
    assert "searched again" not in r["summary"] and r["archived"] == {"fake_ok"}


@NEEDS_TOOLS
def test_a_short_last_group_is_alone(tmp_path):
    # Three operators two at a time: the last runs alone, so out of memory there is "alone" at once.
    r = _search(tmp_path, "fake_a fake_b fake_c", oom="fake_c:4", KF_OPS_AT_ONCE="2")
    assert [c for c in r["calls"] if c.startswith("run fake_c kforge")] == ["run fake_c kforge 4",
                                                                           "run fake_c kforge 2"]
    assert "fake_c: out of GPU memory alone" in r["summary"]


@NEEDS_TOOLS
def test_a_final_measurement_past_its_limit_is_set_aside(tmp_path):
    r = _search(tmp_path, "fake_slow fake_ok", oom="", FAKE_SLOW="fake_slow", KF_MEASURE_S="1")
    assert "fake_slow: the final measurement ran past its 1 s" in r["summary"]
    assert r["archived"] == {"fake_ok"}
    records = [json.loads(l) for l in (r["out"] / "set-aside.jsonl").read_text().splitlines()]
    assert [(x["op"], x["reason"], x["workers"]) for x in records] == [("fake_slow", "measure_timeout", 4)]
    assert "stopped at its limit of 1 s" in records[0]["detail"]
    assert (r["out"] / "timeout" / "fake_slow.w4.search.log").exists()


@NEEDS_TOOLS
def test_without_kf_ops_the_operators_set_aside_come_last(tmp_path):
    r = _search(tmp_path, "fake_a fake_b fake_c", oom="", set_aside=("fake_a",), KF_OPS="")
    assert [c.split()[1] for c in r["calls"] if c.startswith("run") and " kforge " in c] == \
        ["fake_b", "fake_c", "fake_a"]
