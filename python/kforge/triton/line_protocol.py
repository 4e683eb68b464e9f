"""The JSON-lines protocol loop shared by kforge's Python processes that the runner drives (the Triton
compile server and the program worker): one request object per line on stdin, one answer per line on a
private copy of stdout.

Contract of ``serve``: blank lines are skipped; ``{"op": "exit"}`` ends the loop (0); every other request
gets exactly one answer line, whatever happens: ``handle(op, request)``'s answer, or ``failure(request,
message, internal)`` for a line that is not a JSON object, a ``BadRequest`` (``internal`` false) or an
exception of the handler (``internal`` true: logged to stderr with its traceback). NaN and infinities in
answers become null (the C++ side's JSON parser refuses them). An answer with ``"fatal": true`` ends the
loop with 3 after it is written (the process's state is not to be trusted)."""

from __future__ import annotations

import json
import math
import os
import sys
import traceback
from typing import Any, Callable


class BadRequest(Exception):
    """A request that does not follow the protocol. Its message says which field and why."""


def request_id(request: Any):
    return request.get("id") if isinstance(request, dict) else None


def finite(value: Any) -> Any:
    """``value`` with NaN and infinities replaced by None, through dicts, lists and tuples."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(x) for k, x in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(x) for x in value]
    return value


def _json_default(value: Any):
    if isinstance(value, float) or hasattr(value, "__float__"):
        f = float(value)
        return None if math.isnan(f) or math.isinf(f) else f
    return str(value)


def claim_stdout():
    """The protocol's stream: a private copy of stdout. File descriptor 1 and sys.stdout then point to
    stderr, so that nothing else (a program's prints, Triton's, ptxas run as a child process) reaches the
    protocol."""
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol


def serve(lines, out, handle: Callable[[Any, dict], dict],
          failure: Callable[[Any, str, bool], dict]) -> int:
    for line in lines:
        if not line.strip():
            continue
        request, answer = None, None
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise BadRequest("a request is a JSON object")
            op = request.get("op")
            if op == "exit":
                return 0
            answer = handle(op, request)
        except ValueError as e:
            answer = failure(None, f"bad request: not JSON: {e}", False)
        except BadRequest as e:
            answer = failure(request, f"bad request: {e}", False)
        except Exception as e:  # a bug of the process: answered and logged
            traceback.print_exc(file=sys.stderr)
            answer = failure(request, f"internal error: {type(e).__name__}: {e}", True)
        out.write(json.dumps(finite(answer), default=_json_default, allow_nan=False) + "\n")
        out.flush()
        if answer.get("fatal"):
            return 3
    return 0
