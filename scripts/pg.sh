#!/usr/bin/env bash
# A private PostgreSQL cluster for development and tests.
#
# The cluster listens on a unix socket only (no TCP), so it cannot clash with
# any other PostgreSQL on the machine. Its data lives in <repo>/.pgdata
# (git-ignored; override with GATEHOUSE_PGDATA). When run as root, the server
# runs as the `postgres` system user; if that user cannot reach the project
# folder, the data dir falls back to /tmp/gatehouse-pg-<hash of repo path>.
#
# Usage: scripts/pg.sh start|stop|url|status
set -euo pipefail

readonly PORT=5432
readonly PG_WANT_VERSION=15

usage() {
	cat >&2 <<'EOF'
usage: scripts/pg.sh <command>

commands:
  start    start the private cluster (initialises it on first use); no-op if running
  stop     stop the cluster; no-op if not running
  url      print the connection URL (one line)
  status   print whether the cluster runs; exit 0 if it does, 3 if not

environment:
  GATEHOUSE_PGDATA   data directory (default: <repo>/.pgdata, or a /tmp
                     fallback when run as root and the postgres user cannot
                     reach the repo)
EOF
}

die() {
	echo "pg.sh: $*" >&2
	exit 1
}

log() {
	echo "pg.sh: $*" >&2
}

short_hash() {
	printf '%s' "$1" | sha256sum | cut -c1-12
}

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
readonly REPO
IS_ROOT=false
if [[ "$(id -u)" == 0 ]]; then
	IS_ROOT=true
fi
readonly IS_ROOT

# as_pg runs a command as the user that owns the cluster: the postgres system
# user when we are root, ourselves otherwise. It runs from / so the postgres
# user never needs access to the current directory.
as_pg() {
	if $IS_ROOT; then
		(cd / && runuser -u postgres -- "$@")
	else
		"$@"
	fi
}

ensure_postgres_user() {
	$IS_ROOT || return 0
	if ! id -u postgres >/dev/null 2>&1; then
		log "creating system user postgres"
		useradd --system --user-group --home-dir /var/lib/postgresql --shell /bin/bash postgres
	fi
}

# pg_bindir prints the highest /usr/lib/postgresql/<version>/bin holding pg_ctl.
pg_bindir() {
	local d best="" best_v=0 v
	for d in /usr/lib/postgresql/*/bin; do
		[[ -x "$d/pg_ctl" ]] || continue
		v="$(basename "$(dirname "$d")")"
		v="${v%%.*}"
		[[ "$v" =~ ^[0-9]+$ ]] || continue
		if ((v > best_v)); then
			best_v=$v
			best=$d
		fi
	done
	[[ -n "$best" ]] && printf '%s\n' "$best"
}

ensure_binaries() {
	BINDIR="$(pg_bindir || true)"
	if [[ -n "$BINDIR" ]]; then
		return 0
	fi
	if ! $IS_ROOT; then
		die "no PostgreSQL server found in /usr/lib/postgresql/*/bin; install it (e.g. sudo apt-get install -y postgresql-$PG_WANT_VERSION) or set DATABASE_URL"
	fi
	log "installing postgresql-$PG_WANT_VERSION with apt-get"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update >&2
	if ! apt-get install -y --no-install-recommends "postgresql-$PG_WANT_VERSION" >&2; then
		log "postgresql-$PG_WANT_VERSION is not available; installing the distribution's postgresql"
		apt-get install -y --no-install-recommends postgresql >&2
	fi
	BINDIR="$(pg_bindir || true)"
	[[ -n "$BINDIR" ]] || die "apt-get installed PostgreSQL but no /usr/lib/postgresql/*/bin/pg_ctl exists"
}

