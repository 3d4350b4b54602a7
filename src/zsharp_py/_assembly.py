"""The composition root: hands zsharp_py._core (native/binding/module.c)
the Python pieces its C paths call back into, each taken from the layer
that owns it. Imported once by the package, after every layer, so that no
layer has to import a layer above it to wire itself in."""

from __future__ import annotations

from . import _core
from ._base import context
from ._base.errors import ExpiredConjugateError, refused
from ._base.expiry import ExpiredPointer, expired_error
from ._interop import calls
from ._interop.reflection import signature_plan_of
from ._model import object as _object
from ._model import values as _values
from ._model.attributes import attribute_error
from ._runtime import ticks
from ._types.delegates import _find_method
from ._types.strings import Name

__all__: list[str] = []

_core.configure(
    current=context.current,
    default_runtime=context.default_runtime,
    slow_create=_object._create,
    init_create=_object._create_initialized,
    expired_error=expired_error,
    raise_status=refused,
    store_failed=_object._reference_store_failed,
    store_refused=_object._reference_store_refused,
    expired_type=ExpiredPointer,
    expired_exception=ExpiredConjugateError,
    current_runtime=context.current_runtime,
    name_class=Name,
    attribute_error=attribute_error,
)

ticks.configure(check_function=calls.check_tick_function)

# Calls from native code (native/binding/zpy_host_to_python.c): an object's
# function laid out on its first call, the scopes' ContextVar, a delegate's
# signature laid out on its first broadcast, and a listener's method found.
_core.configure_calls(
    plan_of=calls._plan_of,
    scopes=_values._scopes,
    signature_plan_of=signature_plan_of,
    find_method=_find_method,
)
