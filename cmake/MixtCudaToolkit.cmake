# The torch wheel is a CUDA build, and its CMake config stops without a CUDA toolkit (it runs
# nvcc once and links cudart) although mixt compiles no CUDA code. A toolkit of the user's own
# is found by LibTorch's config itself (CUDA_HOME, CUDA_PATH, CUDAToolkit_ROOT, nvcc on PATH,
# /usr/local/cuda); without one, use the parts scripts/setup assembled from NVIDIA's wheels in
# $MIXT_HOME/cuda (docs/setup.md).
function(mixt_use_setup_cuda_toolkit)
  if(DEFINED CUDA_TOOLKIT_ROOT_DIR OR DEFINED CUDAToolkit_ROOT OR DEFINED CMAKE_CUDA_COMPILER
     OR DEFINED ENV{CUDA_HOME} OR DEFINED ENV{CUDA_PATH} OR DEFINED ENV{CUDAToolkit_ROOT})
    return()
  endif()
  find_program(_mixt_nvcc nvcc PATHS /usr/local/cuda/bin NO_CACHE)
  if(_mixt_nvcc)
    return()
  endif()
  if(DEFINED ENV{MIXT_HOME})
    set(home "$ENV{MIXT_HOME}")
  elseif(DEFINED ENV{XDG_DATA_HOME})
    set(home "$ENV{XDG_DATA_HOME}/mixt")
  else()
    set(home "$ENV{HOME}/.local/share/mixt")
  endif()
  file(GLOB nvcc_candidates "${home}/cuda/nvidia/cu*/bin/nvcc")
  if(NOT nvcc_candidates)
    return()  # LibTorch's config says what is missing; a CPU-only LibTorch needs nothing
  endif()
  list(GET nvcc_candidates 0 nvcc)
  get_filename_component(root "${nvcc}/../.." ABSOLUTE)
  message(STATUS "mixt: CUDA toolkit parts from scripts/setup: ${root}")
  set(CUDA_TOOLKIT_ROOT_DIR "${root}" CACHE PATH "CUDA toolkit (assembled by scripts/setup)")
  set(CUDAToolkit_ROOT "${root}" CACHE PATH "CUDA toolkit (assembled by scripts/setup)")
  set(CMAKE_CUDA_COMPILER "${nvcc}" CACHE FILEPATH "nvcc (assembled by scripts/setup)")
endfunction()
