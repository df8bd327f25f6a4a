#!/usr/bin/env bash
# Alternating `clean` runs of two checkouts of the cleaner on one input: wall and CPU time.
#
#   scripts/ab.sh BASE NEW INPUT [ROUNDS] [-- CLEAN OPTIONS...]
#
# BASE and NEW are checkouts (say `git worktree add --detach ../base main~1`); each run puts
# one of them first on PYTHONPATH and runs this checkout's .venv Python, so both use the same
# packages; `python -P` keeps the working folder off sys.path, where the checkout the script is
# run from would shadow both. The order of the two flips every round, and each round's NEW/BASE
# ratio is taken within the round: on a machine whose speed drifts, that says more than two
# separate benches. Both trees are byte-compiled first, as an installed copy is.
#
#   scripts/ab.sh ../base . bench/preference-openai-200000.parquet 16
set -euo pipefail

if [[ $# -lt 3 ]]; then
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
here=$(cd "$(dirname "$0")/.." && pwd)
python="$here/.venv/bin/python"
base=$(cd "$1" && pwd)
new=$(cd "$2" && pwd)
input=$(realpath "$3")
rounds=${4:-10}
shift $(( $# >= 4 ? 4 : 3 ))
[[ ${1:-} == "--" ]] && shift

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for tree in "$base" "$new"; do
    "$python" -m compileall -q "$tree/transcript_clean"
done
for round in $(seq "$rounds"); do
    if (( round % 2 )); then order="base new"; else order="new base"; fi
    for side in $order; do
        tree=$base
        [[ $side == new ]] && tree=$new
        rm -rf "$work/out"
        PYTHONPATH="$tree" /usr/bin/time -f "$round $side %e %U %S" -a -o "$work/times" \
            "$python" -P -c 'import sys; from transcript_clean.cli import entry; sys.argv[0] = "transcript-clean"; entry()' \
            clean "$input" "$work/out" --quiet "$@"
    done
done
"$python" - "$work/times" <<'EOF'
import collections
import statistics
import sys

wall: dict[str, dict[int, float]] = collections.defaultdict(dict)
cpu: dict[str, dict[int, float]] = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    round_, side, seconds, user, system = line.split()
    wall[side][int(round_)] = float(seconds)
    cpu[side][int(round_)] = float(user) + float(system)
for side in ("base", "new"):
    runs = list(wall[side].values())
    print(
        f"{side:4s}  wall median {statistics.median(runs):.2f} s (best {min(runs):.2f})"
        f"  CPU median {statistics.median(cpu[side].values()):.2f} s"
    )
# Each round's ratio is taken within the round: on a machine whose speed drifts, that says
# more than the ratio of the medians.
for name, times in (("wall", wall), ("CPU", cpu)):
    ratios = [times["new"][r] / times["base"][r] for r in times["base"]]
    less = sum(1 for r in ratios if r < 1)
    print(
        f"new/base {name} per round: median {statistics.median(ratios):.3f}; "
        f"new less in {less} of {len(ratios)}"
    )
EOF
