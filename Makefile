# localauth: the PAM module (Embedded Swift + C shim), tests, demonstration.
#   make            build .build/module/pam_localauth.so
#   make demo       build and run the demonstration
#   make test       unit tests (swift test), integration tests (real libpam),
#                   the unit suite under ASan and a short run of each fuzzer
#   make install    PREFIX=/usr/local DESTDIR= ; module into the system's PAM dir
#   make deb        the Debian package, in .build/deb
SHELL := /bin/bash
PREFIX ?= /usr/local
DESTDIR ?=
SWIFTC ?= swiftc
CC ?= cc
PYTHON ?= /usr/bin/python3
BUILD := .build/module
# Asked from the system: where libpam keeps its modules.
PAMDIR ?= $(shell d=$$(pkg-config --variable=securedir pam 2>/dev/null); \
	[ -n "$$d" ] || d=$$(pkg-config --variable=libdir pam 2>/dev/null)/security; echo $$d)
SYSCONFDIR ?= /etc
# Only the benchmark sets this (a build without sync, never installed).
SWIFT_DEFINES ?=

# The module and the helper are Embedded Swift, built over Package.swift's
# module graph one Swift module at a time (docs/DESIGN.md's layout names
# each; tests/package/test_layout.py checks the rules below against
# Package.swift). Warnings are errors here as in `swift build`.
TRIPLE := $(shell uname -m)-unknown-linux-gnu
MODULES := $(BUILD)/modules
C_INCLUDES := -I Sources/CMemory/include -I Sources/CLibc/include -I Sources/CPAMAndBus/include
EMBEDDED_PROGRAM_FLAGS := -target $(TRIPLE) -enable-experimental-feature Embedded -wmo -Osize \
	-Xfrontend -function-sections -warnings-as-errors $(C_INCLUDES) -I $(MODULES)
EMBEDDED_FLAGS := $(EMBEDDED_PROGRAM_FLAGS) -parse-as-library
CFLAGS_MODULE := -O2 -fPIC -Wall -Wextra -Werror -fstack-protector-strong -D_FORTIFY_SOURCE=2 $(C_INCLUDES)
# Linked by the Swift toolchain's lld with packed relative relocations
# (glibc 2.36 and later load them; the package's Depends says so): the
# module's relocation table shrinks from about 11 KiB to a few hundred bytes,
# and lld lays out the sections more tightly than ld.bfd. 16 KiB of the
# module's 265 KiB, with the same hardening (-z now, -z relro, and code on
# pages of its own: lld's default would map the tail of the read-only data
# executable, so -z separate-code is said).
LDFLAGS_COMMON := -fuse-ld=lld -Wl,-z,pack-relative-relocs -Wl,-z,separate-code -Wl,-z,now -Wl,-z,relro \
	-Wl,--gc-sections -Wl,--as-needed
