"""kforge.tritonbench_g.accept: a chunk's runs.tgz into the campaign folder, one row per operator, taking
only operators with a final measurement, no machine paths, not named by --skip, not already committed."""
import io
import json
import tarfile

from kforge.tritonbench_g import accept


def trial(status, error=""):
    return json.dumps({"status": status, "error": error, "time_ms": 1.0 if status == "ok" else None}) + "\n"


def make_chunk(tmp_path):
    runs = tmp_path / "chunk" / "runs"
    final = {"op": "x", "gpu": "NVIDIA H200", "candidates": {"kforge": {"correct": True}, "random": {"correct": False}}}
    ops = {
        "good": {"kforge.jsonl": trial("ok") * 3 + trial("timeout", "CompileTimeout: ... took longer than 10 s"),
                 "random.jsonl": trial("ok") + trial("compile_failed"), "final.json": json.dumps(final),
                 "search.log": "kforge run: ... <repo>/x\n"},
        "nofinal": {"kforge.jsonl": trial("ok"), "search.log": "killed\n"},
        "leaky": {"kforge.jsonl": trial("launch_failed", "File /tmp/kforge-tbg-work/x.py"), "final.json": json.dumps(final)},
        "asked": {"kforge.jsonl": trial("ok"), "final.json": json.dumps(final)},
        "old": {"kforge.jsonl": trial("ok"), "final.json": json.dumps(final)},
    }
    for op, files in ops.items():
        (runs / op).mkdir(parents=True)
        for name, text in files.items():
            (runs / op / name).write_text(text)
    archive = tmp_path / "runs.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(runs, arcname="runs")
    campaign = tmp_path / "campaign"
    (campaign / "runs" / "old").mkdir(parents=True)
    (campaign / "runs" / "old" / "final.json").write_text("{}")
    return archive, campaign


def test_rows_and_what_is_taken(tmp_path):
    archive, campaign = make_chunk(tmp_path)
    out = io.StringIO()
    rows = {r["op"]: r for r in accept.accept(str(archive), str(campaign), {"asked", "ghost"}, out=out)}
    assert {op: r["verdict"] for op, r in rows.items()} == {
        "good": "take", "nofinal": "skip (no final.json)", "leaky": "skip (machine path)",
        "asked": "skip (asked)", "old": "skip (committed)"}
    assert rows["good"]["kforge"] == (3, 4, 1) and rows["good"]["random"] == (1, 2, 0)
    assert rows["nofinal"]["random"] is None
    text = out.getvalue()
    assert "| good | NVIDIA H200 | 3/4 (1 compile timeouts) | 1/2 | yes | kforge yes, random no | take |" in text
    assert "skip (machine path): kforge.jsonl: /tmp/" in text
    assert "--skip names operators not in the archive: ghost" in text
    assert sorted(p.name for p in (campaign / "runs").iterdir()) == ["good", "old"]
    assert (campaign / "runs" / "good" / "kforge.jsonl").read_text().count("\n") == 4
    assert (campaign / "runs" / "old" / "final.json").read_text() == "{}"  # not replaced


def test_replace_and_dry_run(tmp_path):
    archive, campaign = make_chunk(tmp_path)
    rows = accept.accept(str(archive), str(campaign), set(), replace=True, dry_run=True, out=io.StringIO())
    assert {r["op"] for r in rows if r["verdict"] == "take"} == {"good", "asked", "old"}
    assert (campaign / "runs" / "old" / "final.json").read_text() == "{}"  # a dry run copies nothing
    assert not (campaign / "runs" / "good").exists()
    accept.accept(str(archive), str(campaign), set(), replace=True, out=io.StringIO())
    assert json.loads((campaign / "runs" / "old" / "final.json").read_text())["gpu"] == "NVIDIA H200"


