# Helpers shared by nomu's scripts (sourced, not run). The caller sets
# SCRIPT to its name, used in messages.

log() { echo "$SCRIPT: $*" >&2; }
die() {
	echo "$SCRIPT: error: $*" >&2
	exit 1
}

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
		die "need root to run: $*"
	fi
}

# apt-get update, once per run (again after apt_refresh, when sources change).
apt_updated=0
apt_update() {
	if [ $apt_updated -eq 0 ]; then
		as_root apt-get update -qq
		apt_updated=1
	fi
}
apt_refresh() {
	apt_updated=0
	apt_update
}

# apt_install [apt-get install options] PACKAGE...: installs from Debian.
apt_install() {
	apt_update
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
