"""``rt.ticks``: the tick manager of a runtime, after Unreal's FTickFunction.

A front over the native tick manager (native/src/ticks.c; zsharp.h, "the
tick manager"), reached through ``zsharp_py._core``'s ``_ticks_*`` methods
(native/binding/zpy_ticks.c): this module converts and checks every
argument (hostile values included: any Python code runs here, before the
native call), and raises the native statuses. It sees the runtime through
``RuntimeInternals`` (zsharp_py/_base/context.py), never importing
``runtime.py``. docs/ticking.md is the guide.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from .. import _core
from .._base.errors import ZS_E_BUSY, ZS_E_INVALID, ZS_E_STALE, ExpiredConjugateError, check
from .._model.object import Object

if TYPE_CHECKING:
    from .._base.context import RuntimeInternals
    from .collector import GcTick

__all__ = ["FrameStats", "TickFunction", "TickGroup", "TickManager", "configure"]

TickGroup = Literal["pre_physics", "during_physics", "post_physics", "post_update_work"]
"""The tick groups, in the order a frame ticks them (``zs_tick_group``):
before the physics step (the default, as Unreal's actors), beside it, after
it, and last (cameras, UI: what follows everything else)."""

_GROUPS: tuple[TickGroup, ...] = (
    "pre_physics",
    "during_physics",
    "post_physics",
    "post_update_work",
)
assert (0, 1, 2, 3, len(_GROUPS)) == (
    _core.TICK_PRE_PHYSICS,
    _core.TICK_DURING_PHYSICS,
    _core.TICK_POST_PHYSICS,
    _core.TICK_POST_UPDATE_WORK,
    _core.TICK_GROUP_COUNT,
)
_GROUP_INDEX: dict[str, int] = {name: index for index, name in enumerate(_GROUPS)}

_check_function: Callable[[type, str], None] | None = None


def configure(check_function: Callable[[type, str], None]) -> None:
    """Install the check of a tick function's signature (the composition
    root, zsharp_py/_assembly.py, passes ``_interop.calls``'s, which lays
    the function out as native code calls it): ``check_function(cls,
    name)`` raises ``AttributeError`` or ``TypeError`` when ``cls.name``
    cannot be a tick function."""
    global _check_function
    _check_function = check_function


@dataclass(frozen=True)
class FrameStats:
    """What one ``rt.ticks.frame(dt)`` did (native ``zs_frame_stats``)."""

    frame: int
    """The frame's number (1 for the runtime's first)."""
    time: float
    """Game time after it: the sum of the frames' ``dt``."""
    ticked: int
    """Tick functions called (the failed ones included)."""
    failed: int
    """Calls that failed (an exception, reported through
    ``sys.unraisablehook``), and functions nothing could run."""
    waiting: int
    """Enabled tick functions whose interval was not reached."""
    disabled: int
    """Tick functions disabled when the frame reached them."""
    skipped: int
    """Tick functions not called because their object was destroyed, dying
    or marked as garbage, or because they were unregistered earlier in the
    frame."""
    unregistered: int
    """Tick functions of objects the collector freed, unregistered by this frame."""
    tick_seconds: float
    """Time spent ticking."""
    gc: GcTick | None
    """What the collector did after the ticks (``rt.gc.tick``'s result), or
    None when the frame did not collect."""


