"""Reproduce assets/en-de-numbers from a seed: the stages its model card lists, in order, e.g.

    python scripts/train_translator.py --seed 0                      # stage 1, from scratch
    python scripts/train_translator.py --init-from assets/en-de-numbers --out /tmp/stage2 ...  # stage 2

--evaluate-only recomputes every figure of a trained folder (metrics.json and the model card)
from its weights, with the settings it was trained with.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from explorer.train.translator import TrainConfig, evaluate_folder, train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    for field in dataclasses.fields(TrainConfig):
        kind = {"int": int, "float": float, "str": str, "bool": lambda v: v.lower() in ("1", "true", "yes")}.get(
            str(field.type).split(" ")[0]
        )
        if field.name == "eval_limit":
            kind = int
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=kind, default=field.default)
    parser.add_argument("--evaluate-only", action="store_true", help="score a trained folder; do not train")
    args = vars(parser.parse_args())
    if args.pop("evaluate_only"):
        trained = json.loads((Path(args["out"]) / "metrics.json").read_text())
        config = TrainConfig(**{**trained["config"], "out": args["out"]})
        metrics = evaluate_folder(config, train_minutes=trained["train_minutes"], stages=trained.get("stages"))
    else:
        metrics = train(TrainConfig(**args))
    summary = {k: metrics[k] for k in ("exact_match", "exact_match_by_category", "chrf", "alignment_by_layer")}
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
