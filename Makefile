# nomu build: the Rust kernel (cargo) and the guest programs its tests run
# (musl static-PIE, musl dynamic PIE, and glibc dynamic PIE from the host).
#
#   make run      set up, build, and run busybox's shell inside nomu
#                 (interactive on a terminal, a scripted demo otherwise)
#   make test     build everything and run the whole test suite
#   make bench    install UML and gVisor (Debian packages, opt-in), build and
#                 run `nomu bench` (BENCH_ARGS="--cpu 0" to pin, for example)

export PATH := $(HOME)/.cargo/bin:$(PATH)

BUILD      := build
NOMU       := target/release/nomu
CARGO      ?= cargo
MUSL_SPECS := /usr/lib/x86_64-linux-musl/musl-gcc.specs
STATIC_PIE_SPECS := $(BUILD)/musl-static-pie.specs
GUEST_CFLAGS := -O2 -g -Wall -Wextra -Wno-unused-parameter -fno-stack-protector -pthread

GUEST_SRC    := $(wildcard tests/guest/*.c)
GUEST_NAMES  := $(patsubst tests/guest/%.c,%,$(GUEST_SRC))
GUEST_STATIC := $(addprefix $(BUILD)/guest/static/,$(GUEST_NAMES))
GUEST_DYN    := $(addprefix $(BUILD)/guest/dynamic/,$(GUEST_NAMES))
GUEST_GLIBC  := $(addprefix $(BUILD)/guest/glibc/,$(GUEST_NAMES))
# glibc's headers declare the sizes of buffers (access attributes); the
# tests hand calls bad buffers on purpose (EFAULT, EINVAL cases).
GLIBC_CFLAGS := $(GUEST_CFLAGS) -Wno-stringop-overflow -Wno-stringop-overread -Wno-nonnull
# Programs for nomu-only tests (tests/cli.rs), and fixed-address (ET_EXEC)
# builds: one at the usual 0x400000, one at 1 GiB (above a small --mem, inside
# the physical window), and one far outside any physical memory.
NOMU_SRC     := $(wildcard tests/nomu/*.c)
NOMU_BINS    := $(patsubst tests/nomu/%.c,$(BUILD)/nomu-tests/%,$(NOMU_SRC))
EXEC_BINS    := $(BUILD)/guest/exec/hello $(BUILD)/guest/exec/hello_high $(BUILD)/guest/exec/far_exit \
                $(BUILD)/guest/exec/fixed_fork
BENCH_BINS   := $(BUILD)/bench/syscall_bench $(BUILD)/bench/secret_populate
DEMO         := $(BUILD)/guest/static/demo

.PHONY: all setup nomu guests bench-bins run demo test bench clean lint fuzz

all: nomu guests bench-bins

setup:
	@scripts/setup.sh

nomu:
	$(CARGO) build --release

guests: $(GUEST_STATIC) $(GUEST_DYN) $(GUEST_GLIBC) $(NOMU_BINS) $(EXEC_BINS) $(BUILD)/root/bin/busybox $(BUILD)/root-mmu/bin/busybox

bench-bins: $(BENCH_BINS)

# Debian's musl-gcc ignores -static-pie and silently makes a dynamic PIE. This
# copy of its specs starts from rcrt1.o and links with --no-dynamic-linker,
# which is what a real static-PIE binary needs.
$(STATIC_PIE_SPECS): $(MUSL_SPECS)
	@mkdir -p $(@D)
	sed -e 's@/Scrt1.o@/rcrt1.o@' \
	    -e 's@^-dynamic-linker [^ ]* -nostdlib .*@-nostdlib -static -pie --no-dynamic-linker -z text@' \
	    $< > $@

$(BUILD)/guest/static/%: tests/guest/%.c tests/guest/nomu_test.h $(STATIC_PIE_SPECS)
	@mkdir -p $(@D)
	gcc -specs=$(STATIC_PIE_SPECS) -fPIE $(GUEST_CFLAGS) $< -o $@

$(BUILD)/guest/dynamic/%: tests/guest/%.c tests/guest/nomu_test.h
	@mkdir -p $(@D)
	musl-gcc -fPIE -pie $(GUEST_CFLAGS) $< -o $@

# The same sources as Debian's own programs are built: plain gcc, glibc's
# dynamic loader and libc from the host root (nomu's default --root /).
$(BUILD)/guest/glibc/%: tests/guest/%.c tests/guest/nomu_test.h
	@mkdir -p $(@D)
	gcc -fPIE -pie $(GLIBC_CFLAGS) $< -o $@

# One static-PIE binary, run natively and under nomu: the same code in both columns.
$(BUILD)/nomu-tests/%: tests/nomu/%.c tests/nomu/raw_syscall.h $(STATIC_PIE_SPECS)
	@mkdir -p $(@D)
	gcc -specs=$(STATIC_PIE_SPECS) -fPIE $(GUEST_CFLAGS) $< -o $@

$(BUILD)/guest/exec/hello: tests/guest/hello.c
	@mkdir -p $(@D)
	musl-gcc -static -no-pie $(GUEST_CFLAGS) $< -o $@

$(BUILD)/guest/exec/hello_high: tests/guest/hello.c
	@mkdir -p $(@D)
	musl-gcc -static -no-pie -Wl,-Ttext-segment=0x40000000 $(GUEST_CFLAGS) $< -o $@

$(BUILD)/guest/exec/fixed_fork: tests/nomu/fixed_fork.c
	@mkdir -p $(@D)
	musl-gcc -static -no-pie $(GUEST_CFLAGS) $< -o $@

$(BUILD)/guest/exec/far_exit: tests/nomu/far_exit.S
	@mkdir -p $(@D)
	gcc -nostdlib -static -no-pie -Wl,-Ttext-segment=0x7e0000000000 $< -o $@

$(BUILD)/bench/syscall_bench: bench/syscall_bench.c $(STATIC_PIE_SPECS)
	@mkdir -p $(@D)
	gcc -specs=$(STATIC_PIE_SPECS) -fPIE $(GUEST_CFLAGS) $< -o $@

$(BUILD)/bench/secret_populate: bench/secret_populate.c $(STATIC_PIE_SPECS)
	@mkdir -p $(@D)
	gcc -specs=$(STATIC_PIE_SPECS) -fPIE $(GUEST_CFLAGS) $< -o $@

include mk/busybox.mk

run: setup nomu $(BUILD)/root/bin/busybox
	scripts/run.sh

demo: setup nomu $(DEMO)
	$(NOMU) run -- $(CURDIR)/$(DEMO)

# Every integration test runs once per entry path; zpoline needs
# vm.mmap_min_addr=0, which the wrapper sets when it may (and restores).
test: setup nomu guests
	$(NOMU) info
	scripts/with-zpoline-sysctl.sh $(CARGO) test --profile ci

# nomu's own syscall fuzzer, long (the test suite runs 10000 calls per
# path): FUZZ_CALLS calls per entry path from seed FUZZ_SEED, nomu's
# survival and everything outside the scratch root checked afterwards.
FUZZ_CALLS ?= 1000000
FUZZ_SEED  ?= $(shell date +%s)
fuzz: setup nomu guests
	@echo "fuzz: seed $(FUZZ_SEED), $(FUZZ_CALLS) calls per entry path"
	NOMU_FUZZ_CALLS=$(FUZZ_CALLS) NOMU_FUZZ_SEED=$(FUZZ_SEED) scripts/with-zpoline-sysctl.sh \
		$(CARGO) test --profile ci --test cli fuzzing_leaves_nomu -- --nocapture

# The comparison systems are installed only here: nothing else needs them.
# zpoline runs only with vm.mmap_min_addr=0 (set and restored by the wrapper).
bench: setup nomu bench-bins $(BUILD)/root/bin/busybox
	scripts/install-comparisons.sh
	scripts/with-zpoline-sysctl.sh $(NOMU) bench $(BENCH_ARGS)

lint:
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings
	@# zpoline runs nomu's kernel with the guest's MXCSR (src/entry/zpoline.rs):
	@# no floating point outside the benchmark's own code.
	@if grep -rnE '\b(f32|f64)\b|_f(32|64)\b' src --include='*.rs' --exclude-dir=bench; then \
		echo "lint: floating point outside src/bench (see the MXCSR note in src/entry/zpoline.rs)"; exit 1; fi
	@# One way to wait (src/kernel/waiter.rs): nothing sleeps in slices to
	@# look again. The timer thread's wait until its next deadline is the
	@# one timed wait, and it is not a guest's.
	@if grep -rnE 'thread::sleep|\.wait_timeout\(|WAIT_SLICE' src --include='*.rs' --exclude-dir=bench \
		| grep -v '^src/kernel/timer.rs:'; then \
		echo "lint: a sleep or timed wait (block through src/kernel/waiter.rs instead)"; exit 1; fi
	@# Host calls on a guest's path go through one stub (src/host/syscall.rs: the return-stack refill, on AMD):
	@# none of libc's wrappers in the file-system calls.
	@if grep -nE 'libc::[a-z_0-9]+\(' src/host/fs.rs; then \
		echo "lint: a libc call in src/host/fs.rs (use host::syscall; see its module comment)"; exit 1; fi

clean:
	rm -rf $(BUILD)
	$(CARGO) clean
