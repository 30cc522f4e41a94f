#!/bin/bash
# Stop a pipeline started by start.sh (and whatever it runs) so that a new one can start:
# its steps run under one session (setsid), so kill that session's processes.
for pid in $(pgrep -f "h200_session/(next|pipeline|phases|ahead)\.sh"); do
  sid=$(ps -o sid= -p "$pid" | tr -d ' ')
  [ -n "$sid" ] && pkill -9 -s "$sid"
done
pkill -9 -f "python3 (bench/|-m evaluator|-m pytest)" ; sleep 2
echo "left: $(pgrep -fc 'python3 (bench/|-m evaluator|-m pytest)')"
