// nb_host.cpp -- host_bench.h bound with nanobind (the host_classes family's peer).
#include <nanobind/nanobind.h>
#include <nanobind/stl/bind_vector.h>
#include <nanobind/stl/function.h>
#include <nanobind/trampoline.h>

#include "host_bench.h"

namespace nb = nanobind;

// BenchActor::kids as a view of the C++ vector (bind_vector), not a copy.
NB_MAKE_OPAQUE(std::vector<BenchActor *>)

// The events overridable from Python (the trampoline nanobind documents).
struct PyBenchHost : BenchHost {
    NB_TRAMPOLINE(BenchHost);
    void on_scalar(double x) override { NB_OVERRIDE(on_scalar, x); }
    void on_struct(const BenchVec3 &v) override { NB_OVERRIDE(on_struct, v); }
    void on_object(BenchHost *o) override { NB_OVERRIDE(on_object, o); }
};

struct PyBenchActor : BenchActor {
    NB_TRAMPOLINE(BenchActor, 1);
    void tick(double dt) override { NB_OVERRIDE(tick, dt); }
};

NB_MODULE(bench_nb_host, m) {
    nb::class_<BenchVec3>(m, "BenchVec3")
        .def(nb::init<>())
        .def_rw("x", &BenchVec3::x)
        .def_rw("y", &BenchVec3::y)
        .def_rw("z", &BenchVec3::z);

    nb::class_<BenchHost, PyBenchHost>(m, "BenchHost")
        .def(nb::init<>())
        .def_rw("count", &BenchHost::count)
        .def_rw("speed", &BenchHost::speed)
        .def_ro("defaults", &BenchHost::defaults)
        .def("nop", &BenchHost::nop)
        .def("add3", &BenchHost::add3)
        .def("on_scalar", &BenchHost::on_scalar)
        .def("on_struct", &BenchHost::on_struct)
        .def("on_object", &BenchHost::on_object);

    // An element or the reference returned by reference (bind_vector's
    // __getitem__ returns a pointer element as rv_policy::reference): the
    // instance map's wrapper when one exists, else a new wrapper.
    nb::class_<BenchActor, PyBenchActor>(m, "BenchActor")
        .def(nb::init<>())
        .def_prop_rw(
            "ref", [](const BenchActor &actor) { return actor.ref; },
            [](BenchActor &actor, BenchActor *ref) { actor.ref = ref; }, nb::rv_policy::reference)
        .def_rw("kids", &BenchActor::kids) // reference_internal: a view
        .def_ro("ticks", &BenchActor::ticks)
        .def("tick", &BenchActor::tick);
    // After BenchActor: the element type is bound before its vector.
    nb::bind_vector<std::vector<BenchActor *>>(m, "BenchActorVector");
    m.def("spawn", &bench_spawn);
    m.def("tick_all", &bench_tick_all);

    // An event's listeners: Python callables held as std::function.
    nb::class_<BenchEmitter>(m, "BenchEmitter")
        .def(nb::init<>())
        .def("add", &BenchEmitter::add)
        .def("__len__", [](const BenchEmitter &e) { return e.listeners.size(); });
    m.def("broadcast", &bench_broadcast);

    // The C++ loops, called with the GIL held (as any bound function is)...
    m.def("call_scalar", &bench_call_scalar);
    m.def("call_struct", &bench_call_struct);
    m.def("call_object", &bench_call_object);
    // ...and with it released, so every trampoline call takes it.
    m.def("call_scalar_nogil", &bench_call_scalar, nb::call_guard<nb::gil_scoped_release>());
}
