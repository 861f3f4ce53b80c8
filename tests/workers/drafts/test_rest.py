"""The `rest` draft: REST's retrieval through the registry, from a datastore file."""

from __future__ import annotations

import numpy as np
import pytest

from workers.drafts import BuildContext, build_draft, lookup, make_draft
from workers.errors import DraftError
from workers.training.datastore import Datastore, save_datastore


@pytest.fixture()
def datastore(tmp_path):
    path = tmp_path / "d.rest.npy"
    save_datastore(np.array([1, 2, 3, 9, 4, 2, 3, 7, 2, 3, 7, 5, 2, 3]), path)
    return str(path)


def test_rest_drafts_the_heaviest_continuation_of_the_longest_suffix(datastore):
    draft = make_draft("rest", datastore=datastore)
    assert draft.propose([2, 3], 2) == [7, 2] and draft.propose([1, 2, 3], 2) == [9, 4]
    assert draft.propose([2, 3], 0) == [] and draft.propose([], 3) == []
    assert draft.index_bytes == 2 * 14 * 4
    opened = make_draft("rest", datastore=Datastore.open(datastore), max_match=2)
    assert opened.propose([8, 1, 2, 3], 3) == [7, 2, 3]


def test_rest_through_the_registry_reads_its_datastore_artifact(datastore):
    opts = lookup("rest").parse({"corpus": "plays", "max_occurrences": 2})
    assert opts.corpora() == {"plays"} and {r.artifact for r in opts.requires().values()} == {"datastore"}
    assert opts.identity() == {"max_match": 16, "min_match": 2, "max_occurrences": 2}
    draft = build_draft(
        "rest", {"corpus": "plays", "max_occurrences": 2}, BuildContext(artifacts={"datastore": datastore})
    )
    # suffix-array order: "2 3" at the very end (nothing after it), then "2 3 7 2": only these two are counted
    assert draft.propose([2, 3], 1) == [7]


def test_rest_refuses_bad_options(datastore):
    with pytest.raises(DraftError, match="datastore=int"):
        make_draft("rest", datastore=3)
    with pytest.raises(DraftError, match="min_match=3"):
        make_draft("rest", datastore=datastore, min_match=3, max_match=2)
    with pytest.raises(DraftError, match="missing required key 'corpus'"):
        lookup("rest").parse({})
    with pytest.raises(DraftError, match="cannot be opened"):
        make_draft("rest", datastore=datastore + ".missing")
