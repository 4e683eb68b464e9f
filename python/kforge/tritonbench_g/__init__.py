"""TritonBench-G (thunlp/TritonBench, channel G) as kforge program-level problems (issue 12).

Modules: ``harness`` (an operator's speed harness as a program problem's inputs and call adapter),
``importer`` (the campaign generator), ``runnable`` (the runnable filter), ``measure`` (the final
interleaved measurement), ``report`` (the table, CSV and plots from the stored runs).
The data is read at run time from ../shared/data/tritonbench-g (never copied into the repository).
"""
