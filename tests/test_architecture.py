"""The project's structure, checked: one import package, short functions, and every part of
it in the layering."""

import ast
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "numerate"
CARD_FOLDERS = ("flows", "tasks", "manifolds", "numgen", "kernel")
"""The design card's top-level folders: links to numerate/<name> (docs/architecture.md,
"Architecture")."""
MAX_FUNCTION_LINES = 80
"""A smoke alarm, not a style: a function does one thing (docs/architecture.md, "Rules"); one
this long has usually taken on a second."""


def project_functions():
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield path.relative_to(ROOT), node


def test_no_function_is_longer_than_80_lines():
    long = [
        f"{path}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path, node in project_functions()
        if node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, "split these functions:\n" + "\n".join(long)


def layered_names(pyproject: str) -> list[str]:
    """The parts of numerate that the import contract on the `numerate` container places in
    a layer (each name once per layer it appears in)."""
    contracts = tomllib.loads(pyproject)["tool"]["importlinter"]["contracts"]
    [layers] = [c["layers"] for c in contracts if c.get("containers") == ["numerate"]]
    return [name for layer in layers for name in re.split(r"\s*[|:]\s*", layer.strip())]


def unlayered(pyproject: str) -> list[str]:
    """What is wrong with the layering: a module or subpackage of numerate/ in no layer, a
    layer naming something that does not exist, a name in two layers."""
    names = layered_names(pyproject)
    present = {
        p.stem if p.is_file() else p.name
        for p in PACKAGE.iterdir()
        if (p.suffix == ".py" and p.stem not in ("__init__", "__main__"))
        or (p.is_dir() and (p / "__init__.py").exists())
    }
    problems = [f"in no layer: numerate.{n}" for n in sorted(present - set(names))]
    problems += [f"no such module: numerate.{n}" for n in sorted(set(names) - present)]
    problems += [
        f"in two layers: numerate.{n}" for n in sorted({n for n in names if names.count(n) > 1})
    ]
    return problems


def test_every_part_of_numerate_is_in_exactly_one_layer():
    assert unlayered((ROOT / "pyproject.toml").read_text()) == []


def test_the_layering_check_sees_a_part_dropped_or_invented():
    pyproject = (ROOT / "pyproject.toml").read_text()
    dropped = pyproject.replace('"results | endpoints | figures"', '"results | endpoints"', 1)
    assert unlayered(dropped) == ["in no layer: numerate.figures"]
    invented = pyproject.replace('"kernel",\n]', '"kernel : nosuch",\n]', 1)
    assert unlayered(invented) == ["no such module: numerate.nosuch"]


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, known: set[str]) -> list[tuple[str, ast.stmt]]:
    """Every module of `known` that `path` imports, wherever the import is (a function's
    own included), with the statement: `from a import b` imports a.b when that is a module,
    else a. An import names the module it names, not its packages' __init__ (Python runs
    those too, but they import nothing back)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                for a in node.names
            ]
        else:
            continue
        found += [(name, node) for name in names if name in known]
    return found


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles of `graph` (its strongly connected components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(module: str) -> None:  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    known = set(paths)
    return {
        module: {name for name, _ in imports_of(path, known) if name != module}
        for module, path in paths.items()
    }


def test_no_module_of_numerate_imports_itself_in_a_circle():
    """Imports inside functions included: the layer contract (lint-imports) sees them, but a
    circle inside one layer (cli.common <-> cli.server was one) it lets through."""
    assert import_cycles(import_graph()) == []


def test_the_cycle_check_sees_a_circle_through_a_function_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


PUBLIC_UNDERSCORE_NAMES = {"_exit", "_replace", "_asdict", "_fields", "_make"}
"""Underscore names the documentation makes public: os._exit, a named tuple's methods."""
ASSIGNABLE = {"sys.stdout", "sys.stderr", "sys.unraisablehook", "logging.raiseExceptions"}
"""Attributes of the standard library that its documentation says a program may set."""


