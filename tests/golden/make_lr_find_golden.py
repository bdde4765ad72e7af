#!/usr/bin/env python3
"""Golden range tests for tests/train/lr_range_test_test.cpp (mixt lr-find's arithmetic).

Each case is a fixed sequence of optimizer steps (a training loss, and whether the precision
policy applied the step) fed to the learning-rate range test as fastai and Lightning compute
it, written here with numpy alone:
  - the ramp: lr_i = min_lr * (max_lr / min_lr) ** (i / (steps - 1)) for the i-th applied step
    (Lightning's _ExponentialLR over num_training steps, both ends included);
  - the smoothed loss: avg = beta * avg + (1 - beta) * loss, smoothed = avg / (1 - beta ** k)
    after the k-th applied step, beta = 0.98 (fastai's AvgSmoothLoss, Lightning's _LRCallback in
    src/lightning/pytorch/tuner/lr_finder.py);
  - the divergence stop: after the first point, smoothed > 4 * best (best: the lowest smoothed
    loss before this point), or a smoothed loss that is not finite (fastai's LRFinder.after_batch
    with stop_div); the diverging point is kept, as Lightning keeps it;
  - skipped steps take no ramp step and no part in the average (Lightning records NaN for them,
    which its suggestion drops in the same way);
  - the suggestion: Lightning's _LRFinder.suggestion(skip_begin=10, skip_end=1): the applied
    points less the first 10 and the last 1, those with a finite loss, np.gradient of the
    smoothed loss with respect to log(lr), its argmin mapped back to the point.
Regenerate with
    python3 tests/golden/make_lr_find_golden.py > tests/golden/lr_find.json
"""
import json

import numpy as np

BETA = 0.98
DIVERGENCE = 4.0


def lr_at(i, lo, hi, steps):
    return lo * (hi / lo) ** (min(i, steps - 1) / (steps - 1))


def range_test(sequence, lo, hi, steps):
    avg, best, applied, points, diverged = 0.0, 0.0, 0, [], False
    for loss, ok in sequence:
        point = {"lr": lr_at(applied, lo, hi, steps), "loss": loss, "applied": ok}
        if ok:
            applied += 1
            avg = BETA * avg + (1 - BETA) * loss
            smoothed = avg / (1 - BETA ** applied)
            point["smoothed"] = smoothed
            if applied > 1 and (not np.isfinite(smoothed) or smoothed > DIVERGENCE * best):
                diverged = True
            if applied == 1 or smoothed < best:
                best = smoothed
        points.append(point)
        if diverged or applied >= steps:
            break
    return points, diverged


def suggestion(applied, skip_begin=10, skip_end=1):
    smoothed = np.array([p["smoothed"] for p in applied], dtype=np.float64)
    lrs = np.array([p["lr"] for p in applied], dtype=np.float64)
    index = np.arange(len(applied))[skip_begin:-skip_end]
    losses, logs = smoothed[skip_begin:-skip_end], np.log(lrs[skip_begin:-skip_end])
    finite = np.isfinite(losses)
    if finite.sum() < 2:
        return None
    gradient = np.gradient(losses[finite], logs[finite])
    return int(index[finite][int(np.argmin(gradient))])


def case(name, sequence, lo, hi, steps):
    points, diverged = range_test(sequence, lo, hi, steps)
    applied = [p for p in points if p["applied"]]
    best = suggestion(applied)
    as_json = lambda v: v if v is None or np.isfinite(v) else ("nan" if np.isnan(v) else ("inf" if v > 0 else "-inf"))
    return {
        "name": name,
        "min_lr": lo, "max_lr": hi, "steps": steps,
        "sequence": [{"loss": as_json(l), "applied": ok} for l, ok in sequence],
        "consumed": len(points),
        "diverged": diverged,
        "points": [{"lr": p["lr"], "skipped": not p["applied"], "smoothed": as_json(p.get("smoothed"))} for p in points],
        "suggestion_index": best,
        "suggested_lr": None if best is None else applied[best]["lr"],
    }


def main():
    rng = np.random.default_rng(29)
    # A typical curve: flat at 2.3, falling from lr 1e-4 to a valley near 1e-1, then blowing up;
    # a loss scaler's first steps skipped (inf loss), and one more later.
    steps, lo, hi = 100, 1e-7, 10.0
    sequence, applied = [], 0
    for attempt in range(2 * steps):
        if attempt in (0, 1, 37):
            sequence.append((float("inf"), False))
            continue
        x = np.log10(lr_at(applied, lo, hi, steps))
        loss = 2.3 - 1.8 / (1 + np.exp(-2.5 * (x + 2.5))) + np.exp(4.0 * (x + 0.5)) + 0.04 * rng.standard_normal()
        sequence.append((float(loss), True))
        applied += 1
    cases = [case("diverges", sequence, lo, hi, steps)]
    # No divergence: the ramp ends at --max with the loss still falling.
    steps, lo, hi = 40, 1e-5, 1e-2
    sequence = [(float(1.5 - 0.02 * i + 0.01 * rng.standard_normal()), True) for i in range(60)]
    cases.append(case("completes", sequence, lo, hi, steps))
    # A NaN loss on an applied step ends the test at once.
    steps, lo, hi = 50, 1e-6, 1.0
    sequence = [(float(2.0 - 0.01 * i + 0.02 * rng.standard_normal()), True) for i in range(30)]
    sequence.append((float("nan"), True))
    sequence += [(1.0, True)] * 5
    cases.append(case("nan", sequence, lo, hi, steps))
    # Too short for a suggestion: 11 applied points leave none after skipping 10 and 1.
    steps, lo, hi = 11, 1e-4, 1e-1
    cases.append(case("too_short", [(1.0 - 0.01 * i, True) for i in range(11)], lo, hi, steps))
    print(json.dumps({"beta": BETA, "divergence": DIVERGENCE, "cases": cases}, indent=1))


if __name__ == "__main__":
    main()
