#!/bin/bash
# Launch the pipeline detached, then poll like poll.sh.
rm -rf /tmp/pipe; mkdir -p /tmp/pipe
setsid nohup bash "$(dirname "$0")/${PIPELINE:-pipeline.sh}" > /tmp/pipe/pipeline.log 2>&1 < /dev/null &
sleep 2
exec bash "$(dirname "$0")/poll.sh" "$@"
