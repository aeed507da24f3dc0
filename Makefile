# fenceq: the two commands are `make run` and `make test`.
# Every target installs missing Debian packages first (scripts/deps.sh).

BUILD      ?= build
BUILD_TYPE ?= Release
JOBS       ?= $(shell nproc)
PYTHON     := /usr/bin/python3
CMAKE_ARGS ?=

.PHONY: all deps build run demo demo-queue package test test-cpp test-python test-node vectors clean

all: build

deps:
	@scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS) >/dev/null
	@env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL cmake --build $(BUILD) -j $(JOBS)

# The daemon in the foreground on ./var/fenceq.db and ipc://var/fenceqd.sock.
run: build
	@echo "fenceqd: db ./var/fenceq.db, endpoint ipc://var/fenceqd.sock (Ctrl-C stops it)."
	@echo "From this folder, in another terminal: build/bin/fenceq ping"
	@exec $(BUILD)/bin/fenceqd

# The stale-worker story played with the fenceq tool on a temporary daemon.
demo: build
	@scripts/demo.sh $(BUILD)/bin

# The Debian package, $(BUILD)/packages/fenceq_<version>-1_<arch>.deb (CPack;
# see README, "Run as a service"): apt install ./$(BUILD)/packages/fenceq_*.deb
package: build
	@cd $(BUILD) && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL cpack -G DEB

# Two `fenceq work` workers draining a queue, on a temporary daemon.
demo-queue: build
	@scripts/queue_demo.sh $(BUILD)/bin

test: build
	@$(MAKE) --no-print-directory test-cpp test-python test-node

test-cpp:
	@$(PYTHON) protocol/vectors/generate.py --check
	@cd $(BUILD) && ctest -j $(JOBS) --output-on-failure --timeout 300

test-python:
	@cd clients/python && FENCEQD=$(CURDIR)/$(BUILD)/bin/fenceqd $(PYTHON) -m pytest -q tests

test-node:
	@cd clients/node && npm ci --no-audit --no-fund --loglevel=error && \
	  FENCEQD=$(CURDIR)/$(BUILD)/bin/fenceqd npm test

# Rewrite protocol/vectors/*.json from protocol/vectors/generate.py.
vectors:
	@$(PYTHON) protocol/vectors/generate.py

clean:
	rm -rf $(BUILD)
