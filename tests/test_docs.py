"""The docs site: `mkdocs build --strict` passes (a broken link or anchor fails it), every page is in the nav, the
README's links into docs/ reach a page and a heading, and what the pages show still exists and still parses: the
CLI table matches the README's (which `tests/orchestrator/cli/test_readme_cli.py` runs row by row), every spec key
is in the spec reference, every `greenspec ...` command parses as written, every path and `make` target named is
there."""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from markdown.extensions.toc import slugify

from tests.conftest import in_ci

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted(p.name for p in DOCS.glob("*.md"))
# examples of what a reader would add, not files of the repository (docs/extending.md)
HYPOTHETICAL = {"workers/drafts/echo.py", "workers/suffix_tree.py"}


def nav_pages(node) -> list[str]:
    """The page files of mkdocs.yml's nav, depth first."""
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [p for v in node.values() for p in nav_pages(v)]
    return [p for v in node for p in nav_pages(v)]


def anchors(page: Path) -> set[str]:
    """The heading ids MkDocs gives a page (the toc extension's slugify)."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slugify(h, "-") for h in re.findall(r"^#{1,6} (.+?)\s*$", text, flags=re.M)}


def cli_table(text: str) -> list[str]:
    """The command table's rows under a page's CLI heading."""
    section = re.split(r"^#{1,2} The CLI\n", text, flags=re.M)[1]
    return [line for line in section.splitlines() if line.startswith("| `greenspec ")]


def shown_text() -> str:
    return "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted(DOCS.glob("*.md"))])


def test_mkdocs_builds_strictly(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        if in_ci():
            pytest.fail("CI=true: mkdocs is not installed (it is in pyproject's [test] extra; `make install`)")
        pytest.skip("mkdocs is not installed (`make install` installs it)")
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml")]
        + ["--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    pages = [tmp_path / "site" / page.replace(".md", ".html") for page in PAGES]
    assert all(page.is_file() for page in pages), pages
    for page in pages:  # the site opens from disk: no script or style from the network
        assert not re.search(r"""(src|href)="https?://[^"]+\.(js|css)""", page.read_text()), page


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["strict"] is True and config["theme"]["name"] in ("mkdocs", "readthedocs")
    nav = nav_pages(config["nav"])
    assert sorted(nav) == PAGES and len(nav) == len(set(nav))


def test_readme_links_into_docs_reach_a_page_and_its_heading():
    links = re.findall(r"\]\((docs/[^)#\s]+)(?:#([^)\s]+))?\)", (ROOT / "README.md").read_text())
    assert len({page for page, _ in links}) >= 10, links
    for page, anchor in links:
        assert (ROOT / page).is_file(), page
        assert not anchor or anchor in anchors(ROOT / page), f"{page}#{anchor}"
    assert "](#" not in (ROOT / "README.md").read_text(), "the README's own anchors moved to docs/"


def test_the_cli_page_shows_the_readme_table():
    readme = [row.replace("](docs/", "](") for row in cli_table((ROOT / "README.md").read_text())]
    assert readme and cli_table((DOCS / "cli.md").read_text()) == readme


def spec_keys() -> dict[str, set[str]]:
    """Every key a spec accepts, by section, and every draft's options."""
    from orchestrator.run.spec_sections import (
        CorpusSection,
        ExperimentSection,
        PowerSection,
        StrategySection,
        SweepSection,
        TaskSection,
        VerifierSection,
    )
    from workers.drafts.registry import registry

    sections = [ExperimentSection, VerifierSection, CorpusSection, TaskSection, SweepSection, PowerSection]
    keys = {s.__name__: set(s.model_fields) for s in sections}
    keys["StrategySection"] = set(StrategySection.model_fields) - {"options"}
    keys |= {f"draft {name}": set(entry.options.model_fields) for name, entry in registry().items()}
    return keys


def test_the_spec_reference_names_every_key_and_draft():
    page = (DOCS / "spec.md").read_text()
    documented = set(re.findall(r"`([a-z_]+)`", page))
    for where, keys in spec_keys().items():
        assert keys <= documented, f"{where}: {sorted(keys - documented)} not in docs/spec.md"
        if where.startswith("draft "):
            assert re.search(rf"^\| `{where.removeprefix('draft ')}` \|", page, flags=re.M), where
            assert f"`{where.removeprefix('draft ')}`" in (DOCS / "drafts.md").read_text(), where


PLACEHOLDERS = {"SPEC": "examples/demo.toml", "spec.toml": "examples/demo.toml", "HEAD_IP:6379": "127.0.0.1:6379"}


def shown_commands() -> list[list[str]]:
    """Every `greenspec ...` command the README and the pages show, in code blocks and inline, placeholders filled;
    the CLI table's usage forms (`[--wait]`) are left to test_readme_cli, which runs each row."""
    text = shown_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    lines = [line.split("#", 1)[0] for block in blocks for line in block.splitlines()]
    lines += [m.replace("\n", " ") for m in re.findall(r"`((?:\.venv/bin/)?greenspec [^`]+)`", text)]
    out = []
    for line in lines:
        if "greenspec " not in line:  # another command (a multi-line `python -c` block's lines do not split alone)
            continue
        words = shlex.split(line)
        if not words or Path(words[0]).name != "greenspec" or "[" in line or "COMMAND" in line or "\\|" in line:
            continue
        out.append([PLACEHOLDERS.get(w, w) for w in words[1:]])
    return out


def test_every_greenspec_command_shown_parses_as_written():
    import click

    from orchestrator.cli import main

    commands = shown_commands()
    assert len(commands) >= 20 and ["train", "examples/paper.toml", "--corpus", "fineweb"] in commands
    for args in commands:
        if not args:
            continue
        with main.make_context("greenspec", list(args)) as ctx:
            name, command, rest = main.resolve_command(ctx, ctx._protected_args + ctx.args)
            assert command is not None, args
            try:
                command.make_context(name, rest, parent=ctx)
            except click.MissingParameter:
                assert len(args) == 1, args  # `greenspec run` named in a sentence: the command, not an invocation
            except click.UsageError as err:
                raise AssertionError(f"greenspec {' '.join(args)}: {err}") from None


def test_paths_make_targets_and_modules_named_exist():
    text = shown_text()
    paths = set(
        re.findall(
            r"`((?:orchestrator|workers|storage|analysis|dashboard|greenspec|bench|tests|examples)/[\w./-]+)`", text
        )
    )
    assert len(paths) > 30
    missing = [p for p in sorted(paths - HYPOTHETICAL) if not (ROOT / p.split("::")[0]).exists()]
    assert not missing, missing
    targets = set(re.findall(r"^([a-z]+):", (ROOT / "Makefile").read_text(), flags=re.M))
    shown = set(re.findall(r"`make ([a-z]+)", text)) | set(re.findall(r"^make ([a-z]+)", text, flags=re.M))
    assert shown and shown <= targets, shown - targets
    for module in set(re.findall(r"python -m ([\w.]+)", text)) - {"pytest"}:
        assert importlib.util.find_spec(module) is not None, module
