"""The reference: TiMBL itself (`python3-timbl`) behind the same interface as our IGTree engine."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from workers.errors import IBaseError
from workers.igtree.counting import PAD, check_instances
from workers.igtree.tree import context_tail


class TimblIGTree:
    """TiMBL's IGTree (`-a1 +D`) with IGTree's methods; the TimblAPI object is created lazily in each process.

    Only the instance-base path and metadata are pickled, so the object can cross Ray task boundaries.
    Instances go to TiMBL in its column format: context values then the target, PAD written as `_`.
    """

    OPTIONS = "-a1 +D +vs"  # +vs: TiMBL prints nothing on stdout
    WEIGHTING = {"gain_ratio": "-w1", "info_gain": "-w2"}

    def __init__(self, ibase_path, meta: dict, api=None):
        self.path = Path(ibase_path)
        self.meta = meta
        self.window = int(meta["window"])
        self._api = api

    @classmethod
    def fit(cls, contexts, targets, order: str = "gain_ratio", workdir=None, **meta) -> TimblIGTree:
        """Train TiMBL on contexts (n, w) and targets (n,); its instance base is written under `workdir`."""
        import timblapi  # deferred: TiMBL's native library loads only for the timbl backend

        if order not in cls.WEIGHTING:
            raise IBaseError(f"timbl: order={order!r} is not accepted; use one of {tuple(cls.WEIGHTING)}")
        contexts, targets = check_instances(contexts, targets)
        folder = Path(workdir or tempfile.mkdtemp(prefix="greenspec-timbl-"))
        folder.mkdir(parents=True, exist_ok=True)
        data = folder / "train.inst"
        write_timbl_instances(data, contexts, targets)
        options = f"{cls.OPTIONS} {cls.WEIGHTING[order]}"
        api = timblapi.TimblAPI(options, "greenspec")
        if not api.learn(str(data)):
            raise IBaseError(f"timbl: learning from {data} failed")
        ibase = folder / "timbl.ibase"
        api.writeInstanceBase(str(ibase))
        meta = {**meta, "window": contexts.shape[1], "order_rule": order, "options": options, "instances": len(targets)}
        return cls(ibase, meta, api=api)

    def _timbl(self):
        """The TimblAPI of this process, loading the instance base on first use."""
        if self._api is None:
            import timblapi

            api = timblapi.TimblAPI(self.meta.get("options", self.OPTIONS), "greenspec")
            if not api.getInstanceBase(str(self.path)):
                raise IBaseError(f"{self.path}: TiMBL cannot read this instance base; retrain it")
            self._api = api
        return self._api

    @property
    def n_nodes(self) -> int:
        """Nodes of TiMBL's pruned tree, the root excluded (each written as `<value>(` in its file)."""
        return len(re.findall(rb"\d+\(", self.path.read_bytes()))

    def __getstate__(self) -> dict:
        """Pickle the path and metadata only: TimblAPI objects cannot be pickled."""
        return {"path": str(self.path), "meta": self.meta}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"], state["meta"])

    def predict(self, context: Sequence[int]) -> int:
        """TiMBL's prediction for the last `window` tokens of context (left-padded with PAD if short)."""
        ok, label = self._timbl().classify(_timbl_line(context_tail(context, self.window), "?"))
        if not ok:
            raise IBaseError(f"{self.path}: TiMBL failed to classify context {list(context)[-self.window :]}")
        return int(label)

    def lookup(self, context: Sequence[int]) -> tuple[int, None]:
        """(prediction, None): TiMBL's Python API does not expose the depth of the match."""
        return self.predict(context), None

    def predict_batch(self, contexts) -> np.ndarray:
        """Predictions for contexts (B, window); (B,) int64, one TiMBL call each."""
        return np.array([self.predict(c) for c in np.asarray(contexts).tolist()], dtype=np.int64)

    def save(self, path) -> int:
        """Write TiMBL's instance base to `path` and the metadata to `path`.meta.json; returns bytes."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        self._timbl().writeInstanceBase(str(tmp))  # TiMBL also writes <file>.wgt beside it
        for suffix in ("", ".wgt"):
            if Path(f"{tmp}{suffix}").exists():
                os.replace(f"{tmp}{suffix}", f"{path}{suffix}")
        _atomic_write_text(path.with_name(path.name + ".meta.json"), json.dumps(self.meta, sort_keys=True))
        return path.stat().st_size

    @classmethod
    def load(cls, path, *, tokenizer_id: str | None = None, window: int | None = None) -> TimblIGTree:
        """A TiMBL instance base saved by `save`; refuse one for another tokenizer/window."""
        path = Path(path)
        try:
            meta = json.loads(path.with_name(path.name + ".meta.json").read_text())
        except (OSError, ValueError) as err:
            raise IBaseError(f"{path}: missing or unreadable .meta.json next to the TiMBL instance base") from err
        if not path.is_file():
            raise IBaseError(f"{path}: no such TiMBL instance base")
        if tokenizer_id is not None and meta.get("tokenizer_id") != tokenizer_id:
            raise IBaseError(
                f"{path}: built for tokenizer {meta.get('tokenizer_id')!r}, not {tokenizer_id!r}; retrain it"
            )
        if window is not None and int(meta["window"]) != int(window):
            raise IBaseError(f"{path}: built for window {meta['window']}, not {window}; retrain it")
        return cls(path, meta)


def _timbl_line(values: Sequence[int], target: str) -> str:
    """One instance in TiMBL's column format."""
    return " ".join("_" if v == PAD else str(v) for v in values) + " " + target


def write_timbl_instances(path, contexts: np.ndarray, targets: np.ndarray, batch: int = 100_000) -> None:
    """Write instances as TiMBL columns (space-separated, target last, PAD as `_`), in batches."""
    with open(path, "w") as fh:
        for lo in range(0, len(targets), batch):
            rows = contexts[lo : lo + batch].tolist()
            ys = targets[lo : lo + batch].tolist()
            fh.write("".join(_timbl_line(r, str(y)) + "\n" for r, y in zip(rows, ys)))


def _atomic_write_text(path: Path, text: str) -> None:
    """Write text via a temp file and os.replace."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
