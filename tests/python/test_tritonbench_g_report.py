"""kforge.tritonbench_g.report on a small synthetic campaign (numbers worked out by hand) and, where the
data folder exists, the loader on the real TritonBench_G_v1.json. No GPU."""
import csv
import json
import math
import os
from pathlib import Path

import pytest

from kforge.tritonbench_g import report

REAL_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "tritonbench-g"
PEAK = {"gbps": 4000.0, "tflops": 1000.0}

# op -> output_triton_len (a string, as in the published file). The edges of the quartiles are on purpose.
LENGTHS = {"op_win": "500", "op_wrong": "801", "op_noknob": "802", "op_bound": "1711", "op_notrun": "2000",
           "op_nofinal": "2493", "op_other": "2494", "op_flat": "3000", "op_untried": "5000"}


def trial(seq, config, time_ms, clock_s, status="ok"):
    return {"sequence": seq, "status": status, "time_ms": time_ms, "configuration": config,
            "clock_s": clock_s, "metrics": {}, "error": ""}


def candidate(ms, gpu_s, correct=True, config=None, trials=3):
    return {"configuration": config or {"BLOCK": 64}, "ms": ms, "correct": correct,
            "errors": [] if correct else ["mismatch at size 1"], "search_gpu_s": gpu_s, "trials": trials}


def final(op, original_ms, candidates, gbps=None):
    n = len(original_ms)
    return {"op": op, "sizes": [str(1024 << i) for i in range(n)],
            "protocol": {"warmup_ms": 25, "rep_ms": 100, "interleaved": True, "rounds": 3},
            "original": {"ms": original_ms, "gbps": gbps or [100.0] * n, "tflops": [None] * n},
            "candidates": candidates, "peak": PEAK}


def three_configs(times, clocks):
    return [trial(i, {"BLOCK": 32 << i}, t, c) for i, (t, c) in enumerate(zip(times, clocks))]


RUNNABLE = [
    {"op": "op_win", "runnable": True, "category": "ok", "reason": "", "sizes": 2, "seconds": 1.0},
    {"op": "op_wrong", "runnable": True, "category": "ok", "reason": "", "sizes": 2, "seconds": 1.0},
    {"op": "op_noknob", "runnable": True, "category": "ok", "reason": "", "sizes": 1, "seconds": 1.0},
    {"op": "op_bound", "runnable": True, "category": "ok", "reason": "", "sizes": 1, "seconds": 1.0},
    {"op": "op_notrun", "runnable": False, "category": "compile_error", "reason": "x", "sizes": 0, "seconds": 1.0},
    {"op": "op_nofinal", "runnable": True, "category": "ok", "reason": "", "sizes": 4, "seconds": 1.0},
    {"op": "op_other", "runnable": True, "category": "ok", "reason": "", "sizes": 1, "seconds": 1.0},
    {"op": "op_flat", "runnable": True, "category": "ok", "reason": "", "sizes": 2, "seconds": 1.0},
]

RUNS = {
    # success: 4 / 2 = 2.0x (per size 4.0 and 1.714...); random 4 / 3.2 = 1.25x
    "op_win": {
        "kforge": three_configs([0.5, 0.6, 0.7], [1, 2, 3]),
        "random": three_configs([0.6, 0.6, 0.7], [1, 2, 3]),
        "final": final("op_win", [1.0, 3.0], {
            "kforge": candidate([0.25, 1.75], 30.0, config={"num_warps": 4, "BLOCK": 128}),
            "random": candidate([0.8, 2.4], 31.0)})},
    # kforge's candidate incorrect at the full sizes
    "op_wrong": {
        "kforge": three_configs([1.0, 2.0, 3.0], [1, 2, 3]),
        "final": final("op_wrong", [1.0, 1.0], {
            "kforge": candidate([0.5, 0.5], 10.0, correct=False),
            "random": candidate([1.0, 1.0], 12.0)})},
    # one configuration tried twice
    "op_noknob": {
        "kforge": [trial(0, {"BLOCK": 4}, 2.0, 1), trial(1, {"BLOCK": 4}, 2.1, 2)],
        "final": final("op_noknob", [2.0], {"kforge": candidate([2.0], 5.0, trials=2)})},
    # the original at 87.5% of the copy bandwidth; kforge's candidate is slower (0.8x, counted 1.0x)
    "op_bound": {
        "kforge": three_configs([1.0, 1.5, 2.0], [1, 2, 3]),
        "final": final("op_bound", [0.8], {"kforge": candidate([1.0], 20.0)}, gbps=[3500.0])},
    # searched, final.json missing; the fastest trial at 9 s of 10 s
    "op_nofinal": {
        "kforge": three_configs([2.0, 1.5, 1.0], [1, 5, 9]) + [trial(3, {"BLOCK": 1}, None, 10, "compile_failed")]},
    # 1.0x, knobs with effect, found early
    "op_other": {
        "kforge": three_configs([1.0, 2.0, 3.0], [1, 5, 10]),
        "final": final("op_other", [1.0], {"kforge": candidate([1.0], 25.0)})},
    # 3.09 / 3.0 = 1.03x; trials within 2%; its original carries @triton.autotune (AUTOTUNED)
    "op_flat": {
        "kforge": three_configs([1.00, 1.01, 1.02], [1, 2, 3]),
        "final": {**final("op_flat", [1.03, 2.06], {"kforge": candidate([1.0, 2.0], 40.0)}),
                  "autotune": {"first_calls_s": 4.5, "first_calls_before_checks": True,
                               "kernels": {"k": {"configs": 8, "chosen": ["BLOCK: 64"]}}}}},
}


# The kernels/ sources of the data: op_flat's and op_untried's originals have the autotuner choose between
# two configurations (op_untried is not judged); op_win has a source without the decorator; the others
# have none (not autotuned).
AUTOTUNED = """import triton
import triton.language as tl

@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=4), triton.Config({"BLOCK": 128}, num_warps=4)],
                 key=["n"])
@triton.jit
def k(x, n, BLOCK: tl.constexpr):
    pass


def op_flat(x):
    k[(1,)](x, x.numel())
"""
KERNELS = {"op_flat": AUTOTUNED,
           "op_untried": AUTOTUNED,
           "op_win": "# a comment naming @triton.autotune is not the decorator\n@triton.jit\ndef k(x):\n    pass\n"}


