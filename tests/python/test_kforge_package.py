# kforge: needs the native module
"""The kforge Python package (kforge._core through `import kforge`): spaces, ask/tell strategies, Python
strategies (registered, by class, and through `strategy: {type: python}` in the CLI and kforge score),
experiments from files and dicts, runs and resume, run stores as records and DataFrames, scores, errors as
exceptions carrying kforge's file/key/reason, and the stub for editors."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kforge

ROOT = Path(__file__).resolve().parents[2]
T1 = ROOT / "experiments/stencil2d-h200/T1.json"
CACHE = ROOT / "experiments/stencil2d-h200/cache.json"
WALK = ROOT / "examples/python/neighbour_walk.py"
BUILD = Path(os.environ.get("KFORGE_BUILD_DIR", ROOT / "build"))


def replay_config(tmp_path, strategy, evaluations=30, **extra):
    cfg = {"name": "py", "problem": {"t1": str(T1)}, "strategy": strategy,
           "evaluator": {"type": "replay", "params": {"file": str(CACHE)}}, "budget": {"evaluations": evaluations},
           "seed": 3, "output": str(tmp_path / "run")}
    cfg.update(extra)
    return cfg


def test_spaces():
    s = kforge.Space.from_t1(str(T1))
    assert s.names == ["block_size_x", "block_size_y", "tile_size_x", "tile_size_y", "use_shared"]
    assert len(s) == s.size == 491 and s.cartesian_size == 600
    valid = s.valid()
    assert len(valid) == 491 and all(s.is_valid(c) for c in valid[:20])
    c = valid[7]
    assert s.config(s.values(c)) == c
    assert s.key(c) == ",".join(str(v) for v in s.values(c).values())
    assert all(c2 != c and s.is_valid(c2) for c2 in s.neighbours(c, "hamming"))
    assert s.sample(5, seed=1) == s.sample(5, seed=1) and len(s.sample(5, seed=2)) == 5
    enc = s.encode(c)
    assert len(enc) == s.encoded_dimension and all(0 <= x <= 1 for x in enc)
    r = kforge.Space.from_recording(str(CACHE))
    assert r.names == s.names
    k = kforge.Space.from_kernel(str(ROOT / "experiments/kernels/saxpy/kernel.yaml"))
    assert k.dimension >= 1
    d = kforge.Space({"a": [1, 2, 4], "b": ["x", "y"]}, constraints=["a * 2 <= m"], constants={"m": 4})
    assert len(d) == 4 and d.parameters == {"a": [1, 2, 4], "b": ["x", "y"]}
    e = kforge.Space({"a": [1, 2, 4]}, configs=[{"a": 4}, (0,)])
    assert e.valid() == [(0,), (2,)]
    with pytest.raises(kforge.Error, match="out of range"):
        e.values((7,))


def test_uniform_draws_list_what_can_be_listed_and_sample_the_rest():
    small = kforge.Space.from_t1(str(T1))
    a, b = kforge.UniformDraws(small, 5), kforge.UniformDraws(small, 5)
    assert a.total == 491
    seen = set()
    while (c := a.next(seen)) is not None:
        assert c not in seen and c == b.next(set())  # the same seed, the same permutation
        seen.add(c)
    assert seen == set(small.valid())
    # 12 parameters of 5 values (TritonBench-G's chunk_gla_fwd has 5.3e8 combinations): never listed
    for constraints in ([], ["k0 * k1 >= 1"]):
        big = kforge.Space({f"k{i}": [1, 2, 4, 8, 16] for i in range(12)}, constraints=constraints)
        assert not big.enumerable
        draws, skip = kforge.UniformDraws(big, 7), set()
        assert draws.total is None
        for _ in range(50):
            c = draws.next(skip)
            assert big.is_valid(c) and c not in skip
            skip.add(c)
        assert kforge.UniformDraws(big, 7).next(set()) == kforge.UniformDraws(big, 7).next(set())  # seeded
    with pytest.raises(kforge.Error, match="too many to list"):  # 2.4e8 tuples would not fit
        kforge.Space({f"k{i}": [1, 2, 4, 8, 16] for i in range(12)}).valid()
    sparse = kforge.Space({f"k{i}": list(range(10)) for i in range(10)},  # 1 of 1e10 valid
                          constraints=["k0 == k1 == k2 == k3 == k4 == k5 == k6 == k7 == k8 == k9 == 9"])
    assert kforge.UniformDraws(sparse, 1, tries=1).next(set()) is None  # its sampler finds nothing valid


def test_ask_tell_with_builtin_strategies():
    space = kforge.Space.from_t1(str(T1))
    for name in ("random", "ga", "hybrid"):
        s = kforge.strategy(name, space, seed=1, budget=12)
        told = 0
        while True:
            cfgs = s.propose(5)
            if not cfgs:
                break
            assert len(set(cfgs)) == len(cfgs) and set(cfgs).isdisjoint(t.config for t in s.trials)
            s.observe([(c, 1.0 + sum(c)) for c in cfgs])
            told += len(cfgs)
        assert told == 12 and len(s.trials) == 12 and s.best.time_ms == min(t.time_ms for t in s.trials)
    # Same seed, same proposals.
    a = kforge.strategy("hybrid", space, seed=4).propose(6)
    assert a == kforge.strategy("hybrid", space, seed=4).propose(6)
    s = kforge.strategy("random", space, seed=1)
    c = s.propose(2)
    s.observe([{"values": space.values(c[0]), "status": "compile_failed", "error": "nope"},
               kforge.Trial(c[1], time_ms=2.5, metrics={"registers": 32})])
    assert [t.status for t in s.trials] == ["compile_failed", "ok"] and s.trials[1].metrics == {"registers": 32.0}
    with pytest.raises(kforge.Error, match="not proposed"):
        s.observe([(c[0], 1.0)])


def test_misuse_raises_config_errors_with_the_key():
    space = kforge.Space.from_t1(str(T1))
    with pytest.raises(kforge.ConfigError) as e:
        kforge.strategy("ga", space, population_size=-1)
    assert e.value.key == "params.population_size" and "population_size" in str(e.value)
    with pytest.raises(kforge.ConfigError, match="unknown strategy 'nope'"):
        kforge.strategy("nope", space)
    with pytest.raises(kforge.ConfigError) as e:
        kforge.load_experiment(str(ROOT / "README.md"))
    assert isinstance(e.value, ValueError) and e.value.file


class Lexicographic:
    """Proposes the valid configurations in order; `stride` skips."""

    options = {"stride": kforge.option(int, 1, "step through the valid list", min=1)}

    def __init__(self, space, seed, stride):
        self.order = space.valid()[::stride]

    def propose(self, n):
        out, self.order = self.order[:n], self.order[n:]
        return out

    def observe(self, trials):
        pass

    def finished(self):
        return not self.order


def test_python_strategies_by_class_and_registered(tmp_path):
    space = kforge.Space.from_t1(str(T1))
    s = kforge.strategy(Lexicographic, space, stride=2)
    assert s.propose(2) == [space.valid()[0], space.valid()[2]]
    with pytest.raises(kforge.ConfigError, match="stride"):
        kforge.strategy(Lexicographic, space, stride=0)
    with pytest.raises(kforge.ConfigError, match="unknown option"):
        kforge.strategy(Lexicographic, space, strid=2)
    kforge.register_strategy("lexicographic", Lexicographic)
    assert "lexicographic" in kforge.strategies()
    entry = next(e for e in kforge.plugins()["strategies"] if e["name"] == "lexicographic")
    assert entry["summary"].startswith("Proposes the valid") and entry["options"][0]["name"] == "stride"
    # A config run in this process can name it.
    r = kforge.run(replay_config(tmp_path, {"type": "lexicographic", "params": {"stride": 3}}, evaluations=10))
    assert [t.config for t in r.trials] == space.valid()[::3][:10]


class EveryOptionType:
    """Declares one option of each type; remembers what it was given."""

    options = {
        "count": kforge.option(int, 1, "an integer", min=0),
        "share": kforge.option(float, 0.5, "a real", min=0.0, max=1.0),
        "flag": kforge.option(bool, False, "a boolean"),
        "name": kforge.option(str, "a", "a string", choices=["a", "b"]),
        "items": kforge.option(list, [], "a list"),
        "table": kforge.option(dict, {}, "a mapping"),
    }
    given = {}

    def __init__(self, space, seed, **options):
        EveryOptionType.given = options
        self.order = space.valid()

    def propose(self, n):
        out, self.order = self.order[:n], self.order[n:]
        return out

    def observe(self, trials):
        pass


def test_python_strategy_options_of_every_type(tmp_path):
    space = kforge.Space.from_t1(str(T1))
    kforge.strategy(EveryOptionType, space, share=0.25, flag=True, name="b", items=[1, 2], table={"k": 3})
    assert EveryOptionType.given == {"count": 1, "share": 0.25, "flag": True, "name": "b", "items": [1, 2],
                                     "table": {"k": 3}}
    with pytest.raises(kforge.ConfigError, match="share"):
        kforge.strategy(EveryOptionType, space, share=2.0)


def test_run_resume_records_and_dataframe(tmp_path):
    cfg = replay_config(tmp_path, {"type": "python", "params": {"module": str(WALK), "class": "NeighbourWalk"}},
                        evaluations=25)
    seen = []
    r = kforge.run(cfg, evaluations=10, progress=seen.append)
    assert r.reason == "evaluation budget reached" and len(r.trials) == 10 and len(seen) == 10
    r2 = kforge.run(cfg, resume=True)
    assert r2.resumed == 10 and len(r2.trials) == 25
    full = kforge.run(cfg, output=str(tmp_path / "again"))
    assert [t.config for t in full.trials] == [t.config for t in r2.trials]
    run = kforge.open_run(r2.folder)
    recs = run.records()
    assert len(recs) == 25 and recs[0]["sequence"] == 0 and "block_size_x" in recs[0] and "cost_total" in recs[0]
    assert run.meta("finished")["trials"] == 25 and run.summary()["state"] == "finished"
    df = run.to_dataframe()
    assert len(df) == 25 and df["time_ms"].min() == pytest.approx(r2.best.time_ms)
    exp = kforge.experiment(cfg)
    assert exp.strategy["type"] == "python" and exp.space.dimension == 5 and exp.start == []
    # `start: default`: the T1 file's own configuration is evaluated first (and the walk never proposes it).
    started = kforge.run({**cfg, "start": "default"}, output=str(tmp_path / "started"), evaluations=6)
    assert kforge.experiment({**cfg, "start": "default"}).start == [started.trials[0].config]
    assert exp.space.values(started.trials[0].config)["block_size_x"] == 32


def test_python_strategy_options_checked_like_builtins(tmp_path):
    bad = replay_config(tmp_path, {"type": "python", "params": {"module": str(WALK), "class": "NeighbourWalk",
                                                                "restarts": 0}})
    with pytest.raises(kforge.ConfigError) as e:
        kforge.experiment(bad)
    assert e.value.key == "strategy.params.restarts"
    bad["strategy"]["params"] = {"module": "missing_file.py", "class": "X"}
    with pytest.raises(kforge.ConfigError) as e:
        kforge.experiment(bad)
    assert e.value.key == "strategy.params.module" and "no Python file" in e.value.reason


def write_cli_config(tmp_path, params):
    cfg = tmp_path / "walk.yaml"
    cfg.write_text(f"""
