"""kforge's Triton side: the compile server (`compile_server`) and the Triton source operators
(`source_ops`). Importing this package imports neither Triton nor anything heavy; each module does what it
needs.
"""
