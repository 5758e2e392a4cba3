# SPDX-License-Identifier: MIT
# The list of plugins the build made, one per compiler and version: what
# packaging/ installs and names, and what tests/plugins/test_compilers.py runs over.

# ftpad_register_plugin(<gcc|clang> <arch|any> <major> <driver> <build path> <path under libdir>)
# Lists a plugin that was built, for packaging/ (ftpad-config, the CMake
# package, ftpad.pc) and for the tests (<build>/ftpad-plugins.txt, which
# tests/plugins/test_compilers.py runs over).
function(ftpad_register_plugin kind arch major driver build_path install_path)
  set_property(GLOBAL APPEND PROPERTY FTPAD_PLUGINS
    "${kind}|${arch}|${major}|${driver}|${build_path}|${install_path}")
  set_property(GLOBAL PROPERTY FTPAD_PLUGIN_BUILT_${kind}_${arch}_${major} ${build_path})
endfunction()

# Writes <build>/ftpad-plugins.txt, a line per plugin the build made:
# kind|arch|major|driver|build path|path under libdir (arch is "any" for
# clang, whose plugin serves every target it has a layout for).
function(ftpad_write_plugin_list)
  get_property(plugins GLOBAL PROPERTY FTPAD_PLUGINS)
  list(JOIN plugins "\n" text)
  file(WRITE ${CMAKE_BINARY_DIR}/ftpad-plugins.txt "${text}\n")
endfunction()
