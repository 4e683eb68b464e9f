"""Every Triton suite kernel (experiments/kernels-triton/*/kernel.yaml) compiles for sm_90 without a GPU:
its default configuration, its reference, and 20 random valid configurations (seeded by the kernel's
name), through the compile server's protocol (two server processes in parallel).

Requests are built as kforge's C++ side is to build them: every pointer argument in divisible_by_16
(kforge's buffers are 256-byte aligned), plus the integer arguments that are multiples of 16 at the
shape compiled for (here the time shape; Triton's own JIT specialises the same way). The default
configuration is also compiled with pointers only, the variant a shape of other sizes gets.
"""

import itertools
import random
import re
import zlib
from pathlib import Path

import pytest
import yaml

from server_client import REPO, compile_all

SUITE = REPO / "experiments" / "kernels-triton"
KERNELS = sorted(p.parent.name for p in SUITE.glob("*/kernel.yaml"))
RANDOM_CONFIGURATIONS = 20
SEED = 11                                   # combined with the kernel's name
H200_MAX_SHARED = 227 * 1024                # opt-in dynamic shared memory per block (bytes)
LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")
TRITON_TYPES = {"f32": "fp32", "f64": "fp64", "f16": "fp16", "bf16": "bf16", "i8": "i8", "u8": "u8",
                "i16": "i16", "u16": "u16", "i32": "i32", "u32": "u32", "i64": "i64", "u64": "u64"}


def load_description(name: str) -> dict:
    path = SUITE / name / "kernel.yaml"
    description = yaml.safe_load(path.read_text())
    assert description.get("language") == "triton", f"{path}: language is not triton"
    return description


def parameter_values(parameter: dict) -> list:
    values = parameter["values"]
    return eval(values, {}) if isinstance(values, str) else list(values)


def default_configuration(description: dict) -> dict:
    return {p["name"]: p.get("default", parameter_values(p)[0]) for p in description["parameters"]}


def valid_configurations(description: dict) -> list[dict]:
    """Every configuration satisfying the constraints (Python expressions), in enumeration order."""
    names = [p["name"] for p in description["parameters"]]
    constraints = [compile(c, "constraint", "eval") for c in description.get("constraints", [])]
    valid = []
    for values in itertools.product(*(parameter_values(p) for p in description["parameters"])):
        configuration = dict(zip(names, values))
        if all(eval(c, {"__builtins__": {"max": max, "min": min}}, dict(configuration)) for c in constraints):
            valid.append(configuration)
    return valid


def sample_configurations(name: str, description: dict) -> list[dict]:
    """The default configuration and RANDOM_CONFIGURATIONS other valid ones, chosen with a seed."""
    default = default_configuration(description)
    others = [c for c in valid_configurations(description) if c != default]
    rng = random.Random(SEED ^ zlib.crc32(name.encode()))
    return [default] + rng.sample(others, min(RANDOM_CONFIGURATIONS, len(others)))


def kernel_parameters(source: str, entry: str) -> list[tuple[str, bool]]:
    """(name, is_constexpr) of the @triton.jit function `entry`, read from its def line(s)."""
    match = re.search(rf"def {entry}\((.*?)\):", source, re.S)
    assert match, f"no def {entry} in the source"
    params = [p.strip() for p in match.group(1).split(",") if p.strip()]
    return [(p.split(":")[0].strip(), "constexpr" in p) for p in params]


