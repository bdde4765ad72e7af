# The steps of scripts/setup, sourced by it. Each checks first and installs only what is missing.

TORCH_VERSION="2.11.0"
MIXT_HOME="${MIXT_HOME:-${XDG_DATA_HOME:-$HOME/.local/share}/mixt}"

DEBIAN_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libyaml-cpp-dev libboost-dev libopencv-dev libgtest-dev libgmock-dev libcli11-dev
  nlohmann-json3-dev libspdlog-dev libfmt-dev dataset-fashion-mnist libjpeg-dev
  # libpng: segmentation_folder reads palette masks as indices (OpenCV would give colours).
  libpng-dev
  # Python for LibTorch's wheel: venv because Debian's own Python is externally managed.
  python3 python3-venv
)
# Distributed (docs/distributed.md): Gloo's headers only, to declare c10d::ProcessGroupGloo
# (which libtorch_cpu contains, with its own Gloo); mixt links no libgloo.
DEBIAN_PACKAGES+=(libgloo-dev)
# TensorBoard event files (plugins/callbacks/tensorboard): protobuf's lite runtime and protoc.
DEBIAN_PACKAGES+=(libprotobuf-dev protobuf-compiler)
# Tokenizers (docs/tokenizers.md): Oniguruma for the pre-tokenizers' Unicode regexes (the engine
# Hugging Face tokenizers uses), utf8proc for the normalizers' NFC/NFKC, libsentencepiece for
# SentencePiece models.
# PCRE2's JIT runs the patterns it reads exactly as Oniguruma does (several times faster).
DEBIAN_PACKAGES+=(libonig-dev libpcre2-dev libutf8proc-dev libsentencepiece-dev)
# The mlflow callback (plugins/callbacks/mlflow, docs/tracking.md): libcurl speaks MLflow's REST API.
DEBIAN_PACKAGES+=(libcurl4-openssl-dev)

# Python packages: LibTorch itself for the build, then the references the tests and benchmarks
# compare against (never runtime dependencies of mixt; no weights or data are downloaded).
# numpy only because importing torch without it warns (CMake imports torch to find LibTorch).
DEMO_REQUIREMENTS=("torch==$TORCH_VERSION" numpy)
TEST_REQUIREMENTS=(
  torchvision==0.26.0    # the model zoo's and the transforms' parity reference
  transformers==5.24.0   # GPT2LMHeadModel, the gpt2 models' parity reference (brings safetensors)
  pillow                 # image decoding and bench/data_pipeline's reference
  tensorboard            # reads back mixt's event files (tests/support/tensorboard_reader.py)
  timm                   # ModelEmaV3, the ema callback's golden reference
  torchao==0.18.0        # float8 training, the float8 policies' golden reference
  onnx                   # checks mixt export's ONNX files (onnx.checker)
  onnxruntime            # runs mixt export's ONNX files against mixt's own forward
  sentencepiece          # trains and runs the SentencePiece reference (tokenizers come with transformers)
  tiktoken               # bench/tokenizer's second reference: OpenAI's encoder on the same vocabulary
  mlflow                 # the tracking server the mlflow callback's tests log to, and its client reading back
  peft==0.21.2           # LoRA adapters: the adapter plugins' parity reference and the file format they write
  torchtune==0.6.1       # bench/lora's second peer (its LoRA and QLoRA builders; brings datasets, omegaconf)
)

# The parts of a CUDA toolkit that the wheel's CMake config requires (it runs nvcc once and
# links cudart) although mixt compiles no CUDA code, by the CUDA version of the wheel.
declare -A CUDA_TOOLKIT_WHEELS=(
  [13.0]="nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-cccl==13.0.85"
)

log() { printf 'setup: %s\n' "$*" >&2; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else die "installing Debian packages needs root: run as root, or install sudo"
  fi
}

