"""The compile server's protocol, end to end: a real server process, JSON lines in and out
(the contract in python/kforge/triton/compile_server.py)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from server_client import REPO, CompileServer, compile_all

VECTOR_ADD = '''"""Elementwise add for the compile-server tests."""
import triton
import triton.language as tl


@triton.jit
def _add_pair(a, b):
    return a + b


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, _add_pair(x, y), mask=mask)


@triton.jit
def _odd_range(start):
    return start + tl.arange(0, 3)


@triton.jit
def broken_helper_user(x_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, _missing_helper(offs))


@triton.jit
def odd_range_user(x_ptr, BLOCK: tl.constexpr):
    offs = _odd_range(0)
    tl.store(x_ptr + offs, offs.to(tl.float32))
'''

SIGNATURE = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
POINTERS = ["x_ptr", "y_ptr", "out_ptr"]


def add_request(directory, request_id=1, **changes):
    request = {"op": "compile", "id": request_id, "source": VECTOR_ADD, "file_name": "vector_add.py",
               "entry": "add_kernel", "signature": dict(SIGNATURE), "constexprs": {"BLOCK": 1024},
               "divisible_by_16": POINTERS + ["n"],
               "options": {"num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None}, "arch": 90,
               "cache_dir": str(directory)}
    request.update(changes)
    return request


@pytest.fixture(scope="module")
def server():
    with CompileServer() as s:
        yield s


def ptx_of(answer) -> str:
    return Path(answer["cubin_path"]).with_suffix(".ptx").read_text()


def test_hello(server):
    answer = server.request({"op": "hello"})
    assert answer == {"ok": True, "triton": "3.6.0", "python": ".".join(map(str, sys.version_info[:3])),
                      "pid": server.process.pid}


def test_compile_answers_the_cubin_and_launch_metadata(server, tmp_path):
    answer = server.request(add_request(tmp_path, request_id=7))
    assert answer["ok"], answer
    assert answer["id"] == 7 and answer["cache_hit"] is False and answer["seconds"] > 0
    assert re.fullmatch(r"[0-9a-f]{64}", answer["key"])
    assert answer["cubin_path"] == str(tmp_path / f"{answer['key']}.cubin")
    cubin = Path(answer["cubin_path"]).read_bytes()
    assert cubin[:4] == b"\x7fELF"
    assert answer["name"] == "add_kernel" and answer["name"].encode() in cubin
    assert answer["params"] == ["x_ptr", "y_ptr", "out_ptr", "n"]
    metadata = answer["metadata"]
    assert metadata == {**metadata, "shared": 0, "num_warps": 4, "num_ctas": 1, "cluster_dims": [1, 1, 1],
                        "global_scratch_size": 0, "global_scratch_align": 1, "profile_scratch_size": 0,
                        "profile_scratch_align": 1, "maxnreg": None, "launch_cooperative_grid": False,
                        "launch_pdl": False, "tensordesc_meta": None, "spills": 0}
    assert isinstance(metadata["registers"], int) and 8 <= metadata["registers"] <= 255
    assert "Used" in answer["log"] and "registers" in answer["log"]
    # the entry takes params, then Triton's global and profile scratch pointers; 32 * num_warps threads
    ptx = ptx_of(answer)
    assert re.search(r"\.entry\s+add_kernel\(([^)]*)\)", ptx).group(1).count(".param") == 4 + 2
    assert ".reqntid 128" in ptx


def test_cache_hit_returns_the_stored_result(tmp_path):
    with CompileServer() as first:
        miss = first.request(add_request(tmp_path))
    with CompileServer() as second:   # another process sharing the directory
        hit = second.request(add_request(tmp_path, request_id=2))
    assert hit["cache_hit"] is True and hit["seconds"] == 0 and hit["id"] == 2
    strip = lambda a: {k: v for k, v in a.items() if k not in ("id", "cache_hit", "seconds")}
    assert strip(hit) == strip(miss)


def test_key_covers_every_input(server, tmp_path):
    keys = {server.request(add_request(tmp_path))["key"]}
    variants = [{"constexprs": {"BLOCK": 512}}, {"divisible_by_16": POINTERS},
                {"options": {"num_warps": 8}}, {"source": VECTOR_ADD + "\n# changed\n"},
                {"signature": {**SIGNATURE, "n": "i64"}}, {"arch": 80}, {"file_name": "other.py"}]
    for change in variants:
        keys.add(server.request(add_request(tmp_path, **change))["key"])
    assert len(keys) == 1 + len(variants)
    # null options are "not set": the same key as leaving them out
    assert server.request(add_request(tmp_path, options={"num_warps": 8, "maxnreg": None}))["key"] == \
        server.request(add_request(tmp_path, options={"num_warps": 8}))["key"]


def test_divisibility_vectorises_memory_accesses(server, tmp_path):
    """Triton 3.6 vectorises the masked accesses only when the pointers are aligned AND n (the mask's
    bound) is a multiple of 16: aligned pointers alone still give scalar loads."""
    for divisible in ([], POINTERS):
        scalar = ptx_of(server.request(add_request(tmp_path, divisible_by_16=divisible)))
        assert "ld.global.v4.b32" not in scalar and "ld.global.b32" in scalar, divisible
    vector = ptx_of(server.request(add_request(tmp_path, divisible_by_16=POINTERS + ["n"])))
    assert "ld.global.v4.b32" in vector and "st.global.v4.b32" in vector


def test_options_reach_the_compiler(server, tmp_path):
    answer = server.request(add_request(tmp_path, options={"num_warps": 8, "maxnreg": 40}))
    assert answer["metadata"]["num_warps"] == 8 and answer["metadata"]["maxnreg"] == 40
    assert ".maxnreg 40" in ptx_of(answer) and ".reqntid 256" in ptx_of(answer)


def test_constexpr_default_is_used_when_not_given(server, tmp_path):
    source = VECTOR_ADD.replace("BLOCK: tl.constexpr):\n    offs = tl.program_id", "BLOCK: tl.constexpr = 256):\n"
                                "    offs = tl.program_id")
    answer = server.request(add_request(tmp_path, source=source, constexprs={}))
    assert answer["ok"], answer


def test_compile_error_is_data_and_points_at_the_line(server, tmp_path):
    answer = server.request(add_request(tmp_path, constexprs={"BLOCK": 1000}))
    assert answer["ok"] is False and "error" not in answer
    lines = answer["log"].split("\n")
    assert lines[0] == "vector_add.py:13:38: ValueError: arange's range must be a power of 2"
    assert lines[1] == "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)"
    assert lines[2] == " " * 38 + "^"
    again = server.request(add_request(tmp_path, constexprs={"BLOCK": 1000}))
    assert again["cache_hit"] is True and again["log"] == answer["log"]
    assert server.request({"op": "hello"})["ok"]   # the server lives on


def test_undefined_name_is_located(server, tmp_path):
    answer = server.request(add_request(tmp_path, entry="broken_helper_user",
                                        signature={"x_ptr": "*fp32", "BLOCK": "constexpr"}, divisible_by_16=[]))
    assert answer["ok"] is False
    assert answer["log"].startswith("vector_add.py:28:27: NameError('_missing_helper is not defined')")


def test_error_inside_a_called_jit_function_points_into_it(server, tmp_path):
    answer = server.request(add_request(tmp_path, entry="odd_range_user",
                                        signature={"x_ptr": "*fp32", "BLOCK": "constexpr"}, divisible_by_16=[]))
    assert answer["ok"] is False
    first, pointed = answer["log"].split("\n")[:2]
    assert first == "vector_add.py:22:19: ValueError: arange's range must be a power of 2", answer["log"]
    assert pointed == "    return start + tl.arange(0, 3)"


@pytest.mark.parametrize("change,message", [
    ({"source": "import triton\ndef broken(:\n"}, "vector_add.py:2:12: SyntaxError"),
    ({"source": "import triton\nraise RuntimeError('no GPU libraries here')\n"},
     "vector_add.py:2: RuntimeError: no GPU libraries here (while importing the module)"),
    ({"entry": "nope"}, "entry 'nope' is not defined"),
    ({"entry": "triton"}, "entry 'triton' is not a @triton.jit function"),
    ({"signature": {"x_ptr": "*fp32", "BLOCK": "constexpr"}}, "missing y_ptr, out_ptr, n"),
    ({"constexprs": {}}, "constexpr 'BLOCK' of add_kernel has no value"),
    ({"constexprs": {"BLOCK": 64, "n": 3}}, "constexprs gives 'n', which the signature types 'i32'"),
    ({"divisible_by_16": ["BLOCK"]}, "divisible_by_16 names 'BLOCK'"),
    ({"options": {"num_warps": 3}}, "vector_add.py: AssertionError: num_warps must be a power of 2"),
])
def test_failures_of_the_source_are_logs(server, tmp_path, change, message):
    answer = server.request(add_request(tmp_path, **change))
    assert answer["ok"] is False and "error" not in answer, answer
    assert message in answer["log"], answer["log"]


@pytest.mark.parametrize("request_line,message", [
    ("not json", "bad request: not JSON"),
    ("[1, 2]", "bad request: a request is a JSON object"),
    ('{"op": "fly", "id": 3}', "bad request: unknown op 'fly'"),
])
def test_malformed_lines_are_bad_requests(server, request_line, message):
    server.send_line(request_line)
    answer = server.read_answer()
    assert answer["ok"] is False and answer["error"].startswith(message)


@pytest.mark.parametrize("change,message", [
    ({"options": {"num_warpz": 4}}, "bad request: unknown option 'num_warpz'"),
    ({"options": {"arch": "sm80"}}, "bad request: unknown option 'arch'"),
    ({"options": {"num_warps": "4"}}, "bad request: option 'num_warps': expected an integer or null"),
    ({"signature": {**SIGNATURE, "n": "int"}}, "bad request: signature['n']: unsupported type 'int'"),
    ({"source": None}, "bad request: field 'source': expected str"),
    ({"arch": "90"}, "bad request: field 'arch': expected int"),
    ({"cache_dir": "relative/dir"}, "bad request: cache_dir 'relative/dir' is not an absolute path"),
    ({"file_name": "../escape.py"}, "bad request: file_name"),
])
def test_malformed_requests_name_the_field(server, tmp_path, change, message):
    answer = server.request(add_request(tmp_path, request_id=9, **change))
    assert answer["id"] == 9 and answer["ok"] is False
    assert answer["error"].startswith(message), answer["error"]


def test_missing_field_is_a_bad_request(server, tmp_path):
    request = add_request(tmp_path)
    del request["entry"]
    assert server.request(request)["error"] == "bad request: missing field 'entry'"


def test_nothing_but_answers_on_stdout_and_exit_status(tmp_path):
    """Several requests through a pipe, then exit: every stdout line is one JSON answer."""
    lines = [json.dumps({"op": "hello"}), json.dumps(add_request(tmp_path, constexprs={"BLOCK": 1000})),
             json.dumps(add_request(tmp_path)), json.dumps({"op": "exit"}), json.dumps({"op": "hello"})]
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    done = subprocess.run([sys.executable, str(REPO / "python/kforge/triton/compile_server.py")],
                          input="\n".join(lines) + "\n", capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a.get("ok") for a in answers] == [True, False, True]   # nothing after exit


def test_end_of_input_ends_the_server(tmp_path):
    with CompileServer() as s:
        s.process.stdin.close()
        assert s.process.wait(timeout=60) == 0


def test_parallel_servers_share_one_cache(tmp_path):
    """Two processes compiling the same keys at once: both succeed, every file complete."""
    requests = [add_request(tmp_path, request_id=i, constexprs={"BLOCK": 256 << (i % 3)}) for i in range(6)]
    answers = compile_all(requests, servers=2)
    assert all(a["ok"] for a in answers)
    assert len({a["key"] for a in answers}) == 3
    leftovers = [p.name for p in tmp_path.rglob("*.tmp.*")]
    assert not leftovers
    for a in answers:
        stored = json.loads((tmp_path / f"{a['key']}.json").read_text())
        assert stored["ok"] and Path(a["cubin_path"]).stat().st_size > 1000


def test_loaded_modules_stay_bounded(tmp_path):
    """Each distinct source is imported as its own module; only the last few stay in sys.modules."""
    from kforge.triton.compile_server import MODULE_CACHE_SIZE, CacheDir, ModuleCache
    cache, modules = CacheDir(str(tmp_path)), ModuleCache()
    for i in range(MODULE_CACHE_SIZE + 5):
        module = modules.load(cache.source_file(f"VALUE = {i}\n", "numbers.py"))
        assert module.VALUE == i
    loaded = [name for name in sys.modules if name.startswith("kforge_triton_src_")]
    assert len(loaded) == MODULE_CACHE_SIZE
