"""kforge.suite.table (the docs/suite.md table of the suite against the experts) on synthetic results folders,
numbers worked out by hand, and its error cases. No GPU."""
import json
from pathlib import Path

import pytest

from kforge.suite import table


def final(kernel, kforge_ms, expert_ms, target, *, correct=True, floor=None, found=12.3, trials=40, wall=331.6,
          config=None, defaults=None, extra=(), fake=False, compute="fp32"):
    k = {"name": "kforge best", "role": "kforge", "median_ms": kforge_ms, "iqr_ms": 0.0012, "correct": correct,
         "configuration": config or {"a": 2, "b": "x"}}
    e = {"name": f"{kernel} expert", "role": "expert", "median_ms": expert_ms, "iqr_ms": 0.01, "correct": True}
    return {"kernel": kernel, "fake": fake, "shape": {"M": 4096, "N": 4096}, "kforge": k, "expert": e,
            "candidates": [k, e, *extra], "target": {"ratio": target, "against": "x"},
            "roofline": {"floor_ms": floor, "compute": compute} if floor else None,
            "search": {"trials": trials, "wall_s": wall, "best": {"found_at_s": found}},
            "variant": {"defaults": defaults or {"a": 1, "b": "x"}},
            "protocol": {"rounds": 10, "calls_per_round": 10},
            "environment": {"device": "NVIDIA H200", "torch": "2.11", "cuda": "12.8", "cudnn": 91000}}


def write(results: Path, d: dict, name=None):
    folder = results / (name or d["kernel"])
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "final.json").write_text(json.dumps(d))
    return folder / "final.json"


@pytest.fixture
def results(tmp_path):
    r = tmp_path / "h200"
    cudnn = {"name": "cuDNN", "role": "reference", "median_ms": 43.4, "iqr_ms": 0.05, "correct": True}
    # conv2d: kforge 2.0 ms, expert 1.5 ms -> 75.0%, target 100% -> no; floor 0.45 -> 22.5%
    write(r, final("conv2d", 2.0, 1.5, 1.0, floor=0.45, extra=[cudnn], config={"a": 1, "b": "y"}))
    # sgemm: kforge 3.0, expert 2.7 -> 90.0% >= 85% -> yes; floor 2.051 -> 68.4%
    write(r, final("sgemm", 3.0, 2.7, 0.85, floor=2.051))
    # attention: faster than the expert but wrong
    write(r, final("attention", 4.0, 5.0, 1.0, correct=False))
    (r / "gemm_bf16").mkdir()  # searched, not measured yet: left out
    return r


def test_table_rows_in_suite_order_with_hand_computed_numbers(results):
    out = table.render(table.collect(results))
    rows = [line for line in out.splitlines() if line.startswith("| ") and not line.startswith("| kernel")]
    assert [r.split(" | ")[0][2:] for r in rows[:3]] == ["sgemm", "attention", "conv2d"]
    sg = rows[0].split(" | ")
    assert sg[2] == "3.000 (0.001)"
    assert sg[4] == "2.700 (0.010)"
    assert sg[5:9] == ["90.0%", ">= 85.0%", "**yes**", "68.4% (fp32)"]
    assert sg[9:11] == ["12", "40 in 332"]
    assert sg[11] == "a=2 |"
    att = rows[1].split(" | ")
    assert att[2].endswith("WRONG") and att[7] == "no (wrong output)" and att[8] == "-"
    conv = rows[2].split(" | ")
    assert conv[5:9] == ["75.0%", ">= 100.0%", "no", "22.5% (fp32)"]
    assert conv[11] == 'b=y |'
    # the reference row: kforge / cuDNN = 43.4 / 2.0
    assert "| conv2d | cuDNN | 43.40 (0.05) | yes | 2170.0% |" in out
    assert out.rstrip().endswith("NVIDIA H200, torch 2.11, CUDA 12.8, cuDNN 91000; 10 rounds x 10 calls per candidate.")


def test_output_is_deterministic_and_names_unmeasured_folders(results, capsys):
    assert table.main([str(results)]) == 0
    first = capsys.readouterr()
    assert "gemm_bf16: no final.json (not measured yet), left out" in first.err
    assert table.main([str(results)]) == 0
    assert capsys.readouterr().out == first.out


