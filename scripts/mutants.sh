#!/usr/bin/env bash
# Mutation testing of the transition code (issue 14): installs cargo-mutants if missing and runs
# it over the session, the run loop, the mode graph and submit_plan. Not part of CI: every mutant
# rebuilds the crate, so a full run (346 mutants) takes hours on a 2-core machine; run a shard
# (`--shard 0/16 --sharding round-robin`) for a sample.
#
#   scripts/mutants.sh                          # every mutant of the transition code
#   scripts/mutants.sh --list                   # only list them
#   scripts/mutants.sh --shard 0/16 --sharding round-robin    # one sixteenth, spread out
#   MUTANTS_JOBS=2 scripts/mutants.sh           # more parallel builds on a bigger machine
#   MUTANTS_IN_PLACE=1 scripts/mutants.sh ...   # mutate this tree, reuse its target/ (see below)
#
# Builds are kept cheap: all features and no debug info for this crate (the dependencies keep
# theirs, so the ones `cargo test --all-features` built are not rebuilt). By default cargo-mutants
# builds in a scratch copy of the tree, so the dependencies are built there once first (copying
# target/ does not help: the copy loses the timestamps and cargo rebuilds everything). With
# MUTANTS_IN_PLACE=1 it mutates this tree and builds in its target/ (one job); use it in a
# throwaway checkout (`git worktree add --detach ../mutants`, `cp -a target ../mutants/`), never
# in one you are editing: each mutant is written into src/ while it is tested.
#
# Each mutant is tested by the unit tests and the one integration test crate `tests/it` (about
# 40 s: 16 random cases per property test, the exploration of every state is exhaustive anyway).
# It runs at the lowest CPU priority. The summary lands in mutants.out/ (caught.txt, missed.txt,
# timeout.txt, unviable.txt). `planted` (the bugs the kit's own tests plant in test builds) is
# not mutated.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=27.1.0
if ! cargo mutants --version 2>/dev/null | grep -q "$VERSION"; then
    cargo install --locked cargo-mutants --version "$VERSION"
fi

if [ "${MUTANTS_IN_PLACE:-0}" = 1 ]; then
    where=(--in-place)
else
    where=(--jobs "${MUTANTS_JOBS:-1}")
fi

export PROPTEST_CASES="${PROPTEST_CASES:-16}"
exec nice -n 19 cargo mutants --no-config \
    --file src/session.rs --file src/run.rs --file src/mode.rs --file src/tool/submit_plan.rs \
    --exclude-re planted \
    --all-features \
    --cargo-arg=--config=profile.dev.package.agent-controller.debug=0 \
    "${where[@]}" \
    --minimum-test-timeout "${MUTANTS_MIN_TIMEOUT:-120}" \
    "$@" \
    -- --lib --test it
