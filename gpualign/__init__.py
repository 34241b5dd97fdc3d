"""gpualign: exact pairwise DNA alignment and edit distance, on NVIDIA GPUs or the CPU."""

__version__ = "0.1.0"

__all__ = ["align_pairs", "AlignConfig", "Penalties", "Scoring", "AlignBatch", "__version__"]

# imported at first use: `python -m gpualign` installs its signal handlers before numpy and the rest load
_LAZY = {"align_pairs": "api", "AlignConfig": "config", "Penalties": "config", "Scoring": "config", "AlignBatch": "records"}


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