def test_doc_update_between_markers_and_check(results, tmp_path, capsys):
    doc = tmp_path / "suite.md"
    doc.write_text(f"# Suite\n\nbefore\n\n{table.BEGIN}\nold table\n{table.END}\n\nafter\n")
    assert table.main([str(results), "--doc", str(doc), "--check"]) == 1
    assert table.main([str(results), "--doc", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("# Suite\n\nbefore\n\n" + table.BEGIN + "\n| kernel |")
    assert text.endswith(table.END + "\n\nafter\n") and "old table" not in text
    assert table.main([str(results), "--doc", str(doc), "--check"]) == 0
    assert table.main([str(results), "--doc", str(doc)]) == 0
    assert "already up to date" in capsys.readouterr().out
    assert doc.read_text() == text


def test_budget_and_a_later_measurement_are_shown(tmp_path):
    d = final("sgemm", 3.0, 2.7, 0.85)
    d["search"]["budget_s"] = 300
    d["same_call_as_search"] = False
    write(tmp_path, d)
    row = table.render(table.collect(tmp_path)).splitlines()[2].split(" | ")
    assert row[0] == "| sgemm (measured in a later call than its search)"
    assert row[10] == "40 in 332 (budget 300)"


def test_empty_results_folder(tmp_path):
    (tmp_path / "h200").mkdir()
    assert table.render(table.collect(tmp_path / "h200")).startswith("No kernel measured yet")


@pytest.mark.parametrize("mutate, message", [
    (lambda d: "{not json", "not JSON"),
    (lambda d: [1, 2], "expected a JSON object"),
    (lambda d: {**d, "kforge": {**d["kforge"], "median_ms": "fast"}}, "kforge: 'median_ms' must be a positive number"),
    (lambda d: {**d, "kforge": {**d["kforge"], "median_ms": 0}}, "'median_ms' must be a positive number"),
    (lambda d: {k: v for k, v in d.items() if k != "kforge"}, "'kforge' must be an object"),
    (lambda d: {**d, "kforge": {**d["kforge"], "correct": "yes"}}, "'correct' must be true or false"),
    (lambda d: {**d, "expert": {**d["expert"], "iqr_ms": None}}, "expert: 'iqr_ms' must be a non-negative number"),
    (lambda d: {**d, "target": {}}, "target: 'ratio' must be a positive number"),
    (lambda d: {**d, "kernel": "sgemm2"}, "'kernel' is 'sgemm2', the folder says 'sgemm'"),
    (lambda d: {**d, "search": {"trials": -1}}, "search: 'trials' must be a non-negative number"),
    (lambda d: {**d, "candidates": [1]}, "'candidates' must be a list of objects"),
    (lambda d: {**d, "fake": True}, "a dry run's file"),
])
def test_malformed_file_names_the_file_and_exits_2(tmp_path, capsys, mutate, message):
    r = tmp_path / "h200"
    good = final("sgemm", 3.0, 2.7, 0.85, floor=2.0)
    path = write(r, good)
    bad = mutate(good)
    path.write_text(bad if isinstance(bad, str) else json.dumps(bad))
    assert table.main([str(r)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and message in err, err


def test_fake_files_only_with_allow_fake(tmp_path):
    r = tmp_path / "h200"
    write(r, final("sgemm", 1.0, 1.0, 0.85, fake=True))
    assert table.main([str(r)]) == 2
    assert table.main([str(r), "--allow-fake"]) == 0


def test_missing_folder_and_doc_without_markers(tmp_path, results, capsys):
    assert table.main([str(tmp_path / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err
    doc = tmp_path / "doc.md"
    doc.write_text("no markers\n")
    assert table.main([str(results), "--doc", str(doc)]) == 2
    assert f"{doc}: expected one" in capsys.readouterr().err
    assert doc.read_text() == "no markers\n"


def test_the_committed_results_and_doc_agree():
    """docs/suite.md's table is what scripts/suite-table makes of the committed results."""
    root = Path(__file__).resolve().parents[2]
    assert table.main([str(root / "experiments/suite/h200"), "--doc", str(root / "docs/suite.md"), "--check"]) == 0
