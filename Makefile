# SPDX-License-Identifier: MIT
# A thin wrapper around CMake: `make`, `make demo`, `make check`,
# `make install PREFIX=... [DESTDIR=...]`.  The build is out of tree, in $(BUILD).
BUILD ?= build
PREFIX ?= /usr/local
PYTHON ?= /usr/bin/python3
CMAKE_FLAGS ?=

.PHONY: all deps demo-deps configure demo check install clean

all: configure
	cmake --build $(BUILD) -j $$(nproc)

# Install whatever Debian packages are missing (apt-get, as root): all that
# the test suite needs, or for the demo only the build's own.
deps:
	scripts/install-deps.sh

demo-deps:
	scripts/install-deps.sh --demo

# CMake writes the Makefile last: a configure that failed (say, before
# scripts/install-deps.sh ran) is run again rather than left half done.
configure:
	@test -f $(BUILD)/Makefile || \
	  cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS)

demo: demo-deps
	$(MAKE) all
	examples/demo.sh $(BUILD)

check: deps
	$(MAKE) all
	scripts/run-tests.sh $(BUILD)

# DESTDIR stages the tree for a package: files go to $(DESTDIR)$(PREFIX),
# and everything installed still finds its prefix from its own place.
install: all
	DESTDIR='$(DESTDIR)' cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD)
