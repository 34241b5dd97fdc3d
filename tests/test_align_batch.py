"""records.AlignBatch.defer: a GPU engine's host copies of its CIGARs made when first read, once, and never
where nothing reads them; every way a batch is read (fields, take, merge, pickle, replace) sees them."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np

from gpualign.records import OK, AlignBatch


def _batch(calls: list) -> AlignBatch:
    lens = np.array([2, 0, 1], np.int64)
    res = AlignBatch(np.array([3, 0, 1], np.int32), np.full(3, OK, np.uint8), np.ones(3, np.uint8),
                     np.zeros(0, np.uint32), np.cumsum(lens) - lens, lens)

    def fetch() -> dict:
        calls.append(1)
        return {"cigar": np.array([5 << 4 | 7, 1 << 4 | 8, 4 << 4 | 7], np.uint32),
                "cigar_text": (b"5=1X4=", np.array([0, 4, 4]), np.array([4, 0, 2])),
                "cigar_stats": np.arange(15, dtype=np.int64).reshape(3, 5)}

    res.defer(fetch)
    return res


def test_fetched_once_when_first_read():
    calls: list = []
    res = _batch(calls)
    assert res.n == 3 and res.cigar_len.tolist() == [2, 0, 1] and calls == []  # (not a deferred field)
    assert res.cigar_stats.shape == (3, 5) and calls == [1]
    assert res.cigar.tolist()[2] == 4 << 4 | 7 and res.cigar_text[0] == b"5=1X4=" and calls == [1]


def test_a_field_set_meanwhile_is_kept():
    calls: list = []
    res = _batch(calls)
    res.cigar_text = None  # (a route that drops the engine's text)
    assert len(res.cigar) == 3 and res.cigar_text is None and calls == [1]


def test_take_merge_pickle_replace_see_the_copies():
    for read in (lambda r: r.take(np.array([2, 0])).cigar.tolist() == [4 << 4 | 7, 5 << 4 | 7, 1 << 4 | 8],
                 lambda r: AlignBatch.merge(3, [(np.array([2]), r.take(np.array([0])))], True).cigar_len[2] == 2,
                 lambda r: pickle.loads(pickle.dumps(r)).cigar_text[0] == b"5=1X4=",
                 lambda r: dataclasses.replace(r, score=r.score + 1).cigar_stats[2, 4] == 14):
        calls: list = []
        assert read(_batch(calls)) and calls == [1]


def test_unknown_attribute_still_raises():
    res = _batch([])
    try:
        res.no_such_field
    except AttributeError as e:
        assert "no_such_field" in str(e)
    else:
        raise AssertionError("no AttributeError")
    assert not hasattr(res, "device_cols")


def test_a_failed_fetch_is_tried_again():
    calls: list = []
    res = _batch(calls)
    good = res.__dict__["_fetch"][0]
    failing = [True]

    def flaky() -> dict:
        if failing[0]:
            raise RuntimeError("device lost")
        return good()

    res.__dict__["_fetch"] = (flaky, res.__dict__["_fetch"][1])
    try:
        res.cigar
    except RuntimeError:
        pass
    else:
        raise AssertionError("no RuntimeError")
    failing[0] = False
    assert len(res.cigar) == 3 and calls == [1]
