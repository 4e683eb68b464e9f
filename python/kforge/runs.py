"""Reading run folders from Python: trials as records (dicts) or a pandas DataFrame (pandas optional).

    run = kforge.open_run("runs/conv-a100-...")
    run.records()[0]       # {'sequence': 0, 'status': 'ok', 'time_ms': 1.23, 'block_size_x': 32, ...}
    df = run.to_dataframe()
"""
from __future__ import annotations

import math

import kforge


class Run:
    """A run folder opened read-only (it may belong to a running process, or be on a read-only disk)."""

    def __init__(self, folder):
        self.folder = str(folder)
        self.store = kforge.RunStore(self.folder, "r")
        self.space = self.store.space

    def trials(self):
        """Every trial (kforge.Trial), by sequence."""
        return self.store.trials()

    def meta(self, key):
        """A run-level record: experiment, run, space, evaluator, finished, interrupted, failed; None if absent."""
        return self.store.meta(key)

    def summary(self):
        """What `kforge report --json` prints for this run."""
        return kforge.read_run(self.folder)

    def records(self):
        """One flat dict per trial: sequence, status, time_ms (None unless ok), the parameters' values, clock_s,
        batch, the costs by stage (cost_compile, ...), error, device, and the metrics by name."""
        out = []
        for t in self.trials():
            rec = {"sequence": t.sequence, "status": t.status,
                   "time_ms": None if math.isnan(t.time_ms) else t.time_ms}
            rec.update(self.space.values(t.config))
            rec["clock_s"] = t.clock_s
            rec["batch"] = t.batch
            for stage, seconds in t.cost.items():
                rec["cost_" + stage] = seconds
            rec["error"] = t.error
            rec["device"] = t.device
            rec["timestamp"] = t.timestamp
            rec.update(t.metrics)
            out.append(rec)
        return out

    def to_dataframe(self):
        """The records as a pandas DataFrame, indexed by sequence. Needs pandas (python/requirements.txt)."""
        try:
            import pandas
        except ImportError as e:
            raise ImportError("Run.to_dataframe() needs pandas: pip install pandas (or use Run.records())") from e
        return pandas.DataFrame.from_records(self.records(), index="sequence")

    def __len__(self):
        return len(self.store)

    def __repr__(self):
        return f"kforge.runs.Run({self.folder!r}: {len(self)} trials)"
