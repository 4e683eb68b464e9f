"""Golden-file tests of kforge.triton.source_ops.

Inputs are the programs in golden/ (written for these tests); expected outputs are in golden/expected/,
one file per case: JSON for find_knobs and autotune_to_space, Python text for the rewriting operators.
To regenerate the expected files after a deliberate change, run with KFORGE_UPDATE_GOLDEN=1 and review
the diff before committing it.
"""

import ast
import dataclasses
import difflib
import json
import os
import sys
from pathlib import Path

import pytest

from kforge.triton import source_ops
from kforge.triton.source_ops import SourceOpError

GOLDEN = Path(__file__).parent / "golden"
EXPECTED = GOLDEN / "expected"
UPDATE = os.environ.get("KFORGE_UPDATE_GOLDEN") == "1"

MATMUL_CONFIG = {"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8, "num_warps": 4, "num_stages": 4,
                 "maxnreg": None}

# (expected file, input program, operator, keyword arguments)
CASES = [
    ("rowwise_softmax.knobs.json", "rowwise_softmax.py", "find_knobs", {}),
    ("grouped_matmul.knobs.json", "grouped_matmul.py", "find_knobs", {}),
    ("two_pass_norm.knobs.json", "two_pass_norm.py", "find_knobs", {}),
    # a literal used by the grid and the launch
    ("rowwise_softmax.lift_rows.py", "rowwise_softmax.py", "lift_literal",
     {"site": "softmax:27", "name": "ROWS_PER_PROGRAM", "placeholder": "{ROWS_PER_PROGRAM}"}),
    ("rowwise_softmax.num_warps_2.py", "rowwise_softmax.py", "set_launch_keyword",
     {"site": "softmax", "keyword": "num_warps", "value": 2}),
    ("rowwise_softmax.add_num_stages.py", "rowwise_softmax.py", "set_launch_keyword",
     {"site": "softmax:29", "keyword": "num_stages", "value": 1}),
    # several launch sites: only the one named changes
    ("two_pass_norm.positional_block.py", "two_pass_norm.py", "set_constexpr_at_launch",
     {"site": "rms_norm:65", "name": "BLOCK", "value": 512}),
    ("two_pass_norm.keyword_block.py", "two_pass_norm.py", "set_constexpr_at_launch",
     {"site": "scale_rows_again", "name": "BLOCK", "value": 512}),
    ("two_pass_norm.lift_module_constant.py", "two_pass_norm.py", "lift_literal",
     {"site": "<module>", "name": "PARTIAL_BLOCK", "placeholder": "4096"}),
    ("two_pass_norm.maxnreg.py", "two_pass_norm.py", "set_launch_keyword",
     {"site": "rms_norm:60", "keyword": "maxnreg", "value": 128}),
    # autotune with key=, prune_configs_by, and heuristics stacked under it
    ("grouped_matmul.space.json", "grouped_matmul.py", "autotune_to_space", {"kernel_name": "matmul_kernel"}),
    ("grouped_matmul.space_widened.json", "grouped_matmul.py", "autotune_to_space",
     {"kernel_name": "matmul_kernel", "widen": True}),
    ("grouped_matmul.no_autotune.py", "grouped_matmul.py", "remove_autotune", {"kernel_name": "matmul_kernel"}),
    ("grouped_matmul.config.py", "grouped_matmul.py", "apply_config",
     {"kernel_name": "matmul_kernel", "config": MATMUL_CONFIG}),
    ("grouped_matmul.pinned.py", "grouped_matmul.py", "pin_heuristics",
     {"kernel_name": "matmul_kernel", "values": {"EVEN_K": True}}),
    # autotune from a comprehension, positional configs and key
    ("two_pass_norm.axpby_space.json", "two_pass_norm.py", "autotune_to_space", {"kernel_name": "_axpby"}),
    ("two_pass_norm.axpby_config.py", "two_pass_norm.py", "apply_config",
     {"kernel_name": "_axpby", "config": {"BLOCK": 2048, "num_warps": 8}}),
]


def _read(name: str) -> str:
    return (GOLDEN / name).read_text()


def _serialise(result) -> str:
    return result if isinstance(result, str) else json.dumps(result, indent=1) + "\n"


