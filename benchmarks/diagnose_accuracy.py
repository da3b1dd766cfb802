"""Accuracy of `validator diagnose` on the real-log corpus (tests/corpus/diagnose/, issue 11).

Diagnoses every case on its own and compares with its label: the failure class (the corpus's
14-class vocabulary), the initiating rank where the log determines it, and false attributions
(a rank named with medium/high confidence where the log names none, or a wrong one). Prints one
line per case that is wrong, then the totals; the last line is one JSON object:
{"cases": N, "class_ok": .., "rank_ok": .., "rank_determined": .., "false_attributions": ..}

usage: python benchmarks/diagnose_accuracy.py [-v] [--corpus DIR]   (DIR holds cases/ and labels.jsonl;
default tests/corpus/diagnose)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.diagnose.corpus import CORPUS, labels, score, totals  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per case, right or wrong")
    ap.add_argument("--corpus", type=Path, default=CORPUS, help="a directory with cases/ and labels.jsonl")
    args = ap.parse_args()
    verbose = args.verbose
    t0 = time.monotonic()
    scores = [score(lb, args.corpus) for lb in labels(args.corpus)]
    for s in scores:
        if s.problems or verbose:
            print(f"{s.label.file}: {s.code} {s.klass} ranks={s.ranks} ({s.confidence}) {'; '.join(s.problems)}")
            if verbose or s.problems:
                print(f"    {s.summary[:160]}")
    t = totals(scores)
    n, d = t["cases"] or 1, t["rank_determined"] or 1
    print(f"class {t['class_ok']}/{t['cases']} ({100 * t['class_ok'] / n:.1f}%), "
          f"rank {t['rank_ok']}/{t['rank_determined']} ({100 * t['rank_ok'] / d:.1f}%), "
          f"false attributions {t['false_attributions']}, {time.monotonic() - t0:.1f} s")  # fmt: skip
    print(json.dumps(t))
    return 0


if __name__ == "__main__":
    sys.exit(main())
