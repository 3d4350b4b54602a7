"""Type stubs (``.pyi``) of a native host's classes, structs and enums, for
mypy, pyright and the editors that use them.

A host describes its types in C (docs/native-classes.md); Python binds them
from those descriptions at run time, so a type checker, which never runs
the code, knows nothing of them. ``host_stub`` writes what a checker needs
from the same descriptions the binder reads (zsharp_py/_interop/reflection.py):
each enum as an ``enum.IntEnum``; each struct as a ``zs.Struct`` subclass
with its members; each class as a ``zs.Object`` subclass with its
properties, its functions (with their signatures: in and in-out parameters
as arguments, then what the call gives back), its static functions and its
events (the functions a Python subclass may override). Properties are
annotated as a Python class would declare them (``health: zs.Int32``, which
a checker reads as ``int``); arguments take what a call accepts
(``type[Actor]`` for a ``SubclassOf[Actor]``, a ``str`` for a string).

``python -m zsharp_py stubs --engine sample -o sample.pyi`` runs it on the
sample engine; ``--install MODULE:FUNCTION`` on any host whose Python
function registers its descriptions in a runtime (as
``zsharp_py.sample_engine.install`` does). docs/writing-game-scripts.md,
"Typing", is the user's guide.

>>> import zsharp_py as zs
>>> from zsharp_py import sample_engine, stubs
>>> with zs.Runtime():
...     sample_engine.install()
...     text = stubs.host_stub()
>>> team = text[text.index("class Team") : text.index("class Vec3")]
>>> print("\\n".join(line for line in team.splitlines() if line))
class Team(enum.IntEnum):
    \"\"\"Team: an enum of the native host, stored as UInt8.\"\"\"
    Neutral = 0
    Red = 1
    Blue = 2
"""

from __future__ import annotations

import ast
import importlib
import keyword
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ._interop.reflection import (
    _TYPE_NAMES,
    ClassDescription,
    FunctionDescription,
    PropertyDescription,
    _properties,
    _read_class,
)
from ._runtime.runtime import Runtime, current_runtime

__all__ = ["HostDescriptions", "host_descriptions", "host_stub", "write_stub", "load_installer"]

_STRINGS = ("String", "Utf8String", "AnsiString", "Text")
_WIDTH = 100  # the project's line length (pyproject.toml, [tool.ruff])


@dataclass(frozen=True)
class EnumDescription:
    """A host's enum as it registered it."""

    name: str
    underlying: str
    """Its storage: ``"UInt8"``, ``"Int32"``..."""
    items: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class StructDescription:
    """A host's struct as it registered it."""

    name: str
    members: tuple[PropertyDescription, ...]


@dataclass(frozen=True)
class HostDescriptions:
    """Every type a runtime's native host registered, as described: what a
    stub declares."""

    enums: tuple[EnumDescription, ...]
    structs: tuple[StructDescription, ...]
    classes: tuple[ClassDescription, ...]

    @property
    def names(self) -> list[str]:
        """The names of the types, enums first, then structs and classes."""
        return (
            [e.name for e in self.enums]
            + [s.name for s in self.structs]
            + [c.name for c in self.classes]
        )


def host_descriptions(runtime: Runtime | None = None) -> HostDescriptions:
    """The descriptions of the classes, structs and enums the native host
    registered in ``runtime`` (the current one by default), in the order
    it registered them. Classes declared in Python and registered there
    are left out: their source is their declaration."""
    rt = runtime if runtime is not None else current_runtime()
    struct_names, enum_names = rt._heap_type_names()
    enums = []
    for name in enum_names:
        found = rt._heap_find_enum(name.encode("utf-8"))
        if found is not None:
            enum_name, underlying, items = found
            enums.append(EnumDescription(enum_name, underlying, tuple(items)))
    structs = []
    for name in struct_names:
        row = rt._heap_find_struct(name.encode("utf-8"))
        if row is not None:
            structs.append(StructDescription(row[0], _properties(row[3])))
    classes = []
    known = rt._classes_by_id
    for class_id, _ in enumerate(rt._heap_class_names()):
        bound = known[class_id] if class_id < len(known) else None
        if bound is not None and "_zs_description" not in bound.__dict__:
            continue  # declared in Python
        classes.append(_read_class(rt._heap_describe_class(class_id)))
    return HostDescriptions(tuple(enums), tuple(structs), tuple(classes))


# ---------------------------------------------------------------------------
# Type texts as annotations
# ---------------------------------------------------------------------------


