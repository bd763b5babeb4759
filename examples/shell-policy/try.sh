#!/bin/sh
# Start the Node.js policy on a Unix socket and curl the example requests against it.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
sock=${1:-/tmp/team-policy.sock}
node "$here/server.js" "$sock" &
pid=$!
trap 'kill $pid' EXIT
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -S "$sock" ] && break; sleep 0.2; done
for req in label-env-create.json label-env-create-unlabelled.json; do
  echo "--- $req"
  curl -s --unix-socket "$sock" -H 'content-type: application/json' \
    -d @"$here/../requests/$req" http://policy/v1/policies/team-env
  echo
done