problem: {{t1: {T1}}}
strategy: {{type: python, params: {json.dumps(params)}}}
evaluator: {{type: replay, params: {{file: {CACHE}}}}}
budget: {{evaluations: 20}}
output: {tmp_path / 'cli-run'}
""")
    return cfg


def cli(*args):
    return subprocess.run([str(BUILD / "kforge"), *map(str, args)], capture_output=True, text=True, timeout=300)


def test_the_cli_runs_a_python_strategy_and_checks_its_options(tmp_path):
    import shutil

    shutil.copy(WALK, tmp_path / "walk.py")  # relative to the config file
    cfg = write_cli_config(tmp_path, {"module": "walk.py", "class": "NeighbourWalk", "restarts": 2})
    r = cli("run", cfg, "--quiet")
    assert r.returncode == 0, r.stderr
    assert len(kforge.open_run(tmp_path / "cli-run")) == 20
    cfg = write_cli_config(tmp_path, {"module": "walk.py", "class": "NeighbourWalk", "bogus": 2})
    r = cli("run", cfg)
    assert r.returncode == 2 and "strategy.params.bogus: unknown option" in r.stderr, r.stderr


def test_kforge_score_scores_a_python_strategy(tmp_path):
    score = tmp_path / "score.yaml"
    score.write_text(f"""
