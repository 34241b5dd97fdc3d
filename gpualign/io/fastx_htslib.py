"""The general path of the FASTA/FASTQ reader: htslib's parser (pysam.FastxFile) for any layout the fast
path does not take (multi-line FASTA, CR line ends, damaged input), with errors naming file and record."""

from __future__ import annotations

from itertools import islice
from typing import Iterator

from ..errors import InputError, RecordError


def _htslib_chunks(path: str, chunk: int, skip: int, name: str) -> Iterator[tuple[list, list, list]]:
    """htslib's parser (pysam.FastxFile), starting after the first `skip` records; name: the file
    named in errors."""
    import pysam

    pysam.set_verbosity(0)  # htslib's own messages: we raise our one-line error instead
    n = 0
    try:
        fh = pysam.FastxFile(path, persist=False)
    except OSError as e:
        raise InputError(f"{name}: cannot open ({e})") from None
    it = iter(fh)
    try:
        with fh:
            for _ in islice(it, skip):
                n += 1
            while True:
                names, seqs, quals = [], [], []
                put_n, put_s, put_q = names.append, seqs.append, quals.append
                try:
                    for r in islice(it, chunk):  # persist=False: read each proxy before the next
                        put_n(r.name)
                        put_s(r.sequence or "")
                        put_q(r.quality)
                finally:
                    n += len(names)
                if not names:
                    break
                yield names, seqs, quals
    except UnicodeDecodeError:
        raise RecordError(name, n + 1, "non-ASCII byte in the record") from None
    except (ValueError, OSError) as e:
        msg = str(e)
        if "quality" in msg:
            raise RecordError(name, n + 1, "quality length differs from sequence length") from None
        raise RecordError(name, n + 1, f"truncated or malformed input ({msg.split(' in ')[0]})") from None
    if n == 0:
        raise InputError(f"{name}: no FASTA/FASTQ records (empty input or not FASTA/FASTQ)")