@pytest.mark.parametrize("expected,program,operator,kwargs", CASES, ids=[c[0] for c in CASES])
def test_golden(expected, program, operator, kwargs):
    result = _serialise(getattr(source_ops, operator)(_read(program), **kwargs))
    path = EXPECTED / expected
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_text(result)
    assert path.exists(), f"{path} is missing (run with KFORGE_UPDATE_GOLDEN=1 and review it)"
    want = path.read_text()
    if result != want:
        diff = "".join(difflib.unified_diff(want.splitlines(True), result.splitlines(True), str(path), "result"))
        pytest.fail(f"{operator} on {program} differs from {expected}:\n{diff}")


@pytest.mark.parametrize("expected,program,operator,kwargs",
                         [c for c in CASES if c[0].endswith(".py")], ids=[c[0] for c in CASES if c[0].endswith(".py")])
def test_rewrites_parse_and_touch_few_lines(expected, program, operator, kwargs):
    """A rewrite is valid Python and leaves every line outside its edits as it was."""
    before = _read(program)
    after = getattr(source_ops, operator)(before, **kwargs)
    ast.parse(after)
    changed = [line for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line[:1] in "+-"]
    removed_decorator = operator in ("remove_autotune", "apply_config")
    assert len(changed) <= (30 if removed_decorator else 4), "\n".join(changed)


ERRORS = [
    ("broken_source.py", "find_knobs", {}, "does not parse: line 9"),
    ("broken_source.py", "lift_literal", {"site": "f", "name": "X", "placeholder": "1"}, "does not parse"),
    ("two_pass_norm.py", "set_constexpr_at_launch", {"site": "rms_norm", "name": "BLOCK", "value": 1},
     "site 'rms_norm' is ambiguous: 2"),
    ("two_pass_norm.py", "set_constexpr_at_launch", {"site": "rms_norm:65", "name": "EPS", "value": 1},
     "'EPS' is not a tl.constexpr parameter of _scale_rows"),
    ("two_pass_norm.py", "set_launch_keyword", {"site": "nowhere:3", "keyword": "num_warps", "value": 4},
     "site 'nowhere:3': no launch"),
    ("two_pass_norm.py", "set_launch_keyword", {"site": "axpby", "keyword": "num_warps", "value": 4},
     "_axpby is autotuned"),
    ("two_pass_norm.py", "set_launch_keyword", {"site": "rms_norm:60", "keyword": "num_threads", "value": 4},
     "'num_threads' is not a launch option"),
    ("two_pass_norm.py", "lift_literal", {"site": "rms_norm", "name": "PARTIAL_BLOCK", "placeholder": "1"},
     "no integer literal assigned to 'PARTIAL_BLOCK'"),
    ("two_pass_norm.py", "remove_autotune", {"kernel_name": "_scale_rows"}, "has no @triton.autotune"),
    ("two_pass_norm.py", "autotune_to_space", {"kernel_name": "missing"}, "no @triton.jit kernel named 'missing'"),
    ("two_pass_norm.py", "apply_config", {"kernel_name": "_axpby", "config": {"num_warps": 8}}, "lacks BLOCK"),
    ("two_pass_norm.py", "apply_config", {"kernel_name": "_axpby", "config": {"BLOCK": 64, "n": 3}},
     "'n' is neither a tl.constexpr parameter"),
    ("grouped_matmul.py", "apply_config",
     {"kernel_name": "matmul_kernel", "config": {**MATMUL_CONFIG, "EVEN_K": True}}, "computed by @triton.heuristics"),
    ("grouped_matmul.py", "pin_heuristics", {"kernel_name": "matmul_kernel", "values": {"ODD_K": True}},
     "computes EVEN_K, not ODD_K"),
    ("grouped_matmul.py", "set_constexpr_at_launch", {"site": "matmul", "name": "BLOCK_M", "value": 32},
     "autotune configurations set 'BLOCK_M'"),
    ("grouped_matmul.py", "set_constexpr_at_launch", {"site": "matmul", "name": "EVEN_K", "value": True},
     "@triton.heuristics computes 'EVEN_K'"),
    ("rowwise_softmax.py", "set_launch_keyword", {"site": "softmax", "keyword": "num_warps", "value": [4]},
     "not a Python literal"),
]


