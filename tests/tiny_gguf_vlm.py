"""A tiny randomly initialised multimodal projector GGUF (an "mmproj"), built offline.

llama.cpp takes images through a second GGUF beside the text model: a vision encoder and a
projector whose outputs are fed to the text model as input embeddings, one per image patch.
:func:`build_tiny_mmproj` writes the smallest such file llama.cpp's loader (``clip.cpp`` of
``tools/mtmd``) accepts, with the ``gguf`` package: LLaVA's ``mlp`` projector on a CLIP-like
ViT.

* a patch embedding (a ``patch_size`` x ``patch_size`` convolution over the RGB picture,
  ``image_size`` square), position embeddings, ``n_layer`` pre-norm transformer blocks (q/k/v/out
  with biases, two layer norms, an up/down GELU feed-forward) and a final layer norm; llama.cpp
  runs the LLaVA graph up to the *second to last* block (the layer LLaVA takes its features
  from), so with ``n_layer=2`` one block is computed;
* the projector ``mm.0`` (linear), GELU, ``mm.2`` (linear) to the text model's width.

The weights are Gaussian from a seeded generator (the same arguments give the same bytes). The
output scale is set so that a patch's projected embedding has about the norm ``out_norm``: by
default ``sqrt(n_embd)``, the norm of a Gemma 3 token embedding as its graph scales it (its
rows have norm ~1 and are multiplied by ``sqrt(n_embd)``; image embeddings are not), so the
picture moves the text model's next-token distribution visibly.

The metadata llama.cpp requires for a vision projector (``clip.cpp``'s ``load_hparams``):
``clip.has_vision_encoder``, ``clip.projector_type``, ``clip.vision.{embedding_length,
feed_forward_length, block_count, projection_dim, image_size, patch_size, image_mean,
image_std}``, ``clip.vision.attention.{head_count, layer_norm_epsilon}`` (without any one of
them the engine does not start); ``clip.use_gelu`` chooses GELU over its default quick-GELU in
the blocks. The loader refuses a file without ``v.blk.N.{attn_out,ffn_up,ffn_down}.weight``;
without ``v.patch_embd.weight``, ``v.position_embd.weight``, ``v.blk.N.attn_{q,k,v}.weight`` or
any of ``mm.{0,2}.{weight,bias}`` it loads and then crashes (SIGSEGV) while starting (measured
with xllamacpp 2026.10.11549). Biases and layer norms are optional there; they are written.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

PROJECTOR_TYPE = "mlp"
"""LLaVA's two-layer MLP projector, as llama.cpp names it (gguf's ``VisionProjectorType`` has no
member for it: LLaVA mmproj files predate the enum)."""


def text_model_width(gguf_path: Path) -> int:
    """The input embedding width of a text GGUF: its ``<arch>.embedding_length``.

    Read by walking the header's key/value pairs up to that key (it comes before the
    tokenizer's vocabulary): ``gguf.GGUFReader`` parses every entry, the Gemma 3 file's 262k
    vocabulary strings included, which takes ~12 s on a slow core.
    """
    import struct

    from gguf import GGUFValueType

    scalars = {GGUFValueType.UINT8: "<B", GGUFValueType.INT8: "<b",
               GGUFValueType.UINT16: "<H", GGUFValueType.INT16: "<h",
               GGUFValueType.UINT32: "<I", GGUFValueType.INT32: "<i",
               GGUFValueType.FLOAT32: "<f", GGUFValueType.BOOL: "<?",
               GGUFValueType.UINT64: "<Q", GGUFValueType.INT64: "<q",
               GGUFValueType.FLOAT64: "<d"}
    with gguf_path.open("rb") as handle:

        def read(fmt: str) -> Any:
            return struct.unpack(fmt, handle.read(struct.calcsize(fmt)))[0]

        def string() -> str:
            return handle.read(read("<Q")).decode("utf-8")

        def value(kind: GGUFValueType) -> Any:
            if kind == GGUFValueType.STRING:
                return string()
            if kind == GGUFValueType.ARRAY:
                item, count = GGUFValueType(read("<I")), read("<Q")
                return [value(item) for _ in range(count)]
            return read(scalars[kind])

        if handle.read(4) != b"GGUF" or read("<I") < 2:
            raise ValueError(f"{gguf_path} is not a GGUF file of version 2 or later")
        read("<Q")  # tensor count
        arch = None
        for _ in range(read("<Q")):
            key = string()
            found = value(GGUFValueType(read("<I")))
            if key == "general.architecture":
                arch = found
            elif arch is not None and key == f"{arch}.embedding_length":
                return int(found)
    raise ValueError(f"{gguf_path} names no <arch>.embedding_length")


def build_tiny_mmproj(path: Path, n_embd: int, *, image_size: int = 32, patch_size: int = 8,
                      width: int = 32, n_head: int = 2, n_ff: int = 64, n_layer: int = 2,
                      proj_hidden: int = 128, out_norm: float | None = None,
                      seed: int = 0) -> Path:
    """Write a tiny LLaVA-style ``mlp`` mmproj GGUF whose outputs are ``n_embd`` wide.

    Args:
        path: the file to write (its folder is created).
        n_embd: the text model's embedding width (the projector's output width).
        image_size: the square picture side the encoder takes (llama.cpp resizes to it).
        patch_size: the patch side (``(image_size // patch_size) ** 2`` image tokens).
        width: the vision encoder's hidden width.
        n_head: attention heads in the encoder (``width`` must divide by it).
        n_ff: the encoder's feed-forward width, not ``width`` (llama.cpp takes a down matrix
            whose input width is the encoder's width for a legacy file's swapped up/down names,
            and swaps them).
        n_layer: encoder blocks (llama.cpp computes ``n_layer - 1`` of them).
        proj_hidden: the projector's hidden width (``mm.0`` output).
        out_norm: the expected norm of one projected patch embedding (default
            ``sqrt(n_embd)``).
        seed: the weights' seed.

    Returns:
        ``path``.
    """
    import gguf
    from gguf.constants import MODEL_ARCH, MODEL_TENSOR, MODEL_TENSORS, TENSOR_NAMES

    if image_size % patch_size or width % n_head or n_ff == width:
        raise ValueError("image_size must be a multiple of patch_size, width of n_head, and "
                         "n_ff must differ from width")
    rng = np.random.default_rng(seed)
    n_patches = (image_size // patch_size) ** 2
    target = math.sqrt(n_embd) if out_norm is None else float(out_norm)

    def gauss(shape: tuple[int, ...], std: float) -> np.ndarray:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    allowed = {TENSOR_NAMES[t] for t in MODEL_TENSORS[MODEL_ARCH.MMPROJ]}
    tensors: dict[str, np.ndarray] = {}

    def put(kind: MODEL_TENSOR, suffix: str, value: np.ndarray, bid: int | None = None) -> None:
        # numpy shapes are PyTorch's (out, in): the writer reverses them into ggml's ne order.
        base = TENSOR_NAMES[kind]
        assert base in allowed, base
        name = (base.format(bid=bid) if bid is not None else base) + suffix
        tensors[name] = value

    ones = np.ones(width, dtype=np.float32)
    zeros = np.zeros(width, dtype=np.float32)
    # Patch embedding: a conv kernel (out, in, kh, kw); unit-variance outputs for pixels in
    # about [-1, 1] after the mean/std normalisation below.
    put(MODEL_TENSOR.V_ENC_EMBD_PATCH, ".weight",
        gauss((width, 3, patch_size, patch_size), 1.0 / math.sqrt(3 * patch_size ** 2)))
    put(MODEL_TENSOR.V_ENC_EMBD_PATCH, ".bias", gauss((width,), 0.1))
    put(MODEL_TENSOR.V_ENC_EMBD_POS, ".weight", gauss((n_patches, width), 0.1))
    for b in range(n_layer):
        put(MODEL_TENSOR.V_ENC_INPUT_NORM, ".weight", ones, b)
        put(MODEL_TENSOR.V_ENC_INPUT_NORM, ".bias", zeros, b)
        for kind in (MODEL_TENSOR.V_ENC_ATTN_Q, MODEL_TENSOR.V_ENC_ATTN_K,
                     MODEL_TENSOR.V_ENC_ATTN_V, MODEL_TENSOR.V_ENC_ATTN_O):
            put(kind, ".weight", gauss((width, width), 1.0 / math.sqrt(width)), b)
            put(kind, ".bias", gauss((width,), 0.02), b)
        put(MODEL_TENSOR.V_ENC_POST_ATTN_NORM, ".weight", ones, b)
        put(MODEL_TENSOR.V_ENC_POST_ATTN_NORM, ".bias", zeros, b)
        put(MODEL_TENSOR.V_ENC_FFN_UP, ".weight", gauss((n_ff, width), 1.0 / math.sqrt(width)),
            b)
        put(MODEL_TENSOR.V_ENC_FFN_UP, ".bias", gauss((n_ff,), 0.02), b)
        put(MODEL_TENSOR.V_ENC_FFN_DOWN, ".weight", gauss((width, n_ff), 1.0 / math.sqrt(n_ff)),
            b)
        put(MODEL_TENSOR.V_ENC_FFN_DOWN, ".bias", gauss((width,), 0.02), b)
    # A final layer norm: the projector sees unit-variance features whatever the picture.
    put(MODEL_TENSOR.V_POST_NORM, ".weight", ones)
    put(MODEL_TENSOR.V_POST_NORM, ".bias", zeros)
    # mm.0 -> GELU -> mm.2. With unit-variance inputs, mm.0's outputs are ~N(0, 1) and
    # E[gelu(z)^2] ~ 0.425, so mm.2's std sets the output norm: sqrt(n_embd*hidden*0.425)*std.
    put(MODEL_TENSOR.V_MMPROJ, ".weight", gauss((proj_hidden, width), 1.0 / math.sqrt(width)),
        0)
    put(MODEL_TENSOR.V_MMPROJ, ".bias", gauss((proj_hidden,), 0.02), 0)
    std2 = target / math.sqrt(n_embd * proj_hidden * 0.425)
    put(MODEL_TENSOR.V_MMPROJ, ".weight", gauss((n_embd, proj_hidden), std2), 2)
    put(MODEL_TENSOR.V_MMPROJ, ".bias", np.zeros(n_embd, dtype=np.float32), 2)

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), arch="clip")
    writer.add_type(gguf.GGUFType.MMPROJ)
    writer.add_name("capjudge tiny mmproj (random)")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_clip_has_vision_encoder(True)
    writer.add_clip_projector_type(PROJECTOR_TYPE)
    writer.add_vision_image_size(image_size)
    writer.add_vision_patch_size(patch_size)
    writer.add_vision_embedding_length(width)
    writer.add_vision_feed_forward_length(n_ff)
    writer.add_vision_block_count(n_layer)
    writer.add_vision_head_count(n_head)
    writer.add_vision_attention_layernorm_eps(1e-5)
    writer.add_vision_projection_dim(n_embd)
    writer.add_vision_image_mean([0.5, 0.5, 0.5])
    writer.add_vision_image_std([0.5, 0.5, 0.5])
    writer.add_vision_use_gelu(True)
    for name, value in tensors.items():
        writer.add_tensor(name, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
