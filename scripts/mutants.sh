#!/usr/bin/env bash
# Mutation testing of the transition code (issue 14): installs cargo-mutants if missing and runs
# it over the session, the run loop, the mode graph and submit_plan, with a test filter that keeps
# each mutant's test run short. Not part of CI: a full run takes hours on a 2-core machine.
#
#   scripts/mutants.sh                 # every mutant of the transition code
#   scripts/mutants.sh --list          # only list them
#   MUTANTS_JOBS=2 scripts/mutants.sh  # more parallel builds on a bigger machine
#
# The summary lands in mutants.out/ (caught.txt, missed.txt, timeout.txt, unviable.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=27.1.0
if ! cargo mutants --version 2>/dev/null | grep -q "$VERSION"; then
    cargo install --locked cargo-mutants --version "$VERSION"
fi

exec cargo mutants \
    --file src/session.rs --file src/run.rs --file src/mode.rs --file src/tool/submit_plan.rs \
    --all-features \
    --jobs "${MUTANTS_JOBS:-1}" \
    --timeout "${MUTANTS_TIMEOUT:-120}" \
    "$@" \
    -- --lib --test transitions --test session --test submit_plan --test handover
