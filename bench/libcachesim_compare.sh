#!/usr/bin/env bash
# kvwatch's eviction policies against libCacheSim's own (issue 26), over exactly the
# page references `kvwatch replay --policy` simulates, from a libCacheSim the user
# built (this script never downloads anything; docs/performance.md says how to build
# libCacheSim as its README does).
#
#   bash bench/libcachesim_compare.sh --libcachesim DIR [options] TRACE[@PAGES]...
#
#   --libcachesim DIR        a libCacheSim checkout (github.com/1a1a11a/libCacheSim)
#   --libcachesim-build DIR  its build folder (default DIR/_build): bin/cachesim and
#                            liblibCacheSim.a (`cmake .. && make -j`, Release: -O3)
#   --kvwatch PATH           default build/agent/kvwatch
#   --policies LIST          default lru,fifo,arc,s3fifo,sieve
#   --capacity PAGES         default 14000; TRACE@PAGES sets one trace's
#   --runs N                 timed runs of each program per policy (default 3)
#   --promotion-hits N       s3fifo's promotion threshold on both sides (default 1,
#                            kvwatch's; libCacheSim's own default is 2)
#   --hashpower N            the driver's libCacheSim hash tables start at 2^N buckets
#                            (default 24, what cachesim gives every cache; smaller
#                            suits a small cache: the tables double as they fill)
#   --replay-args "ARGS"     more options for every kvwatch replay (e.g. --page-tokens 512)
#   --work DIR               keep the dump and the outputs here (default: a temp dir)
#
# For each trace: `kvwatch replay --policy lru --dump-references` writes the
# references once as an oracleGeneral trace (agent/cli/reference_dump.h). Then per
# policy, alternately, --runs times each:
#   kvwatch    kvwatch replay --policy P --capacities C --threads 1 --format json:
#              its policy stage's `seconds` (the simulation's wall time) and hits;
#   driver     bench/libcachesim_driver.c, compiled here against the user's build:
#              libCacheSim's own policy under kvwatch's prefix rule (find without
#              update for the leading resident pages, then a get per reference), the
#              simulation alone timed (wall and CPU), the trace already in memory;
#   cachesim   libCacheSim's own binary on the dump, as a user runs it: a get per
#              reference, its printed throughput (wall time of its loop, which
#              includes reading each 24-byte record from the mapped file).
# And once per policy, the driver in cachesim's mode (a get per reference) for the
# exact per-reference hits that cachesim prints only to 4 decimals.
#
# Prints per policy: the hits of kvwatch and of libCacheSim under the same rule
# (equal when both make the same evictions), the per-reference hit ratios, the
# medians of each program's references per second, and kvwatch's ratio to each
# (above 1: kvwatch faster), with the load average around the runs.
set -euo pipefail
cd "$(dirname "$0")/.."
lcs="" lcs_build="" kvwatch=build/agent/kvwatch policies=lru,fifo,arc,s3fifo,sieve
capacity=14000 runs=3 promotion=1 hashpower=24 replay_args="" work=""
traces=()
while (($#)); do
  case $1 in
    --libcachesim) lcs=$2; shift 2 ;;
    --libcachesim-build) lcs_build=$2; shift 2 ;;
    --kvwatch) kvwatch=$2; shift 2 ;;
    --policies) policies=$2; shift 2 ;;
    --capacity) capacity=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --promotion-hits) promotion=$2; shift 2 ;;
    --hashpower) hashpower=$2; shift 2 ;;
    --replay-args) replay_args=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "libcachesim_compare.sh: unknown option $1 (--help)" >&2; exit 2 ;;
    *) traces+=("$1"); shift ;;
  esac
