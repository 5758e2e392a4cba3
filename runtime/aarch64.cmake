# SPDX-License-Identifier: MIT
# The aarch64 libftpad, cross-compiled whatever the host is, into
# runtime/aarch64/: libftpad.so and libftpad.a for programs built with the
# aarch64 plugin (tests run them under qemu-aarch64).  CMake allows one
# C compiler per build, so the cross objects are plain custom commands.
# The generic sources are the host's FTPAD_RUNTIME_SOURCES (CMakeLists.txt),
# so a new generic file needs no edit here.
if(FTPAD_ARCH STREQUAL "aarch64")
  return() # the host build is the aarch64 runtime already
endif()
if(NOT FTPAD_AARCH64_GCC_PATH)
  message(STATUS "ftpad: ${FTPAD_AARCH64_GCC} not found; not building the aarch64 runtime")
  return()
endif()
find_program(FTPAD_AARCH64_AR aarch64-linux-gnu-ar)
if(NOT FTPAD_AARCH64_AR)
  set(FTPAD_AARCH64_AR ${CMAKE_AR})
endif()

set(a64_dir ${CMAKE_CURRENT_BINARY_DIR}/aarch64)
set(a64_sources ${FTPAD_RUNTIME_SOURCES})
list(FILTER a64_sources EXCLUDE REGEX "^arch/|^${FTPAD_PAD_DIR}/")
list(APPEND a64_sources arch/aarch64.c arch/aarch64_encode.c arch/trampoline_aarch64.S)
list(TRANSFORM a64_sources PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
list(APPEND a64_sources ${FTPAD_PAD_DIR}/aarch64.c)
# As the host objects: position independent, never padded themselves.
# Branch protection on, so that a BTI program linked with it keeps BTI.
# No aarch64 libzstd on the host: its recorder writes varint-coded blocks
# (the top CMakeLists.txt).
set(a64_flags -std=gnu11 -O2 -g -Wall -Wextra -fPIC -fvisibility=hidden
  -fno-instrument-functions -mbranch-protection=standard -DFTPAD_HAVE_ZSTD=0
  -I${FTPAD_PUBLIC_INCLUDE} -I${FTPAD_PAD_DIR} -I${CMAKE_CURRENT_SOURCE_DIR})

file(MAKE_DIRECTORY ${a64_dir}/obj)
# The trampoline's offsets, as the host's (CMakeLists.txt): a64_dir's
# ftpad_asm_offsets.h, from the cross compiler's view of the structs.
ftpad_asm_offsets(${FTPAD_AARCH64_GCC_PATH} aarch64 ${a64_dir} ${a64_flags})
set(a64_offsets ${a64_dir}/ftpad_asm_offsets.h)
list(APPEND a64_flags -I${a64_dir})
set(a64_objects)
# The hooks interpose glibc's functions: in the shared library only, as on
# the host (CMakeLists.txt); early_preinit.c in the static one only.
set(a64_hooks ${FTPAD_INTERPOSERS})
set(a64_shared_only ${a64_hooks})
list(TRANSFORM a64_shared_only REPLACE "^interpose/" "${a64_dir}/obj/")
list(TRANSFORM a64_shared_only APPEND .o)
list(TRANSFORM a64_hooks PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
set(a64_static_only ${a64_dir}/obj/early_preinit.c.o)
foreach(src ${a64_sources} ${a64_hooks} ${CMAKE_CURRENT_SOURCE_DIR}/early_preinit.c)
  get_filename_component(name ${src} NAME)
  if(src MATCHES "^${FTPAD_PAD_DIR}/")
    set(name pad_${name}) # pad/aarch64.c beside arch/aarch64.c
  endif()
  set(obj ${a64_dir}/obj/${name}.o)
  set(deps ${src})
  if(name STREQUAL "trampoline_aarch64.S")
    list(APPEND deps ${a64_offsets})
  endif()
  add_custom_command(OUTPUT ${obj}
    COMMAND ${FTPAD_AARCH64_GCC_PATH} ${a64_flags} -MD -MF ${obj}.d -c ${src} -o ${obj}
    DEPENDS ${deps}
    DEPFILE ${obj}.d
    COMMENT "aarch64: ${name}"
    VERBATIM)
  if(NOT obj IN_LIST a64_shared_only AND NOT obj IN_LIST a64_static_only)
    list(APPEND a64_objects ${obj})
  endif()
endforeach()

ftpad_version_script(aarch64 ${a64_dir}/libftpad.map)
add_custom_command(OUTPUT ${a64_dir}/libftpad.so
  COMMAND ${FTPAD_AARCH64_GCC_PATH} -shared -o ${a64_dir}/libftpad.so ${a64_objects}
    ${a64_shared_only}
    -Wl,-soname,libftpad.so.1
    -Wl,--version-script=${a64_dir}/libftpad.map
    -Wl,-z,defs -Wl,-z,noexecstack
  COMMAND ${CMAKE_COMMAND} -E create_symlink libftpad.so ${a64_dir}/libftpad.so.1
  DEPENDS ${a64_objects} ${a64_shared_only} ${a64_dir}/libftpad.map
  COMMENT "aarch64: libftpad.so"
  VERBATIM)
add_custom_command(OUTPUT ${a64_dir}/libftpad.a
  COMMAND ${CMAKE_COMMAND} -E rm -f ${a64_dir}/libftpad.a
  COMMAND ${FTPAD_AARCH64_AR} rcs ${a64_dir}/libftpad.a ${a64_objects} ${a64_static_only}
  DEPENDS ${a64_objects} ${a64_static_only}
  COMMENT "aarch64: libftpad.a"
  VERBATIM)
add_custom_target(ftpad_aarch64 ALL
  DEPENDS ${a64_dir}/libftpad.so ${a64_dir}/libftpad.a)
