"""zsharp_py.testing: the pytest plugin (a fresh runtime per test with a leak
check, stress switches, and tests failed by the errors of scripts that a
host's loop swallowed).

Installing zsharp_py registers this module with pytest (the ``pytest11``
entry point), so any suite can use it without a ``conftest.py``. Loading it
imports the package (being one of its modules) but creates no runtime, and
it adds no autouse fixture. Around every test it installs a
``sys.unraisablehook`` that passes every report on to the hook before it.

- **Errors that reached no caller fail the test.** An exception raised by
  an override, listener or tick function that native code called while no
  Python call into the host was running (a C host's own frame loop, a
  thread of its) cannot be raised: it goes to ``sys.unraisablehook``
  (docs/errors.md). If such a report reaches the plugin's hook between the
  test's setup and the end of its teardown, the test fails at teardown
  with each report (the exception, where, its traceback). A test that
  expects them marks itself ``@pytest.mark.zs_allow_callback_errors``, or
  takes the ``zs_callback_errors`` fixture (the list of reports, to check);
  a test that installs its own ``sys.unraisablehook`` hears them itself.
  Other unraisable reports (a ``__del__`` that raised) are left to pytest.

- ``zs_runtime``: a new ``zs.Runtime``, current for the test (``with``),
  closed at teardown. After a passing test it runs a full collection (and
  Python's cycle collector if anything is left), ``rt.gc.verify()``, then
  the leak check: every native object still alive and every black value
  still alive is a leak, listed with the shortest reference chain that keeps
  it (as nanobind lists the instances still alive at shutdown). A test
  whose own references are gone leaves nothing alive unless it left an
  object rooted, a ``StrongObjectPtr`` undisposed, or a black value
  referenced from somewhere lasting (a global, a cycle across the boundary).
  The failure is an error at teardown naming each leak. ``rt.gc.verify()``
  runs after failing tests too; the leak check does not (their traceback
  still holds their locals).
- ``@pytest.mark.zs_stress(**switches)``: the runtime is built with
  ``zsharp_py.debug.GcStress(**switches)``; with no switches, ``DEFAULT_STRESS``.
- ``@pytest.mark.zs_runtime_options(**options)``: other ``zs.Runtime``
  options (``max_objects``, ``min_cluster_size``, ...).
- ``@pytest.mark.zs_allow_leaks``: skip the leak check for one test.
- ``@pytest.mark.zs_allow_callback_errors``: do not fail the test for
  callbacks' errors that went to ``sys.unraisablehook``.
- ``zs_callback_errors``: those reports (``CallbackErrorReport``), for the
  test to check; taking the fixture allows them, as the marker does.
- ``--zs-stress``: every ``zs_runtime`` test without a ``zs_stress`` marker
  runs under ``DEFAULT_STRESS``. ``--zs-no-leak-check``: no leak checks.
"""

from __future__ import annotations

import gc
import sys
import traceback
from collections.abc import Callable, Generator, Iterator
from typing import Any, NamedTuple

import pytest

import zsharp_py as zs
from zsharp_py import Runtime, _core
from zsharp_py.debug import GcStress

__all__ = [
    "DEFAULT_STRESS",
    "CallbackErrorReport",
    "zs_callback_errors",
    "zs_runtime",
    "leak_report",
]

DEFAULT_STRESS: dict[str, Any] = {
    "collect_every": 7,
    "check_marks": True,
    "objects_per_step": 1,
    "poison_freed": True,
    "mark_stack_limit": 8,
}
"""The ``zsharp_py.debug.GcStress`` switches of ``--zs-stress`` and of a bare
``@pytest.mark.zs_stress``: a full collection before every 7th object
creation, every mark checked by a second one, one object per incremental
step, freed memory poisoned, an 8-entry mark stack."""

_MAX_LISTED = 20  # leaks listed one by one in a report; the rest are counted
_CALL_PASSED = pytest.StashKey[bool]()


class CallbackErrorReport(NamedTuple):
    """One error of a call from native code into Python that went to
    ``sys.unraisablehook`` during a test (the ``zs_callback_errors``
    fixture's items)."""

    exception: BaseException | None
    """The exception the override, listener or tick function raised."""
    where: str
    """What the report names: the callback, with "(the same error N times)"
    when repeats were folded."""
    text: str
    """The exception with its traceback, as Python prints it."""


