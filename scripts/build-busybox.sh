#!/usr/bin/env bash
# Builds nomu's bundled guest userland: busybox, from Debian's busybox SOURCE
# package, compiled against musl as a static-PIE binary, plus a minimal guest
# root directory around it. Two builds of the same source tree:
#
#   scripts/build-busybox.sh            no-MMU (hush as sh, no fork): $BUILD/root
#   scripts/build-busybox.sh mmu        with MMU, as upstream's defconfig (ash as
#                                       sh, fork allowed): $BUILD/root-mmu
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
#   busybox-obj-mmu/        the same for the MMU build
#   busybox-include/        kernel headers (linux/ asm/ asm-generic/ mtd/) for musl
#   busybox-musl.specs      musl-gcc specs that really link static-PIE
#   musl-static-pie-cc      the compiler driver busybox is built with
#   root/                   the guest root: bin/busybox, applet links, etc/, ...
#   root-mmu/               the MMU build's guest root, laid out the same way
set -euo pipefail

SCRIPT=build-busybox
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}

VARIANT=${1:-nommu}
case $VARIANT in
nommu) SUFFIX= ;;
mmu) SUFFIX=-mmu ;;
*) die "unknown build '$VARIANT' (nommu or mmu)" ;;
esac

SRC_DIR=$BUILD/busybox-src
OBJ_DIR=$BUILD/busybox-obj$SUFFIX
INC_DIR=$BUILD/busybox-include
SPECS=$BUILD/busybox-musl.specs
CC_WRAPPER=$BUILD/musl-static-pie-cc
ROOT=$BUILD/root$SUFFIX
MUSL_SPECS=/usr/lib/x86_64-linux-musl/musl-gcc.specs

start_time=$(date +%s)
mkdir -p "$BUILD"

# --------------------------------------------------------------------------
# 1. Dependencies
# --------------------------------------------------------------------------
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
	apt_install "${missing[@]}"
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
	apt_refresh
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
		if grep -rqsE '^[[:space:]]*(deb-src|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
			# deb-src entries exist: the source indexes may just be missing.
			apt_update
		fi
		apt-get source --print-uris busybox >/dev/null 2>&1 || enable_deb_src
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


# --------------------------------------------------------------------------
# 4. Configuration: defconfig + the deltas below
# --------------------------------------------------------------------------
# Applets the guest userland must have: checked in .config and in the binary.
# The shell is hush in the no-MMU build, ash (upstream's sh) in the MMU one.
REQUIRED_APPLETS="ls cat echo grep sed awk sort uniq wc head tail cut tr find xargs cp mv rm
mkdir ln chmod date sleep env test printf tar gzip gunzip md5sum seq yes true false pwd
uname id kill ps clear more"

# Both builds: static-PIE (Kconfig: PIE depends on !STATIC, so STATIC stays
# off; the static-PIE link comes from the compiler driver, its specs file),
# applets found through /proc/self/exe, and the shell running busybox's own
# applets before any in PATH (a native run of the tests uses busybox's sort,
# not the host's).
if [ "$VARIANT" = nommu ]; then
	SH_APPLET=hush
	# Everything else in defconfig builds against musl as-is. Kconfig itself
	# drops the applets that need fork() once NOMMU is set (ash, unshare);
	# they are also listed here so that the intent is explicit.
	VARIANT_DELTAS=$(
		cat <<DELTAS
CONFIG_NOMMU=y
CONFIG_PIE=y
# CONFIG_STATIC is not set
# CONFIG_BUILD_LIBBUSYBOX is not set
CONFIG_EXTRA_CFLAGS="-isystem $INC_DIR"
CONFIG_EXTRA_LDFLAGS=""
CONFIG_BUSYBOX_EXEC_PATH="/proc/self/exe"
# CONFIG_ASH is not set
# CONFIG_SH_IS_ASH is not set
CONFIG_SH_IS_HUSH=y
# CONFIG_SH_IS_NONE is not set
CONFIG_BASH_IS_NONE=y
# CONFIG_BASH_IS_ASH is not set
# CONFIG_BASH_IS_HUSH is not set
# CONFIG_UNSHARE is not set
CONFIG_HUSH=y
CONFIG_HUSH_BASH_COMPAT=y
CONFIG_HUSH_INTERACTIVE=y
CONFIG_HUSH_JOB=y
CONFIG_HUSH_TICK=y
CONFIG_HUSH_IF=y
CONFIG_HUSH_LOOPS=y
CONFIG_HUSH_CASE=y
CONFIG_HUSH_FUNCTIONS=y
CONFIG_HUSH_LOCAL=y
CONFIG_HUSH_ECHO=y
CONFIG_HUSH_PRINTF=y
CONFIG_HUSH_TEST=y
CONFIG_HUSH_EXPORT=y
CONFIG_HUSH_KILL=y
CONFIG_HUSH_WAIT=y
CONFIG_HUSH_TRAP=y
CONFIG_HUSH_READ=y
CONFIG_HUSH_SET=y
CONFIG_HUSH_UNSET=y
CONFIG_FEATURE_SH_STANDALONE=y
CONFIG_FEATURE_PREFER_APPLETS=y
CONFIG_FEATURE_SH_NOFORK=y
CONFIG_FEATURE_EDITING=y
CONFIG_FEATURE_EDITING_FANCY_PROMPT=y
DELTAS
	)
