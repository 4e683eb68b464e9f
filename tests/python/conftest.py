"""Makes <repo>/python importable for the tests (as PYTHONPATH=<repo>/python would)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
