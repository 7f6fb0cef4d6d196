#!/bin/sh
# pg_ctl for pytest-postgresql. PostgreSQL refuses to run as root, and this machine's (and CI's)
# user is root: then pg_ctl runs as the 'postgres' user of Debian's package, which is given the
# data folder and the log's folder and may pass through their parents. Any other user runs
# pg_ctl itself. FIELDCHECK_PG_CTL names the real pg_ctl.
PG_CTL=${FIELDCHECK_PG_CTL:?FIELDCHECK_PG_CTL must name the real pg_ctl}
if [ "$(id -u)" != 0 ]; then exec "$PG_CTL" "$@"; fi
prev=""
data=""
log=""
for arg in "$@"; do
  case "$prev" in
    -D|--pgdata) data="$arg" ;;
    -l) log="$arg" ;;
  esac
  prev="$arg"
done
for path in "$data" "$(dirname "${log:-/}")"; do
  [ -n "$path" ] && [ "$path" != / ] || continue
  mkdir -p "$path" && chown postgres "$path"
  parent="$path"
  while [ "$parent" != / ]; do
    parent=$(dirname "$parent")
    chmod o+x "$parent"
  done
done
cd / && exec runuser -u postgres -- "$PG_CTL" "$@"
