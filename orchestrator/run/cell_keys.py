"""Content keys: sha256 over the canonical JSON of what determines a cell's result, plus greenspec's version.

`content_key` hashes one payload. `PromptKeys` hashes many payloads that differ only in their prompt, as a grid's
sweep and replay cells do (one coordinate over every prompt of a task): the canonical JSON is cut once around the
prompt, so each cell hashes its prompt's JSON between the two halves, the very bytes `content_key` would hash.

Example:
    >>> keys = PromptKeys({"kind": "sweep", "prompt": PROMPT, "k": 3})
    >>> keys.key(prompt_json("def f():")) == content_key({"kind": "sweep", "prompt": "def f():", "k": 3})
    True
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from orchestrator.run.spec import Spec

try:
    GREENSPEC_VERSION = version("greenspec")
except PackageNotFoundError:  # running from a source tree without installing
    GREENSPEC_VERSION = "0+unknown"

# stands for the prompt as a `PromptKeys` payload's "prompt", where its JSON is cut (a payload that holds it twice, or
# not at all, is hashed whole, the prompt put in place of it)
PROMPT = "\x00greenspec:prompt\x00"


def canonical(payload: dict[str, Any]) -> str:
    """The JSON a content key hashes: sorted keys, no spaces, greenspec's version first in the payload."""
    return json.dumps({"greenspec": GREENSPEC_VERSION, **payload}, sort_keys=True, separators=(",", ":"))


def content_key(payload: dict[str, Any]) -> str:
    """sha256 over canonical JSON of the values that determine a result, plus greenspec's version."""
    return hashlib.sha256(canonical(payload).encode()).hexdigest()


def prompt_json(text: str) -> bytes:
    """A prompt as its canonical JSON holds it (computed once per prompt, hashed into each of its cells' keys)."""
    return json.dumps(text).encode()


class PromptKeys:
    """The content keys of `payload` with each prompt as its "prompt" (given as `PROMPT`): `key(prompt_json(text))`
    equals `content_key({**payload, "prompt": text})`, hashing the JSON before the prompt once."""

    def __init__(self, payload: dict[str, Any]):
        self.payload = payload
        blob = canonical(payload)
        mark = json.dumps(PROMPT)
        self._whole = blob.count(mark) != 1  # not exactly once (an option's value is the mark too): hashed whole
        head, _, tail = blob.partition(mark)
        self._head = hashlib.sha256(head.encode())
        self._tail = tail.encode()

    def key(self, prompt: bytes) -> str:
        """The key of the payload with the prompt whose JSON is `prompt` (`prompt_json`)."""
        if self._whole:
            mine = self.payload.get("prompt") == PROMPT  # else an option of the same name took its place
            return content_key({**self.payload, "prompt": json.loads(prompt)} if mine else self.payload)
        h = self._head.copy()
        h.update(prompt)
        h.update(self._tail)
        return h.hexdigest()


SOURCE_PACKAGES = ("workers", "storage", "analysis", "orchestrator", "greenspec")  # the code that makes a grid


@lru_cache(maxsize=1)
def source_digest() -> str:
    """sha256 over greenspec's version and every Python file of the packages that expand a spec into cells (their
    paths and bytes, in order): equal digests, the same code made the grid (`Grid.digest`)."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256(GREENSPEC_VERSION.encode())
    for pkg in SOURCE_PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def verifier_identity(spec: Spec) -> dict[str, Any]:
    """The verifier fields that change its outputs."""
    v = spec.verifier
    return {"model": v.model, "revision": v.revision, "tokenizer": v.tokenizer or v.model, "dtype": v.dtype}


def sampling_identity(spec: Spec, temperature: float) -> dict[str, Any]:
    """What sampling adds to a cell's key: nothing at temperature 0 (greedy keys stay as they were)."""
    if temperature == 0:
        return {}
    sw = spec.sweep
    return {"temperature": temperature, "top_k": sw.top_k, "top_p": sw.top_p, "seed": spec.experiment.seed}
