"""Peak host memory of a run, for its summary: this process's resident set at its highest, and the highest
of its worker processes that have ended (getrusage; Linux counts KiB)."""

from __future__ import annotations

import resource
import sys


def peak_rows() -> list[tuple[str, str]]:
    """[("peak_rss_mib", this process), ("peak_worker_rss_mib", the largest ended worker)] (the second only
    when a worker has ended), in MiB."""
    unit = 1 if sys.platform == "darwin" else 1024  # (macOS counts bytes)
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * unit
    rows = [("peak_rss_mib", f"{own / 2**20:.0f}")]
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * unit
    if workers:
        rows.append(("peak_worker_rss_mib", f"{workers / 2**20:.0f}"))
    return rows
