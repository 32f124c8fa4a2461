# bench-lib.sh - sourced by the benchmark scripts (bench-x86.sh, bench-start.sh): one
# timed run of a configuration, keeping the best.
#
#   declare -A CMD=(...) BEST=() CPU=(); work=<a temporary directory>
#   bench_once CONF    runs ${CMD[CONF]} (stdout to $work/CONF.out, stderr to
#                      $work/CONF.err; a failure prints that and exits), and keeps in
#                      BEST[CONF] the shortest wall time in ms so far and in CPU[CONF]
#                      that run's user + sys ms: on a shared machine CPU time moves
#                      less than wall time.
bench_once() {
    local c=$1 e u s ms
    # shellcheck disable=SC2086
    /usr/bin/time -f "%e %U %S" -o "$work/$c.time" ${CMD[$c]} >"$work/$c.out" 2>"$work/$c.err" ||
        { cat "$work/$c.err" >&2; exit 1; }
    read -r e u s <"$work/$c.time"
    ms=$(awk -v e="$e" 'BEGIN { printf "%d", e * 1000 }')
    if [ -z "${BEST[$c]:-}" ] || [ "$ms" -lt "${BEST[$c]}" ]; then
        BEST[$c]=$ms
        CPU[$c]=$(awk -v u="$u" -v s="$s" 'BEGIN { printf "%d", (u + s) * 1000 }')
    fi
}
