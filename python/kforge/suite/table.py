"""The docs/suite.md table of the suite against the experts, from the committed measurements (issue 17, item 4).

    python -m kforge.suite.table experiments/suite/h200                    # the table on standard output
    python -m kforge.suite.table experiments/suite/h200 --doc docs/suite.md [--check]

Reads RESULTS/<kernel>/final.json (kforge.suite.measure's file; scripts/device-suite's results, committed) for
every kernel folder that has one; folders without it (a search whose measurement has not run) are named on
standard error and left out. --doc replaces the text between the lines ``<!-- suite-table:begin -->`` and
``<!-- suite-table:end -->`` of the document; --check only says whether the document is up to date (exit 1
when not). The output depends only on the files read: kernels in the suite's order (sgemm, gemm_bf16,
attention, conv2d, then others by name), fixed number formats, no clock.

The ratio is the expert's median time over kforge's (kforge's speed as a fraction of the expert's), judged
against the file's target; a kforge output that failed the check is "no (wrong output)" whatever its speed.
The roofline percentage is the floor (kf::h200_peaks: 4.8 TB/s, 67 TFLOP/s fp32, 989 TFLOP/s bf16 dense, from
the H200 datasheet; the floor the rendered manifest carries) over kforge's median.

Exit status: 0 done, 1 --check found the document out of date, 2 a malformed file (its path and what is
wrong are printed), a missing folder, a document without the markers, or a dry run's file (``"fake": true``,
unless --allow-fake).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ORDER = ("sgemm", "gemm_bf16", "attention", "conv2d")
BEGIN, END = "<!-- suite-table:begin -->", "<!-- suite-table:end -->"


class TableError(Exception):
    pass


def _number(d: dict, key: str, where: str, positive=True, optional=False):
    """d[key] as a finite number, > 0 (positive) or >= 0; TableError naming `where` and the key otherwise."""
    v = d.get(key) if isinstance(d, dict) else None
    if v is None and optional:
        return None
    if (not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v)
            or (v <= 0 if positive else v < 0)):
        raise TableError(f"{where}: '{key}' must be a {'positive' if positive else 'non-negative'} number, not {v!r}")
    return float(v)


def _object(d: dict, key: str, where: str, optional=False):
    v = d.get(key)
    if v is None and optional:
        return None
    if not isinstance(v, dict):
        raise TableError(f"{where}: '{key}' must be an object, not {type(v).__name__}")
    return v


def load(path: Path, allow_fake: bool = False) -> dict:
    """A final.json, checked for what the table reads; TableError names the file and the key."""
    try:
        d = json.loads(path.read_text())
    except OSError as e:
        raise TableError(f"{path}: cannot read ({e.strerror})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TableError(f"{path}: not JSON ({e})") from None
    if not isinstance(d, dict):
        raise TableError(f"{path}: expected a JSON object")
    if d.get("fake") and not allow_fake:
        raise TableError(f"{path}: a dry run's file (\"fake\": true), not a measurement")
    if d.get("kernel") != path.parent.name:
        raise TableError(f"{path}: 'kernel' is {d.get('kernel')!r}, the folder says {path.parent.name!r}")
    k = _object(d, "kforge", str(path))
    _number(k, "median_ms", f"{path}: kforge")
    _number(k, "iqr_ms", f"{path}: kforge", positive=False)
    if not isinstance(k.get("correct"), bool):
        raise TableError(f"{path}: kforge: 'correct' must be true or false")
    e = _object(d, "expert", str(path), optional=True)
    if e is not None:
        _number(e, "median_ms", f"{path}: expert")
        _number(e, "iqr_ms", f"{path}: expert", positive=False)
        if not isinstance(e.get("name"), str):
            raise TableError(f"{path}: expert: 'name' must be a string")
    _number(_object(d, "target", str(path)), "ratio", f"{path}: target")
    roof = _object(d, "roofline", str(path), optional=True)
    if roof is not None:
        _number(roof, "floor_ms", f"{path}: roofline", optional=True)
    s = _object(d, "search", str(path), optional=True)
    if s is not None:
        _number(s, "trials", f"{path}: search", positive=False)
        b = _object(s, "best", f"{path}: search", optional=True)
        if b is not None:
            _number(b, "found_at_s", f"{path}: search.best", positive=False)
    rows = d.get("candidates", [])
    if not isinstance(rows, list) or any(not isinstance(r, dict) for r in rows):
        raise TableError(f"{path}: 'candidates' must be a list of objects")
    for i, r in enumerate(rows):
        _number(r, "median_ms", f"{path}: candidates[{i}]")
    return d


def decimals(x: float) -> int:
    return 4 if x < 1 else 3 if x < 10 else 2


def ms(x: float) -> str:
    return f"{x:.{decimals(x)}f}"


def ms_iqr(row: dict) -> str:
    """The median and, in brackets, the interquartile range, both to the median's decimals."""
    m, q = row["median_ms"], row["iqr_ms"]
    return f"{m:.{decimals(m)}f} ({q:.{decimals(m)}f})"


def percent(x: float) -> str:
    return f"{100 * x:.1f}%"


def _value(v) -> str:
    return json.dumps(v) if not isinstance(v, str) else v


def changed(config: dict | None, defaults: dict | None) -> str:
    """The configuration's parameters that differ from the baseline's (all of them without the defaults)."""
    if not isinstance(config, dict):
        return "-"
    items = [(k, v) for k, v in config.items() if not isinstance(defaults, dict) or defaults.get(k) != v]
    text = ", ".join(f"{k}={_value(v)}" for k, v in items) or "the baseline"
    return text.replace("|", "\\|")


