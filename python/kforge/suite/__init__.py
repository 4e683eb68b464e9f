"""The suite against the experts on the H200 (issue 17, items 3 and 4).

Modules: ``search`` (a kforge run's summary: trials, statuses, the best configuration and when it was found),
``bench_hub`` (benchmark_hub's convolution kernel at the suite's image size, as a kforge kernel description,
and the best configurations of its H200 recording), ``cuda_launch`` (a CUBIN written by ``kforge render``
loaded and launched through the driver API on PyTorch's stream), ``measure`` (the final measurement: kforge's
best and the experts checked against a float64 reference, then timed by one harness in interleaved rounds),
``table`` (the docs/suite.md table from the committed experiments/suite/h200/<kernel>/final.json files).
scripts/device-suite runs the device side; scripts/suite-table regenerates the table.
"""
