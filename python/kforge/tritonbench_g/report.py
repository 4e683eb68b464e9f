"""The TritonBench-G results: a Markdown report, a per-operator CSV and two plots from a stored campaign.

    PYTHONPATH=python .venv/bin/python -m kforge.tritonbench_g.report experiments/tritonbench-g/h200 \\
        --data ../shared/data/tritonbench-g --out docs/results/tritonbench-g.md

writes ``tritonbench-g.md``, ``tritonbench-g.csv``, ``tritonbench-g-speedups.png`` and
``tritonbench-g-speedup-vs-gpu-s.png`` (the last three beside ``--out``, named after its stem). Nothing
is measured here: everything comes from the campaign folder, which holds

- ``runnable.jsonl``: one object per operator tried by the runnable filter (``op``, ``runnable``,
  ``category``, ``reason``, ``sizes``, ``seconds``); operators of the data absent from it are "not tried";
- ``runs/<op>/kforge.jsonl``, ``runs/<op>/random.jsonl``: the searches' trials as ``kforge export``
  writes them (either may be missing);
- ``runs/<op>/final.json``: the final interleaved measurement of the original and of each method's
  candidate on every harness size (may be missing).

The data folder gives the 184 operators and their source lengths (``TritonBench_G_v1.json``), and
``kernels/<op>.py``, read once per operator (``kernel_text``) for which originals have Triton's autotuner
choose (``has_autotune``) and how large the importer's space of it is (``space_size``).
Regenerating from the same inputs gives the same bytes: operators are sorted, floats have fixed formats
and the PNGs carry no software or date stamp. A missing folder or file, or malformed JSON, raises
``ReportError`` (the file and the reason); ``main`` prints it and returns 2.
"""

from __future__ import annotations

import argparse
import collections
import csv
import dataclasses
import json
import math
import os
import re
import statistics
import sys
from pathlib import Path
from typing import Any, Iterable

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from kforge.triton import source_ops  # noqa: E402
from kforge.triton.bounded_compile import TIMEOUT_MARK  # noqa: E402
from kforge.tritonbench_g.harness import cut_source  # noqa: E402
from kforge.tritonbench_g.order import REDO, RedoError, json_objects, read_redo  # noqa: E402

PROG = "python -m kforge.tritonbench_g.report"
DEFAULT_DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "tritonbench-g"
DEFAULT_OUT = Path("docs/results/tritonbench-g.md")

METHODS = ("kforge", "random")            # the searches; trials in runs/<op>/<method>.jsonl
SUCCESS_SPEEDUP = 1.05                    # a success: correct and at least this speed-up
# Why-not-improved thresholds.
AT_BOUND_GBPS = 0.80                      # the original reaches this fraction of the measured copy bandwidth
AT_BOUND_TFLOPS = 0.60                    # ... or this fraction of the nominal dense fp16 peak
AT_BOUND_CUPTI_PCT = 80.0                 # ... or CUPTI's DRAM or SM throughput (% of peak) reaches this
UNDERUSED_CUPTI_PCT = 20.0                # CUPTI's DRAM and SM throughput both below this: the GPU mostly idle
CUPTI_DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
CUPTI_SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
NO_EFFECT_SPAN = 1.05                     # the ok trials' slowest / fastest below this: knobs without effect
LATE_FRACTION = 0.75                      # the best trial after this fraction of the search's clock: too short
ORIGINAL_FAILED = ("the original program", "the inputs function failed")  # the program worker's setup failures
COMPILE_LIMITED_SHARE = 1 / 3             # this share of the trials past the compile limit: compile-limited
COMPILE_TIMEOUT = TIMEOUT_MARK            # in a timeout trial's error: kforge.triton.bounded_compile's limit
# A search's stop reasons (kforge's engine, src/engine/experiment.cpp) that mean it measured every valid
# configuration of its space: hybrid (kforge's) proposes nothing unmeasured; random search, drawing the
# enumerated valid set without replacement, finishes only when it has drawn all of it.
EXHAUSTED_STOPS = ("no unmeasured configuration left", "strategy finished")
# A search's time of its winner this many times the final measurement's (same configuration, largest
# size) is host time the search's timer did not hide, not the kernel's (docs/tritonbench-g.md, 2026-12-07).
TIMER_APART = 1.5
WHY_CLASSES = ("original_failed", "gpu_fault", "wrong", "no_trial", "no_knob", "at_bound", "compile_limited",
               "knobs_without_effect", "original_best", "launch_bound", "space_exhausted", "search_too_short",
               "underused", "other")

# TritonForge's quartiles of the source length (output_triton_len): upper bounds of Q1..Q3, Q4 is above.
BUCKET_EDGES = (801, 1711, 2493)
BUCKETS = ("Q1", "Q2", "Q3", "Q4")
BUCKET_RANGES = {"Q1": "<= 801", "Q2": "802-1711", "Q3": "1712-2493", "Q4": "> 2493"}

# The reference row, as published; not measured here and not on the same GPU.
TRITONFORGE = {
    "source": "TritonForge, arXiv 2512.09196 (measured on an NVIDIA H100 with its own search budget)",
    "runnable": 131,
    "operators": 184,
    "success_rate_of_runnable": 0.427,    # improved by >= 1.05x
    "mean_speedup_of_successes": 1.76,
    "best_speedup": 5.0,
    "minutes_per_operator": 22,           # wall clock, LLM calls included
    "llm_rounds_per_operator": 3.2,
}

CSV_COLUMNS = ("op", "bucket", "source_len", "runnable", "category", "n_sizes", "searched", "has_final", "gpu",
               "kforge_speedup", "kforge_size_min", "kforge_size_median", "kforge_size_max", "kforge_correct",
               "kforge_trials", "kforge_search_gpu_s", "kforge_configuration", "random_speedup",
               "autotuned", "autotune_first_calls_s", "original_dram_pct", "original_sm_pct", "kforge_dram_pct",
               "kforge_sm_pct", "space_size",
               "why_not_improved")


class ReportError(Exception):
    """An input the report cannot use; the message names the file and the reason."""


# --- reading the inputs ------------------------------------------------------------------------------

def read_json(path: Path) -> Any:
    """The parsed JSON file at ``path``; ReportError if it is missing or not JSON."""
    try:
        text = path.read_text()
    except OSError as e:
        raise ReportError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}: malformed JSON: {e}") from None


def read_jsonl(path: Path) -> list[dict]:
    """One dict per non-blank line of ``path``; ReportError naming the line for anything else."""
    return [record for _, record in json_objects(str(path), ReportError)]


def load_dataset(data_dir: Path) -> dict[str, int]:
    """Operator name (the file's stem) -> source length (``output_triton_len``), from TritonBench_G_v1.json.

    The file is a JSON list of records; ``file`` is ``<op>.py`` and ``output_triton_len`` an integer
    (stored as a decimal string in the published file).
    """
    path = data_dir / "TritonBench_G_v1.json"
    if not data_dir.is_dir():
        raise ReportError(f"{data_dir}: the TritonBench-G data folder does not exist (--data)")
    records = read_json(path)
    if not isinstance(records, list):
        raise ReportError(f"{path}: expected a JSON list of operator records")
    lengths = {}
    for index, record in enumerate(records):
        try:
            op = Path(record["file"]).stem
            lengths[op] = int(record["output_triton_len"])
        except (TypeError, KeyError, ValueError):
            raise ReportError(f"{path}: record {index} lacks a 'file' name or an integer "
                              "'output_triton_len'") from None
    return dict(sorted(lengths.items()))


def bucket_of(source_len: int) -> str:
    """TritonForge's length quartile: Q1 <= 801 < Q2 <= 1711 < Q3 <= 2493 < Q4."""
    for name, edge in zip(BUCKETS, BUCKET_EDGES):
        if source_len <= edge:
            return name
    return BUCKETS[-1]


@dataclasses.dataclass
class Candidate:
    """One method's candidate in final.json: its times per harness size (None where it failed)."""
    configuration: dict | None
    ms: list[float | None]
    correct: bool
    errors: list[str]
    search_gpu_s: float | None
    trials: int | None
    # the search's best time (the search times the harness's largest size; final.json's
    # ``search_best_ms``); None where not recorded
    search_best_ms: float | None = None


