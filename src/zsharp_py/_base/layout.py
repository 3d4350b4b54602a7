"""C struct layouts of what is declared from Python, computed here.

An object class is laid out as a C struct of the ``zs_object`` header, then
its properties; a ``zs.Struct`` as one of its members; a function called
from native code passes its arguments in one; and some kinds hold their
value as a small struct (an optional's value and flag, a lazy pointer's id).
The C rules are simple enough to apply in Python: each member goes at the
next multiple of its alignment, the struct is as aligned as its most
aligned member, and its size is rounded up to that alignment.

The sizes and alignments of the native types come from the C compiler
itself, through ``zsharp_py._core`` (``C_LAYOUTS``, built from ``zsharp.h``:
native/binding/heap_calls.c), so that header stays the one declaration of
the native structs: a second declaration here could drift from it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import TypeAlias

from .. import _core

__all__ = ["HEADER", "Layout", "MemberType", "align_up", "member_name", "size_align"]

MemberType: TypeAlias = "str | Layout"
"""The type of a layout member: the name of a C type ``_core.C_LAYOUTS``
knows (``"zs_string"``, ``"uint64_t"``, ``"void *"``...) or another layout,
embedded by value."""

_C_LAYOUTS: dict[str, tuple[int, int]] = _core.C_LAYOUTS

HEADER = "_hdr"
"""The member name of an object layout's ``zs_object`` header (no
``member_name`` starts with an underscore)."""


def align_up(offset: int, align: int) -> int:
    """``offset`` rounded up to a multiple of ``align``."""
    return (offset + align - 1) // align * align


def size_align(member_type: MemberType) -> tuple[int, int]:
    """The size and alignment of a member type, in bytes."""
    if isinstance(member_type, Layout):
        return member_type.size, member_type.align
    found = _C_LAYOUTS.get(member_type)
    if found is None:
        raise ValueError(f"{member_type!r} is not a C type of the layouts (_core.C_LAYOUTS)")
    return found


class Layout:
    """A C struct of ``members`` (``(name, member type)`` pairs, in order),
    laid out as the C compiler lays it out.

    A struct without members is one byte, the padding byte its C
    declaration would need (standard C has no empty structs), so that its
    values, and the elements of an array of them, have addresses of their
    own.
    """

    __slots__ = ("label", "members", "offsets", "size", "align")

    label: str
    """What the struct is (``repr`` and errors only)."""
    members: tuple[tuple[str, MemberType], ...]
    offsets: Mapping[str, int]
    """Each member's byte offset, by name."""
    size: int
    align: int

    def __init__(self, label: str, members: Iterable[tuple[str, MemberType]]) -> None:
        self.label = label
        self.members = tuple(members)
        offsets: dict[str, int] = {}
        end, align = 0, 1
        for name, member_type in self.members:
            if name in offsets:
                raise ValueError(f"layout {label}: two members named {name!r}")
            member_size, member_align = size_align(member_type)
            offsets[name] = align_up(end, member_align)
            end = offsets[name] + member_size
            align = max(align, member_align)
        self.offsets = offsets
        self.align = align
        self.size = align_up(end, align) if self.members else 1

    @classmethod
    def opaque(cls, label: str, size: int, align: int) -> Layout:
        """A struct known only by its size and alignment (a native host's
        struct or class, whose members the host laid out), to embed in
        other layouts."""
        layout = cls(label, ())
        layout.size, layout.align = size, align
        return layout

    def __repr__(self) -> str:
        return f"<Layout {self.label}: {self.size} bytes, aligned {self.align}>"


def _ascii_tail(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]", "_", name)[:40]


def member_name(position: int, name: str) -> str:
    """The member name of the property (or parameter) at ``position`` in a
    layout.

    Numbered, so that no name collides with another (a parameter named
    ``return_value`` with the result, say) or with ``HEADER``; the ASCII
    tail keeps it a C identifier whatever the Python name, so a layout can
    be written out as a C struct (the layout tests do) and read.
    """
    return f"m{position}_{_ascii_tail(name)}"
