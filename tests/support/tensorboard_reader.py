#!/usr/bin/env python3
"""TensorBoard's own readers over a mixt run directory, for tests/cli/tensorboard_cli_test.cpp.

    tensorboard_reader.py events RUN_DIR   EventAccumulator (it checks both CRCs of every record)
    tensorboard_reader.py serve RUN_DIR    the real `tensorboard` server on a loopback port,
                                           read back through its HTTP API, then stopped
Both print one JSON object: {"scalars": {tag: [[step, value], ...]}, ...}.
"""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request

from free_port import free_port


def from_events(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(run_dir, size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
    accumulator.Reload()
    tags = accumulator.Tags()
    return {
        "files": sorted(f for f in os.listdir(run_dir) if f.startswith("events.out.tfevents.")),
        "scalars": {t: [[e.step, e.value] for e in accumulator.Scalars(t)] for t in tags["scalars"]},
        "histograms": {t: [[e.step, e.histogram_value.num, e.histogram_value.min, e.histogram_value.max]
                           for e in accumulator.Histograms(t)] for t in tags["histograms"]},
        "text": {t: [[e.step, e.tensor_proto.string_val[0].decode()] for e in accumulator.Tensors(t)]
                 for t in tags["tensors"]},
    }


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
        return json.loads(response.read())


def from_server(run_dir):
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", run_dir, "--host", "127.0.0.1",
                               "--port", str(port), "--reload_interval", "0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 90
        tags = {}
        while time.time() < deadline:
            try:
                tags = get(port, "/data/plugin/scalars/tags")
                if tags.get("."):
                    break
            except OSError:
                pass
            time.sleep(0.5)
        scalars = {}
        for tag in tags.get(".", {}):
            query = urllib.parse.urlencode({"run": ".", "tag": tag})
            scalars[tag] = [[step, value] for _, step, value in get(port, "/data/plugin/scalars/scalars?" + query)]
        return {"scalars": scalars}
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


if __name__ == "__main__":
    mode, run_dir = sys.argv[1], sys.argv[2]
    print(json.dumps(from_events(run_dir) if mode == "events" else from_server(run_dir)))
