"""kforge's Python side.

Kept free of heavy imports: `kforge.triton` needs Triton, later native bindings need the built library;
importing `kforge` itself needs neither.
"""
