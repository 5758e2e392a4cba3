# SPDX-License-Identifier: MIT
# Finds GCC's plugin headers and provides ftpad_add_gcc_plugin(), which
# builds the plugin for one compiler (the host gcc, or a cross gcc) with the
# host C++ compiler, against that compiler's own plugin headers and with the
# architecture backend that matches its target.
set(FTPAD_HOST_GCC "gcc" CACHE STRING "The gcc the host plugin is built for")

function(ftpad_gcc_plugin_dir compiler out_var)
  execute_process(COMMAND ${compiler} -print-file-name=plugin
    OUTPUT_VARIABLE dir OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT EXISTS "${dir}/include/gcc-plugin.h")
    set(${out_var} "" PARENT_SCOPE)
  else()
    set(${out_var} "${dir}" PARENT_SCOPE)
  endif()
endfunction()

ftpad_gcc_plugin_dir(${FTPAD_HOST_GCC} FTPAD_HOST_GCC_PLUGIN_DIR)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(GccPlugin
  REQUIRED_VARS FTPAD_HOST_GCC_PLUGIN_DIR
  REASON_FAILURE_MESSAGE "no plugin headers for ${FTPAD_HOST_GCC}: install gcc-12-plugin-dev (scripts/install-deps.sh)")

# ftpad_add_gcc_plugin(<target> COMPILER <gcc> OUTPUT_DIR <dir> SOURCES <src>...)
# Builds <dir>/ftpad.so.  The basename stays "ftpad" for every compiler
# because GCC names plugin arguments after it (-fplugin-arg-ftpad-...).
function(ftpad_add_gcc_plugin target)
  cmake_parse_arguments(ARG "" "COMPILER;OUTPUT_DIR" "SOURCES" ${ARGN})
  ftpad_gcc_plugin_dir(${ARG_COMPILER} plugin_dir)
  if(NOT plugin_dir)
    message(FATAL_ERROR "ftpad: no GCC plugin headers for ${ARG_COMPILER}")
  endif()
  execute_process(COMMAND ${ARG_COMPILER} -dumpmachine
    OUTPUT_VARIABLE triplet OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REGEX REPLACE "-.*" "" arch "${triplet}")
  set(arch_source ${CMAKE_CURRENT_SOURCE_DIR}/arch-${arch}.cc)
  if(NOT EXISTS ${arch_source})
    message(FATAL_ERROR "ftpad: no GCC plugin backend for ${arch} (${ARG_COMPILER})")
  endif()
  add_library(${target} MODULE ${ARG_SOURCES} ${arch_source})
  target_include_directories(${target} SYSTEM PRIVATE ${plugin_dir}/include)
  # No build or source path in the binary: the same source gives the same
  # plugin wherever it is built, so caches keyed by the plugin's hash (the
  # kernel builds of tests/kbuild) survive a fresh clone.
  target_compile_options(${target} PRIVATE -fno-rtti -fno-exceptions -Wno-unused-parameter
    -ffile-prefix-map=${CMAKE_SOURCE_DIR}=. -ffile-prefix-map=${CMAKE_BINARY_DIR}=build)
  set_target_properties(${target} PROPERTIES
    PREFIX "" OUTPUT_NAME ftpad
    CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS ON
    LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIR})
  set(FTPAD_GCC_PLUGIN_ARCH_${target} ${arch} PARENT_SCOPE)
endfunction()
