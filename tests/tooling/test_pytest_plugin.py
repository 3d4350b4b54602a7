"""The pytest plugin (zsharp_py/testing.py), run on small suites through
pytester: the zs_runtime fixture, its leak check, the markers and options."""

from __future__ import annotations

import textwrap

import pytest

pytest_plugins = ["pytester"]

HEADER = textwrap.dedent("""
    import gc
    import pytest
    import zsharp_py as zs
    from zsharp_py.debug import GcStress

    class Actor(zs.Object):
        health: zs.Int32 = 100
        target: "Actor | None"
        on_hit: zs.MulticastDelegate

    class Vector(zs.Struct):
        x: zs.Float64
        y: zs.Float64

    KEPT = []
""")


def run(pytester: pytest.Pytester, body: str, *args: str) -> pytest.RunResult:
    """Write ``body`` (after HEADER) as test_suite.py and run it in-process
    (without hypothesis's plugin: pytester drops the modules a run imports,
    so that plugin would import hypothesis anew in every run)."""
    pytester.makepyfile(test_suite=HEADER + textwrap.dedent(body))
    return pytester.runpytest(
        "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--strict-markers", *args
    )


def test_clean_tests_pass_and_leaks_are_listed_with_what_keeps_them(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
        def test_clean(zs_runtime):
            hero = Actor(name="Hero"); hero.add_to_root()
            hero.target = Actor()
            hero.remove_from_root()
            with zs.StrongObjectPtr(hero):
                pass
            v = Vector(1.0, 2.0)            # dropped with the frame: not a leak

        def test_leaky(zs_runtime):
            hero = Actor(name="Hero"); hero.add_to_root()
            hero.target = Actor(name="Boss")
            zs.StrongObjectPtr(Actor(name="Pinned"))   # finalised at once: released
            KEPT.append(zs.StrongObjectPtr(Actor(name="Held")))
            KEPT.append(Vector(3.0, 4.0))
    """,
    )
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_leaky*",
            "*test_suite.py::test_leaky leaked native memory*",
            "*3 objects still alive:",
            "*<Actor 'Hero' #*> kept by (rooted) Actor 'Hero'",
            "*<Actor 'Boss' #*> kept by (rooted) Actor 'Hero' -> target -> Actor 'Boss'",
            "*<Actor 'Held' #*> kept by (strong pointer) Actor 'Held'",
            "*1 black value still alive*",
            "*Vector(x=3.0, y=4.0)",
            "*zs_allow_leaks*",
        ]
    )
    assert "Pinned" not in result.stdout.str()  # its pointer was finalised: released
    assert "test_clean" not in "".join(line for line in result.stdout.lines if "ERROR" in line)


def test_a_cycle_across_the_boundary_is_reported_with_the_bound_callables(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
        def test_cycle(zs_runtime):
            delegate = zs.MulticastDelegate()
            delegate.add(lambda: delegate)   # the closure holds the black delegate
    """,
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*1 black value still alive*",
            "*MulticastDelegate*",
            "*1 Python callable still bound into native delegates*cycle across the boundary*",
        ]
    )


def test_opt_outs_skip_the_leak_check(pytester: pytest.Pytester) -> None:
    body = """
        @pytest.mark.zs_allow_leaks
        def test_marked(zs_runtime):
            Actor().add_to_root()

        def test_unmarked(zs_runtime):
            Actor().add_to_root()
    """
    run(pytester, body).assert_outcomes(passed=2, errors=1)
    run(pytester, body, "--zs-no-leak-check").assert_outcomes(passed=2)


def test_a_failing_test_reports_its_failure_not_leaks(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        def test_fails(zs_runtime):
            Actor().add_to_root()
            assert False, "the test's own failure"
    """,
    )
    result.assert_outcomes(failed=1)
    assert "the test's own failure" in result.stdout.str()
    assert "leaked" not in result.stdout.str()


def test_the_runtime_is_fresh_current_and_closed_after_the_test(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        @pytest.mark.zs_allow_leaks
        def test_first(zs_runtime):
            assert zs.current_runtime() is zs_runtime
            assert zs_runtime.live_objects() == 0 and not zs_runtime.closed
            KEPT.append((zs_runtime, Actor()))
            KEPT[-1][1].add_to_root()

        def test_second(zs_runtime):
            first, actor = KEPT.pop()
            assert first is not zs_runtime and first.closed
            assert actor.is_expired
            with pytest.raises(zs.ExpiredConjugateError, match="runtime was closed"):
                actor.health
            assert zs.current_runtime() is zs_runtime

        def test_closing_it_early_is_allowed(zs_runtime):
            Actor().add_to_root()
            zs_runtime.close()
    """,
    )
    result.assert_outcomes(passed=3)


