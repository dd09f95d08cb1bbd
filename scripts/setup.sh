#!/usr/bin/env bash
# Installs what nomu needs on Debian 12: gcc, make and musl (to build the
# guest programs; gcc's libc6-dev for their glibc build), a Rust toolchain
# (to build nomu), and the everyday commands tests/debian/COMMANDS runs
# under nomu (small Debian packages; the test skips, with the reason, what
# is still missing). Idempotent: it only installs what is missing.
set -euo pipefail

SCRIPT=setup
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

missing=()
command -v gcc >/dev/null || missing+=(gcc)
command -v make >/dev/null || missing+=(make)
[ -f /usr/lib/x86_64-linux-musl/musl-gcc.specs ] || missing+=(musl-tools)
[ -f /usr/lib/x86_64-linux-musl/rcrt1.o ] || missing+=(musl-dev)
[ -f /usr/include/stdio.h ] || missing+=(libc6-dev)
# tests/debian.rs: the commands of tests/debian/COMMANDS (coreutils, grep,
# sed, findutils, diffutils, tar, gzip, perl and mawk are Debian's
# essential or standard set).
command -v git >/dev/null || missing+=(git)
[ -x /usr/bin/python3 ] || missing+=(python3)
command -v sqlite3 >/dev/null || missing+=(sqlite3)
[ -f /usr/lib/python3/dist-packages/lmdb/__init__.py ] || missing+=(python3-lmdb)
command -v xz >/dev/null || missing+=(xz-utils)
command -v bzip2 >/dev/null || missing+=(bzip2)
command -v openssl >/dev/null || missing+=(openssl)
command -v flock >/dev/null || missing+=(util-linux)
export PATH="$HOME/.cargo/bin:$PATH"
command -v cargo >/dev/null || missing+=(cargo)

if [ ${#missing[@]} -gt 0 ]; then
	log "installing ${missing[*]}"
	apt_install "${missing[@]}"
fi

# nomu uses Rust 1.87 features; Debian 12's own rustc is older.
ver=$(rustc --version | awk '{print $2}')
if [ "$(printf '%s\n' 1.87.0 "$ver" | sort -V | head -n1)" != 1.87.0 ]; then
	die "rustc $ver is too old (nomu needs 1.87 or newer; rustup provides it)"
fi
