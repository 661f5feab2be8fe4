"""``flickr8k-expert``: Flickr8k-Expert: 5,664 captions x 3 expert ratings (1-4).

Its loader, what the registry knows about it and its scoring protocols.
"""

from __future__ import annotations

from pathlib import Path

from capjudge.metaeval.datasets import DatasetSpec, MetaDataset, Protocol
from capjudge.metaeval.datasets.reading import load_clipscore_json


def load_flickr8k_expert(path: Path) -> MetaDataset:
    """Flickr8k-Expert in CLIPScore's ``flickr8k.json`` (ratings 1-4)."""
    return load_clipscore_json(path, "flickr8k-expert", (1.0, 4.0))


SPEC = DatasetSpec(
    name="flickr8k-expert",
    loader=load_flickr8k_expert,
    default_protocol="flickr8k-expert-rows",
    file="flickr8k.json (CLIPScore)",
    description="Flickr8k-Expert: 5,664 captions x 3 expert ratings (1-4)",
    protocols=(
        Protocol("flickr8k-expert-rows", "flickr8k-expert", "ratings", headline="kendall_tau_c",
                 description="every expert rating is a row (16,992 rows), Kendall tau-c: the "
                             "CLIPScore / PAC-S protocol"),
        Protocol("flickr8k-expert-mean", "flickr8k-expert", "mean", headline="kendall_tau_b",
                 description="the 3 expert ratings averaged per caption (5,664 rows): G-VEval's "
                             "loader; numbers differ from the rows protocol"),
    ),
)