LDFLAGS_MODULE := -shared -Wl,--version-script=Sources/PAMModuleExports/pam_localauth.map -Wl,-z,defs $(LDFLAGS_COMMON)
LIBS_MODULE := -lpam -lsystemd
C_HEADERS := $(wildcard Sources/CMemory/include/*) $(wildcard Sources/CLibc/include/*) $(wildcard Sources/CPAMAndBus/include/*)
LIBRARY_SOURCES := $(wildcard Sources/LocalAuth/*.swift)
SYSTEM_SOURCES := $(wildcard Sources/LibcSystem/*.swift)
ADAPTER_SOURCES := $(wildcard Sources/PAMAndBusAdapters/*.swift)
ENTRY_SOURCES := $(wildcard Sources/PAMModule/*.swift)
HELPER_SOURCES := $(wildcard Sources/LocalAuthHelper/*.swift)
SECRETS_SOURCES := $(wildcard Sources/Secrets/*.swift)
HELPER_OBJECTS := $(BUILD)/LocalAuthHelper.o $(BUILD)/libc_shim.o $(BUILD)/system_shim.o \
	$(BUILD)/LocalAuth.o $(BUILD)/LibcSystem.o $(BUILD)/PAMAndBusAdapters.o $(BUILD)/Secrets.o $(BUILD)/tpm_seal.o
# The secrets' crypto is libsodium's, linked into the helper only (never the
# module), and statically: Debian 12 and 13 ship libsodium.so.23, Debian 14
# libsodium.so.26, and one package serves all three (a libsodium fix means a
# new package, as for any static library).
LIBS_HELPER := $(LIBS_MODULE) -l:libsodium.a
LDFLAGS_HELPER := -pie $(LDFLAGS_COMMON)
# Where the module, the helper's callers and the package find the helper:
# declared once, in Sources/CLibc/include/libc_shim.h (la_helper_path), and
# read from there, so the installed path and the compiled one cannot differ.
HELPER_PATH := $(shell sed -n 's/^static inline const char \*la_helper_path(void) { return "\([^"]*\)"; }$$/\1/p' \
	Sources/CLibc/include/libc_shim.h)
ifeq ($(HELPER_PATH),)
$(error cannot read the helper path from Sources/CLibc/include/libc_shim.h)
endif
override LIBEXECDIR := $(patsubst %/,%,$(dir $(HELPER_PATH)))
MODULE_OBJECTS := $(BUILD)/pam_localauth.o $(BUILD)/libc_shim.o $(BUILD)/system_shim.o \
	$(BUILD)/LocalAuth.o $(BUILD)/LibcSystem.o $(BUILD)/PAMAndBusAdapters.o $(BUILD)/PAMModule.o

.PHONY: all module cli demo test unit-test integration-test install uninstall clean deps build-deps tools test-artifacts helper-path

all: module

module: $(BUILD)/pam_localauth.so $(BUILD)/localauth-helper

# The helper's installed path, for scripts (tools/mkdeb.sh, the tests).
helper-path:
	@echo $(HELPER_PATH)

# One Swift module at a time, as SwiftPM builds them: a module's interface
# is emitted beside its object for the modules that import it. Generic code
# is compiled where it is specialized (in Embedded Swift, in the importing
# module), and swiftc leaves an object file alone when its bytes did not
# change: so each step touches its object, and every module downstream of a
# change is compiled again.
$(BUILD)/LocalAuth.o: $(LIBRARY_SOURCES) $(C_HEADERS)
	@mkdir -p $(MODULES)
	$(SWIFTC) $(EMBEDDED_FLAGS) -module-name LocalAuth -emit-module -emit-module-path $(MODULES)/LocalAuth.swiftmodule \
		-c $(LIBRARY_SOURCES) -o $@
	@touch $@

$(BUILD)/LibcSystem.o: $(SYSTEM_SOURCES) $(BUILD)/LocalAuth.o
	$(SWIFTC) $(EMBEDDED_FLAGS) $(SWIFT_DEFINES) -module-name LibcSystem -emit-module \
		-emit-module-path $(MODULES)/LibcSystem.swiftmodule -c $(SYSTEM_SOURCES) -o $@
	@touch $@

$(BUILD)/PAMAndBusAdapters.o: $(ADAPTER_SOURCES) $(BUILD)/LibcSystem.o $(BUILD)/LocalAuth.o
	$(SWIFTC) $(EMBEDDED_FLAGS) -module-name PAMAndBusAdapters -emit-module -emit-module-path $(MODULES)/PAMAndBusAdapters.swiftmodule \
		-c $(ADAPTER_SOURCES) -o $@
	@touch $@

$(BUILD)/PAMModule.o: $(ENTRY_SOURCES) $(BUILD)/PAMAndBusAdapters.o $(BUILD)/LibcSystem.o $(BUILD)/LocalAuth.o
	$(SWIFTC) $(EMBEDDED_FLAGS) -module-name PAMModule -c $(ENTRY_SOURCES) -o $@
	@touch $@

$(BUILD)/pam_localauth.o: Sources/PAMModuleExports/pam_localauth.c
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS_MODULE) -c $< -o $@

$(BUILD)/libc_shim.o: Sources/CLibc/libc_shim.c $(C_HEADERS)
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS_MODULE) -c $< -o $@

$(BUILD)/system_shim.o: Sources/CPAMAndBus/system_shim.c $(C_HEADERS)
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS_MODULE) -c $< -o $@

$(BUILD)/tpm_seal.o: Sources/CTPM/tpm_seal.c $(wildcard Sources/CTPM/include/*)
	@mkdir -p $(BUILD)
	$(CC) $(CFLAGS_MODULE) -I Sources/CTPM/include -c $< -o $@

# The link map beside it tells the benchmark what each part of the code
# costs in the module (tools/bench_footprint.py).
$(BUILD)/pam_localauth.so: $(MODULE_OBJECTS) Sources/PAMModuleExports/pam_localauth.map
	$(CC) $(LDFLAGS_MODULE) -Wl,-Map=$(BUILD)/pam_localauth.linkmap -o $@.tmp $(MODULE_OBJECTS) $(LIBS_MODULE)
	strip --strip-unneeded $@.tmp
	mv -f $@.tmp $@  # a new inode: processes that have the old module mapped keep it

# The stored secrets, over libsodium, and the machine key's TPM seal (tpm2-tss,
# loaded with dlopen when first needed: nothing to link): the helper's alone.
$(BUILD)/Secrets.o: $(SECRETS_SOURCES) $(BUILD)/LibcSystem.o $(BUILD)/LocalAuth.o $(wildcard Sources/CSodium/include/*) \
		$(wildcard Sources/CTPM/include/*)
	$(SWIFTC) $(EMBEDDED_FLAGS) -I Sources/CSodium/include -I Sources/CTPM/include -module-name Secrets -emit-module \
		-emit-module-path $(MODULES)/Secrets.swiftmodule -c $(SECRETS_SOURCES) -o $@
	@touch $@

# The setuid helper: Embedded Swift over the same library and adapters as
# the module, and the secrets, linked as a position-independent executable.
$(BUILD)/LocalAuthHelper.o: $(HELPER_SOURCES) $(BUILD)/PAMAndBusAdapters.o $(BUILD)/LibcSystem.o $(BUILD)/LocalAuth.o $(BUILD)/Secrets.o
	$(SWIFTC) $(EMBEDDED_PROGRAM_FLAGS) -I Sources/CSodium/include -I Sources/CTPM/include -module-name LocalAuthHelper -c $(HELPER_SOURCES) -o $@
	@touch $@

$(BUILD)/localauth-helper: $(HELPER_OBJECTS)
	$(CC) $(LDFLAGS_HELPER) -o $@.tmp $(HELPER_OBJECTS) $(LIBS_HELPER)
	strip --strip-unneeded $@.tmp
	mv -f $@.tmp $@

# Test programs: the libpam harness and the store probe (ordinary Swift).
$(BUILD)/pamharness: tests/support/programs/pamharness.c
	@mkdir -p $(BUILD)
	$(CC) -O1 -g -Wall -Wextra -Werror -pthread -o $@ $< -lpam -ldl

# Every test artifact, built in one place: the module, the libpam harness,
# the Claim-delaying shim of the broadcast test, and the Swift products (the
# localauth command and the store probe).
$(BUILD)/pam_keeptok.so: tests/support/programs/keeptok.c
	$(CC) -O1 -Wall -Wextra -Werror -shared -fPIC -o $@ $< -lpam

$(BUILD)/claimdelay.so: tests/support/programs/claimdelay.c
	@mkdir -p $(BUILD)
	$(CC) -O1 -Wall -Wextra -Werror -shared -fPIC -o $@ $< -lsystemd

# The journal of record writes and syncs, for the power-cut test.
$(BUILD)/crashlog.so: tests/support/programs/crashlog.c
	@mkdir -p $(BUILD)
	$(CC) -O1 -Wall -Wextra -Werror -shared -fPIC -o $@ $< -ldl

# Chosen system calls that fail, and a directory swapped mid-prompt (tests/faults/test_faults.py).
$(BUILD)/faultinject.so: tests/support/programs/faultinject.c
	@mkdir -p $(BUILD)
	$(CC) -O1 -Wall -Wextra -Werror -shared -fPIC -o $@ $< -ldl

# A PAM conversation as GDM's session worker runs it (tests/desktop/test_gnome.py).
$(BUILD)/gdmworker: tests/support/programs/gdmworker.c
	@mkdir -p $(BUILD)
	$(CC) -O1 -Wall -Wextra -Werror -pthread -o $@ $< -lpam

# A misbehaving stand-in for the helper, for the module's client tests.
$(BUILD)/fakehelper: tests/support/programs/fakehelper.c
	@mkdir -p $(BUILD)
	$(CC) -O1 -Wall -Wextra -Werror -o $@ $<

# A polkit agent that behaves as GNOME Shell's dialog does, under its
# program name (tests/desktop/test_polkit.py).
$(BUILD)/dialogagent/gnome-shell: tests/support/programs/dialogagent.c
	@mkdir -p $(BUILD)/dialogagent
	$(CC) -O1 -Wall -Wextra -Werror -o $@ $< $$(pkg-config --cflags --libs polkit-agent-1)

test-artifacts: module $(BUILD)/pamharness $(BUILD)/claimdelay.so $(BUILD)/crashlog.so $(BUILD)/faultinject.so $(BUILD)/fakehelper \
	$(BUILD)/pam_keeptok.so $(BUILD)/gdmworker $(BUILD)/dialogagent/gnome-shell
	swift build

tools: test-artifacts

deps:
	bash tools/install-deps.sh

# Only what building needs (the module, the tool, the package).
build-deps:
	bash tools/install-deps.sh build

demo: module $(BUILD)/pamharness
	$(PYTHON) tools/demo.py

unit-test:
	swift test

integration-test: test-artifacts
	tools/isolated $(PYTHON) -m pytest -q tests

test: unit-test integration-test release-test check-quick

# The release tier: the real programs (sudo, su, login, doas), polkit with
# pkexec and its agents, the screen lockers, the login screens' stacks and
# the package's lifecycle, run again in a root of a later Debian release
# made from the package archive and entered by tools/in-release, with the
# package and the test programs built here. `make test` (and so CI) runs it
# on Debian 13; `make test-releases` runs what does not fit in CI.
RELEASE ?= trixie
RELEASE_TIER := tests/programs/test_real_programs.py tests/programs/test_doas.py tests/programs/test_lockers.py \
	tests/programs/test_plasma6_lockscreen.py tests/apps/test_secrets_tpm.py \
	tests/desktop/test_polkit.py tests/desktop/test_gnome.py tests/desktop/test_display_managers.py \
	tests/package/test_package.py
.PHONY: release-test test-releases
release-test: test-artifacts module cli
	deb=$$(DEB_OUT=.build/release-deb bash tools/mkdeb.sh | tail -n 1) && \
		LOCALAUTH_DEB="$(CURDIR)/$$deb" tools/in-release $(RELEASE) /usr/bin/python3 -m pytest -q $(RELEASE_TIER)
test-releases:
	$(MAKE) release-test RELEASE=forky

# The quick forms of the long checks, part of `make test` (and so of CI): the
# unit suite under ASan and each fuzz target for FUZZ_QUICK_SECONDS. The
# fault table, the memcheck and memory-scan tests and a short load run are
# in the integration suite; the long forms are `make fuzz`, `make load`,
# `make check-tsan` and `make check-valgrind`.
FUZZ_QUICK_SECONDS ?= 15
.PHONY: check-quick
check-quick: check-asan
	$(MAKE) fuzz FUZZ_SECONDS=$(FUZZ_QUICK_SECONDS)

# The unit suite under AddressSanitizer (with LeakSanitizer) and under
# ThreadSanitizer, each in its own build directory; any report fails the run.
.PHONY: check-asan check-tsan check-valgrind
check-asan:
	swift build --build-tests --sanitize=address --scratch-path .build/asan
	ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 LSAN_OPTIONS="suppressions='$(CURDIR)/tools/lsan-suppressions.txt'" \
		swift test --skip-build --sanitize=address --scratch-path .build/asan
check-tsan:
	swift build --build-tests --sanitize=thread --scratch-path .build/tsan
	TSAN_OPTIONS=halt_on_error=1 swift test --skip-build --sanitize=thread --scratch-path .build/tsan

# The real module through real libpam under valgrind memcheck (errors and
# definite leaks of ours, suppressions in tools/valgrind.supp), and the scan
# of the process for copies of the password (tests/module/test_memory.py).
check-valgrind: test-artifacts
	$(PYTHON) -m pytest -q tests/module/test_memory.py

# The command-line tool: release build with the Swift runtime linked in, so
# the installed binary needs nothing from the toolchain.
CLI_BUILD := .build/cli
cli:
	swift build -c release --product localauth --static-swift-stdlib --disable-local-rpath \
		-Xlinker -z -Xlinker now -Xlinker -z -Xlinker relro --scratch-path $(CLI_BUILD)

MANPAGES := man/pam_localauth.8 man/localauth.1 man/localauth.conf.5
# Stacks for one service each, installed as examples (the distribution's own
# files for these services are never overwritten).
EXAMPLE_STACKS := sudo sudo-biometrics su login i3lock swaylock xscreensaver xsecurelock hyprlock vlock gdm-fingerprint \
	kde-fingerprint

install: module cli
	install -d $(DESTDIR)$(PAMDIR) $(DESTDIR)$(SYSCONFDIR)/pam.d $(DESTDIR)$(SYSCONFDIR)/security $(DESTDIR)$(LIBEXECDIR) \
		$(DESTDIR)$(PREFIX)/share/localauth/pam.d \
		$(DESTDIR)$(PREFIX)/bin $(DESTDIR)/usr/share/pam-configs \
		$(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 0644 $(BUILD)/pam_localauth.so $(DESTDIR)$(PAMDIR)/pam_localauth.so
	install -s -m 0755 "$$(swift build -c release --scratch-path $(CLI_BUILD) --show-bin-path)/localauth" $(DESTDIR)$(PREFIX)/bin/localauth
	install -m 0644 pam.d/localauth-passcode $(DESTDIR)$(SYSCONFDIR)/pam.d/localauth-passcode
	install -o root -g root -m 4755 $(BUILD)/localauth-helper $(DESTDIR)$(HELPER_PATH)
	for f in $(EXAMPLE_STACKS); do install -m 0644 pam.d/$$f $(DESTDIR)$(PREFIX)/share/localauth/pam.d/$$f; done
	for f in gdm-fingerprint kde-fingerprint; do install -m 0755 packaging/fingerprint-stack $(DESTDIR)$(PREFIX)/share/localauth/$$f; done
	install -m 0755 packaging/git-credential-localauth $(DESTDIR)$(PREFIX)/bin/git-credential-localauth
	test -e $(DESTDIR)$(SYSCONFDIR)/security/localauth.conf || \
		install -m 0644 config/localauth.conf $(DESTDIR)$(SYSCONFDIR)/security/localauth.conf
	install -m 0644 config/pam-auth-update.localauth $(DESTDIR)/usr/share/pam-configs/localauth
	install -D -m 0644 packaging/polkit-agent-helper-localauth.conf \
		$(DESTDIR)/usr/lib/systemd/system/polkit-agent-helper@.service.d/50-localauth.conf
	install -D -m 0644 packaging/localauth.tmpfiles $(DESTDIR)/usr/lib/tmpfiles.d/localauth.conf
	install -m 0644 man/localauth.1 $(DESTDIR)$(PREFIX)/share/man/man1/localauth.1
	install -m 0644 man/git-credential-localauth.1 $(DESTDIR)$(PREFIX)/share/man/man1/git-credential-localauth.1
	install -m 0644 man/localauth.conf.5 $(DESTDIR)$(PREFIX)/share/man/man5/localauth.conf.5
	install -m 0644 man/pam_localauth.8 $(DESTDIR)$(PREFIX)/share/man/man8/pam_localauth.8
	install -d -m 0700 $(DESTDIR)/var/lib/localauth

# The Debian package (tools/mkdeb.sh, packaging/debian): .build/deb/
# localauth_<version>_<arch>.deb; DEB_VERSION and DEB_OUT override the
# version (the changelog's) and the directory.
.PHONY: deb
deb: module cli
	bash tools/mkdeb.sh

# Leaves /etc/security/localauth.conf (it may hold the administrator's
# settings) and /var/lib/localauth (the attempt state).
# Refused where the Debian package owns the files: removing them under dpkg
# would leave an enabled profile naming a missing module.
uninstall:
	@status=$$(dpkg-query -W -f='$${db:Status-Status}' localauth 2>/dev/null || true); \
	if [ -z "$(DESTDIR)" ] && [ -n "$$status" ] && [ "$$status" != not-installed ] && [ "$$status" != config-files ]; then \
		echo "make uninstall: the localauth package is installed; remove it with apt instead" >&2; exit 1; fi
	rm -f $(DESTDIR)$(HELPER_PATH)
	-rmdir $(DESTDIR)$(LIBEXECDIR)
	rm -rf $(DESTDIR)$(PREFIX)/share/localauth
	rm -f $(DESTDIR)$(PAMDIR)/pam_localauth.so $(DESTDIR)$(SYSCONFDIR)/pam.d/localauth-passcode \
		$(DESTDIR)$(PREFIX)/bin/localauth $(DESTDIR)$(PREFIX)/bin/git-credential-localauth $(DESTDIR)/usr/share/pam-configs/localauth \
		$(DESTDIR)$(PREFIX)/share/man/man1/localauth.1 $(DESTDIR)$(PREFIX)/share/man/man1/git-credential-localauth.1 \
		$(DESTDIR)$(PREFIX)/share/man/man5/localauth.conf.5 \
		$(DESTDIR)$(PREFIX)/share/man/man8/pam_localauth.8 \
		$(DESTDIR)/usr/lib/systemd/system/polkit-agent-helper@.service.d/50-localauth.conf \
		$(DESTDIR)/usr/lib/tmpfiles.d/localauth.conf
	-rmdir $(DESTDIR)/usr/lib/systemd/system/polkit-agent-helper@.service.d

clean:
	rm -rf .build

.PHONY: bench
# The benchmark: ratios against pam_fprintd and pam_faillock, written to
# docs/PERFORMANCE.md. Besides the module it builds a copy that never waits
# for the disk (to show what durability costs; never installed), the
# loader timer, the match's floor client and a release build of the store
# probe; the sudo, su and app rows run in the tests' private worlds (their artifacts),
# in tools/isolated's namespace: the worlds hold a setuid copy of the helper.
BENCH_BUILD := .build/bench
bench: test-artifacts $(BENCH_BUILD)/loadtime $(BENCH_BUILD)/matchfloor
	$(MAKE) BUILD=.build/bench-nosync SWIFT_DEFINES=-DLOCALAUTH_BENCHMARK_WITHOUT_SYNC .build/bench-nosync/pam_localauth.so
	swift build -c release --product la-store-probe --scratch-path .build/bench-probe
	tools/isolated $(PYTHON) tools/bench.py --write docs/PERFORMANCE.md $(BENCH_ARGS)

$(BENCH_BUILD)/loadtime: tools/loadtime.c
	@mkdir -p $(BENCH_BUILD)
	$(CC) -O2 -Wall -Wextra -Werror -o $@ $< -lpam -ldl

$(BENCH_BUILD)/matchfloor: tools/matchfloor.c
	@mkdir -p $(BENCH_BUILD)
	$(CC) -O2 -Wall -Wextra -Werror -o $@ $< -lsystemd

# Fuzzing (libFuzzer through swiftc -sanitize=fuzzer,address): one target
# each for the record file, the options (configuration file and stack line),
# the helper's frames (both directions) and the stack lint's parser. The
# library is compiled once with coverage and ASan; each target runs for
# FUZZ_SECONDS from its seed corpus in Fuzz/corpus (copied, so the repo's
# seeds never change); what it finds lands in .build/fuzz/findings.
FUZZ_BUILD := .build/fuzz
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := record options frames lint replies
FUZZ_SWIFT := $(SWIFTC) -sanitize=fuzzer,address -parse-as-library -O -g -I Sources/CMemory/include -I $(FUZZ_BUILD)/modules

$(FUZZ_BUILD)/LocalAuth.o: $(LIBRARY_SOURCES) $(C_HEADERS)
	@mkdir -p $(FUZZ_BUILD)/modules
	$(FUZZ_SWIFT) -wmo -module-name LocalAuth -emit-module -emit-module-path $(FUZZ_BUILD)/modules/LocalAuth.swiftmodule \
		-c $(LIBRARY_SOURCES) -o $@

STACKLINT_SOURCES := $(wildcard Sources/StackLint/*.swift)
$(FUZZ_BUILD)/StackLint.o: $(STACKLINT_SOURCES) $(FUZZ_BUILD)/LocalAuth.o
	$(FUZZ_SWIFT) -wmo -module-name StackLint -emit-module -emit-module-path $(FUZZ_BUILD)/modules/StackLint.swiftmodule \
		-c $(STACKLINT_SOURCES) -o $@

FUZZ_LIBRARY := $(FUZZ_BUILD)/LocalAuth.o $(FUZZ_BUILD)/StackLint.o

$(FUZZ_BUILD)/fuzz-record: Fuzz/FuzzEntry.swift Fuzz/FuzzRecord.swift $(FUZZ_LIBRARY)
	$(FUZZ_SWIFT) -module-name FuzzRecord Fuzz/FuzzEntry.swift Fuzz/FuzzRecord.swift $(FUZZ_LIBRARY) -o $@
$(FUZZ_BUILD)/fuzz-options: Fuzz/FuzzEntry.swift Fuzz/FuzzOptions.swift $(FUZZ_LIBRARY)
	$(FUZZ_SWIFT) -module-name FuzzOptions Fuzz/FuzzEntry.swift Fuzz/FuzzOptions.swift $(FUZZ_LIBRARY) -o $@
$(FUZZ_BUILD)/fuzz-frames: Fuzz/FuzzEntry.swift Fuzz/FuzzFrames.swift $(FUZZ_LIBRARY)
	$(FUZZ_SWIFT) -module-name FuzzFrames Fuzz/FuzzEntry.swift Fuzz/FuzzFrames.swift $(FUZZ_LIBRARY) -o $@
$(FUZZ_BUILD)/fuzz-lint: Fuzz/FuzzEntry.swift Fuzz/FuzzLint.swift $(FUZZ_LIBRARY)
	$(FUZZ_SWIFT) -module-name FuzzLint Fuzz/FuzzEntry.swift Fuzz/FuzzLint.swift $(FUZZ_LIBRARY) -o $@
# The replies target plays the engine over the unit tests' own fakes.
FUZZ_FAKES := tests/unit/LocalAuthTests/Fakes.swift tests/unit/LocalAuthTests/SecretBufferSupport.swift
$(FUZZ_BUILD)/fuzz-replies: Fuzz/FuzzEntry.swift Fuzz/FuzzReplies.swift $(FUZZ_FAKES) $(FUZZ_LIBRARY)
	$(FUZZ_SWIFT) -module-name FuzzReplies Fuzz/FuzzEntry.swift Fuzz/FuzzReplies.swift $(FUZZ_FAKES) $(FUZZ_LIBRARY) -o $@

.PHONY: fuzz fuzz-long
fuzz: $(addprefix $(FUZZ_BUILD)/fuzz-,$(FUZZ_TARGETS))
	$(PYTHON) tools/fuzz.py --seconds $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# The long run, outside CI: every target for FUZZ_LONG_SECONDS (an hour),
# FUZZ_JOBS at once (three hours for the five, two at a time), in its own
# corpus; what it reached beyond the seeds is merged into
# Fuzz/corpus/<target> to commit.
FUZZ_LONG_SECONDS ?= 3600
FUZZ_JOBS ?= 2
fuzz-long: $(addprefix $(FUZZ_BUILD)/fuzz-,$(FUZZ_TARGETS))
	$(PYTHON) tools/fuzz.py --keep --jobs $(FUZZ_JOBS) --seconds $(FUZZ_LONG_SECONDS) $(FUZZ_TARGETS)


# The load test (tools/loadtest.py): 32 concurrent PAM transactions for one
# user and 32 for 32 different users, through the real module and real libpam
# against a real fprintd with the virtual reader, in rounds whose counts are
# checked exactly, for LOAD_SECONDS (default 300); it prints what it ran and
# measured and fails on any mismatch. As root. tests/faults/test_load.py is its
# quick form. tools/loadharness.c (built here) runs the soak's workload on
# threads and prints every transaction that does not succeed, to diagnose one.
.PHONY: load
LOAD_SECONDS ?= 300
LOAD_BUILD := .build/load
$(LOAD_BUILD)/loadharness: tools/loadharness.c
	@mkdir -p $(LOAD_BUILD)
	$(CC) -O1 -g -Wall -Wextra -Werror -pthread -o $@ $< -lpam
load: test-artifacts $(LOAD_BUILD)/loadharness
	$(PYTHON) tools/loadtest.py --seconds $(LOAD_SECONDS) $(LOAD_ARGS)