def test_use_after_free_in_a_user_test_raises_expired_conjugate_error(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
        def test_caught(zs_runtime):
            stray = Actor()
            zs_runtime.collect_garbage()
            with pytest.raises(zs.ExpiredConjugateError, match="garbage collector destroyed it"):
                stray.health = 5

        def test_uncaught(zs_runtime):
            stray = Actor()
            zs_runtime.collect_garbage()
            stray.health
    """,
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*ExpiredConjugateError: Actor 'Actor_0' has expired*"])


def test_stress_marker_and_option_reach_the_runtime(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        """
        from zsharp_py.testing import DEFAULT_STRESS

        @pytest.mark.zs_stress(collect_every=2, check_marks=True)
        def test_switches(zs_runtime):
            assert zs_runtime.stress == GcStress(collect_every=2, check_marks=True)
            first = Actor()
            Actor()                        # the 2nd creation collects first
            assert first.is_expired

        @pytest.mark.zs_stress
        def test_bare_marker(zs_runtime):
            assert zs_runtime.stress == GcStress(**DEFAULT_STRESS)

        @pytest.mark.zs_runtime_options(min_cluster_size=4, black_conjugates_are_roots=False)
        def test_options(zs_runtime):
            assert not zs_runtime.black_conjugates_are_roots
            assert zs_runtime.stress == GcStress()

        @pytest.mark.zs_stress(collect_every=3)
        @pytest.mark.zs_runtime_options(stress=GcStress())
        def test_two_ways(zs_runtime):
            pass

        @pytest.mark.zs_stress(5)
        def test_positional(zs_runtime):
            pass
    """,
    )
    result.assert_outcomes(passed=3, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*zs_stress, not zs_runtime_options(stress=...)*",
            "*zs_stress takes keyword arguments only*",
        ]
    )
    every = run(
        pytester,
        """
        from zsharp_py.testing import DEFAULT_STRESS

        def test_default(zs_runtime):
            assert zs_runtime.stress == GcStress(**DEFAULT_STRESS)

        @pytest.mark.zs_stress(poison_freed=True)
        def test_marker_wins(zs_runtime):
            assert zs_runtime.stress == GcStress(poison_freed=True)
    """,
        "--zs-stress",
    )
    every.assert_outcomes(passed=2)


def test_the_heap_is_verified_at_teardown(pytester: pytest.Pytester) -> None:
    """A lost object (write barrier switched off mid-mark) is caught by the
    check-mark switch and reported by the fixture's rt.gc.verify()."""
    result = run(
        pytester,
        """
        class Node(zs.Object):
            next: "Node | None"

        @pytest.mark.zs_stress(check_marks=True, objects_per_step=1)
        def test_lost_object(zs_runtime):
            head = node = Node()
            nodes = [node]
            for _ in range(200):
                node.next = Node(); node = node.next; nodes.append(node)
            head.add_to_root()
            holder = Node(); holder.add_to_root()   # on top of the mark stack: scanned first
            zs_runtime.gc._debug_disable_barrier(True)
            zs_runtime.gc.start_incremental()
            for _ in range(3):
                zs_runtime.gc.step(1.0)
            holder.next = nodes[-1]
            nodes[-2].next = None
            while not zs_runtime.gc.step(1.0):
                pass
            holder.next = None             # repaired: only the check-mark failure remains
            zs_runtime.gc._debug_disable_barrier(False)
            head.remove_from_root(); holder.remove_from_root()
    """,
    )
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*HeapCorruptionError*check-mark*"])


def test_permanent_objects_are_not_leaks_and_long_reports_are_cut(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester,
        """
        @pytest.mark.zs_runtime_options(disregard_for_gc=True)
        def test_startup_objects(zs_runtime):
            Actor(name="World")
            zs_runtime.close_disregard_for_gc()
            Actor(name="Later").add_to_root()

        def test_many(zs_runtime):
            for _ in range(25):
                Actor().add_to_root()
    """,
    )
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(
        [
            "*test_startup_objects leaked*",
            "  1 object still alive:",
            "*<Actor 'Later' #1> kept by (rooted) Actor 'Later'",
            "*test_many leaked*",
            "  25 objects still alive:",
            "*<Actor 'Actor_19' #19> kept by (rooted)*",
            "    ... and 5 more",
        ]
    )
    assert "World" not in result.stdout.str()


def test_the_plugin_is_inert_for_suites_that_do_not_use_it(pytester: pytest.Pytester) -> None:
    """Registered through its entry point, it opens no runtime and adds no
    fixture to tests that do not ask for zs_runtime (such as a suite with its
    own runtime fixture, like ours)."""
    pytester.makeconftest("""
        import pytest
        import zsharp_py as zs
        from zsharp_py._runtime import runtime as _runtime

        OPEN_BEFORE = set(_runtime._open_runtimes)

        @pytest.fixture
        def rt():
            with zs.Runtime() as runtime:
                yield runtime
    """)
    pytester.makepyfile(
        test_plain="""
        import zsharp_py as zs
        from conftest import OPEN_BEFORE
        from zsharp_py._runtime import runtime as _runtime

        class Thing(zs.Object):
            size: zs.Int32

        def test_plain(request, pytestconfig):
            assert pytestconfig.pluginmanager.hasplugin("zsharp_py")
            assert "zs_runtime" not in request.fixturenames
            assert set(_runtime._open_runtimes) <= OPEN_BEFORE

        def test_own_fixture(rt, request):
            Thing().add_to_root()             # no leak check: not zs_runtime
            assert request.fixturenames == ["rt", "request"]
    """
    )
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--strict-markers"
    )
    result.assert_outcomes(passed=2)


