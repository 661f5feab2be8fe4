"""Token and cost estimates, before any call is made.

Text tokens are estimated offline (no tokenizer download): the larger of ``chars / 4`` and the
count of words and punctuation marks, which tracks o200k/cl100k within about 15 % on English
prompts. Image tokens follow OpenAI's published rule for GPT-4o-class models: ``low`` detail is
85 tokens; ``high`` scales the image to fit 2048x2048, then (only if larger) so its shorter side
is 768, and costs 170 per 512x512 tile plus 85. ``auto`` is treated as ``high`` (the worst case).
A G-VEval 1536x512 frame tile is 3 tiles: 595 tokens.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from PIL import Image

from capjudge.protocol import ImagePart, JudgeRequest

log = logging.getLogger(__name__)

_WORDS = re.compile(r"\w+|[^\w\s]")
MESSAGE_OVERHEAD = 4  # role and separators per chat message


def text_tokens(text: str) -> int:
    """Offline estimate of a text's token count."""
    return max(math.ceil(len(text) / 4), len(_WORDS.findall(text)))


def image_tokens(width: int, height: int, detail: str = "auto") -> int:
    """GPT-4o-style image token count for an image of the given size."""
    if detail == "low":
        return 85
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    return 170 * math.ceil(w / 512) * math.ceil(h / 512) + 85


_SIZE_CACHE: dict[str, tuple[int, int]] = {}

# The size assumed for a picture that cannot be read: 2048x768 is the most expensive shape
# after scaling (8 tiles, 1445 tokens at high detail), so an estimate never comes out low.
WORST_CASE_SIZE = (2048, 768)


def _image_size(part: ImagePart) -> tuple[int, int]:
    """The picture's size (cached by content hash); the worst case when it cannot be read.

    An estimate must never end a stage: a picture that is missing or no longer an image
    (replaced after ingest) is the judge-time media check's and the backend's to report, as
    that item's error.
    """
    if part.sha256 not in _SIZE_CACHE:
        try:
            with Image.open(part.path) as img:
                size = img.size
        except (OSError, ValueError, Image.DecompressionBombError) as exc:
            log.warning("cost estimate: cannot read %s (%s); assuming the worst-case %dx%d",
                        part.path, exc, *WORST_CASE_SIZE)
            return WORST_CASE_SIZE  # not cached: the file may be fixed within the run
        _SIZE_CACHE[part.sha256] = size
    return _SIZE_CACHE[part.sha256]


def request_tokens(request: JudgeRequest) -> tuple[int, int]:
    """(estimated prompt tokens, maximum completion tokens) of a request."""
    prompt = 0
    for message in request.messages:
        prompt += MESSAGE_OVERHEAD
        for part in message.parts:
            if isinstance(part, ImagePart):
                prompt += image_tokens(*_image_size(part), part.detail)
            else:
                prompt += text_tokens(part)
    return prompt, request.decoding.max_tokens


# The OpenAI Batch API's discount on list prices (50 %); a price entry's ``batch_discount``
# overrides it for a provider that discounts otherwise.
DEFAULT_BATCH_DISCOUNT = 0.5


@dataclass(frozen=True)
class Price:
    """USD per million tokens.

    Attributes:
        input_per_1m: list price of a million prompt tokens.
        output_per_1m: list price of a million completion tokens.
        batch_discount: the fraction taken off both through the Batch API (``submit: batch``).
    """

    input_per_1m: float
    output_per_1m: float
    batch_discount: float = DEFAULT_BATCH_DISCOUNT

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """Dollars for the given prompt and completion tokens at list price."""
        return (prompt_tokens * self.input_per_1m + completion_tokens * self.output_per_1m) / 1e6

    def batch(self) -> Price:
        """The price through the Batch API (the discount applied; no further discount)."""
        keep = 1.0 - self.batch_discount
        return Price(self.input_per_1m * keep, self.output_per_1m * keep, 0.0)


def price_for(model: str, prices: Mapping[str, Mapping[str, float]]) -> Price | None:
    """The price entry for a model (exact name first, then the longest matching prefix)."""
    if model in prices:
        entry = prices[model]
    else:
        matches = [k for k in prices if model.startswith(k)]
        if not matches:
            return None
        entry = prices[max(matches, key=len)]
    discount = float(entry.get("batch_discount", DEFAULT_BATCH_DISCOUNT))
    if not 0.0 <= discount <= 1.0:
        raise ValueError(f"prices: batch_discount of {model!r} must be within 0..1, got "
                         f"{discount}")
    return Price(float(entry["input_per_1m"]), float(entry["output_per_1m"]), discount)


@dataclass
class CostEstimate:
    """Predicted tokens and dollars for a set of requests."""

    requests: int
    prompt_tokens: int
    image_tokens: int
    max_completion_tokens: int
    expected_completion_tokens: int
    usd_expected: float | None
    usd_max: float | None


def estimate(requests: Sequence[JudgeRequest], price: Price | None,
             expected_completion: int = 250) -> CostEstimate:
    """Estimate a run: prompt tokens (text + images), completion tokens, dollars.

    ``expected_completion`` is the typical length of a judge's reasoning (capped by each
    request's max_tokens); the worst case assumes every answer runs to max_tokens.
    """
    prompt = images = max_out = expected_out = 0
    for request in requests:
        p, m = request_tokens(request)
        prompt += p
        max_out += m
        expected_out += min(m, expected_completion)
        images += sum(image_tokens(*_image_size(i), i.detail)
                      for msg in request.messages for i in msg.images)
    return CostEstimate(
        requests=len(requests), prompt_tokens=prompt, image_tokens=images,
        max_completion_tokens=max_out, expected_completion_tokens=expected_out,
        usd_expected=price.cost(prompt, expected_out) if price else None,
        usd_max=price.cost(prompt, max_out) if price else None,
    )
