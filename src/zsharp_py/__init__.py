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
from ._errors import ExpiredConjugateError, HeapCorruptionError
from ._gc import GarbageCollector, GcPhase, GcSettings, GcStats, GcStress
from ._object import ClusterInfo, Object
from ._runtime import Runtime, current_runtime
from ._types import (
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
from ._containers import Array, Map, Optional, Set
from ._strings import AnsiString, Name, String, Text, Utf8String
from ._struct import Struct
from ._values import scope
from ._wrappers import StrongObjectPtr, WeakObjectPtr
from ._delegates import BroadcastErrors, Delegate, MulticastDelegate, SparseDelegate
from ._object_wrappers import (
    Interface,
    LazyObjectPtr,
    ScriptInterface,
    SoftClassPtr,
    SoftObjectPtr,
    SubclassOf,
)
from ._fieldpath import FieldInfo, FieldPath, FieldPathError
from ._chains import ChainLink, ReferenceChain
from ._calls import (FunctionLayout, FunctionParameter, function_layout, include_dir,
                     native_function)

__version__ = "0.1.0"

__all__ = [
    "AnsiString", "Array", "Map", "Name", "Optional", "Set", "String", "Struct", "Text",
    "Utf8String", "scope",
    "Bool", "ClusterInfo", "ExpiredConjugateError", "Float32", "Float64", "GarbageCollector", "GcPhase", "GcSettings", "GcStats", "GcStress",
    "HeapCorruptionError", "Int8", "Int16", "Int32", "Int64", "Object", "Runtime", "Scalar",
    "StrongObjectPtr", "UInt8", "UInt16", "UInt32", "UInt64", "WeakObjectPtr",
    "current_runtime",
    "BroadcastErrors", "Delegate", "MulticastDelegate", "SparseDelegate",
    "Interface", "LazyObjectPtr", "ScriptInterface", "SoftClassPtr", "SoftObjectPtr", "SubclassOf",
    "FieldInfo", "FieldPath", "FieldPathError", "ChainLink", "ReferenceChain",
    "FunctionLayout", "FunctionParameter", "function_layout", "native_function", "include_dir",
]
