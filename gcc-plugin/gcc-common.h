// SPDX-License-Identifier: MIT
// gcc-common.h - every GCC header the ftpad plugin needs, in the order GCC 12
// requires (memmodel.h before emit-rtl.h, stringpool.h before attribs.h).
// Keep GCC includes here and nowhere else.
#ifndef FTPAD_GCC_COMMON_H
#define FTPAD_GCC_COMMON_H

#include "gcc-plugin.h"
#include "plugin-version.h"
#include "config.h"
#include "system.h"
#include "coretypes.h"
#include "backend.h"
#include "target.h"
#include "tree.h"
#include "rtl.h"
#include "tree-pass.h"
#include "memmodel.h"
#include "emit-rtl.h"
#include "function.h"
#include "output.h"
#include "stringpool.h"
#include "attribs.h"
#include "cgraph.h"
#include "diagnostic-core.h"
#include "insn-constants.h"
#include "options.h"
#include "varasm.h"
#include "context.h"

#endif
