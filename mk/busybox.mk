# The bundled guest userland: busybox 1.35 built from Debian's busybox source
# package with musl, as static-PIE binaries, each in a minimal guest root
# (bin/busybox, applet links, etc/, tmp/, dev/, proc/, ...):
#
#   $(BUILD)/root       no-MMU: hush as sh, nothing forks (what nomu runs
#                       without fork, and `make run`'s shell)
#   $(BUILD)/root-mmu   with MMU, as upstream's defconfig: ash as sh, fork
#                       (the shell tests run it too, and the job control test)
#
# Both from the one source tree ($(BUILD)/busybox-src). All the work is in
# scripts/build-busybox.sh, which is idempotent and installs what it needs
# (as root, from Debian's mirrors).
#
#   make busybox                  build both roots
#   target/release/nomu run --root $(BUILD)/root -- /bin/sh

BUILD ?= build
BUSYBOX_ROOT := $(BUILD)/root
BUSYBOX_BIN  := $(BUSYBOX_ROOT)/bin/busybox
BUSYBOX_MMU_ROOT := $(BUILD)/root-mmu
BUSYBOX_MMU_BIN  := $(BUSYBOX_MMU_ROOT)/bin/busybox

$(BUSYBOX_BIN): scripts/build-busybox.sh
	BUILD=$(BUILD) bash scripts/build-busybox.sh
	@touch $@

# After the no-MMU build (order only): that one fetches the shared source.
$(BUSYBOX_MMU_BIN): scripts/build-busybox.sh | $(BUSYBOX_BIN)
	BUILD=$(BUILD) bash scripts/build-busybox.sh mmu
	@touch $@

.PHONY: busybox
busybox: $(BUSYBOX_BIN) $(BUSYBOX_MMU_BIN)
