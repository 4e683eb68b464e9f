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
    lanes = {{"gpus_at_once": int(argv[argv.index("--gpus-at-once") + 1])}} if "--gpus-at-once" in argv else {{}}
    # an original that crashed: its traceback names the checkout's files by their path on the machine
    error = "File " + os.path.join(os.environ["KFORGE_SOURCE_DIR"], "python", "kforge", "measure.py")
    json.dump({{"op": config["op"], "workers": config["workers"], "error": error, **lanes}},
              open(os.path.join(runs, "final.json"), "w"))
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES")
    record("measure", config["op"], config["workers"], *([f"gpu={{gpu}}"] if gpu else []))
    # Python's warnings name the measurement's variant module by its path on the machine
    print(os.path.join(os.environ.get("TMPDIR", "/tmp"), "kforge-measure", "programs", "0a1b", config["op"] + ".py")
          + ":55: UserWarning: a warning")
    print(f"{{config['op']}}: 3 sizes measured in 0.1 s; correct {{{{'kforge': True}}}}")
else:
    os.execv(sys.executable, [sys.executable] + argv)
'''

# kforge: `run --quiet CONFIG` runs out of GPU memory in the setup where $FAKE_OOM lists "op:workers"; it
# takes $FAKE_SEARCH_S seconds and records the GPU it was given (CUDA_VISIBLE_DEVICES) where one was, and
# the lock its workers make a harness's sweep under.
FAKE_KFORGE = r'''#!/usr/bin/env bash
case $1 in
run)
  config=$3
  read -r op workers < <({python} -c 'import json,sys; c=json.load(open(sys.argv[1])); print(c["op"], c["workers"])' "$config")
  arm=$(basename "$config" .json)
  echo "run $op $arm $workers${{CUDA_VISIBLE_DEVICES:+ gpu=$CUDA_VISIBLE_DEVICES lock=${{KFORGE_INPUTS_LOCK##*/}}}}" >> "$FAKE_LOG"
  sleep "${{FAKE_SEARCH_S:-0}}"
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


# nvidia-smi: `-L` lists $FAKE_GPUS (1) GPUs; a query answers one card.
FAKE_NVIDIA_SMI = r'''#!/bin/sh
if [ "$1" = -L ]; then
  i=0
  while [ "$i" -lt "${FAKE_GPUS:-1}" ]; do echo "GPU $i: Fake GPU (UUID: GPU-fake-$i)"; i=$((i + 1)); done
else
  echo 'Fake GPU, 81559'
fi
'''