def test_main_refuses_a_missing_campaign_folder(tmp_path, capsys):
    archive, _ = make_chunk(tmp_path)
    assert accept.main([str(archive), "--into", str(tmp_path / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_trials_line_counts_both_arms_and_the_compile_timeouts(tmp_path):
    archive, _ = make_chunk(tmp_path)
    runs = tmp_path / "chunk" / "runs"
    assert accept.trials_line(str(runs / "good")) == \
        "4 kforge trials (3 ok), 1 compile timeouts; 2 random trials (1 ok)"
    # An arm that never wrote its file (the original failed first) is said so, not counted as empty.
    assert accept.trials_line(str(runs / "nofinal")) == "1 kforge trials (1 ok), 0 compile timeouts; no random run"


def test_trials_line_says_what_gpu_memory_a_worker_held(tmp_path):
    folder = tmp_path / "op"
    folder.mkdir()
    first = {"status": "ok", "time_ms": 1.0, "metrics": {"setup.gpu_reserved_gib": 2.25,
                                                         "setup.gpu_reserved_peak_gib": 9.5}}
    second = {"status": "ok", "time_ms": 1.0, "metrics": {"setup.gpu_reserved_gib": 3.0,
                                                          "setup.gpu_reserved_peak_gib": 7.0}}
    (folder / "kforge.jsonl").write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n" + trial("ok"))
    assert accept.trials_line(str(folder)) == ("3 kforge trials (3 ok), 0 compile timeouts; no random run; "
                                               "a kforge worker held 3.0 GiB after its setup (9.5 at most)")


def test_trials_line_says_how_long_the_slowest_setup_took(tmp_path):
    folder = tmp_path / "op"
    folder.mkdir()
    parts = {"setup.worker_start_s": 4.0, "setup.inputs_s": 0.5, "setup.reference_s": 3.0}
    old = {"status": "ok", "time_ms": 1.0, "metrics": dict(parts, **{"setup.profiler_s": 5.0})}  # serial start
    new = {"status": "ok", "time_ms": 1.0, "metrics": dict(parts, **{"setup.profiler_s": 6.0,
                                                                    "setup.profiler_wait_s": 1.0})}
    (folder / "kforge.jsonl").write_text(json.dumps(new) + "\n" + trial("ok"))
    assert accept.trials_line(str(folder)).endswith("; the slowest kforge setup took 8.5 s (profiler start 6.0 s)")
    (folder / "kforge.jsonl").write_text(json.dumps(new) + "\n" + json.dumps(old) + "\n")
    assert accept.trials_line(str(folder)).endswith("; the slowest kforge setup took 12.5 s (profiler start 5.0 s)")


def test_set_aside_records_are_merged_and_leave_once_a_verdict_is_committed(tmp_path):
    archive, campaign = make_chunk(tmp_path)
    record = {"reason": "out_of_memory", "gpu": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "workers": 4,
              "date": "2026-12-07", "detail": "CUDA out of memory"}
    (campaign / "set-aside.jsonl").write_text(json.dumps(dict(record, op="good", date="2026-12-06")) + "\n" +
                                              json.dumps(dict(record, op="ghost", workers=2)) + "\n")
    (archive.parent / "set-aside.jsonl").write_text(json.dumps(dict(record, op="ghost")) + "\n" +
                                                    json.dumps(dict(record, op="old")) + "\n")
    out = io.StringIO()
    accept.accept(str(archive), str(campaign), set(), out=out)
    kept = [json.loads(line) for line in (campaign / "set-aside.jsonl").read_text().splitlines()]
    # good: taken now (final.json); old: already committed; ghost: both worker counts kept
    assert [(r["op"], r["workers"]) for r in kept] == [("ghost", 2), ("ghost", 4)]
    assert "set aside (no verdict): ghost: out of GPU memory on NVIDIA H100 80GB HBM3 (81559 MiB) with 4 workers" \
        in out.getvalue()
    assert "set aside (no verdict): old" not in out.getvalue()



def test_an_operator_marked_to_search_again_replaces_its_run_and_keeps_the_old_one(tmp_path):
    archive, campaign = make_chunk(tmp_path)
    record = {"op": "old", "reason": "its search started elsewhere than its original", "date": "2026-12-08"}
    other = {"op": "elsewhere", "reason": "not in this chunk", "date": "2026-12-08"}
    (campaign / "redo.jsonl").write_text(json.dumps(record) + "\n" + json.dumps(other) + "\n")
    dry = accept.accept(str(archive), str(campaign), set(), dry_run=True, out=io.StringIO())
    assert {r["op"]: r["verdict"] for r in dry}["old"] == "take (again)"
    assert (campaign / "runs" / "old" / "final.json").read_text() == "{}"  # a dry run moves nothing
    out = io.StringIO()
    rows = {r["op"]: r["verdict"] for r in accept.accept(str(archive), str(campaign), set(), out=out)}
    assert rows["old"] == "take (again)" and rows["good"] == "take"
    assert json.loads((campaign / "runs" / "old" / "final.json").read_text())["gpu"] == "NVIDIA H200"
    kept = campaign / "superseded" / "old" / "1"
    assert (kept / "final.json").read_text() == "{}" and json.loads((kept / "redo.json").read_text()) == record
    assert "old: the committed run moved to" in out.getvalue()
    assert [json.loads(l)["op"] for l in (campaign / "redo.jsonl").read_text().splitlines()] == ["elsewhere"]
    # searched again a second time: the next folder
    (campaign / "redo.jsonl").write_text(json.dumps(record) + "\n")
    accept.accept(str(archive), str(campaign), set(), out=io.StringIO())
    assert sorted(p.name for p in (campaign / "superseded" / "old").iterdir()) == ["1", "2"]
    assert (campaign / "redo.jsonl").read_text() == ""


def test_a_first_verdict_for_an_operator_marked_clears_its_mark_and_moved_runs_follow_the_table(tmp_path):
    archive, campaign = make_chunk(tmp_path)
    (campaign / "redo.jsonl").write_text(json.dumps({"op": "good", "reason": "r", "date": "d"}) + "\n"
                                         + json.dumps({"op": "old", "reason": "r", "date": "d"}) + "\n")
    out = io.StringIO()
    rows = {r["op"]: r["verdict"] for r in accept.accept(str(archive), str(campaign), set(), out=out)}
    assert rows["good"] == "take" and rows["old"] == "take (again)"
    assert (campaign / "redo.jsonl").read_text() == ""  # both done: a first verdict clears the mark too
    assert not (campaign / "superseded" / "good").exists()  # nothing was committed to move
    lines = out.getvalue().splitlines()
    table_end = max(i for i, line in enumerate(lines) if line.startswith("|"))
    moved = [i for i, line in enumerate(lines) if "the committed run moved to" in line]
    assert moved and all(i > table_end for i in moved)
