// nb_host.cpp -- host_bench.h bound with nanobind (the host_classes family's peer).
#include <nanobind/nanobind.h>
#include <nanobind/trampoline.h>

#include "host_bench.h"

namespace nb = nanobind;

// The events overridable from Python (the trampoline nanobind documents).
struct PyBenchHost : BenchHost {
    NB_TRAMPOLINE(BenchHost);
    void on_scalar(double x) override { NB_OVERRIDE(on_scalar, x); }
    void on_struct(const BenchVec3 &v) override { NB_OVERRIDE(on_struct, v); }
    void on_object(BenchHost *o) override { NB_OVERRIDE(on_object, o); }
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

    // The C++ loops, called with the GIL held (as any bound function is)...
    m.def("call_scalar", &bench_call_scalar);
    m.def("call_struct", &bench_call_struct);
    m.def("call_object", &bench_call_object);
    // ...and with it released, so every trampoline call takes it.
    m.def("call_scalar_nogil", &bench_call_scalar, nb::call_guard<nb::gil_scoped_release>());
}