# ---------------------------------------------------------------------------
# Errors of callbacks that a host's loop swallowed fail the test
# ---------------------------------------------------------------------------

LOOP = """
from zsharp_py._base.ffi import ffi, lib

class Ticker(zs.Object):
    fail: zs.Bool

    def tick(self, dt: float) -> None:
        if self.fail:
            raise ValueError("swallowed by the loop")


def host_frames(rt, frames=1):
    # A host's own frame loop: zs_tick_frame from C, no Python call into
    # the host around it, so a tick function's error cannot be raised.
    stats = ffi.new("zs_frame_stats *")
    native = ffi.cast("zs_runtime *", rt.native_address)
    for _ in range(frames):
        assert lib.zs_tick_frame(native, 0.1, ffi.NULL, stats) == lib.ZS_OK


def ticking(rt, fail):
    ticker = Ticker(fail=fail)
    ticker.add_to_root()
    rt.ticks.register(ticker)
    return ticker
"""


def test_a_callback_error_a_host_loop_swallowed_fails_the_test(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        LOOP
        + textwrap.dedent(
            """
        def test_clean(zs_runtime):
            ticker = ticking(zs_runtime, fail=False)
            host_frames(zs_runtime, 3)
            ticker.remove_from_root()

        def test_swallowed(zs_runtime):
            ticker = ticking(zs_runtime, fail=True)
            host_frames(zs_runtime, 12)          # reported on the 1st and 10th frames
            ticker.remove_from_root()

        def test_raised_to_python_is_an_ordinary_failure(zs_runtime):
            ticking(zs_runtime, fail=True).remove_from_root()
            with pytest.raises(zs.CallbackError):
                zs_runtime.ticks.frame(0.1)      # a Python call into the host: raised

        def test_without_a_runtime_fixture():
            with zs.Runtime() as rt:
                ticking(rt, fail=True)
                host_frames(rt)

        def test_other_unraisable_reports_are_pytests():
            class Noisy:
                def __del__(self):
                    raise KeyError("not a callback's")
            Noisy()
    """
        ),
        "-W",
        "ignore::pytest.PytestUnraisableExceptionWarning",
    )
    result.assert_outcomes(passed=5, errors=2)  # the two fail at teardown
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_swallowed*",
            "*test_suite.py::test_swallowed: 2 errors raised by Python code that native code "
            "called*went to sys.unraisablehook:",
            "*in <bound method Ticker.tick of <Ticker *>>:",
            "*ValueError: swallowed by the loop",
            "*in <bound method Ticker.tick of <Ticker *>> (the same error 10 times):",
            "*zs_allow_callback_errors*zs_callback_errors*",
        ]
    )
    errors = [line for line in result.stdout.lines if line.startswith("ERROR ")]
    assert len(errors) == 2
    assert any("test_swallowed" in line for line in errors)
    assert any("test_without_a_runtime_fixture" in line for line in errors)
    assert "KeyError" not in "".join(errors)


def test_tests_that_expect_callback_errors_opt_out(pytester: pytest.Pytester) -> None:
    result = run(
        pytester,
        LOOP
        + textwrap.dedent(
            """
        import sys

        @pytest.mark.zs_allow_callback_errors
        def test_marked(zs_runtime):
            ticking(zs_runtime, fail=True).remove_from_root()
            host_frames(zs_runtime)

        def test_checked(zs_runtime, zs_callback_errors):
            ticking(zs_runtime, fail=True).remove_from_root()
            host_frames(zs_runtime, 2)
            assert [type(r.exception) for r in zs_callback_errors] == [ValueError]
            assert "Ticker.tick" in zs_callback_errors[0].where
            assert "swallowed by the loop" in zs_callback_errors[0].text

        def test_own_hook(zs_runtime, monkeypatch):
            heard = []
            monkeypatch.setattr(sys, "unraisablehook", heard.append)
            ticking(zs_runtime, fail=True).remove_from_root()
            host_frames(zs_runtime)
            assert len(heard) == 1

        def test_next_test_starts_clean(zs_runtime):
            host_frames(zs_runtime)
            assert sys.unraisablehook.__self__.__class__.__name__ == "_CallbackErrors"
    """
        ),
        "-W",
        "ignore::pytest.PytestUnraisableExceptionWarning",
    )
    result.assert_outcomes(passed=4)
