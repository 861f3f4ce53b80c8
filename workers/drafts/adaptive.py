"""The adaptive-length options of a draft that can score its guesses (`olifant`, `neural`): `adaptive`,
`threshold`, `online`, and the stop rule they ask for (`workers.decoding.adaptive.AdaptiveLength`, the draft-length
policy, which sits with the decoding).

Example:
    >>> AdaptiveOptions(adaptive=True, threshold=0.5).gate().cut([(11, 1.0), (12, 0.75), (13, 0.25)])
    [11, 12]
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from workers.decoding.adaptive import AdaptiveLength
from workers.drafts.registry import DraftOptions

__all__ = ["AdaptiveLength", "AdaptiveOptions"]


class AdaptiveOptions(DraftOptions):
    """Options of a draft that can score its guesses: `adaptive`, `threshold` (min estimated acceptance), `online`."""

    adaptive: bool = False
    threshold: Annotated[float, Field(ge=0.0, le=1.0)] = 0.5
    online: bool = False

    def identity(self) -> dict[str, Any]:
        """As the base, without the adaptive keys when off (fixed-length cells keep their keys)."""
        out = super().identity()
        if not self.adaptive:
            for key in ("adaptive", "threshold", "online"):
                out.pop(key, None)
        return out

    def gate(self) -> AdaptiveLength | None:
        """The stop rule these options ask for, or None for fixed-length drafting."""
        return AdaptiveLength(self.threshold, self.online) if self.adaptive else None
