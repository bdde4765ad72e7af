#!/usr/bin/env bash
# Fills .deps/ (git-ignored) with what bench/gpu/precision_check.sh and resnet50.sh need on a CUDA machine
# that has torch 2.11.0+cu130, cmake and nvcc but no package registries. Run it HERE, where
# scripts/setup installed the Debian packages; the GPU session carries .deps/ along.
#   .deps/include, .deps/lib/...   yaml-cpp (shared library), GTest/GMock (static), the
#                                  Boost headers libmixt actually includes (Boost.DLL and
#                                  what it pulls in, found with g++ -M), nlohmann/json,
#                                  CLI11, zlib: with their CMake configs, relocated
#                                  (they compute paths relative to themselves)
#   .deps/data/fashion-mnist       the four Fashion-MNIST .gz files (30 MB)
# The copied shared libraries are Debian 12's (glibc 2.36): the GPU machine must be as new.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEPS="$ROOT/.deps"
ARCH=lib/x86_64-linux-gnu
rm -rf "$DEPS"
mkdir -p "$DEPS/include" "$DEPS/$ARCH" "$DEPS/share/cmake" "$DEPS/data"

copy() {  # copy /usr/REL... to .deps/REL..., keeping symlinks
  for rel in "$@"; do
    mkdir -p "$DEPS/$(dirname "$rel")"
    cp -a "/usr/$rel" "$DEPS/$rel"
  done
}

copy include/yaml-cpp "$ARCH/cmake/yaml-cpp"
for f in /usr/$ARCH/libyaml-cpp.so*; do copy "${f#/usr/}"; done
# libyaml-cpp.so may be a link into /lib; store the real file under the link's name too.
cp -L /usr/$ARCH/libyaml-cpp.so.0.7 "$DEPS/$ARCH/libyaml-cpp.so.0.7" 2>/dev/null || true

copy include/gtest include/gmock "$ARCH/cmake/GTest"
for f in /usr/$ARCH/libgtest*.a /usr/$ARCH/libgmock*.a; do copy "${f#/usr/}"; done

copy include/nlohmann share/cmake/nlohmann_json include/CLI share/cmake/CLI11
# Gloo headers: declarations only, for framework/src/distributed/gloo_backend.cpp.
copy include/gloo
copy include/zlib.h include/zconf.h
cp -L /usr/$ARCH/libz.so "$DEPS/$ARCH/libz.so"
mkdir -p "$DEPS/lib" && cp -L /usr/$ARCH/libz.so "$DEPS/lib/libz.so"  # where FindZLIB looks under ZLIB_ROOT

# Boost: only the headers libmixt's plugin loader reaches, plus the header-only CMake config.
TORCH_INCLUDES=$(python3 -c "from torch.utils.cpp_extension import include_paths; print(' '.join('-I' + p for p in include_paths()))")
# shellcheck disable=SC2086
g++ -std=c++20 -M -DBOOST_DLL_USE_STD_FS -I"$ROOT/framework/include" -I"$ROOT/framework/src" $TORCH_INCLUDES \
    "$ROOT/framework/src/plugins/plugin_loader.cpp" | tr ' \\' '\n\n' | grep '^/usr/include/boost/' | sort -u |
  while read -r header; do copy "${header#/usr/}"; done
copy "$ARCH/cmake/Boost-1.74.0" "$ARCH/cmake/boost_headers-1.74.0" "$ARCH/cmake/BoostDetectToolset-1.74.0.cmake"

cp /usr/share/datasets/fashion-mnist/*.gz "$DEPS/data/" && mkdir -p "$DEPS/data/fashion-mnist" &&
  mv "$DEPS"/data/*.gz "$DEPS/data/fashion-mnist/"
du -sh "$DEPS"
echo "prepare_deps: .deps/ ready; carry it to the GPU session with the working tree"
