#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo-fuzz / libFuzzer) of what the crate reads from outside: config
# files, decision JSON, stored session records and plan files. Each target runs a fixed number of
# inputs, starting from a corpus seeded from tests/fixtures; any crash, hang (one input over 10 s)
# or out-of-memory (over 2 GiB) fails the script and leaves the input in fuzz/artifacts/TARGET/.
#
#   scripts/fuzz.sh [RUNS]        # RUNS inputs per target (default 20000)
#
# Needs only the stable toolchain: cargo-fuzz passes nightly-only flags (-Z sanitizer=address,
# ...) to rustc, which stable rustc accepts with RUSTC_BOOTSTRAP=1. cargo-fuzz is installed from
# crates.io when missing. fuzz/ is its own cargo workspace, so `cargo test` at the root never
# builds it.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20000}
targets=(config_load decision_json store_record plan_read)

if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
export RUSTC_BOOTSTRAP=1

# Seeds: every config and plan fixture, decision shapes, and a stored pending session.
seed() { mkdir -p "fuzz/corpus/$1"; shift; for f in "$@"; do [ -f "$f" ] && cp "$f" "fuzz/corpus/${target}/" ; done; return 0; }
target=config_load; seed "$target" tests/fixtures/configs/valid/*.toml tests/fixtures/configs/invalid/*.toml config/modes.toml
target=plan_read; seed "$target" tests/fixtures/plans/*.md
target=store_record; seed "$target" tests/fixtures/records/*.json
target=decision_json; seed "$target"
printf '%s' '{"action":"approved"}' > fuzz/corpus/decision_json/approved.json
printf '%s' '{"action":"rejected","feedback":"add tests"}' > fuzz/corpus/decision_json/rejected.json
printf '%s' '{"action":"approved","feedback":"also docs","sha256":"53fa"}' > fuzz/corpus/decision_json/pinned.json

mkdir -p fuzz/target
for t in "${targets[@]}"; do mkdir -p "fuzz/artifacts/$t"; done
for target in "${targets[@]}"; do
  echo "fuzz: $target, $runs runs"
  log="fuzz/target/fuzz-$target.log"
  status=0
  cargo fuzz run -O --fuzz-dir fuzz "$target" "fuzz/corpus/$target" -- \
    -runs="$runs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -artifact_prefix="fuzz/artifacts/$target/" \
    > "$log" 2>&1 || status=$?
  grep -E '^(Done [0-9]+ runs|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" || true
  if [ "$status" -ne 0 ]; then
    tail -40 "$log"
    echo "fuzz: $target FAILED (exit $status); the input is in fuzz/artifacts/$target/, the log in $log"
    exit 1
  fi
done
echo "fuzz: ${#targets[@]} targets, $runs runs each: no crash, hang or out-of-memory"
