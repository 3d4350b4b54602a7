// pb_values.cpp -- values.h bound with pybind11 (benchmark peer of the
// "values" family, benchmarks/values.py).
//
// Built twice by benchmarks/_build.py:
//   -DBENCH_OPAQUE=1: the containers are opaque bound classes
//     (PYBIND11_MAKE_OPAQUE; py::bind_vector, py::bind_map, a hand-bound
//     class for the sets: pybind11 has no bind_set);
//   -DBENCH_OPAQUE=0: the containers go through the STL casters
//     (pybind11/stl.h), which copy the whole container on every read and
//     every assignment.
// Everything else is the same in both builds: V is a bound class
// (def_readwrite: a reference_internal view on read, a copy on assignment),
// std::string and std::optional use their casters (pybind11/stl.h for the
// optional, included in both builds), the delegates, the weak and soft
// pointers and the field path are bound classes calling into C++.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>

#if BENCH_OPAQUE
#include <pybind11/stl_bind.h>
#endif
#include "values.h"

namespace py = pybind11;
using namespace pybind11::literals;
using namespace BENCH_NS;

#if BENCH_OPAQUE
PYBIND11_MAKE_OPAQUE(BENCH_NS::StringSet)
PYBIND11_MAKE_OPAQUE(BENCH_NS::FloatVec)
PYBIND11_MAKE_OPAQUE(BENCH_NS::IntVec)
PYBIND11_MAKE_OPAQUE(BENCH_NS::KidVec)
PYBIND11_MAKE_OPAQUE(BENCH_NS::ScoreMap)
#endif
// After the opaque declarations: std::optional's caster (and, in the caster
// build, the containers' casters).
#include <pybind11/stl.h>

#define BENCH_PB_MODULE(name, variable) PYBIND11_MODULE(name, variable)

BENCH_PB_MODULE(BENCH_MODULE, m) {
    m.attr("OPAQUE") = bool(BENCH_OPAQUE);

    py::class_<V>(m, "V")
        .def(py::init<>())
        .def(py::init<double, double>(), "x"_a, "y"_a)
        .def_readwrite("x", &V::x)
        .def_readwrite("y", &V::y);

#if BENCH_OPAQUE
    py::bind_vector<FloatVec>(m, "FloatVec");
    py::bind_vector<IntVec>(m, "IntVec");
    py::bind_map<ScoreMap>(m, "ScoreMap");
    // pybind11 has no bind_set: the set bound by hand, as a user would.
    py::class_<StringSet>(m, "StringSet")
        .def(py::init<>())
        .def("add", [](StringSet &set, const std::string &value) { set.insert(value); })
        .def("discard", [](StringSet &set, const std::string &value) { set.erase(value); })
        .def("clear", [](StringSet &set) { set.clear(); })
        .def("__contains__",
             [](const StringSet &set, const std::string &value) { return set.count(value) != 0; })
        .def("__contains__", [](const StringSet &, const py::object &) { return false; })
        .def("__len__", [](const StringSet &set) { return set.size(); })
        .def(
            "__iter__",
            [](const StringSet &set) { return py::make_iterator(set.begin(), set.end()); },
            py::keep_alive<0, 1>());
#endif

    py::class_<Delegate>(m, "Delegate")
        .def(py::init<>())
        .def("bind", &Delegate::bind)
        .def("unbind", &Delegate::unbind)
        .def("is_bound", &Delegate::is_bound)
        .def("execute", &Delegate::execute);

    py::class_<Multicast>(m, "Multicast")
        .def(py::init<>())
        .def("add", &Multicast::add)
        .def("remove", &Multicast::remove)
        .def("clear", &Multicast::clear)
        .def("__len__", &Multicast::size)
        .def("broadcast", &Multicast::broadcast);

    py::class_<A>(m, "A")
        .def(py::init<int32_t, std::string, std::string>(), "hp"_a = 0, "label"_a = "",
             "path"_a = "")
        .def_readwrite("hp", &A::hp)
        .def_readwrite("pos", &A::pos)
        .def_readwrite("label", &A::label)
        .def_readwrite("tags", &A::tags)
        .def_readwrite("stags", &A::stags)
        .def_readwrite("kids", &A::kids)
        .def_readwrite("floats", &A::floats)
        .def_readwrite("ints", &A::ints)
        .def_readwrite("scores", &A::scores)
        .def_readwrite("opt", &A::opt)
        .def_readwrite("on_hit", &A::on_hit)
        .def_readwrite("on_event", &A::on_event)
        .def_readwrite("weak", &A::weak)
        .def_readwrite("soft", &A::soft);

#if BENCH_OPAQUE
    py::bind_vector<KidVec>(m, "KidVec");
    // As nanobind's bind_vector does by default: a list assigned to an
    // opaque member converts implicitly.
    py::implicitly_convertible<py::list, FloatVec>();
    py::implicitly_convertible<py::list, IntVec>();
    py::implicitly_convertible<py::list, KidVec>();
#endif

    py::class_<WeakPtr>(m, "WeakPtr")
        .def(py::init<>())
        .def(py::init<const A &>())
        .def("get", &WeakPtr::get, py::return_value_policy::reference);

    py::class_<SoftPtr>(m, "SoftPtr")
        .def(py::init<>())
        .def(py::init<std::string>())
        .def_readwrite("path", &SoftPtr::path)
        .def("get", &SoftPtr::get, py::return_value_policy::reference);

    py::class_<FieldPath>(m, "FieldPath")
        .def(py::init<const std::string &>())
        .def("get",
             [](const FieldPath &path, A &object) -> py::object {
                 if (path.kind == FieldKind::Float64) return py::float_(*path.at<double>(object));
                 return py::int_(*path.at<int32_t>(object));
             })
        .def("set", [](const FieldPath &path, A &object, const py::handle &value) {
            if (path.kind == FieldKind::Float64) *path.at<double>(object) = value.cast<double>();
            else *path.at<int32_t>(object) = value.cast<int32_t>();
        });
}