else
	SH_APPLET=ash
	# defconfig's own shell choice, spelled out: ash as sh, with job
	# control; fork is used wherever busybox uses it on Linux.
	VARIANT_DELTAS=$(
		cat <<DELTAS
# CONFIG_NOMMU is not set
CONFIG_PIE=y
# CONFIG_STATIC is not set
# CONFIG_BUILD_LIBBUSYBOX is not set
CONFIG_EXTRA_CFLAGS="-isystem $INC_DIR"
CONFIG_EXTRA_LDFLAGS=""
CONFIG_BUSYBOX_EXEC_PATH="/proc/self/exe"
CONFIG_ASH=y
CONFIG_SH_IS_ASH=y
# CONFIG_SH_IS_HUSH is not set
CONFIG_ASH_JOB_CONTROL=y
CONFIG_ASH_BASH_COMPAT=y
CONFIG_FEATURE_SH_STANDALONE=y
CONFIG_FEATURE_PREFER_APPLETS=y
CONFIG_FEATURE_EDITING=y
CONFIG_FEATURE_EDITING_FANCY_PROMPT=y
DELTAS
	)
fi
REQUIRED_APPLETS="$REQUIRED_APPLETS $SH_APPLET"

CONFIG_DELTAS=$(
	printf '%s\n' "$VARIANT_DELTAS"
	for a in $REQUIRED_APPLETS; do
		echo "CONFIG_${a^^}=y"
	done
)

# Replaces (or adds) each delta's symbol in .config.
apply_deltas() {
	local config=$1
	printf '%s\n' "$CONFIG_DELTAS" >"$config.deltas"
	awk '
		function sym(line) {
			if (match(line, /^CONFIG_[A-Za-z0-9_]+=/)) return substr(line, 1, RLENGTH - 1)
			if (match(line, /^# CONFIG_[A-Za-z0-9_]+ is not set$/)) return substr(line, 3, RLENGTH - 13)
			return ""
		}
		FNR == NR { s = sym($0); if (s != "") { want[s] = $0; order[++n] = s } next }
		{ s = sym($0); if (s != "" && s in want) next; print }
		END { for (i = 1; i <= n; i++) print want[order[i]] }
	' "$config.deltas" "$config" >"$config.new"
	mv "$config.new" "$config"
	rm -f "$config.deltas"
}

bb_make() {
	make -C "$BB_SRC" O="$OBJ_DIR" CC="$CC_WRAPPER" HOSTCC=gcc "$@"
}

BUILD_LOG=$BUILD/busybox-build$SUFFIX.log
: >"$BUILD_LOG"
config_stamp=$( (
	echo "$BB_SRC $BB_VERSION"
	printf '%s\n' "$CONFIG_DELTAS"
) | sha256sum | cut -d' ' -f1)
if [ ! -f "$OBJ_DIR/.config" ] || [ "$(cat "$OBJ_DIR/.nomu-config-stamp" 2>/dev/null)" != "$config_stamp" ]; then
	log "configuring busybox in $OBJ_DIR (defconfig + $VARIANT static-PIE deltas)"
	mkdir -p "$OBJ_DIR"
	rm -f "$OBJ_DIR/.nomu-config-stamp"
	bb_make defconfig >>"$BUILD_LOG" 2>&1 || {
		tail -n 30 "$BUILD_LOG" >&2
		die "make defconfig failed (log: $BUILD_LOG)"
	}
	apply_deltas "$OBJ_DIR/.config"
	# Let Kconfig resolve the dependencies of what changed.
	# (yes through a process substitution: with pipefail its SIGPIPE would
	# fail a pipeline.)
	bb_make oldconfig < <(yes "") >>"$BUILD_LOG" 2>&1 || {
		tail -n 30 "$BUILD_LOG" >&2
		die "make oldconfig failed (log: $BUILD_LOG)"
	}
	# Every delta must have survived oldconfig (a dependency may have
	# silently turned one off).
	bad=$(printf '%s\n' "$CONFIG_DELTAS" | while IFS= read -r line; do
		case $line in
		"# CONFIG_"*" is not set")
			s=${line#\# }
			s=${s% is not set}
			! grep -q "^$s=" "$OBJ_DIR/.config" || echo "$s is set"
			;;
		*) grep -qxF -- "$line" "$OBJ_DIR/.config" || echo "$line did not stick" ;;
		esac
	done)
	[ -z "$bad" ] || die "busybox .config does not have what nomu needs:
$bad"
	echo "$config_stamp" >"$OBJ_DIR/.nomu-config-stamp"
fi

# --------------------------------------------------------------------------
# 5. Build
# --------------------------------------------------------------------------
log "building busybox (log: $BUILD_LOG)"
build_start=$(date +%s)
bb_make -j"$JOBS" >>"$BUILD_LOG" 2>&1 || {
	tail -n 40 "$BUILD_LOG" >&2
	die "busybox build failed (log: $BUILD_LOG)"
}
build_secs=$(($(date +%s) - build_start))
BB_BIN=$OBJ_DIR/busybox
file_out=$(file "$BB_BIN")
case $file_out in
*static-pie\ linked*) ;;
*) die "$BB_BIN is not a static PIE: $file_out" ;;
esac
! readelf -lW "$BB_BIN" | grep -q INTERP || die "$BB_BIN has a PT_INTERP"
applets=$("$BB_BIN" --list) || die "$BB_BIN does not run natively"
for a in $REQUIRED_APPLETS sh; do
	# grep reads all its input: with -q it could exit first and, under
	# pipefail, the SIGPIPE of printf would read as a missing applet.
	grep -xF "$a" >/dev/null <<<"$applets" || die "busybox lacks the $a applet"