def write_jsonl(path, records):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def make_campaign(root):
    data = root / "data"
    data.mkdir()
    (data / "TritonBench_G_v1.json").write_text(json.dumps(
        [{"file": f"{op}.py", "repo": "x/y", "output_triton_len": n, "star": "1", "difficulty": "2"}
         for op, n in LENGTHS.items()]))
    (data / "kernels").mkdir()
    for op, text in KERNELS.items():
        (data / "kernels" / f"{op}.py").write_text(text)
    campaign = root / "campaign"
    write_jsonl(campaign / "runnable.jsonl", RUNNABLE)
    for op, run in RUNS.items():
        for method in ("kforge", "random"):
            if method in run:
                write_jsonl(campaign / "runs" / op / f"{method}.jsonl", run[method])
        if "final" in run:
            (campaign / "runs" / op / "final.json").write_text(json.dumps(run["final"]))
    return campaign, data


@pytest.fixture
def campaign(tmp_path):
    return make_campaign(tmp_path)


def loaded(campaign_and_data):
    campaign, data = campaign_and_data
    operators, unknown = report.load_campaign(campaign, report.load_dataset(data), data / "kernels")
    assert unknown == []
    return operators


def test_an_autotune_list_counts_when_the_autotuner_has_a_choice(tmp_path):
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    one = AUTOTUNED.replace(', triton.Config({"BLOCK": 128}, num_warps=4)', "")
    copies = AUTOTUNED.replace('"BLOCK": 128', '"BLOCK": 64')
    unreadable = AUTOTUNED.replace("configs=[", "configs=make_configs() + [")
    for name, text in {"two": AUTOTUNED, "one": one, "copies": copies, "unreadable": unreadable,
                       "comment": "# TODO use @triton.autotune here\n" + one.replace("@triton.autotune", "#")}.items():
        (kernels / f"{name}.py").write_text(text)
    assert {name: report.has_autotune(report.kernel_text(kernels, name))
            for name in ("two", "one", "copies", "unreadable", "comment", "missing")} == {
        "two": True, "one": False, "copies": False, "unreadable": True, "comment": False, "missing": False}


def test_buckets_follow_tritonforge_quartiles(campaign):
    operators = loaded(campaign)
    assert {o.op: o.bucket for o in operators} == {
        "op_win": "Q1", "op_wrong": "Q1", "op_noknob": "Q2", "op_bound": "Q2", "op_notrun": "Q3",
        "op_nofinal": "Q3", "op_other": "Q4", "op_flat": "Q4", "op_untried": "Q4"}
    assert [o.op for o in operators] == sorted(LENGTHS)
    untried = next(o for o in operators if o.op == "op_untried")
    assert (untried.tried, untried.runnable, untried.category, untried.searched) == (False, False, "not_tried", False)


def test_speedup_is_sum_over_sizes_and_needs_every_size():
    assert report.tritonbench_speedup([1.0, 3.0], [0.25, 1.75]) == pytest.approx(2.0)
    assert report.tritonbench_speedup([1.0, 3.0], [0.25, None]) is None
    assert report.tritonbench_speedup([1.0, None], [0.25, 1.0]) is None
    assert report.tritonbench_speedup([], []) is None


def test_kforge_headline(campaign):
    h = report.headline(loaded(campaign), "kforge")
    assert (h.operators, h.tried, h.runnable, h.population, h.successes) == (9, 8, 7, 7, 1)
    assert h.mean_success == pytest.approx(2.0)
    # counted: 2.0 (win), 1.03 (flat), 1.0 for the five others (failures, 0.8x floored, 1.0x)
    assert h.geomean == pytest.approx(math.exp((math.log(2.0) + math.log(1.03)) / 7))
    assert h.geomean == pytest.approx(1.10876, abs=1e-5)
    assert h.best == pytest.approx(2.0)
    # search_gpu_s 30, 10, 5, 20, 25, 40 and op_nofinal's last clock_s, 10
    assert h.median_gpu_s == pytest.approx(20.0)
    assert h.total_gpu_s == pytest.approx(140.0)
    assert report.headline_cells(h) == ["kforge", "7 / 8 / 9", "7", "1 (14.3%)", "1 (11.1%)", "2.00x", "1.11x",
                                        "2.00x", "20.0", "140.0"]


def test_random_headline_and_kforge_against_the_autotuner(campaign):
    operators = loaded(campaign)
    r = report.headline(operators, "random")
    assert (r.population, r.successes) == (7, 1)
    assert r.mean_success == pytest.approx(1.25)
    assert r.geomean == pytest.approx(1.25 ** (1 / 7))
    assert r.total_gpu_s == pytest.approx(43.0)
    assert {o.op for o in operators if o.autotuned} == {"op_flat", "op_untried"}  # not op_win's comment
    # kforge over the autotuned operators: op_flat judged (1.03x, no success); op_untried never ran
    a = report.autotune_row(operators)
    assert (a.method, a.operators, a.tried, a.runnable, a.population, a.successes) == \
        (report.AUTOTUNE_ROW, 2, 1, 1, 1, 0)
    assert a.geomean == pytest.approx(1.03) and a.total_gpu_s == pytest.approx(40.0)
    assert report.autotune_lines(operators)[0].endswith("median 4.5 s over 1 of them.")
    flat = next(o for o in operators if o.op == "op_flat")
    flat.autotuned = False
    assert report.autotune_row(operators) is None and report.autotune_lines(operators) == []


def test_bucket_headline(campaign):
    operators = loaded(campaign)
    q1 = report.headline([o for o in operators if o.bucket == "Q1"], "kforge")
    assert (q1.operators, q1.runnable, q1.population, q1.successes) == (2, 2, 2, 1)
    assert q1.geomean == pytest.approx(math.sqrt(2.0))
    q3 = report.headline([o for o in operators if o.bucket == "Q3"], "kforge")
    assert (q3.operators, q3.tried, q3.runnable, q3.population, q3.successes, q3.mean_success) == (2, 2, 1, 1, 0, None)


