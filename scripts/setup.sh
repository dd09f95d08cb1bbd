#!/usr/bin/env bash
# Installs what nomu needs on Debian 12: gcc, make and musl (to build the
# guest programs) and a Rust toolchain (to build nomu). Idempotent: it only
# installs what is missing.
set -euo pipefail

SCRIPT=setup
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

missing=()
command -v gcc >/dev/null || missing+=(gcc)
command -v make >/dev/null || missing+=(make)
[ -f /usr/lib/x86_64-linux-musl/musl-gcc.specs ] || missing+=(musl-tools)
[ -f /usr/lib/x86_64-linux-musl/rcrt1.o ] || missing+=(musl-dev)
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
