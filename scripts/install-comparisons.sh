#!/usr/bin/env bash
# Opt-in: installs the systems `nomu bench` compares nomu with, from Debian's
# packages: user-mode-linux (/usr/bin/linux, UML) and runsc (gVisor), plus
# librsvg2-bin (rsvg-convert, to turn the benchmark's SVG chart into a PNG).
# nomu's own setup (scripts/setup.sh) never needs them; `nomu bench` reports
# whatever is missing as skipped. Idempotent: only installs what is missing.
set -euo pipefail

SCRIPT=install-comparisons
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

missing=()
[ -x /usr/bin/linux ] || missing+=(user-mode-linux)
command -v runsc >/dev/null || missing+=(runsc)
command -v rsvg-convert >/dev/null || missing+=(librsvg2-bin)

if [ ${#missing[@]} -gt 0 ]; then
	log "installing ${missing[*]}"
	apt_install --no-install-recommends "${missing[@]}"
fi