def shape_text(shape) -> str:
    if not isinstance(shape, dict):
        return "-"
    return " ".join(f"{k}={_value(v)}" for k, v in shape.items())


def sorted_kernels(names):
    return sorted(names, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))


def collect(results: Path, allow_fake: bool = False, notes=None) -> list[dict]:
    if not results.is_dir():
        raise TableError(f"{results}: no such folder")
    found = []
    for folder in sorted(p for p in results.iterdir() if p.is_dir()):
        f = folder / "final.json"
        if not f.exists():
            if notes is not None:
                notes.append(f"{folder}: no final.json (not measured yet), left out")
            continue
        found.append(load(f, allow_fake))
    order = sorted_kernels([d["kernel"] for d in found])
    return sorted(found, key=lambda d: order.index(d["kernel"]))


def render(finals: list[dict]) -> str:
    if not finals:
        return "No kernel measured yet (experiments/suite/h200/ holds no final.json).\n"
    head = ("| kernel | shape | kforge best, ms (IQR) | expert | expert, ms (IQR) | kforge / expert | target | met "
            "| % of roofline | found at (s) | trials in wall (budget), s | winning configuration (changed from the baseline) |")
    lines = [head, "|" + "---|" * 12]
    extra, envs = [], set()
    for d in finals:
        k, e, t = d["kforge"], d.get("expert"), d["target"]["ratio"]
        s, roof = d.get("search") or {}, d.get("roofline") or {}
        ratio = e["median_ms"] / k["median_ms"] if e else None
        if not k["correct"]:
            met = "no (wrong output)"
        elif ratio is None:
            met = "no expert"
        else:
            met = "**yes**" if ratio >= t else "no"
        floor = roof.get("floor_ms")
        roof_text = f"{percent(floor / k['median_ms'])} ({roof.get('compute', 'fp32')})" if floor else "-"
        best = s.get("best") or {}
        found = f"{best['found_at_s']:.0f}" if "found_at_s" in best else "-"
        trials = f"{s['trials']} in {s['wall_s']:.0f}" if "trials" in s and "wall_s" in s else "-"
        if trials != "-" and isinstance(s.get("budget_s"), (int, float)):
            trials += f" (budget {s['budget_s']:.0f})"
        defaults = (d.get("variant") or {}).get("defaults")
        later = d.get("same_call_as_search") is False
        lines.append("| " + " | ".join([
            d["kernel"] + (" (measured in a later call than its search)" if later else ""), shape_text(d.get("shape")), ms_iqr(k) + ("" if k["correct"] else " WRONG"),
            (e["name"] if e else "-").replace("|", "\\|"), ms_iqr(e) if e else "-",
            percent(ratio) if ratio else "-", f">= {percent(t)}", met, roof_text, found, trials,
            changed(k.get("configuration"), defaults)]) + " |")
        for r in d.get("candidates", []):
            if r.get("role") in ("reference", "expert") and r != e:
                extra.append((d["kernel"], r, k))
        env = d.get("environment") or {}
        envs.add(", ".join(f"{label}{env[key]}" for key, label in
                           (("device", ""), ("torch", "torch "), ("cuda", "CUDA "), ("cudnn", "cuDNN "))
                           if env.get(key)))
    out = "\n".join(lines) + "\n"
    if extra:
        out += ("\nOther rows of the same measurements (references, and the expert's other candidates):\n\n"
                "| kernel | implementation | ms (IQR) | correct | kforge / it |\n|---|---|---|---|---|\n")
        for kernel, r, k in extra:
            ok = "yes" if r.get("correct") else "no"
            out += (f"| {kernel} | {r.get('name', '-')} | {ms_iqr(r) if 'iqr_ms' in r else ms(r['median_ms'])} | {ok} "
                    f"| {percent(r['median_ms'] / k['median_ms'])} |\n")
    protocols = sorted({(d["protocol"]["rounds"], d["protocol"]["calls_per_round"]) for d in finals
                        if isinstance(d.get("protocol"), dict) and "rounds" in d["protocol"]})
    out += "\n" + "; ".join(sorted(x for x in envs if x)) + (
        "; " + ", ".join(f"{r} rounds x {c} calls per candidate" for r, c in protocols) if protocols else "") + ".\n"
    return out


def update_doc(doc: Path, table: str) -> tuple[str, str]:
    try:
        text = doc.read_text()
    except OSError as e:
        raise TableError(f"{doc}: cannot read ({e.strerror})") from None
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise TableError(f"{doc}: expected one '{BEGIN}' line followed by one '{END}' line")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return text, head + BEGIN + "\n" + table + END + tail


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--doc", type=Path)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--allow-fake", action="store_true")
    args = ap.parse_args(argv)
    notes: list[str] = []
    try:
        table = render(collect(args.results, args.allow_fake, notes))
        for n in notes:
            print(f"kforge.suite.table: {n}", file=sys.stderr)
        if not args.doc:
            sys.stdout.write(table)
            return 0
        old, new = update_doc(args.doc, table)
    except TableError as e:
        print(f"kforge.suite.table: {e}", file=sys.stderr)
        return 2
    if args.check:
        if old != new:
            print(f"kforge.suite.table: {args.doc} is out of date (run scripts/suite-table)", file=sys.stderr)
            return 1
        return 0
    if old != new:
        args.doc.write_text(new)
    print(f"kforge.suite.table: {args.doc} {'updated' if old != new else 'already up to date'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