def test_why_not_improved_classes(campaign):
    operators = loaded(campaign)
    classes = {o.op: report.why_not_improved(o, report.outcome(o, "kforge")) for o in operators}
    assert classes == {"op_win": None, "op_wrong": "wrong", "op_noknob": "no_knob", "op_bound": "at_bound",
                       "op_notrun": None, "op_nofinal": "search_too_short", "op_other": "other",
                       "op_flat": "knobs_without_effect", "op_untried": None}
    wrong = next(o for o in operators if o.op == "op_wrong")
    message = "the original program is not reproducible: two calls on the same inputs differ (...)"
    wrong.trials["kforge"] = [{**trial(i, {"BLOCK": 32 << i}, None, i, "launch_failed"), "error": message}
                              for i in range(3)]
    assert report.why_not_improved(wrong, report.outcome(wrong, "kforge")) == "original_failed"
    # op_other's three ok trials and two compiles past the limit (2 of 5 >= a third): compile-limited;
    # a timeout of the runner (no compile limit in its error) does not count.
    other = next(o for o in operators if o.op == "op_other")
    slow = {**trial(3, {"BLOCK": 1024}, None, 10, "timeout"),
            "error": "during check: ... CompileTimeout: Triton's compile of k took longer than 10 s (killed)"}
    other.trials["kforge"] = other.trials["kforge"] + [slow, {**slow, "sequence": 4}]
    assert report.why_not_improved(other, report.outcome(other, "kforge")) == "compile_limited"
    other.trials["kforge"][-1]["error"] = other.trials["kforge"][-2]["error"] = "the worker was silent for 120 s"
    assert report.why_not_improved(other, report.outcome(other, "kforge")) == "other"
    # Its fastest trial is sequence 0: when the search started from the original's configuration, that
    # is the original's own (nothing faster found); where the fastest came later, it is not.
    fastest = min((t for t in other.trials["kforge"] if t["status"] == "ok"), key=lambda t: t["time_ms"])
    assert fastest["sequence"] == 0
    other.final.start_configurations = 1
    assert report.why_not_improved(other, report.outcome(other, "kforge")) == "other"  # not the original's
    other.final.start_is_original = True
    assert report.why_not_improved(other, report.outcome(other, "kforge")) == "original_best"
    other.autotuned = True  # its original is Triton's autotuner, whatever the start
    assert report.why_not_improved(other, report.outcome(other, "kforge")) == "other"
    other.autotuned = False
    fastest["sequence"] = 7
    assert report.why_not_improved(other, report.outcome(other, "kforge")) == "other"
    # op_nofinal's fastest trial came at 9 s of 10: late, unless its search measured its whole space
    # (dequantize_rowwise's 25 configurations in 6.3 s, 2026-12-07): then more search cannot help.
    nofinal = next(o for o in operators if o.op == "op_nofinal")
    nofinal.stops = {"kforge": "no unmeasured configuration left"}
    assert report.why_not_improved(nofinal, report.outcome(nofinal, "kforge")) == "space_exhausted"
    nofinal.stops = {"kforge": "wall-time budget reached", "random": "strategy finished"}
    assert report.why_not_improved(nofinal, report.outcome(nofinal, "kforge")) == "search_too_short"
    # A search that finished no trial (bgmv_expand_slice, 2026-12-07: its set-up took the 30 s) is not
    # one without a knob.
    noknob = next(o for o in operators if o.op == "op_noknob")
    noknob.trials["kforge"] = []
    assert report.why_not_improved(noknob, report.outcome(noknob, "kforge")) == "no_trial"
    # The final measurement has no time of the original on some size (it failed there, or it faulted the
    # GPU: measure.abandoned): nothing to compare a candidate with.
    flat = next(o for o in operators if o.op == "op_flat")
    flat.final.original_ms[-1] = None
    assert report.why_not_improved(flat, report.outcome(flat, "kforge")) == "original_failed"
    flat.final.gpu_fault_by = "original"
    assert report.why_not_improved(flat, report.outcome(flat, "kforge")) == "original_failed"
    # A candidate's fault leaves every program without the later sizes: the culprit decides.
    flat.final.gpu_fault_by = "random"
    assert report.why_not_improved(flat, report.outcome(flat, "kforge")) == "gpu_fault"
    flat.final.gpu_fault_by = "kforge"
    assert report.why_not_improved(flat, report.outcome(flat, "kforge")) == "wrong"


def test_original_failed_when_its_own_configuration_is_wrong(campaign):
    """An autotuned original one of whose own list entries (the searches' first start_configurations
    trials) was wrong against the reference has no well-defined output (layer_norm_welfold, 2026-12-07):
    kforge's wrong candidate is then original_failed. A wrong trial past the start, or any wrong trial
    where the starts are not exactly what the original runs, is the candidate's own fault."""
    op = next(o for o in loaded(campaign) if o.op == "op_wrong")
    assert report.why_not_improved(op, report.outcome(op, "kforge")) == "wrong"
    wrong = {**trial(1, {"BLOCK": 64}, None, 1, "wrong_result"), "error": "shape 0: returned[0]: 9 of 16 differ"}
    op.trials["random"] = (op.trials.get("random") or []) + [wrong]
    op.final.start_configurations, op.final.start_is_original, op.autotuned = 2, False, False
    op.starts_are_own = True
    assert report.why_not_improved(op, report.outcome(op, "kforge")) == "wrong"  # not the original's own
    op.autotuned = True
    assert report.own_configuration_wrong(op)
    assert report.why_not_improved(op, report.outcome(op, "kforge")) == "original_failed"
    op.starts_are_own = False  # an entry pinned without its decorator's hooks, or a computed launch option
    assert report.why_not_improved(op, report.outcome(op, "kforge")) == "wrong"
    op.starts_are_own = True
    op.final.start_configurations = 1  # the wrong trial (sequence 1) is past the original's list
    assert report.why_not_improved(op, report.outcome(op, "kforge")) == "wrong"
    op.autotuned, op.final.start_is_original = False, True  # the original's own configuration is sequence 0
    wrong["sequence"] = 0
    assert report.why_not_improved(op, report.outcome(op, "kforge")) == "original_failed"


def run_main(campaign_and_data, out):
    campaign, data = campaign_and_data
    return report.main([str(campaign), "--data", str(data), "--out", str(out)])