class _CallbackErrors:
    """The plugin's ``sys.unraisablehook`` for one test: records the reports
    of callbacks' errors (``_core.reporting_callback_error()`` tells them
    from others, native/binding/zpy_errors.c) and passes every report on to
    the hook it replaced."""

    __slots__ = ("previous", "hook", "reports", "allowed")

    def __init__(self, previous: Callable[[Any], object]) -> None:
        self.previous = previous
        self.hook = self._hear  # one object: compared when put back, and by the folding
        self.reports: list[CallbackErrorReport] = []
        self.allowed = False

    def _hear(self, report: Any) -> None:
        """Record ``report`` if it is a callback's error, then pass it on."""
        if _core.reporting_callback_error():
            text = "".join(
                traceback.format_exception(report.exc_type, report.exc_value, report.exc_traceback)
            )
            try:
                where = str(report.object)
            except Exception as error:  # noqa: BLE001 (a failing str must not hide the report)
                where = f"<{type(report.object).__name__}: str failed: {error!r}>"
            self.reports.append(CallbackErrorReport(report.exc_value, where, text))
        self.previous(report)

    def failure(self, nodeid: str) -> str:
        """The teardown failure's message: every report, then what to do."""
        count = len(self.reports)
        lines = [
            f"zs: {nodeid}: {count} error{'s' if count != 1 else ''} raised by Python code "
            "that native code called, with no Python call into the host to raise "
            f"{'them' if count != 1 else 'it'} (a host's own loop), went to sys.unraisablehook:"
        ]
        for report in self.reports[:_MAX_LISTED]:
            lines.append(f"  in {report.where}:")
            lines.extend("    " + line for line in report.text.rstrip("\n").splitlines())
        if count > _MAX_LISTED:
            lines.append(f"  ... and {count - _MAX_LISTED} more")
        lines.append(
            "Fix them, or mark the test @pytest.mark.zs_allow_callback_errors (or take the "
            "zs_callback_errors fixture and check them)."
        )
        return "\n".join(lines)


_CALLBACK_ERRORS = pytest.StashKey[_CallbackErrors]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """The plugin's command-line options."""
    group = parser.getgroup("zsharp_py", "zsharp_py runtimes (zs_runtime fixture)")
    group.addoption(
        "--zs-stress",
        action="store_true",
        default=False,
        help="run every zs_runtime test without a zs_stress marker under the "
        "default GcStress switches",
    )
    group.addoption(
        "--zs-no-leak-check",
        action="store_true",
        default=False,
        help="do not check zs_runtime tests for leaked objects and values",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers (so ``--strict-markers`` accepts them)."""
    config.addinivalue_line(
        "markers",
        "zs_stress(**switches): build the zs_runtime fixture's runtime with "
        "zsharp_py.debug.GcStress(**switches) (no switches: the plugin's DEFAULT_STRESS)",
    )
    config.addinivalue_line(
        "markers",
        "zs_runtime_options(**options): other zs.Runtime options for the zs_runtime fixture",
    )
    config.addinivalue_line(
        "markers", "zs_allow_leaks: skip the zs_runtime fixture's leak check for this test"
    )
    config.addinivalue_line(
        "markers",
        "zs_allow_callback_errors: do not fail the test for errors of callbacks from native "
        "code that went to sys.unraisablehook",
    )


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    """Install the test's callback error recorder before its fixtures."""
    errors = _CallbackErrors(sys.unraisablehook)
    item.stash[_CALLBACK_ERRORS] = errors
    sys.unraisablehook = errors.hook
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, None, None]:
    """After the fixtures' teardown, put the hook back and fail the test if
    a callback's error went to it (unless allowed)."""
    errors = item.stash.get(_CALLBACK_ERRORS, None)
    try:
        result = yield
    finally:
        if errors is not None and sys.unraisablehook is errors.hook:
            sys.unraisablehook = errors.previous  # else the test left its own: left alone
    if (
        errors is not None
        and errors.reports
        and not errors.allowed
        and item.get_closest_marker("zs_allow_callback_errors") is None
    ):
        raise pytest.fail.Exception(errors.failure(item.nodeid), pytrace=False)
    return result


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    """Remember whether the test body passed: only then is it checked for leaks."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.stash[_CALL_PASSED] = bool(report.passed)


def _runtime_options(node: pytest.Item) -> dict[str, Any]:
    """The ``zs.Runtime`` keyword arguments the test's markers and options ask for."""
    options: dict[str, Any] = {}
    marker = node.get_closest_marker("zs_runtime_options")
    if marker is not None:
        if marker.args:
            raise pytest.UsageError("zs_runtime_options takes keyword arguments only")
        options.update(marker.kwargs)
    stress = node.get_closest_marker("zs_stress")
    switches: dict[str, Any] | None = None
    if stress is not None:
        if stress.args:
            raise pytest.UsageError(
                "zs_stress takes keyword arguments only (the zsharp_py.debug.GcStress switches)"
            )
        switches = dict(stress.kwargs) or dict(DEFAULT_STRESS)
    elif node.config.getoption("zs_stress", False):
        switches = dict(DEFAULT_STRESS)
    if switches is not None:
        if "stress" in options:
            raise pytest.UsageError(
                "give the stress switches with zs_stress, not zs_runtime_options(stress=...)"
            )
        options["stress"] = GcStress(**switches)
    return options


