# SPDX-License-Identifier: MIT
# ftpad_add_clang_plugin(<target> VERSION <major> OUTPUT_DIR <dir>
#                        SOURCES <src>... [LIBRARIES <lib>...] INSTALL_DIR <dir under libdir>)
# Builds <dir>/ftpad-clang.so for clang <major>, against llvm-<major>-dev's
# and libclang-<major>-dev's headers, found with llvm-config-<major>.  The
# plugin links against nothing of LLVM's: every clang and LLVM symbol comes
# from the clang that loads it, so it loads only into that major version.
# Sets <target>_FOUND in the caller; when a package is missing it says which
# and builds nothing, so that a machine with fewer clangs still builds.
function(ftpad_add_clang_plugin target)
  cmake_parse_arguments(ARG "" "VERSION;OUTPUT_DIR;INSTALL_DIR" "SOURCES;LIBRARIES" ${ARGN})
  set(v ${ARG_VERSION})
  set(${target}_FOUND FALSE PARENT_SCOPE)
  find_program(FTPAD_LLVM_CONFIG_${v} NAMES llvm-config-${v} llvm-config
    PATHS /usr/lib/llvm-${v}/bin NO_DEFAULT_PATH)
  find_program(FTPAD_CLANG_${v} clang-${v})
  if(FTPAD_LLVM_CONFIG_${v})
    execute_process(COMMAND ${FTPAD_LLVM_CONFIG_${v}} --version
      OUTPUT_VARIABLE version OUTPUT_STRIP_TRAILING_WHITESPACE)
    execute_process(COMMAND ${FTPAD_LLVM_CONFIG_${v}} --includedir
      OUTPUT_VARIABLE include_dir OUTPUT_STRIP_TRAILING_WHITESPACE)
  endif()
  if(NOT version MATCHES "^${v}\\.")
    message(STATUS "ftpad: llvm-${v}-dev not found; not building the clang ${v} plugin"
      " (scripts/install-deps.sh installs it)")
    return()
  endif()
  if(NOT EXISTS ${include_dir}/clang/Frontend/FrontendPluginRegistry.h)
    message(STATUS "ftpad: libclang-${v}-dev not found; not building the clang ${v} plugin"
      " (scripts/install-deps.sh installs it)")
    return()
  endif()
  if(NOT FTPAD_CLANG_${v})
    message(STATUS "ftpad: clang-${v} not found; not building the clang ${v} plugin"
      " (scripts/install-deps.sh installs it)")
    return()
  endif()
  execute_process(COMMAND ${FTPAD_LLVM_CONFIG_${v}} --cppflags
    OUTPUT_VARIABLE cppflags OUTPUT_STRIP_TRAILING_WHITESPACE)
  separate_arguments(cppflags UNIX_COMMAND "${cppflags}")
  list(FILTER cppflags INCLUDE REGEX "^-D")
  list(TRANSFORM cppflags REPLACE "^-D" "")

  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME ftpad-clang PREFIX ""
    LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIR}
    CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON
    CXX_VISIBILITY_PRESET hidden)
  target_include_directories(${target} SYSTEM PRIVATE ${include_dir})
  target_compile_definitions(${target} PRIVATE ${cppflags})
  # LLVM is built without RTTI; the plugin's classes derive from its.
  target_compile_options(${target} PRIVATE -fno-rtti -Wno-unused-parameter)
  # No build or source path in the binary (assert()'s __FILE__): the same
  # source gives the same plugin wherever it is built, so the clang kernel
  # builds of tests/kbuild, keyed by the plugin's hash, survive a fresh clone.
  target_compile_options(${target} PRIVATE
    -ffile-prefix-map=${CMAKE_SOURCE_DIR}=. -ffile-prefix-map=${CMAKE_BINARY_DIR}=build)
  # GCC 12 warns about a null `this` inside clang's own headers.
  target_compile_options(${target} PRIVATE -Wno-nonnull)
  if(ARG_LIBRARIES)
    target_link_libraries(${target} PRIVATE ${ARG_LIBRARIES})
  endif()
  install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/${ARG_INSTALL_DIR})
  # One plugin serves every target it has a layout for: arch "any".
  ftpad_register_plugin(clang any ${v} ${FTPAD_CLANG_${v}}
    ${ARG_OUTPUT_DIR}/ftpad-clang.so ${ARG_INSTALL_DIR}/ftpad-clang.so)
  set(${target}_FOUND TRUE PARENT_SCOPE)
endfunction()
