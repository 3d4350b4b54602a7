"""zsharp_py.collector: the garbage collector's types.

Every runtime owns one collector, ``rt.gc``; ``rt.collect_garbage()`` and
``rt.gc.tick()`` return the statistics of the cycle they ran or finished.

>>> import zsharp_py as zs
>>> from zsharp_py.collector import GcSettings, GcStats
>>> with zs.Runtime() as rt:
...     rt.gc.settings = GcSettings(objects_per_tick=100)
...     stats = rt.collect_garbage()
...     (isinstance(stats, GcStats), rt.gc.phase)
(True, 'idle')
"""

from ._runtime.collector import GarbageCollector, GcPhase, GcSettings, GcStats

__all__ = ["GarbageCollector", "GcPhase", "GcSettings", "GcStats"]
