"""zsharp_py.ticks: the tick manager's types.

Every runtime owns one tick manager, ``rt.ticks``: objects register tick
functions (a method native code can call with ``dt``) in ordered groups,
with intervals, prerequisites and an enabled flag, and ``rt.ticks.frame(dt)``
ticks them all in one native call (docs/ticking.md).

>>> import zsharp_py as zs
>>> from zsharp_py.ticks import FrameStats, TickFunction
>>> class Mover(zs.Object):
...     x: zs.Float64
...     def tick(self, dt: float) -> None:
...         self.x += 2.0 * dt
>>> with zs.Runtime() as rt:
...     mover = Mover()
...     mover.add_to_root()
...     ticking = rt.ticks.register(mover)
...     stats = rt.ticks.frame(0.5)
...     (isinstance(ticking, TickFunction), isinstance(stats, FrameStats), stats.ticked, mover.x)
(True, True, 1, 1.0)
"""

from ._runtime.ticks import FrameStats, TickFunction, TickGroup, TickManager

__all__ = ["FrameStats", "TickFunction", "TickGroup", "TickManager"]
