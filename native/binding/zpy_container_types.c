/* The container types: ArrayBase, SetBase, MapBase and OptionalBase (and
 * the array iterator) made from the slots each family file gives.
 */
#include "zpy_containers.h"

/* =========================================================================
 * Registration
 * ========================================================================= */

/* A container base type deriving from ValueConjugate. */
static int add_base(PyObject *module, zpy_core_state *state, const char *name, PyType_Slot *slots,
                    PyTypeObject **out) {
    PyType_Spec spec = {
        .name = name,
        .basicsize = 0, /* the base's */
        .itemsize = 0,
        .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
        .slots = slots,
    };
    PyObject *bases = PyTuple_Pack(1, (PyObject *)state->value_type);
    if (bases == NULL) return -1;
    PyObject *type = PyType_FromModuleAndSpec(module, &spec, bases);
    Py_DECREF(bases);
    if (type == NULL) return -1;
    *out = (PyTypeObject *)type;
    const char *short_name = strrchr(name, '.') + 1;
    return PyModule_AddObjectRef(module, short_name, type);
}

int zpyv_add_container_types(PyObject *module, zpy_core_state *state) {
    state->iterator_type = (PyTypeObject *)PyType_FromModuleAndSpec(module, &zpyv_iterator_spec,
                                                                    NULL);
    if (state->iterator_type == NULL) return -1;
    return add_base(module, state, "zsharp_py._core.ArrayBase", zpyv_array_slots,
                    &state->array_type) ||
                   add_base(module, state, "zsharp_py._core.SetBase", zpyv_set_slots,
                            &state->set_type) ||
                   add_base(module, state, "zsharp_py._core.MapBase", zpyv_map_slots,
                            &state->map_type) ||
                   add_base(module, state, "zsharp_py._core.OptionalBase", zpyv_optional_slots,
                            &state->optional_type)
               ? -1
               : 0;
}
