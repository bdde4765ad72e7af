# mixt_add_plugin(NAME SOURCES src... [OUTPUT_DIR dir])
# The one way plugins are built, in-tree and out of tree (after find_package(mixt)):
# a MODULE library with hidden visibility that links libmixt and Torch. Only the entry
# point written by MIXT_PLUGIN is exported.
function(mixt_add_plugin name)
  cmake_parse_arguments(ARG "" "OUTPUT_DIR" "SOURCES" ${ARGN})
  add_library(${name} MODULE ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE mixt::mixt)
  set_target_properties(${name} PROPERTIES
    PREFIX "libmixt_"
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(ARG_OUTPUT_DIR)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIR})
  elseif(DEFINED MIXT_PLUGIN_OUTPUT_DIR)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${MIXT_PLUGIN_OUTPUT_DIR})
  endif()
  if(COMMAND mixt_set_warnings)
    mixt_set_warnings(${name})
  endif()
  if(TARGET mixt_pch)
    target_precompile_headers(${name} REUSE_FROM mixt_pch)
    # In-tree plugins of the default directory ship with `cmake --install`, next to libmixt
    # (fixtures, which name their own OUTPUT_DIR, do not).
    if(NOT ARG_OUTPUT_DIR)
      install(TARGETS ${name} LIBRARY DESTINATION lib/mixt/plugins)
      set_property(GLOBAL APPEND PROPERTY MIXT_SHIPPED_PLUGINS ${name})
    endif()
  endif()
endfunction()
