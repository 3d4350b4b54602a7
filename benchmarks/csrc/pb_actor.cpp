// pb_actor.cpp -- actor.h bound with pybind11 (benchmark peer).
#include <pybind11/pybind11.h>

#include "actor.h"

namespace py = pybind11;

// Ticker::tick overridable from Python (the trampoline pybind11 documents).
struct PyTicker : Ticker {
    using Ticker::Ticker;
    void tick(double dt) override { PYBIND11_OVERRIDE(void, Ticker, tick, dt); }
};

PYBIND11_MODULE(bench_pb_actor, m) {
    py::class_<Ticker, PyTicker>(m, "Ticker").def(py::init<>()).def("tick", &Ticker::tick);
    m.def("call_tick", [](Ticker &ticker, double dt) { ticker.tick(dt); });

    py::class_<Vec3>(m, "Vec3")
        .def(py::init<>())
        .def_readwrite("x", &Vec3::x)
        .def_readwrite("y", &Vec3::y)
        .def_readwrite("z", &Vec3::z);

    py::class_<Actor>(m, "Actor")
        .def(py::init([]() {
            Actor *actor = new Actor;
            actor_init(actor);
            return actor;
        }))
        .def_readwrite("health", &Actor::health)
        .def_readwrite("x", &Actor::x)
        .def_readwrite("y", &Actor::y)
        .def_readwrite("z", &Actor::z)
        .def_readwrite("velocity", &Actor::velocity) // reference_internal: a view
        .def_property("target",
                      py::cpp_function([](const Actor &actor) { return actor_get_target(&actor); },
                                       py::return_value_policy::reference),
                      [](Actor &actor, Actor *target) { actor_set_target(&actor, target); })
        .def("get_health", &actor_get_health)
        .def("move", &actor_move);

    py::class_<IntArray>(m, "IntArray")
        .def(py::init([]() {
            IntArray *array = new IntArray;
            int_array_init(array);
            return array;
        }))
        .def("__len__", [](const IntArray &) { return ACTOR_ARRAY_LENGTH; })
        .def(
            "__iter__",
            [](const IntArray &array) {
                return py::make_iterator(array.values, array.values + ACTOR_ARRAY_LENGTH);
            },
            py::keep_alive<0, 1>());
}
