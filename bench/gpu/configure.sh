# Sourced by the bench/gpu scripts: configures BUILD on a CUDA machine against its python3's
# torch (2.11.0+cu130) and the dependencies carried in .deps/ (bench/gpu/prepare_deps.sh).
# Expects ROOT, DEPS and BUILD; exports LD_LIBRARY_PATH so the carried yaml-cpp loads.
GENERATOR=()
command -v ninja >/dev/null && GENERATOR=(-G Ninja)
export LD_LIBRARY_PATH="$DEPS/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} cmake -S "$ROOT" -B "$BUILD" "${GENERATOR[@]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$DEPS" \
  -Dyaml-cpp_DIR="$DEPS/lib/x86_64-linux-gnu/cmake/yaml-cpp" -DGTest_DIR="$DEPS/lib/x86_64-linux-gnu/cmake/GTest" \
  -DBoost_DIR="$DEPS/lib/x86_64-linux-gnu/cmake/Boost-1.74.0" -Dnlohmann_json_DIR="$DEPS/share/cmake/nlohmann_json" \
  -DCLI11_DIR="$DEPS/share/cmake/CLI11" -DZLIB_ROOT="$DEPS" >/dev/null
