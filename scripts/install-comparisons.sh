#!/usr/bin/env bash
# Opt-in: installs the systems `nomu bench` compares nomu with, from Debian's
# packages: user-mode-linux (/usr/bin/linux, UML) and runsc (gVisor), plus
# librsvg2-bin (rsvg-convert, to turn the benchmark's SVG chart into a PNG).
# nomu's own setup (scripts/setup.sh) never needs them; `nomu bench` reports
# whatever is missing as skipped. Idempotent: only installs what is missing.
set -euo pipefail

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
		echo "install-comparisons: need root to run: $*" >&2
		exit 1
	fi
}

missing=()
[ -x /usr/bin/linux ] || missing+=(user-mode-linux)
command -v runsc >/dev/null || missing+=(runsc)
command -v rsvg-convert >/dev/null || missing+=(librsvg2-bin)

if [ ${#missing[@]} -gt 0 ]; then
	echo "install-comparisons: installing ${missing[*]}" >&2
	as_root apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
