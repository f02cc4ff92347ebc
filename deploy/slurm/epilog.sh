#!/bin/sh
# EpilogSlurmctld: remove the job from flowlane (DELETE /v1/jobs/slurm-<id>) once it ended.
#
# Runs once per job on the slurmctld host, as SlurmUser, for the jobs the prolog would
# have registered. A job that is already gone (expired, never registered) is fine.
# Exits 0 on any failure unless FLOWLANE_STRICT=1 (see README.md); the job's ttl removes
# it anyway when this could not.
set -u
. "$(dirname "$0")/flowlane-slurm.sh"

if ! setup; then
  exit 0 # no flowlane comment and no default class: never registered
fi
api DELETE "/v1/jobs/$NAME"
case $STATUS in
  204) log info "removed $NAME" ;;
  404) log info "$NAME was not registered (or expired): nothing to remove" ;;
  000) fail "flowlane API $FLOWLANE_API unreachable, $NAME left to expire: $BODY" ;;
  *) fail "flowlane API refused to remove $NAME (HTTP $STATUS): $BODY" ;;
esac