def own_private_names() -> set[str]:
    """The underscore names numerate defines: its own functions, classes and attributes."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return {name for name in names if name.startswith("_")}


def private_uses(source: str, own: set[str]) -> list[str]:
    """Where `source` reaches a private name of a library or of Python (an import of an
    underscore module or name, an underscore attribute that numerate does not define), or
    patches a library (sets an attribute of something it imported, `setattr` included)."""
    tree = ast.parse(source)
    imported, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
            if module.startswith("numerate") or module == "__future__":
                continue
            for alias in node.names:
                path = f"{module}.{alias.name}" if module else alias.name
                if path.startswith("numerate"):
                    continue
                parts = path.split(".")
                if any(p.startswith("_") and not p.endswith("__") for p in parts):
                    found.append(f"{node.lineno}: imports {path}")
                imported.add((alias.asname or alias.name).split(".")[0])
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.endswith("__") and node.attr not in PUBLIC_UNDERSCORE_NAMES
                and node.attr not in own):  # fmt: skip
            found.append(f"{node.lineno}: {ast.unparse(node)}")
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign)
                   else [])  # fmt: skip
        for target in targets:
            base = target
            while isinstance(base, ast.Attribute):
                base = base.value
            if (isinstance(target, ast.Attribute) and isinstance(base, ast.Name)
                    and base.id in imported and ast.unparse(target) not in ASSIGNABLE):  # fmt: skip
                found.append(f"{node.lineno}: patches {ast.unparse(target)}")
        patched = node.args[0] if isinstance(node, ast.Call) and node.args else None
        if (isinstance(patched, ast.Name) and ast.unparse(node.func) == "setattr"
                and patched.id in imported):  # fmt: skip
            found.append(f"{node.lineno}: patches {patched.id}")
    return sorted(found, key=lambda use: int(use.split(":")[0]))


def test_no_private_name_of_a_library_is_used_and_no_library_is_patched():
    own = own_private_names()
    found = [
        f"{path.relative_to(ROOT)}:{use}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for use in private_uses(path.read_text(encoding="utf-8"), own)
    ]
    assert found == []


def test_the_private_name_check_sees_what_the_old_stop_path_did():
    old = (
        "import atexit, threading\nfrom typer._click.exceptions import ClickException\n"
        "from prefect.server.api import server as prefect_server\n"
        "threading._shutdown()\natexit._run_exitfuncs()\n"
        "prefect_server.subprocess = None\nsetattr(prefect_server, 'x', 1)\n"
        "os._exit(0)\nparts._replace(path='/')\nself._mine = 1\n"
    )
    assert private_uses(old, own={"_mine"}) == [
        "2: imports typer._click.exceptions.ClickException",
        "4: threading._shutdown",
        "5: atexit._run_exitfuncs",
        "6: patches prefect_server.subprocess",
        "7: patches prefect_server",
    ]


HEAVY_OPTIONAL = {"torch", "diffusers", "transformers", "groundingdino", "matplotlib", "playwright"}
"""Loaded inside the functions that use them, everywhere: NumGen's models, plots, screenshots."""
LOADED_WHEN_USED = {
    "prefect": "the orchestrator (1 s to import): a refused command line never waits for it",
    "prefect_dask": "one deployment's Dask runner",
    "polars": "frames, for the commands that read results",
    "duckdb": "the database, for the commands that open one",
    "pyarrow": "bulk writes",
    "openai": "the client of the commands that ask models",
    "httpx": "the HTTP client under the OpenAI one",
    "fsspec": "remote shards (ingest)",
    "yaml": "config files",
    "pydantic": "validation, for the commands that read a config",
    "rich": "tables and progress bars",
    "numpy": "NumGen's and the plots' arrays",
    "scipy": "NumGen's statistics",
    "uvicorn": "the servers (view, the background Prefect server)",
    "fastapi": "Prefect's server app, imported ahead while it starts",
    "jinja2": "the viewer's templates",
    "PIL": "NumGen's images",
    "starlette": "the viewer's app",
    "psycopg": "a lake's run claims (PostgreSQL's advisory locks)",
    "sqlalchemy": "Prefect's server database URL, checked only when one is set",
}
"""Loaded inside functions so that `numerate --help` and a refused command line answer in a
fraction of a second (docs/architecture.md, "Rules"): why each one."""


def module_level_imports(source: str) -> list[str]:
    """What `source` imports when it is imported: its imports outside functions and outside
    `if TYPE_CHECKING:` (`from a import b` names a.b too, in case b is a module)."""
    found: list[str] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.extend([node.module, *(f"{node.module}.{a.name}" for a in node.names)])
            elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(node.test):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)

    visit(ast.parse(source).body)
    return found


