"""The documentation site (docs/, mkdocs.yml): it builds offline with no broken link or anchor,
the README's links land on real pages and headings, and every command, option and config
field is documented where a user looks for it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import typer.main
from markdown.extensions.toc import slugify
from pydantic import BaseModel

from numerate.cli import app
from numerate.config.sweep import SweepConfig
from numerate.numgen.config import NumGenConfig

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_site_builds_offline_with_no_broken_link_or_anchor(tmp_path):
    """`mkdocs build --strict` (what `make docs` runs): a link to a missing page or heading is
    a warning, and strict makes it fail."""
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    pages = {path.stem for path in DOCS.glob("*.md")}
    built = {path.parent.name for path in (tmp_path / "site").rglob("index.html")}
    assert pages - {"index"} <= built
    html = (tmp_path / "site" / "index.html").read_text()
    assert "fonts.googleapis.com" not in html  # nothing fetched from the internet to read it


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    return {slugify(h, "-") for h in re.findall(r"^#{1,6} (.*)$", text, flags=re.M)}


def test_the_readme_links_land_on_pages_and_headings_that_exist():
    readme = (ROOT / "README.md").read_text()
    links = [link for link in LINK.findall(readme) if not link.startswith("http")]
    assert any(link.startswith("docs/") for link in links)
    for link in links:
        path, _, anchor = link.partition("#")
        target = ROOT / path
        assert target.exists(), f"README links to {link}: no such file"
        if anchor:
            assert anchor in anchors(target), f"README links to {link}: no such heading"


def commands() -> list[tuple[str, Any]]:
    """Every command a user can type, as ('numgen run', its click command)."""
    found: list[tuple[str, Any]] = []

    def walk(prefix: str, command: Any) -> None:
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(f"{prefix} {name}".strip(), sub)
        else:
            found.append((prefix, command))

    walk("", typer.main.get_command(app))
    return found


def test_every_command_and_each_of_its_options_is_documented():
    """docs/commands.md has a row for each command, naming each of its options."""
    page = (DOCS / "commands.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `numerate ")]
    assert len(commands()) >= 20
    missing = []
    for name, command in commands():
        row = [r for r in rows if re.match(rf"\| `numerate {name}( |`)", r)]
        if not row:
            missing.append(f"numerate {name}")
            continue
        for param in command.params:
            longest = max(param.opts, key=len)
            if longest.startswith("--") and longest != "--help" and longest not in row[0]:
                missing.append(f"numerate {name} {longest}")
    assert not missing, "docs/commands.md does not document:\n" + "\n".join(missing)


def fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every field of a config model, nested models' too, as dotted paths."""
    found = []
    for field, info in model.model_fields.items():
        name = info.alias or field  # what a config file spells
        found.append(f"{prefix}{name}")
        for inner in nested_models(info.annotation):
            found += fields(inner, f"{prefix}{name}.")
    return found


def nested_models(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in getattr(annotation, "__args__", ()) for m in nested_models(arg)]


def test_every_config_field_is_documented():
    """Each field of the sweep config is named in docs/config.md, each of NumGen's config in
    docs/numgen.md: in the text (`name`) or as a key of the commented example (`name: ...`)."""
    missing = []
    for model, page in ((SweepConfig, "config.md"), (NumGenConfig, "numgen.md")):
        text = (DOCS / page).read_text()
        for path in fields(model):
            name = path.rsplit(".", 1)[-1]
            if f"`{name}`" not in text and not re.search(rf"(^|[\s{{,]){name}:\s", text, re.M):
                missing.append(f"docs/{page}: {path}")
    assert len(fields(SweepConfig)) > 20
    assert not missing, "not documented:\n" + "\n".join(missing)


def cells(row: str) -> int:
    """The cells of a Markdown table row: its `|`s but the escaped ones (`\\|`) and those in
    code spans, less one."""
    plain = re.sub(r"(`+).*?\1", "", row.strip())
    return len(re.findall(r"(?<!\\)\|", plain)) - 1


def test_every_table_row_is_one_line_with_its_header_s_cells():
    """A row broken by a line break (a long row edited by hand) renders as a row cut short
    and a paragraph of the rest; mkdocs builds it without a word."""
    for page in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]:
        text = re.sub(r"^```.*?^```", lambda m: "\n" * m[0].count("\n"), page.read_text(),
                      flags=re.S | re.M)  # fmt: skip
        header = None
        for number, line in enumerate(text.splitlines(), start=1):
            where = f"{page.relative_to(ROOT)} line {number}"
            if not line.startswith("|"):
                header = None
                continue
            assert line.rstrip().endswith("|"), f"{where}: a table row that does not end in |"
            if header is None:
                header = cells(line)
            assert cells(line) == header, f"{where}: {cells(line)} cells, the header {header}"
