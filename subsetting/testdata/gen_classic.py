#!/usr/bin/env python3
"""Generates classic.json, the reference vectors of classic subsetting.

Run from this directory: python3 gen_classic.py > classic.json
The tests read classic.json only; Python is not needed to run them.

subset() is the SRE book's "deterministic subsetting" listing, with the
reference shuffle loop (j = floor(random() * (i+1))) that Python 2's
random.shuffle used; Python 3's random.shuffle draws j differently, so the
loop is spelled out here.
"""
import json
import random


def shuffle(x, seed):
    random.seed(seed)
    for i in reversed(range(1, len(x))):
        j = int(random.random() * (i + 1))
        x[i], x[j] = x[j], x[i]
    return x


def subset(backends, client_id, subset_size):
    subset_count = len(backends) // subset_size
    round_ = client_id // subset_count
    backends = shuffle(list(backends), round_)
    subset_id = client_id % subset_count
    start = subset_id * subset_size
    return backends[start:start + subset_size]


def main():
    out = {"random53": [], "shuffles": [], "subsets": []}
    for seed in [0, 1, 42, 2**31, 2**32 - 1, 2**32 + 5, 2**40 + 3, 2**63 - 1]:
        random.seed(seed)
        vals = [int(random.random() * 2**53) for _ in range(6)]
        out["random53"].append({"seed": str(seed), "values": vals})
    for seed, n in [(0, 12), (1, 12), (7, 5), (2**32 + 1, 20), (123456789, 100)]:
        out["shuffles"].append({"seed": str(seed), "n": n, "want": shuffle(list(range(n)), seed)})

    rng = random.Random(2022)
    ids300 = sorted({"%08x-%04x" % (rng.getrandbits(32), rng.getrandbits(16)) for _ in range(300)})
    cases = [
        ("twelve backends, size 3", ["b%02d" % i for i in range(12)], 3, list(range(10))),
        ("ten letters, size 5", list("abcdefghij"), 5, list(range(8))),
        ("size equals n", ["x", "y", "z", "w", "v"], 5, [0, 1, 2, 3]),
        ("300 ids, size 10", ids300, 10, list(range(0, 45)) + [299, 1000, 5000]),
        ("two-word seed", ["n%d" % i for i in range(6)], 6, [2**33 + 7]),
    ]
    for name, backends, size, clients in cases:
        subs = {str(c): subset(sorted(backends), c, size) for c in clients}
        out["subsets"].append({"name": name, "backends": backends, "size": size, "want": subs})
    json.dump(out, __import__("sys").stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