def test_writes_report_csv_and_plots(campaign, tmp_path):
    out = tmp_path / "results" / "tritonbench-g.md"
    assert run_main(campaign, out) == 0
    text = out.read_text()
    assert text.startswith("# TritonBench-G")
    assert f"--data {os.path.normpath(campaign[1])} --out {os.path.normpath(out)}" in text
    assert "Partial campaign" not in text
    assert "> The runnable filter has tried 8 of 9 operators; the other 1 count as not tried" in text
    assert "| kforge | 7 / 8 / 9 | 7 | 1 (14.3%) | 1 (11.1%) | 2.00x | 1.11x | 2.00x | 20.0 | 140.0 |" in text
    assert ("| TritonForge (H100, published) | 131 / 184 / 184 | 131 | 56 (42.7%) | 56 (30.4%) (derived) | 1.76x |"
            in text)
    assert ("| kforge vs Triton's autotuner (@triton.autotune originals) | 1 / 1 / 2 | 1 | 0 (0.0%) | 0 (0.0%) | - "
            "| 1.03x | 1.03x | 40.0 | 40.0 |") in text
    assert "Triton's autotuner: 1 of the judged operators carries `@triton.autotune`" in text
    assert "| Q1 (<= 801) | kforge | 2 / 2 / 2 | 2 | 1 (50.0%) | 1 (50.0%) | 2.00x | 1.41x |" in text
    assert "| knobs_without_effect | 1 |" in text
    assert "- **search_too_short**: op_nofinal" in text
    assert "op_untried" not in text.split("## Files")[0].split("## Why not improved")[1]

    rows = list(csv.DictReader(out.with_name("tritonbench-g.csv").open()))
    assert tuple(rows[0].keys()) == report.CSV_COLUMNS
    assert [r["op"] for r in rows] == sorted(LENGTHS)
    win = next(r for r in rows if r["op"] == "op_win")
    assert (win["bucket"], win["n_sizes"], win["kforge_speedup"], win["kforge_size_min"], win["kforge_size_median"],
            win["kforge_size_max"], win["kforge_correct"], win["kforge_trials"], win["kforge_search_gpu_s"],
            win["kforge_configuration"], win["random_speedup"], win["autotuned"], win["why_not_improved"]) == \
        ("Q1", "2", "2.0000", "1.7143", "2.8571", "4.0000", "true", "3", "30.0", '{"BLOCK":128,"num_warps":4}',
         "1.2500", "false", "")
    notrun = next(r for r in rows if r["op"] == "op_notrun")
    assert (notrun["runnable"], notrun["category"], notrun["searched"], notrun["kforge_speedup"]) == \
        ("false", "compile_error", "false", "")
    nofinal = next(r for r in rows if r["op"] == "op_nofinal")
    assert (nofinal["has_final"], nofinal["n_sizes"], nofinal["kforge_trials"], nofinal["kforge_search_gpu_s"],
            nofinal["why_not_improved"]) == ("false", "4", "4", "10.0", "search_too_short")
    flat = next(r for r in rows if r["op"] == "op_flat")
    assert (flat["autotuned"], flat["autotune_first_calls_s"]) == ("true", "4.5")

    for name in ("tritonbench-g-speedups.png", "tritonbench-g-speedup-vs-gpu-s.png"):
        assert out.with_name(name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_regenerating_gives_the_same_bytes(campaign, tmp_path):
    first, second = tmp_path / "a" / "r.md", tmp_path / "b" / "r.md"
    assert run_main(campaign, first) == 0 and run_main(campaign, second) == 0
    for suffix in (".md", ".csv", "-speedups.png", "-speedup-vs-gpu-s.png"):
        a = first.with_name("r" + suffix).read_bytes()
        b = second.with_name("r" + suffix).read_bytes()
        if suffix == ".md":   # the command names its --out
            a, b = a.replace(b"/a/", b"/x/"), b.replace(b"/b/", b"/x/")
        assert a == b, suffix


def test_partial_campaign_is_said_at_the_top(campaign, tmp_path):
    for f in (campaign[0] / "runs" / "op_flat").iterdir():
        f.unlink()
    out = tmp_path / "r.md"
    assert run_main(campaign, out) == 0
    text = out.read_text()
    assert "> **Partial campaign: 6 of 7 runnable operators searched so far.**" in text
    assert text.index("Partial campaign") < text.index("## Headline")
    assert "| kforge | 7 / 8 / 9 | 6 | 1 (16.7%) | 1 (11.1%) |" in text
    assert "autotune" not in text.split("## Headline")[1].split("TritonForge")[0]


def test_operators_set_aside_without_a_verdict_are_listed_until_they_have_one(campaign, tmp_path):
    for f in (campaign[0] / "runs" / "op_flat").iterdir():
        f.unlink()
    record = {"reason": "out_of_memory", "gpu": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "workers": 4,
              "date": "2026-12-07", "detail": "torch.OutOfMemoryError: CUDA out of memory."}
    write_jsonl(campaign[0] / "set-aside.jsonl", [dict(record, op="op_flat"), dict(record, op="op_win"),
                                                  dict(record, op="op_flat", workers=2)])
    out = tmp_path / "r.md"
    assert run_main(campaign, out) == 0
    assert ("- Set aside without a verdict (out of GPU memory alone; not in the rates, searched again after the "
            "other operators): 1: op_flat (NVIDIA H100 80GB HBM3, 2 workers; NVIDIA H100 80GB HBM3, 4 workers).") \
        in out.read_text()
    # A final measurement past its limit is said as such, each record with its reason.
    for f in (campaign[0] / "runs" / "op_other").iterdir():
        f.unlink()
    write_jsonl(campaign[0] / "set-aside.jsonl", [dict(record, op="op_flat"),
                                                  dict(record, op="op_other", reason="measure_timeout")])
    assert run_main(campaign, out) == 0
    assert ("- Set aside without a verdict (out of GPU memory alone, or a final measurement past its time limit; "
            "not in the rates, searched again after the other operators): 2: "
            "op_flat (NVIDIA H100 80GB HBM3, 4 workers: out of memory), "
            "op_other (NVIDIA H100 80GB HBM3, 4 workers: final measurement past its limit).") in out.read_text()


# A final.json field the report says only where the campaign's operators differ in it: absent (every
# final.json at its default), said once one operator's final.json sets it, refused when ill-typed.
CAMPAIGN_FIELDS = [
    # GPU sharing: every final.json without ops_at_once ran one at a time
    ("ops_at_once", 3, 0, "GPU sharing",
     ["GPU sharing: 5 operators 1 at a time, 1 operator 3 at a time."], []),
    # arms at once: no final.json says arms_together, so one after the other
    ("arms_together", True, 1, "Arms at once",
     ["Arms at once: 1 operator had the kforge and the random search run at the same time", "5 one after the other."],
     ["GPU sharing"]),
    # several GPUs: no final.json says gpus_at_once, so each ran on a machine's one GPU at work
    ("gpus_at_once", 8, 0, "Several GPUs",
     ["Several GPUs: 1 operator in a call with 8 lanes (a lane per GPU of the machine"],
     ["GPU sharing", "Searches sharing the GPU"]),
    # workers: no final.json names them, so all ran 2
    ("workers_per_device", 6, True, "Workers per search",
     ["Workers per search: 5 operators with 2, 1 operator with 6"], []),
]


@pytest.mark.parametrize("field, value, bad, marker, said, unsaid", CAMPAIGN_FIELDS,
                         ids=[f[0] for f in CAMPAIGN_FIELDS])
def test_how_the_searches_ran_is_said_where_the_campaign_differs(campaign, tmp_path, field, value, bad, marker,
                                                                 said, unsaid):
    out = tmp_path / "r.md"
    assert run_main(campaign, out) == 0
    assert marker not in out.read_text()
    path = campaign[0] / "runs" / "op_win" / "final.json"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, field: value}))
    assert run_main(campaign, out) == 0
    text = out.read_text()
    assert all(x in text for x in said), text
    assert not any(x in text for x in unsaid)
    path.write_text(json.dumps({**data, field: bad}))
    assert run_main(campaign, tmp_path / "r2.md") == 2


