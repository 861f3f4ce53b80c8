"""The spec loader: accepted inputs, and a table of refused ones each with one line naming key and value."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrator.run.spec import parse_spec
from orchestrator.run.spec_paths import check_paths, load_spec
from workers.errors import SpecError

ROOT = Path(__file__).resolve().parents[3]

MINIMAL = """
[experiment]
name = "t"
[verifier]
model = "some/model"
[[corpora]]
name = "c"
path = "{corpus}"
[[tasks]]
name = "t1"
path = "{corpus}"
prompts = 3
[[strategies]]
name = "plain"
draft = "plain"
[[strategies]]
name = "oli"
draft = "olifant"
corpus = "c"
"""


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    p = tmp_path / "c.txt"
    p.write_text("one two three four five\n\nsix seven eight\n")
    return p


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "spec.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("name", ["demo.toml", "demo-toy.toml", "paper.toml"])
def test_examples_are_valid(name):
    spec = load_spec(ROOT / "examples" / name)
    check_paths(spec)
    assert spec.cell_counts()["sweep"] > 0
    assert "sweep cells" in spec.summary()


def test_repeats_default_and_allowed_for_a_forgetting_suffix(tmp_path, corpus):
    assert load_spec(write(tmp_path, MINIMAL.format(corpus="c.txt"))).sweep.repeats == 1
    text = MINIMAL.format(corpus="c.txt").replace(
        'name = "oli"\ndraft = "olifant"\ncorpus = "c"', 'name = "suf"\ndraft = "suffix"\n[sweep]\nrepeats = 3'
    )
    assert load_spec(write(tmp_path, text)).sweep.repeats == 3


def test_paper_grid_size():
    spec = load_spec(ROOT / "examples" / "paper.toml")
    # 8 drafting strategies (the paper's 4-gram, two stronger n-grams, neural, 4 olifant) x 3 k + plain,
    # x 2 regimes x 3 tasks x 100 prompts
    assert spec.cell_counts() == {"train": 4, "reference": 300, "sweep": (8 * 3 + 1) * 2 * 300}


def test_minimal_defaults_and_relative_paths(tmp_path, corpus):
    spec = load_spec(write(tmp_path, MINIMAL.format(corpus="c.txt")))
    assert spec.sweep.k == [3, 5, 8] and spec.sweep.regimes == ["uncached", "cached"]
    assert spec.sweep.max_new_tokens == 100 and spec.tasks[0].prompt_words == 50
    assert spec.corpora[0].path == str(corpus)  # resolved next to the spec
    assert spec.verifier.model == "some/model"  # hub ids stay as they are
    assert spec.verifier.threads is None  # the driver's default: every core
    assert spec.cell_counts() == {"train": 1, "reference": 3, "sweep": 3 * 2 * (3 + 1)}


BAD = [
    # (what is changed, replacement pair, words the one-line message must contain)
    ("unknown top key", ("[experiment]", '[experiment]\ncolour = "red"'), ["colour", "unknown key"]),
    ("unknown section", ("[[tasks]]", "[extras]\na = 1\n[[tasks]]"), ["extras", "unknown key"]),
    ("wrong type", ("prompts = 3", 'prompts = "three"'), ["tasks[0].prompts", "three"]),
    (
        "k zero",
        ('[[strategies]]\nname = "plain"', '[sweep]\nk = [3, 0]\n[[strategies]]\nname = "plain"'),
        ["sweep.k[1]", "0"],
    ),
    (
        "k negative",
        ('[[strategies]]\nname = "plain"', '[sweep]\nk = [-2]\n[[strategies]]\nname = "plain"'),
        ["sweep.k[0]", "-2"],
    ),
    (
        "negative tokens",
        ('[[strategies]]\nname = "plain"', '[sweep]\nmax_new_tokens = -5\n[[strategies]]\nname = "plain"'),
        ["max_new_tokens", "-5"],
    ),
    ("negative max_tokens", ('name = "c"', 'name = "c"\nmax_tokens = -1'), ["corpora[0].max_tokens", "-1"]),
    ("unknown draft", ('draft = "plain"', 'draft = "medusa"'), ["strategies[0].draft", "medusa"]),
    ("undefined corpus", ('corpus = "c"', 'corpus = "nope"'), ["nope", "corpora"]),
    ("olifant without corpus", ('corpus = "c"', ""), ["olifant", "corpus"]),
    ("missing verifier", ('[verifier]\nmodel = "some/model"', ""), ["verifier", "missing"]),
    ("empty verifier model", ('model = "some/model"', 'model = ""'), ["verifier.model"]),
    (
        "k on plain",
        ('draft = "plain"', 'draft = "plain"\nk = [3]'),
        ["strategies[0]", "k = [3]", "'plain' proposes nothing", "remove k"],
    ),
    (
        "strategy regime outside the sweep",
        ('draft = "plain"', 'draft = "plain"\nregimes = ["cached-standard"]'),
        ["strategies[0] (plain)", "regime 'cached-standard' is not in [sweep] regimes"],
    ),
    (
        "gguf_file not a .gguf",
        ('model = "some/model"', 'model = "/models"\ngguf_file = "x.bin"'),
        ["gguf_file 'x.bin' must be a file name ending in .gguf"],
    ),
    (
        "gguf_file on a built-in model",
        ('model = "some/model"', 'model = "smollm2-135m"\ngguf_file = "x.gguf"'),
        ["gguf_file needs model = the folder that holds x.gguf"],
    ),
    (
        "bad regime",
        ('[[strategies]]\nname = "plain"', '[sweep]\nregimes = ["warm"]\n[[strategies]]\nname = "plain"'),
        ["regimes", "warm"],
    ),
    ("path and dataset", ('name = "t1"', 'name = "t1"\ndataset = "x/y"'), ["tasks[0]", "exactly one"]),
    ("duplicate strategy", ('name = "oli"', 'name = "plain"'), ["duplicate", "plain"]),
    ("bad toml", ("[experiment]", "[experiment"), ["TOML"]),
    (
        "repeats zero",
        ('[[strategies]]\nname = "plain"', '[sweep]\nrepeats = 0\n[[strategies]]\nname = "plain"'),
        ["sweep.repeats", "0"],
    ),
    (
        "repeats with remembered outputs",
        (
            'name = "oli"\ndraft = "olifant"\ncorpus = "c"',
            'name = "suf"\ndraft = "suffix"\nremember_outputs = true\n[sweep]\nrepeats = 2',
        ),
        ["strategies[1] (suf)", "repeats = 2", "remembers earlier outputs"],
    ),
    ("threads zero", ('model = "some/model"', 'model = "some/model"\nthreads = 0'), ["verifier.threads", "0"]),
    (
        "bad power source",
        ('[[strategies]]\nname = "plain"', '[power]\nsources = ["gas"]\n[[strategies]]\nname = "plain"'),
        ["power.sources", "gas"],
    ),
]


@pytest.mark.parametrize("label,change,words", BAD, ids=[b[0] for b in BAD])
def test_bad_specs_refused_in_one_line(tmp_path, corpus, label, change, words):
    text = MINIMAL.format(corpus="c.txt").replace(*change, 1)
    assert text != MINIMAL.format(corpus="c.txt")
    with pytest.raises(SpecError) as err:
        load_spec(write(tmp_path, text))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(str(tmp_path / "spec.toml"))
    for w in words:
        assert w in msg, (label, msg)


@pytest.mark.parametrize(
    "change,line",
    [
        (("prompts = 3", "promts = 3"), "unknown key 'tasks[0].promts'; did you mean 'prompts'?"),
        (('name = "c"', 'name = "c"\nwindw = 4'), "unknown key 'corpora[0].windw'; did you mean 'window'?"),
        (("[verifier]", '[verifier]\ndtyp = "float32"'), "unknown key 'verifier.dtyp'; did you mean 'dtype'?"),
        (("[[corpora]]", "[sweep]\nrepeat = 2\n[[corpora]]"), "unknown key 'sweep.repeat'; did you mean 'repeats'?"),
        # a misspelt section is named as such, not as the section it left missing
        (("[experiment]", "[experimnt]"), "unknown key 'experimnt'; did you mean 'experiment'?"),
        (("[experiment]", '[experiment]\ncolour = "red"'), "unknown key 'experiment.colour'"),  # nothing close
    ],
)
def test_a_misspelt_spec_key_gets_its_close_match(tmp_path, corpus, change, line):
    with pytest.raises(SpecError) as err:
        load_spec(write(tmp_path, MINIMAL.format(corpus="c.txt").replace(*change, 1)))
    assert str(err.value) == f"{tmp_path / 'spec.toml'}: {line}"


def test_missing_local_path_refused(tmp_path):
    spec = load_spec(write(tmp_path, MINIMAL.format(corpus="missing.txt")))
    with pytest.raises(SpecError, match=r"corpora\[0\]\.path: no such file.*missing\.txt"):
        check_paths(spec)


def test_missing_local_model_refused(tmp_path, corpus):
    text = MINIMAL.format(corpus="c.txt").replace('"some/model"', '"./no-such-model"')
    with pytest.raises(SpecError, match=r"verifier\.model: no such file"):
        check_paths(load_spec(write(tmp_path, text)))


def test_unknown_builtin_refused(tmp_path):
    text = MINIMAL.format(corpus="demo:klingon-train")
    with pytest.raises(SpecError, match="unknown built-in source 'demo:klingon-train'"):
        check_paths(load_spec(write(tmp_path, text)))


def test_unreadable_spec_file(tmp_path):
    with pytest.raises(SpecError, match="cannot read spec"):
        load_spec(tmp_path / "nope.toml")


def test_parse_spec_text():
    spec = parse_spec(MINIMAL.format(corpus="/abs/c.txt"))
    assert [s.draft for s in spec.strategies] == ["plain", "olifant"]


def test_spec_regimes_are_the_decoding_engines():
    from orchestrator.run.spec import REGIMES
    from workers.decoding import REGIMES as ENGINE

    assert REGIMES == tuple(ENGINE)


@pytest.mark.parametrize("name", ["demo", "paper", "sampling"])
def test_examples_validate(name):
    spec = load_spec(ROOT / "examples" / f"{name}.toml")
    assert spec.cell_counts()["sweep"] > 0


def test_sampling_example_sweeps_two_temperatures_in_three_regimes():
    spec = load_spec(ROOT / "examples" / "sampling.toml")
    assert spec.sweep.temperatures == [0.0, 0.8] and len(spec.sweep.regimes) == 3
    # (3 drafting strategies x 2 k + plain) x 3 regimes x 2 temperatures x 4 prompts
    assert spec.cell_counts()["sweep"] == (3 * 2 + 1) * 3 * 2 * 4


def test_a_spec_source_has_exactly_the_workers_text_source_fields():
    import dataclasses

    from orchestrator.run.spec import _Source
    from workers.corpora import TextSource

    for f in dataclasses.fields(TextSource):
        field = _Source.model_fields[f.name]
        assert field.is_required() if f.default is dataclasses.MISSING else field.default == f.default
    assert set(_Source.model_fields) == {f.name for f in dataclasses.fields(TextSource)}


@pytest.mark.parametrize(
    "plain_keys, says",
    [
        ('tasks = ["t1"]', "runs on task 't2' (uncached) where no plain strategy runs"),
        ('regimes = ["cached"]', "runs on task 't1' (uncached) where no plain strategy runs"),
    ],
)
def test_every_task_and_regime_a_draft_runs_at_has_its_plain(plain_keys, says):
    """A restricted plain would leave a coordinate without the plain its speedup divides by: refused by name."""
    text = f"""
[experiment]
name = "x"
[verifier]
model = "m"
[[tasks]]
name = "t1"
path = "a.txt"
[[tasks]]
name = "t2"
path = "b.txt"
[[strategies]]
name = "plain"
draft = "plain"
{plain_keys}
[[strategies]]
name = "ngram"
draft = "ngram"
"""
    with pytest.raises(SpecError, match=re.escape(f"strategies[1] (ngram): {says}")):
        parse_spec(text)
    assert len(parse_spec(text.replace(plain_keys, "")).strategies) == 2  # unrestricted: fine