@pytest.mark.parametrize("program,operator,kwargs,message", ERRORS, ids=[f"{e[1]}-{e[3][:30]}" for e in ERRORS])
def test_errors_name_the_site_and_reason(program, operator, kwargs, message):
    with pytest.raises(SourceOpError) as error:
        getattr(source_ops, operator)(_read(program), **kwargs)
    assert message in str(error.value)


def test_byte_offsets_of_non_ascii_lines():
    """ast columns are UTF-8 byte offsets: an edit after non-ASCII text on the same line lands right."""
    source = ('import triton\nimport triton.language as tl\n\n@triton.jit\n'
              'def k(x, label, B: tl.constexpr):\n    pass\n\n'
              'def run(x):\n    k[(1,)](x, "µs→é", B=16)  # naïve\n')
    result = source_ops.set_constexpr_at_launch(source, "run:9", "B", 32)
    assert result.splitlines()[8] == '    k[(1,)](x, "µs→é", B=32)  # naïve'
    result = source_ops.set_launch_keyword(source, "run", "num_warps", 2)
    assert result.splitlines()[8] == '    k[(1,)](x, "µs→é", B=16, num_warps=2)  # naïve'


def test_keyword_added_to_call_without_arguments_and_with_trailing_comma():
    source = ('import triton\n\n@triton.jit\ndef k(B: triton.language.constexpr = 4):\n    pass\n\n'
              'def run():\n    k[(1,)]()\n    k[(2,)](\n        B=8,\n    )\n')
    result = source_ops.set_launch_keyword(source, "run:8", "num_warps", 1)
    assert "    k[(1,)](num_warps=1)\n" in result
    result = source_ops.set_launch_keyword(source, "run:9", "num_warps", 1)
    assert "        B=8, num_warps=1,\n    )\n" in result


def test_suggested_values():
    assert source_ops.suggested_values("block", 1024) == [256, 512, 1024, 2048, 4096]
    assert source_ops.suggested_values("block", 2) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    assert source_ops.suggested_values("block", 64) == [16, 32, 64, 128, 256, 512, 1024]
    assert source_ops.suggested_values("block", 48) == [48]
    # The value written is always among them (the start is the original's launch).
    assert source_ops.suggested_values("num_warps", 32) == [1, 2, 4, 8, 16, 32]
    assert source_ops.suggested_values("num_warps", 3) == [1, 2, 3, 4, 8, 16]
    assert source_ops.suggested_values("num_warps", 4) == [1, 2, 4, 8, 16]
    assert source_ops.suggested_values("num_stages", None) == [1, 2, 3, 4, 5]
    assert source_ops.suggested_values("block", True) == [False, True]


def test_autotune_configs_that_need_running_code_are_an_error():
    source = ('import triton\nfrom mylib import make_configs\n\n'
              '@triton.autotune(configs=make_configs(), key=[])\n@triton.jit\ndef k(B: triton.language.constexpr):\n'
              '    pass\n')
    with pytest.raises(SourceOpError, match="cannot be evaluated without running the module: NameError"):
        source_ops.autotune_to_space(source, "k")


def test_unreadable_autotune_is_a_knob_with_an_error_not_a_failure():
    source = ('import triton\nimport torch\nfrom mylib import make_configs\n\n'
              'def helper(dtype=torch.float16):\n    return dtype\n\n'
              '@triton.autotune(configs=make_configs(), key=[])\n@triton.jit\n'
              'def k(x, B: triton.language.constexpr):\n    pass\n\n'
              'def run(x):\n    k[(1,)](x, num_warps=4)\n')
    knobs = source_ops.find_knobs(source)
    broken = [k for k in knobs if k["kind"] == "autotune"]
    assert len(broken) == 1 and broken[0]["name"] is None
    assert "cannot be evaluated without running the module: NameError" in broken[0]["error"]


def test_null_bytes_are_a_parse_error():
    with pytest.raises(SourceOpError, match="does not parse"):
        source_ops.find_knobs("x = 1\0\n")