def test_originals_checked_with_an_allowance_are_said(campaign, tmp_path):
    out = tmp_path / "r.md"
    assert run_main(campaign, out) == 0
    assert "checked with an allowance" not in out.read_text()
    trials = campaign[0] / "runs" / "op_win" / "kforge.jsonl"
    records = [json.loads(line) for line in trials.read_text().splitlines()]
    records[0]["metrics"] = {"setup.original_unstable_elements": 42}
    write_jsonl(trials, records)
    assert run_main(campaign, out) == 0
    assert "checked with an allowance: op_win (42 elements)." in out.read_text()
    path = campaign[0] / "runs" / "op_flat" / "final.json"  # the final checks' count counts too
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "original": {**data["original"], "unstable_elements": 7}}))
    assert run_main(campaign, out) == 0
    assert "checked with an allowance: op_flat (7 elements), op_win (42 elements)." in out.read_text()


def test_the_autotune_record_is_checked(campaign, tmp_path, capsys):
    path = campaign[0] / "runs" / "op_flat" / "final.json"
    data = json.loads(path.read_text())
    for bad, what in (([], "'autotune' must be an object"), ({"kernels": []}, "'autotune' must be an object"),
                      ({"first_calls_s": "4"}, "'autotune.first_calls_s' must be a number")):
        path.write_text(json.dumps({**data, "autotune": bad}))
        assert run_main(campaign, tmp_path / "r.md") == 2
        assert what in capsys.readouterr().err


def test_the_data_must_hold_the_kernels(campaign, tmp_path, capsys):
    for f in (campaign[1] / "kernels").iterdir():
        f.unlink()
    (campaign[1] / "kernels").rmdir()
    assert run_main(campaign, tmp_path / "r.md") == 2
    assert "no kernels/ folder" in capsys.readouterr().err


def test_errors_name_the_file_and_exit_2(campaign, tmp_path, capsys):
    assert run_main((tmp_path / "nowhere", campaign[1]), tmp_path / "r.md") == 2
    assert "nowhere: the campaign folder does not exist" in capsys.readouterr().err

    bad = campaign[0] / "runs" / "op_win" / "kforge.jsonl"
    bad.write_text(bad.read_text() + "{not json\n")
    assert run_main(campaign, tmp_path / "r.md") == 2
    err = capsys.readouterr().err
    assert f"{bad}:4: malformed JSON line" in err

    bad.write_text("[1, 2]\n")
    assert run_main(campaign, tmp_path / "r.md") == 2
    assert f"{bad}:1: expected a JSON object" in capsys.readouterr().err

    (campaign[0] / "runs" / "op_win" / "kforge.jsonl").write_text("")
    bad_final = {"sizes": ["1"], "original": {"ms": [1, 2]}}
    (campaign[0] / "runs" / "op_win" / "final.json").write_text(json.dumps(bad_final))
    assert run_main(campaign, tmp_path / "r.md") == 2
    assert "final.json: 'original.ms' must be a list of 1 numbers" in capsys.readouterr().err

    assert run_main((campaign[0], tmp_path / "no-data"), tmp_path / "r.md") == 2
    assert "no-data: the TritonBench-G data folder does not exist" in capsys.readouterr().err
    assert not (tmp_path / "r.md").exists()


@pytest.mark.skipif(not (REAL_DATA / "TritonBench_G_v1.json").exists(), reason=f"{REAL_DATA} is absent")
def test_loader_reads_the_real_data():
    lengths = report.load_dataset(REAL_DATA)
    assert len(lengths) == 184
    assert "add_example" in lengths and all(isinstance(n, int) and n > 0 for n in lengths.values())
    counts = {b: 0 for b in report.BUCKETS}
    for n in lengths.values():
        counts[report.bucket_of(n)] += 1
    # TritonForge's edges are the quartiles of these lengths: each bucket holds about a quarter.
    assert all(40 <= c <= 52 for c in counts.values()), counts


def test_the_cards_are_said_and_in_the_csv(campaign, tmp_path):
    out = tmp_path / "r.md"
    assert run_main(campaign, out) == 0
    assert "Cards: not recorded: 7 operators." in out.read_text()
    path = campaign[0] / "runs" / "op_win" / "final.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "gpu": "NVIDIA H100 80GB HBM3"}))
    trials = campaign[0] / "runs" / "op_wrong" / "kforge.jsonl"   # no gpu in final.json: the trials' device
    trials.write_text("".join(json.dumps({**json.loads(line), "device": "cuda:0 NVIDIA H200"}) + "\n"
                              for line in trials.read_text().splitlines()))
    assert run_main(campaign, out) == 0
    text = out.read_text()
    assert "Cards: NVIDIA H100 80GB HBM3: 1 operator, NVIDIA H200: 1 operator, not recorded: 5 operators." in text
    assert "the GPU s of different cards do not" in text
    rows = {r["op"]: r for r in csv.DictReader(out.with_name("r.csv").open())}
    assert (rows["op_win"]["gpu"], rows["op_wrong"]["gpu"], rows["op_flat"]["gpu"]) == \
        ("NVIDIA H100 80GB HBM3", "NVIDIA H200", "")
    path.write_text(json.dumps({**json.loads(path.read_text()), "gpu": 7}))
    assert run_main(campaign, tmp_path / "r2.md") == 2


def test_cupti_throughput_marks_the_original_at_bound_and_goes_to_the_csv(campaign, tmp_path):
    # op_other is "other" by the harness's rates (100 GB/s of 4000); CUPTI says its DRAM is at 91% of peak.
    path = campaign[0] / "runs" / "op_other" / "final.json"
    cupti = {"size": 0, "metrics": [report.CUPTI_DRAM, report.CUPTI_SM],
             "original": {report.CUPTI_DRAM: 91.0, report.CUPTI_SM: 12.5},
             "kforge": {report.CUPTI_DRAM: 90.0, report.CUPTI_SM: 13.0}}
    path.write_text(json.dumps({**json.loads(path.read_text()), "cupti": cupti}))
    operators = loaded(campaign)
    other = next(o for o in operators if o.op == "op_other")
    assert report.why_not_improved(other, report.outcome(other, "kforge")) == "at_bound"
    out = tmp_path / "r.md"
    assert run_main(campaign, out) == 0
    rows = {r["op"]: r for r in csv.DictReader(out.with_name("r.csv").open())}
    assert (rows["op_other"]["original_dram_pct"], rows["op_other"]["original_sm_pct"],
            rows["op_other"]["kforge_dram_pct"]) == ("91.0", "12.5", "90.0")
    assert rows["op_win"]["original_dram_pct"] == ""
    # Below the threshold, or a profiler that could not run, leaves the class as it was.
    cupti["original"] = {report.CUPTI_DRAM: 79.0}
    path.write_text(json.dumps({**json.loads(path.read_text()), "cupti": cupti}))
    other = next(o for o in loaded(campaign) if o.op == "op_other")
    assert report.why_not_improved(other, report.outcome(other, "kforge")) == "other"
    path.write_text(json.dumps({**json.loads(path.read_text()), "cupti": {"error": "no driver"}}))
    other = next(o for o in loaded(campaign) if o.op == "op_other")
    assert other.final.cupti == {} and report.why_not_improved(other, report.outcome(other, "kforge")) == "other"