done

# --------------------------------------------------------------------------
# 6. The guest root
# --------------------------------------------------------------------------
log "installing the guest root in $ROOT"
mkdir -p "$ROOT"/{bin,sbin,usr/bin,usr/sbin,etc,dev,proc,root,home,tmp}
chmod 1777 "$ROOT/tmp"
chmod 0700 "$ROOT/root"
cmp -s "$BB_BIN" "$ROOT/bin/busybox" || install -m 0755 "$BB_BIN" "$ROOT/bin/busybox"

# Applet links, all to /bin/busybox (nomu resolves absolute symlinks inside
# --root). Stale links from an earlier configuration go first.
find "$ROOT" -type l -lname /bin/busybox -delete
"$BB_BIN" --list-full | while IFS= read -r path; do
	case $path in "" | bin/busybox) continue ;; esac
	mkdir -p "$ROOT/$(dirname "$path")"
	# Never replace a real file someone put there.
	if [ -e "$ROOT/$path" ] && [ ! -L "$ROOT/$path" ]; then continue; fi
	ln -sfn /bin/busybox "$ROOT/$path"
done

write_file() { # path mode: content on stdin, written only when it changed
	local tmp
	tmp=$(mktemp)
	cat >"$tmp"
	if cmp -s "$tmp" "$1"; then rm -f "$tmp"; else
		mv "$tmp" "$1"
	fi
	chmod "$2" "$1"
}
write_file "$ROOT/etc/passwd" 0644 <<'X'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
X
write_file "$ROOT/etc/group" 0644 <<'X'
root:x:0:
nogroup:x:65534:
X
write_file "$ROOT/etc/hostname" 0644 <<'X'
nomu
X
# hush does not expand parameters in PS1: \w is line editing's escape for the
# current directory (what 'nomu:$PWD# ' would show in a shell that does).
write_file "$ROOT/etc/profile" 0644 <<'X'
# /etc/profile: read by login shells (sh -l, hush -l)
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
export HOME="${HOME:-/root}"
export PS1='nomu:\w# '
X

# --------------------------------------------------------------------------
# 7. Where things are
# --------------------------------------------------------------------------
nlinks=$(find "$ROOT" -type l -lname /bin/busybox | wc -l)
size=$(stat -c %s "$ROOT/bin/busybox")
cat <<REPORT
busybox $BB_VERSION (Debian source package, musl, $VARIANT, static-PIE, sh is $SH_APPLET)
  source:       $BB_SRC
  build dir:    $OBJ_DIR (.config, log: $BUILD_LOG)
  compiler:     $CC_WRAPPER (specs: $SPECS)
  binary:       $ROOT/bin/busybox ($size bytes)
                ${file_out#"$BB_BIN": }
  guest root:   $ROOT ($nlinks applet links -> /bin/busybox)
  build time:   ${build_secs}s compiling, $(($(date +%s) - start_time))s in all
REPORT
