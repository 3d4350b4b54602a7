"""Build glue: setuptools compiles the native heap through cffi (API mode).

Everything else about the package lives in pyproject.toml; cffi_modules has
no pyproject spelling, hence this file.
"""
from setuptools import setup

setup(cffi_modules=["zsharp_py/_build.py:ffibuilder"])