# resolve_dirs sets DATADIR and SOCKDIR. It is deterministic, so start, stop
# and url always agree without remembering anything.
resolve_dirs() {
	if [[ -n "${GATEHOUSE_PGDATA:-}" ]]; then
		DATADIR="$GATEHOUSE_PGDATA"
		[[ "$DATADIR" == /* ]] || DATADIR="$PWD/$DATADIR"
		if $IS_ROOT && id -u postgres >/dev/null 2>&1 &&
			! (cd / && runuser -u postgres -- test -x "$(dirname "$DATADIR")"); then
			die "GATEHOUSE_PGDATA=$DATADIR: the postgres user cannot reach $(dirname "$DATADIR"); pick a directory it can traverse"
		fi
	else
		DATADIR="$REPO/.pgdata"
		# As root the server runs as postgres, which must traverse the repo
		# path. When the postgres user does not exist yet, start creates it;
		# a fresh system user has no special access, so decide by the mode
		# bits of the path as "other" would see them.
		if $IS_ROOT && ! postgres_can_traverse "$REPO"; then
			DATADIR="/tmp/gatehouse-pg-$(short_hash "$REPO")"
		fi
	fi
	# unix socket paths are limited to ~107 bytes; the socket file is
	# <dir>/.s.PGSQL.<port>. Keep it comfortably short.
	SOCKDIR="$DATADIR"
	if ((${#SOCKDIR} + 14 > 100)); then
		SOCKDIR="/tmp/gatehouse-pgsock-$(short_hash "$DATADIR")"
	fi
}

postgres_can_traverse() {
	local dir=$1
	if id -u postgres >/dev/null 2>&1; then
		(cd / && runuser -u postgres -- test -x "$dir")
		return
	fi
	# No postgres user yet: every component must be world-executable.
	local p=$dir
	while [[ "$p" != / && -n "$p" ]]; do
		[[ "$(stat -c %A "$p")" == ?????????[xt] ]] || return 1
		p="$(dirname "$p")"
	done
}

urlencode() {
	local LC_ALL=C
	local s=$1 out="" c i
	for ((i = 0; i < ${#s}; i++)); do
		c=${s:i:1}
		case "$c" in
		[A-Za-z0-9/._~-]) out+=$c ;;
		*) out+="$(printf '%%%02X' "'$c")" ;;
		esac
	done
	printf '%s' "$out"
}

conn_url() {
	printf 'postgres://postgres@/postgres?host=%s&port=%d&sslmode=disable\n' "$(urlencode "$SOCKDIR")" "$PORT"
}

is_running() {
	[[ -f "$DATADIR/PG_VERSION" ]] || return 1
	as_pg "$BINDIR/pg_ctl" status -D "$DATADIR" >/dev/null 2>&1
}

# make_dir creates a directory owned by the cluster user with mode 700.
make_dir() {
	local dir=$1
	mkdir -p "$dir"
	if $IS_ROOT; then
		chown postgres:postgres "$dir"
	fi
	chmod 700 "$dir"
}

init_cluster() {
	local locale=C
	if locale -a 2>/dev/null | grep -qiE '^c\.utf-?8$'; then
		locale=C.UTF-8
	fi
	make_dir "$DATADIR"
	if [[ -n "$(ls -A "$DATADIR")" ]]; then
		die "$DATADIR exists, is not empty and holds no cluster (no PG_VERSION); move it away"
	fi
	log "initialising cluster in $DATADIR"
	local out
	if ! out="$(as_pg "$BINDIR/initdb" -D "$DATADIR" -U postgres --auth=trust -E UTF8 --locale="$locale" 2>&1)"; then
		printf '%s\n' "$out" >&2
		die "initdb failed"
	fi
	# Appending keeps the file's owner; gatehouse.conf is rewritten on start.
	echo "include = 'gatehouse.conf'" >>"$DATADIR/postgresql.conf"
}

write_conf() {
	local tmp
	tmp="$(mktemp)"
	cat >"$tmp" <<EOF
# Written by scripts/pg.sh on every start; edit the script, not this file.
listen_addresses = ''
port = $PORT
unix_socket_directories = '$SOCKDIR'
max_connections = 300
shared_buffers = 256MB
# Keep durability on: benchmarks must measure real commits.
fsync = on
synchronous_commit = on
logging_collector = off
log_line_prefix = '%m [%p] %d '
EOF
	if $IS_ROOT; then
		chown postgres:postgres "$tmp"
	fi
	chmod 600 "$tmp"
	mv "$tmp" "$DATADIR/gatehouse.conf"
}

cmd_start() {
	ensure_postgres_user
	ensure_binaries
	resolve_dirs
	if is_running; then
		return 0
	fi
	if [[ -f "$DATADIR/PG_VERSION" ]]; then
		local have want
		have="$(cat "$DATADIR/PG_VERSION")"
		want="$(basename "$(dirname "$BINDIR")")"
		[[ "$have" == "$want" ]] || die "$DATADIR holds a PostgreSQL $have cluster but the server is $want; remove the directory (run: scripts/pg.sh stop; rm -rf $DATADIR)"
	else
		init_cluster
	fi
	if [[ "$SOCKDIR" != "$DATADIR" ]]; then
		make_dir "$SOCKDIR"
	fi
	write_conf
	local logfile="$DATADIR/postgres.log" out
	# 9>&- : the server must not inherit the lock descriptor (see with_lock),
	# or it would hold the lock for as long as it runs.
	if ! out="$(as_pg "$BINDIR/pg_ctl" start -D "$DATADIR" -l "$logfile" -w -t 60 2>&1 9>&-)"; then
		printf '%s\n' "$out" >&2
		log "pg_ctl start failed; last lines of $logfile:"
		tail -n 40 "$logfile" >&2 || true
		exit 1
	fi
	log "started PostgreSQL ($DATADIR)"
}

cmd_stop() {
	BINDIR="$(pg_bindir || true)"
	[[ -n "$BINDIR" ]] || return 0
	resolve_dirs
	if ! is_running; then
		return 0
	fi
	as_pg "$BINDIR/pg_ctl" stop -D "$DATADIR" -m fast -w -t 60 >/dev/null
	log "stopped PostgreSQL ($DATADIR)"
}

cmd_status() {
	BINDIR="$(pg_bindir || true)"
	resolve_dirs
	if [[ -n "$BINDIR" ]] && is_running; then
		echo "running"
		echo "datadir: $DATADIR"
		echo "url: $(conn_url)"
		return 0
	fi
	echo "stopped"
	echo "datadir: $DATADIR"
	return 3
}

# with_lock serialises start/stop across processes (parallel test binaries).
with_lock() {
	local lockfile
	lockfile="${TMPDIR:-/tmp}/gatehouse-pg-$(short_hash "$REPO:${GATEHOUSE_PGDATA:-}").lock"
	exec 9>>"$lockfile"
	flock -w 600 9 || die "timed out waiting for $lockfile"
	"$@"
}

main() {
	if (($# != 1)); then
		usage
		exit 2
	fi
	case "$1" in
	start) with_lock cmd_start ;;
	stop) with_lock cmd_stop ;;
	url)
		resolve_dirs
		conn_url
		;;
	status) cmd_status ;;
	-h | --help | help) usage ;;
	*)
		usage
		exit 2
		;;
	esac
}

main "$@"
