#!/usr/bin/env python3
"""Golden confusion matrix and per-class accuracy for tests/train/confusion_matrix_test.cpp.

Computed by hand with numpy (no torch, nothing of mixt): each sample's prediction is the
arg-max of its logits, the matrix counts (label, prediction) pairs, and a class's accuracy
is its diagonal over its row (None for a class no sample has). Six classes, the last one
never a label, so its row is empty. Regenerate with
    python3 tests/golden/make_confusion_golden.py > tests/golden/confusion_matrix.json
"""
import json
import sys

import numpy as np

CLASSES = 6
SAMPLES = 53

rng = np.random.default_rng(31)
labels = rng.integers(0, CLASSES - 1, size=SAMPLES)
logits = rng.standard_normal((SAMPLES, CLASSES)).astype(np.float32)
# Half the samples lean towards their label, so the diagonal is not noise alone.
lean = rng.random(SAMPLES) < 0.5
logits[lean, labels[lean]] += np.float32(1.5)

predicted = logits.argmax(axis=1)
confusion = np.zeros((CLASSES, CLASSES), dtype=np.int64)
for label, guess in zip(labels, predicted):
    confusion[label, guess] += 1
rows = confusion.sum(axis=1)
per_class = [float(confusion[i, i]) / float(rows[i]) if rows[i] else None for i in range(CLASSES)]

json.dump({"classes": CLASSES,
           "logits": [[float(v) for v in row] for row in logits],
           "labels": [int(v) for v in labels],
           "confusion": confusion.tolist(),
           "per_class_accuracy": per_class},
          sys.stdout, indent=1)
print()
