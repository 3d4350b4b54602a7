"""The compiled library and the layout FFI for classes declared from Python.

``lib``/``ffi`` come from the cffi API-mode extension built at install time.
``layout_ffi`` is a second, ABI-level FFI that only computes struct layouts:
each Python-declared class gets a C struct (the ``zs_object`` header, then
its properties), so a property read is a plain cdata field fetch.
"""
from __future__ import annotations

import itertools
import keyword
from typing import Any

import cffi

from ._native_lib import ffi, lib

__all__ = ["ffi", "lib", "layout_ffi", "declare_struct", "c_identifier", "check"]

layout_ffi = cffi.FFI()
layout_ffi.cdef(
    """
    typedef struct zs_object {
        const void *cls;
        uint64_t outer;
        uint32_t index;
        uint32_t name_index;
        uint32_t name_number;
        uint32_t class_id;
    } zs_object;
    """
)

# The two FFIs must agree on the header, or every property offset is wrong.
for _field in ("cls", "outer", "index", "name_index", "name_number", "class_id"):
    assert layout_ffi.offsetof("zs_object", _field) == ffi.offsetof("zs_object", _field)
assert layout_ffi.sizeof("zs_object") == ffi.sizeof("zs_object")

_struct_ids = itertools.count()

# C keywords that are valid Python identifiers.
_C_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for "
    "goto if inline int long register restrict return short signed sizeof static struct "
    "switch typedef union unsigned void volatile while _Bool _Complex _Imaginary".split()
)


def c_identifier(name: str) -> str:
    """The C member name for a Python property name."""
    if name in _C_KEYWORDS or keyword.iskeyword(name):
        return name + "_"
    return name


def declare_struct(label: str, members: list[tuple[str, str]]) -> str:
    """Declare a layout struct ``{zs_object hdr; members...}``; return its type name."""
    tag = f"zs_layout_{next(_struct_ids)}_{label}"
    body = "".join(f"    {ctype} {cname};\n" for cname, ctype in members)
    layout_ffi.cdef(f"struct {tag} {{\n    zs_object hdr;\n{body}}};")
    return f"struct {tag}"


def layout_pointer(type_name: str, address: int) -> Any:
    """A layout-FFI pointer of ``type_name *`` to ``address``."""
    return layout_ffi.cast(type_name + " *", address)


def address_of(pointer: Any) -> int:
    """The integer address of an API-FFI pointer."""
    return int(ffi.cast("uintptr_t", pointer))


def check(status: int, context: str) -> None:
    """Raise for a non-zero native status."""
    if status:
        from ._errors import raise_status

        raise_status(status, context)