@pytest.mark.parametrize("key, bad, words", [
    ("ops_at_once", 0, "'ops_at_once' must be a positive integer"),
    ("gpus_at_once", 1.5, "'gpus_at_once' must be a positive integer"),
    ("workers_per_device", True, "'workers_per_device' must be a positive integer"),
    ("start_configurations", -1, "'start_configurations' must be a non-negative integer"),
    ("arms_together", 1, "'arms_together' must be true or false"),
    ("start_is_original", "yes", "'start_is_original' must be true or false")])
def test_final_json_fields_of_the_campaigns_settings_are_checked(key, bad, words):
    good = report.parse_final(final("op", [1.0], {}), Path("final.json"))
    assert (good.ops_at_once, good.workers_per_device, good.start_configurations, good.arms_together,
            good.start_is_original, good.gpus_at_once) == (1, 2, 0, False, None, 1)  # defaults where absent
    with pytest.raises(report.ReportError, match=words):
        report.parse_final({**final("op", [1.0], {}), key: bad}, Path("final.json"))


def test_final_json_names_the_program_that_faulted_the_gpu():
    assert report.parse_final(final("op", [1.0], {}), Path("final.json")).gpu_fault_by is None
    fault = {"program": "random", "where": "size 3", "error": "RuntimeError: an illegal memory access"}
    assert report.parse_final({**final("op", [1.0], {}), "gpu_fault": fault}, Path("final.json")).gpu_fault_by == "random"
    with pytest.raises(report.ReportError, match="'gpu_fault' must be an object with 'program'"):
        report.parse_final({**final("op", [1.0], {}), "gpu_fault": "random on size 3"}, Path("final.json"))


def test_kforge_against_random_side_by_side(campaign):
    operators = loaded(campaign)
    searched = [o for o in operators if o.runnable and o.searched]
    lines = report.head_to_head_lines(searched)
    assert lines[0] == "## kforge against random search"
    # op_win is the one operator with both arms' trials: three each, all ok
    assert lines[2] == "Trials that ran and were correct, over the 1 operators both searched: kforge 3 (100.0%) of 3, " \
        "random 3 (100.0%) of 3. Searches that measured every valid configuration of their space within the " \
        "budget: kforge 0, random 0, both 0 (there both measured the same configurations: only timing noise " \
        "can set them apart)."
    # op_win: kforge 2.0x, random 1.25x (both successes); op_wrong: kforge incorrect, so not side by side
    assert ("both arms correct and timed on every size on 1 operators: kforge more than 2% faster on 1 (op_win (1.60x)), random on 0, "
            "within 2% on 0. A success for one arm only: kforge 0, random 0.") in lines[4]
    # Split by the space's size: op_win's 40 configurations, op_wrong's 5,000; the others' unknown.
    for o in searched:
        o.space_size = {"op_win": 40, "op_wrong": 5000}.get(o.op)
    assert report.by_space_lines(searched)[0] == (
        "By the size of the operator's space (configurations; where a search measures most of a small space, "
        "the strategy cannot matter): <= 125: 1 searched, both correct on 1 (kforge ahead on 1, random on 0), "
        "successes kforge 1, random 1; 126-1,000: 0 searched, both correct on 0 (kforge ahead on 0, random on "
        "0), successes kforge 0, random 0; > 1,000: 1 searched, both correct on 0 (kforge ahead on 0, random "
        "on 0), successes kforge 0, random 0.")
    from kforge.tritonbench_g import anytime
    # op_win's first two trials: kforge's best 0.5 ms, random's 0.6 ms; the others have no random trials
    by_count = anytime.ratios_of(((o.trials.get("kforge"), o.trials.get("random")) for o in searched), (2, 3, 4))
    assert by_count[2] == [pytest.approx(1.2)] and by_count[3] == [pytest.approx(1.2)] and by_count[4] == []
    assert anytime.table(by_count)[2:] == ["| 2 | 1 | 1.200 | 1 | 0 |", "| 3 | 1 | 1.200 | 1 | 0 |"]
    # kforge wrong where random is a success: one arm only
    wrong = next(o for o in operators if o.op == "op_wrong")
    wrong.final.candidates["random"].ms = [0.5, 0.5]
    assert "kforge 0, random 1 (op_wrong)" in report.head_to_head_lines(searched)[4]


def test_cupti_decides_at_bound_over_the_harness_rates_and_marks_an_idle_gpu(campaign):
    # op_bound is at bound by the harness's rates (3500 of 4000 GB/s). Measured by CUPTI at 1.9% DRAM and
    # 19.9% SM (context_attn_bloom's on an H100, whose harness claims 3,075 GB/s), it is not: the GPU is
    # mostly idle, and nothing earlier in the order applies (its trials span 2x, the best came first).
    path = campaign[0] / "runs" / "op_bound" / "final.json"
    base = json.loads(path.read_text())

    def klass(original):
        path.write_text(json.dumps({**base, "cupti": {"size": 0, "metrics": [report.CUPTI_DRAM, report.CUPTI_SM],
                                                      "original": original}}))
        o = next(o for o in loaded(campaign) if o.op == "op_bound")
        return report.why_not_improved(o, report.outcome(o, "kforge"))

    assert klass({report.CUPTI_DRAM: 1.9, report.CUPTI_SM: 19.9}) == "underused"
    assert klass({report.CUPTI_DRAM: 1.9, report.CUPTI_SM: 25.0}) == "other"
    assert klass({report.CUPTI_DRAM: 1.9, report.CUPTI_SM: 82.3}) == "at_bound"
    assert klass({report.CUPTI_DRAM: 1.9}) == "other"  # what CUPTI measured decides at_bound; idle needs both
    assert klass({}) == "at_bound"  # no measurement: the harness's rates


def test_a_success_slower_on_most_sizes_is_said(campaign):
    operators = loaded(campaign)
    searched = [o for o in operators if o.runnable and o.searched]
    assert report.per_size_lines(searched) == []  # op_win: 4.0x and 1.71x per size
    # op_win's candidate made 2x slower on the small size and 1.11x faster on the large one: TritonBench's
    # metric (101 / 92 = 1.10x) calls it a success; the median per-size speed-up is 0.81x.
    win = next(o for o in operators if o.op == "op_win")
    win.final.original_ms = [1.0, 100.0]
    win.final.candidates["kforge"].ms = [2.0, 90.0]
    assert report.outcome(win, "kforge").success
    assert report.per_size_lines(searched)[0] == (
        "Successes whose median per-size speed-up is below 1x: op_win (median per-size 0.81x, "
        "1 of 2 sizes slower). TritonBench's metric sums the times over the sizes, so the largest sizes decide "
        "it (the search times the largest size); the CSV has each operator's per-size range.")


