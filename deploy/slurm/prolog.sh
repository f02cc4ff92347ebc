#!/bin/sh
# PrologSlurmctld: register the job's nodes with flowlane (POST /v1/jobs) before it starts.
#
# Runs once per job on the slurmctld host, as SlurmUser. The job `slurm-<id>` gets the
# IPv4 addresses of its nodes, the class (and weight) of its `flowlane:` comment or the
# default class, and a ttl of its time limit plus a margin, so a lost epilog is cleaned up.
# Exits 0 on any failure unless FLOWLANE_STRICT=1 (see README.md).
set -u
. "$(dirname "$0")/flowlane-slurm.sh"

if ! setup; then
  exit 0 # no flowlane comment and no default class: not a job to register
fi
job_endpoints
[ "$COUNT" -gt 0 ] || fail "no node of $SLURM_JOB_NODELIST has a usable IPv4 address: not registered"
job_ttl
body="{\"name\":\"$NAME\",\"class\":\"$CLASS\",\"endpoints\":$ENDPOINTS,\"ttl\":$TTL${WEIGHT:+,\"weight\":$WEIGHT}}"
api POST /v1/jobs "$body"
case $STATUS in
  201) log info "registered $NAME: class $CLASS, weight ${WEIGHT:-1}, $COUNT node(s) $ENDPOINTS, ttl ${TTL}s" ;;
  000) fail "flowlane API $FLOWLANE_API unreachable, $NAME not registered: $BODY" ;;
  *) fail "flowlane API refused $NAME (HTTP $STATUS): $BODY" ;;
esac