class _Annotations:
    """Turns a description's type text (``"Array[Actor]"``) into the
    annotation a stub writes (``zs.Array[Actor]``): the host's own names as
    they are, ``zsharp_py``'s types through ``zs.``, ``Any`` for a name
    neither knows (a Python class the stub cannot import)."""

    def __init__(self, host_names: set[str]) -> None:
        self.host_names = host_names
        self.uses: set[str] = set()  # the imports the annotations need

    def _tree(self, text: str) -> ast.expr:
        try:
            tree = ast.parse(text, mode="eval").body
        except SyntaxError:
            self.uses.add("Any")
            return ast.Name("Any")
        return self._qualify(tree)

    def _qualify(self, node: ast.expr) -> ast.expr:
        if isinstance(node, ast.Name):
            if node.id in self.host_names or node.id == "None":
                return node
            if node.id in _TYPE_NAMES:
                return ast.Attribute(ast.Name("zs"), node.id)
            self.uses.add("Any")
            return ast.Name("Any")
        if isinstance(node, ast.Subscript):
            return ast.Subscript(self._qualify(node.value), self._qualify(node.slice))
        if isinstance(node, ast.Tuple):
            return ast.Tuple([self._qualify(e) for e in node.elts])
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return ast.BinOp(self._qualify(node.left), ast.BitOr(), self._qualify(node.right))
        if isinstance(node, ast.Constant) and node.value is None:
            return node
        self.uses.add("Any")
        return ast.Name("Any")

    def declared(self, text: str) -> str:
        """A property's or struct member's annotation: as a Python class
        would declare it."""
        return ast.unparse(self._tree(text))

    def argument(self, text: str) -> str:
        """What a call accepts for a parameter of this type."""
        return ast.unparse(self._accepted(self._tree(text)))

    def result(self, text: str) -> str:
        """What a call gives back for a result of this type."""
        return ast.unparse(self._given(self._tree(text)))

    @staticmethod
    def _zs_name(node: ast.expr) -> str | None:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return node.attr if node.value.id == "zs" else None
        return None

    def _generic(self, node: ast.expr) -> tuple[str | None, list[ast.expr]]:
        if isinstance(node, ast.Subscript):
            arguments = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return self._zs_name(node.value), list(arguments)
        return self._zs_name(node), []

    def _accepted(self, node: ast.expr) -> ast.expr:
        name, arguments = self._generic(node)
        text = ast.unparse(node)
        if name == "SubclassOf" and arguments:
            return _parse(f"type[{ast.unparse(arguments[0])}] | {text} | None")
        if name in ("WeakObjectPtr", "SoftObjectPtr", "LazyObjectPtr") and arguments:
            extra = " | str" if name == "SoftObjectPtr" else ""
            return _parse(f"{ast.unparse(arguments[0])} | {text}{extra} | None")
        if name in _STRINGS or name == "Name":
            return _parse(f"str | {text}")
        if name in ("Array", "Set") and len(arguments) == 1:
            self.uses.add("Iterable")
            return _parse(f"{text} | Iterable[{ast.unparse(self._accepted(arguments[0]))}]")
        if name == "Map" and len(arguments) == 2:
            self.uses.add("Mapping")
            key, value = (ast.unparse(self._accepted(a)) for a in arguments)
            return _parse(f"{text} | Mapping[{key}, {value}]")
        if name == "Optional" and len(arguments) == 1:
            return _parse(f"{ast.unparse(self._accepted(arguments[0]))} | {text} | None")
        return node

    def _given(self, node: ast.expr) -> ast.expr:
        name, arguments = self._generic(node)
        if name == "SubclassOf" and arguments:
            return _parse(f"type[{ast.unparse(arguments[0])}] | None")
        if name in _STRINGS:
            return _parse("str")
        if name == "Array" and len(arguments) == 1:
            return _parse(f"list[{ast.unparse(self._given(arguments[0]))}]")
        if name == "Set" and len(arguments) == 1:
            return _parse(f"set[{ast.unparse(self._given(arguments[0]))}]")
        if name == "Map" and len(arguments) == 2:
            key, value = (ast.unparse(self._given(a)) for a in arguments)
            return _parse(f"dict[{key}, {value}]")
        if name == "Optional" and len(arguments) == 1:
            return _parse(f"{ast.unparse(self._given(arguments[0]))} | None")
        return node