def heavy_loads() -> dict[str, set[str]]:
    """For each module of numerate, the heavy libraries (HEAVY_OPTIONAL, LOADED_WHEN_USED)
    that importing it loads, through numerate's own modules and packages."""
    sources = {module_name(p): p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py")}
    heavy = HEAVY_OPTIONAL | set(LOADED_WHEN_USED)
    loads: dict[str, set[str]] = {}

    def of(module: str) -> set[str]:
        if module not in loads:
            loads[module] = set()  # a package's __init__ met again on the way: known so far
            found = set()
            for name in module_level_imports(sources[module]):
                parts = name.split(".")
                if parts[0] != "numerate":
                    found |= {parts[0]} & heavy
                    continue
                for depth in range(2, len(parts) + 1):  # numerate.store.x runs store/__init__
                    if ".".join(parts[:depth]) in sources:
                        found |= of(".".join(parts[:depth]))
            loads[module] = found
        return loads[module]

    for module in sources:
        of(module)
    return loads


def late_imports(source: str, module: str, loads: dict[str, set[str]]) -> list[str]:
    """The imports inside functions of `source` (the module `module`) that are not allowed:
    of the standard library (no cost to load at the top), of a library not listed in
    HEAVY_OPTIONAL or LOADED_WHEN_USED, and, outside numerate/cli (where a command loads what
    it runs), of a module of numerate that loads no heavy library `module` does not load
    already (`loads`: heavy_loads()): such an import puts off nothing, and belongs at the top,
    where the layering and cycle checks see it plainly."""
    in_cli = module == "numerate.cli" or module.startswith("numerate.cli.")
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Import):
                imported = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported = [node.module]
            else:
                continue
            for name in imported:
                top = name.split(".")[0]
                if top == "numerate":
                    puts_off = loads.get(name, set()) - loads.get(module, set())
                    allowed = in_cli or bool(puts_off)
                else:
                    allowed = top not in sys.stdlib_module_names and top in (
                        HEAVY_OPTIONAL | set(LOADED_WHEN_USED))  # fmt: skip
                if not allowed:
                    found.append(f"{node.lineno} {name}")
    return found


def test_imports_inside_functions_are_only_of_what_is_heavy_and_not_always_needed():
    loads = heavy_loads()
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line in late_imports(path.read_text(encoding="utf-8"), module_name(path), loads)
    ]
    assert found == []


def test_the_late_import_check_sees_the_standard_library_a_cheap_stage_and_an_unlisted_library():
    source = (
        "import json\ndef f():\n    import os\n    from numerate.store import Store\n"
        "    import torch\n    import polars\n    import requests\n"
        "    from numerate.view.export import export_run\n"
    )
    loads = {"numerate.results.x": {"polars"}, "numerate.store": {"polars", "duckdb"},
             "numerate.view.export": {"jinja2"}}  # fmt: skip
    assert late_imports(source, "numerate.results.x", loads) == ["3 os", "7 requests"]
    loads["numerate.store"] = {"polars"}  # it puts off nothing: at the top
    assert late_imports(source, "numerate.results.x", loads) == [
        "3 os",
        "4 numerate.store",
        "7 requests",
    ]
    assert late_imports(source, "numerate.cli.x", loads) == ["3 os", "7 requests"]
    assert heavy_loads()["numerate.figures.plots"] >= {"polars"}


def test_flows_and_tasks_keep_their_annotations_real():
    """Prefect validates a flow's parameters from its annotations: a postponed (string) one
    cannot be resolved where the function was unpickled (a Dask worker), and the run fails."""
    postponed = [
        str(path.relative_to(ROOT))
        for folder in ("flows", "tasks")
        for path in sorted((PACKAGE / folder).glob("*.py"))
        if "from __future__ import annotations" in path.read_text(encoding="utf-8")
    ]
    assert postponed == []


def test_the_card_folders_are_the_package_folders():
    for name in CARD_FOLDERS:
        folder = ROOT / name
        assert folder.is_symlink() and folder.resolve() == (PACKAGE / name).resolve(), name