def test_autotune_seconds_taken_after_the_checks_are_not_the_autotuners_cost(campaign):
    # Until 2026-12-07 the final measurement took the original's first calls after its checks, which had
    # already tuned it (0.001-0.004 s on every operator with a checked candidate).
    path = campaign[0] / "runs" / "op_flat" / "final.json"
    data = json.loads(path.read_text())
    del data["autotune"]["first_calls_before_checks"]
    path.write_text(json.dumps(data))
    flat = next(o for o in loaded(campaign) if o.op == "op_flat")
    assert flat.final.autotune_first_calls_s is None and flat.final.autotune_first_calls_late
    line = report.autotune_lines(loaded(campaign))[0]
    assert line.endswith("Its own tuning time was not recorded for these. Not counted: 1 whose final measurement "
                         "took those calls after its checks had run, and tuned, the original (until 2026-12-07; "
                         "0.001-0.004 s).")
    # With no candidate checked the calls came first: the seconds count.
    data["candidates"] = {}
    path.write_text(json.dumps(data))
    flat = next(o for o in loaded(campaign) if o.op == "op_flat")
    assert flat.final.autotune_first_calls_s == 4.5 and not flat.final.autotune_first_calls_late


def test_the_searchs_timer_against_the_final_measurements_is_said_per_flush(campaign):
    operators = loaded(campaign)
    searched = [o for o in operators if o.runnable and o.searched]
    assert report.timer_lines(searched) == []  # no final.json records the search's best time
    win, wrong = (next(o for o in operators if o.op == op) for op in ("op_win", "op_wrong"))
    # op_win's winner: 0.5 ms at the largest size in the final measurement; its search timed 4 ms (a
    # launch the flush did not hide); op_wrong's search, with do_bench's flush, 1.01x its final time.
    win.final.candidates["kforge"].search_best_ms = 8 * win.final.candidates["kforge"].ms[-1]
    wrong.final.candidates["kforge"].search_best_ms = 1.01 * wrong.final.candidates["kforge"].ms[-1]
    wrong.final.search_flush_bytes = 256 << 20
    lines = report.timer_lines(searched)
    assert lines[0] == "## The search's timer against the final measurement's"
    assert lines[2].endswith("Searches flushing 256 MiB: 1 operators, median 1.01, above 1.5x on 0; flushing twice "
                             "the L2: 1 operators, median 8.00, above 1.5x on 1 (op_win (8.0x)).")


def test_final_json_records_the_searchs_flush():
    data = final("op", [1.0], {"kforge": {**candidate([1.0], 30.0), "search_best_ms": 1.2}})
    f = report.parse_final({**data, "search_timer": {"flush_bytes": 268435456}}, Path("final.json"))
    assert f.search_flush_bytes == 1 << 28 and f.candidates["kforge"].search_best_ms == 1.2
    assert report.parse_final(data, Path("final.json")).search_flush_bytes is None
    with pytest.raises(report.ReportError, match="search_timer"):
        report.parse_final({**data, "search_timer": 5}, Path("final.json"))


def test_each_searchs_stop_reason_is_read_from_the_search_log(tmp_path):
    (tmp_path / "search.log").write_text(
        "kforge run: kforge | problem program <repo>/x.py (2 parameters) | strategy hybrid | ...\n"
        "note: 5 trial(s) still in flight 1 s after the wall-time budget were dropped\n"
        "stopped: no unmeasured configuration left after 25 trials; clock 6.3 s, wall 6.3 s\n"
        "best: 0.3184 ms (median; IQR 0.0005 ms) at trial 3: {num_warps=4}\n"
        "kforge rc=0 wall_ms=12000 ops_at_once=1 workers=4 arms_together=0\n"
        "kforge run: random | problem program <repo>/x.py (2 parameters) | strategy random | ...\n"
        "stopped: strategy finished after 25 trials; clock 8.1 s, wall 8.1 s\n"
        "stopped: a second line is not this search's\n")
    assert report.read_stops(tmp_path) == {"kforge": "no unmeasured configuration left", "random": "strategy finished"}
    assert report.read_stops(tmp_path / "none") == {}
    o = report.Operator(op="x", source_len=1, bucket="Q1", tried=True, runnable=True, category="ok", reason="",
                        harness_sizes=1, trials={"kforge": [], "random": []}, final=None,
                        stops=report.read_stops(tmp_path))
    assert o.exhausted("kforge") and o.exhausted("random")
    o.stops["random"] = "wall-time budget reached"
    assert not o.exhausted("random")


def test_the_space_size_is_the_product_of_the_importers_knob_values(tmp_path):
    (tmp_path / "op.py").write_text(
        "import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x, BLOCK: tl.constexpr):\n    pass\n\n\n"
        "def op(x):\n    k[(1,)](x, BLOCK=256, num_warps=4)\n")
    # BLOCK 64..1024 (a quarter of 256 up to 1024), num_warps 1..16, num_stages 1..5: 5 x 5 x 5
    assert report.space_size(report.importer_knobs(report.kernel_text(tmp_path, "op"))) == 125
    assert report.space_size(report.importer_knobs(report.kernel_text(tmp_path, "missing"))) is None
    assert report.space_size(report.importer_knobs(report.kernel_text(None, "op"))) is None
    (tmp_path / "bad.py").write_text("def op(:\n")
    assert report.space_size(report.importer_knobs(report.kernel_text(tmp_path, "bad"))) is None
    assert report.space_classes([1, 25, 26, 125, 126, 1000, 1001, 100000, 100001, None]) == \
        "<= 25: 2, 26-125: 2, 126-1,000: 2, 1,001-100,000: 2, > 100,000: 1"


def test_the_space_sizes_are_in_the_coverage_and_the_csv(campaign, tmp_path):
    out = tmp_path / "results" / "tritonbench-g.md"
    assert run_main(campaign, out) == 0
    # op_flat's source (AUTOTUNED): its autotune list's BLOCK (64 and 128) offered as 16..1024 (7), the
    # launch's num_warps and num_stages (5 each); op_win's has no launch (1); the others have no source
    # in the data (unknown)
    rows = {r["op"]: r for r in csv.DictReader(out.with_name("tritonbench-g.csv").open())}
    assert (rows["op_flat"]["space_size"], rows["op_win"]["space_size"], rows["op_wrong"]["space_size"]) == \
        ("175", "1", "")
    assert ("- Configurations in the search space (the importer's knobs as it makes them now, the product of their "
            "value counts; kforge's searches with a correct trial tried 3 configurations (median; quartiles 3 "
            "and 3)): runnable <= 25: 1, 26-125: 0, 126-1,000: 1, 1,001-100,000: 0, > 100,000: 0; judged <= 25: 1, "
            "26-125: 0, 126-1,000: 1, 1,001-100,000: 0, > 100,000: 0.") in out.read_text()


