"""kforge's native module (import kforge instead)"""

from collections.abc import Mapping, Sequence

from kforge import ConfigError as ConfigError, Error as Error


def version() -> str:
    """kforge's version."""

class Space:
    """
    A search space: typed parameters (each a list of values) and constraints between them. A configuration is a tuple of value indices, one per parameter; dicts {parameter: value} are accepted wherever a configuration is.
    """

    def __init__(self, params: dict, constraints: object | None = None, constants: object | None = None, configs: object | None = None) -> None:
        """
        A space from {name: [values...]}, constraints as Python expressions over the names (and `constants`), or `configs`: exactly these configurations are valid.
        """

    @staticmethod
    def from_t1(path: str) -> Space:
        """The space of a T1 file (the community format)."""

    @staticmethod
    def from_kernel(path: str) -> Space:
        """The space of a kforge kernel description (docs/kernel.md)."""

    @staticmethod
    def from_recording(path: str) -> Space:
        """
        The space of a recording (Kernel Tuner cache, T4 results, KTT output): its recorded configurations are the valid ones.
        """

    @property
    def names(self) -> list[str]:
        """The parameter names, in order."""

    @property
    def parameters(self) -> dict:
        """{name: [values...]} in parameter order."""

    @property
    def constraints(self) -> list[str]: ...

    @property
    def dimension(self) -> int: ...

    @property
    def cartesian_size(self) -> float:
        """Product of the value-list sizes."""

    @property
    def size(self) -> int:
        """Number of valid configurations (enumerates the space on first use)."""

    def __len__(self) -> int: ...

    @property
    def enumerable(self) -> bool:
        """
        Whether the valid configurations can be listed (size, valid()): False for a space too large to enumerate (more than 200,000,000 valid configurations, or a constrained space of more than 1e9 combinations estimated to have that many); strategies then draw with sample() and is_valid().
        """

    def valid(self) -> list:
        """
        Every valid configuration, in lexicographic order (refused beyond 200,000,000: see enumerable).
        """

    def is_valid(self, config: object) -> bool: ...

    def sample(self, n: int, seed: int = 0) -> list:
        """
        n configurations drawn uniformly from the valid ones (with replacement), seeded.
        """

    def neighbours(self, config: object, kind: str = 'hamming') -> list:
        """
        The valid neighbours: hamming (one parameter differs), adjacent (every parameter within one step), strictly_adjacent (one parameter moved one step).
        """

    def encode(self, config: object) -> list[float]:
        """
        The configuration in [0,1]^d (ordered parameters by index, others one-hot).
        """

    @property
    def encoded_dimension(self) -> int: ...

    def values(self, config: object) -> dict:
        """{parameter: value} of a configuration."""

    def config(self, values: object) -> tuple:
        """
        The index tuple of a configuration given as {parameter: value} (or as indices).
        """

    def key(self, config: object) -> str:
        """Kernel Tuner's cache key: the values' str(), joined by ','."""

    def describe(self, config: object) -> str: ...

    def __repr__(self) -> str: ...

class Trial:
    """
    One evaluation of one configuration: status, time (ms, the median of the timed runs), costs by stage, metrics, error.
    """

    def __init__(self, config: object, time_ms: float = float('nan'), status: object = 'ok', metrics: Mapping[str, float] = {}, error: str = '', times_ms: Sequence[float] = []) -> None:
        """
        A trial to tell a Strategy: the configuration's index tuple, its time in ms when ok, else a status (invalid, compile_failed, launch_failed, wrong_result, timeout, crashed).
        """

    @property
    def config(self) -> tuple: ...

    @property
    def sequence(self) -> int: ...

    @property
    def status(self) -> str: ...

    @property
    def ok(self) -> bool: ...

    @property
    def time_ms(self) -> float: ...

    @property
    def time_iqr_ms(self) -> float: ...

    @property
    def time_min_ms(self) -> float: ...

    @property
    def times_ms(self) -> list[float]: ...

    @property
    def metrics(self) -> dict[str, float]: ...

    @property
    def error(self) -> str: ...

    @property
    def device(self) -> str: ...

    @property
    def clock_s(self) -> float: ...

    @property
    def batch(self) -> int: ...

    @property
    def timestamp(self) -> str: ...

    @property
    def cost(self) -> dict[str, float]:
        """Seconds the trial cost, by stage."""

    def __repr__(self) -> str: ...

class SearchState:
    """
    What a Python strategy's propose(n, state) sees (valid during that call only).
    """

    def seen(self, config: object) -> bool:
        """Measured or in flight."""

    @property
    def pending(self) -> list:
        """Proposed and not yet observed."""

    @property
    def evaluations_left(self) -> int | None: ...

    @property
    def measured(self) -> int: ...

    @property
    def best(self) -> Trial | None: ...

