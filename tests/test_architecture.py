"""The project's structure, checked: short functions, and every package in the layering."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("kernel", "manifolds", "numgen", "numerate", "tasks", "flows")
MAX_FUNCTION_LINES = 60


def project_functions():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield path.relative_to(ROOT), node


def test_no_function_is_longer_than_60_lines():
    long = [
        f"{path}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path, node in project_functions()
        if node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not long, "split these functions:\n" + "\n".join(long)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_is_in_the_import_contract(package):
    config = (ROOT / "pyproject.toml").read_text()
    assert f'"{package}"' in config.split("[tool.importlinter]", 1)[1]


def test_every_readme_section_the_code_cites_exists():
    import re

    headings = {
        line.lstrip("#").strip()
        for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    }
    cited = []
    for package in (*PACKAGES, "deployments", "bench"):
        for path in sorted((ROOT / package).rglob("*")):
            if path.suffix in (".py", ".yaml", ".toml") and path.is_file():
                text = path.read_text(encoding="utf-8")
                cited += [(path.name, m) for m in re.findall(r'README,? "([^"]+)"', text)]
    assert cited
    missing = [f"{name}: {section}" for name, section in cited if section not in headings]
    assert not missing, "README has no such section:\n" + "\n".join(missing)


def test_every_package_is_installed():
    """The wheel lists its packages one by one: a subpackage left out works in a checkout (an
    editable install) and is missing from `pip install .`."""
    import tomllib

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for package in PACKAGES
        for init in (ROOT / package).rglob("__init__.py")
    }
    assert found <= listed, f"not installed by pyproject.toml: {sorted(found - listed)}"
