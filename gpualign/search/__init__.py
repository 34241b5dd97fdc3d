"""Approximate search: every occurrence of many patterns in a text with at most k edits (Sellers'
semi-global edit distance). patterns -> text chunks -> engine (gpu.py / cpu.py) -> hits.py -> output.py,
driven by run.py."""
