// nb_actor.cpp -- actor.h bound with nanobind (benchmark peer).
#include <nanobind/nanobind.h>
#include <nanobind/make_iterator.h>

#include <new>

#include "actor.h"

#include <nanobind/trampoline.h>

namespace nb = nanobind;

// Ticker::tick overridable from Python (the trampoline nanobind documents).
struct PyTicker : Ticker {
    NB_TRAMPOLINE(Ticker, 1);
    void tick(double dt) override { NB_OVERRIDE(tick, dt); }
};

NB_MODULE(bench_nb_actor, m) {
    nb::class_<Ticker, PyTicker>(m, "Ticker").def(nb::init<>()).def("tick", &Ticker::tick);
    m.def("call_tick", [](Ticker &ticker, double dt) { ticker.tick(dt); });

    nb::class_<Vec3>(m, "Vec3")
        .def(nb::init<>())
        .def_rw("x", &Vec3::x)
        .def_rw("y", &Vec3::y)
        .def_rw("z", &Vec3::z);

    nb::class_<Actor>(m, "Actor")
        .def("__init__", [](Actor *actor) { actor_init(new (actor) Actor); })
        .def_rw("health", &Actor::health)
        .def_rw("x", &Actor::x)
        .def_rw("y", &Actor::y)
        .def_rw("z", &Actor::z)
        .def_rw("velocity", &Actor::velocity) // reference_internal: a view
        .def_prop_rw(
            "target", [](const Actor &actor) { return actor_get_target(&actor); },
            [](Actor &actor, Actor *target) { actor_set_target(&actor, target); },
            nb::rv_policy::reference)
        .def("get_health", &actor_get_health)
        .def("move", &actor_move);

    nb::class_<IntArray>(m, "IntArray")
        .def("__init__", [](IntArray *array) { int_array_init(new (array) IntArray); })
        .def("__len__", [](const IntArray &) { return ACTOR_ARRAY_LENGTH; })
        .def(
            "__iter__",
            [](const IntArray &array) {
                return nb::make_iterator(nb::type<IntArray>(), "iterator", array.values,
                                         array.values + ACTOR_ARRAY_LENGTH);
            },
            nb::keep_alive<0, 1>());
}