done
die() { echo "libcachesim_compare.sh: $*" >&2; exit 2; }
[[ -n $lcs ]] || die "--libcachesim DIR is required: a libCacheSim checkout built as its README says"
lcs_build=${lcs_build:-$lcs/_build}
[[ -x $lcs_build/bin/cachesim ]] || die "no $lcs_build/bin/cachesim: build libCacheSim first (cd $lcs && mkdir _build && cd _build && cmake .. && make -j)"
[[ -f $lcs_build/liblibCacheSim.a ]] || die "no $lcs_build/liblibCacheSim.a: build libCacheSim's library target too (make -j in $lcs_build)"
[[ -f $lcs/libCacheSim/include/libCacheSim.h ]] || die "$lcs is not a libCacheSim checkout (no libCacheSim/include/libCacheSim.h)"
[[ -x $kvwatch ]] || die "no $kvwatch: build it (cmake --build build --target kvwatch) or give --kvwatch"
((${#traces[@]})) || die "give at least one TRACE"
[[ $replay_args != *--touch-order* ]] || die "the driver reads the dump tail-first: leave --touch-order at its default"
if [[ -z $work ]]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"

# The driver, built against the user's libCacheSim as its own binaries are: -O3, and
# the libraries its CMake found (tcmalloc when it found it).
tcmalloc=$(sed -n 's/^Tcmalloc_LIBRARY:FILEPATH=//p' "$lcs_build/CMakeCache.txt" 2>/dev/null || true)
[[ $tcmalloc == *NOTFOUND* ]] && tcmalloc=""
driver=$work/libcachesim_driver
# shellcheck disable=SC2046  # pkg-config's flags are words
cc -O3 -DNDEBUG $(pkg-config --cflags glib-2.0) -I"$lcs/libCacheSim/include" -I"$lcs/libCacheSim" \
  bench/libcachesim_driver.c -o "$driver" "$lcs_build/liblibCacheSim.a" $(pkg-config --libs glib-2.0) \
  ${tcmalloc:+"$tcmalloc"} -lzstd -lm -lpthread -ldl -lstdc++
echo "libCacheSim: $lcs ($(git -C "$lcs" rev-parse --short HEAD 2>/dev/null || echo 'not a git checkout')), build $lcs_build; tcmalloc: ${tcmalloc:-none}"

timed() {  # OUT ERR command...: runs it under /usr/bin/time -v; its user + system CPU seconds go to ERR.cpu
  local out=$1 err=$2
  shift 2
  /usr/bin/time -v -o "$err.time" "$@" >"$out" 2>"$err"
  awk -F': ' '/User time/ {u=$2} /System time/ {s=$2} END {printf "%.3f\n", u + s}' "$err.time" >"$err.cpu"
}
results=$work/results.tsv
: >"$results"
IFS=, read -r -a policy_list <<<"$policies"
for spec in "${traces[@]}"; do
  trace=${spec%@*}
  cap=$capacity
  [[ $spec == *@* ]] && cap=${spec##*@}
  [[ -e $trace ]] || die "no trace $trace"
  name=$(basename "$trace")
  dump=$work/$name.oracleGeneral
  # shellcheck disable=SC2086  # replay_args are words
  "$kvwatch" replay --progress never --format json --threads 1 --policy lru --capacities "$cap" $replay_args \
    --dump-references "$dump" "$trace" >"$work/dump.json" 2>"$work/dump.err" || {
    cat "$work/dump.err" >&2
    die "kvwatch replay --dump-references failed on $trace"
  }
  echo "$name: $(($(stat -c %s "$dump") / 24)) references at $cap pages -> $dump"
  for p in "${policy_list[@]}"; do
    s3=()
    [[ $p == s3fifo ]] && s3=(-e "move-to-main-threshold=$promotion")
    timed "$work/get.out" "$work/get.err" "$driver" "$dump" "$p" "$cap" get "$promotion" "$hashpower"
    for ((r = 1; r <= runs; r++)); do
      load=$(cut -d' ' -f1 /proc/loadavg)
      # shellcheck disable=SC2086
      timed "$work/plain.json" "$work/plain.err" "$kvwatch" replay --progress never --format json --capacities "$cap" \
        $replay_args "$trace"
      # shellcheck disable=SC2086
      timed "$work/kv.json" "$work/kv.err" "$kvwatch" replay --progress never --format json --threads 1 --policy "$p" \
        --capacities "$cap" --s3fifo-promotion-hits "$promotion" $replay_args "$trace"
      timed "$work/drv.out" "$work/drv.err" "$driver" "$dump" "$p" "$cap" prefix "$promotion" "$hashpower"
      (cd "$work" && timed cs.out cs.err "$lcs_build/bin/cachesim" "$dump" oracleGeneral "$p" "$cap" \
        --ignore-obj-size 1 --num-thread 1 --output cachesim.log "${s3[@]}")
      python3 - "$work" "$name" "$p" "$cap" "$load" >>"$results" <<'PY'
import json, re, sys
work, name, policy, cap, load = sys.argv[1:6]
kv = json.load(open(f"{work}/kv.json"))["policies"]
run = kv["results"][0]
def fields(path):
    return dict(kv.split("=", 1) for kv in open(path).read().split() if "=" in kv)
drv, get = fields(f"{work}/drv.out"), fields(f"{work}/get.out")
cs = open(f"{work}/cs.out").read()
m = re.search(r"miss ratio ([0-9.]+), throughput ([0-9.]+) MQPS", cs)
if not m:
    sys.exit(f"cachesim printed no result:\n{cs}")
cpu = lambda f: float(open(f"{work}/{f}.err.cpu").read())
print("\t".join(str(x) for x in [
    name, policy, cap, load, run["page_refs"], run["page_hits"], kv["seconds"], cpu("kv") - cpu("plain"),
    drv["refs"], drv["hits"], drv["sim_s"], drv["sim_cpu_s"], cpu("drv"),
    get["hits"], 1 - float(m.group(1)), m.group(2), cpu("cs")]))
PY
    done
  done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
groups = {}
for r in rows:
    groups.setdefault((r[0], r[1], r[2]), []).append(r)
med = statistics.median
print("\nhits: kvwatch replay's page hits and libCacheSim's under the same prefix rule (the driver), then the"
      " per-reference hit ratio of libCacheSim's get loop (the driver exactly; cachesim's 4 decimals)")
for (name, policy, cap), rs in groups.items():
    refs, kv_hits, drv_hits, get_hits = int(rs[0][4]), int(rs[0][5]), int(rs[0][9]), int(rs[0][13])
    same = "same" if kv_hits == drv_hits else f"DIFFER by {kv_hits - drv_hits:+d}"
    dump = "" if int(rs[0][8]) == refs else f" (the dump has {rs[0][8]} references, kvwatch simulated {refs})"
    print(f"  {name} {policy} {cap} pages, {refs} refs: kvwatch {kv_hits}, libCacheSim {drv_hits}: {same};"
          f" per reference {get_hits / refs:.6f} (cachesim {float(rs[0][14]):.4f}){dump}")
print("\nspeed, million references per second, medians of the runs (kvwatch/x above 1: kvwatch faster)")
print("  wall: kvwatch's policy stage (its `seconds`), the driver's simulation loop, cachesim's printed throughput")
print("  cpu:  kvwatch: CPU of replay --policy minus CPU of the same replay without it (the policy stage and the"
      " stored trace); driver: its loop's CPU; cachesim: its whole process (reading the trace, setup)")
print(f"  {'trace':<36} {'policy':<7} {'pages':>6} | {'wall kv':>7} {'driver':>7} {'cachesim':>8} | "
      f"{'cpu kv':>7} {'driver':>7} {'cachesim':>8} | {'kv/driver cpu':>13} {'kv/cachesim cpu':>15} {'kv/driver wall':>14} | load")
for (name, policy, cap), rs in groups.items():
    refs = int(rs[0][4])
    m = lambda i, f=lambda x: x: med([f(float(r[i])) for r in rs])
    rate = lambda s: refs / s / 1e6
    kv_w, drv_w, cs_w = m(6, rate), m(10, rate), m(15)
    kv_c, drv_c, cs_c = m(7, rate), m(11, rate), m(16, rate)
    loads = sorted(float(r[3]) for r in rs)
    print(f"  {name[:36]:<36} {policy:<7} {cap:>6} | {kv_w:>7.2f} {drv_w:>7.2f} {cs_w:>8.2f} | {kv_c:>7.2f} {drv_c:>7.2f}"
          f" {cs_c:>8.2f} | {kv_c / drv_c:>12.2f}x {kv_c / cs_c:>14.2f}x {kv_w / drv_w:>13.2f}x | {loads[0]:.1f}-{loads[-1]:.1f}")
PY
