"""The package's shape (issue 40): one folder per target, shared layers with a named home, and an
import graph without circles. Read from the source (every ``import`` statement, function-level
ones included; only ``if TYPE_CHECKING:`` blocks, which never run, are left out), so a circle
cannot hide behind an import placed inside a function."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PKG = REPO / "rbdgen"

#: layers that every target shares: they never import a target (nor the clients below)
SHARED = ("rbdgen.codegen", "rbdgen.toolchain", "rbdgen.kernels")
#: the kernel layers: robot model, reference, tracing, IR, registry; they know nothing of code
CORE = ("rbdgen.model", "rbdgen.reference", "rbdgen.symbolic", "rbdgen.ir", "rbdgen.algorithms",
        "rbdgen.registry", "rbdgen.spatial", "rbdgen.scan", "rbdgen.errors", "rbdgen.textutil", "rbdgen._version")
#: clients of the targets: no target and no shared layer imports them
CLIENTS = ("rbdgen.cli", "rbdgen.package", "rbdgen.validate", "rbdgen.demo")


def _modules() -> dict:
    """Module name → (path, is a package)."""
    out = {}
    for p in PKG.rglob("*.py"):
        parts = list(p.relative_to(REPO).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (p, is_pkg)
    return out


def _is_type_checking(node) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(tree) -> list:
    """Every Import/ImportFrom node, at any depth, outside ``if TYPE_CHECKING:`` blocks."""
    out = []

    def visit(node):
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


def import_graph() -> dict:
    """Module → the rbdgen modules it imports (``from X import name`` counts X.name where that is
    a module, else X)."""
    mods = _modules()
    graph = {}
    for name, (path, is_pkg) in mods.items():
        edges = set()
        for node in _imports(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = name.split(".") if is_pkg else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod for a in node.names]
            for t in targets:
                if t.split(".")[0] != "rbdgen":
                    continue
                while t not in mods and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in mods and t != name:
                    edges.add(t)
        graph[name] = edges
    return graph


def _cycles(graph: dict) -> list:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _in(mod: str, layers) -> bool:
    return any(mod == layer or mod.startswith(layer + ".") for layer in layers)


GRAPH = import_graph()


def test_the_checker_sees_what_it_must():
    """The graph reader itself: relative imports resolved, function-level imports counted, a
    TYPE_CHECKING import not, and a circle found (a checker that found nothing could not fail)."""
    assert "rbdgen.targets.base" in GRAPH["rbdgen.targets.cpu"]
    assert "rbdgen.targets" in GRAPH["rbdgen"]                 # rbdgen.build's import, inside the function
    assert "rbdgen.model.model" not in GRAPH["rbdgen.model.coupled"]  # TYPE_CHECKING only
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles():
    assert _cycles(GRAPH) == [], "modules that import each other (directly or round a circle)"


def test_shared_layers_never_import_a_target_or_a_client():
    bad = sorted((m, t) for m, ts in GRAPH.items() if _in(m, SHARED) for t in ts if _in(t, ("rbdgen.targets",) + CLIENTS))
    assert bad == [], bad


def test_core_layers_know_nothing_of_code():
    bad = sorted((m, t) for m, ts in GRAPH.items() if _in(m, CORE)
                 for t in ts if _in(t, SHARED + ("rbdgen.targets",) + CLIENTS))
    assert bad == [], bad


#: the one target built on another: the Verilog datapath is the HLS target's arithmetic bit for bit
#: (its ap_fixed type, quantisation, CORDIC and cost-model schedule), so it reads them from there
#: instead of keeping a second copy that could drift (docs/verilog.md); no other target may
BUILT_ON = {"rbdgen.targets.verilog": ("rbdgen.targets.hls",)}


def test_targets_never_import_each_other_or_a_client():
    bad = []
    for m, ts in GRAPH.items():
        if not m.startswith("rbdgen.targets.") or m == "rbdgen.targets.base":
            continue
        own = ".".join(m.split(".")[:3])
        for t in ts:
            if _in(t, CLIENTS) or t == "rbdgen.targets" or t == "rbdgen" or \
                    (t.startswith("rbdgen.targets.") and t != "rbdgen.targets.base"
                     and not _in(t, (own, *BUILT_ON.get(own, ())))):
                bad.append((m, t))
    assert bad == [], bad
    # and the exception is used (a stale one would let a real cross-import through later)
    for m, allowed in BUILT_ON.items():
        assert any(_in(t, allowed) for mm, ts in GRAPH.items() if _in(mm, (m,)) for t in ts), m


def test_every_target_is_one_folder_and_is_found():
    from rbdgen.targets import get_target, targets

    folders = sorted(p.name for p in (PKG / "targets").iterdir() if (p / "__init__.py").is_file())
    assert folders == sorted(targets()) == ["cpu", "cuda", "hls", "verilog"]
    for name in folders:
        assert type(get_target(name)).__module__ == f"rbdgen.targets.{name}"
        assert (REPO / "templates" / name).is_dir(), f"templates/{name}/"


def test_every_folder_says_what_lives_there_and_is_packaged():
    """Each package has a docstring; pyproject.toml lists every package (a wheel holds them)."""
    listed = set(re.findall(r'"(rbdgen[\w.]*)"', (REPO / "pyproject.toml").read_text().split("packages = [", 1)[1]
                            .split("]", 1)[0]))
    for p in sorted(PKG.rglob("__init__.py")):
        name = ".".join(p.parent.relative_to(REPO).parts)
        assert name in listed, f"{name} is not in pyproject.toml's packages"
        assert ast.get_docstring(ast.parse(p.read_text())), f"{p.relative_to(REPO)} has no docstring"


def _code_words(tree) -> set:
    """The words the code itself uses: identifiers, attribute and keyword names, and the words of
    string constants other than docstrings (comments are not in the tree)."""
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docs.add(id(body[0].value))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            docs.add(id(node.value))  # a bare string: an attribute's docstring
    words = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            words.add(node.id)
        elif isinstance(node, ast.Attribute):
            words.add(node.attr)
        elif isinstance(node, ast.keyword) and node.arg:
            words.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            words.update(re.findall(r"\w+", node.value))
    return words


@pytest.mark.parametrize("kernel", ["rnea_derivatives", "aba_derivatives"])
def test_kernels_are_named_only_where_they_are_declared(kernel):
    """A derivative kernel is named in code only by the modules that declare it (algorithms/, with
    its gradient rule) and its reference: every other module reaches it through the registry
    (rbdgen.autodiff and the framework wrappers through ``Gradient``). Docstrings may show it."""
    where = sorted(str(p.relative_to(REPO)) for p in PKG.rglob("*.py")
                   if kernel in _code_words(ast.parse(p.read_text())))
    allowed = ("rbdgen/algorithms/", "rbdgen/reference/")
    assert [w for w in where if not w.startswith(allowed)] == [], where
    assert any(w.startswith("rbdgen/algorithms/") for w in where)  # the checker finds the declaration