spaces: [{{name: stencil2d, recording: {CACHE}, t1: {T1}}}]
strategies: [random, {{type: python, params: {{module: {WALK}, class: NeighbourWalk}}}}]
seeds: 4
""")
    r = cli("score", score)
    assert r.returncode == 0, r.stderr
    assert "python" in r.stdout and "stencil2d" in r.stdout
    table = kforge.score(str(score), seeds=3)
    assert len(table["strategies"]) == 2 and all(not math.isnan(v) for v in table["mean_score"].values())
    assert "P =" in table["text"]


def test_the_committed_stub_is_the_generated_one():
    generated = Path(os.environ.get("KFORGE_NATIVE_DIR", BUILD / "python/kforge")) / "_core.pyi"
    committed = ROOT / "python/kforge/_core.pyi"
    if not generated.exists():
        pytest.skip(f"{generated} not generated (cmake --build builds it)")
    assert committed.read_text() == generated.read_text(), (
        f"python/kforge/_core.pyi is stale: cp {generated} {committed}")


def test_importing_kforge_needs_nothing_native():
    code = "import kforge, sys; import kforge.triton.source_ops; print('kforge._core' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, KFORGE_NATIVE_DIR="/nonexistent"))
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr


def test_docs_show_the_examples_verbatim_each_under_60_lines():
    import re

    blocks = re.findall(r"```\w+\n(.*?)```", (ROOT / "docs/plugins.md").read_text(), re.S)
    for example in (WALK, ROOT / "examples/plugin/example_plugin.cpp"):
        text = example.read_text()
        assert text in blocks, f"docs/plugins.md does not show {example.relative_to(ROOT)} as it is"
        n = len(text.splitlines())
        assert n < 60, f"{example.relative_to(ROOT)} has {n} lines"
        assert f"{example.relative_to(ROOT)}, {n} lines" in (ROOT / "docs/plugins.md").read_text()
