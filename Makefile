# The README's entry points. Each one runs scripts/setup first (fast when all is present).
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
MIXT := $(BUILD_DIR)/bin/mixt

# scripts/setup puts the Python packages in $(MIXT_HOME)/venv when the system Python is
# externally managed (PEP 668): its python3 comes first for every command below, and CMake
# is handed the same interpreter. A PATH entry that does not exist costs nothing.
export MIXT_HOME ?= $(or $(XDG_DATA_HOME),$(HOME)/.local/share)/mixt
export PATH := $(MIXT_HOME)/venv/bin:$(PATH)

# ccache: CI builds in a fresh clone elsewhere; a base dir at the source root keeps the
# compile lines relative so those builds still hit the cache.
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := true
export CCACHE_SLOPPINESS := pch_defines,time_macros,include_file_mtime,include_file_ctime
export CCACHE_MAXSIZE ?= 5G
# Without it every cache hit hashes each include again, the 0.5 GB precompiled header too:
# 1.8 s a hit (600 of them in a fresh clone) instead of 0.02 s. Keyed by inode and mtime.
export CCACHE_INODECACHE ?= true

.PHONY: setup setup-demo configure build build-demo test demo bench bench-data bench-tokenizer container-check fuzz sanitize clean

# Everything `make test` needs; setup-demo: only what `make demo` needs (no Python references).
setup:
	@scripts/setup

setup-demo:
	@scripts/setup --demo

# The interpreter itself, not a version manager's shim (pyenv's costs ~0.5 s a start, and the
# tests start Python hundreds of times).
PYTHON_REAL = $(shell python3 -c 'import sys; print(sys.executable)' 2>/dev/null)

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DPython3_EXECUTABLE="$${PYTHON:-$(PYTHON_REAL)}"

configure: setup $(BUILD_DIR)/build.ninja

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# The in-process cases as one batch per binary (label `unit`), every other case under its own
# name (tests/CMakeLists.txt): not each in-process case again in a process of its own.
# A fresh build folder has no timings, and ctest would start the slowest cases last (2 minutes
# of one idle core at the end): tests/ctest_costs.txt seeds them until ctest records its own.
test: build
	@mkdir -p $(BUILD_DIR)/Testing/Temporary
	@[ -s $(BUILD_DIR)/Testing/Temporary/CTestCostData.txt ] || \
	  cp tests/ctest_costs.txt $(BUILD_DIR)/Testing/Temporary/CTestCostData.txt
	cd $(BUILD_DIR) && PATH="$(dir $(PYTHON_REAL)):$$PATH" ctest --output-on-failure -j $(JOBS) --timeout 900 -LE '^in_process$$'

# The program and its plugins only: no tests, fixtures or benchmark tools.
build-demo: setup-demo $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS) --target mixt_cli mixt_plugins

demo: build-demo
	$(MIXT) run recipes/fashion_mnist.yaml
	@echo "curves: tensorboard --logdir runs/fashion_mnist  (then open http://localhost:6006)"

bench: build
	bench/fashion_mnist_vs_pytorch.sh

# Input pipeline: mixt's image_folder loader vs torchvision ImageFolder + DataLoader.
bench-data: build
	bench/data_pipeline/run.sh $(BUILD_DIR)

# Tokenizer encode throughput: mixt vs Hugging Face tokenizers and tiktoken, one thread and every core.
bench-tokenizer: build
	bench/tokenizer/run.sh $(BUILD_DIR)

# The in-process cases, the fuzz targets' replays and a few end-to-end cases, built with
# AddressSanitizer and UndefinedBehaviorSanitizer (GCC) in build-sanitize: docs/fuzzing.md.
sanitize: setup
	PYTHON="$${PYTHON:-$(PYTHON_REAL)}" scripts/sanitize

# Builds the container image (podman or docker) and runs it: not part of `make test`.
container-check:
	scripts/container-check

# Each fuzz target (fuzz/) for FUZZ_SECONDS under libFuzzer with ASan and UBSan (clang):
# docs/fuzzing.md.
FUZZ_SECONDS ?= 60
fuzz:
	scripts/fuzz $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD_DIR)
