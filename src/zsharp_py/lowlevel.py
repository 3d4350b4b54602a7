"""zsharp_py.lowlevel: embedding plumbing for C hosts.

The layout of a native-callable Python function's parameter block, the
decorator that exposes a method to native code, and the folder of
``zsharp.h`` for compiling a host against the library. See
examples/native_host/ for a complete host.

>>> from pathlib import Path
>>> from zsharp_py.lowlevel import include_dir
>>> (Path(include_dir()) / "zsharp.h").is_file()
True
"""

from ._interop.calls import (
    FunctionLayout,
    FunctionParameter,
    function_layout,
    include_dir,
    native_function,
)

__all__ = [
    "FunctionLayout",
    "FunctionParameter",
    "function_layout",
    "include_dir",
    "native_function",
]
