"""A tiny randomly initialised LLaVA (CLIP vision tower + Llama text model), built offline.

Real architecture, real processor (CLIP image processor + a BPE tokenizer trained here on a few
sentences, digits split one per token, a chat template): the VLM code path runs for real, on
weights that mean nothing. Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: "
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>{% else %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def build_tiny_llava(path: Path) -> Path:
    """Save a tiny LLaVA model and processor to ``path`` and return it."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )

    torch.manual_seed(0)
    corpus = [
        "The final score is $85$. A red circle and a blue square on a grey background.",
        "Rate the generated caption from 0 to 100 against the image and the references.",
        "Frame 1 Frame 2 Frame 3 two green triangles move from the left to the right.",
    ] * 20
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(
            add_prefix_space=False)])
    tok.decoder = __import__("tokenizers").decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=[
        "<unk>", "<s>", "</s>", "<pad>", "<image>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>",
                                        bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                        extra_special_tokens={"image_token": "<image>"})
    image_token_id = tokenizer.convert_tokens_to_ids("<image>")
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                              num_attention_heads=2, image_size=32, patch_size=8)
    text = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                       num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                       max_position_embeddings=2048, pad_token_id=tokenizer.pad_token_id,
                       bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=image_token_id,
                         vision_feature_select_strategy="default", vision_feature_layer=-1)
    model = LlavaForConditionalGeneration(config).eval()
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessor(size={"shortest_edge": 32},
                                           crop_size={"height": 32, "width": 32}),
        tokenizer=tokenizer, patch_size=8, vision_feature_select_strategy="default",
        num_additional_image_tokens=1, chat_template=CHAT_TEMPLATE)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path
