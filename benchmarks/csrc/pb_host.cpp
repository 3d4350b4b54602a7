// pb_host.cpp -- host_bench.h bound with pybind11 (the host_classes family's peer).
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl_bind.h>

#include "host_bench.h"

namespace py = pybind11;

// BenchActor::kids as a view of the C++ vector (bind_vector), not a copy.
PYBIND11_MAKE_OPAQUE(std::vector<BenchActor *>)

// The events overridable from Python (the trampoline pybind11 documents).
struct PyBenchHost : BenchHost {
    using BenchHost::BenchHost;
    void on_scalar(double x) override { PYBIND11_OVERRIDE(void, BenchHost, on_scalar, x); }
    void on_struct(const BenchVec3 &v) override {
        PYBIND11_OVERRIDE(void, BenchHost, on_struct, v);
    }
    void on_object(BenchHost *other) override {
        PYBIND11_OVERRIDE(void, BenchHost, on_object, other);
    }
};

struct PyBenchActor : BenchActor {
    using BenchActor::BenchActor;
    void tick(double dt) override { PYBIND11_OVERRIDE(void, BenchActor, tick, dt); }
};

PYBIND11_MODULE(bench_pb_host, m) {
    py::class_<BenchVec3>(m, "BenchVec3")
        .def(py::init<>())
        .def_readwrite("x", &BenchVec3::x)
        .def_readwrite("y", &BenchVec3::y)
        .def_readwrite("z", &BenchVec3::z);

    py::class_<BenchHost, PyBenchHost>(m, "BenchHost")
        .def(py::init<>())
        .def_readwrite("count", &BenchHost::count)
        .def_readwrite("speed", &BenchHost::speed)
        .def_readonly("defaults", &BenchHost::defaults)
        .def("nop", &BenchHost::nop)
        .def("add3", &BenchHost::add3)
        .def("on_scalar", &BenchHost::on_scalar)
        .def("on_struct", &BenchHost::on_struct)
        .def("on_object", &BenchHost::on_object);

    // An element (bind_vector: reference_internal) or the reference
    // (return_value_policy::reference) returned by reference: the existing
    // wrapper when there is one, else a new one.
    py::class_<BenchActor, PyBenchActor>(m, "BenchActor")
        .def(py::init<>())
        .def_property("ref",
                      py::cpp_function([](const BenchActor &actor) { return actor.ref; },
                                       py::return_value_policy::reference),
                      [](BenchActor &actor, BenchActor *ref) { actor.ref = ref; })
        .def_readwrite("kids", &BenchActor::kids) // reference_internal: a view
        .def_readonly("ticks", &BenchActor::ticks)
        .def("tick", &BenchActor::tick);
    py::bind_vector<std::vector<BenchActor *>>(m, "BenchActorVector");
    m.def("spawn", &bench_spawn);
    m.def("tick_all", &bench_tick_all);

    // An event's listeners: Python callables held as std::function.
    py::class_<BenchEmitter>(m, "BenchEmitter")
        .def(py::init<>())
        .def("add", &BenchEmitter::add)
        .def("__len__", [](const BenchEmitter &e) { return e.listeners.size(); });
    m.def("broadcast", &bench_broadcast);

    m.def("call_scalar", &bench_call_scalar);
    m.def("call_struct", &bench_call_struct);
    m.def("call_object", &bench_call_object);
    m.def("call_scalar_nogil", &bench_call_scalar, py::call_guard<py::gil_scoped_release>());
}
