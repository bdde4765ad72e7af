#!/usr/bin/env bash
# Regenerates docs/images/tensorboard.png: a short Fashion-MNIST run with the ema callback,
# shown by the real TensorBoard server and photographed by headless Chromium
# (apt install chromium; not a dependency of mixt or its tests).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"
"$root/build/bin/mixt" run "$root/recipes/fashion_mnist.yaml" trainer.epochs=3 trainer.max_steps_per_epoch=50 \
  trainer.log_every=2 data.val.limit=2000 'callbacks=[{name: ema, decay: 0.9, warmup: true}]'
python3 -m tensorboard.main --logdir runs --host 127.0.0.1 --port 6123 >/dev/null 2>&1 &
server=$!
sleep 8
chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars --window-size=1400,1000 \
  --virtual-time-budget=20000 --screenshot="$work/tb.png" "http://127.0.0.1:6123/?darkMode=false#timeseries"
python3 -c "
from PIL import Image
Image.open('$work/tb.png').convert('RGB').quantize(colors=64).save('$root/docs/images/tensorboard.png', optimize=True)"
