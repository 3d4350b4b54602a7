"""The compiled library and the layout FFI for classes declared from Python.

``lib``/``ffi`` come from the cffi API-mode extension built at install time.
``layout_ffi`` is a second, ABI-level FFI that only computes struct layouts:
each Python-declared class gets a C struct (the ``zs_object`` header, then
its properties), whose member offsets the property descriptors use (and
``obj._p``, the object's pointer typed as that struct).
"""

from __future__ import annotations

import itertools
import re
from typing import Any, NoReturn

import cffi

from .._native_lib import ffi, lib
from .context import RuntimeLike
from .errors import ZS_E_DYING, raise_status

__all__ = [
    "ffi",
    "lib",
    "layout_ffi",
    "declare_struct",
    "member_name",
    "check",
    "refused",
    "check_writable",
]

layout_ffi = cffi.FFI()
layout_ffi.cdef(
    """
    typedef struct zs_object {
        const void *cls;
        uint64_t outer;
        uint32_t index;
        uint32_t name_index;
        uint32_t name_number;
        uint32_t hash_next;
    } zs_object;
    typedef struct zs_string { void *data; uint32_t length; uint32_t capacity; } zs_string;
    typedef struct zs_array { void *data; uint32_t count; uint32_t capacity; } zs_array;
    typedef struct zs_hash {
        zs_array entries; uint32_t *buckets; uint32_t bucket_count; uint32_t reserved;
    } zs_hash;
    typedef struct zs_binding {
        uint64_t object; uint32_t function_name; uint32_t callable;
    } zs_binding;
    """
)


# The two FFIs must agree on the native layouts, or every property offset is
# wrong: a stale build of the extension is the usual cause.
def _check_layouts() -> None:
    mismatched = [
        name
        for name in ("zs_object", "zs_string", "zs_array", "zs_hash", "zs_binding")
        if layout_ffi.sizeof(name) != ffi.sizeof(name)
    ]
    mismatched += [
        f"zs_object.{field}"
        for field in ("cls", "outer", "index", "name_index", "name_number", "hash_next")
        if layout_ffi.offsetof("zs_object", field) != ffi.offsetof("zs_object", field)
    ]
    if mismatched:
        raise ImportError(
            "zsharp_py's compiled extension does not match its sources "
            f"({', '.join(mismatched)}); rebuild it: pip install -e ."
        )


_check_layouts()

_struct_ids = itertools.count()
_UINTPTR = ffi.typeof("uintptr_t")


def _ascii_tail(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]", "_", name)[:40]


def member_name(position: int, name: str) -> str:
    """The C member name of the property at ``position`` in a layout.

    Numbered, so no Python name can collide with another, with a C keyword
    or with the header (``_hdr``), and non-ASCII names are fine; the ASCII
    tail only helps a reader of the declaration.
    """
    return f"m{position}_{_ascii_tail(name)}"


def declare_struct(label: str, members: list[tuple[str, str]], header: bool = True) -> Any:
    """Declare a layout struct (``{zs_object _hdr; members...}`` for an
    object class, just the members for a struct); return its pointer type
    (a layout-FFI ctype). A struct without members gets one padding byte,
    as C requires."""
    tag = f"zs_layout_{next(_struct_ids)}_{_ascii_tail(label)}"
    body = "".join(f"    {ctype} {cname};\n" for cname, ctype in members)
    if header:
        body = "    zs_object _hdr;\n" + body
    elif not members:
        body = "    uint8_t _empty;\n"
    layout_ffi.cdef(f"struct {tag} {{\n{body}}};")
    return layout_ffi.typeof(f"struct {tag} *")


def layout_address(pointer: Any) -> int:
    """The address a layout-FFI pointer points to."""
    return int(layout_ffi.cast("uintptr_t", pointer))


def api_address(pointer: Any) -> int:
    """The address an API-FFI pointer points to."""
    return int(ffi.cast(_UINTPTR, pointer))


def layout_pointer(pointer_type: Any, native: Any) -> Any:
    """Re-type an API-FFI object pointer as a layout-FFI struct pointer."""
    return layout_ffi.cast(pointer_type, int(ffi.cast(_UINTPTR, native)))


def check(status: int, context: str, runtime: RuntimeLike | None) -> None:
    """Raise for a non-zero native status of a call made on ``runtime``'s
    heap (None only for a call on no runtime: creating one). See ``refused``."""
    if status:
        refused(status, context, runtime)


def check_writable(runtime: RuntimeLike, owner: int, context: str) -> None:
    """Before a write that Python makes itself into ``owner``'s memory
    (plain data: a name, a class id, a persistent id; a struct member by
    member): raise as the heap would refuse a native write into a stale or
    dying owner (``ZS_E_DYING``: see ``refused``). Nothing to check for
    ``owner`` 0 (black values). Caller holds the runtime's lock, without
    which no collection step runs, so the answer holds until the write."""
    if owner:
        check(lib.zs_object_writable(runtime._live_ptr(), owner), context, runtime)


def refused(status: int, context: str, runtime: RuntimeLike | None) -> NoReturn:
    """Raise the exception for a native status (non-zero) of a call made on
    ``runtime``'s heap.

    The one place that handles ``ZS_E_DYING``: the heap refused the call
    because an object it names is dying (gathered by an incremental cycle
    whose budgeted expiry has not reached its conjugate yet). The runtime
    expires every pending conjugate first, so the ``ExpiredConjugateError``
    reaches the caller with that object's ``is_expired`` already True.
    """
    if status == ZS_E_DYING and runtime is not None:
        runtime.gc._expire_refused()
    raise_status(status, context)
