"""A real MLflow tracking server for the mlflow callback's tests, and MLflow's own client
reading back what mixt sent (tests/plugins/callbacks/mlflow_cli_test.cpp).

  mlflow_server.py serve DIR [fresh]   starts `mlflow server` (SQLite in DIR, artifacts served from
                                    DIR/artifacts) on a free port, in a process group of its own;
                                    prints the port once /health answers (DIR/port, DIR/pid too)
  mlflow_server.py serve401 DIR     a stub that answers 401 to every request (same output)
  mlflow_server.py stop DIR         ends the process group `serve` started
  mlflow_server.py read URI RUN_ID DEST [RECIPE]   the run as MlflowClient sees it, as JSON:
                                    status, params, tags, each metric's history [[step, value], ...],
                                    the artifacts downloaded under DEST (their relative paths), and
                                    with RECIPE each of its leaves (PyYAML's reading) whose
                                    parameter is missing or reads back as another value
  mlflow_server.py runs URI EXPERIMENT    the ids of the experiment's runs, as JSON
"""
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

from free_port import free_port


def wait_healthy(port, process, seconds=120):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if process.poll() is not None:
            sys.exit(f"the server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answers (the 401 stub)
        except OSError:
            time.sleep(0.2)
    sys.exit(f"no answer on port {port} after {seconds} s")


def start(directory, command):
    os.makedirs(directory, exist_ok=True)
    log = open(os.path.join(directory, "server.log"), "ab")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True, cwd=directory)
    return process


def serve(directory, fresh=""):
    directory = os.path.abspath(directory)
    if fresh == "fresh":  # ctest's fixture: every suite starts from an empty store
        shutil.rmtree(directory, ignore_errors=True)
    port = free_port()
    process = start(directory, [sys.executable, "-m", "mlflow", "server",
                                "--backend-store-uri", f"sqlite:///{directory}/mlflow.db",
                                "--serve-artifacts", "--artifacts-destination", f"{directory}/artifacts",
                                "--host", "127.0.0.1", "--port", str(port), "--workers", "1"])
    finish_start(directory, port, process)


def serve401(directory):
    directory = os.path.abspath(directory)
    port = free_port()
    process = start(directory, [sys.executable, os.path.abspath(__file__), "stub401", str(port)])
    finish_start(directory, port, process)


def finish_start(directory, port, process):
    with open(os.path.join(directory, "pid"), "w") as f:
        f.write(str(process.pid))
    wait_healthy(port, process)
    with open(os.path.join(directory, "port"), "w") as f:
        f.write(str(port))
    print(port)


class Refuse(http.server.BaseHTTPRequestHandler):
    def answer(self):
        body = json.dumps({"error_code": "UNAUTHENTICATED", "message": "credentials required"}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        with open("requests.log", "a") as log:
            log.write(f"{self.command} {self.path} {self.headers.get('Authorization', '')}\n")

    do_GET = do_POST = do_PUT = answer

    def log_message(self, *args):
        pass


def stub401(port):
    http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), Refuse).serve_forever()


def stop(directory):
    with open(os.path.join(directory, "pid")) as f:
        pid = int(f.read())
    try:
        os.killpg(pid, signal.SIGKILL)  # the group `start` made: the server and its workers
    except ProcessLookupError:
        pass
    for name in ("port", "pid"):
        os.remove(os.path.join(directory, name))


def leaves(node, prefix=""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaves(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, node


def read(uri, run_id, dest, recipe=None):
    import yaml
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri=uri)
    run = client.get_run(run_id)
    metrics = {}
    for key in run.data.metrics:
        history = sorted(client.get_metric_history(run_id, key), key=lambda m: (m.step, m.timestamp))
        metrics[key] = [[m.step, m.value] for m in history]
    artifacts = []
    if client.list_artifacts(run_id):
        local = client.download_artifacts(run_id, "", dest)
        for root, _, files in os.walk(local):
            for name in files:
                artifacts.append(os.path.relpath(os.path.join(root, name), local))
    else:
        local = dest
    mismatched, recipe_leaves = [], 0
    if recipe:
        with open(recipe) as f:
            for key, value in leaves(yaml.safe_load(f)):
                recipe_leaves += 1
                if key not in run.data.params or yaml.safe_load(run.data.params[key]) != value:
                    mismatched.append(key)
    print(json.dumps({"mismatched_params": mismatched, "recipe_leaves": recipe_leaves, "status": run.info.status, "experiment_id": run.info.experiment_id, "params": run.data.params,
                      "tags": run.data.tags, "metrics": metrics, "artifacts": sorted(artifacts),
                      "artifact_dir": local}))


def runs(uri, experiment):
    from mlflow.tracking import MlflowClient
    client = MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    ids = [] if found is None else [r.info.run_id for r in client.search_runs([found.experiment_id])]
    print(json.dumps(ids))


os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] = "false"  # stdout stays JSON alone

if __name__ == "__main__":
    command, arguments = sys.argv[1], sys.argv[2:]
    {"serve": serve, "serve401": serve401, "stub401": stub401, "stop": stop, "read": read, "runs": runs}[command](
        *arguments)
