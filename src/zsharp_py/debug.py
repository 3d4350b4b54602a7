"""zsharp_py.debug: tools for finding out why something is alive or broken.

Reference chains (why an object survives a collection), cluster and field
introspection, the collector's stress switches that turn rare interleavings
into every-time ones, and the error ``rt.gc.verify()`` raises.

>>> import zsharp_py as zs
>>> from zsharp_py.debug import GcStress
>>> class Node(zs.Object):
...     next: "Node | None"
>>> with zs.Runtime(stress=GcStress(check_marks=True)) as rt:
...     root = Node(); root.add_to_root(); root.next = Node()
...     [link.member for link in rt.reference_chains(root.next)[0].links]
['next', None]
"""

from . import _core
from ._base.errors import HeapCorruptionError
from ._model.object import ClusterInfo
from ._runtime.chains import ChainLink, ReferenceChain
from ._runtime.collector import GcStress
from ._types.fieldpath import FieldInfo


def raise_callback_errors(enabled: bool) -> bool:
    """Set whether an exception raised by Python code that native code called
    back into, while Python was calling the host (a native function,
    ``rt.ticks.frame``), is raised by that call as ``zs.CallbackError``
    (``True``, the default) or, every one, reported to
    ``sys.unraisablehook`` with no repeats folded (``False``: how errors of
    calls from native code were reported before); returns the previous
    setting. For every runtime of the process (docs/errors.md,
    "Debugging: errors in scripts")."""
    return bool(_core.raise_callback_errors(enabled))


__all__ = [
    "ChainLink",
    "raise_callback_errors",
    "ClusterInfo",
    "FieldInfo",
    "GcStress",
    "HeapCorruptionError",
    "ReferenceChain",
]