def test_every_docs_section_the_code_cites_exists():
    """Code cites the documentation as `docs/<page>.md, "<section>"`: the page has that heading
    (and nothing cites the README's sections, which moved to docs/)."""
    cited, stale = [], []
    for package in ("numerate", "deployments", "bench", "tests"):
        for path in sorted((ROOT / package).rglob("*")):
            if path.suffix in (".py", ".yaml", ".toml") and path.is_file():
                text = path.read_text(encoding="utf-8")
                cited += [
                    (path.name, *m) for m in re.findall(r'docs/([\w-]+\.md),? "([^"]+)"', text)
                ]
                stale += [f"{path.name}: {m}" for m in re.findall(r'README,? "([^"]+)"', text)]
    assert cited and not stale, "cites a README section:\n" + "\n".join(stale)
    missing = []
    for name, page, section in cited:
        lines = (ROOT / "docs" / page).read_text(encoding="utf-8").splitlines()
        if " ".join(section.split()) not in {
            line.lstrip("#").strip() for line in lines if line.startswith("#")
        }:
            missing.append(f"{name}: docs/{page}, {section!r}")
    assert not missing, "no such section:\n" + "\n".join(missing)


def test_the_wheel_installs_only_numerate(tmp_path):
    """`pip install .` puts one import package at the top of site-packages, with every
    subpackage of numerate/ in it (a subpackage left out works in a checkout and is missing
    from an install)."""
    import shutil

    source = tmp_path / "source"  # a copy: building leaves build/ behind in the tree it builds
    shutil.copytree(PACKAGE, source / "numerate", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), str(source)],
        check=True, capture_output=True,
    )  # fmt: skip
    [wheel] = tmp_path.glob("numerate-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"numerate"}
    packages = {str(p.parent.relative_to(ROOT)) for p in PACKAGE.rglob("__init__.py")}
    installed = {str(Path(n).parent) for n in names if n.endswith("/__init__.py")}
    assert packages == installed


SQL = re.compile(
    r"\bSELECT\b.*\bFROM\b|\bINSERT\s+(OR\s+\w+\s+)?INTO\b|\bDELETE\s+FROM\b|\bUPDATE\s+\w+\s+SET\b"
    r"|\bCREATE\s+(TABLE|VIEW)\b|\bALTER\s+TABLE\b",
    re.DOTALL,
)


def sql_in(source: str) -> list[int]:
    """Lines of `source` where a string (not a docstring) holds SQL."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in docstrings:
                continue
            text = node.value
        else:
            continue
        if SQL.search(text):
            lines.append(node.lineno)
    return sorted(set(lines))  # an f-string's pieces are strings too


def test_no_sql_outside_the_store_package():
    """numerate.store.queries holds every named read; the rest of numerate asks it."""
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.parent.name != "store"
        for line in sql_in(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_the_sql_check_finds_sql_in_strings_and_f_strings_not_in_docstrings():
    source = '''
def runs(source):
    """SELECT run_id FROM runs: a docstring may say it."""
    one = source.query("SELECT run_id FROM runs WHERE run_id = ?", [1])
    table = "runs"
    two = source.query(f"SELECT count(*) FROM {table}")
    source.query("UPDATE runs SET status = 'x'")
    return one, two
'''
    assert sql_in(source) == [4, 6, 7]


ANY = re.compile(r"\bAny\b")
RAW_SQL_METHODS = {"query", "frame", "session", "write", "con"}
"""The store's own SQL interface (and `numerate db`'s, whose SQL is the user's): rows of any
DuckDB type. Everything else the store offers is typed."""


def _annotations(fn):
    arguments = fn.args
    for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
                arguments.vararg, arguments.kwarg]:  # fmt: skip
        if arg is not None and arg.arg not in ("self", "cls"):
            yield arg.arg, arg.annotation
    yield "return", fn.returns


def _decorated_by(fn, names):
    for decorator in fn.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if (
            target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        ) in names:
            return True
    return False


def untyped_boundaries(path: Path) -> list[str]:
    """Parameters and returns of a flow, a task or a store method that are Any (or missing)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    boundaries = [
        node for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and _decorated_by(node, {"flow", "task"})
    ]  # fmt: skip
    if path.parent.name == "store":
        boundaries += [
            fn for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef)
            and cls.name in ("Tables", "Store", "Reader")
            for fn in cls.body if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef)
            and not fn.name.startswith("_") and fn.name not in RAW_SQL_METHODS
        ]  # fmt: skip
        boundaries += [
            fn for fn in tree.body
            if isinstance(fn, ast.FunctionDef) and path.stem == "queries"
            and not fn.name.startswith("_")
        ]  # fmt: skip
    return [
        f"{path.relative_to(ROOT)}:{fn.lineno} {fn.name}({name})"
        for fn in boundaries
        for name, annotation in _annotations(fn)
        if annotation is None or ANY.search(ast.unparse(annotation))
    ]


