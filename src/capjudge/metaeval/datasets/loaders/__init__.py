"""The built-in meta-evaluation datasets, one module each (``vatex_eval.py``: ``vatex-eval``).

Each module declares ``SPEC``, a :class:`~capjudge.metaeval.datasets.DatasetSpec` with its
loader and protocols; the registry lists this folder without importing the modules. Adding a
dataset is adding a module here (and its test).
"""
