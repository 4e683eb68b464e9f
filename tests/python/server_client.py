"""A client of kforge's Triton compile server for the tests: spawns `python -m kforge.triton.compile_server`
(the interpreter running the tests, PYTHONPATH=<repo>/python) and speaks its JSON-lines protocol."""

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class CompileServer:
    """One server process. request() sends one object and returns the answer (None after exit)."""

    def __init__(self):
        env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
        self.process = subprocess.Popen([sys.executable, "-m", "kforge.triton.compile_server"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, env=env)
        self.stderr_lines = []
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()

    def _read_stderr(self):
        for line in self.process.stderr:
            self.stderr_lines.append(line)

    def send_line(self, line: str):
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def read_answer(self):
        line = self.process.stdout.readline()
        return json.loads(line) if line else None

    def request(self, obj: dict):
        self.send_line(json.dumps(obj))
        if obj.get("op") == "exit":
            return None
        return self.read_answer()

    def close(self, timeout: float = 30) -> int:
        if self.process.poll() is None:
            try:
                self.request({"op": "exit"})
            except BrokenPipeError:
                pass
        code = self.process.wait(timeout=timeout)
        self._drain.join(timeout=5)
        return code

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.process.poll() is None:
            self.close()


def compile_all(requests: list[dict], servers: int = 2) -> list[dict]:
    """Answers to `requests` (in their order), compiled by `servers` server processes in parallel."""
    work = queue.Queue()
    for index, request in enumerate(requests):
        work.put((index, request))
    answers: list = [None] * len(requests)
    pool = [CompileServer() for _ in range(servers)]

    def run(server: CompileServer):
        while True:
            try:
                index, request = work.get_nowait()
            except queue.Empty:
                return
            answers[index] = server.request(request)

    threads = [threading.Thread(target=run, args=(s,)) for s in pool]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for server in pool:
        server.close()
    return answers