@dataclasses.dataclass
class Final:
    """final.json: the interleaved measurement of the original and the candidates on every size."""
    sizes: list[str]
    original_ms: list[float | None]
    original_gbps: list[float | None]
    original_tflops: list[float | None]
    candidates: dict[str, Candidate]
    peak_gbps: float | None
    peak_tflops: float | None
    ops_at_once: int = 1    # how many operators' searches shared the GPU (timing exclusive by its lock)
    # whether the operator's kforge and random searches ran at the same time (final.json's
    # ``arms_together``, since 2026-12-07; before, one after the other)
    arms_together: bool = False
    # the lanes of the call that searched and measured the operator: one per GPU of the machine, each taking
    # one operator at a time, sharing the machine's cores and host memory (final.json's ``gpus_at_once``,
    # written since 2026-12-07 where there were several; absent: 1)
    gpus_at_once: int = 1
    # worker processes of each search on the GPU (final.json's ``workers_per_device``; the campaign's
    # first chunks, whose final.json lacks it, ran 2)
    workers_per_device: int = 2
    gpu: str | None = None  # the card the final measurement ran on (final.json's ``gpu``; older ones lack it)
    # the program whose call left the GPU unusable in the final measurement (final.json's
    # ``gpu_fault.program``, since 2026-12-07: measure.gpu_fault); None where none did
    gpu_fault_by: str | None = None
    # configurations each search evaluated first (final.json's ``start_configurations``, since 2026-12-07:
    # 1, the original's own; older runs started from the strategy's draws, 0)
    start_configurations: int = 0
    # whether the first start configuration is what the original runs (final.json's ``start_is_original``,
    # program_worker.start_is_original: no autotune or heuristic knob, every parameter's default the
    # source's or Triton's); None where not recorded (files older than the flag)
    start_is_original: bool | None = None
    # CUPTI metrics on the largest size (final.json's ``cupti``): program name -> {metric: value}; older
    # final.json files and runs where the profiler could not run have none.
    cupti: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    # Triton's autotuner in the original (final.json's ``autotune``, measured since 2026-12-06): the
    # seconds of the original's first call on every size (its autotuner benchmarking its list, with the
    # compiles); None where not recorded, or where it was taken after the checks had run (and tuned) the
    # original: final.json without ``autotune.first_calls_before_checks`` whose candidates were checked
    # (``autotune_first_calls_late``). (Its choices per kernel, ``autotune.kernels``, are for reading.)
    autotune_first_calls_s: float | None = None
    autotune_first_calls_late: bool = False
    # elements the original changed between its own calls in the final checks (final.json's
    # ``original.unstable_elements``, since 2026-12-06); None where not recorded
    original_unstable_elements: float | None = None
    # the bytes the search's timer rewrote to flush the L2 before each timed call (final.json's
    # ``search_timer.flush_bytes``, since 2026-12-07: do_bench's 256 MiB); None for the searches before,
    # whose flush was twice the L2
    search_flush_bytes: int | None = None

    def cupti_metric(self, program: str, metric: str) -> float | None:
        v = self.cupti.get(program, {}).get(metric)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def _number_list(value: Any, n: int, path: Path, what: str) -> list[float | None]:
    """``value`` as n numbers or nulls; a missing list is n nulls; ReportError for anything else."""
    if value is None:
        return [None] * n
    if not isinstance(value, list) or len(value) != n or \
            not all(x is None or isinstance(x, (int, float)) and not isinstance(x, bool) for x in value):
        raise ReportError(f"{path}: '{what}' must be a list of {n} numbers or nulls, one per size")
    return [None if x is None else float(x) for x in value]