class Strategy:
    """
    A search strategy asked for configurations and told their results (ask/tell). Made by kforge.strategy(name_or_class, space, seed=..., **options).
    """

    def propose(self, n: int = 1) -> list:
        """
        Up to n configurations (index tuples): valid, distinct, neither measured nor pending; fewer when the strategy or the budget has no more.
        """

    def observe(self, trials: object) -> None:
        """
        Results of proposed configurations: Trials, (config, time_ms) pairs (time None: failed) or dicts {config or values, time_ms, status, metrics, error}. One call is one group for the strategy.
        """

    def finished(self) -> bool:
        """Whether the strategy has nothing more to propose."""

    @property
    def space(self) -> Space: ...

    @property
    def name(self) -> str: ...

    @property
    def trials(self) -> list[Trial]:
        """Every observed trial, in the order told."""

    @property
    def pending(self) -> list: ...

    @property
    def evaluations_left(self) -> int | None: ...

    @property
    def best(self) -> Trial | None:
        """The fastest ok trial, or None."""

def strategy(strategy: object, space: Space, seed: int = 0, budget: int | None = None, **params) -> Strategy:
    """
    An ask/tell Strategy: a registered strategy by name (random, ga, bo, hybrid, ...) or a Python strategy class, with its options as keywords (checked like a config's). `budget` caps the evaluations.
    """

def register_strategy(name: str, cls: object, summary: str | None = None) -> None:
    """
    Registers a Python strategy class under `name`: usable by kforge.strategy(name, ...) and in configs run from this process ({type: name, params: {...}}), its options checked like a built-in's.
    """

def strategies() -> list[str]:
    """The registered strategies' names."""

def plugins() -> dict:
    """
    Registered strategies, evaluators and transforms with their options, and the loaded plug-ins.
    """

def load_plugin(file: str) -> list[str]:
    """
    Loads a shared-library plug-in (docs/plugins.md); returns what it registered.
    """

class Experiment:
    """
    An experiment config, read and checked: kforge.load_experiment(path) or kforge.experiment(dict). Pass it to kforge.run().
    """

    @property
    def name(self) -> str: ...

    @property
    def file(self) -> str: ...

    @property
    def seed(self) -> int: ...

    @seed.setter
    def seed(self, arg: int, /) -> None: ...

    @property
    def output(self) -> str: ...

    @output.setter
    def output(self, arg: str, /) -> None: ...

    @property
    def evaluations(self) -> int | None: ...

    @evaluations.setter
    def evaluations(self, arg: int | None, /) -> None: ...

    @property
    def budget(self) -> dict: ...

    @property
    def strategy(self) -> dict: ...

    @property
    def evaluator(self) -> dict: ...

    @property
    def space(self) -> Space: ...

    @property
    def problem(self) -> dict: ...

    @property
    def batch_size(self) -> int | None: ...

    @property
    def start(self) -> list:
        """
        The configurations evaluated first (the config's `start:`), as tuples of value indices.
        """

    @property
    def config(self) -> object:
        """The config as read."""

    def __repr__(self) -> str: ...

def load_experiment(path: str) -> Experiment:
    """
    Reads and checks an experiment config (YAML or JSON); kforge.ConfigError names the file, key and reason.
    """

def experiment(config: dict, base_dir: str | None = None) -> Experiment:
    """
    An experiment from a dict with the keys of a config file; relative paths from base_dir (default: the working directory).
    """

class RunResult:
    """What kforge.run() returns."""

    @property
    def folder(self) -> str: ...

    @property
    def reason(self) -> str: ...

    @property
    def trials(self) -> list[Trial]: ...

    @property
    def best(self) -> Trial | None: ...

    @property
    def clock_s(self) -> float: ...

    @property
    def wall_s(self) -> float: ...

    @property
    def setup_s(self) -> float: ...

    @property
    def resumed(self) -> int: ...

    def __repr__(self) -> str: ...

def run(config: object, output: str | None = None, resume: bool = False, seed: int | None = None, evaluations: int | None = None, progress: object | None = None, base_dir: str | None = None) -> RunResult:
    """
    Runs an experiment (a config path, a dict or an Experiment) into a run folder, as `kforge run` does. resume=True continues the run in `output` (or the latest unfinished run of the experiment). progress(trial) is called after every trial.
    """

def score(config: object, seeds: int | None = None, strategies: Sequence[str] | None = None, base_dir: str | None = None) -> dict:
    """
    P-scores of strategies on recorded spaces (a score config path or dict), as `kforge score`: a dict with spaces, strategies, mean_score, cells (with P(t) curves) and text (the table).
    """

class RunStore:
    """
    A run folder's SQLite store. mode 'r' (default) reads any run (also one it cannot write); 'w' creates or continues a store (one writer per folder).
    """

    def __init__(self, folder: str, mode: str = 'r') -> None: ...

    @property
    def folder(self) -> str: ...

    def trials(self) -> list[Trial]:
        """Every stored trial, by sequence."""

    def __len__(self) -> int: ...

    def meta(self, key: str) -> object:
        """
        A run-level record (experiment, space, evaluator, finished, ...), or None.
        """

    def set_meta(self, key: str, value: object) -> None: ...

    @property
    def space(self) -> Space:
        """The stored space's parameters (constraint-free)."""

    def set_space(self, space: Space) -> None:
        """Records the space's parameters (what readers and exports need)."""

    def commit(self, trials: object) -> None:
        """
        Appends trials (sequences continue the stored ones) in one transaction.
        """

def read_run(folder: str) -> object:
    """A run folder's summary, as `kforge report --json` prints it."""
