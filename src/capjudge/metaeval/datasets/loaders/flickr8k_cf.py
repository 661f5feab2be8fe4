"""``flickr8k-cf``: Flickr8k-CrowdFlower: share of yes votes per caption (0-1).

Its loader, what the registry knows about it and its scoring protocols.
"""

from __future__ import annotations

from pathlib import Path

from capjudge.metaeval.datasets import DatasetSpec, MetaDataset, Protocol
from capjudge.metaeval.datasets.reading import load_clipscore_json


def load_flickr8k_cf(path: Path) -> MetaDataset:
    """Flickr8k-CF in CLIPScore's ``crowdflower_flickr8k.json`` (rating: share of yes, 0-1)."""
    return load_clipscore_json(path, "flickr8k-cf", (0.0, 1.0))


SPEC = DatasetSpec(
    name="flickr8k-cf",
    loader=load_flickr8k_cf,
    default_protocol="flickr8k-cf-rows",
    file="crowdflower_flickr8k.json (CLIPScore)",
    description="Flickr8k-CrowdFlower: share of yes votes per caption (0-1)",
    protocols=(
        Protocol("flickr8k-cf-rows", "flickr8k-cf", "ratings", headline="kendall_tau_b",
                 description="every CrowdFlower judgment a row, Kendall tau-b (CLIPScore)"),
    ),
)
