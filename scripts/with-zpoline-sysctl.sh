#!/usr/bin/env bash
# Runs a command with vm.mmap_min_addr=0, which the zpoline entry path needs
# (its trampoline lives at address 0), when this user may change it; puts
# the old value back afterwards, whatever happens. Without the right to
# change it, the command runs as is and zpoline tests report themselves
# skipped.
set -u
knob=/proc/sys/vm/mmap_min_addr
old=$(cat "$knob" 2>/dev/null || true)
changed=0
if [ -n "$old" ] && [ "$old" != 0 ] && [ -w "$knob" ] && echo 0 2>/dev/null > "$knob"; then
    changed=1
    echo "vm.mmap_min_addr: $old -> 0 for the zpoline runs (restored afterwards)"
fi
restore() {
    if [ "$changed" = 1 ]; then
        echo "$old" > "$knob" && echo "vm.mmap_min_addr: back to $old"
    fi
}
trap restore EXIT
trap 'exit 130' INT TERM
"$@"