def _optional_number(value: Any, path: Path, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ReportError(f"{path}: '{what}' must be a number")
    return float(value)


def _flag(data: dict, key: str, path: Path) -> bool:
    """final.json's boolean ``key`` (absent: False); ReportError for anything else."""
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise ReportError(f"{path}: '{key}' must be true or false")
    return value


def _whole(data: dict, key: str, default: int, least: int, path: Path) -> int:
    """final.json's integer ``key`` of at least ``least`` (absent: ``default``); ReportError otherwise."""
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        kind = "positive" if least == 1 else "non-negative"
        raise ReportError(f"{path}: '{key}' must be a {kind} integer")
    return value


def parse_final(data: Any, path: Path) -> Final:
    """final.json's content checked and typed; ReportError naming the field that does not fit."""
    if not isinstance(data, dict) or not isinstance(data.get("sizes"), list) or \
            not isinstance(data.get("original"), dict):
        raise ReportError(f"{path}: expected an object with 'sizes' (a list) and 'original' (an object)")
    n = len(data["sizes"])
    original = data["original"]
    candidates = {}
    for method, c in sorted((data.get("candidates") or {}).items()):
        if not isinstance(c, dict):
            raise ReportError(f"{path}: candidates.{method} must be an object")
        trials = c.get("trials")
        if trials is not None and (isinstance(trials, bool) or not isinstance(trials, int)):
            raise ReportError(f"{path}: candidates.{method}.trials must be an integer")
        candidates[method] = Candidate(
            configuration=c.get("configuration"),
            ms=_number_list(c.get("ms"), n, path, f"candidates.{method}.ms"),
            correct=c.get("correct") is True,
            errors=[str(e) for e in c.get("errors") or []],
            search_gpu_s=_optional_number(c.get("search_gpu_s"), path, f"candidates.{method}.search_gpu_s"),
            trials=trials,
            search_best_ms=_optional_number(c.get("search_best_ms"), path, f"candidates.{method}.search_best_ms"))
    peak = data.get("peak") or {}
    gpu = data.get("gpu")
    if gpu is not None and not isinstance(gpu, str):
        raise ReportError(f"{path}: 'gpu' must be a string (the card's name)")
    cupti = data.get("cupti") or {}
    if not isinstance(cupti, dict):
        raise ReportError(f"{path}: 'cupti' must be an object")
    cupti_programs = {name: {k: v for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
                      for name, values in cupti.items() if isinstance(values, dict) and "error" not in values}
    fault = data.get("gpu_fault")
    if fault is not None and not (isinstance(fault, dict) and isinstance(fault.get("program"), str)):
        raise ReportError(f"{path}: 'gpu_fault' must be an object with 'program' (a string)")
    autotune = data.get("autotune")
    autotune = {} if autotune is None else autotune
    if not isinstance(autotune, dict) or not isinstance(autotune.get("kernels", {}), dict):
        raise ReportError(f"{path}: 'autotune' must be an object with 'kernels' (an object)")
    timer = data.get("search_timer") or {}
    if not isinstance(timer, dict):
        raise ReportError(f"{path}: 'search_timer' must be an object")
    flush = _optional_number(timer.get("flush_bytes"), path, "search_timer.flush_bytes")
    first_calls = _optional_number(autotune.get("first_calls_s"), path, "autotune.first_calls_s")
    late = first_calls is not None and not _flag(autotune, "first_calls_before_checks", path) and \
        any(c.configuration is not None for c in candidates.values())
    return Final(ops_at_once=_whole(data, "ops_at_once", 1, 1, path), arms_together=_flag(data, "arms_together", path),
                 gpus_at_once=_whole(data, "gpus_at_once", 1, 1, path),
                 workers_per_device=_whole(data, "workers_per_device", 2, 1, path), gpu=gpu,
                 gpu_fault_by=fault["program"] if fault else None,
                 start_configurations=_whole(data, "start_configurations", 0, 0, path),
                 start_is_original=_flag(data, "start_is_original", path) if "start_is_original" in data else None,
                 cupti=cupti_programs,
                 search_flush_bytes=None if flush is None else int(flush),
                 autotune_first_calls_s=None if late else first_calls, autotune_first_calls_late=late,
                 original_unstable_elements=_optional_number(original.get("unstable_elements"), path,
                                                             "original.unstable_elements"),
                 sizes=[str(s) for s in data["sizes"]],
                 original_ms=_number_list(original.get("ms"), n, path, "original.ms"),
                 original_gbps=_number_list(original.get("gbps"), n, path, "original.gbps"),
                 original_tflops=_number_list(original.get("tflops"), n, path, "original.tflops"),
                 candidates=candidates,
                 peak_gbps=_optional_number(peak.get("gbps"), path, "peak.gbps"),
                 peak_tflops=_optional_number(peak.get("tflops"), path, "peak.tflops"))


@dataclasses.dataclass
class Operator:
    """Everything the campaign holds on one operator of the data."""
    op: str
    source_len: int
    bucket: str
    tried: bool                               # in runnable.jsonl
    runnable: bool
    category: str                             # runnable.jsonl's category, or "not_tried"
    reason: str
    harness_sizes: int | None                 # runnable.jsonl's count of harness sizes
    trials: dict[str, list[dict] | None]      # kforge/random trials; None where the file is missing
    final: Final | None
    # the original's source has @triton.autotune (kernels/<op>.py of the data): its "original" is then
    # Triton's autotuner over the operator's own list, the baseline of item 6
    autotuned: bool = False
    # set-aside.jsonl's records of it: searched but set aside without a verdict (out of GPU memory alone
    # on a card with so many workers; accept drops them once a final.json is committed)
    set_aside: list[dict] = dataclasses.field(default_factory=list)
    # each search's stop reason from runs/<op>/search.log (read_stops): method -> reason
    stops: dict[str, str] = dataclasses.field(default_factory=dict)
    # configurations in the space the importer makes of it now (space_size); None without its source
    space_size: int | None = None
    # the searches' start configurations are ones the original itself runs (starts_are_own)
    starts_are_own: bool = False
    # the original's launch as a configuration of the importer's space now (original_configuration); None
    # where an autotune list or a heuristic decides a value, without its source, or where it does not parse
    original_configuration: dict | None = None
    # the importer's space has an autotune or heuristic knob (its list or table gives the original's value)
    list_knobs: bool = False
    # redo.jsonl's record of it: marked to be searched again (a fault fixed since its search); its runs
    # count until a new search replaces them (accept moves them to superseded/)
    redo: dict | None = None

    @property
    def searched(self) -> bool:
        """kforge searched it: runs/<op>/kforge.jsonl or runs/<op>/final.json exists."""
        return self.trials["kforge"] is not None or self.final is not None

    def exhausted(self, method: str) -> bool:
        """The method's search measured every valid configuration of its space within its budget."""
        return self.stops.get(method) in EXHAUSTED_STOPS

    @property
    def n_sizes(self) -> int | None:
        return len(self.final.sizes) if self.final else self.harness_sizes

    @property
    def gpu(self) -> str | None:
        """The card this operator's runs were on: final.json's ``gpu``, else the kforge trials' ``device``
        (e.g. "cuda:0 NVIDIA H200" gives "NVIDIA H200"); None where neither names one."""
        if self.final and self.final.gpu:
            return self.final.gpu
        for t in self.trials.get("kforge") or []:
            device = t.get("device")
            if isinstance(device, str) and device:
                return device.split(" ", 1)[1] if device.startswith("cuda:") and " " in device else device
        return None


def read_runnable(campaign: Path) -> dict[str, dict]:
    """runnable.jsonl by operator; ReportError for a missing file or a line without ``op``/``runnable``."""
    path = campaign / "runnable.jsonl"
    by_op = {}
    for record in read_jsonl(path):
        if not isinstance(record.get("op"), str) or not isinstance(record.get("runnable"), bool):
            raise ReportError(f"{path}: every line needs 'op' (a string) and 'runnable' (true or false); "
                              f"got {json.dumps(record, sort_keys=True)[:200]}")
        by_op[record["op"]] = record
    return by_op


def read_trials(run_dir: Path, method: str) -> list[dict] | None:
    """The trials of runs/<op>/<method>.jsonl, by sequence; None when the file is missing."""
    path = run_dir / f"{method}.jsonl"
    if not path.exists():
        return None
    trials = read_jsonl(path)
    for t in trials:
        if not isinstance(t.get("status"), str):
            raise ReportError(f"{path}: trial {t.get('sequence', '?')} has no 'status'")
    return sorted(trials, key=lambda t: t.get("sequence", 0))


AUTOTUNE_DECORATOR = re.compile(r"^\s*@triton\.autotune\b", re.MULTILINE)


def read_stops(run_dir: Path) -> dict[str, str]:
    """{method: why its search stopped} from the search script's log (runs/<op>/search.log): each search's
    output follows its line "kforge run: <method> | ...", and kforge prints "stopped: <reason> after N
    trials; ..."; a search without such a line (none ran, or it failed) is absent."""
    path = run_dir / "search.log"
    if not path.exists():
        return {}
    stops: dict[str, str] = {}
    method = None
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("kforge run: ") and " | " in line:
            method = line[len("kforge run: "):].split(" | ", 1)[0]
        elif line.startswith("stopped: ") and method in METHODS and method not in stops:
            stops[method] = line[len("stopped: "):].split(" after ", 1)[0]
    return stops


def kernel_text(kernels: Path | None, op: str) -> str | None:
    """The data's kernels/<op>.py, whole; None without the folder or the file."""
    path = kernels / f"{op}.py" if kernels else None
    if path is None or not path.is_file():
        return None
    return path.read_text(encoding="utf-8", errors="replace")


def importer_knobs(text: str | None, perf_text: str | None = None, op: str = "") -> tuple[str, list[dict]] | None:
    """An operator's source (``kernel_text``) cut at its test block, and the parameters the importer makes
    of it now (importer.operator_parameters, with its harness ``perf_text`` where given: a wrapper
    parameter's default the harness passes is no knob): parsed once for space_size and starts_are_own.
    None without the source or where it does not parse."""
    from kforge.triton.program_worker import knobs_as_parameters
    from kforge.tritonbench_g.importer import operator_parameters
    if text is None:
        return None
    try:
        source = cut_source(text)
        if perf_text is None:
            return source, knobs_as_parameters(source)
        return source, operator_parameters(source, perf_text, op)
    except (source_ops.SourceOpError, SyntaxError, ValueError):
        return None


def space_size(knobs: tuple[str, list[dict]] | None) -> int | None:
    """How many configurations the importer's space of an operator (``importer_knobs``) holds: the product
    of its knobs' value counts (the spaces have no constraints; 1 without a knob). As the importer makes it
    now: the searches of early operators may have had another (docs/tritonbench-g.md's dated sections).
    None without the source or where it does not parse."""
    return None if knobs is None else math.prod(len(p["values"]) for p in knobs[1])


def starts_are_own(knobs: tuple[str, list[dict]] | None) -> bool:
    """Whether the searches' start configurations of an operator (``importer_knobs``) are ones its original
    itself runs: every knob has the original's value as its default (a launch option the source computes
    has ``source_ops.AS_WRITTEN``; before 2026-12-08 it had none, and a start set it to its first value),
    and no ``@triton.autotune`` has arguments beside
    its list and key (``prune_configs_by``, ``reset_to_zero``, ``restore_value``, hooks: a list entry
    pinned by source_ops.apply_config, which removes the decorator, runs without them). False without the
    source or where it does not parse."""
    if knobs is None:
        return False
    source, parameters = knobs
    kernels = {p["knob"]["autotune"] for p in parameters if "autotune" in p["knob"]}
    try:
        return all("default" in p for p in parameters) and \
            not any(source_ops.autotune_to_space(source, k)["extras"] for k in kernels)
    except (source_ops.SourceOpError, SyntaxError, ValueError):
        return False


# Upper edges of the space-size classes the coverage lines count (the last class is above).
SPACE_EDGES = (25, 125, 1000, 100_000)


def space_band(n: int, edges: tuple[int, ...]) -> int:
    """The index of the class of `edges` (upper edges, ascending; the last class is above) that holds n."""
    return next((i for i, edge in enumerate(edges) if n <= edge), len(edges))


def band_names(edges: tuple[int, ...]) -> list[str]:
    """'<= a', 'a+1-b', ..., '> z': the names of the classes of `edges`."""
    return [f"<= {edges[0]:,}"] + [f"{lo + 1:,}-{hi:,}" for lo, hi in zip(edges, edges[1:])] + [f"> {edges[-1]:,}"]


def space_classes(sizes: list[int | None]) -> str:
    """'<= 25: a, 26-125: b, ...' over the sizes known."""
    counts = [0] * (len(SPACE_EDGES) + 1)
    for n in sizes:
        if n is not None:
            counts[space_band(n, SPACE_EDGES)] += 1
    return ", ".join(f"{name}: {c}" for name, c in zip(band_names(SPACE_EDGES), counts))


def original_configuration(knobs: tuple[str, list[dict]] | None, autotuned: bool) -> dict | None:
    """The original's launch as a configuration of the importer's space of an operator (``importer_knobs``):
    every parameter at its default, where each default is the original's value: a value the source writes
    or Triton implies, or the entry of an ``@triton.autotune`` list that chooses nothing (not
    ``autotuned``: one configuration, or copies of one). None where an autotuner or a heuristic decides a
    value, a parameter has no default, without the source or where it does not parse."""
    if knobs is None or autotuned:
        return None
    parameters = knobs[1]
    if any("default" not in p or "heuristic" in p["knob"] for p in parameters):
        return None
    return {p["name"]: p["default"] for p in parameters}


def has_autotune(text: str | None) -> bool:
    """Whether an operator's source (``kernel_text``) has Triton's autotuner choose: a kernel decorated
    with @triton.autotune over two or more different configurations (a list of one, or of copies of one,
    as in chunk_gla_simple and quant_transpose_kernel, chooses nothing). A list the source operators
    cannot read (matmul_triton_autotune builds it in a function) counts as choosing. False without the
    source."""
    if text is None or not AUTOTUNE_DECORATOR.search(text):
        return False
    try:
        knobs = source_ops.find_knobs(cut_source(text))
    except (source_ops.SourceOpError, SyntaxError, ValueError):  # the source does not parse: the decorator is there
        return True
    return any(k["kind"] == "autotune" and ("error" in k or len({json.dumps(v) for v in k.get("values", [])}) > 1)
               for k in knobs)


def load_campaign(campaign: Path, lengths: dict[str, int],
                  kernels: Path | None = None) -> tuple[list[Operator], list[str]]:
    """The data's operators with what the campaign holds on them, sorted by name, and the names the
    campaign mentions that are not in the data (left out of every number). ``kernels``: the data's
    kernels/ folder, read for which originals carry @triton.autotune."""
    if not campaign.is_dir():
        raise ReportError(f"{campaign}: the campaign folder does not exist")
    runnable = read_runnable(campaign)
    set_aside: dict[str, list[dict]] = {}
    if (campaign / "set-aside.jsonl").exists():
        for record in read_jsonl(campaign / "set-aside.jsonl"):
            set_aside.setdefault(record["op"], []).append(record)
    try:
        redo = {r["op"]: r for r in read_redo(str(campaign / REDO))}
    except RedoError as e:
        raise ReportError(str(e)) from None
    runs = campaign / "runs"
    run_names = {p.name for p in runs.iterdir() if p.is_dir()} if runs.is_dir() else set()
    operators = []
    for op, source_len in sorted(lengths.items()):
        record = runnable.get(op)
        run_dir = runs / op
        final_path = run_dir / "final.json"
        text = kernel_text(kernels, op)
        perf = kernels.parent / "perf" / f"{op}_perf.py" if kernels else None
        knobs = importer_knobs(text, perf.read_text(encoding="utf-8", errors="replace")
                               if perf and perf.is_file() else None, op)
        operators.append(Operator(
            op=op, source_len=source_len, bucket=bucket_of(source_len),
            tried=record is not None,
            runnable=bool(record and record["runnable"]),
            category=str(record.get("category", "")) if record else "not_tried",
            reason=str(record.get("reason", "")) if record else "",
            harness_sizes=record.get("sizes") if record and isinstance(record.get("sizes"), int) else None,
            trials={m: read_trials(run_dir, m) for m in METHODS},
            final=parse_final(read_json(final_path), final_path) if final_path.exists() else None,
            autotuned=has_autotune(text),
            set_aside=set_aside.get(op, []), stops=read_stops(run_dir), space_size=space_size(knobs),
            starts_are_own=starts_are_own(knobs),
            original_configuration=original_configuration(knobs, has_autotune(text)), redo=redo.get(op),
            list_knobs=knobs is not None and any({"autotune", "heuristic"} & set(p["knob"]) for p in knobs[1])))
    unknown = sorted((set(runnable) | run_names | set(redo)) - set(lengths))
    return operators, unknown


# --- speed-ups and classes -----------------------------------------------------------------------------

@dataclasses.dataclass
class Outcome:
    """A method's result on one operator. ``speedup`` is None for a failure (missing, incorrect, or
    without a time on some size); ``per_size`` holds original/candidate where both times exist."""
    present: bool
    correct: bool
    speedup: float | None
    per_size: list[float]
    search_gpu_s: float | None
    trials: int | None
    configuration: dict | None

    @property
    def success(self) -> bool:
        return self.speedup is not None and self.speedup >= SUCCESS_SPEEDUP

    @property
    def counted(self) -> float:
        """The speed-up the aggregates use: a failure counts 1.0, and so does a correct candidate slower
        than the original (the original would be kept)."""
        return 1.0 if self.speedup is None else max(1.0, self.speedup)


def tritonbench_speedup(original_ms: list[float | None], candidate_ms: list[float | None]) -> float | None:
    """Sum of the original's times over the sizes / sum of the candidate's; None unless every size has both."""
    if not original_ms or any(o is None or c is None for o, c in zip(original_ms, candidate_ms)):
        return None
    total = sum(candidate_ms)
    return sum(original_ms) / total if total > 0 else None


def search_seconds(trials: list[dict] | None) -> float | None:
    """The last trial's clock_s: the search's length where final.json does not give search_gpu_s."""
    clocks = [t["clock_s"] for t in trials or [] if isinstance(t.get("clock_s"), (int, float))]
    return float(max(clocks)) if clocks else None


def outcome(operator: Operator, method: str) -> Outcome:
    """``method``'s result on ``operator``, from final.json (and the trials where it lacks counts)."""
    trials = operator.trials.get(method)
    candidate = operator.final.candidates.get(method) if operator.final else None
    n_trials = len(trials) if trials is not None else (candidate.trials if candidate else None)
    gpu_s = candidate.search_gpu_s if candidate and candidate.search_gpu_s is not None else search_seconds(trials)
    if candidate is None:
        return Outcome(False, False, None, [], gpu_s, n_trials, None)
    original = operator.final.original_ms
    per_size = [o / c for o, c in zip(original, candidate.ms) if o is not None and c]
    speedup = tritonbench_speedup(original, candidate.ms) if candidate.correct else None
    return Outcome(True, candidate.correct, speedup, per_size, gpu_s, n_trials, candidate.configuration)


def distinct_configurations(trials: Iterable[dict]) -> int:
    """How many different configurations the trials tried."""
    return len({json.dumps(t.get("configuration"), sort_keys=True) for t in trials})


def original_cupti(final: Final) -> list[float]:
    """CUPTI's DRAM and SM throughput (% of peak) of the original on the largest size, those measured."""
    return [v for v in (final.cupti_metric("original", m) for m in (CUPTI_DRAM, CUPTI_SM)) if v is not None]


def original_at_bound(final: Final) -> bool:
    """Where CUPTI measured the original (largest size, the size that weighs most in TritonBench's sum):
    its DRAM or SM throughput (either that was measured) at AT_BOUND_CUPTI_PCT of peak or more.
    Otherwise the harness's own rates: its best size at AT_BOUND_GBPS of the copy bandwidth or
    AT_BOUND_TFLOPS of the fp16 peak. The measurement decides where there is one: the harness's GB/s are
    a formula of bytes it assumes moved (context_attn_fwd's claims 3,830 GB/s on an H100, whose HBM3 peak
    is 3,350; CUPTI: DRAM 0.2%)."""
    measured = original_cupti(final)
    if measured:
        return max(measured) >= AT_BOUND_CUPTI_PCT

    def best_fraction(values: list[float | None], peak: float | None) -> float:
        numbers = [v for v in values if v is not None]
        return max(numbers) / peak if numbers and peak else 0.0
    return (best_fraction(final.original_gbps, final.peak_gbps) >= AT_BOUND_GBPS or
            best_fraction(final.original_tflops, final.peak_tflops) >= AT_BOUND_TFLOPS)


def original_underused(final: Final) -> bool:
    """CUPTI measured the original's DRAM and SM throughput both below UNDERUSED_CUPTI_PCT of peak on the
    largest size: the GPU mostly waits (too few blocks, a sequential recurrence, latency)."""
    measured = original_cupti(final)
    return len(measured) == 2 and max(measured) < UNDERUSED_CUPTI_PCT


def timed_ok(trial: dict) -> bool:
    """An ok trial that has a time."""
    return trial["status"] == "ok" and isinstance(trial.get("time_ms"), (int, float)) and trial["time_ms"] > 0


def ok_times(trials: list[dict]) -> list[tuple[float, float]]:
    """(time_ms, clock_s) of the ok trials that have a time."""
    return [(float(t["time_ms"]), float(t.get("clock_s") or 0.0)) for t in trials if timed_ok(t)]


def compile_timeouts(trials: list[dict]) -> int:
    """Trials whose candidate's compile outlasted the program evaluator's compile limit."""
    return sum(1 for t in trials if t["status"] == "timeout" and COMPILE_TIMEOUT in (t.get("error") or ""))


def search_timer_ratio(operator: Operator) -> float | None:
    """kforge's winner's best time in its search over its final time on the largest size (the size the
    search times); None where either is missing."""
    c = operator.final.candidates.get("kforge") if operator.final else None
    if c is None or c.search_best_ms is None or not c.ms or c.ms[-1] is None or c.ms[-1] <= 0:
        return None
    return c.search_best_ms / c.ms[-1]


def own_configuration_wrong(operator: Operator) -> bool:
    """A trial of one of the original's own configurations was wrong against the reference, in either
    arm: each of an ``@triton.autotune`` original's list entries (the searches' first
    ``start_configurations`` trials), or the original's configuration itself where the start is it; only
    where those starts are exactly what the original runs (``starts_are_own``). Such
    an original's output depends on which of its own configurations runs (its autotuner picks one per
    size by speed, in each process anew), so its reference is not the original's output but one of them
    (layer_norm_welfold, 2026-12-07: RBLOCK 2048 of its list sums masked lanes into the variance where
    D = 1024, and two workers' references disagreed in 14,685 of 16,384 elements)."""
    final = operator.final
    if final is None or not final.start_configurations or not operator.starts_are_own:
        return False
    own = final.start_configurations if operator.autotuned else 1 if final.start_is_original else 0
    return any(isinstance(t.get("sequence"), int) and t["sequence"] < own and t["status"] == "wrong_result"
               for arm in ("kforge", "random") for t in operator.trials.get(arm) or [])


def why_not_improved(operator: Operator, kforge: Outcome) -> str | None:
    """The class of a runnable, searched operator whose kforge candidate is not a success (None otherwise),
    the first that applies in WHY_CLASSES' order:

    - ``original_failed``: every kforge trial failed in the worker's setup: the original does not run at
      the search's sizes, or does not reproduce itself (a race, reads of memory it does not own):
      nothing can be checked against it; or the final measurement has no time of the original on some
      size, and no candidate's call left the GPU unusable (the original failed there, or faulted it); or
      kforge's candidate was incorrect and one of the original's own configurations was wrong against its
      reference too (own_configuration_wrong): the reference is not the original's output, but one of them;
    - ``gpu_fault``: the random search's candidate left the GPU unusable in the final measurement
      (measure.abandoned) before kforge's candidate was measured on every size: no verdict on kforge;
    - ``wrong``: final.json has a kforge candidate that is incorrect or has no time on some size (a
      kforge candidate that faulted the GPU included);
    - ``no_trial``: kforge.jsonl holds no trial: the search's budget ended before any finished (its
      set-up, the workers' start and the original's reference runs, took most of it);
    - ``no_knob``: at most one distinct configuration tried (from kforge.jsonl; without it, final.json's
      trial count, and an operator with neither counts zero);
    - ``at_bound``: CUPTI's DRAM or SM throughput of the original on the largest size is 80% of peak or
      more; where CUPTI has no measurement of it, the original's best size reaches 80% of the copy
      bandwidth or 60% of the fp16 peak by the harness's rates;
    - ``compile_limited``: a third or more of the trials were candidates whose compile outlasted the
      program evaluator's ``compile_timeout_s`` (the knobs' large values cost the search its time);
    - ``knobs_without_effect``: at least two ok trials and slowest / fastest < 1.05;
    - ``original_best``: the search started from the original's configuration (final.json's
      ``start_configurations`` and ``start_is_original``: not for an ``@triton.autotune`` original, whose
      start is its list's first entry, nor for a launch option the source computes) and its fastest ok
      trial is that one: nothing faster was found;
    - ``launch_bound``: kforge's winner took more than TIMER_APART times as long in its search as in the
      final measurement (same configuration, largest size): the search's timer measured the host's
      launch of the call, not its kernels, and ranked that (search_timer_ratio);
    - ``space_exhausted``: the search measured every valid configuration of its space within its budget
      (its stop reason, EXHAUSTED_STOPS) and none is a success: the knobs hold nothing faster, so more
      search cannot help (only new knobs or a rewrite can);
    - ``search_too_short``: the fastest ok trial finished in the last 25% of the search's clock;
    - ``underused``: CUPTI's DRAM and SM throughput of the original both below 20% of peak: the kernel
      leaves the GPU mostly idle and its knobs did not change that (more parallelism is a rewrite's job);
    - ``other``: none of these.
    """
    if not (operator.runnable and operator.searched) or kforge.success:
        return None
    trials = operator.trials["kforge"]
    fault_by = operator.final.gpu_fault_by if operator.final else None
    if trials and all((t.get("error") or "").startswith(ORIGINAL_FAILED) for t in trials) or \
            operator.final and fault_by in (None, "original") and any(ms is None for ms in operator.final.original_ms):
        return "original_failed"
    if fault_by == "random" and kforge.speedup is None:
        return "gpu_fault"
    if kforge.present and kforge.speedup is None:
        return "original_failed" if own_configuration_wrong(operator) else "wrong"
    if trials == []:
        return "no_trial"
    tried = distinct_configurations(trials) if trials is not None else (kforge.trials or 0)
    if tried <= 1:
        return "no_knob"
    if operator.final and original_at_bound(operator.final):
        return "at_bound"
    if trials and compile_timeouts(trials) >= COMPILE_LIMITED_SHARE * len(trials):
        return "compile_limited"
    times = ok_times(trials or [])
    if len(times) >= 2 and max(t for t, _ in times) / min(t for t, _ in times) < NO_EFFECT_SPAN:
        return "knobs_without_effect"
    if operator.final and operator.final.start_is_original and operator.final.start_configurations and trials \
            and not operator.autotuned:
        fastest = min(filter(timed_ok, trials), key=lambda t: t["time_ms"], default=None)
        if fastest is not None and isinstance(fastest.get("sequence"), int) \
                and fastest["sequence"] < operator.final.start_configurations:
            return "original_best"
    ratio = search_timer_ratio(operator)
    if ratio is not None and ratio > TIMER_APART:
        return "launch_bound"
    if operator.exhausted("kforge"):
        return "space_exhausted"
    end = search_seconds(trials)
    if times and end:
        best_clock = min(times)[1]
        if best_clock >= LATE_FRACTION * end:
            return "search_too_short"
    if operator.final and original_underused(operator.final):
        return "underused"
    return "other"


# --- aggregates ----------------------------------------------------------------------------------------

@dataclasses.dataclass
class Headline:
    """One row of a headline table: a method's numbers over a population of operators."""
    method: str
    operators: int          # the data's operators in scope (184 over all)
    tried: int
    runnable: int
    population: int         # the operators this method's rates are over
    successes: int
    mean_success: float | None
    geomean: float | None
    best: float | None
    median_gpu_s: float | None
    total_gpu_s: float | None


def population(operators: list[Operator]) -> list[Operator]:
    """The operators a method is judged on: runnable and searched by kforge."""
    return [o for o in operators if o.runnable and o.searched]


def geometric_mean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def headline(operators: list[Operator], method: str) -> Headline:
    """``method``'s headline numbers over ``operators`` (all of the data, or one length bucket)."""
    judged = population(operators)
    outcomes = [outcome(o, method) for o in judged]
    wins = [x.speedup for x in outcomes if x.success]
    gpu = [x.search_gpu_s for x in outcomes if x.search_gpu_s is not None]
    counted = [x.counted for x in outcomes]
    return Headline(
        method=method, operators=len(operators), tried=sum(o.tried for o in operators),
        runnable=sum(o.runnable for o in operators),
        population=len(judged), successes=len(wins),
        mean_success=statistics.fmean(wins) if wins else None,
        geomean=geometric_mean(counted), best=max(counted) if counted else None,
        median_gpu_s=statistics.median(gpu) if gpu else None,
        total_gpu_s=sum(gpu) if gpu else None)


def autotune_row(operators: list[Operator]) -> Headline | None:
    """kforge against Triton's autotuner (item 6): kforge's numbers over the judged operators whose
    original carries @triton.autotune, whose original is the autotuner over the operator's own list, per
    size; None where no judged operator has one."""
    autotuned = [o for o in operators if o.autotuned]
    h = headline(autotuned, "kforge")
    if h.population == 0:
        return None
    return dataclasses.replace(h, method=AUTOTUNE_ROW)  # its counts are of the autotuned operators


AUTOTUNE_ROW = "kforge vs Triton's autotuner (@triton.autotune originals)"


def autotune_lines(operators: list[Operator]) -> list[str]:
    """What the autotuner itself cost, where final.json recorded it."""
    judged = [o for o in population(operators) if o.autotuned]
    if not judged:
        return []
    seconds = [o.final.autotune_first_calls_s for o in judged if o.final and o.final.autotune_first_calls_s is not None]
    late = sum(1 for o in judged if o.final and o.final.autotune_first_calls_late)
    cost = (f" The autotuner's own cost, the original's first call on every size (benchmarking its list, "
            f"with the compiles): median {statistics.median(seconds):.1f} s over {len(seconds)} of them."
            if seconds else " Its own tuning time was not recorded for these.")
    if late:
        cost += (f" Not counted: {late} whose final measurement took those calls after its checks had run, and "
                 "tuned, the original (until 2026-12-07; 0.001-0.004 s).")
    verb = "carries" if len(judged) == 1 else "carry"
    return [f"Triton's autotuner: {len(judged)} of the judged operators {verb} `@triton.autotune`; their "
            "original, the baseline of every row, is the autotuner over the operator's own list (choosing "
            "per size), so the row above is kforge (one configuration for all sizes) against it." + cost, ""]


# --- formatting ----------------------------------------------------------------------------------------

def fmt_x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def fmt_pct(part: int, whole: int) -> str:
    return "-" if whole == 0 else f"{part} ({100.0 * part / whole:.1f}%)"


def fmt_s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def fmt_num(value: float | None, digits: int = 4) -> str:
    return "" if value is None else f"{value:.{digits}f}"


HEADLINE_HEADER = ("method", "runnable / tried / all", "judged on", "successes (of judged)",
                   "successes (of all)", "mean speed-up of successes", "geomean (judged)", "best",
                   "median GPU s / op", "total GPU s")


def headline_cells(h: Headline) -> list[str]:
    return [h.method, f"{h.runnable} / {h.tried} / {h.operators}", str(h.population),
            fmt_pct(h.successes, h.population), fmt_pct(h.successes, h.operators), fmt_x(h.mean_success),
            fmt_x(h.geomean), fmt_x(h.best), fmt_s(h.median_gpu_s), fmt_s(h.total_gpu_s)]


def tritonforge_cells() -> list[str]:
    """The TritonForge row; its share of all 184 is derived (successes = 42.7% of 131, rounded)."""
    tf = TRITONFORGE
    wins = round(tf["success_rate_of_runnable"] * tf["runnable"])
    return ["TritonForge (H100, published)", f"{tf['runnable']} / {tf['operators']} / {tf['operators']}",
            str(tf["runnable"]), f"{wins} ({100.0 * tf['success_rate_of_runnable']:.1f}%)",
            fmt_pct(wins, tf["operators"]) + " (derived)", fmt_x(tf["mean_speedup_of_successes"]), "-",
            fmt_x(tf["best_speedup"]), f"~{60 * tf['minutes_per_operator']} (wall, LLM incl.)", "-"]


def markdown_table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


# --- the report ----------------------------------------------------------------------------------------

@dataclasses.dataclass
class Paths:
    """The output files, all beside the Markdown report."""
    markdown: Path

    def beside(self, suffix: str) -> Path:
        return self.markdown.with_name(self.markdown.stem + suffix)

    @property
    def csv(self) -> Path:
        return self.beside(".csv")

    @property
    def speedups_png(self) -> Path:
        return self.beside("-speedups.png")

    @property
    def scatter_png(self) -> Path:
        return self.beside("-speedup-vs-gpu-s.png")


NOT_RUN = "setup.knob_not_run."


def knobs_not_run(operator: Operator) -> tuple[int, list[str]] | None:
    """(the launch and literal knob sites the search's worker judged, those whose code never ran in the
    original's reference calls at the search's sizes) from the first trials' setup metrics
    (program_worker.knobs_not_run, since 2026-12-08); None for runs older than that."""
    for arm in METHODS:
        for t in operator.trials.get(arm) or []:
            metrics = t.get("metrics") or {}
            if "setup.knob_sites" in metrics:
                return int(metrics["setup.knob_sites"]), sorted(k[len(NOT_RUN):] for k in metrics
                                                                  if k.startswith(NOT_RUN))
    return None


def not_run_lines(searched: list[Operator]) -> list[str]:
    """How many searched operators had knobs whose code the original never ran at the search's sizes (a
    branch its inputs never take: the importer's static reading keeps them), and which."""
    traced = [(o, knobs_not_run(o)) for o in searched]
    traced = [(o, t) for o, t in traced if t is not None]
    if not traced:
        return []
    idle = [(o, t[1]) for o, t in traced if t[1]]
    return [f"- Knobs whose code never ran in the original's reference calls at the search's sizes (the worker's "
            f"trace): {len(idle)} of the {len(traced)} operators searched with the trace, "
            f"{sum(len(n) for _, n in idle)} of {sum(t[0] for _, t in traced)} launch and literal knobs"
            + (": " + "; ".join(f"{o.op} ({', '.join(n)})" for o, n in idle) if idle else "") + "."]


def coverage_lines(operators: list[Operator], unknown: list[str]) -> list[str]:
    """How far the campaign got: tried, runnable by category, searched, measured."""
    runnable = [o for o in operators if o.runnable]
    categories: dict[str, int] = {}
    for o in operators:
        categories[o.category] = categories.get(o.category, 0) + 1
    lines = [f"- TritonBench-G operators: {len(operators)}; tried by the runnable filter: "
             f"{sum(o.tried for o in operators)}; runnable: {len(runnable)}.",
             "- By category: " + ", ".join(f"{c} {n}" for c, n in sorted(categories.items())) + ".",
             f"- Runnable operators with a kforge run (kforge.jsonl or final.json): "
             f"{sum(o.searched for o in runnable)}; with final.json: {sum(o.final is not None for o in runnable)}; "
             f"with random.jsonl: {sum(o.trials['random'] is not None for o in runnable)}."]
    if any(o.space_size is not None for o in runnable):
        judged = [o for o in runnable if o.searched]
        counts = sorted(distinct_configurations(o.trials["kforge"]) for o in judged
                        if any(map(timed_ok, o.trials["kforge"] or [])))
        tried = f"; kforge's searches with a correct trial tried {statistics.median(counts):g} configurations " \
                f"(median; quartiles " \
                f"{counts[len(counts) // 4]} and {counts[3 * len(counts) // 4]})" if counts else ""
        lines.append("- Configurations in the search space (the importer's knobs as it makes them now, the product "
                     f"of their value counts{tried}): runnable {space_classes([o.space_size for o in runnable])}; "
                     f"judged {space_classes([o.space_size for o in judged])}.")
    lines += start_lines([o for o in runnable if o.final is not None])
    lines += not_run_lines([o for o in runnable if o.searched])
    again = [o for o in runnable if o.redo is not None]
    if again:
        by_reason: dict[str, list[str]] = {}
        for o in again:
            by_reason.setdefault(str(o.redo.get("reason", "")) or "no reason given", []).append(o.op)
        lines.append(f"- Marked to be searched again (redo.jsonl; their runs count until a new search replaces "
                     f"them): {len(again)}: " + "; ".join(f"{', '.join(ops)} ({reason})"
                                                          for reason, ops in by_reason.items()) + ".")
    aside = [o for o in runnable if o.set_aside and o.final is None]
    if aside:
        why = {"out_of_memory": "out of memory", "measure_timeout": "final measurement past its limit"}
        reasons = frozenset(r.get("reason") for o in aside for r in o.set_aside)

        def where(o: Operator) -> str:
            return "; ".join(sorted({f"{r['gpu']}, {r['workers']} workers"
                                     + (f": {why.get(r.get('reason'), r.get('reason'))}" if len(reasons) > 1 else "")
                                     for r in o.set_aside}))
        said = {frozenset({"out_of_memory"}): "out of GPU memory alone",
                frozenset({"measure_timeout"}): "a final measurement past its time limit"}.get(
            reasons, "out of GPU memory alone, or a final measurement past its time limit")
        lines.append(f"- Set aside without a verdict ({said}; not in the rates, searched again after the other "
                     f"operators): {len(aside)}: " + ", ".join(f"{o.op} ({where(o)})" for o in aside) + ".")
    odd = [o.op for o in operators if o.searched and not o.runnable]
    if odd:
        lines.append(f"- Searched but not runnable (left out of the rates): {', '.join(odd)}.")
    if unknown:
        lines.append(f"- In the campaign but not in TritonBench_G_v1.json (ignored): {', '.join(unknown)}.")
    return lines


def start_kind(operator: Operator) -> str:
    """Where an operator's searches started: ``none`` (no ``start:`` in its final.json: searched before
    starts existed, 2026-12-07), ``autotune`` (an autotuned original: its list's entries), ``original``
    (the first trial was the original's launch: final.json's ``start_is_original``, or, in files older
    than that flag, the first trial's configuration is ``original_configuration``), ``unknown`` (neither
    the flag nor a first trial says: no trial of sequence 0, or one whose knobs are not the importer's
    now) or ``elsewhere`` (a
    knob without the original's value as its default started at its first value: a launch option the
    source computes, or a launch keyword beside the literal it names; the importer's faults fixed on
    2026-12-08)."""
    final = operator.final
    if final is None or not final.start_configurations:
        return "none"
    if operator.autotuned:
        return "autotune"
    if final.start_is_original or (final.start_is_original is False and not operator.list_knobs):
        return "original" if final.start_is_original else "elsewhere"
    # The flag is absent, or false for an original whose autotune list chooses nothing (the flag is false
    # wherever an autotune knob is): the first trial decides.
    first = next((t for arm in METHODS for t in operator.trials.get(arm) or [] if t.get("sequence") == 0), None)
    if first is None:
        return "unknown"
    # Older than the flag: the first trial against the original's configuration as the importer makes it
    # now. Knob names follow the importer of the search's day (a suffix counts same-named knobs before
    # it), so only the same set of names compares; another set says the importer changed since.
    configuration = first.get("configuration") or {}
    original = operator.original_configuration
    if original is None or set(configuration) != set(original):
        return "unknown"
    return "original" if configuration == original else "elsewhere"


def start_lines(judged: list[Operator]) -> list[str]:
    """How many judged operators' searches started from the original's own configuration, and which
    started elsewhere (their verdicts stand as measured; a search from the original cannot end slower
    than it)."""
    if not judged:
        return []
    kinds = {k: [o for o in judged if start_kind(o) == k]
             for k in ("original", "autotune", "elsewhere", "none", "unknown")}
    elsewhere = ", ".join(f"{o.op} ({fmt_x(outcome(o, 'kforge').speedup)})" for o in kinds["elsewhere"])
    return [f"- Where the {len(judged)} judged operators' searches started (final.json, the first trial): the "
            f"original's launch "
            f"{len(kinds['original'])}; the entries of its @triton.autotune list {len(kinds['autotune'])}; "
            f"before start configurations existed {len(kinds['none'])}"
            + (f" ({', '.join(o.op for o in kinds['none'])})" if kinds["none"] else "")
            + f"; not known (final.json older than its flag, and no first trial with today's knobs to tell) "
            f"{len(kinds['unknown'])}; elsewhere {len(kinds['elsewhere'])}, "
            "a knob without the original's value as its default at its first value (a launch option the source "
            "computes, or a launch keyword beside the literal it names; the importer gives both their original "
            "value since 2026-12-08), with kforge's speed-up"
            + (f": {elsewhere}." if elsewhere else ".")]


DEFINITIONS = f"""\
- **Speed-up** of a candidate (TritonBench's): the sum over the harness sizes of the original's median
  time / the sum over the same sizes of the candidate's, from the final interleaved measurement
  (final.json). It exists only when the candidate is correct and every size has both times; otherwise
  the candidate is a **failure**. The CSV also gives the per-size ratios (min / median / max).
- **Success**: correct and speed-up >= {SUCCESS_SPEEDUP:.2f}x.
- **Judged on**: the runnable operators kforge searched (kforge.jsonl or final.json exists). "Of all"
  divides by every operator of the data (or of the bucket). The row **kforge vs Triton's autotuner** is
  kforge's over the operators whose original carries `@triton.autotune` (their counts: runnable / tried
  / all of those): there the original is the autotuner over the operator's own list.
- **Mean speed-up of successes**: the arithmetic mean over the successes only.
- **Geomean** over the judged operators: a failure counts 1.00x, and so does a correct candidate slower
  than the original (floored at 1.00x, since kforge would keep the original). **Best** is the largest of
  the same numbers.
- **GPU s**: the method's search time per operator (final.json's `search_gpu_s`; where final.json
  lacks it, the last trial's `clock_s`).
- **TritonForge**: {TRITONFORGE['source']}. {TRITONFORGE['runnable']} of {TRITONFORGE['operators']}
  operators runnable, {100 * TRITONFORGE['success_rate_of_runnable']:.1f}% of the runnable improved by >= 1.05x,
  mean {TRITONFORGE['mean_speedup_of_successes']:.2f}x over those, best {TRITONFORGE['best_speedup']:.0f}x, about
  {TRITONFORGE['minutes_per_operator']} minutes (wall clock) and {TRITONFORGE['llm_rounds_per_operator']} LLM
  rounds per operator. Its share of all 184 is derived from those figures; it has no geomean or GPU-seconds figure."""

WHY_TEXT = {
    "original_failed": "the original failed in the search worker's setup (it does not run at the search's "
                       "sizes, or does not reproduce itself on the same inputs), or one of its own "
                       "configurations (its autotune list's) was wrong against its reference: no candidate "
                       "can be checked",
    "gpu_fault": "the GPU faulted (a sticky error) in the random search's candidate during the final "
                 "measurement, before kforge's was measured on every size",
    "wrong": "kforge's best candidate was incorrect (or failed) at the harness sizes",
    "no_trial": "the search finished no trial within its budget (the set-up took it)",
    "no_knob": "at most one distinct configuration was tried",
    "at_bound": f"CUPTI measured the original's DRAM or SM throughput at {AT_BOUND_CUPTI_PCT:.0f}% of peak or "
                f"more (largest size); without that measurement, the harness's rates put its best size at "
                f"{AT_BOUND_GBPS:.0%} of the copy bandwidth or {AT_BOUND_TFLOPS:.0%} of the fp16 peak",
    "compile_limited": f"{COMPILE_LIMITED_SHARE:.0%} or more of the trials were candidates whose compile "
                       "outlasted the search's compile limit (compile_timeout_s)",
    "knobs_without_effect": f"the ok trials' times span less than {NO_EFFECT_SPAN - 1:.0%} (slowest / fastest)",
    "original_best": "the search started from the original's configuration and found nothing faster",
    "launch_bound": f"kforge's winner took over {TIMER_APART}x as long in its search as in the final measurement "
                    "(largest size): the search timed the host's launch of the call, not its kernels",
    "space_exhausted": "the search measured every valid configuration of its space within its budget: the knobs "
                       "hold nothing faster (more search cannot help)",
    "search_too_short": f"the fastest trial came in the last {1 - LATE_FRACTION:.0%} of the search's clock",
    "underused": f"CUPTI measured the original's DRAM and SM throughput both under {UNDERUSED_CUPTI_PCT:.0f}% "
                 "of peak (largest size): the GPU mostly waits, and the knobs did not change that",
    "other": "none of the above",
}


def why_lines(operators: list[Operator]) -> list[str]:
    """Item 8: the classes of the runnable, searched operators kforge did not improve."""
    classes: dict[str, list[str]] = {c: [] for c in WHY_CLASSES}
    for o in operators:
        c = why_not_improved(o, outcome(o, "kforge"))
        if c:
            classes[c].append(o.op)
    rows = [[c, str(len(ops)), WHY_TEXT[c]] for c, ops in classes.items()]
    lines = ["Each runnable, searched operator whose kforge candidate is not a success gets the first class "
             "that applies, in this order.", ""]
    lines += markdown_table(("class", "operators", "meaning"), rows)
    lines.append("")
    lines += [f"- **{c}**: {', '.join(ops)}" for c, ops in classes.items() if ops]
    return lines


def regenerate_command(campaign: str, data: str, out: str) -> str:
    return f"PYTHONPATH=python .venv/bin/python -m kforge.tritonbench_g.report {campaign} --data {data} --out {out}"


def sharing_lines(searched: list[Operator]) -> list[str]:
    """How many operators were searched while others shared the GPU, and how many had their kforge and
    random searches at the same time (their GPU s is wall time on a shared GPU: compiles overlapped,
    timing held the GPU alone)."""
    counts = collections.Counter(o.final.ops_at_once for o in searched if o.final)
    together = sum(1 for o in searched if o.final and o.final.arms_together)
    lanes = collections.Counter(o.final.gpus_at_once for o in searched if o.final and o.final.gpus_at_once > 1)
    lines = []
    if lanes:
        parts = ", ".join(f"{n} operator{'s' if n != 1 else ''} in a call with {k} lanes"
                          for k, n in sorted(lanes.items()))
        lines.append(f"Several GPUs: {parts} (a lane per GPU of the machine, taking one operator at a time: "
                     "its searches and final measurement on that GPU alone, beside the other lanes' "
                     "operators, which shared the machine's cores and host memory).")
    if any(k > 1 for k in counts):
        parts = ", ".join(f"{n} operator{'s' if n != 1 else ''} {k} at a time" for k, n in sorted(counts.items()))
        lines.append(f"GPU sharing: {parts}.")
    if together:
        lines.append(f"Arms at once: {together} operator{'s' if together != 1 else ''} had the kforge and the "
                     "random search run at the same time (each with its own workers and the same wall budget), "
                     f"{sum(counts.values()) - together} one after the other.")
    if not lines:
        return []
    if any(k > 1 for k in counts) or together:
        lines.append("Searches sharing the GPU compiled in parallel and took its lock to check and, alone, to "
                     "time; their GPU s is the wall time of each search (the budget), part of it spent waiting "
                     "for the lock.")
    return [" ".join(lines), ""]


def worker_lines(searched: list[Operator]) -> list[str]:
    """How many worker processes each search ran on the GPU, where the campaign used more than one count
    (more workers compile more candidates at once in the same wall time)."""
    counts = collections.Counter(o.final.workers_per_device for o in searched if o.final)
    if len(counts) < 2:
        return []
    parts = ", ".join(f"{n} operator{'s' if n != 1 else ''} with {k}" for k, n in sorted(counts.items()))
    return [f"Workers per search: {parts} (each worker compiles its candidates on a core and takes the "
            "GPU's lock to check and, alone, to time).", ""]


UNSTABLE_METRIC = "setup.original_unstable_elements"


def unstable_elements(o: Operator) -> int:
    """The most elements the original changed between its own calls on the same inputs, as the kforge
    search's worker (a trial metric) or the final checks (final.json) measured them, since 2026-12-06;
    0 where none or not recorded."""
    values = [t.get("metrics", {}).get(UNSTABLE_METRIC) for t in o.trials.get("kforge") or []]
    values.append(o.final.original_unstable_elements if o.final else None)
    return int(max((v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)), default=0))


def unstable_lines(searched: list[Operator]) -> list[str]:
    """The operators whose original differs from itself in a few elements and was checked with an
    allowance (kforge.triton.program_worker.UNSTABLE_SHARE): a success there is correct as far as the
    original is."""
    found = [(o.op, n) for o in searched if (n := unstable_elements(o))]
    if not found:
        return []
    parts = ", ".join(f"{op} ({n} elements)" for op, n in found)
    return [f"Originals that differ from themselves (a race), checked with an allowance: {parts}. Their "
            "candidates may differ from the original in twice as many elements as the original's own calls "
            "did, and at every size in at least twice the largest share of a value any size's calls changed; "
            "an original that differs in more than 1% of a value's elements is original_failed.", ""]


def card_lines(searched: list[Operator]) -> list[str]:
    """Which cards the searched operators ran on (the campaign may span machines: say so)."""
    counts = collections.Counter(o.gpu or "not recorded" for o in searched)
    if not counts:
        return []
    parts = ", ".join(f"{gpu}: {n} operator{'s' if n != 1 else ''}" for gpu, n in sorted(counts.items()))
    note = "" if len(counts) == 1 else (" Each operator's original and candidates were measured on the same "
                                        "card in the same run, so its speed-ups compare like with like; the "
                                        "GPU s of different cards do not (the CSV's `gpu` column).")
    return [f"Cards: {parts}.{note}", ""]


def per_size_lines(searched: list[Operator]) -> list[str]:
    """kforge's successes whose median per-size speed-up is below 1: TritonBench's metric sums the times
    over the sizes, so the largest sizes decide it (and the search times the largest); say so where a
    success hides slower sizes."""
    slower = []
    for o in searched:
        k = outcome(o, "kforge")
        if k.success and k.per_size and statistics.median(k.per_size) < 1.0:
            slower.append(f"{o.op} (median per-size {statistics.median(k.per_size):.2f}x, "
                          f"{sum(x < 1.0 for x in k.per_size)} of {len(k.per_size)} sizes slower)")
    if not slower:
        return []
    return [f"Successes whose median per-size speed-up is below 1x: {', '.join(slower)}. "
            "TritonBench's metric sums the times over the sizes, so the largest sizes decide it (the "
            "search times the largest size); the CSV has each operator's per-size range.", ""]


NOISE = 0.02  # one speed-up (or time) must beat the other by more than this share to count as ahead


def clearly_faster(a: float, b: float) -> bool:
    """Whether speed-up ``a`` is ahead of ``b`` by more than the noise (NOISE, 2%) that separate runs of
    the same timing leave: the one rule for "ahead" of the side-by-side and of anytime's table."""
    return a > b * (1 + NOISE)


def head_to_head_lines(searched: list[Operator]) -> list[str]:
    """kforge against random search on the same operators: the final measurement's speed-ups side by
    side (both correct: who is ahead by more than 2%), and the best time each had after the same number
    of trials in its search (kforge.tritonbench_g.anytime)."""
    from kforge.tritonbench_g import anytime  # it reads trials through this module

    both = [(o.op, outcome(o, "kforge").speedup, outcome(o, "random").speedup) for o in searched]
    both = [(op, k, r) for op, k, r in both if k is not None and r is not None]
    k_only = [o.op for o in searched if outcome(o, "kforge").success and not outcome(o, "random").success]
    r_only = [o.op for o in searched if outcome(o, "random").success and not outcome(o, "kforge").success]
    if not both and not k_only and not r_only:
        return []
    ahead = [f"{op} ({k / r:.2f}x)" for op, k, r in both if clearly_faster(k, r)]
    behind = [f"{op} ({r / k:.2f}x)" for op, k, r in both if clearly_faster(r, k)]

    def named(ops: list[str]) -> str:
        return f"{len(ops)}" + (f" ({', '.join(ops)})" if ops else "")

    paired = [o for o in searched if o.trials.get("kforge") and o.trials.get("random")]

    def ok_share(method: str) -> str:
        trials = [t for o in paired for t in o.trials[method]]
        ok = sum(t.get("status") == "ok" for t in trials)
        return f"{method} {fmt_pct(ok, len(trials))} of {len(trials)}"

    whole = {m: sum(o.exhausted(m) for o in paired) for m in METHODS}
    both_whole = sum(o.exhausted("kforge") and o.exhausted("random") for o in paired)
    lines = ["## kforge against random search", "",
             f"Trials that ran and were correct, over the {len(paired)} operators both searched: "
             f"{ok_share('kforge')}, {ok_share('random')}. Searches that measured every valid configuration "
             f"of their space within the budget: kforge {whole['kforge']}, random {whole['random']}, both "
             f"{both_whole} (there both measured the same configurations: only timing noise can set them "
             "apart).", "",
             f"Final measurement, both arms correct and timed on every size on {len(both)} operators: kforge more than 2% faster on "
             f"{named(ahead)}, random on {named(behind)}, within 2% on {len(both) - len(ahead) - len(behind)}. "
             f"A success for one arm only: kforge {named(k_only)}, random {named(r_only)}.", "",
             *by_space_lines(searched),
             "Best ok time after the same number of trials in each search (random's best over kforge's: "
             "above 1, kforge's is faster; the arms are timed in different runs, so a few percent is noise):",
             ""]
    return lines + anytime.table(anytime.ratios_of((o.trials.get("kforge"), o.trials.get("random"))
                                                   for o in searched))


# The upper edges of the space sizes the head-to-head is split by (the last class is above). Below the
# first a 30 s search often measures the whole space (a median of 25 configurations tried): there the
# strategy cannot matter, above the last it can.
HEAD_TO_HEAD_EDGES = (125, 1000)


def by_space_lines(searched: list[Operator]) -> list[str]:
    """The side-by-side split by the size of the operator's space (space_size; operators without one
    left out): per class, the operators searched, those with both arms correct and who is ahead by more
    than 2% there, and each arm's successes."""
    parts = []
    for band, label in enumerate(band_names(HEAD_TO_HEAD_EDGES)):
        ops = [o for o in searched if o.space_size is not None and space_band(o.space_size, HEAD_TO_HEAD_EDGES) == band]
        k = [outcome(o, "kforge") for o in ops]
        r = [outcome(o, "random") for o in ops]
        both = [(a.speedup, b.speedup) for a, b in zip(k, r) if a.speedup is not None and b.speedup is not None]
        ahead = sum(clearly_faster(a, b) for a, b in both)
        behind = sum(clearly_faster(b, a) for a, b in both)
        parts.append(f"{label}: {len(ops)} searched, both correct on {len(both)} (kforge ahead on {ahead}, "
                     f"random on {behind}), successes kforge {sum(x.success for x in k)}, random "
                     f"{sum(x.success for x in r)}")
    return ["By the size of the operator's space (configurations; where a search measures most of a small "
            "space, the strategy cannot matter): " + "; ".join(parts) + ".", ""]


def timer_lines(searched: list[Operator]) -> list[str]:
    """The search's timer against the final measurement's: kforge's winner's best time in its search over
    its final time on the largest size (the size the search times), per L2 flush the search used. Far
    above 1, the search ranked the host's launch of the call rather than its kernels."""
    by_flush: dict[str, list[tuple[str, float]]] = {}
    for o in searched:
        ratio = search_timer_ratio(o)
        if ratio is None:
            continue
        flush = "twice the L2" if o.final.search_flush_bytes is None else \
            f"{o.final.search_flush_bytes / (1 << 20):.0f} MiB"
        by_flush.setdefault(flush, []).append((o.op, ratio))
    if not by_flush:
        return []
    parts = []
    for flush, ratios in sorted(by_flush.items()):
        apart = [f"{op} ({r:.1f}x)" for op, r in sorted(ratios, key=lambda x: -x[1]) if r > TIMER_APART]
        parts.append(f"flushing {flush}: {len(ratios)} operators, median {statistics.median(r for _, r in ratios):.2f}, "
                     f"above {TIMER_APART}x on {len(apart)}" + (f" ({', '.join(apart)})" if apart else ""))
    return ["## The search's timer against the final measurement's", "",
            "kforge's winner's best time in its search over its final time on the largest size (the size the "
            "search times); both are CUDA events around the call after an L2 flush, whose time on the GPU "
            "hides the host's launch of the call (do_bench's 256 MiB in the final measurement). Far above 1, "
            "the search ranked launch time. Searches " + "; ".join(parts) + "."]


def render_markdown(operators: list[Operator], unknown: list[str], campaign: str, command: str,
                    paths: Paths) -> str:
    """The whole report as Markdown text."""
    runnable = [o for o in operators if o.runnable]
    searched = [o for o in runnable if o.searched]
    lines = ["# TritonBench-G: kforge against the original kernels", "",
             f"Generated by `{command}` from the campaign folder `{campaign}`; do not edit by hand.", ""]
    if len(searched) < len(runnable):
        lines += [f"> **Partial campaign: {len(searched)} of {len(runnable)} runnable operators searched so far.** "
                  "The rates below are over the searched ones (\"of judged\"); \"of all\" divides by all "
                  f"{len(operators)} operators.", ""]
    tried = sum(o.tried for o in operators)
    if tried < len(operators):
        lines += [f"> The runnable filter has tried {tried} of {len(operators)} operators; the other "
                  f"{len(operators) - tried} count as not tried (not runnable).", ""]
    lines += ["## Headline", ""]
    versus = autotune_row(operators)
    lines += markdown_table(HEADLINE_HEADER, [headline_cells(headline(operators, m)) for m in METHODS] +
                            ([headline_cells(versus)] if versus else []) + [tritonforge_cells()])
    lines += ["", "TritonForge's row is copied from its paper (an H100, LLM rounds of about 22 minutes per "
              "operator), not measured here; compare the shapes of the numbers, not the digits.", ""]
    lines += autotune_lines(operators)
    lines += per_size_lines(searched)
    lines += card_lines(searched)
    lines += unstable_lines(searched)
    lines += sharing_lines(searched)
    lines += worker_lines(searched)
    lines += [
              "## Definitions", "", DEFINITIONS, "",
              "## Coverage", ""] + coverage_lines(operators, unknown)
    lines += ["", "## By source length (TritonForge's quartiles of `output_triton_len`)", ""]
    rows = []
    for bucket in BUCKETS:
        members = [o for o in operators if o.bucket == bucket]
        for m in METHODS:
            rows.append([f"{bucket} ({BUCKET_RANGES[bucket]})"] + headline_cells(headline(members, m)))
    lines += markdown_table(("length",) + HEADLINE_HEADER, rows)
    lines += ["", "## Why not improved", ""] + why_lines(operators)
    lines += [""] + head_to_head_lines(searched)
    lines += [""] + timer_lines(searched)
    lines += ["", "## Files", "",
              f"- Per operator: [{paths.csv.name}]({paths.csv.name}) (one row per operator of the data).",
              f"- ![speed-ups]({paths.speedups_png.name})",
              f"- ![speed-up against GPU seconds]({paths.scatter_png.name})", ""]
    return "\n".join(lines)


def csv_row(o: Operator) -> dict[str, str]:
    """The CSV row of one operator."""
    k = outcome(o, "kforge")
    sizes = sorted(k.per_size)
    return {
        "op": o.op, "bucket": o.bucket, "source_len": str(o.source_len), "runnable": str(o.runnable).lower(),
        "category": o.category, "n_sizes": "" if o.n_sizes is None else str(o.n_sizes),
        "searched": str(o.searched).lower(), "has_final": str(o.final is not None).lower(),
        "gpu": o.gpu or "",
        "kforge_speedup": fmt_num(k.speedup),
        "kforge_size_min": fmt_num(sizes[0] if sizes else None),
        "kforge_size_median": fmt_num(statistics.median(sizes) if sizes else None),
        "kforge_size_max": fmt_num(sizes[-1] if sizes else None),
        "kforge_correct": str(k.correct).lower() if k.present else "",
        "kforge_trials": "" if k.trials is None else str(k.trials),
        "kforge_search_gpu_s": fmt_num(k.search_gpu_s, 1),
        "kforge_configuration": "" if k.configuration is None else
        json.dumps(k.configuration, sort_keys=True, separators=(",", ":")),
        "random_speedup": fmt_num(outcome(o, "random").speedup),
        "autotuned": str(o.autotuned).lower(),
        "autotune_first_calls_s": fmt_num(o.final.autotune_first_calls_s if o.final else None, 1),
        **{f"{program}_{unit}_pct": fmt_num(o.final.cupti_metric(program, metric) if o.final else None, 1)
           for program in ("original", "kforge") for unit, metric in (("dram", CUPTI_DRAM), ("sm", CUPTI_SM))},
        "space_size": "" if o.space_size is None else str(o.space_size),
        "why_not_improved": why_not_improved(o, k) or "",
    }


def write_csv(operators: list[Operator], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS, lineterminator="\n")
        writer.writeheader()
        for o in operators:
            writer.writerow(csv_row(o))


# --- plots ---------------------------------------------------------------------------------------------

PNG_METADATA = {"Software": None}


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plain_log_ticks(axis, unit: str = "") -> None:
    """Ticks of a log axis at 1, 2 and 5 times the powers of ten, labelled as plain numbers (0.5x, 2x,
    20x) instead of powers of ten; the other ticks unlabelled (labelling every minor tick of a wide
    range overprints them)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}{unit}"))
    axis.set_minor_formatter(NullFormatter())


def correct_speedups(operators: list[Operator], method: str) -> list[tuple[float, float | None]]:
    """(speed-up, search GPU s) of the method's correct candidates on the judged operators, unfloored."""
    out = []
    for o in population(operators):
        x = outcome(o, method)
        if x.speedup is not None:
            out.append((x.speedup, x.search_gpu_s))
    return out


def plot_speedups(operators: list[Operator], path: Path) -> None:
    """Histogram of the correct candidates' speed-ups per method, log-spaced bins, log x."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    series = {m: [s for s, _ in correct_speedups(operators, m)] for m in METHODS}
    values = [v for vs in series.values() for v in vs]
    lo, hi = min(values + [0.5]), max(values + [2.0])
    bins = [lo * (hi / lo) ** (i / 30) for i in range(31)]
    for method, vs in series.items():
        if vs:
            ax.hist(vs, bins=bins, histtype="step", linewidth=1.5, label=f"{method} ({len(vs)} correct)")
    ax.axvline(SUCCESS_SPEEDUP, color="gray", linestyle="--", linewidth=1, label=f"success {SUCCESS_SPEEDUP}x")
    ax.set_xscale("log")
    plain_log_ticks(ax.xaxis, "x")
    ax.yaxis.get_major_locator().set_params(integer=True)
    ax.set_xlabel("speed-up over the original (sum of times over the harness sizes)")
    ax.set_ylabel("operators")
    ax.set_title("TritonBench-G: speed-ups of the correct candidates")
    if not values:
        ax.text(0.5, 0.5, "no correct candidate yet", transform=ax.transAxes, ha="center")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, metadata=PNG_METADATA)
    plt.close(fig)


def plot_speedup_vs_gpu_s(operators: list[Operator], path: Path) -> None:
    """Scatter of each correct candidate's speed-up (log) against the GPU seconds its search took."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    markers = {"kforge": "o", "random": "x"}
    plotted = 0
    for method in METHODS:
        points = [(g, s) for s, g in correct_speedups(operators, method) if g is not None and g > 0]
        if points:
            ax.scatter([g for g, _ in points], [s for _, s in points], marker=markers[method], s=18,
                       label=f"{method} ({len(points)})")
            plotted += len(points)
    ax.axhline(SUCCESS_SPEEDUP, color="gray", linestyle="--", linewidth=1)
    ax.set_yscale("log")  # the seconds stay linear: every search has about the same budget (30 s)
    plain_log_ticks(ax.yaxis, "x")
    ax.set_xlim(left=0)
    ax.set_xlabel("search GPU seconds per operator (wall time of the search)")
    ax.set_ylabel("speed-up over the original")
    ax.set_title("TritonBench-G: speed-up against search time")
    if plotted:
        ax.legend(loc="upper left", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no correct candidate yet", transform=ax.transAxes, ha="center")
    fig.tight_layout()
    fig.savefig(path, metadata=PNG_METADATA)
    plt.close(fig)


# --- the command -----------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description="The TritonBench-G results table, CSV and plots "
                                     "from a stored campaign folder (nothing is measured).")
    parser.add_argument("campaign", help="the campaign folder (runnable.jsonl, runs/<op>/...)")
    parser.add_argument("--data", default=str(DEFAULT_DATA),
                        help="the TritonBench-G data folder holding TritonBench_G_v1.json (default: %(default)s)")
    parser.add_argument("--out", default=str(DEFAULT_OUT),
                        help="the Markdown report; the CSV and PNGs go beside it (default: %(default)s)")
    return parser.parse_args(argv)


def write_report(campaign: Path, data: Path, out: Path, command: str) -> None:
    """Reads the campaign and the data and writes the four files (see the module docstring)."""
    lengths = load_dataset(data)
    if not (data / "kernels").is_dir():
        raise ReportError(f"{data}: no kernels/ folder (the originals' sources: which carry @triton.autotune)")
    operators, unknown = load_campaign(campaign, lengths, data / "kernels")
    paths = Paths(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_markdown(operators, unknown, os.path.normpath(str(campaign)), command, paths))
    write_csv(operators, paths.csv)
    plot_speedups(operators, paths.speedups_png)
    plot_speedup_vs_gpu_s(operators, paths.scatter_png)


def main(argv: list[str] | None = None) -> int:
    """The command line; 0 on success, 2 (with a message on stderr) for an input it cannot use."""
    args = parse_args(argv)
    command = regenerate_command(os.path.normpath(args.campaign), os.path.normpath(args.data),
                                 os.path.normpath(args.out))
    try:
        write_report(Path(args.campaign), Path(args.data), Path(args.out), command)
    except ReportError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
