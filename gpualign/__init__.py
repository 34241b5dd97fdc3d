"""gpualign: exact pairwise DNA alignment and edit distance, on NVIDIA GPUs or the CPU."""

__version__ = "0.1.0"

from .api import align_pairs  # noqa: E402
from .config import AlignConfig, Penalties, Scoring  # noqa: E402
from .records import AlignBatch  # noqa: E402

__all__ = ["align_pairs", "AlignConfig", "Penalties", "Scoring", "AlignBatch", "__version__"]
