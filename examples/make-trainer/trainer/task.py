"""Fit y = w*x + b to noisy synthetic data and report the RMSE to hyperparameter tuning."""

from __future__ import annotations

import argparse
import json
import math
import os
import random

try:
    import hypertune  # cloudml-hypertune, installed by buildkit-py into every image
except ImportError:  # running outside the image
    hypertune = None


def make_data(n: int, seed: int) -> list[tuple[float, float]]:
    rng = random.Random(seed)
    return [(x, 3.0 * x + 0.5 + rng.gauss(0, 0.1)) for x in (rng.uniform(-1, 1) for _ in range(n))]


def train(data, epochs: int, lr: float) -> tuple[float, float, float]:
    w = b = 0.0
    n = len(data)
    for _ in range(epochs):
        gw = sum(2 * (w * x + b - y) * x for x, y in data) / n
        gb = sum(2 * (w * x + b - y) for x, y in data) / n
        w, b = w - lr * gw, b - lr * gb
    rmse = math.sqrt(sum((w * x + b - y) ** 2 for x, y in data) / n)
    return w, b, rmse


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--learning-rate", type=float, default=0.1)
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args(argv)

    data = make_data(args.samples, int(os.environ.get("QUICKSTART_SEED", "0")))
    w, b, rmse = train(data, args.epochs, args.learning_rate)
    print(f"trained: w={w:.4f} b={b:.4f} rmse={rmse:.4f}", flush=True)

    if hypertune is not None:
        hypertune.HyperTune().report_hyperparameter_tuning_metric(
            hyperparameter_metric_tag="rmse", metric_value=rmse, global_step=args.epochs
        )
    model_dir = os.environ.get("AIP_MODEL_DIR")
    if model_dir and not model_dir.startswith("gs://"):
        os.makedirs(model_dir, exist_ok=True)
        with open(os.path.join(model_dir, "model.json"), "w", encoding="utf-8") as handle:
            json.dump({"w": w, "b": b, "rmse": rmse}, handle)


if __name__ == "__main__":
    main()
