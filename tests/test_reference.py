from hypothesis import given, settings
from hypothesis import strategies as st

from gpualign.config import Penalties
from gpualign.engines import reference
from oracles import affine, edit

seqs = st.binary(min_size=0, max_size=40).map(lambda b: bytes(b"ACGTN"[x % 5] for x in b))


@settings(max_examples=200, deadline=None)
@given(seqs, seqs, st.booleans())
def test_reference_edit_matches_edlib(q, t, n_mismatch):
    assert reference.edit_distance(q, t, n_mismatch) == edit(q, t, n_mismatch)


@settings(max_examples=200, deadline=None)
@given(seqs, seqs, st.integers(1, 6), st.integers(0, 8), st.integers(1, 4), st.booleans())
def test_reference_affine_matches_parasail(q, t, x, o, e, n_mismatch):
    p = Penalties(x, o, e)
    assert reference.affine_score(q, t, p, n_mismatch) == affine(q, t, p, n_mismatch)


def test_one_gap_by_hand():
    # one 2-base gap: o + 2e
    assert reference.affine_score(b"ACGTAC", b"ACAC", Penalties(4, 6, 2)) == 10
    assert affine(b"ACGTAC", b"ACAC", Penalties(4, 6, 2)) == 10


@settings(max_examples=150, deadline=None)
@given(seqs, seqs, st.integers(0, 50), st.integers(0, 50))
def test_reference_ends_free(q, t, fb, fe):
    """Target ends free: with unbounded freedom it equals parasail's semi-global sg_dx; bounds in between
    lie between that and the global score."""
    import parasail

    p = Penalties(4, 6, 2)
    full = reference.affine_score(q, t, p, False, len(t), len(t))
    if q and t:
        m = parasail.matrix_create("ACGTN", 0, -4)
        assert full == -parasail.sg_dx(q.decode(), t.decode(), 8, 2, m).score
    bounded = reference.affine_score(q, t, p, False, fb, fe)
    assert full <= bounded <= reference.affine_score(q, t, p)
