"""zsharp_py.lowlevel: embedding plumbing for C hosts.

The layout of a native-callable Python function's parameter block, the
decorator that exposes a method to native code, the folder of
``zsharp.h`` for compiling a host against the library, the C API as a
table (``api_table``) for a host module built apart from it, and the
handle/proxy table (``python_table``, ``zsharp_python.h``). See
examples/native_host/ for a complete host.

>>> from pathlib import Path
>>> from zsharp_py.lowlevel import include_dir
>>> (Path(include_dir()) / "zsharp.h").is_file()
True
"""

from ._interop.calls import (
    FunctionLayout,
    FunctionParameter,
    api_table,
    function_layout,
    include_dir,
    lib_dir,
    native_function,
    python_table,
)

__all__ = [
    "FunctionLayout",
    "api_table",
    "FunctionParameter",
    "function_layout",
    "include_dir",
    "lib_dir",
    "native_function",
    "python_table",
]
