"""The native hosts shipped with zsharp_py, as modules of their types.

``zsharp_py.engines.sample`` is the sample engine's (native/engine/sample_engine.c):
its classes, structs and enums under their own names, with the type stubs
``sample.pyi`` beside it for mypy and pyright (written by
``python -m zsharp_py stubs --engine sample``, zsharp_py/stubs.py).
"""