def _triton_launch_defaults() -> dict:
    """num_warps/num_stages of a launch that omits them, read from the installed Triton here (Triton 3.6.0's
    CUDAOptions: 4 and 3, also where Triton cannot be imported)."""
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
    except ImportError:
        return {"num_warps": 4, "num_stages": 3}
    fields = {f.name: f.default for f in dataclasses.fields(CUDAOptions)}
    return {"num_warps": fields["num_warps"], "num_stages": fields["num_stages"]}


LAUNCHES = ('import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x, B: tl.constexpr):\n    pass\n\n'
            'def run(x, nw):\n    k[(1,)](x, B=16)\n    k[(1,)](x, B=16, num_warps=8, num_stages=2)\n'
            '    k[(1,)](x, B=16, num_warps=nw)\n')


def test_launch_keyword_not_written_is_implied_by_triton_defaults():
    keywords = [k for k in source_ops.find_knobs(LAUNCHES) if k["kind"] == "launch_keyword"]
    by_site = {(k["site"], k["name"]): k for k in keywords}
    defaults = _triton_launch_defaults()
    for option in ("num_warps", "num_stages"):
        omitted = by_site[("run:9", option)]
        assert omitted["present"] is False and omitted["current"] is None
        assert omitted["implied"] == defaults[option]
        written = by_site[("run:10", option)]
        assert written["present"] is True and "implied" not in written
    assert by_site[("run:10", "num_warps")]["current"] == 8 and by_site[("run:10", "num_stages")]["current"] == 2
    # Written as an expression: present, its value known only at run time, nothing implied; the source's
    # own expression is the knob's current value and the first it suggests.
    computed = by_site[("run:11", "num_warps")]
    assert computed["current"] == source_ops.AS_WRITTEN and computed["expression"] == "nw"
    assert "implied" not in computed
    assert computed["suggested"] == [source_ops.AS_WRITTEN] + source_ops.NUM_WARPS_VALUES
    assert by_site[("run:11", "num_stages")]["implied"] == defaults["num_stages"]


def test_a_computed_launch_option_set_as_written_is_left_alone():
    assert source_ops.set_launch_keyword(LAUNCHES, "run:11", "num_warps", source_ops.AS_WRITTEN) == LAUNCHES
    assert "num_warps=2)" in source_ops.set_launch_keyword(LAUNCHES, "run:11", "num_warps", 2)
    with pytest.raises(source_ops.SourceOpError, match="no launch"):  # the site is still checked
        source_ops.set_launch_keyword(LAUNCHES, "run:99", "num_warps", source_ops.AS_WRITTEN)


def test_a_launch_option_written_outside_the_usual_values_is_among_its_suggestions():
    source = LAUNCHES.replace("num_warps=8, num_stages=2", "num_warps=32, num_stages=7")
    written = {k["name"]: k for k in source_ops.find_knobs(source) if k["site"] == "run:10"}
    assert written["num_warps"]["suggested"] == source_ops.NUM_WARPS_VALUES + [32]
    assert written["num_stages"]["suggested"] == source_ops.NUM_STAGES_VALUES + [7]
    assert written["num_warps"]["current"] == 32 and written["num_stages"]["current"] == 7


def test_the_start_of_an_accumulator_is_no_knob():
    """``N = 1`` then ``N *= d``: the literal is the identity of the update (any other value is wrong);
    a literal the scope does not update stays a knob, also at module level."""
    source = ('import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x, N, B: tl.constexpr):\n'
              '    pass\n\nTOTAL = 0\nBLOCK = 64\nTOTAL += 1\n\ndef run(x):\n    N = 1\n'
              '    for d in x.shape:\n        N *= d\n    k[(N // BLOCK, TOTAL)](x, N, B=BLOCK)\n')
    literals = [(k["site"], k["name"]) for k in source_ops.find_knobs(source) if k["kind"] == "literal"]
    assert literals == [("<module>:9", "BLOCK")]


