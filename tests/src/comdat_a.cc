// SPDX-License-Identifier: MIT
#include "comdat.h"
int from_a(int x) { return shared_inline(x) + shared_twice(x); }
