#!/bin/bash
# Wait until the pipeline is done or $1 seconds pass, then hand back what it has.
limit=${1:-550}; s=$(date +%s)
while [ ! -e /tmp/pipe/done ] && [ $(( $(date +%s) - s )) -lt $limit ]; do sleep 5; done
cat /tmp/pipe/status 2>/dev/null; tail -5 /tmp/pipe/pipeline.log
# The inductor cache (hundreds of MB) stays behind: $OUT returns at most 16 MiB a file.
cd /tmp/pipe && tar czf $OUT/pipe.tar.gz --exclude='*inductor-cache*' out status pipeline.log 2>/dev/null; ls -la $OUT
for f in out/*.log; do echo "== $f"; tail -4 $f; done 2>/dev/null | tail -c 6000