def test_a_search_that_timed_the_launch_is_launch_bound(campaign):
    # op_other (class other): its winner 1.0 ms at the largest size in the final measurement. A search that
    # timed it at 1.6 ms measured the host's launch (l2_norm_triton1: 8.6x); at 1.4 ms it is no class of
    # its own, and it comes before space_exhausted (a space searched whole by a timer that ranked noise).
    other = next(o for o in loaded(campaign) if o.op == "op_other")
    assert report.search_timer_ratio(other) is None
    other.final.candidates["kforge"].search_best_ms = 1.6
    assert report.search_timer_ratio(other) == pytest.approx(1.6)
    other.stops = {"kforge": "no unmeasured configuration left"}
    assert report.why_not_improved(other, report.outcome(other, "kforge")) == "launch_bound"
    other.final.candidates["kforge"].search_best_ms = 1.4
    assert report.why_not_improved(other, report.outcome(other, "kforge")) == "space_exhausted"
    other.stops = {}
    assert report.why_not_improved(other, report.outcome(other, "kforge")) == "other"


def test_the_starts_are_the_originals_own_only_without_autotune_extras_or_computed_options():
    plain = ("import triton\n@triton.autotune(configs=[triton.Config({'B': 32}, num_warps=4), "
             "triton.Config({'B': 64}, num_warps=8)], key=['n'])\n@triton.jit\ndef k(x, n, B: tl.constexpr):\n"
             "    pass\ndef f(x):\n    k[(1,)](x, 4)\n")
    assert report.starts_are_own(report.importer_knobs(plain))
    hooked = plain.replace("key=['n'])", "key=['n'], reset_to_zero=['x'])")
    assert not report.starts_are_own(report.importer_knobs(hooked))
    assert not report.starts_are_own(report.importer_knobs(None))
    assert not report.starts_are_own(report.importer_knobs("def broken(:\n"))


def test_where_the_searches_started(campaign):
    """start_kind: final.json's flag where it says; where it is absent (older files), or false for an
    original whose autotune list chooses nothing (the flag is false wherever an autotune knob is), the
    first trial against the original's configuration as the importer makes it now, compared only where
    the knob names are the same; the coverage line names the operators that started elsewhere."""
    op = next(o for o in loaded(campaign) if o.op == "op_win")
    op.autotuned, op.final.start_configurations, op.final.start_is_original = False, 0, None
    assert report.start_kind(op) == "none"  # searched before starts existed
    op.final.start_configurations = 1
    op.original_configuration = {"BLOCK": 32}  # sequence 0 of three_configs
    assert report.start_kind(op) == "original"
    op.original_configuration = {"BLOCK": 64}
    assert report.start_kind(op) == "elsewhere"
    op.original_configuration = {"BLOCK": 32, "num_warps": 4}  # the importer's knobs changed since
    assert report.start_kind(op) == "unknown"
    op.original_configuration = None  # an autotuner or a heuristic decides a value
    assert report.start_kind(op) == "unknown"
    op.final.start_is_original = True
    assert report.start_kind(op) == "original"
    op.final.start_is_original = False
    assert report.start_kind(op) == "elsewhere"
    op.list_knobs, op.original_configuration = True, {"BLOCK": 32}  # a list of one: its entry is the start
    assert report.start_kind(op) == "original"
    op.autotuned = True
    assert report.start_kind(op) == "autotune"
    op.autotuned, op.list_knobs, op.final.start_is_original = False, False, None
    op.trials = {"kforge": [], "random": None}
    assert report.start_kind(op) == "unknown"
    op.trials = {"kforge": three_configs([0.5, 0.6, 0.7], [1, 2, 3]), "random": None}
    op.final.start_is_original = False
    (line,) = report.start_lines([op])
    assert "the original's launch 0;" in line and "elsewhere 1," in line and line.endswith(": op_win (2.00x).")


def test_the_original_configuration_is_every_default_where_no_autotuner_or_heuristic_decides():
    params = [{"name": "B", "values": [16, 32], "default": 16, "knob": {"literal": "run:9"}},
              {"name": "num_warps", "values": ["as written", 1, 2], "default": "as written",
               "knob": {"launch": "run:10"}}]
    assert report.original_configuration(("src", params), autotuned=False) == {"B": 16, "num_warps": "as written"}
    assert report.original_configuration(("src", params), autotuned=True) is None
    single = [{"name": "BLOCK", "values": [64], "default": 64, "knob": {"autotune": "k"}}]  # a list of one
    assert report.original_configuration(("src", single), autotuned=False) == {"BLOCK": 64}
    assert report.original_configuration(("src", [{**params[0], "knob": {"heuristic": "k"}}]), False) is None
    assert report.original_configuration(("src", [{k: v for k, v in params[0].items() if k != "default"}]),
                                         False) is None
    assert report.original_configuration(None, False) is None


def test_operators_marked_to_search_again_are_listed_and_still_counted(campaign):
    root, data = campaign
    (root / "redo.jsonl").write_text(json.dumps({"op": "op_win", "reason": "a fault fixed", "date": "d"}) + "\n")
    operators = loaded(campaign)
    win = next(o for o in operators if o.op == "op_win")
    assert win.redo == {"op": "op_win", "reason": "a fault fixed", "date": "d"} and win.final is not None
    lines = report.coverage_lines(operators, [])
    assert "- Marked to be searched again (redo.jsonl; their runs count until a new search replaces them): " \
           "1: op_win (a fault fixed)." in lines
    assert report.headline(operators, "kforge").successes >= 1  # its verdict stands until replaced


def test_knobs_whose_code_never_ran_are_listed_where_the_worker_traced_them(campaign):
    operators = loaded(campaign)
    assert report.not_run_lines([o for o in operators if o.searched]) == []  # runs older than the trace
    win = next(o for o in operators if o.op == "op_win")
    win.trials["kforge"][0]["metrics"] = {"setup.knob_sites": 3.0, "setup.knobs_not_run": 1.0,
                                          "setup.knob_not_run.num_warps@run:12": 1.0}
    bound = next(o for o in operators if o.op == "op_bound")
    bound.trials["kforge"][0]["metrics"] = {"setup.knob_sites": 2.0, "setup.knobs_not_run": 0.0}
    assert report.knobs_not_run(win) == (3, ["num_warps@run:12"])
    (line,) = report.not_run_lines([win, bound])
    assert "1 of the 2 operators searched with the trace, 1 of 5 launch and literal knobs: op_win (num_warps@run:12)." \
        in line
