"""Bytes handed from one process to another in shared-memory blocks: the sequences `gpualign paf`'s
reader processes fetch and the parts of a file the reader processes of `pairs` parse (put, then take or view),
the large CIGAR arrays sent to the formatting processes and the text they render; and blocks mapped again
and again by several processes (mapped, discard: search's text slots).

A result sent back through a process pool's pipe arrives in reads of at most 64 KB, each of which takes
the parent's interpreter lock back; with the aligner threads busy that crawls. A block is made by one process (put) and unlinked by the
one that takes it (take, view, write_to, discard). Blocks are files in /dev/shm made and mapped here, out of
Python's resource tracker: on Python < 3.13 the tracker would unlink a block, or report it leaked, when its
maker exits first.
"""

from __future__ import annotations

import mmap
import os

import numpy as np

from . import interrupt, trace

SHM_DIR = "/dev/shm"  # where POSIX shared memory lives (Linux)


def put(parts, name: str | None = None) -> str:
    """A new block holding parts (bytes-like) one after another, copied by numpy (which lets go of the
    interpreter lock for large copies); its name (name: the one it gets, from interrupt.shm_name(); a new
    one when None). Made by mapped: its memory taken at once (an OSError when shared memory is short, not a
    SIGBUS as the copy touches it), out of Python's resource tracker."""
    parts = [np.frombuffer(p, dtype=np.uint8) for p in parts]
    total = sum(len(p) for p in parts)
    dst, at = mapped(name := name or interrupt.shm_name(), max(1, total)), 0
    for p in parts:
        dst[at:at + len(p)] = p
        at += len(p)
    return name


@trace.traced("shm take")
def take(name: str, size: int) -> np.ndarray:
    """The first size bytes of block name, copied to a new array; the block is unlinked."""
    return np.array(view(name, size))  # (the mapping goes with the view)


def _map(fd: int, size: int) -> np.ndarray:
    """The first size bytes of the block open as fd, mapped read-only (the mapping goes with the array)."""
    if size == 0:
        return np.zeros(0, np.uint8)
    flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)  # pages mapped in one call, not one fault each
    return np.frombuffer(mmap.mmap(fd, size, flags=flags, prot=mmap.PROT_READ), dtype=np.uint8, count=size)


def view(name: str, size: int) -> np.ndarray:
    """The first size bytes of block name as a read-only array, mapped (no copy); the name is unlinked at once,
    the memory goes when the last view of it does."""
    path = os.path.join(SHM_DIR, name)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.unlink(path)
        return _map(fd, size)
    finally:
        os.close(fd)


def write_to(name: str, size: int, stream) -> None:
    """The first size bytes of block name written to stream, by the kernel where stream can take them so
    (output/sink.Sink.send_file), else from the block mapped here; the block is unlinked."""
    path = os.path.join(SHM_DIR, name)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.unlink(path)  # (the open descriptor keeps the bytes)
        if size == 0 or (hasattr(stream, "send_file") and stream.send_file(fd, size)):
            return
        stream.write(_map(fd, size))
    finally:
        os.close(fd)


def mapped(name: str, size: int = 0) -> np.ndarray:
    """Block name mapped here as a uint8 array, made first (of size bytes) when size > 0; an OSError when
    shared memory is short. The mapping lasts as long as the array or a view of it; the maker unlinks the
    block (discard), or interrupt.finish() does after a signal, or its exit hook at exit. Made straight in
    /dev/shm, out of Python's resource tracker: a block used again and again is kept by its maker,
    whatever process maps it."""
    path = os.path.join(SHM_DIR, name)
    fd = os.open(path, os.O_RDWR | (os.O_CREAT | os.O_EXCL if size else 0), 0o600)
    try:
        if size:
            try:
                os.posix_fallocate(fd, 0, size)  # the memory taken now: ENOSPC here, not SIGBUS at first use
            except OSError:
                os.unlink(path)
                raise
        return np.frombuffer(mmap.mmap(fd, size), np.uint8)
    finally:
        os.close(fd)


def discard(name: str) -> None:
    """Unlink block name, if it is still there (no block is in Python's resource tracker: see put, mapped)."""
    try:
        os.unlink(os.path.join(SHM_DIR, name))
    except FileNotFoundError:
        pass
