#!/usr/bin/python3
"""digits_prepare.py — writes examples/digits/*.csv from scikit-learn's 8x8 digits: the
whole set and the deterministic source (labels 0-4) / target (labels 5-9) splits.

Run: /usr/bin/python3 scripts/digits_prepare.py [SRC.csv.gz] [OUT_DIR]
The split of a sample depends only on r, its rank among the earlier samples with the same
label in file order, so the CSVs are reproducible without a random seed:
  source (0-4): train r%10 != 9, val r%10 == 9
  target (5-9): train r%4 in {0, 1}, val r%4 == 2, test r%4 == 3
"""
import gzip
import os
import sys

SRC = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "digits")


def split_of(label, r):
    if label <= 4:
        return "source_val" if r % 10 == 9 else "source_train"
    return {0: "target_train", 1: "target_train", 2: "target_val", 3: "target_test"}[r % 4]


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else SRC
    out = sys.argv[2] if len(sys.argv) > 2 else OUT
    rows = []
    with gzip.open(src, "rt") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            # The file stores integers as floats in some releases ("16.0"): keep raw ints.
            vals = [int(float(v)) for v in line.split(",")]
            if len(vals) != 65 or not all(0 <= v <= 16 for v in vals[:64]) \
                    or not 0 <= vals[64] <= 9:
                sys.exit(f"{src}:{lineno}: expected 64 pixels 0..16 and a label 0..9")
            rows.append(vals)
    names = ["source_train", "source_val", "target_train", "target_val", "target_test"]
    splits = {n: [] for n in names}
    seen = [0] * 10
    for vals in rows:
        label = vals[64]
        splits[split_of(label, seen[label])].append(vals)
        seen[label] += 1

    def write(name, data):
        path = os.path.join(out, name + ".csv")
        with open(path, "w") as f:
            for vals in data:
                f.write(",".join(str(v) for v in vals) + "\n")
        print(f"{name}.csv {len(data)} rows")

    os.makedirs(out, exist_ok=True)
    write("digits", rows)
    for n in names:
        write(n, splits[n])


if __name__ == "__main__":
    main()