def test_a_launch_option_written_as_a_literals_name_is_that_literals_knob():
    """``num_warps = 4`` ... ``num_warps=num_warps``: one knob, the literal (current 4), and no launch
    keyword knob that would override it with a value the source does not state; an option written as a
    name no literal assigns (a parameter) keeps its own knob."""
    source = ('import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x, B: tl.constexpr):\n'
              '    pass\n\ndef run(x, nw):\n    num_warps = 4\n    num_stages = 2\n'
              '    k[(1,)](x, B=16, num_warps=num_warps, num_stages=num_stages)\n'
              '    k[(1,)](x, B=16, num_warps=nw)\n')
    knobs = [(k["kind"], k["site"], k["name"], k["current"]) for k in source_ops.find_knobs(source)
             if k["name"] in ("num_warps", "num_stages")]
    assert knobs == [("literal", "run:9", "num_warps", 4), ("literal", "run:10", "num_stages", 2),
                     ("launch_keyword", "run:12", "num_warps", source_ops.AS_WRITTEN),
                     ("launch_keyword", "run:12", "num_stages", None)]


def test_launch_defaults_fall_back_to_the_table_without_triton(monkeypatch):
    source_ops.launch_defaults.cache_clear()
    try:
        installed = source_ops.launch_defaults()
        assert installed == _triton_launch_defaults()
        # The fallback table states the installed Triton's defaults (update it and its comment if not).
        assert source_ops.LAUNCH_DEFAULTS_FALLBACK == installed
        monkeypatch.setitem(sys.modules, "triton.backends.nvidia.compiler", None)  # the import fails
        source_ops.launch_defaults.cache_clear()
        assert source_ops.launch_defaults() == source_ops.LAUNCH_DEFAULTS_FALLBACK
        omitted = [k for k in source_ops.find_knobs(LAUNCHES) if k["site"] == "run:9" and "implied" in k]
        assert {k["name"]: k["implied"] for k in omitted} == source_ops.LAUNCH_DEFAULTS_FALLBACK
    finally:
        monkeypatch.undo()
        source_ops.launch_defaults.cache_clear()


PARAMETER_DEFAULTS = ('import triton\nimport triton.language as tl\n\n@triton.jit\n'
                      'def k(x, scale, n, B: tl.constexpr):\n    pass\n\n'
                      'def run(x, scale=1, n=4, BLOCK=64, *, num_warps=8):\n'
                      '    k[(n,)](x, scale, n, B=BLOCK, num_warps=num_warps)\n')


def test_a_wrapper_parameters_integer_default_is_a_knob_where_it_reaches_a_constexpr():
    """``def run(x, BLOCK=64)`` launching ``B=BLOCK``: the default is a literal knob (``parameter``); a
    default that reaches the kernel only as a runtime argument or through the grid (a scale, a count) is
    data, not a knob."""
    knobs = {k["name"]: k for k in source_ops.find_knobs(PARAMETER_DEFAULTS) if k["kind"] == "literal"}
    assert sorted(knobs) == ["BLOCK", "num_warps"]
    assert knobs["BLOCK"]["parameter"] is True and knobs["BLOCK"]["current"] == 64
    assert knobs["BLOCK"]["site"] == "run:8" and knobs["BLOCK"]["suggested"][:3] == [16, 32, 64]
    assert knobs["num_warps"]["current"] == 8 and knobs["num_warps"]["suggested"] == source_ops.NUM_WARPS_VALUES
    # the launch keyword written as that parameter's name is the default's knob only
    assert not [k for k in source_ops.find_knobs(PARAMETER_DEFAULTS)
                if k["kind"] == "launch_keyword" and k["name"] == "num_warps"]
    changed = source_ops.lift_literal(PARAMETER_DEFAULTS, "run:8", "BLOCK", "256")
    assert changed == PARAMETER_DEFAULTS.replace("BLOCK=64", "BLOCK=256")
    assert source_ops.lift_literal(changed, "run:8", "num_warps", "2") == \
        changed.replace("num_warps=8):", "num_warps=2):")


def test_a_default_that_also_shapes_a_buffer_or_is_assigned_again_is_no_knob():
    """int8_quantization's ``BLKQ`` sizes the scales it allocates (its contract, not a tile); a default
    the function assigns again may never be what it reads; a grid computed from the default is fine."""
    source = ('import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\n'
              'def k(x, B: tl.constexpr):\n    pass\n\n'
              'def run(x, BLOCK=64, TILE=32, LAST=16):\n'
              '    scale = torch.empty(x.numel() // TILE)\n    LAST = 8\n'
              '    grid = (triton.cdiv(x.numel(), BLOCK),)\n'
              '    k[grid](x, B=BLOCK)\n    k[grid](x, B=TILE)\n    k[grid](x, B=LAST)\n    return scale\n')
    assert [(k["name"], k.get("parameter")) for k in source_ops.find_knobs(source) if k["kind"] == "literal"] == \
        [("BLOCK", True), ("LAST", None)]


