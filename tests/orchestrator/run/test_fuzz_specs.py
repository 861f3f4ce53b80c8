"""Bad-input fuzzing (issue 13): mutated valid specs are refused with at most three lines, a non-zero exit and no
traceback, by `validate` and by `run`, and the database is left exactly as it was."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.cli import main
from storage.db import open_db

pytestmark = pytest.mark.slow

# Values of the wrong type or out of range for a key, per section (each one is invalid by the spec's rules).
BAD_VALUES = {
    "experiment": {
        "name": ["", "has space", 7, "x" * 300],
        "max_attempts": [0, -1, "3", 2.5],
        "batch_size": [0, True, []],
        "seed": ["zero", 1.5],
        "overlap": ["yes", 1],
    },
    "verifier": {"model": ["", 3, ["a"]], "dtype": ["float8", 32], "device": ["tpu", None.__class__.__name__]},
    "sweep": {
        "k": [[], [0], [2, 2], [65], "3", [2_000_000_000]],
        "regimes": [[], ["warp"], "cached"],
        "max_new_tokens": [0, -5, 2_000_000_000, "100", 1e9],
        "warmup": ["no"],
    },
    "power": {"sources": [[], ["battery"]], "hz": [0, -1, 1e9, "fast"], "idle_baseline_s": [-1.0]},
}
LIST_BAD = {
    "tasks": {"prompts": [0, -1, 10**9, "2"], "prompt_words": [0, 10**8], "path": ["/no/such/task.txt", 5]},
    "corpora": {"path": ["/no/such/corpus.txt", 5], "window": [0, "4"], "backend": ["igtree"]},
    "strategies": {
        "draft": ["medusa", 3],
        "k": [[0], [], [99]],
        "tasks": [["nosuch"], []],
        "corpus": ["nosuch"],
        "n": [0, "x"],
    },
}


def toml_value(v) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return repr(v)


def dump(data: dict) -> str:
    """A minimal TOML writer for the spec's shape (tables and arrays of tables of scalars and lists)."""
    out = []
    for section, body in data.items():
        for table in body if isinstance(body, list) else [body]:
            out.append(f"[[{section}]]" if isinstance(body, list) else f"[{section}]")
            out += [f"{k} = {toml_value(v)}" for k, v in table.items()]
    return "\n".join(out) + "\n"


@st.composite
def mutation(draw, base: dict):
    """(description, spec bytes): one mutation that makes a valid spec invalid."""
    data = {k: ([dict(t) for t in v] if isinstance(v, list) else dict(v)) for k, v in base.items()}
    kind = draw(st.sampled_from(["type", "list_type", "unknown", "missing", "duplicate", "encoding", "toml"]))
    if kind == "type":
        section = draw(st.sampled_from(sorted(BAD_VALUES)))
        key = draw(st.sampled_from(sorted(BAD_VALUES[section])))
        data.setdefault(section, {})[key] = draw(st.sampled_from(BAD_VALUES[section][key]))
    elif kind == "list_type":
        section = draw(st.sampled_from(sorted(LIST_BAD)))
        key = draw(st.sampled_from(sorted(LIST_BAD[section])))
        i = draw(st.integers(0, len(data[section]) - 1))
        if section == "strategies" and key in ("corpus", "n"):
            i = next(
                j for j, s in enumerate(data[section]) if s["draft"] == ("olifant" if key == "corpus" else "ngram")
            )
        data[section][i][key] = draw(st.sampled_from(LIST_BAD[section][key]))
    elif kind == "unknown":
        section = draw(st.sampled_from(sorted(data)))
        key = draw(
            st.from_regex(r"\A[a-z][a-z_]{2,12}\Z", fullmatch=True).filter(
                lambda k: k not in {"name", "seed", "draft", "k", "tasks", "path", "model", "artifacts", "corpus"}
            )
        )
        target = data[section][0] if isinstance(data[section], list) else data[section]
        target[f"zz_{key}"] = draw(st.sampled_from([1, "x", True, [1]]))
    elif kind == "missing":
        del data[draw(st.sampled_from(["experiment", "verifier", "tasks", "strategies"]))]
    elif kind == "duplicate":
        section = draw(st.sampled_from(["tasks", "corpora", "strategies"]))
        data[section].append(dict(data[section][draw(st.integers(0, len(data[section]) - 1))]))
    text = dump(data)
    if kind == "encoding":
        enc = draw(st.sampled_from(["latin-1-accent", "utf-16", "bad-bytes"]))
        if enc == "utf-16":
            return kind, text.encode("utf-16")
        if enc == "bad-bytes":
            at = draw(st.integers(0, len(text)))
            return kind, text[:at].encode() + b"\xff\xfe\x80" + text[at:].encode()
        return kind, text.replace('name = "t"', 'name = "t\u00e9t"', 1).encode("latin-1")
    if kind == "toml":  # broken syntax at the start of a line (inside a string it could still be valid TOML)
        lines = text.splitlines(keepends=True)
        at = draw(st.integers(0, len(lines) - 1))
        lines[at] = draw(st.sampled_from(['"', "[", "= =", "[[", "\x00", "key without value "])) + lines[at]
        return kind, "".join(lines).encode()
    return kind, text.encode()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def base_spec(tmp_path_factory, tiny_verifier, text_files):
    from tests.orchestrator.conftest import MAX_NEW_TOKENS, SPEC

    text = SPEC.format(
        name="t",
        attempts=2,
        model=tiny_verifier,
        corpus=text_files[0],
        task=text_files[1],
        k=[2, 3],
        max_new=MAX_NEW_TOKENS,
    )
    return tomllib.loads(text)


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fuzzdb") / "g.db"
    open_db(f"sqlite:///{path}")[0].dispose()
    return path


def test_mutated_specs_are_refused_in_at_most_three_lines(base_spec, db, tmp_path_factory):
    folder = tmp_path_factory.mktemp("specs")
    before = _digest(db)
    runner = CliRunner()

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(mutation(base_spec))
    def check(m):
        kind, blob = m
        spec = folder / "spec.toml"
        spec.write_bytes(blob)
        for cmd in (["validate", str(spec)], ["--db", f"sqlite:///{db}", "run", str(spec)]):
            res = runner.invoke(main, cmd)
            err = res.stderr.strip()
            assert res.exit_code not in (0, None), f"{kind}: {cmd[-2]} accepted:\n{blob[:2000]!r}\n{res.stdout}"
            assert "Traceback" not in res.output, f"{kind}: {err}"
            assert 1 <= len(err.splitlines()) <= 3, f"{kind}: {err}"
            assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
        assert _digest(db) == before

    check()
    assert not [p for p in db.parent.iterdir() if p.name != db.name]  # no -wal/-shm or other file appeared
