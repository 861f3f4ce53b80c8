"""The old path of k = "auto"'s decoding plan, now `workers.decoding.autok` (the draft-length policy sits with the
decoding); `workers.runner` imports it from here."""

from __future__ import annotations

from workers.decoding.autok import decoding_plan

__all__ = ["decoding_plan"]
