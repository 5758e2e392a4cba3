#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install the Debian 12 packages ftpad needs, if any are missing.
# docs/dependencies.md says why each one is here.  Needs root only when
# something is missing.
#
#   scripts/install-deps.sh          everything `make check` needs
#   scripts/install-deps.sh --demo   only what `make demo` needs: the build
#                                    and the binutils the demo shows bytes with
set -euo pipefail

# The build, and what examples/demo.sh runs (gcc, nm, objdump).  `make demo`
# installs these alone, so that a fresh machine shows the demo in minutes
# rather than after the whole test suite's compilers, QEMU and Chromium.
# zlib1g-dev: `ftpad dump --pprof` gzips its profile (libelf-dev brings it
# too, but the build uses it by name).
demo_packages=(
  cmake make gcc g++ gcc-12-plugin-dev libelf-dev zlib1g-dev pkg-config binutils
  # the recorder compresses its events files and the viewers read them
  # back (docs/dependencies.md): the build links libzstd
  libzstd-dev
)

case "${1:-}" in
  "") ;;
  --demo) ;;
  *)
    echo "install-deps: error: unknown argument '$1' (expected nothing or --demo)" >&2
    exit 2
    ;;
esac

packages=("${demo_packages[@]}")
[[ "${1:-}" == --demo ]] || packages+=(
  # `ftpad patch` unwinds the stopped threads' stacks with libdw
  # (docs/livepatch.md); without it the command is built without `patch`,
  # which the demo does not use
  libdw-dev
  # tests: real bytes and real linkers
  lld python3-pytest python3-pyelftools python3-capstone
  # make check's two pytest workers (scripts/run-tests.sh)
  python3-pytest-xdist
  # the aarch64 GCC plugin and its tests: the cross compilers, their plugin
  # headers, a static aarch64 libc, and qemu to run the programs
  gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross
  gcc-12-plugin-dev-aarch64-linux-gnu qemu-user
  # recordmcount-ng's differential tests build Linux 6.12's own
  # scripts/recordmcount from this source tarball, once, into /var/cache/ftpad
  linux-source-6.12
  # ... and compare it with recordmcount-ng on objects from these cross
  # compilers (tests/recordmcount/test_recordmcount*.py); i686 stands in for `gcc -m32`,
  # whose gcc-multilib would remove every cross compiler
  gcc-powerpc-linux-gnu gcc-powerpc64-linux-gnu gcc-powerpc64le-linux-gnu
  gcc-s390x-linux-gnu gcc-sh4-linux-gnu gcc-sparc64-linux-gnu gcc-i686-linux-gnu
  # ... and arm (EABI, hard-float) and mips (32/64-bit, both byte orders);
  # qemu-user (below) runs the fixed-up mips test programs
  gcc-arm-linux-gnueabi gcc-arm-linux-gnueabihf gcc-mips-linux-gnu
  gcc-mipsel-linux-gnu gcc-mips64-linux-gnuabi64 gcc-mips64el-linux-gnuabi64
  # the kernel build-and-boot tests (tests/kbuild/test_kbuild_*.py): what Kbuild
  # needs besides gcc, and QEMU plus a static busybox for the initramfs
  bc flex bison cpio qemu-system-x86 qemu-system-arm busybox-static
  # the mips kernel test (tests/kbuild/test_kbuild_mips.py, with gcc-mips-linux-gnu
  # above): a static mips libc for its /init, qemu-system-mips for malta
  libc6-dev-mips-cross qemu-system-mips
  # the clang plugin: the compiler it loads into, and the LLVM and clang
  # headers it is built against
  clang-14 llvm-14-dev libclang-14-dev
  # clang-built kernels (tests/kbuild/test_kbuild_clang.py): Kbuild's LLVM=-14 links
  # with ld.lld-14 and uses llvm-ar-14, llvm-nm-14, llvm-objcopy-14, ...
  lld-14 llvm-14
  # every other compiler Debian 12 ships, each with its own plugin build
  # (tests/plugins/test_compilers.py): GCC 11, native and aarch64 cross, with its
  # plugin headers; clang 13, 15 and 16 with the LLVM and clang headers
  gcc-11 g++-11 gcc-11-plugin-dev
  gcc-11-aarch64-linux-gnu g++-11-aarch64-linux-gnu gcc-11-plugin-dev-aarch64-linux-gnu
  clang-13 llvm-13-dev libclang-13-dev
  clang-15 llvm-15-dev libclang-15-dev
  clang-16 llvm-16-dev libclang-16-dev
  # the real code base the clang plugin's tests build: googletest's sources
  googletest
  # GCC's own patchable-entry tests, unpacked from its source at test time
  gcc-12-source
  # a real code base the GCC plugin builds: binutils, which needs flex and
  # bison for its generated lexers and parsers
  binutils-source flex bison
  # bench/run.py: instruction counts, and XRay as a peer to measure against;
  # libclang-rt-14-dev is also libFuzzer, for recordmcount-ng's fuzz test
  valgrind libclang-rt-14-dev
  # bench/record_overhead.py: uftrace record is the peer of ftpad record.
  uftrace
  # bench/attach.py: bpftrace's uprobes are the peer of ftpad attach
  bpftrace
  # groff checks recordmcount-ng's man page (tests/recordmcount/test_recordmcount_check.py),
  # and man -l the installed man pages (tests/packaging/test_install.py)
  groff-base man-db
  # strace shows libftpad's writes and membarriers (tests/runtime/test_runtime_text.py)
  strace
  # protoc decodes `ftpad dump --perfetto`'s file with Perfetto's schema
  # (tests/trace/test_perfetto.py)
  protobuf-compiler
  # go tool pprof reads `ftpad dump --pprof`'s profile (tests/trace/test_pprof.py)
  golang-go
  # the Debian packages (debian/, tests/packaging/test_debian.py): dpkg-buildpackage
  # with debhelper builds them (fakeroot for a build as a normal user),
  # lintian checks them, and debootstrap makes the throwaway Debian 12 chroot
  # they are installed into
  dpkg-dev debhelper fakeroot lintian debootstrap
  # the plugins under a compiler cache and distributed compiles: ccache must
  # hash the plugin and its policy file, distcc's objects must match local
  # ones (tests/packaging/test_build_caches.py, docs/build-caches.md)
  ccache distcc
  # the real-browser tests (tests/trace/test_browser.py): headless Chromium shows
  # ftpad flame's SVG and speedscope, driven over the DevTools protocol
  chromium python3-websocket
)
# npm installs speedscope (pinned) for tests/trace/test_browser.py, and
# fetches the npm package sqlite3 (pinned) for the SQLite sources it bundles
# (tests/sqlite.py), into /var/cache/ftpad/npm; Debian's npm if no node and
# npm are here already
if [[ "${1:-}" != --demo ]]; then
  command -v npm >/dev/null && command -v node >/dev/null || packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install-deps: installing: ${missing[*]}" >&2
if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: error: missing packages and not root; run as root:" >&2
  echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
