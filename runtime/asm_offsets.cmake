# SPDX-License-Identifier: MIT
# The generated ftpad_asm_offsets.h (arch/asm_offsets.h tells how):
# ftpad_asm_offsets(CC ARCH OUT_DIR FLAGS...) compiles
# arch/asm_offsets_<ARCH>.c with CC -S and writes OUT_DIR/ftpad_asm_offsets.h,
# for the host build (CMakeLists.txt) and the aarch64 cross build
# (aarch64.cmake) alike.  Run as a script (cmake -P, with -DIN= -DOUT=), this
# file turns the assembly's "->NAME VALUE" lines into the header.
if(CMAKE_SCRIPT_MODE_FILE)
  file(STRINGS ${IN} lines REGEX "->[A-Za-z_0-9]+ ")
  set(text "/* Generated from ${SRC} by asm_offsets.cmake: do not edit. */\n")
  string(APPEND text "#ifndef FTPAD_ASM_OFFSETS_H\n#define FTPAD_ASM_OFFSETS_H\n")
  foreach(line ${lines})
    string(REGEX MATCH "->([A-Za-z_0-9]+) (-?[0-9]+)" found "${line}")
    if(NOT found)
      message(FATAL_ERROR "${IN}: cannot read '${line}'")
    endif()
    string(APPEND text "#define ${CMAKE_MATCH_1} ${CMAKE_MATCH_2}\n")
  endforeach()
  string(APPEND text "#endif\n")
  set(old "")
  if(EXISTS ${OUT})
    file(READ ${OUT} old)
  endif()
  if(NOT old STREQUAL text)
    file(WRITE ${OUT} "${text}")
  else()
    file(TOUCH ${OUT}) # up to date now, or make would run this every time
  endif()
  return()
endif()

function(ftpad_asm_offsets cc arch out_dir)
  set(src ${CMAKE_CURRENT_SOURCE_DIR}/arch/asm_offsets_${arch}.c)
  set(asm ${out_dir}/asm_offsets.s)
  add_custom_command(OUTPUT ${out_dir}/ftpad_asm_offsets.h
    COMMAND ${cc} ${ARGN} -MD -MF ${asm}.d -MT ${out_dir}/ftpad_asm_offsets.h -S ${src} -o ${asm}
    COMMAND ${CMAKE_COMMAND} -DIN=${asm} -DOUT=${out_dir}/ftpad_asm_offsets.h
      -DSRC=runtime/arch/asm_offsets_${arch}.c -P ${CMAKE_CURRENT_FUNCTION_LIST_FILE}
    DEPENDS ${src} ${CMAKE_CURRENT_FUNCTION_LIST_FILE}
    DEPFILE ${asm}.d
    COMMENT "${arch}: ftpad_asm_offsets.h"
    VERBATIM)
endfunction()