def _parse(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


# ---------------------------------------------------------------------------
# The stub
# ---------------------------------------------------------------------------


def _identifier(name: str, what: str) -> str:
    if not name.isidentifier() or keyword.iskeyword(name):
        raise ValueError(f"{what} {name!r} is not a Python identifier: no stub can declare it")
    return name


def _docstring(text: str, indent: str) -> list[str]:
    """A docstring's lines, wrapped to the project's width (100)."""
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    width = _WIDTH - len(indent)
    if len(text) + 6 <= width:
        return [f'{indent}"""{text}"""']
    lines: list[str] = []
    for paragraph in text.split("\n\n"):
        if lines:
            lines.append("")
        lines += textwrap.wrap(paragraph, width, break_long_words=False, break_on_hyphens=False)
    lines[0] = f'"""{lines[0]}'
    if len(lines[0]) > width:  # the quotes pushed the first line over
        first, _, rest = lines[0].rpartition(" ")
        lines[0:1] = [first, rest]
    return [f"{indent}{line}" if line else "" for line in lines] + [f'{indent}"""']


def _signature(head: str, arguments: list[str], result: str) -> list[str]:
    """``def head(arguments) -> result:``, wrapped as ruff formats it."""
    line = f"    def {head}({', '.join(arguments)}) -> {result}:"
    if len(line) <= _WIDTH:
        return [line]
    inner = f"        {', '.join(arguments)}"
    if len(inner) <= _WIDTH:
        return [f"    def {head}(", inner, f"    ) -> {result}:"]
    return [f"    def {head}(", *(f"        {a}," for a in arguments), f"    ) -> {result}:"]


def _function(function: FunctionDescription, types: _Annotations) -> Iterator[str]:
    """The stub of one function, static function or event."""
    name = _identifier(function.name, "the function")
    arguments = [] if function.is_static else ["self"]
    for parameter in function.parameters:
        if parameter.direction in ("in", "inout"):
            argument = _identifier(parameter.name, f"a parameter of {name}")
            arguments.append(f"{argument}: {types.argument(parameter.type)}")
    given = [types.result(p.type) for p in function.parameters if p.direction == "return"]
    given += [types.result(p.type) for p in function.parameters if p.direction in ("out", "inout")]
    result = given[0] if len(given) == 1 else f"tuple[{', '.join(given)}]" if given else "None"
    if function.is_static:
        yield "    @staticmethod"
    yield from _signature(name, arguments, result)
    kind = "A static function" if function.is_static else "A function"
    if function.is_event:
        kind = "An event: a Python subclass may override it (native calls reach the override)"
        if not function.entry:
            kind += "; it has no native default"
    yield from _docstring(f"{function.name}{function.signature_text}: {kind}.", "        ")


def host_stub(
    runtime: Runtime | None = None,
    *,
    title: str = "A native host's classes, structs and enums",
    command: str | None = None,
) -> str:
    """The text of a ``.pyi`` declaring every class, struct and enum that
    the native host registered in ``runtime`` (the current one by
    default), from their descriptions (``host_descriptions``). ``title`` opens
    the module's docstring; ``command``, when given, is named there as the
    one that regenerates the file.

    ``ValueError`` when a name the host registered is not a Python
    identifier."""
    described = host_descriptions(runtime)
    types = _Annotations(set(described.names))
    body: list[str] = []
    for enum_desc in described.enums:
        name = _identifier(enum_desc.name, "the enum")
        body += ["", f"class {name}(enum.IntEnum):"]
        body += _docstring(
            f"{enum_desc.name}: an enum of the native host, stored as {enum_desc.underlying}.",
            "    ",
        )
        body.append("")
        for item, value in enum_desc.items:
            body.append(f"    {_identifier(item, f'an item of {name}')} = {value}")
    for struct in described.structs:
        name = _identifier(struct.name, "the struct")
        body += ["", f"class {name}(zs.Struct):"]
        body += _docstring(f"{struct.name}: a struct of the native host.", "    ")
        body.append("")
        for member in struct.members:
            member_name = _identifier(member.name, f"a member of {name}")
            body.append(f"    {member_name}: {types.declared(member.type)} = ...")
    for cls in described.classes:
        name = _identifier(cls.name, "the class")
        parent = cls.parent if cls.parent in types.host_names else "zs.Object"
        body += ["", f"class {name}({parent}):"]
        body += _docstring(f"{cls.name}: a class of the native host.", "    ")
        if cls.properties or cls.functions:
            body.append("")
        for prop in cls.properties:
            prop_name = _identifier(prop.name, f"a property of {name}")
            body.append(f"    {prop_name}: {types.declared(prop.type)} = ...")
        for function in cls.functions:
            body += list(_function(function, types))
    header = _docstring(
        f"{title}: type stubs for mypy and pyright.\n\nWritten by zsharp_py.stubs from the "
        "descriptions the host registered"
        + (f"; regenerate with `{command}`." if command else ".")
        + " Do not edit.",
        "",
    )
    imports = ["import enum"] if described.enums else []
    abc = sorted(types.uses & {"Iterable", "Mapping"})
    if abc:
        imports.append(f"from collections.abc import {', '.join(abc)}")
    if "Any" in types.uses:
        imports.append("from typing import Any")
    imports += ["", "import zsharp_py as zs"]
    exported = ["", "__all__ = ["] + [f'    "{n}",' for n in described.names] + ["]"]
    return "\n".join([*header, "", *imports, *exported, *body]) + "\n"


def write_stub(
    path: str | Path,
    runtime: Runtime | None = None,
    *,
    title: str = "A native host's classes, structs and enums",
    command: str | None = None,
) -> Path:
    """Write ``host_stub(runtime, ...)`` to ``path`` (UTF-8); return the path."""
    target = Path(path)
    target.write_text(host_stub(runtime, title=title, command=command), encoding="utf-8")
    return target


def load_installer(spec: str) -> Callable[[Runtime], object]:
    """The function ``MODULE:FUNCTION`` names, imported: what registers a
    host's descriptions in a runtime given to it. ``ValueError`` when the
    text has no colon, ``ImportError``/``AttributeError`` as importing
    raises them."""
    module_name, colon, attribute = spec.partition(":")
    if not colon or not module_name or not attribute:
        raise ValueError(f"expected MODULE:FUNCTION, got {spec!r}")
    module = importlib.import_module(module_name)
    found: Callable[[Runtime], object] = getattr(module, attribute)
    if not callable(found):
        raise TypeError(f"{spec} is not callable")
    return found
