#!/bin/sh
# pg_ctl for pytest-postgresql. PostgreSQL refuses to run as root, and this machine's (and CI's)
# user is root: then pg_ctl runs as the 'postgres' user of Debian's package. Its data and log
# folders move from pytest's /tmp/pytest-of-root (which every new pytest session makes 0700,
# locking the postgres user out of a running server) to the same names under /tmp/fieldcheck-pg,
# an empty folder staying at the old data path for pytest-postgresql's checks. Any other user
# runs pg_ctl itself. FIELDCHECK_PG_CTL names the real pg_ctl.
PG_CTL=${FIELDCHECK_PG_CTL:?FIELDCHECK_PG_CTL must name the real pg_ctl}
if [ "$(id -u)" != 0 ]; then exec "$PG_CTL" "$@"; fi
MOVED=/tmp/fieldcheck-pg
moved() {
  case "$1" in
    /tmp/pytest-of-*/*) echo "$MOVED/${1#/tmp/pytest-of-*/}" ;;
    *) echo "$1" ;;
  esac
}
give() {  # the folder to postgres, and a way through its parents
  mkdir -p "$1" && chown postgres "$1"
  parent="$1"
  while [ "$parent" != / ]; do
    parent=$(dirname "$parent")
    chmod o+x "$parent"
  done
}
command="$1"
data=""
prev=""
for arg in "$@"; do
  shift
  case "$prev" in
    -D|--pgdata)
      data=$(moved "$arg")
      if [ "$command" = initdb ]; then
        mkdir -p "$arg" && rm -rf "$data" && give "$data"
      fi
      arg="$data" ;;
    -l)
      arg=$(moved "$arg")
      give "$(dirname "$arg")" ;;
  esac
  set -- "$@" "$arg"
  prev="$arg"
done
cd / || exit 1
runuser -u postgres -- "$PG_CTL" "$@"
status=$?
case "$command:$status:$data" in  # the moved folders go with the server
  stop:0:"$MOVED"/*)
    rm -rf "$(dirname "$data")"
    rmdir -p "$(dirname "$(dirname "$data")")" 2>/dev/null ;;
esac
exit "$status"
