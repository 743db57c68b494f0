"""`make structure`: the figures of docs/structure.md, computed from the code (read with `ast`, nothing run).

Per package of `bench`: its modules, its layers (each module one layer above everything it imports inside the
package at run time; an import cycle shares one layer), its import cycles and its functions over 60 lines. Then
parameters followed through the calls that pass them on: from an entry function, every call whose argument is the
parameter (or a name taken from it: an item, an attribute, a method's result, an object built from it) is followed
into the function it resolves to by the module's imports (or into a method of the class the name is annotated
with), in the order the code is written, each function with each parameter once. A step is a stay in one
module; the walk counts its steps, its modules, its steps back up the layers (a call into a module on a higher
layer of `bench`'s run-time import graph than the caller's: the caller reached up through an object passed to it)
and its returns to a module already left.

    python benchmarks/structure.py                      # the working tree's block
    python benchmarks/structure.py --write              # ... written into docs/structure.md
    python benchmarks/structure.py --at 2eb413a --walk runner/_runner.py:run_benchmark:config --write
"""

from __future__ import annotations

import argparse
import ast
import io
import subprocess
import sys
import tarfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "structure.md"
PACKAGE = "bench"
LONG_FUNCTION = 60
"""A function longer than this many lines (its `def` to its last line) is named."""
WALKS = ("runner/_execute.py:execute:arms", "runner/_execute.py:run_benchmark:config")
"""The parameters followed on the working tree: `path:function:parameter`, the path under bench/."""

Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass
class Module:
    """One module: its definitions and what its names and module aliases resolve to."""

    name: str
    """Dotted: `bench.runner._arm`."""
    path: str
    """Under bench/: `runner/_arm.py`."""
    tree: ast.Module
    functions: dict[str, Function] = field(default_factory=dict)
    """Top-level functions by name, methods as `Class.method`."""
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    names: dict[str, tuple[str, str]] = field(default_factory=dict)
    """A name imported from a module of the package: (module, name there)."""
    aliases: dict[str, str] = field(default_factory=dict)
    """A name bound to a module of the package."""
    imports: set[str] = field(default_factory=set)
    """The package's modules this one imports at run time (not under `if TYPE_CHECKING:`)."""


class BadInput(Exception):
    """A revision, walk or document the command cannot read: one line for the user, exit 2."""


def read_sources(at: str | None, root: Path = ROOT) -> dict[str, str]:
    """The package's Python files by path under bench/: the working tree's, or those of commit `at` (`git archive`)."""
    if at is None:
        base = root / PACKAGE
        return {str(path.relative_to(base)): path.read_text(encoding="utf-8") for path in sorted(base.rglob("*.py"))}
    archived = subprocess.run(["git", "archive", "--format=tar", at, PACKAGE], cwd=root, capture_output=True)
    if archived.returncode != 0:
        raise BadInput(f"structure: git cannot read {PACKAGE}/ at {at!r}")
    data = archived.stdout
    sources = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        for member in archive.getmembers():
            handle = archive.extractfile(member) if member.name.endswith(".py") else None
            if handle is not None:
                sources[member.name.removeprefix(f"{PACKAGE}/")] = handle.read().decode("utf-8")
    return sources


