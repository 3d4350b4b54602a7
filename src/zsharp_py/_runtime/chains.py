"""``rt.reference_chains(obj)``: why is an object alive?

For each root that reaches the object, the shortest chain of references from
that root to it, nearest roots first, after Unreal's ``FReferenceChainSearch``
(``obj refs``). The native side (``native/src/chains.c``) searches the
reversed reference graph along exactly the edges the mark follows; this
module turns its links into conjugates and member names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import _core
from .._base.errors import check
from .._model.object import Object, PropertyInfo, class_layout
from .._model.struct import Struct, StructKind, struct_layout

if TYPE_CHECKING:
    from .._base.context import RuntimeInternals

__all__ = ["ChainLink", "ReferenceChain", "reference_chains"]

_ROOT_REASONS = (
    (_core.CHAIN_ROOT_ADDED, "rooted"),
    (_core.CHAIN_ROOT_STRONG, "strong pointer"),
    (_core.CHAIN_ROOT_PERMANENT, "permanent"),
    (_core.CHAIN_ROOT_VALUE, "black value"),
)
_SPECIAL_MEMBERS = {
    _core.CHAIN_OUTER: "outer",
    _core.CHAIN_CLUSTER: "cluster",
    _core.CHAIN_WHOLE: "contents",
}


@dataclass(frozen=True)
class ChainLink:
    """One step of a reference chain: ``holder`` keeps the next link's
    object alive through ``member``."""

    holder: Any
    """An object conjugate; on a chain's first link, possibly a black value
    conjugate (a struct or container created from Python), or None for a
    black value whose conjugate is already gone (its block is freed at the
    runtime's next safe point)."""
    member: str | None
    """The property path holding the next object (``"target"``, ``"items"``,
    ``"spot.owner"`` for a reference inside a struct property), ``"outer"``
    (an object keeps its outer alive), ``"cluster"`` (both are in one
    cluster, which is marked as a unit), ``"contents"`` (a black container
    holds it); None on the last link, whose holder is the object asked about."""


@dataclass(frozen=True)
class ReferenceChain:
    """A shortest path of references from a root to an object."""

    root_reasons: tuple[str, ...]
    """Why the first holder is a root: ``"rooted"`` (``add_to_root``),
    ``"strong pointer"`` (a ``StrongObjectPtr``), ``"permanent"`` (created
    while disregarding the GC), ``"black value"``."""
    links: tuple[ChainLink, ...]
    """From the root to the object asked about (the last link)."""

    @property
    def root(self) -> Any:
        """The root the chain starts from (the first link's holder)."""
        return self.links[0].holder

    def __len__(self) -> int:
        """Number of references followed (0 when the object is itself a root)."""
        return len(self.links) - 1

    def __str__(self) -> str:
        parts = [f"({', '.join(self.root_reasons)})"]
        for link in self.links:
            parts.append(_describe(link.holder))
            if link.member is not None:
                parts.append(f"-> {link.member} ->")
        return " ".join(parts)


def reference_chains(
    runtime: RuntimeInternals, obj: Object, limit: int | None
) -> list[ReferenceChain]:
    """``Runtime.reference_chains``: see there."""

    if not isinstance(obj, Object):
        raise TypeError(f"reference_chains() needs a zs.Object, got {type(obj).__name__}")
    if obj._rt is not runtime:
        raise ValueError(f"{obj!r} belongs to another runtime")
    if limit is not None and (
        not isinstance(limit, int) or isinstance(limit, bool) or not 0 < limit < 2**32
    ):
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    max_chains = limit or 0
    what = f"{type(obj).__name__}.reference_chains"
    # Under the lock no collection or close can run between the search and
    # turning its handles into conjugates (which adopts objects, and flushing
    # frees values: neither may run re-entered inside a collection). The lock
    # is re-entrant: on this thread, the allocations of the search and of
    # the conversion may run Python's cycle collector, whose callbacks and
    # finalisers may try to collect or close the runtime; that is refused
    # like any re-entry while conjugates are being adopted (an adoption), else
    # the links would name freed objects (None holders) or a closed runtime.
    with runtime._lock:
        obj._live_runtime()  # raises ExpiredConjugateError once expired
        runtime._refuse_reentry("reference_chains()")
        handle = obj._h
        runtime._flush_deferred()  # a safe point: roots released by finalisers go first
        runtime._life_enter(
            _core.LIFE_ADOPT, "reference_chains()"
        )  # ExpiredConjugateError if closing
        try:
            # The search, asked again with room for every link when the
            # first answer is larger, in one call (the GIL released).
            status, links = runtime._heap_reference_chains(handle, max_chains)
            check(status, what, runtime)
            return _chains(runtime, links)
        finally:
            runtime._life_leave(_core.LIFE_ADOPT)


def _chains(runtime: RuntimeInternals, links: list[tuple[int, int, int]]) -> list[ReferenceChain]:
    """Group native links, (holder, member, root) each, into chains (each
    ends at a CHAIN_END link)."""
    chains: list[ReferenceChain] = []
    current: list[ChainLink] = []
    reasons: tuple[str, ...] = ()
    for link_holder, member, root in links:
        if not current:
            reasons = tuple(text for bit, text in _ROOT_REASONS if root & bit)
        if root & _core.CHAIN_ROOT_VALUE:
            holder = runtime._black_of(link_holder)
        else:
            holder = runtime._conjugate_of(link_holder)
        if member == _core.CHAIN_END:
            current.append(ChainLink(holder, None))
            chains.append(ReferenceChain(reasons, tuple(current)))
            current = []
        else:
            current.append(ChainLink(holder, _member_name(holder, member)))
    return chains


def _member_name(holder: Any, member: int) -> str:
    """The property path at a byte offset of the holder's layout."""
    special = _SPECIAL_MEMBERS.get(member)
    if special is not None:
        return special
    if isinstance(holder, Object):
        return _property_path(class_layout(type(holder)).properties, member)
    if isinstance(holder, Struct):
        return _property_path(struct_layout(type(holder)).properties, member)
    return f"+{member}"  # a black value whose conjugate is gone: its type is unknown here


def _property_path(properties: list[PropertyInfo], offset: int) -> str:
    """The property at a byte offset (its last one starting at or before it),
    descending into struct properties: the native reference schema inlines
    structs, so a reference inside one is named by its own offset."""

    found: PropertyInfo | None = None
    for info in properties:
        if info.offset <= offset and (found is None or info.offset >= found.offset):
            found = info
    if found is None:
        return f"+{offset}"
    if isinstance(found.kind, StructKind):
        inner = _property_path(struct_layout(found.kind.cls).properties, offset - found.offset)
        return f"{found.name}.{inner}"
    return found.name


def _describe(holder: Any) -> str:
    """``Actor 'Hero'``, or a black value's type (``Array[Actor]``)."""

    if holder is None:
        return "a freed black value"
    if isinstance(holder, Object):
        return f"{type(holder).__name__} {holder.name!r}"
    return type(holder).__name__