NEEDS_TOOLS = pytest.mark.skipif(
    sys.platform != "linux" or not all(shutil.which(t) for t in ("bash", "flock", "timeout", "tar", "sed", "awk")),
    reason="the device script needs Linux with bash, flock, timeout, tar, sed and awk")


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def _search(tmp_path: Path, ops: str, oom: str, set_aside: tuple = (), expect_rc: int = 0, committed: tuple = (),
            redo: tuple = (), **env_extra) -> dict:
    """``scripts/device-tritonbench-g search`` over the runnable operators ``ops`` (KF_OPS unless a test
    passes KF_OPS=""), a campaign of the test's own with ``set_aside`` in its set-aside.jsonl, a final.json
    for each of ``committed`` and ``redo`` in its redo.jsonl."""
    fake = tmp_path / "fake"
    (fake / "bin").mkdir(parents=True)
    _executable(fake / "python", FAKE_PYTHON.format(python=sys.executable))
    _executable(fake / "bin" / "kforge", FAKE_KFORGE.format(python=sys.executable))
    _executable(fake / "bin" / "nvidia-smi", FAKE_NVIDIA_SMI)
    (tmp_path / "data" / "perf").mkdir(parents=True)
    runnable = tmp_path / "runnable.jsonl"
    runnable.write_text("".join(json.dumps({"op": op, "runnable": True}) + "\n" for op in ops.split()))
    out, log = tmp_path / "out", tmp_path / "calls.log"
    results = tmp_path / "results"
    results.mkdir()
    (results / "set-aside.jsonl").write_text("".join(json.dumps({"op": op}) + "\n" for op in set_aside))
    if redo:
        (results / "redo.jsonl").write_text("".join(json.dumps({"op": op, "reason": "r"}) + "\n" for op in redo))
    for op in committed:
        (results / "runs" / op).mkdir(parents=True)
        (results / "runs" / op / "final.json").write_text("{}")
    env = {k: v for k, v in os.environ.items()  # not the caller's settings
           if not k.startswith(("KF_", "KFORGE_")) and k != "CUDA_VISIBLE_DEVICES"}
    env.update(OUT=str(out), KF_WORK=str(tmp_path / "work"), KF_TBG_DATA=str(tmp_path / "data"),
               KFORGE_PYTHON=str(fake / "python"), KF_BIN=str(fake / "bin"), KF_RUNNABLE=str(runnable),
               KF_RESULTS=str(results), KF_OPS=ops, FAKE_OPS=ops, FAKE_OOM=oom, FAKE_LOG=str(log),
               PATH=f"{fake / 'bin'}:{os.environ['PATH']}", KF_SEARCH_S="1", KF_WORKERS="4")
    env.update(env_extra)
    env = {k: v for k, v in env.items() if v != ""}
    done = subprocess.run([str(SCRIPT), "search"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == expect_rc, done.stdout + done.stderr
    if expect_rc:
        return {"summary": (out / "summary.txt").read_text()}
    archived = set()
    if (out / "runs.tgz").exists():
        with tarfile.open(out / "runs.tgz") as tar:
            archived = {Path(n).parts[1] for n in tar.getnames() if n.endswith("final.json")}
    return {"calls": log.read_text().splitlines(), "summary": (out / "summary.txt").read_text(),
            "progress": (out / "progress.log").read_text() if (out / "progress.log").exists() else "", "archived": archived, "out": out}


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


@NEEDS_TOOLS
def test_an_operator_with_a_verdict_is_searched_again_only_when_marked(tmp_path):
    """Committed final.json: skipped, unless redo.jsonl names the operator; without KF_OPS those to search
    again come after those without a verdict and before the set aside."""
    r = _search(tmp_path / "order", "fake_a fake_b fake_c fake_d", oom="", set_aside=("fake_a",),
                committed=("fake_b", "fake_c"), redo=("fake_c",), KF_OPS="")
    assert [c.split()[1] for c in r["calls"] if c.startswith("run") and " kforge " in c] == \
        ["fake_d", "fake_c", "fake_a"]
    named = _search(tmp_path / "named", "fake_b fake_c", oom="", committed=("fake_b", "fake_c"), redo=("fake_c",))
    assert [c.split()[1] for c in named["calls"] if c.startswith("run") and " kforge " in c] == ["fake_c"]


def _runs_by_operator(calls: list[str]) -> dict:
    """{op: [(arm, workers, gpu), ...]} of the stand-in kforge's runs, in order; each pinned run's inputs
    lock is checked to be its GPU's own."""
    runs: dict = {}
    for words in (c.split() for c in calls if c.startswith("run ")):
        gpu = words[4] if len(words) > 4 else None
        if gpu:
            assert words[5] == f"lock=inputs-gpu-{gpu[4:]}.lock", words
        runs.setdefault(words[1], []).append((words[2], int(words[3]), gpu))
    return runs


@NEEDS_TOOLS
def test_each_gpu_is_a_lane_that_takes_the_next_operator(tmp_path):
    ops = "fake_a fake_b fake_c fake_d fake_e"
    r = _search(tmp_path, ops, oom="", FAKE_GPUS="2", FAKE_SEARCH_S="0.3")
    runs = _runs_by_operator(r["calls"])
    assert sorted(runs) == sorted(ops.split())
    # An operator's two searches and its final measurement run on one GPU; both GPUs work.
    gpu_of = {}
    for op, arms in runs.items():
        assert [a for a, _, _ in arms] == ["kforge", "random"] and len({g for _, _, g in arms}) == 1
        gpu_of[op] = arms[0][2]
    assert set(gpu_of.values()) == {"gpu=0", "gpu=1"}
    measures = [c.split() for c in r["calls"] if c.startswith("measure")]
    assert sorted(m[1] for m in measures) == sorted(ops.split())
    assert all(m[3] == gpu_of[m[1]] for m in measures)
    # The operators are taken in order: the first two start at once, one on each GPU.
    firsts = [c.split()[1] for c in r["calls"] if c.startswith("run") and " kforge " in c]
    assert set(firsts[:2]) == {"fake_a", "fake_b"}
    assert "lanes: 2, one per GPU (0 1)" in r["summary"]
    assert "[gpu 0] " in r["progress"] and "[gpu 1] " in r["progress"]
    assert r["archived"] == set(ops.split())
    with tarfile.open(r["out"] / "runs.tgz") as tar:
        finals = [json.load(tar.extractfile(m)) for m in tar.getmembers() if m.name.endswith("final.json")]
        folders = {Path(n).parts[1] for n in tar.getnames() if len(Path(n).parts) > 1}
    assert {f["gpus_at_once"] for f in finals} == {2}
    assert folders == set(ops.split())  # finished operators only, each with its final.json


@NEEDS_TOOLS
def test_lanes_follow_cuda_visible_devices_and_kf_gpus(tmp_path):
    r = _search(tmp_path, "fake_a fake_b fake_c", oom="", FAKE_GPUS="8", CUDA_VISIBLE_DEVICES="3,5",
                FAKE_SEARCH_S="0.3")
    assert {g for arms in _runs_by_operator(r["calls"]).values() for _, _, g in arms} == {"gpu=3", "gpu=5"}
    # One lane on a machine with several GPUs is pinned to the first (the evaluator would spread a
    # search's workers over all of them); one GPU alone is left as it is. Neither says lanes.
    one = _search(tmp_path / "one", "fake_a fake_b", oom="", FAKE_GPUS="8", KF_GPUS="1")
    assert {g for arms in _runs_by_operator(one["calls"]).values() for _, _, g in arms} == {"gpu=0"}
    alone = _search(tmp_path / "alone", "fake_a", oom="", FAKE_GPUS="1")
    assert {g for arms in _runs_by_operator(alone["calls"]).values() for _, _, g in arms} == {None}
    assert "lanes" not in one["summary"] + alone["summary"]
    finals = list((tmp_path / "one").rglob("final.json")) + list((tmp_path / "alone").rglob("final.json"))
    assert len(finals) == 3 and not any("gpus_at_once" in p.read_text() for p in finals)
    too_many = _search(tmp_path / "many", "fake_a", oom="", FAKE_GPUS="2", KF_GPUS="3", expect_rc=2)
    assert "KF_GPUS=3: this machine has 2 GPU(s) (0 1)" in too_many["summary"]
    words = _search(tmp_path / "words", "fake_a", oom="", FAKE_GPUS="2", KF_GPUS="all", expect_rc=2)
    assert "KF_GPUS=all: not a positive whole number" in words["summary"]


@NEEDS_TOOLS
def test_an_operator_named_twice_runs_once(tmp_path):
    r = _search(tmp_path, "fake_a fake_a fake_b", oom="", FAKE_GPUS="2", FAKE_SEARCH_S="0.3")
    assert [a for a, _, _ in _runs_by_operator(r["calls"])["fake_a"]] == ["kforge", "random"]
    with tarfile.open(r["out"] / "runs.tgz") as tar:
        assert sorted(n for n in tar.getnames() if n.endswith("final.json")) == [
            "runs/fake_a/final.json", "runs/fake_b/final.json"]


@NEEDS_TOOLS
def test_lanes_retry_out_of_memory_and_stop_at_the_deadline(tmp_path):
    r = _search(tmp_path, "fake_ok fake_big fake_c", oom="fake_big:4", FAKE_GPUS="2", FAKE_SEARCH_S="0.2")
    assert [w for a, w, _ in _runs_by_operator(r["calls"])["fake_big"] if a == "kforge"] == [4, 2]
    assert r["archived"] == {"fake_ok", "fake_big", "fake_c"}
    late = _search(tmp_path / "late", "fake_a fake_b", oom="", FAKE_GPUS="2", KF_DEADLINE_S="-1")
    assert not [c for c in late["calls"] if c.startswith("run")]
    assert "deadline: 2 operator(s) left for a later call: fake_a fake_b" in late["summary"]


@NEEDS_TOOLS
def test_archived_logs_name_no_path_of_the_machine(tmp_path):
    r = _search(tmp_path, "fake_a", oom="", TMPDIR=str(tmp_path))
    with tarfile.open(r["out"] / "runs.tgz") as tar:
        log = tar.extractfile("runs/fake_a/search.log").read().decode()
        final = json.load(tar.extractfile("runs/fake_a/final.json"))
    assert "$TMPDIR/kforge-measure/programs/0a1b/fake_a.py:55: UserWarning" in log
    assert str(tmp_path) not in log
    assert final["error"] == "File <repo>/python/kforge/measure.py"  # a crash's traceback in final.json
