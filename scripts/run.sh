#!/usr/bin/env bash
# `make run`: an interactive busybox shell inside nomu on a terminal; without
# one, the scripted demo (and exit with its status).
set -euo pipefail
cd "$(dirname "$0")/.."
nomu=target/release/nomu
root=build/root
cp rootfs/demo.sh "$root/demo.sh"
if [ -t 0 ] && [ -t 1 ]; then
	echo "nomu: busybox hush inside nomu (exit or Ctrl-D to leave)"
	exec "$nomu" run --root "$root" -- /bin/sh -l
fi
exec "$nomu" run --root "$root" -- /bin/sh /demo.sh