def test_a_default_the_callers_pass_leaves_the_launch_option_its_own_knob():
    knobs = source_ops.find_knobs(PARAMETER_DEFAULTS, passed={"run": {"num_warps"}})
    warps = [(k["kind"], k["current"]) for k in knobs if k["name"] == "num_warps"]
    assert warps == [("launch_keyword", source_ops.AS_WRITTEN)]
    assert [k["name"] for k in knobs if k["kind"] == "literal"] == ["BLOCK"]


def test_a_module_constant_a_function_binds_again_is_not_what_it_reads():
    source = ('import triton\nimport triton.language as tl\n\nBLOCK = 32\nWIDTH = 8\n\n@triton.jit\n'
              'def k(x, B: tl.constexpr, W: tl.constexpr):\n    pass\n\n'
              'def run(x, BLOCK=64):\n    k[(x.numel() // BLOCK,)](x, B=BLOCK, W=WIDTH)\n\n'
              'def other(x, BLOCK):\n    k[(BLOCK,)](x, B=BLOCK, W=4)\n')
    literals = [(k["site"], k["name"], k.get("parameter")) for k in source_ops.find_knobs(source)
                if k["kind"] == "literal"]
    assert literals == [("<module>:5", "WIDTH", None), ("run:11", "BLOCK", True)]


def test_a_launch_through_a_local_alias_of_like_kernels_is_a_launch():
    source = ('import triton\nimport triton.language as tl\n\n@triton.jit\ndef fa(x, B: tl.constexpr):\n    pass\n\n'
              '@triton.jit\ndef fb(x, B: tl.constexpr):\n    pass\n\n'
              '@triton.jit\ndef fc(x, y, B: tl.constexpr):\n    pass\n\n'
              'def run(x, alt):\n    fx = fb if alt else fa\n    fx[(1,)](x, B=16, num_warps=8)\n'
              '    fy = fa if alt else fc\n    fy[(1,)](x, x, B=16)\n')
    module = source_ops.Module(source)
    assert [(launch.kernel.name, launch.site) for launch in module.launches] == [("fa", "run:18")]
    knobs = {(k["kind"], k["name"]): k["current"] for k in source_ops.find_knobs(source)}
    assert knobs[("launch_constexpr", "B")] == 16 and knobs[("launch_keyword", "num_warps")] == 8
    assert "num_warps=2" in source_ops.set_launch_keyword(source, "run:18", "num_warps", 2)


REACH = ('import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\n'
         'def k(x, B: tl.constexpr):\n    pass\n\n'
         'def helper(x):\n    k[(1,)](x, B=16)\n\n'
         'def unused(x):\n    k[(1,)](x, B=32)\n\n'
         'class Fn(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n'
         '        helper(x)\n        return x\n\n    @staticmethod\n    def backward(ctx, g):\n'
         '        k[(1,)](g, B=64)\n        return g\n\n'
         'alias = Fn.apply\n')


def test_the_functions_a_caller_reaches():
    """From the harness's identifiers: Fn reaches forward (and from it helper), not backward, unless
    something reached names backward; nothing names unused; the module's own code reaches what it names."""
    assert source_ops.reachable_functions(REACH, {"Fn", "apply", "x"}) == {"Fn.forward", "helper", "k"}
    assert "Fn.backward" in source_ops.reachable_functions(REACH, {"Fn", "apply", "backward"})
    # `alias = Fn.apply` at module level names Fn: reached by importing the module at all
    assert source_ops.reachable_functions(REACH, set()) == {"Fn.forward", "helper", "k"}
    knobs = source_ops.find_knobs(REACH)
    live = source_ops.reached_knobs(REACH, knobs, source_ops.reachable_functions(REACH, {"Fn"}))
    assert {k["site"] for k in knobs if k["kind"] == "launch_constexpr"} == {"helper:10", "unused:13", "Fn.backward:23"}
    assert {k["site"] for k in live} == {"helper:10"}


