"""kforge.tritonbench_g.anytime: kforge's best against random search's at equal trial counts."""
import json

import pytest

from kforge.tritonbench_g import anytime


def write_arm(folder, method, times):
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"sequence": i, "status": "ok" if t else "compile_failed", "time_ms": t} for i, t in enumerate(times)]
    (folder / f"{method}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reversed(rows)))  # read by sequence


def test_ratios_at_equal_trial_counts_and_the_table(tmp_path, capsys):
    runs = tmp_path / "runs"
    write_arm(runs / "faster", "kforge", [4.0, None, 2.0, 2.0, 1.0, 1.0])
    write_arm(runs / "faster", "random", [4.0, 4.0, 4.0, 3.0, 3.0, 2.0])
    write_arm(runs / "same", "kforge", [2.0] * 5)
    write_arm(runs / "same", "random", [2.0] * 5)
    write_arm(runs / "one_arm", "kforge", [1.0] * 9)
    write_arm(runs / "no_ok", "kforge", [None] * 5)
    write_arm(runs / "no_ok", "random", [1.0] * 5)
    by_count = anytime.ratios(runs, (2, 5, 6))
    assert by_count == {2: [1.0, 1.0], 5: [3.0, 1.0], 6: [2.0]}
    assert anytime.table(by_count)[2:] == ["| 2 | 2 | 1.000 | 0 | 0 |", "| 5 | 2 | 2.000 | 1 | 0 |",
                                           "| 6 | 1 | 2.000 | 1 | 0 |"]
    assert anytime.main([str(tmp_path)]) == 0
    assert "| 5 | 2 | 2.000 | 1 | 0 |" in capsys.readouterr().out
    assert anytime.main([str(tmp_path / "nowhere")]) == 2
    assert "has no runs folder" in capsys.readouterr().err


def test_the_table_counts_ahead_with_the_reports_rule():
    """A ratio counts as faster or slower exactly where report.clearly_faster says one time beats the other
    by more than 2%: a kforge best 1.0203x random's (ratio 0.9801) is slower, 1.0199x is not."""
    from kforge.tritonbench_g.report import clearly_faster
    ratios = [1.0201, 1.0199, 1 / 1.0203, 1 / 1.0199]
    assert anytime.table({5: ratios})[2] == "| 5 | 4 | 1.000 | 1 | 1 |"
    assert [clearly_faster(r, 1.0) for r in ratios] == [True, False, False, False]
    assert [clearly_faster(1.0, r) for r in ratios] == [False, False, True, False]


@pytest.mark.parametrize("text, words", [("{not json\n", "malformed JSON"), ('{"time_ms": 1}\n', "has no 'status'")])
def test_a_bad_trial_file_is_an_error_with_its_path(tmp_path, capsys, text, words):
    write_arm(tmp_path / "runs" / "op", "random", [1.0])
    (tmp_path / "runs" / "op" / "kforge.jsonl").write_text(text)
    assert anytime.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "kforge.jsonl" in err and words in err
