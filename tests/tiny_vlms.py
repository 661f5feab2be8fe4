"""Tiny randomly initialised vision-language models, one per family, built offline.

Each builder saves a real architecture (real modelling code, real processor class, PIL image
processor) with random weights to a folder and returns the folder; nothing is downloaded. The
approach is that of :func:`tiny_vlm.build_tiny_llava`: a byte-level BPE tokenizer trained here on a
few sentences with the digits split one per token (so ``0``..``9`` are single tokens), the family's
special tokens added, a processor built from parameters, a chat template that renders messages
whose content is a string or a list of ``{"type": "image"}`` / ``{"type": "text"}`` parts, then
``model.save_pretrained`` + ``processor.save_pretrained``.

Every folder loads with ``AutoProcessor.from_pretrained`` and ``AutoModelForImageTextToText
.from_pretrained`` (five families only after :func:`install_shims`, see below). Hidden sizes are
32, one or two layers; a folder is under 1 MB and builds in well under a second.

Without torchvision (not installed here, and not to be installed) the builders use the
``...ImageProcessorPil`` classes. Five families (qwen2_vl, qwen2_5_vl, qwen3_vl, smolvlm,
llava_onevision) have a processor class whose ``__init__`` takes a ``video_processor``; with
transformers 5.23 and no torchvision such a processor can neither be built nor loaded by stock
transformers, even for images only:

* ``ProcessorMixin.__init__`` checks every sub-processor's class, ``None`` included, and for
  ``video_processor`` looks up ``transformers.VideoProcessorMixin``, which is only exported with
  torchvision; the fallback lookup then reads
  ``transformers.VIDEO_PROCESSOR_MAPPING._extra_content`` on a torchvision dummy ->
  ``AttributeError``. (``video_processor=None`` would fail anyway:
  ``isinstance(None, ...)`` is false and ``save_pretrained`` reads ``None._auto_class``.)
* ``ProcessorMixin.from_pretrained`` always loads ``video_processor`` through
  ``AutoVideoProcessor``: with no saved video processor config that is ``OSError: Can't load
  video processor``; with one, the built-in mapping's ``"torchvision"`` entries are all ``None``
  without torchvision, so the saved class name resolves to transformers' torchvision dummy ->
  ``ImportError: Qwen3VLVideoProcessor requires the Torchvision library``.

SmolVLM has a third obstacle: ``SmolVLMProcessor.__init__`` raises ``ImportError`` when the
``num2words`` package (not installed) is missing, although it only uses it for video prompts.

For those five families the builders call :func:`install_shims` (process-wide,
idempotent, each part a no-op when the real dependency is installed): it exports the real
``video_processing_utils.VideoProcessorMixin`` as ``transformers.VideoProcessorMixin`` and registers
the video processor classes that do import without torchvision (Qwen3-VL's, SmolVLM's,
LLaVA-OneVision's) with ``AutoVideoProcessor``; and it gives ``processing_smolvlm`` a
``num2words`` stand-in that raises if called. A real video processor object is then saved with
the folder (Qwen2-VL and Qwen2.5-VL get Qwen3-VL's, since ``video_processing_qwen2_vl`` imports
torchvision at module level); it is never used for images. ``AutoProcessor.from_pretrained`` works
on these folders only in a process where the shims are installed: a fresh process (a subprocess,
the CLI) must call :func:`install_shims` first, or it fails as above. ``STOCK_FAMILIES`` lists
the families that load with no shim.

    from tiny_vlms import FAMILIES, build
    path = build("qwen2_vl", tmp_path / "qwen2_vl")
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tiny_vlm import build_tiny_llava

CORPUS = [
    "The final score is $85$. A red circle and a blue square on a grey background.",
    "Rate the generated caption from 0 to 100 against the image and the references.",
    "Frame 1 Frame 2 Frame 3 two green triangles move from the left to the right.",
    "user assistant system model Score: 7 out of 10. Yes No",
] * 20

HIDDEN = 32  # every hidden size here
FFN = 64


def _chat_template(image: str, turn_start: str = "", turn_end: str = "\n",
                   generation_role: str = "assistant", sep: str = ": ") -> str:
    """A chat template rendering string contents and lists of image / text parts.

    ``image`` is what an ``{"type": "image"}`` part renders to (the family's placeholder, which its
    processor expands to the right number of image tokens).
    """
    return (
        "{% for message in messages %}"
        + turn_start + "{{ message['role'] }}" + sep
        + "{% if message['content'] is string %}{{ message['content'] }}"
        "{% else %}{% for part in message['content'] %}"
        "{% if part['type'] == 'image' %}" + image + "{% else %}{{ part['text'] }}{% endif %}"
        "{% endfor %}{% endif %}" + turn_end + "{% endfor %}"
        "{% if add_generation_prompt %}" + turn_start + generation_role + sep + "{% endif %}"
    )


def _tokenizer(special: list[str], *, bos: str | None, eos: str, pad: str, unk: str = "<unk>",
               extra: dict[str, str] | None = None, vocab_size: int = 400):
    """A byte-level BPE tokenizer trained on CORPUS, digits one per token, ``special`` added.

    ``special`` lists every special token (bos/eos/pad/unk included); ``extra`` names the
    family's multimodal tokens (``image_token``...), which become tokenizer attributes.
    """
    import tokenizers
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token=unk))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tok.decoder = tokenizers.decoders.ByteLevel()
    specials = list(dict.fromkeys([unk, *([bos] if bos else []), eos, pad, *special]))
    trainer = trainers.BpeTrainer(vocab_size=vocab_size + len(specials), special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    kwargs = {"bos_token": bos} if bos else {}
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token=unk, eos_token=eos,
                                   pad_token=pad, extra_special_tokens=extra or {}, **kwargs)


def _ids(tokenizer, *tokens: str) -> list[int]:
    ids = tokenizer.convert_tokens_to_ids(list(tokens))
    assert tokenizer.unk_token_id not in ids or "<unk>" in tokens, (tokens, ids)
    return ids


def _live_weights(model) -> list[str]:
    """Give random values to weight matrices a family initialises to zero; their names.

    Gemma 3 starts its image projection (``mm_input_projection_weight``) at zero: every image
    then reaches the language model as the same zero vectors, and a test could not tell an
    image the model saw from one it never got.
    """
    import torch

    named = []
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() >= 2 and not param.any():
                param.normal_(0.0, param.shape[-1] ** -0.5)
                named.append(name)
    return named


def _save(path: Path, model, processor) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    _live_weights(model)
    model.eval()
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def _seed() -> None:
    import torch

    torch.manual_seed(0)


# --- video processors without torchvision --------------------------------------------------------

# video processor classes importable without torchvision: (module, class)
_VIDEO_PROCESSORS = {
    "Qwen3VLVideoProcessor": "transformers.models.qwen3_vl.video_processing_qwen3_vl",
    "SmolVLMVideoProcessor": "transformers.models.smolvlm.video_processing_smolvlm",
    "LlavaOnevisionVideoProcessor":
        "transformers.models.llava_onevision.video_processing_llava_onevision",
}
_SHIM_INSTALLED = False


def install_shims() -> None:
    """Let the five video-capable processors be built and loaded here, for images.

    Process-wide and idempotent. Without torchvision: exports ``VideoProcessorMixin`` and
    registers the importable video processor classes with ``AutoVideoProcessor``. Without the
    ``num2words`` package: gives ``processing_smolvlm`` a stand-in that raises if called (it is
    only used for video prompts). Each part is a no-op when the real dependency is installed.
    See the module docstring for why stock transformers 5.23 cannot build or load these here.
    """
    global _SHIM_INSTALLED
    import importlib

    if _SHIM_INSTALLED:
        return
    from transformers.utils import is_torchvision_available

    if not is_torchvision_available():
        from transformers import processing_utils
        from transformers.configuration_utils import PreTrainedConfig
        from transformers.models.auto.video_processing_auto import AutoVideoProcessor
        from transformers.video_processing_utils import VideoProcessorMixin

        # ProcessorMixin.check_argument_for_proper_class("video_processor", ...) resolves this
        # name on processing_utils.transformers_module (the top-level module, re-imported by
        # processing_utils: not necessarily the object an earlier `import transformers` gave).
        module = processing_utils.transformers_module
        if not isinstance(getattr(module, "VideoProcessorMixin", None), type):
            module.VideoProcessorMixin = VideoProcessorMixin
        # AutoVideoProcessor._load_backend_class finds a class by name among the registered
        # ones before the built-in mapping (whose entries are all None without torchvision).
        # One placeholder config class per video processor class, used only as registry key.
        for name, module in _VIDEO_PROCESSORS.items():
            cls = getattr(importlib.import_module(module), name)
            key = type(f"_TinyVLMShim{name}Config", (PreTrainedConfig,),
                       {"model_type": f"tiny_vlm_shim_{name.lower()}"})
            AutoVideoProcessor.register(key, video_processor_classes={"torchvision": cls},
                                        exist_ok=True)
    # SmolVLMProcessor.__init__ raises ImportError without the `num2words` package, which it
    # only uses to spell out frame counts in video prompts.
    smolvlm = importlib.import_module("transformers.models.smolvlm.processing_smolvlm")
    if smolvlm.num2words is None:
        def num2words(number, *args, **kwargs):
            raise ImportError("num2words is not installed (tiny_vlms stand-in: images only)")

        smolvlm.num2words = num2words
    _SHIM_INSTALLED = True


def _video_processor(name: str, **kwargs):
    """An instance of a video processor class listed in _VIDEO_PROCESSORS (shim installed)."""
    import importlib

    install_shims()
    return getattr(importlib.import_module(_VIDEO_PROCESSORS[name]), name)(**kwargs)


# --- Qwen2-VL / Qwen2.5-VL / Qwen3-VL ------------------------------------------------------------

QWEN_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
               "<|image_pad|>", "<|video_pad|>"]
QWEN_TEMPLATE = _chat_template("<|vision_start|><|image_pad|><|vision_end|>",
                               turn_start="<|im_start|>", turn_end="<|im_end|>\n", sep="\n")


def _qwen_parts(patch_size: int):
    """Tokenizer, image processor and token ids shared by the Qwen VL families."""
    from transformers import Qwen2VLImageProcessorPil

    tokenizer = _tokenizer(QWEN_TOKENS, bos=None, eos="<|im_end|>", pad="<|endoftext|>",
                           extra={"image_token": "<|image_pad|>", "video_token": "<|video_pad|>",
                                  "vision_bos_token": "<|vision_start|>",
                                  "vision_eos_token": "<|vision_end|>"})
    factor = patch_size * 2  # patch_size * merge_size
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=patch_size, merge_size=2, temporal_patch_size=2,
        size={"shortest_edge": factor * factor, "longest_edge": 16 * factor * factor},
        image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
    # never used for images; Qwen2VLVideoProcessor's module imports torchvision, Qwen3-VL's doesn't
    video_processor = _video_processor(
        "Qwen3VLVideoProcessor", patch_size=patch_size, merge_size=2, temporal_patch_size=2,
        size={"shortest_edge": factor * factor, "longest_edge": 16 * factor * factor})
    ids = dict(zip(["image_token_id", "video_token_id", "vision_start_token_id",
                    "vision_end_token_id"],
                   _ids(tokenizer, "<|image_pad|>", "<|video_pad|>", "<|vision_start|>",
                        "<|vision_end|>"), strict=True))
    return tokenizer, image_processor, video_processor, ids


def _qwen_text(tokenizer, **extra) -> dict:
    return dict(vocab_size=len(tokenizer), hidden_size=HIDDEN, intermediate_size=FFN,
                num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                max_position_embeddings=2048, pad_token_id=tokenizer.pad_token_id,
                bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
                # head_dim 16 -> 8 rotary frequencies, split over (temporal, height, width)
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                 "mrope_section": [2, 3, 3]},
                **extra)


def build_tiny_qwen2_vl(path: Path) -> Path:
    """Qwen2VLForConditionalGeneration + Qwen2VLProcessor (PIL image processor; shims)."""
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLProcessor

    _seed()
    tokenizer, image_processor, video_processor, ids = _qwen_parts(patch_size=8)
    config = Qwen2VLConfig(
        text_config=_qwen_text(tokenizer),
        vision_config=dict(depth=1, embed_dim=HIDDEN, hidden_size=HIDDEN, mlp_ratio=2,
                           num_heads=2, patch_size=8, spatial_merge_size=2,
                           temporal_patch_size=2),
        **ids)
    model = Qwen2VLForConditionalGeneration(config)
    processor = Qwen2VLProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                 video_processor=video_processor, chat_template=QWEN_TEMPLATE)
    return _save(path, model, processor)


def build_tiny_qwen2_5_vl(path: Path) -> Path:
    """Qwen2_5_VLForConditionalGeneration + Qwen2_5_VLProcessor (PIL image processor; shims)."""
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
    )

    _seed()
    tokenizer, image_processor, video_processor, ids = _qwen_parts(patch_size=8)
    config = Qwen2_5_VLConfig(
        text_config=_qwen_text(tokenizer),
        vision_config=dict(depth=2, hidden_size=HIDDEN, intermediate_size=FFN, num_heads=2,
                           out_hidden_size=HIDDEN, patch_size=8, spatial_merge_size=2,
                           temporal_patch_size=2, window_size=32, fullatt_block_indexes=[1]),
        **ids)
    model = Qwen2_5_VLForConditionalGeneration(config)
    processor = Qwen2_5_VLProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                    video_processor=video_processor, chat_template=QWEN_TEMPLATE)
    return _save(path, model, processor)


def build_tiny_qwen3_vl(path: Path) -> Path:
    """Qwen3VLForConditionalGeneration + Qwen3VLProcessor (PIL image processor; shims)."""
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration, Qwen3VLProcessor

    _seed()
    tokenizer, image_processor, video_processor, ids = _qwen_parts(patch_size=8)
    text = _qwen_text(tokenizer, head_dim=16)
    text["rope_parameters"].update(mrope_interleaved=True)
    text.pop("bos_token_id"), text.pop("eos_token_id")
    config = Qwen3VLConfig(
        text_config=text,
        vision_config=dict(depth=2, hidden_size=HIDDEN, intermediate_size=FFN, num_heads=2,
                           out_hidden_size=HIDDEN, patch_size=8, spatial_merge_size=2,
                           temporal_patch_size=2, num_position_embeddings=64,
                           deepstack_visual_indexes=[0]),
        **ids)
    model = Qwen3VLForConditionalGeneration(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    processor = Qwen3VLProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                 video_processor=video_processor, chat_template=QWEN_TEMPLATE)
    return _save(path, model, processor)


# --- Gemma 3 -------------------------------------------------------------------------------------

def build_tiny_gemma3(path: Path) -> Path:
    """Gemma3ForConditionalGeneration (SigLIP vision) + Gemma3Processor (PIL image processor)."""
    from transformers import (
        Gemma3Config,
        Gemma3ForConditionalGeneration,
        Gemma3ImageProcessorPil,
        Gemma3Processor,
    )

    _seed()
    tokens = ["<start_of_turn>", "<end_of_turn>", "<start_of_image>", "<end_of_image>",
              "<image_soft_token>"]
    tokenizer = _tokenizer(tokens, bos="<bos>", eos="<eos>", pad="<pad>",
                           extra={"boi_token": "<start_of_image>", "eoi_token": "<end_of_image>",
                                  "image_token": "<image_soft_token>"})
    boi, eoi, image = _ids(tokenizer, "<start_of_image>", "<end_of_image>", "<image_soft_token>")
    image_size, patch_size, tokens_per_image = 32, 8, 4  # 4x4 patches pooled to 2x2 tokens
    config = Gemma3Config(
        text_config=dict(vocab_size=len(tokenizer), hidden_size=HIDDEN, intermediate_size=FFN,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=16, query_pre_attn_scalar=16, sliding_window=16,
                         layer_types=["sliding_attention", "full_attention"],
                         max_position_embeddings=2048, pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id),
        vision_config=dict(model_type="siglip_vision_model", hidden_size=HIDDEN,
                           intermediate_size=FFN, num_hidden_layers=1, num_attention_heads=2,
                           image_size=image_size, patch_size=patch_size,
                           vision_use_head=False),
        mm_tokens_per_image=tokens_per_image, boi_token_index=boi, eoi_token_index=eoi,
        image_token_index=image)
    model = Gemma3ForConditionalGeneration(config)
    image_processor = Gemma3ImageProcessorPil(size={"height": image_size, "width": image_size},
                                              image_mean=[0.5, 0.5, 0.5],
                                              image_std=[0.5, 0.5, 0.5])
    processor = Gemma3Processor(
        image_processor=image_processor, tokenizer=tokenizer, image_seq_length=tokens_per_image,
        chat_template=_chat_template("<start_of_image>", turn_start="<start_of_turn>",
                                     turn_end="<end_of_turn>\n", generation_role="model",
                                     sep="\n"))
    return _save(path, model, processor)


# --- Idefics3 / SmolVLM --------------------------------------------------------------------------

IDEFICS_TOKENS = (["<fake_token_around_image>", "<image>", "<global-img>", "<end_of_utterance>"]
                  + [f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)])
IDEFICS_TEMPLATE = _chat_template("<image>", turn_end="<end_of_utterance>\n", sep=": ",
                                  generation_role="Assistant")


def _idefics_parts(image_processor_cls, image_size: int, patch_size: int, scale_factor: int,
                   extra: dict | None = None):
    tokenizer = _tokenizer(IDEFICS_TOKENS, bos="<|im_start|>", eos="<end_of_utterance>",
                           pad="<|endoftext|>",
                           extra={"image_token": "<image>", **(extra or {})})
    image_processor = image_processor_cls(
        do_image_splitting=True, size={"longest_edge": 2 * image_size},
        max_image_size={"longest_edge": image_size},
        image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
    image_seq_len = (image_size // patch_size) ** 2 // scale_factor ** 2
    text = dict(vocab_size=len(tokenizer), hidden_size=HIDDEN, intermediate_size=FFN,
                num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                max_position_embeddings=2048, pad_token_id=tokenizer.pad_token_id,
                bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    vision = dict(hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=1,
                  num_attention_heads=2, image_size=image_size, patch_size=patch_size)
    return tokenizer, image_processor, image_seq_len, text, vision


def build_tiny_idefics3(path: Path) -> Path:
    """Idefics3ForConditionalGeneration + Idefics3Processor (PIL image processor, splitting on)."""
    from transformers import (
        Idefics3Config,
        Idefics3ForConditionalGeneration,
        Idefics3ImageProcessorPil,
        Idefics3Processor,
    )

    _seed()
    tokenizer, image_processor, image_seq_len, text, vision = _idefics_parts(
        Idefics3ImageProcessorPil, image_size=32, patch_size=8, scale_factor=2)
    config = Idefics3Config(text_config={"model_type": "llama", **text}, vision_config=vision,
                            scale_factor=2, image_token_id=_ids(tokenizer, "<image>")[0],
                            pad_token_id=tokenizer.pad_token_id)
    model = Idefics3ForConditionalGeneration(config)
    processor = Idefics3Processor(image_processor=image_processor, tokenizer=tokenizer,
                                  image_seq_len=image_seq_len, chat_template=IDEFICS_TEMPLATE)
    return _save(path, model, processor)


def build_tiny_smolvlm(path: Path) -> Path:
    """SmolVLMForConditionalGeneration + SmolVLMProcessor (PIL image processor; shims)."""
    from transformers import (
        SmolVLMConfig,
        SmolVLMForConditionalGeneration,
        SmolVLMImageProcessorPil,
        SmolVLMProcessor,
    )

    _seed()
    tokenizer, image_processor, image_seq_len, text, vision = _idefics_parts(
        SmolVLMImageProcessorPil, image_size=32, patch_size=8, scale_factor=2)
    config = SmolVLMConfig(text_config={"model_type": "llama", **text}, vision_config=vision,
                           scale_factor=2, image_token_id=_ids(tokenizer, "<image>")[0],
                           pad_token_id=tokenizer.pad_token_id)
    model = SmolVLMForConditionalGeneration(config)
    processor = SmolVLMProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                 video_processor=_video_processor(
                                     "SmolVLMVideoProcessor", size={"longest_edge": 64},
                                     max_image_size={"longest_edge": 32}),
                                 image_seq_len=image_seq_len,
                                 chat_template=IDEFICS_TEMPLATE)
    return _save(path, model, processor)


# --- LLaVA-OneVision -----------------------------------------------------------------------------

def build_tiny_llava_onevision(path: Path) -> Path:
    """LlavaOnevisionForConditionalGeneration (SigLIP + Qwen2) + its processor (shims)."""
    from transformers import (
        LlavaOnevisionConfig,
        LlavaOnevisionForConditionalGeneration,
        LlavaOnevisionImageProcessorPil,
        LlavaOnevisionProcessor,
    )

    _seed()
    tokenizer = _tokenizer(["<|im_start|>", "<|im_end|>", "<image>", "<video>"], bos=None,
                           eos="<|im_end|>", pad="<|endoftext|>",
                           extra={"image_token": "<image>", "video_token": "<video>"})
    image, video = _ids(tokenizer, "<image>", "<video>")
    image_size, patch_size = 32, 8
    pinpoints = [[32, 32], [32, 64], [64, 32], [64, 64]]
    config = LlavaOnevisionConfig(
        text_config=dict(model_type="qwen2", vocab_size=len(tokenizer), hidden_size=HIDDEN,
                         intermediate_size=FFN, num_hidden_layers=2, num_attention_heads=2,
                         num_key_value_heads=1, max_position_embeddings=2048,
                         pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=tokenizer.eos_token_id,
                         eos_token_id=tokenizer.eos_token_id),
        vision_config=dict(model_type="siglip_vision_model", hidden_size=HIDDEN,
                           intermediate_size=FFN, num_hidden_layers=1, num_attention_heads=2,
                           image_size=image_size, patch_size=patch_size, vision_use_head=False),
        image_token_index=image, video_token_index=video,
        vision_feature_select_strategy="full", vision_feature_layer=-1,
        image_grid_pinpoints=pinpoints, vision_aspect_ratio="anyres_max_9")
    model = LlavaOnevisionForConditionalGeneration(config)
    image_processor = LlavaOnevisionImageProcessorPil(
        size={"height": image_size, "width": image_size}, image_grid_pinpoints=pinpoints,
        image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
    processor = LlavaOnevisionProcessor(
        image_processor=image_processor, tokenizer=tokenizer,
        video_processor=_video_processor("LlavaOnevisionVideoProcessor",
                                         size={"height": image_size, "width": image_size}),
        num_image_tokens=(image_size // patch_size) ** 2,
        vision_feature_select_strategy="full", vision_aspect_ratio="anyres_max_9",
        chat_template=_chat_template("<image>", turn_start="<|im_start|>",
                                     turn_end="<|im_end|>\n", sep="\n"))
    return _save(path, model, processor)


def _has_qwen3_vl() -> bool:
    """Whether this transformers has Qwen3-VL (5.23 does), without importing transformers."""
    import importlib.util

    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        return False
    return any((Path(p) / "models" / "qwen3_vl" / "modeling_qwen3_vl.py").is_file()
               for p in spec.submodule_search_locations)


FAMILIES: dict[str, Callable[[Path], Path]] = {
    "llava": build_tiny_llava,
    "llava_onevision": build_tiny_llava_onevision,
    "qwen2_vl": build_tiny_qwen2_vl,
    "qwen2_5_vl": build_tiny_qwen2_5_vl,
    **({"qwen3_vl": build_tiny_qwen3_vl} if _has_qwen3_vl() else {}),
    "gemma3": build_tiny_gemma3,
    "idefics3": build_tiny_idefics3,
    "smolvlm": build_tiny_smolvlm,
}

# families whose folders load with stock transformers, no shim (see the module docstring)
STOCK_FAMILIES = frozenset({"llava", "gemma3", "idefics3"})


def build(family: str, path: Path) -> Path:
    """Build the tiny model of ``family`` (a key of FAMILIES) into ``path``; return ``path``."""
    try:
        builder = FAMILIES[family]
    except KeyError:
        raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILIES)}") from None
    return builder(Path(path))
