// nb_values.cpp -- values.h bound with nanobind (benchmark peer of the
// "values" family, benchmarks/values.py).
//
// Built twice by benchmarks/_build.py:
//   -DBENCH_OPAQUE=1: the containers are opaque bound classes, so `a.kids`
//     is a view of the C++ vector (nb::bind_vector for the vectors,
//     nb::bind_map for the map, a hand-bound class for the sets: nanobind
//     has no bind_set);
//   -DBENCH_OPAQUE=0: the containers go through the STL casters
//     (nanobind/stl/vector.h, unordered_set.h, unordered_map.h), which copy
//     the whole container on every read and every assignment.
// Everything else is the same in both builds: V is a bound class (def_rw:
// a reference_internal view on read, a copy on assignment), std::string and
// std::optional use their casters, the delegates, the weak and soft pointers
// and the field path are bound classes calling into C++.
#include <nanobind/nanobind.h>
#include <nanobind/make_iterator.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#if BENCH_OPAQUE
#include <nanobind/stl/bind_map.h>
#include <nanobind/stl/bind_vector.h>
#else
#include <nanobind/stl/unordered_map.h>
#include <nanobind/stl/unordered_set.h>
#include <nanobind/stl/vector.h>
#endif

#include "values.h"

namespace nb = nanobind;
using namespace nb::literals;
using namespace BENCH_NS;

#if BENCH_OPAQUE
NB_MAKE_OPAQUE(BENCH_NS::StringSet)
NB_MAKE_OPAQUE(BENCH_NS::FloatVec)
NB_MAKE_OPAQUE(BENCH_NS::IntVec)
NB_MAKE_OPAQUE(BENCH_NS::KidVec)
NB_MAKE_OPAQUE(BENCH_NS::ScoreMap)
#endif

#define BENCH_NB_MODULE(name, variable) NB_MODULE(name, variable)

BENCH_NB_MODULE(BENCH_MODULE, m) {
    m.attr("OPAQUE") = bool(BENCH_OPAQUE);

    nb::class_<V>(m, "V")
        .def(nb::init<>())
        .def(nb::init<double, double>(), "x"_a, "y"_a)
        .def_rw("x", &V::x)
        .def_rw("y", &V::y);

#if BENCH_OPAQUE
    nb::bind_vector<FloatVec>(m, "FloatVec");
    nb::bind_vector<IntVec>(m, "IntVec");
    nb::bind_map<ScoreMap>(m, "ScoreMap");
    // nanobind has no bind_set: the set bound by hand, as a user would.
    nb::class_<StringSet>(m, "StringSet")
        .def(nb::init<>())
        .def("add", [](StringSet &set, const std::string &value) { set.insert(value); })
        .def("discard", [](StringSet &set, const std::string &value) { set.erase(value); })
        .def("clear", [](StringSet &set) { set.clear(); })
        .def("__contains__",
             [](const StringSet &set, const std::string &value) { return set.count(value) != 0; })
        .def("__contains__", [](const StringSet &, nb::handle) { return false; })
        .def("__len__", [](const StringSet &set) { return set.size(); })
        .def(
            "__iter__",
            [](const StringSet &set) {
                return nb::make_iterator(nb::type<StringSet>(), "iterator", set.begin(), set.end());
            },
            nb::keep_alive<0, 1>());
#endif

    nb::class_<Delegate>(m, "Delegate")
        .def(nb::init<>())
        .def("bind", &Delegate::bind)
        .def("unbind", &Delegate::unbind)
        .def("is_bound", &Delegate::is_bound)
        .def("execute", &Delegate::execute);

    nb::class_<Multicast>(m, "Multicast")
        .def(nb::init<>())
        .def("add", &Multicast::add)
        .def("remove", &Multicast::remove)
        .def("clear", &Multicast::clear)
        .def("__len__", &Multicast::size)
        .def("broadcast", &Multicast::broadcast);

    nb::class_<A>(m, "A")
        .def(nb::init<int32_t, std::string, std::string>(), "hp"_a = 0, "label"_a = "",
             "path"_a = "")
        .def_rw("hp", &A::hp)
        .def_rw("pos", &A::pos)
        .def_rw("label", &A::label)
        .def_rw("tags", &A::tags)
        .def_rw("stags", &A::stags)
        .def_rw("kids", &A::kids)
        .def_rw("floats", &A::floats)
        .def_rw("ints", &A::ints)
        .def_rw("scores", &A::scores)
        .def_rw("opt", &A::opt)
        .def_rw("on_hit", &A::on_hit)
        .def_rw("on_event", &A::on_event)
        .def_rw("weak", &A::weak)
        .def_rw("soft", &A::soft);

#if BENCH_OPAQUE
    // After A: the element type is bound before its vector (signatures).
    nb::bind_vector<KidVec>(m, "KidVec");
#endif

    nb::class_<WeakPtr>(m, "WeakPtr")
        .def(nb::init<>())
        .def(nb::init<const A &>())
        .def("get", &WeakPtr::get, nb::rv_policy::reference);

    nb::class_<SoftPtr>(m, "SoftPtr")
        .def(nb::init<>())
        .def(nb::init<std::string>())
        .def_rw("path", &SoftPtr::path)
        .def("get", &SoftPtr::get, nb::rv_policy::reference);

    nb::class_<FieldPath>(m, "FieldPath")
        .def(nb::init<const std::string &>())
        .def("get",
             [](const FieldPath &path, A &object) -> nb::object {
                 if (path.kind == FieldKind::Float64) return nb::float_(*path.at<double>(object));
                 return nb::int_(*path.at<int32_t>(object));
             })
        .def("set", [](const FieldPath &path, A &object, nb::handle value) {
            if (path.kind == FieldKind::Float64) *path.at<double>(object) = nb::cast<double>(value);
            else *path.at<int32_t>(object) = nb::cast<int32_t>(value);
        });
}