def compile_request(name: str, description: dict, entry: str, configuration: dict, cache_dir: Path,
                    pointers_only: bool = False) -> dict:
    source = (SUITE / name / description["source"]).read_text()
    shape = description["shapes"]["time"][0]
    arguments = description["arguments"]
    params = kernel_parameters(source, entry)
    runtime = [p for p, constexpr in params if not constexpr]
    assert len(runtime) == len(arguments), f"{name}: {entry} takes {runtime}, kernel.yaml lists {len(arguments)}"
    signature, divisible = {}, []
    for param, argument in zip(runtime, arguments):
        if "buffer" in argument:
            signature[param] = "*" + TRITON_TYPES[argument["buffer"]]
            divisible.append(param)
        else:
            signature[param] = TRITON_TYPES[argument["scalar"]]
            value = eval(str(argument["value"]), {}, dict(shape))
            if not pointers_only and argument["scalar"][0] in "iu" and value % 16 == 0:
                divisible.append(param)
    fixed = {k: eval(str(v), {}, dict(shape)) for k, v in description.get("constexprs", {}).items()}
    constexprs = {**fixed, **{k: v for k, v in configuration.items() if k not in LAUNCH_OPTIONS}}
    for param, constexpr in params:
        if constexpr:
            signature[param] = "constexpr"
    return {"op": "compile", "id": f"{name}/{entry}/{configuration}{' pointers only' if pointers_only else ''}",
            "source": source, "file_name": description["source"], "entry": entry, "signature": signature,
            "constexprs": constexprs, "divisible_by_16": divisible,
            "options": {k: v for k, v in configuration.items() if k in LAUNCH_OPTIONS}, "arch": 90,
            "cache_dir": str(cache_dir)}


@pytest.mark.parametrize("name", KERNELS)
def test_description_is_consistent(name):
    description = load_description(name)
    default = default_configuration(description)
    assert default in valid_configurations(description), f"{name}: the default configuration is not valid"
    source = (SUITE / name / description["source"]).read_text()
    constexprs = {p for p, c in kernel_parameters(source, description["entry"]) if c}
    tuned = {p["name"] for p in description["parameters"]} - set(LAUNCH_OPTIONS)
    assert tuned | set(description.get("constexprs", {})) == constexprs, \
        f"{name}: parameters + constexprs do not name exactly the entry's constexpr parameters {sorted(constexprs)}"
    reference = description["reference"]
    assert kernel_parameters(source, reference["entry"]) == kernel_parameters(source, description["entry"]), \
        f"{name}: the reference's signature differs from the entry's"


def test_suite_compiles_for_sm90(tmp_path):
    requests = []
    for name in KERNELS:
        description = load_description(name)
        configurations = sample_configurations(name, description)
        requests += [compile_request(name, description, description["entry"], c, tmp_path) for c in configurations]
        requests.append(compile_request(name, description, description["entry"], configurations[0], tmp_path,
                                        pointers_only=True))
        requests.append(compile_request(name, description, description["reference"]["entry"], configurations[0],
                                        tmp_path))
    answers = compile_all(requests, servers=2)
    failures = [f"{a['id']}: {a.get('log') or a.get('error')}" for a in answers if not a["ok"]]
    assert not failures, "\n\n".join(failures)
    problems = []
    for request, answer in zip(requests, answers):
        metadata = answer["metadata"]
        if metadata["shared"] > H200_MAX_SHARED:
            problems.append(f"{request['id']}: {metadata['shared']} bytes of shared memory (a valid "
                            f"configuration must fit in {H200_MAX_SHARED}: tighten the constraints)")
        if metadata["global_scratch_size"] or metadata["profile_scratch_size"]:
            problems.append(f"{request['id']}: needs scratch memory")
        ptx = Path(answer["cubin_path"]).with_suffix(".ptx").read_text()
        entry = re.search(r"\.entry\s+\w+\(([^)]*)\)", ptx).group(1)
        if entry.count(".param") != len(answer["params"]) + 2:
            problems.append(f"{request['id']}: the cubin entry does not take params + the two scratch pointers")
    assert not problems, "\n".join(problems)
    seconds = sorted(a["seconds"] for a in answers)
    print(f"\n{len(answers)} compiles: total {sum(seconds):.1f} s, median {seconds[len(seconds) // 2]:.2f} s, "
          f"max {seconds[-1]:.2f} s")
