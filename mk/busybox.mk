# The bundled guest userland: busybox 1.35 built from Debian's busybox source
# package with musl, as a no-MMU static-PIE binary, plus a minimal guest root
# ($(BUILD)/root: bin/busybox, applet links, etc/, tmp/, dev/, proc/, ...).
# All the work is in scripts/build-busybox.sh, which is idempotent and installs
# what it needs (as root, from Debian's mirrors).
#
#   make busybox                  build $(BUILD)/root
#   target/release/nomu run --root $(BUILD)/root -- /bin/sh

BUILD ?= build
BUSYBOX_ROOT := $(BUILD)/root
BUSYBOX_BIN  := $(BUSYBOX_ROOT)/bin/busybox

$(BUSYBOX_BIN): scripts/build-busybox.sh
	BUILD=$(BUILD) bash scripts/build-busybox.sh
	@touch $@

.PHONY: busybox
busybox: $(BUSYBOX_BIN)
