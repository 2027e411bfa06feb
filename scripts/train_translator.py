"""Reproduce assets/en-de-numbers from a seed:  python scripts/train_translator.py --seed 0"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from explorer.train.translator import TrainConfig, train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    for field in dataclasses.fields(TrainConfig):
        kind = {"int": int, "float": float, "str": str}.get(str(field.type).split(" ")[0])
        if field.name == "eval_limit":
            kind = int
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=kind, default=field.default)
    args = parser.parse_args()
    metrics = train(TrainConfig(**vars(args)))
    summary = {k: metrics[k] for k in ("exact_match", "exact_match_by_category", "chrf", "alignment_by_layer")}
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