def leak_report(rt: Runtime) -> list[str]:
    """Collect garbage (Python's cycle collector too, if anything is left),
    verify the heap, and describe every native object and black value of
    ``rt`` that is still alive: one line each (at most 20 of each kind, then
    a count), empty when nothing is. Objects the runtime made permanent
    (``disregard_for_gc``) are not leaks. Used by the ``zs_runtime`` fixture;
    callable on any open runtime."""
    stats = rt.collect_garbage()
    if stats.live_objects or rt.values_alive():
        # Views cached in their parents form reference cycles, and a pending
        # incremental cycle's newborns survive the collection that ends it.
        gc.collect()
        stats = rt.collect_garbage()
    rt.gc.verify()
    lines: list[str] = []
    leaked = stats.live_objects - stats.permanent_objects
    if leaked > 0:
        lines.append(f"  {leaked} object{'s' if leaked != 1 else ''} still alive:")
        listed = 0
        for handle in rt._heap_live_handles("leak_report")[: stats.live_objects]:
            if listed == _MAX_LISTED:
                lines.append(f"    ... and {leaked - listed} more")
                break
            obj = rt._conjugate_of(handle)
            if obj is None or rt._heap_is_permanent(obj.handle):
                continue
            # One chain each (O(heap) per object): at most _MAX_LISTED of them.
            chains = rt.reference_chains(obj, limit=1)
            why = str(chains[0]) if chains else "(no root reaches it)"
            lines.append(f"    {obj!r} kept by {why}")
            listed += 1
    values = rt.values_alive()
    if values:
        held = [value for value in rt._black_values() if not value.is_expired]
        lines.append(
            f"  {values} black value{'s' if values != 1 else ''} still alive "
            "(still referenced from Python after gc.collect()):"
        )
        for value in held[:_MAX_LISTED]:
            lines.append(f"    {_describe_value(value)}")
        if len(held) > _MAX_LISTED:
            lines.append(f"    ... and {len(held) - _MAX_LISTED} more")
        callables = rt.bound_callables()
        if callables:
            lines.append(
                f"  {callables} Python callable{'s' if callables != 1 else ''} still bound "
                "into native delegates: a callable that holds the black value or delegate it "
                "is bound into is a cycle across the boundary that neither collector sees "
                "(bind an object's method, which is weak, or dispose() the delegate)"
            )
    return lines


def _describe_value(value: Any) -> str:
    """One line for a leaked black value: its type and (shortened) repr."""
    try:
        text = repr(value)
    except Exception as error:  # noqa: BLE001 (a failing repr must not hide the report)
        text = f"<{type(value).__name__}: repr failed: {error!r}>"
    return text if len(text) <= 120 else text[:117] + "..."


@pytest.fixture
def zs_runtime(request: pytest.FixtureRequest) -> Iterator[Runtime]:
    """A new ``zs.Runtime``, current for the test, closed at teardown; after a
    passing test, the heap is verified and checked for leaks (see the module
    docstring). Configure it with the ``zs_stress``, ``zs_runtime_options``
    and ``zs_allow_leaks`` markers."""
    node = request.node
    assert isinstance(node, pytest.Item)
    with zs.Runtime(**_runtime_options(node)) as rt:
        yield rt
        if rt.closed:
            return
        check_leaks = (
            node.stash.get(_CALL_PASSED, False)
            and node.get_closest_marker("zs_allow_leaks") is None
            and not request.config.getoption("zs_no_leak_check", False)
        )
        if not check_leaks:
            rt.gc.verify()
            return
        leaks = leak_report(rt)
        if leaks:
            pytest.fail(
                "\n".join(
                    [
                        f"zs_runtime: {node.nodeid} leaked native memory (alive after the test, "
                        "a full collection and gc.collect()):",
                        *leaks,
                        "Release them (remove_from_root(), dispose(), del), or mark the test "
                        "@pytest.mark.zs_allow_leaks.",
                    ]
                ),
                pytrace=False,
            )


@pytest.fixture
def zs_callback_errors(request: pytest.FixtureRequest) -> list[CallbackErrorReport]:
    """The errors of callbacks from native code that went to
    ``sys.unraisablehook`` during this test (a host's loop called them), as
    they come; taking this fixture allows them (see the module docstring)."""
    node = request.node
    assert isinstance(node, pytest.Item)
    errors = node.stash.get(_CALLBACK_ERRORS, None)
    if errors is None:  # the plugin's setup hook did not run (called outside a test)
        raise pytest.UsageError("zs_callback_errors is only for tests")
    errors.allowed = True
    return errors.reports
