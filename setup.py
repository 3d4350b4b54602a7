"""Build glue: setuptools compiles the native library (native/src, into
zsharp_py/lib/libzsharp.so and .a, with its headers, pkg-config file and
CMake package), then the cffi module that links it (the sample engine and
the declarations Python calls through, API mode) and the conjugate hot
path (``zsharp_py._core``, native/binding/), all with the flags of
src/zsharp_py/_build.py.

Everything else about the package lives in pyproject.toml; cffi_modules has
no pyproject spelling, hence this file.
"""

import importlib.util
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

_spec = importlib.util.spec_from_file_location(
    "_zsharp_build", Path("src") / "zsharp_py" / "_build.py"
)
assert _spec is not None and _spec.loader is not None
_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_build)


class BuildWithLibrary(build_ext):
    """Build libzsharp first, into the package's lib/ folder (inside the
    source tree for an editable install, as the extensions are), with the
    headers in its include/ folder for native hosts
    (``zsharp_py.lowlevel.include_dir()``, ``python -m zsharp_py config``);
    then the extensions, the cffi module linking that library."""

    def run(self) -> None:
        package_dir = Path(self.get_ext_fullpath("zsharp_py._core")).parent
        self._lib_dir = _build.build_library(package_dir, Path(self.build_temp))
        super().run()

    def build_extension(self, ext: Extension) -> None:
        # Both extensions call libzsharp, the one copy of the heap.
        _build.link_library(ext, self._lib_dir)
        super().build_extension(ext)


setup(
    cffi_modules=["src/zsharp_py/_build.py:ffibuilder"],
    ext_modules=[_build.core_extension(Extension)],
    cmdclass={"build_ext": BuildWithLibrary},
)
