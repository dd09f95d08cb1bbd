#!/usr/bin/env bash
# Builds nomu's bundled guest userland: busybox, from Debian's busybox SOURCE
# package, compiled against musl as a no-MMU static-PIE binary, plus a minimal
# guest root directory around it.
#
#   scripts/build-busybox.sh            build (or bring up to date) $BUILD/root
#
# Environment:
#   BUILD   build directory (default: build, relative to the repository root)
#   JOBS    parallel make jobs (default: nproc)
#
# Idempotent: every step is skipped when its output is already there. Works on a
# fresh Debian 12 machine as root, needing only Debian's package mirrors.
#
# Layout under $BUILD:
#   busybox-src/            apt-get source busybox (the .dsc, tarballs, and the
#                           unpacked, Debian-patched tree busybox-<version>/)
#   busybox-obj/            out-of-tree build directory (.config, objects)
#   busybox-include/        kernel headers (linux/ asm/ asm-generic/ mtd/) for musl
#   busybox-musl.specs      musl-gcc specs that really link static-PIE
#   musl-static-pie-cc      the compiler driver busybox is built with
#   root/                   the guest root: bin/busybox, applet links, etc/, ...
set -euo pipefail

log() { echo "build-busybox: $*" >&2; }
die() {
	echo "build-busybox: error: $*" >&2
	exit 1
}

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
		die "need root to run: $*"
	fi
}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

SRC_DIR=$BUILD/busybox-src
OBJ_DIR=$BUILD/busybox-obj
INC_DIR=$BUILD/busybox-include
SPECS=$BUILD/busybox-musl.specs
CC_WRAPPER=$BUILD/musl-static-pie-cc
ROOT=$BUILD/root
MUSL_SPECS=/usr/lib/x86_64-linux-musl/musl-gcc.specs

start_time=$(date +%s)
mkdir -p "$BUILD"

# --------------------------------------------------------------------------
# 1. Dependencies
# --------------------------------------------------------------------------
apt_updated=0
apt_update() {
	if [ $apt_updated -eq 0 ]; then
		as_root apt-get update -qq
		apt_updated=1
	fi
}

missing=()
command -v dpkg-source >/dev/null || missing+=(dpkg-dev)
command -v gcc >/dev/null || missing+=(gcc)
command -v make >/dev/null || missing+=(make)
command -v bzip2 >/dev/null || missing+=(bzip2)
command -v xz >/dev/null || missing+=(xz-utils)
command -v patch >/dev/null || missing+=(patch)
command -v file >/dev/null || missing+=(file)
command -v perl >/dev/null || missing+=(perl)
[ -f "$MUSL_SPECS" ] || missing+=(musl-tools)
[ -f /usr/lib/x86_64-linux-musl/rcrt1.o ] || missing+=(musl-dev)
[ -f /usr/include/linux/version.h ] || missing+=(linux-libc-dev)
# Kconfig's host tools (conf) are plain C built with the host gcc: they need
# the glibc headers.
[ -f /usr/include/stdio.h ] || missing+=(libc6-dev)

if [ ${#missing[@]} -gt 0 ]; then
	log "installing ${missing[*]}"
	apt_update
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# --------------------------------------------------------------------------
# 2. Source: apt-get source busybox (needs deb-src entries)
# --------------------------------------------------------------------------

# Adds deb-src entries mirroring the existing Debian 'deb' entries, in a file of
# our own (the existing ones are left as they are). Both the one-line format
# (sources.list, *.list) and the deb822 format (*.sources) are read; only
# entries pointing at a Debian archive are copied, since third-party
# repositories often publish no source indexes.
enable_deb_src() {
	local out=/etc/apt/sources.list.d/nomu-deb-src.sources
	local files=()
	[ -f /etc/apt/sources.list ] && files+=(/etc/apt/sources.list)
	local f
	for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] && [ "$f" != "$out" ] && files+=("$f")
	done
	local tmp
	tmp=$(mktemp)
	for f in "${files[@]}"; do
		case $f in
		*.sources)
			# deb822: blank-line separated stanzas of "Field: value" lines.
			awk 'BEGIN { RS = ""; FS = "\n" }
			{
				types = uris = suites = comps = signed = ""; enabled = "yes"
				for (i = 1; i <= NF; i++) {
					line = $i
					if (line ~ /^#/) continue
					k = line; sub(/:.*/, "", k); v = line; sub(/^[^:]*:[ \t]*/, "", v)
					k = tolower(k)
					if (k == "types") types = v
					else if (k == "uris") uris = v
					else if (k == "suites") suites = v
					else if (k == "components") comps = v
					else if (k == "signed-by") signed = v
					else if (k == "enabled") enabled = tolower(v)
				}
				if (enabled == "no" || types !~ /(^| )deb( |$)/ || types ~ /deb-src/) next
				if (uris !~ /debian/) next
				print "Types: deb-src"
				print "URIs: " uris
				print "Suites: " suites
				print "Components: " comps
				if (signed != "") print "Signed-By: " signed
				print ""
			}' "$f" >>"$tmp"
			;;
		*)
			# one-line: deb [options] uri suite component...
			awk '$1 == "deb" {
				opts = ""; i = 2
				if ($2 ~ /^\[/) { while (i <= NF) { opts = opts (opts == "" ? "" : " ") $i; if ($i ~ /\]$/) { i++; break } i++ } }
				uri = $i; suite = $(i + 1); comps = ""
				for (j = i + 2; j <= NF; j++) comps = comps (comps == "" ? "" : " ") $j
				if (uri !~ /debian/) next
				print "Types: deb-src"
				print "URIs: " uri
				print "Suites: " suite
				print "Components: " comps
				if (match(opts, /signed-by=[^] ]*/)) print "Signed-By: " substr(opts, RSTART + 10, RLENGTH - 10)
				print ""
			}' "$f" >>"$tmp"
			;;
		esac
	done
	if [ ! -s "$tmp" ]; then
		rm -f "$tmp"
		die "found no Debian 'deb' entries in /etc/apt to derive deb-src entries from"
	fi
	log "adding deb-src entries in $out"
	as_root install -m 0644 "$tmp" "$out"
	rm -f "$tmp"
	apt_updated=0
	apt_update
}