def _dotted(path: str) -> str:
    parts = [PACKAGE, *path.removesuffix(".py").split("/")]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import of a module, and whether it runs (False under `if TYPE_CHECKING:`)."""
    def visit(node: ast.AST, runs: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, runs
            else:
                yield from visit(child, runs and not _type_checking(child))
    return visit(tree, True)


def _absolute(module: Module, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.name.split(".") if module.path.endswith("__init__.py") else module.name.split(".")[:-1]
    base = package[:len(package) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def load(sources: Mapping[str, str]) -> dict[str, Module]:
    """Every module parsed, with its definitions, names, aliases and run-time imports inside the package."""
    modules = {_dotted(path): Module(_dotted(path), path, ast.parse(text, path)) for path, text in sources.items()}
    for module in modules.values():
        for node in module.tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                module.functions[node.name] = node
            elif isinstance(node, ast.ClassDef):
                module.classes[node.name] = node
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        module.functions[f"{node.name}.{item.name}"] = item
        for node, runs in _imports(module.tree):
            for alias in node.names:
                bound = alias.asname or alias.name.split(".")[0]
                if isinstance(node, ast.Import):
                    target = alias.name
                    if target in modules and alias.asname:
                        module.aliases[bound] = target
                else:
                    source = _absolute(module, node)
                    target = f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                    if target != source:
                        module.aliases[bound] = target
                    elif source in modules:
                        module.names[bound] = (source, alias.name)
                if runs and target in modules and target != module.name:
                    module.imports.add(target)
    return modules


def layers(graph: Mapping[str, set[str]]) -> tuple[dict[str, int], list[list[str]]]:
    """Each node's layer (0: imports nothing; else one above the highest it imports; a cycle shares one layer) and
    the import cycles (strongly connected components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def connect(node: str) -> None:  # Tarjan's algorithm; components come out dependencies first
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component: list[str] = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    layer: dict[str, int] = {}
    for component in components:
        below = [layer[target] for node in component for target in graph[node] if target not in component]
        for node in component:
            layer[node] = max(below, default=-1) + 1
    return layer, [component for component in components if len(component) > 1]


@dataclass(frozen=True)
class Package:
    """One package's figures."""

    name: str
    modules: int
    layers: int
    cycles: list[list[str]]
    long_functions: list[str]


def packages(modules: Mapping[str, Module]) -> list[Package]:
    """Per package (the top-level modules as `bench`): modules, layers, cycles, functions over 60 lines."""
    groups: dict[str, list[Module]] = {}
    for module in modules.values():
        if not module.path.endswith("__init__.py"):
            groups.setdefault(module.path.rpartition("/")[0] or PACKAGE, []).append(module)
    found = []
    for name, members in sorted(groups.items()):
        inside = {module.name for module in members}
        graph = {module.name: module.imports & inside for module in members}
        layer, cycles = layers(graph)
        long = [f"{module.path}:{node.name} ({node.end_lineno - node.lineno + 1})"
                for module in sorted(members, key=lambda item: item.path) for node in ast.walk(module.tree)
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None
                and node.end_lineno - node.lineno + 1 > LONG_FUNCTION]
        found.append(Package(name, len(members), max(layer.values(), default=-1) + 1,
                             [[_short(item, name) for item in cycle] for cycle in cycles], long))
    return found


def _short(module: str, package: str) -> str:
    """A module as the figures name it: `_arm` inside `package`, `engines/_llamacpp` elsewhere in bench."""
    parts = module.split(".")[1:]
    inside = package.split("/") if package != PACKAGE else []
    return "/".join(parts[len(inside):] if parts[:len(inside)] == inside else parts)


def resolve(modules: Mapping[str, Module], module: str, name: str, depth: int = 0) -> tuple[str, str, str] | None:
    """What `name` in `module` is: ("function" or "class", its module, its name), following re-exports."""
    found = modules.get(module)
    if found is None or depth > 10:
        return None
    if name in found.functions:
        return "function", module, name
    if name in found.classes:
        return "class", module, name
    if name in found.names:
        return resolve(modules, *found.names[name], depth + 1)
    return None


def _annotated_class(modules: Mapping[str, Module], module: Module, annotation: ast.expr | None
                     ) -> tuple[str, str] | None:
    """The package's class an annotation names (`Sequence[Arm]`: Arm; the last one of several), if any."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    found = None
    for node in ast.walk(annotation) if annotation is not None else ():
        if isinstance(node, ast.Name | ast.Constant):
            named = node.id if isinstance(node, ast.Name) else node.value
            kind = resolve(modules, module.name, named) if isinstance(named, str) else None
            if kind is not None and kind[0] == "class":
                found = (kind[1], kind[2])
    return found


def _rooted(node: ast.AST, tracked: set[str]) -> bool:
    """Whether an expression is a tracked name or taken from one (an item, an attribute, a method's result), or an
    object built from one (a class, a capitalised name, called with it; `replace(it, ...)`)."""
    if isinstance(node, ast.Name):
        return node.id in tracked
    if isinstance(node, ast.Attribute | ast.Subscript | ast.Starred | ast.Await):
        return _rooted(node.value, tracked)
    if isinstance(node, ast.Call):
        builds = isinstance(node.func, ast.Name) and (node.func.id[:1].isupper() or node.func.id == "replace")
        return _rooted(node.func, tracked) or (builds and any(
            _rooted(item, tracked) for item in [*node.args, *(keyword.value for keyword in node.keywords)]))
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_rooted(item, tracked) for item in node.elts)
    if isinstance(node, ast.IfExp):
        return _rooted(node.body, tracked) or _rooted(node.orelse, tracked)
    if isinstance(node, ast.BoolOp):
        return any(_rooted(item, tracked) for item in node.values)
    if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
        inner = set(tracked)
        for generator in node.generators:
            if _rooted(generator.iter, inner):
                inner |= {name.id for name in ast.walk(generator.target) if isinstance(name, ast.Name)}
        if isinstance(node, ast.DictComp):
            return _rooted(node.key, inner) or _rooted(node.value, inner)
        return _rooted(node.elt, inner)
    return False


def _bindings(node: ast.AST) -> tuple[ast.expr | None, list[ast.expr]]:
    """(value, targets) of a node that binds names: an assignment, a loop, a comprehension, a `with ... as`."""
    if isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
        return node.iter, [node.target]
    if isinstance(node, ast.Assign):
        return node.value, list(node.targets)
    if isinstance(node, ast.AnnAssign | ast.NamedExpr):
        return node.value, [node.target]
    if isinstance(node, ast.withitem) and node.optional_vars is not None:
        return node.context_expr, [node.optional_vars]
    return None, []


def _tracked(body: Sequence[ast.AST], param: str, types: dict[str, tuple[str, str]]) -> set[str]:
    """The parameter and every name taken from it in the body; an item or alias keeps the parameter's class."""
    tracked = {param}
    nodes = [node for statement in body for node in ast.walk(statement)]
    changed = True
    while changed:
        changed = False
        for node in nodes:
            value, targets = _bindings(node)
            if value is None or not _rooted(value, tracked):
                continue
            root = value
            while isinstance(root, ast.Subscript | ast.Starred):
                root = root.value
            for target in targets:
                for name in (item.id for item in ast.walk(target) if isinstance(item, ast.Name)):
                    if name not in tracked:
                        tracked.add(name)
                        changed = True
                    if isinstance(root, ast.Name) and root.id in types and name not in types:
                        types[name] = types[root.id]
    return tracked


def _callee(modules: Mapping[str, Module], module: Module, func: ast.expr, types: Mapping[str, tuple[str, str]]
            ) -> tuple[str, str, bool] | None:
    """(module, function, bound to an instance) a call's function resolves to: a function by the module's imports,
    a class's `__init__`, a module alias's function, or a method of the class a name is annotated with."""
    if isinstance(func, ast.Name):
        found = resolve(modules, module.name, func.id)
        if found is not None and found[0] == "function":
            return found[1], found[2], False
        if found is not None and f"{found[2]}.__init__" in modules[found[1]].functions:
            return found[1], f"{found[2]}.__init__", True
        return None
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        base = func.value.id
        if base in module.aliases:
            found = resolve(modules, module.aliases[base], func.attr)
            return (found[1], found[2], False) if found is not None and found[0] == "function" else None
        if base in types:
            owner, name = types[base]
            method = f"{name}.{func.attr}"
            return (owner, method, True) if method in modules[owner].functions else None
    return None


def _parameters(node: Function, bound: bool) -> tuple[list[str], set[str]]:
    """A function's positional parameters (its instance's dropped when bound) and every parameter's name."""
    positional = [arg.arg for arg in [*node.args.posonlyargs, *node.args.args]]
    return positional[1:] if bound else positional, {*positional, *(arg.arg for arg in node.args.kwonlyargs)}


def passing_calls(modules: Mapping[str, Module], module_name: str, qualname: str, param: str
                  ) -> list[tuple[str, str, str]]:
    """The calls of a function that pass `param` (or a name taken from it) on, in code order, each as (module,
    function, the parameter it arrives as)."""
    module = modules[module_name]
    function = module.functions[qualname]
    types: dict[str, tuple[str, str]] = {}
    owner = qualname.split(".")[0] if "." in qualname else None
    for arg in [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]:
        found = _annotated_class(modules, module, arg.annotation)
        if found is not None:
            types[arg.arg] = found
    if owner is not None and (function.args.posonlyargs or function.args.args):
        types[[*function.args.posonlyargs, *function.args.args][0].arg] = (module_name, owner)
    tracked = _tracked(function.body, param, types)
    calls = sorted((node for statement in function.body for node in ast.walk(statement) if isinstance(node, ast.Call)),
                   key=lambda node: (node.lineno, node.col_offset))
    found_calls: list[tuple[str, str, str]] = []
    for call in calls:
        callee = _callee(modules, module, call.func, types)
        if callee is None:
            continue
        target = modules[callee[0]].functions[callee[1]]
        positional, names = _parameters(target, callee[2])
        arrivals: list[str] = []
        instance = _parameters(target, False)[0][:1]
        if callee[2] and isinstance(call.func, ast.Attribute) and _rooted(call.func.value, tracked):
            arrivals += instance  # the method's own object: its `self`
        for index, value in enumerate(call.args):
            if isinstance(value, ast.Starred):
                break
            if index < len(positional) and _rooted(value, tracked):
                arrivals.append(positional[index])
        arrivals += [keyword.arg for keyword in call.keywords
                     if keyword.arg is not None and keyword.arg in names and _rooted(keyword.value, tracked)]
        found_calls += [(callee[0], callee[1], name) for name in arrivals
                        if (callee[0], callee[1], name) not in found_calls]
    return found_calls


@dataclass(frozen=True)
class Walk:
    """A parameter followed from its entry function: the modules stayed in, in order, and the calls up."""

    entry: str
    """`path:function:parameter`, the path under bench/."""
    steps: tuple[str, ...]
    back_up: int

    @property
    def modules(self) -> int:
        """How many modules the walk goes through."""
        return len(set(self.steps))

    @property
    def returns(self) -> int:
        """Steps into a module the walk had already left."""
        return len(self.steps) - self.modules


def walk(modules: Mapping[str, Module], entry: str) -> Walk:
    """Follow `path:function:parameter` through the calls that pass it on, depth first in code order, each function
    with each parameter once."""
    if entry.count(":") != 2:
        raise BadInput(f"structure: --walk {entry!r} is not PATH:FUNCTION:PARAMETER")
    path, qualname, param = entry.split(":")
    start = next((module.name for module in modules.values() if module.path == path), None)
    if start is None or qualname not in modules[start].functions:
        raise BadInput(f"structure: no function {qualname} in bench/{path}")
    layer, _ = layers({module.name: module.imports for module in modules.values()})
    steps: list[str] = []
    back_up = 0
    seen: set[tuple[str, str, str]] = set()

    def enter(module: str, *, called: bool) -> None:
        nonlocal back_up
        if steps and steps[-1] == module:
            return
        if called and steps and layer[module] > layer[steps[-1]]:
            back_up += 1
        steps.append(module)

    def visit(module: str, function: str, name: str) -> None:
        seen.add((module, function, name))
        for callee in passing_calls(modules, module, function, name):
            if callee not in seen:
                enter(module, called=False)
                enter(callee[0], called=True)
                visit(*callee)

    enter(start, called=False)
    visit(start, qualname, param)
    package = path.rpartition("/")[0] or PACKAGE
    return Walk(entry, tuple(_short(step, package) for step in steps), back_up)


def render(found: Sequence[Package], walks: Sequence[Walk], command: str, at: str | None) -> str:
    """The Markdown block: a row per package, a paragraph per walk, and the command and code that produced them."""
    source = f"commit {at}" if at else "the working tree"
    lines = [f"Computed by `{command}` from the code of {source} (read, nothing run). A package's layers: each "
             "module one layer above everything it imports inside the package.", "",
             "| package | modules | layers | import cycles | functions over 60 lines |", "|---|---:|---:|---|---|"]
    for package in found:
        cycles = "; ".join(", ".join(f"`{name}`" for name in cycle) for cycle in package.cycles) or "none"
        long = ", ".join(f"`{name}`" for name in package.long_functions) or "none"
        lines.append(f"| `{package.name}` | {package.modules} | {package.layers} | {cycles} | {long} |")
    lines.append("")
    for item in walks:
        path, function, param = item.entry.split(":")
        lines.append(f"- `{param}` of `{function}` (`{path}`): {len(item.steps)} steps through {item.modules} "
                     f"modules, {item.back_up} back up the layers, {item.returns} returns to a module already left: "
                     f"`{', '.join(item.steps)}`.")
    return "\n".join(lines) + "\n"


def markers(at: str | None) -> tuple[str, str]:
    """The HTML comments around the block in docs/structure.md: one block for the working tree, one per commit."""
    name = f"structure at {at}" if at else "structure"
    return f"<!-- {name}: begin -->\n", f"<!-- {name}: end -->"


def replaced(document: str, block: str, at: str | None) -> str:
    """The document with its block between the markers replaced."""
    begin, end = markers(at)
    head, found, rest = document.partition(begin)
    if not found or end not in rest:
        raise BadInput(f"structure: {DOC.relative_to(ROOT)} has no {begin.strip()} ... {end} block")
    return head + begin + block + end + rest.split(end, 1)[1]


def documented(document: str, at: str | None = None) -> str:
    """The block docs/structure.md holds now."""
    begin, end = markers(at)
    return document.partition(begin)[2].partition(end)[0]


def compute(at: str | None = None, entries: Sequence[str] = WALKS, command: str = "make structure") -> str:
    """The block of the working tree (or of commit `at`): the packages' figures and the walks of `entries`."""
    modules = load(read_sources(at))
    return render(packages(modules), [walk(modules, entry) for entry in entries], command, at)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the block, or write it into docs/structure.md (`--write`), or check it is there (`--check`)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--at", default=None, metavar="REV", help="a commit's code (git archive), not the tree's")
    parser.add_argument("--walk", action="append", default=None, metavar="PATH:FUNCTION:PARAMETER",
                        help=f"a parameter to follow, the path under bench/ (default: {', '.join(WALKS)})")
    parser.add_argument("--write", action="store_true", help="write the block into docs/structure.md")
    parser.add_argument("--check", action="store_true", help="exit 1 unless docs/structure.md holds the block")
    args = parser.parse_args(argv)
    entries = args.walk or list(WALKS)
    command = "make structure"
    if args.at or args.walk:
        command = " ".join(["python benchmarks/structure.py", *(["--at", args.at] if args.at else []),
                            *(f"--walk {entry}" for entry in args.walk or ()), "--write"])
    try:
        block = compute(args.at, entries, command)
        document = DOC.read_text(encoding="utf-8")
        if args.check:
            same = documented(document, args.at) == block
            print("structure: docs/structure.md is up to date" if same else "structure: run `make structure`")
            return 0 if same else 1
        if args.write:
            DOC.write_text(replaced(document, block, args.at), encoding="utf-8")
            print(f"structure: wrote the block into {DOC.relative_to(ROOT)}")
            return 0
    except BadInput as error:
        print(error, file=sys.stderr)
        return 2
    sys.stdout.write(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
