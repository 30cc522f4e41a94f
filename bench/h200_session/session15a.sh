#!/bin/bash
# Session 15's first H200 call: the 30-operator submission over the full v1 suite at
# CONCURRENCY=4 with the spawner fix (evaluator/spawner.py) and the most expensive operators
# first, then one operator at a time with the same seed (bench/concurrency_compare.py:
# verdicts equal, per-shape figures within noise). Everything is packed into
# $OUT/$NAME.tgz (a call brings back only a few files; NAME defaults to session15a).
#   BUDGET=585 bash bench/h200_session/session15a.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT_OUT=$OUT; WORK=$(mktemp -d); mkdir -p $WORK/concurrent; NAME=${NAME:-session15a}
( export OUT=$WORK/concurrent; export BUDGET=$(( ${BUDGET:-585} - 10 ))
  export SECOND_NEEDS_S=${SECOND_NEEDS_S:-330}
  EXTRA="--operator-costs bench/h200_session/v1-operator-costs.json --second-needs-s $SECOND_NEEDS_S" \
    bash "$HERE/concurrent.sh" )
cp $WORK/concurrent/concurrent-4.json $WORK/concurrent/machine.txt $ROOT_OUT/ 2>/dev/null
tar czf $ROOT_OUT/$NAME.tgz -C $WORK .