def test_a_module_constant_bound_again_later_is_no_knob():
    """A function called after the import reads a module name's last top-level binding."""
    source = ('import triton\nimport triton.language as tl\n\nBLOCK: int = 32\nWIDTH = 4\n\n@triton.jit\n'
              'def k(x, B: tl.constexpr, W: tl.constexpr):\n    pass\n\n'
              'def run(x):\n    k[(1,)](x, B=BLOCK, W=WIDTH)\n\nBLOCK = 64\n'
              'if x := 0:\n    WIDTH = 8\n')
    literals = [(k["site"], k["name"], k["current"]) for k in source_ops.find_knobs(source) if k["kind"] == "literal"]
    # WIDTH's later binding is conditional, so both of its literals stay (each may be the one read)
    assert literals == [("<module>:5", "WIDTH", 4), ("<module>:14", "BLOCK", 64), ("<module>:16", "WIDTH", 8)]


def test_code_that_runs_at_import_reaches_what_it_names():
    """A class body's ``forward = staticmethod(_fwd)`` and a decorator's argument run at import."""
    source = ('import torch\nimport triton\nimport triton.language as tl\n\n@triton.jit\n'
              'def k(x, B: tl.constexpr):\n    pass\n\n'
              'def _fwd(ctx, x):\n    k[(1,)](x, B=16)\n    return x\n\n'
              'def register(f):\n    return lambda fn: fn\n\ndef hook(x):\n    k[(1,)](x, B=32)\n\n'
              'class Fn(torch.autograd.Function):\n    forward = staticmethod(_fwd)\n\n'
              '@register(hook)\ndef unrelated(x):\n    return x\n')
    reached = source_ops.reachable_functions(source, {"Fn", "apply"})
    assert {"_fwd", "hook", "register"} <= reached and "unrelated" not in reached


def test_the_latent_cases_a_second_reading_found():
    """Each would drop a knob that takes effect: a default capped by the function (``BLOCK = min(BLOCK,
    n)``) or read in an ``assert``; a module constant doubled later (``BLOCK = BLOCK * 2``) or named
    only as a comprehension's variable; an autotuned kernel launched by a helper it is handed to."""
    capped = ('import triton\nimport triton.language as tl\n\n@triton.jit\ndef k(x, B: tl.constexpr):\n    pass\n\n'
              'def run(x, n, BLOCK=1024, TILE=64):\n    BLOCK = min(BLOCK, n)\n    assert TILE % 16 == 0\n'
              '    k[(1,)](x, B=BLOCK)\n    k[(1,)](x, B=TILE)\n')
    assert [(k["name"], k["current"]) for k in source_ops.find_knobs(capped) if k["kind"] == "literal"] == \
        [("BLOCK", 1024), ("TILE", 64)]
    doubled = ('import triton\nimport triton.language as tl\n\nBLOCK = 64\nBLOCK = BLOCK * 2\n\n@triton.jit\n'
               'def k(x, B: tl.constexpr):\n    pass\n\n'
               'def run(x):\n    sizes = [BLOCK for BLOCK in range(3)]\n    k[(1,)](x, B=BLOCK)\n')
    assert [(k["site"], k["name"]) for k in source_ops.find_knobs(doubled) if k["kind"] == "literal"] == \
        [("<module>:4", "BLOCK")]
    handed = ('import triton\nimport triton.language as tl\n\n'
              '@triton.autotune(configs=[triton.Config({"B": 16}), triton.Config({"B": 32})], key=[])\n'
              '@triton.jit\ndef ka(x, B: tl.constexpr):\n    pass\n\n'
              'def launch(kern, x):\n    kern[(1,)](x)\n\ndef unused(x):\n    ka[(1,)](x)\n\n'
              'def run(x):\n    launch(ka, x)\n')
    knobs = source_ops.find_knobs(handed)
    live = source_ops.reached_knobs(handed, knobs, source_ops.reachable_functions(handed, {"run"}))
    assert [k["name"] for k in live if k["kind"] == "autotune"] == [k["name"] for k in knobs if k["kind"] == "autotune"]
    assert live
