# Warnings are errors for mixt's own code; third-party headers come in as SYSTEM includes.
function(mixt_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wno-unused-parameter)
  # GCC 12 at -O2/-O3 reports std::string concatenation inside libstdc++ as overflowing
  # (false positives, GCC bugs 105329 and 105651); keep them as warnings, not errors.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-error=stringop-overflow -Wno-error=restrict)
  endif()
  # GCC 13 (Ubuntu 24.04) reports std::vector<bool>'s growth inside libstdc++, inlined from
  # LibTorch's autograd Function::apply, as an out-of-bounds memmove: a warning, not an error.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 13)
    target_compile_options(${target} PRIVATE -Wno-error=array-bounds)
  endif()
  if(MIXT_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# The torch wheel's libtorch.so exports its own copies of std::filesystem functions, and
# some of them crash when called from outside (remove_all jumps to a null pointer). The
# dynamic linker binds to the first definition in load order, and the compiler driver
# puts libstdc++ last. Every executable therefore names libstdc++ first, so the system's
# std::filesystem is the one every library in the process (plugins included) binds to.
function(mixt_prefer_system_libstdcxx target)
  target_link_options(${target} BEFORE PRIVATE -Wl,--no-as-needed -lstdc++)
endfunction()
