"""A tiny randomly initialised Llama with a SentencePiece-style tokenizer, built offline.

The tokenizer follows the Llama 2 / LLaVA convention the digit tree must handle: a word-start
marker "▁" is prepended and spaces become "▁", and digits are split one per token, so "8" alone
encodes as "▁", "8", "$85" as "▁$", "8", "5" and "Rating: 4" as "▁Rating:", "▁", "4".
Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path


def build_tiny_llama(path: Path) -> Path:
    """Save a tiny Llama causal LM and its SentencePiece-style tokenizer to ``path``."""
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, LlamaTokenizerFast

    torch.manual_seed(0)
    corpus = [
        "The final score is $85$. A red circle and a blue square on a grey background.",
        "Rating: 4 out of 5. The caption is clear.",
        "Rate the generated caption from 0 to 100 against the references.\n",
        "85 90 100 7 3 12 42 99",
    ] * 20
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    # Llama's own fast tokenizer: prepend "▁", spaces as "▁"; digits one per token.
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                           normalizers.Replace(" ", "▁")])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split("▁", behavior="merged_with_next"),
        pre_tokenizers.Digits(individual_digits=True)])
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=list("0123456789▁$\n.:"))
    tok.train_from_iterator(corpus, trainer)
    tokenizer = LlamaTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>", add_bos_token=False, add_eos_token=False)
    tokenizer.pad_token = tokenizer.eos_token
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=512, pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id)
    model = LlamaForCausalLM(config).eval()
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
