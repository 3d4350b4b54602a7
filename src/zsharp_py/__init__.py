"""zsharp_py: a native object heap with a precise, Unreal-style tracing GC,
seen from Python through red and black conjugates.

>>> import zsharp_py as zs
>>> class Node(zs.Object):
...     value: zs.Int32
...     next: "Node | None"
>>> with zs.Runtime() as rt:
...     head = Node(value=1); head.add_to_root()
...     head.next = Node(value=2)
...     orphan = Node(value=3)
...     _ = rt.collect_garbage()
...     (head.next.value, orphan.is_expired, rt.live_objects())
(2, True, 2)
"""

from . import _assembly  # noqa: F401  (wires the C core; it imports every layer first)
from ._base.errors import CallbackError, ExpiredConjugateError
from ._interop.reflection import native_class, native_classes, native_enum, native_struct
from ._interop.reload import reload
from ._model import hints as _hints
from ._model.kinds import (
    Bool,
    Float32,
    Float64,
    Int8,
    Int16,
    Int32,
    Int64,
    Scalar,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
)
from ._model.object import Object, zero
from ._model.state import state
from ._model.struct import Struct
from ._model.values import scope
from ._runtime.runtime import Runtime, current_runtime
from ._types.containers import Array, Map, Optional, Set
from ._types.delegates import BroadcastErrors, Delegate, MulticastDelegate, SparseDelegate
from ._types.fieldpath import FieldPath, FieldPathError
from ._types.object_pointers import StrongObjectPtr, WeakObjectPtr
from ._types.pointers import (
    Interface,
    LazyObjectPtr,
    ScriptInterface,
    SoftClassPtr,
    SoftObjectPtr,
    SubclassOf,
)
from ._types.strings import AnsiString, Name, String, Text, Utf8String

__version__ = "0.1.0"

# The everyday API: the types a property can be declared with, the runtime,
# and the errors game code catches. Embedding, debugging and the collector's
# own types live in the submodules named in _MOVED.
__all__ = [
    "AnsiString",
    "Array",
    "Bool",
    "BroadcastErrors",
    "CallbackError",
    "Delegate",
    "ExpiredConjugateError",
    "FieldPath",
    "FieldPathError",
    "Float32",
    "Float64",
    "Int16",
    "Int32",
    "Int64",
    "Int8",
    "Interface",
    "LazyObjectPtr",
    "Map",
    "MulticastDelegate",
    "Name",
    "Object",
    "Optional",
    "Runtime",
    "Scalar",
    "ScriptInterface",
    "Set",
    "SoftClassPtr",
    "SoftObjectPtr",
    "SparseDelegate",
    "String",
    "StrongObjectPtr",
    "Struct",
    "SubclassOf",
    "Text",
    "UInt16",
    "UInt32",
    "UInt64",
    "UInt8",
    "Utf8String",
    "WeakObjectPtr",
    "current_runtime",
    "native_class",
    "native_classes",
    "native_enum",
    "native_struct",
    "reload",
    "scope",
    "state",
    "zero",
]

_hints.name_exported_types({name: globals()[name] for name in __all__})

_MOVED = {
    "GarbageCollector": "collector",
    "GcPhase": "collector",
    "GcSettings": "collector",
    "GcStats": "collector",
    "ChainLink": "debug",
    "ClusterInfo": "debug",
    "FieldInfo": "debug",
    "GcStress": "debug",
    "HeapCorruptionError": "debug",
    "ReferenceChain": "debug",
    "FunctionLayout": "lowlevel",
    "FunctionParameter": "lowlevel",
    "function_layout": "lowlevel",
    "include_dir": "lowlevel",
    "native_function": "lowlevel",
}


def __getattr__(name: str) -> object:
    """Say where a name that is not part of the everyday API lives."""
    home = _MOVED.get(name)
    if home is not None:
        raise AttributeError(
            f"zsharp_py.{name} is not in the everyday API: import it from "
            f"zsharp_py.{home} (from zsharp_py.{home} import {name})",
            name=name,
            obj=None,
        )
    raise AttributeError(f"module 'zsharp_py' has no attribute {name!r}", name=name, obj=None)