class TickFunction:
    """A registered tick function (native ``zs_tick``: an index and a serial,
    so it never names a later registration). Made by
    ``rt.ticks.register()``. Once unregistered (by ``unregister()``,
    ``rt.ticks.unregister_all()``, or because the collector freed its
    object) ``registered`` is False and every other use raises
    ``ExpiredConjugateError``."""

    __slots__ = ("_rt", "_id", "function", "__weakref__")

    def __init__(self, runtime: RuntimeInternals, tick_id: int, function: str) -> None:
        self._rt = runtime
        self._id = tick_id
        self.function = function
        """The name of the method it calls."""

    def __repr__(self) -> str:
        return f"<TickFunction {self.function!r} #{self._id & 0xFFFFFFFF}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TickFunction):
            return NotImplemented
        return self._rt is other._rt and self._id == other._id

    def __hash__(self) -> int:
        return hash((id(self._rt), self._id))

    @property
    def id(self) -> int:
        """The native handle (a ``zs_tick``), for C code of this process."""
        return self._id

    def _info(self) -> tuple[int, int, int, float, float, int, bool, int]:
        """The native record: (object handle, group, actual group, interval,
        elapsed, calls, enabled, prerequisites); ExpiredConjugateError when
        it is not registered."""
        info = self._rt._ticks_info(self._id)
        if info[0] == ZS_E_STALE:
            raise ExpiredConjugateError(self._gone())
        check(info[0], "tick function", self._rt)
        handle, group, actual, interval, elapsed, calls, enabled, prerequisites = info[1:]
        return (
            int(handle),
            int(group),
            int(actual),
            float(interval),
            float(elapsed),
            int(calls),
            bool(enabled),
            int(prerequisites),
        )

    def _gone(self) -> str:
        return (
            f"{self!r} is not registered: it was unregistered, or the garbage collector "
            "freed its object"
        )

    def _status(self, status: int, what: str) -> None:
        """Raise for the status of a change made to this tick function."""
        if status == ZS_E_STALE:
            raise ExpiredConjugateError(self._gone())
        check(status, what, self._rt)

    @property
    def registered(self) -> bool:
        """Whether it is still registered."""
        if self._rt._closed:
            return False
        return bool(self._rt._ticks_info(self._id)[0] == 0)

    @property
    def target(self) -> Object | None:
        """The object it ticks (Unreal's tick function's target), or None
        once it is not registered."""
        if not self.registered:
            return None
        found: Object | None = self._rt._conjugate_of(self._info()[0])
        return found

    @property
    def group(self) -> TickGroup:
        """Its group as registered; setting it moves it from the next frame."""
        return _GROUPS[self._info()[1]]

    @group.setter
    def group(self, group: TickGroup) -> None:
        index = _group_index(group)
        self._status(self._rt._ticks_set_group(self._id, index), "tick function group")

    @property
    def actual_group(self) -> TickGroup:
        """The group it ticks in: its own, or a later prerequisite's (as of
        the last frame's order)."""
        return _GROUPS[self._info()[2]]

    @property
    def interval(self) -> float:
        """Seconds of game time between its ticks (0: every frame); a new
        interval applies from the next time the frame reaches it."""
        return self._info()[3]

    @interval.setter
    def interval(self, seconds: float) -> None:
        value = _seconds(seconds, "interval")
        self._status(self._rt._ticks_set_interval(self._id, value), "tick function interval")

    @property
    def elapsed(self) -> float:
        """Game time counted towards its next tick."""
        return self._info()[4]

    @property
    def calls(self) -> int:
        """Times it was called."""
        return self._info()[5]

    @property
    def enabled(self) -> bool:
        """Whether it ticks: disabling takes effect at once (even later in
        the frame running now), enabling when the frame reaches it. Game
        time does not count towards its interval while it is disabled."""
        return self._info()[6]

    @enabled.setter
    def enabled(self, enabled: bool) -> None:
        value = bool(enabled)  # may run Python code: before the native call
        self._status(self._rt._ticks_set_enabled(self._id, value), "tick function enabled")

    @property
    def prerequisite_count(self) -> int:
        """How many registered tick functions it ticks after."""
        return self._info()[7]

    def add_prerequisite(self, other: TickFunction) -> None:
        """Tick after ``other`` (from the next frame). If ``other`` ticks in
        a later group, this one moves there (``actual_group``), after it.
        ``ValueError`` for itself and for a cycle (``other`` already ticks
        after this one, directly or not); adding one twice does nothing."""
        self._prerequisite(other, True)

    def remove_prerequisite(self, other: TickFunction) -> None:
        """Stop ticking after ``other`` (from the next frame); ``ValueError``
        when it was not a prerequisite."""
        self._prerequisite(other, False)

    def _prerequisite(self, other: TickFunction, add: bool) -> None:
        if not isinstance(other, TickFunction):
            raise TypeError(f"a prerequisite is a TickFunction, not {type(other).__name__}")
        if other._rt is not self._rt:
            raise ValueError("the prerequisite belongs to another runtime")
        status = self._rt._ticks_prerequisite(self._id, other._id, add)
        if status == ZS_E_INVALID:
            raise ValueError(
                f"{other!r} cannot be a prerequisite of {self!r}: it is itself, or it ticks "
                "after it already (a cycle)"
                if add
                else f"{other!r} is not a prerequisite of {self!r}"
            )
        if status == ZS_E_STALE:
            gone = self if self._rt._ticks_info(self._id)[0] == ZS_E_STALE else other
            raise ExpiredConjugateError(gone._gone())
        check(status, "prerequisite", self._rt)

    def unregister(self) -> bool:
        """Unregister it now (it is not called again, even later in the frame
        running now); False when it was not registered."""
        if self._rt._closed:
            return False
        status = self._rt._ticks_unregister(self._id)
        if status == ZS_E_STALE:
            return False
        check(status, "unregister", self._rt)
        return True


