"""The benchmarks `caplens analyze reproduce` knows and their Hugging Face hub copies, kept free
of heavy imports so that the command line can list them without loading pandas."""
from __future__ import annotations

LONGCAP_ARENA_SPLITS = {"testa": "dci_val", "testb": "dci_test"}
LONGCAP_ARENA_ASPECTS = {"desc": "descriptiveness", "rel": "relevance", "flu": "fluency"}
LONGCAP_ARENA_BENCHMARKS = tuple(f"longcap-arena-{split}-{aspect}" for split in LONGCAP_ARENA_SPLITS
                                 for aspect in LONGCAP_ARENA_ASPECTS)
PUBLISHED_BENCHMARKS = ("flickr8k-expert", "flickr8k-cf", "composite", "pascal-50s", "foil", "polaris", "nebula",
                        *LONGCAP_ARENA_BENCHMARKS)
WORLD_BENCHMARKS = ("world-ratings", "world-pascal", "world-foil")
# benchmark -> (hub dataset repository, file patterns to download; None: the whole repository)
HUB_REPOS = {
    "polaris": ("yuwd/Polaris", ("data/test-*", "README.md")),
    "nebula": ("Ka2ukiMatsuda/Nebula", ("data/test-*", "README.md")),
    **{name: ("Ka2ukiMatsuda/LongCap-Arena", None) for name in LONGCAP_ARENA_BENCHMARKS},
}