install_debian_packages() {
  local missing=() pkg
  for pkg in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  log "installing Debian packages: ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# Prints the interpreter to install into: PYTHON as given; else MIXT_HOME's venv once it
# exists; else python3 when pip may install into it; else a new venv (PEP 668 forbids
# installing into an externally managed Python, and mixt never overrides that).
choose_python() {
  if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
  local venv="$MIXT_HOME/venv"
  if [ -x "$venv/bin/python3" ]; then echo "$venv/bin/python3"; return; fi
  if python3 - <<'PY'
import os, sys, sysconfig
in_venv = sys.prefix != sys.base_prefix
managed = os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
sys.exit(0 if in_venv or not managed else 1)
PY
  then echo python3; return; fi
  log "creating a virtual environment in $venv (the system Python is externally managed)"
  mkdir -p "$MIXT_HOME"
  python3 -m venv "$venv" >&2
  echo "$venv/bin/python3"
}

# Installs those of the given pip requirements ("name" or "name==version") not yet present,
# reading installed versions from package metadata: no package is imported, so it is quick.
install_python_requirements() {
  local python="$1"; shift
  local missing
  missing=$("$python" - "$@" <<'PY'
import sys, importlib.metadata as metadata
missing = []
for spec in sys.argv[1:]:
    name, _, wanted = spec.partition("==")
    try:
        have = metadata.version(name).split("+")[0]
    except metadata.PackageNotFoundError:
        have = None
    if have is None or (wanted and have != wanted):
        missing.append(spec)
print(" ".join(missing))
PY
)
  [ -n "$missing" ] || return 0
  log "installing Python packages: $missing"
  # shellcheck disable=SC2086  # the list is space-separated requirement specs
  "$python" -m pip install --quiet $missing
}

# A torch whose files were partly removed (an interrupted install or uninstall) still has its
# metadata, so the version check passes and CMake fails later on a missing include folder:
# check the files LibTorch's CMake config hands out, and reinstall the wheel when one is gone.
repair_incomplete_torch() {
  local python="$1" torch_dir
  torch_dir=$("$python" -c 'import importlib.util as u; s = u.find_spec("torch"); print(s.submodule_search_locations[0] if s else "")')
  [ -n "$torch_dir" ] || die "torch is not importable by $python after installing it"
  [ -f "$torch_dir/include/ATen/ATen.h" ] && [ -f "$torch_dir/share/cmake/Torch/TorchConfig.cmake" ] &&
    [ -d "$torch_dir/lib" ] && return 0
  log "the torch install in $torch_dir is incomplete (headers or CMake files missing): reinstalling it"
  "$python" -m pip install --quiet --force-reinstall --no-deps "torch==$TORCH_VERSION"
}

# A toolkit of the user's own, by the places LibTorch's CMake config looks in.
have_own_cuda_toolkit() {
  local dir
  for dir in "${CUDA_HOME:-}" "${CUDA_PATH:-}" "${CUDAToolkit_ROOT:-}" /usr/local/cuda; do
    [ -n "$dir" ] && [ -x "$dir/bin/nvcc" ] && return 0
  done
  command -v nvcc >/dev/null
}

# Assembles $MIXT_HOME/cuda from NVIDIA's wheels: nvcc, its headers and the static runtime,
# with the wheel's shared libraries linked in under the unversioned names CMake looks for.
install_cuda_toolkit_parts() {
  local python="$1"
  [ -z "${Torch_DIR:-}" ] || return 0
  have_own_cuda_toolkit && return 0
  local info cuda_version runtime_version wheel_cuda
  # The wheel's CUDA version and library folder, read without importing torch.
  info=$("$python" - <<'PY'
import importlib.util, importlib.metadata as metadata, os, re
spec = importlib.util.find_spec("torch")
torch_dir = spec.submodule_search_locations[0]
text = open(os.path.join(torch_dir, "version.py")).read()
match = re.search(r"^cuda\s*(?::[^=]*)?=\s*'([0-9.]+)'", text, re.M)
if match:
    major = match.group(1).split(".")[0]
    print(match.group(1), metadata.version("nvidia-cuda-runtime"),
          os.path.join(os.path.dirname(torch_dir), "nvidia", "cu" + major))
PY
)
  [ -n "$info" ] || return 0  # a CPU-only torch: its CMake config wants no toolkit
  read -r cuda_version runtime_version wheel_cuda <<<"$info"
  local wheels="${CUDA_TOOLKIT_WHEELS[$cuda_version]:-}"
  [ -n "$wheels" ] || die "no CUDA toolkit wheels known for CUDA $cuda_version: set CUDA_HOME to a CUDA $cuda_version toolkit"
  local dir="$MIXT_HOME/cuda" stamp="cuda $cuda_version runtime $runtime_version libraries $wheel_cuda"
  [ "$(cat "$dir/.complete" 2>/dev/null)" = "$stamp" ] && return 0

  log "installing the CUDA $cuda_version toolkit parts LibTorch's CMake config needs into $dir"
  rm -rf "$dir"
  # shellcheck disable=SC2086  # the list is space-separated requirement specs
  "$python" -m pip install --quiet --no-deps --target "$dir" $wheels "nvidia-cuda-runtime==$runtime_version"
  local root="$dir/nvidia/cu${cuda_version%%.*}" file name
  ln -sfn lib "$root/lib64"  # nvcc links from bin/../lib64
  for file in "$wheel_cuda"/lib/*.so* "$wheel_cuda"/include/*; do
    name="${file#"$wheel_cuda"/}"
    [ -e "$root/$name" ] || ln -s "$file" "$root/$name"
  done
  for file in "$root"/lib/*.so.*; do
    name="${file##*/}"
    [ -e "$root/lib/${name%%.so.*}.so" ] || ln -s "$name" "$root/lib/${name%%.so.*}.so"
  done
  echo "$stamp" >"$dir/.complete"
}