def test_no_any_at_a_flow_task_or_store_boundary():
    found = [line for path in sorted(PACKAGE.rglob("*.py")) for line in untyped_boundaries(path)]
    assert found == []


def test_the_boundary_check_sees_an_untyped_task(tmp_path):
    path = ROOT / "numerate" / "tasks" / "example.py"  # named, never written
    source = "@task\nasync def ask(model: dict[str, Any], db: str) -> list[Any]: ...\n"
    tree_path = tmp_path / "tasks" / "example.py"
    tree_path.parent.mkdir()
    tree_path.write_text(source)
    import unittest.mock

    with unittest.mock.patch.object(Path, "relative_to", lambda self, other: path.name):
        assert untyped_boundaries(tree_path) == [
            "example.py:2 ask(model)",
            "example.py:2 ask(return)",
        ]


def test_each_command_lives_in_the_module_named_after_it():
    from numerate.cli import app

    where = {
        (command.name or command.callback.__name__): command.callback.__module__
        for command in app.registered_commands
    }
    where |= {group.name: group.typer_instance.registered_commands[0].callback.__module__
              for group in app.registered_groups}  # fmt: skip
    assert len(where) >= 15
    misplaced = {name: module for name, module in where.items() if module != f"numerate.cli.{name}"}
    assert misplaced == {}
    helpers = {"__init__", "__main__", "app", "common", "process", "running"}
    modules = {p.stem for p in (PACKAGE / "cli").glob("*.py")} - helpers
    assert modules == set(where), "a module of numerate/cli that holds no command of its name"


def test_nothing_imports_a_card_folder_by_its_own_name():
    """`flows/`, `tasks/`, ... are links: imported as `kernel.errors` from the repository
    root they would be second copies of numerate's modules (another ConfigError class)."""
    old = re.compile(rf"^\s*(from|import) ({'|'.join(CARD_FOLDERS)})\b", re.MULTILINE)
    found = [
        str(path.relative_to(ROOT))
        for folder in ("numerate", "tests", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if old.search(path.read_text(encoding="utf-8"))
    ]
    assert found == []


PATH_PARSERS = {"path_option", "path_argument"}


def unparsed_path_parameters(source: str) -> list[str]:
    """The command parameters of `source` typed `Path` whose option or argument is not made by
    path_option/path_argument (directly, or through a module constant made by one): typer
    would read an empty path as `.`, here."""
    tree = ast.parse(source)
    made_by_parser = {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name) and node.value.func.id in PATH_PARSERS
        for target in node.targets if isinstance(target, ast.Name)
    }  # fmt: skip
    found = []
    for function in ast.walk(tree):
        if not isinstance(function, ast.FunctionDef):
            continue
        for arg in function.args.args:
            annotation = arg.annotation
            if not (isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value)
                    == "Annotated"):  # fmt: skip
                continue
            kind, option = annotation.slice.elts[0], annotation.slice.elts[1]
            if "Path" not in ast.unparse(kind):
                continue
            parsed = (
                isinstance(option, ast.Call) and ast.unparse(option.func) in PATH_PARSERS
            ) or (isinstance(option, ast.Name) and option.id in made_by_parser)
            if not parsed:
                found.append(f"{function.name}({arg.arg})")
    return found


def test_every_path_parameter_of_the_cli_refuses_an_empty_path():
    found = [
        f"{path.name}: {name}"
        for path in sorted((PACKAGE / "cli").glob("*.py"))
        for name in unparsed_path_parameters(path.read_text(encoding="utf-8"))
    ]
    assert not found, "use path_option/path_argument for:\n" + "\n".join(found)


def test_the_path_parameter_check_sees_a_plain_typer_option():
    plain = (
        "def c(out: Annotated[Path | None, typer.Option(help='x')] = None,\n"
        "      ok: Annotated[Path, path_option('y')] = None,\n"
        "      config: Annotated[Path, CONFIG] = None, n: Annotated[int, typer.Option()] = 1): ..."
    )
    assert unparsed_path_parameters(plain) == ["c(out)", "c(config)"]
    assert unparsed_path_parameters("CONFIG = path_option('z')\n" + plain) == ["c(out)"]
