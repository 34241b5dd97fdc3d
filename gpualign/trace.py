"""Named spans and events for profiling: the pipeline, realign and the engines report their steps here,
and a recorder installed by a profiling script (scripts/profile.py) receives them.

No recorder is installed by default: a traced function then costs one extra call and a global lookup.
A recorder is any object with these methods (all optional but span):

    span(name) -> context manager       around one call of a traced function
    item(name, event, i, item)          a traced generator: event "next" (asked for item i), "item"
                                        (got it) or "end" (exhausted after i items)
    kernel(name, fn) -> callable        a CUDA kernel function as looked up (gpu/kernels.Module)

Span names are stable strings ("align", "upload", "affine level queued", ...): grep for trace.traced to
see them all.
"""

from __future__ import annotations

import functools

_recorder = None


def install(recorder):
    """Make recorder receive every span from now on (None: none); returns the one it replaces."""
    global _recorder
    previous, _recorder = _recorder, recorder
    return previous


def current():
    """The installed recorder, or None."""
    return _recorder


def traced(name: str):
    """Decorator: each call of the function is a span called name, when a recorder is installed."""
    def wrap(fn):
        @functools.wraps(fn)
        def call(*a, **k):
            r = _recorder
            if r is None:
                return fn(*a, **k)
            with r.span(name):
                return fn(*a, **k)

        return call

    return wrap


def traced_items(name: str):
    """Decorator for a generator function: each item it yields is reported (item(name, ...)), when a
    recorder is installed as it is called."""
    def wrap(fn):
        @functools.wraps(fn)
        def call(*a, **k):
            r = _recorder
            if r is None or not hasattr(r, "item"):
                return fn(*a, **k)
            return _items(r, name, fn(*a, **k))

        return call

    return wrap


def _items(r, name: str, it):
    it = iter(it)
    i = 0
    while True:
        r.item(name, "next", i, None)
        try:
            item = next(it)
        except StopIteration:
            r.item(name, "end", i, None)
            return
        r.item(name, "item", i, item)
        i += 1
        yield item


def kernel(name: str, fn):
    """fn, or what the recorder makes of it (e.g. launches bracketed by CUDA events)."""
    r = _recorder
    if r is None or not hasattr(r, "kernel"):
        return fn
    return r.kernel(name, fn)