class TickManager:
    """The tick manager of one runtime (``rt.ticks``): tick functions of
    objects, in ordered groups, with intervals, prerequisites and an enabled
    flag, ticked by ``frame(dt)`` in one native call.

    A tick function is a method of the object's class that native code can
    call with ``(dt: float)`` (or nothing) and that returns None: a Python
    method, a Python override of a host's event (``tick`` of a subclass of
    the sample engine's ``Actor``), or a host's own function, which the
    frame calls in C with no Python frame. A registration does not keep its
    object alive.
    """

    __slots__ = ("_rt",)

    def __init__(self, runtime: RuntimeInternals) -> None:
        self._rt = runtime

    def __len__(self) -> int:
        """Tick functions registered."""
        return int(self._rt._ticks_count())

    def __repr__(self) -> str:
        if self._rt._closed:
            return "<TickManager of a closed runtime>"
        return f"<TickManager: {len(self)} tick functions>"

    def register(
        self,
        obj: Object,
        function: str = "tick",
        *,
        group: TickGroup = "pre_physics",
        interval: float = 0.0,
        enabled: bool = True,
        after: Iterable[TickFunction] = (),
    ) -> TickFunction:
        """Register ``obj.function`` as a tick function, in ``group``, every
        ``interval`` seconds of game time (0: every frame), enabled or not,
        ticking after each of ``after`` (its prerequisites). It ticks from
        the next frame that starts (a registration made during a frame
        waits for the next one). The method must take ``(dt: float)`` or
        nothing and return None (``TypeError`` otherwise; ``AttributeError``
        when native code cannot call it); an object may have several tick
        functions. ``ExpiredConjugateError`` for an object that is expired,
        dying or marked as garbage."""
        if not isinstance(obj, Object):
            raise TypeError(f"register() ticks a zs.Object, not {type(obj).__name__}")
        name = _text(function, "function")
        index = _group_index(group)
        seconds = _seconds(interval, "interval")
        on = bool(enabled)
        prerequisites = list(after)
        for other in prerequisites:
            if not isinstance(other, TickFunction):
                raise TypeError(f"after= holds TickFunctions, not {type(other).__name__}")
            if other._rt is not self._rt:
                raise ValueError("a prerequisite belongs to another runtime")
        if _check_function is not None:
            _check_function(type(obj), name)  # lays the method out: Python code
        status, tick_id = self._rt._ticks_register(
            obj, name.encode("utf-8"), index, seconds, 0 if on else _core.TICK_DISABLED
        )
        if status == ZS_E_INVALID:
            raise TypeError(
                f"{type(obj).__name__}.{name} cannot be a tick function: native code cannot "
                "call it with (dt: float)"
            )
        check(status, f"register({type(obj).__name__}.{name})", self._rt)
        made = TickFunction(self._rt, tick_id, name)
        try:
            for other in prerequisites:
                made.add_prerequisite(other)
        except BaseException:
            made.unregister()  # all or nothing
            raise
        return made

    def unregister_all(self, obj: Object) -> int:
        """Unregister every tick function of ``obj`` now; how many there were."""
        if not isinstance(obj, Object):
            raise TypeError(f"unregister_all() takes a zs.Object, not {type(obj).__name__}")
        return int(self._rt._ticks_unregister_object(obj))

    def frame(self, dt: float, *, collect: bool = False) -> FrameStats:
        """One frame: advance the game time by ``dt`` seconds and call every
        tick function that is due, group by group, in one native call (a
        host's own tick functions run in C; Python methods through the
        handler of calls from native code, each in its own scope, with the
        runtime current). A tick function that raises does not stop the
        others; the frame then raises ``zs.CallbackError`` (the first
        error as ``__cause__``) in place of returning its stats. With ``collect``,
        the frame ends with ``rt.gc.tick(dt)`` (the budgets of
        ``rt.gc.settings``). ``RuntimeError`` when called from inside a
        frame."""
        seconds = _seconds(dt, "dt")
        result = self._rt._ticks_frame(seconds)
        status = result[0]
        if status == ZS_E_BUSY:
            raise RuntimeError(
                "rt.ticks.frame() is running already (called from a tick function, or "
                "another thread's frame): one frame at a time"
            )
        check(status, "rt.ticks.frame()", self._rt)
        gc = self._rt.gc.tick(seconds) if collect and not self._rt._closed else None
        frame, time, ticked, failed, waiting, disabled, skipped, unregistered = result[1:9]
        return FrameStats(
            frame=int(frame),
            time=float(time),
            ticked=int(ticked),
            failed=int(failed),
            waiting=int(waiting),
            disabled=int(disabled),
            skipped=int(skipped),
            unregistered=int(unregistered),
            tick_seconds=float(result[10]),
            gc=gc,
        )


def _text(value: object, what: str) -> str:
    """An exact str of ``value`` (a str subclass read as a str: no method of
    it runs), with no NUL; TypeError or ValueError."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    text = str.__add__("", value)
    if not text or "\0" in text:
        raise ValueError(f"{what} must be a method's name, not {text!r}")
    return text


def _group_index(group: object) -> int:
    """The native group of a ``TickGroup``; TypeError or ValueError."""
    if not isinstance(group, str):
        raise TypeError(f"group must be a str (a TickGroup), not {type(group).__name__}")
    index = _GROUP_INDEX.get(str.__add__("", group))
    if index is None:
        raise ValueError(f"group must be one of {', '.join(_GROUPS)}; got {group!r}")
    return index


def _seconds(value: object, what: str) -> float:
    """Seconds: a finite int or float >= 0 (as its base type reads it)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, not {type(value).__name__}")
    seconds = float.__float__(value) if isinstance(value, float) else float(int.__index__(value))
    if not (math.isfinite(seconds) and seconds >= 0):
        raise ValueError(f"{what} must be a finite number of seconds >= 0, got {seconds!r}")
    return seconds
