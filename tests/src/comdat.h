// SPDX-License-Identifier: MIT
// Defined in both translation units of the COMDAT test: each object gets a
// COMDAT copy, and the linker keeps one.
inline __attribute__((noinline)) int shared_inline(int x) { return x * 3 + 1; }
template <typename T> __attribute__((noinline)) T shared_twice(T x) { return x + x; }
