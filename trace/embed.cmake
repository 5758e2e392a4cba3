# SPDX-License-Identifier: MIT
# Makes a text file a C array, at build time:
#   cmake -DINPUT=flame.js -DOUTPUT=flame_script.c -DNAME=flame_script -P embed.cmake
# gives `const char NAME[] = { ..., 0 };`, the file's bytes NUL-terminated,
# less its leading `//` comment lines (the licence and the file's header,
# which the output has no use for).  Bytes, not a string literal: no
# escaping to get wrong, and no compiler limit on a literal's length.
file(READ "${INPUT}" text)
string(REGEX REPLACE "^(//[^\n]*\n)+" "" text "${text}")
string(HEX "${text}" hex)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
# 16 bytes a line (CMake's regular expressions have no {16})
string(REPEAT "0x..," 16 line)
string(REGEX REPLACE "(${line})" "\\1\n\t" bytes "${bytes}")
get_filename_component(input_name "${INPUT}" NAME)
file(WRITE "${OUTPUT}.tmp"
  "/* Generated from ${input_name} by embed.cmake: edit ${input_name}, not this. */\n"
  "const char ${NAME}[] = {\n\t${bytes}0\n};\n")
# Replaced only when it changes, so that nothing rebuilds for nothing.
configure_file("${OUTPUT}.tmp" "${OUTPUT}" COPYONLY)
file(REMOVE "${OUTPUT}.tmp")