find_src_tree() {
	local d
	for d in "$SRC_DIR"/busybox-*/; do
		[ -f "$d/Makefile" ] && [ -f "$d/Config.in" ] && {
			echo "${d%/}"
			return 0
		}
	done
	return 1
}

if ! BB_SRC=$(find_src_tree); then
	if ! apt-get source --print-uris busybox >/dev/null 2>&1; then
		enable_deb_src
		if ! err=$(apt-get source --print-uris busybox 2>&1 >/dev/null); then
			die "apt-get source busybox cannot work here even with deb-src entries: $err"
		fi
	fi
	log "fetching the busybox source package into $SRC_DIR"
	rm -rf "$SRC_DIR"
	mkdir -p "$SRC_DIR"
	# apt-get source unpacks with dpkg-source, which applies Debian's patches.
	(cd "$SRC_DIR" && apt-get source -q busybox) >&2 || die "apt-get source busybox failed"
	BB_SRC=$(find_src_tree) || die "apt-get source did not leave an unpacked busybox tree in $SRC_DIR"
fi
BB_VERSION=$(sed -n 's/^VERSION *= *//p; s/^PATCHLEVEL *= *//p; s/^SUBLEVEL *= *//p' "$BB_SRC/Makefile" | paste -sd.)
log "busybox $BB_VERSION source: $BB_SRC"

# --------------------------------------------------------------------------
# 3. A musl compiler driver that really links static-PIE
# --------------------------------------------------------------------------
# Debian's musl-gcc.specs ignores -static-pie and silently makes a dynamic PIE
# (Scrt1.o + musl's dynamic linker). This copy starts from rcrt1.o and links
# with --no-dynamic-linker: a self-relocating static PIE with no PT_INTERP.
# (Same derivation as the main Makefile's $(BUILD)/musl-static-pie.specs.)
specs_tmp=$(mktemp)
sed -e 's@/Scrt1.o@/rcrt1.o@' \
	-e 's@^-dynamic-linker [^ ]* -nostdlib .*@-nostdlib -static -pie --no-dynamic-linker -z text@' \
	"$MUSL_SPECS" >"$specs_tmp"
grep -q -- '--no-dynamic-linker' "$specs_tmp" || die "could not derive a static-PIE specs file from $MUSL_SPECS"
if cmp -s "$specs_tmp" "$SPECS"; then rm -f "$specs_tmp"; else mv "$specs_tmp" "$SPECS"; fi

# The specs file replaces gcc's whole link line, so whatever -pie, -static or
# -static-pie busybox's makefiles add, the result is the static PIE above:
# those flags are accepted and change nothing (checked below).
wrapper_tmp=$(mktemp)
cat >"$wrapper_tmp" <<WRAPPER
#!/bin/sh
# gcc targeting musl, always linking a static PIE (generated by scripts/build-busybox.sh).
# A relocatable link (-r, busybox's built-in.o) gets no specs: their link line
# says -pie, which ld refuses together with -r.
for a in "\$@"; do
	[ "\$a" = -r ] && exec gcc "\$@"
done
exec gcc -specs=$SPECS -fPIE "\$@"
WRAPPER
if cmp -s "$wrapper_tmp" "$CC_WRAPPER"; then rm -f "$wrapper_tmp"; else mv "$wrapper_tmp" "$CC_WRAPPER"; fi
chmod 0755 "$CC_WRAPPER"

# Kernel headers: musl's include path (-nostdinc, /usr/include/x86_64-linux-musl)
# has none, and busybox needs linux/, asm/, asm-generic/ and mtd/.
mkdir -p "$INC_DIR"
for pair in linux:/usr/include/linux asm:/usr/include/x86_64-linux-gnu/asm \
	asm-generic:/usr/include/asm-generic mtd:/usr/include/mtd; do
	name=${pair%%:*} target=${pair#*:}
	[ -d "$target" ] || die "missing kernel headers: $target (linux-libc-dev)"
	[ "$(readlink "$INC_DIR/$name" 2>/dev/null)" = "$target" ] || ln -sfn "$target" "$INC_DIR/$name"
done

# Check the driver: a program using a kernel header, linked the way busybox
# links (-static-pie here), must come out static-PIE with no PT_INTERP and run.
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
cat >"$probe_dir/probe.c" <<'PROBE'
#include <stdio.h>
#include <linux/fs.h>
#include <mtd/mtd-user.h>
int main(void) { printf("%d\n", BLKGETSIZE64 != 0); return 0; }
PROBE
"$CC_WRAPPER" -isystem "$INC_DIR" -Os -static-pie "$probe_dir/probe.c" -o "$probe_dir/probe" ||
	die "$CC_WRAPPER cannot build a test program"
file "$probe_dir/probe" | grep -q 'static-pie linked' || die "$CC_WRAPPER does not link static-PIE: $(file "$probe_dir/probe")"
! readelf -lW "$probe_dir/probe" | grep -q INTERP || die "$CC_WRAPPER output has a PT_INTERP"
[ "$("$probe_dir/probe")" = 1 ] || die "$CC_WRAPPER output does not run natively"

