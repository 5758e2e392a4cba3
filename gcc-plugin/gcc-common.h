// SPDX-License-Identifier: MIT
// gcc-common.h - every GCC header the ftpad plugin needs, in the order GCC 12
// requires (memmodel.h before emit-rtl.h, stringpool.h before attribs.h),
// and the shims for the GCC versions whose API differs.  Keep GCC includes
// here and nowhere else.
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

// Where GCC's plugin API differs between the versions ftpad is built for
// (GCC 11 and 12, Debian 12's), the difference is bridged here, once, so
// that the passes are written against GCC 12's API alone.

#if GCCPLUGIN_VERSION_MAJOR < 12
// GCC 12 gave mark_dfs_back_edges the function to walk; GCC 11's walks
// cfun.  The plugin only asks about the function being compiled.
static inline bool ftpad_mark_dfs_back_edges(function *fn)
{
	gcc_assert(fn == cfun);
	return mark_dfs_back_edges();
}
#define mark_dfs_back_edges(fn) ftpad_mark_dfs_back_edges(fn)
#endif

#endif
