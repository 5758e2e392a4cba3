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

# The target architecture and the major version of the gcc COMPILER, as
# ftpad-config and ftpadConfig.cmake name a plugin's compiler.
function(ftpad_gcc_describe compiler out_arch out_major)
  execute_process(COMMAND ${compiler} -dumpmachine OUTPUT_VARIABLE machine
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  execute_process(COMMAND ${compiler} -dumpversion OUTPUT_VARIABLE version
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  string(REGEX REPLACE "-.*" "" arch "${machine}")
  string(REGEX REPLACE "\\..*" "" major "${version}")
  set(${out_arch} ${arch} PARENT_SCOPE)
  set(${out_major} ${major} PARENT_SCOPE)
endfunction()

# ftpad_add_gcc_plugin(<target> COMPILER <gcc> OUTPUT_DIR <dir> SOURCES <src>...
#                      [LIBRARIES <lib>...] [INSTALL_DIR <dir under libdir>])
# Builds <dir>/ftpad.so.  The basename stays "ftpad" for every compiler
# because GCC names plugin arguments after it (-fplugin-arg-ftpad-...).
# With INSTALL_DIR, installs it there and lists it for packaging/
# (ftpad_register_plugin).
function(ftpad_add_gcc_plugin target)
  cmake_parse_arguments(ARG "" "COMPILER;OUTPUT_DIR;INSTALL_DIR" "SOURCES;LIBRARIES" ${ARGN})
  ftpad_gcc_plugin_dir(${ARG_COMPILER} plugin_dir)
  if(NOT plugin_dir)
    message(FATAL_ERROR "ftpad: no GCC plugin headers for ${ARG_COMPILER}")
  endif()
  ftpad_gcc_describe(${ARG_COMPILER} arch major)
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
  if(ARG_LIBRARIES)
    target_link_libraries(${target} PRIVATE ${ARG_LIBRARIES})
  endif()
  set(FTPAD_GCC_PLUGIN_ARCH_${target} ${arch} PARENT_SCOPE)
  if(ARG_INSTALL_DIR)
    install(TARGETS ${target} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/${ARG_INSTALL_DIR})
    ftpad_register_plugin(gcc ${arch} ${major} ${ARG_COMPILER}
      ${ARG_OUTPUT_DIR}/ftpad.so ${ARG_INSTALL_DIR}/ftpad.so)
  endif()
endfunction()

# ftpad_add_versioned_gcc_plugin(<gcc> SOURCES <src>... [LIBRARIES <lib>...])
# The plugin for one more GCC (gcc-11, aarch64-linux-gnu-gcc-11, ...), in
# <build>/gcc-plugin/<name>/ftpad.so and <libdir>/ftpad/<name>/ftpad.so,
# where <name> is gcc-<major>, behind "<arch>-" for a cross compiler.  A gcc
# or plugin headers that are missing skip it: the build goes on with the
# compilers the machine has.  A gcc that is one of the default plugins'
# (gcc-12 today) gets a link to that plugin, not a second build.
function(ftpad_add_versioned_gcc_plugin compiler)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  string(MAKE_C_IDENTIFIER "${compiler}" id)
  find_program(FTPAD_GCC_PATH_${id} ${compiler})
  if(NOT FTPAD_GCC_PATH_${id})
    message(STATUS "ftpad: ${compiler} not found; not building its GCC plugin"
      " (scripts/install-deps.sh installs it)")
    return()
  endif()
  set(path ${FTPAD_GCC_PATH_${id}})
  ftpad_gcc_plugin_dir(${path} plugin_dir)
  if(NOT plugin_dir)
    message(STATUS "ftpad: no plugin headers for ${compiler}; not building its GCC plugin"
      " (scripts/install-deps.sh installs its gcc-N-plugin-dev)")
    return()
  endif()
  ftpad_gcc_describe(${path} arch major)
  ftpad_gcc_describe(${FTPAD_HOST_GCC} host_arch host_major)
  set(name gcc-${major})
  if(NOT arch STREQUAL host_arch)
    set(name ${arch}-${name})
  endif()
  set(out_dir ${CMAKE_CURRENT_BINARY_DIR}/${name})
  get_property(built GLOBAL PROPERTY FTPAD_PLUGIN_BUILT_gcc_${arch}_${major})
  if(built)
    file(MAKE_DIRECTORY ${out_dir})
    file(RELATIVE_PATH link ${out_dir} ${built})
    file(CREATE_LINK ${link} ${out_dir}/ftpad.so SYMBOLIC)
    return()
  endif()
  string(MAKE_C_IDENTIFIER "ftpad_gcc_plugin_${name}" target)
  ftpad_add_gcc_plugin(${target}
    COMPILER ${path} OUTPUT_DIR ${out_dir}
    SOURCES ${ARG_SOURCES} LIBRARIES ${ARG_LIBRARIES}
    INSTALL_DIR ftpad/${name})
endfunction()
