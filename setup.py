"""Build glue: setuptools compiles the native heap through cffi (API mode)
and the conjugate hot path (``zsharp_py._core``, native/binding/) as a
CPython extension, both with the flags of src/zsharp_py/_build.py.

Everything else about the package lives in pyproject.toml; cffi_modules has
no pyproject spelling, hence this file.
"""

import importlib.util
import shutil
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

_spec = importlib.util.spec_from_file_location(
    "_zsharp_build", Path("src") / "zsharp_py" / "_build.py"
)
assert _spec is not None and _spec.loader is not None
_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_build)


class BuildWithHeader(build_py):
    """Also install the C API's headers as zsharp_py/include/zsharp.h,
    zsharp_api.h (the API as a table, for host modules) and zsharp_python.h
    (handles and proxies), for native hosts
    (``zsharp_py.lowlevel.include_dir()``)."""

    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / "zsharp_py" / "include"
        target.mkdir(parents=True, exist_ok=True)
        for header in ("zsharp.h", "zsharp_api.h", "zsharp_python.h"):
            shutil.copyfile(Path("native") / "include" / header, target / header)


setup(
    cffi_modules=["src/zsharp_py/_build.py:ffibuilder"],
    ext_modules=[_build.core_extension(Extension)],
    cmdclass={"build_py": BuildWithHeader},
)
