# shellcheck shell=sh
# shellcheck disable=SC2034 # NAME, CLASS, STATUS, BODY...: set here, read by prolog.sh/epilog.sh
# flowlane-slurm.sh: what prolog.sh and epilog.sh share (sourced by them, never run).
#
# slurmctld runs PrologSlurmctld/EpilogSlurmctld as SlurmUser with no PATH and
# with the job in SLURM_* variables (slurm.conf(5), "PROLOG AND EPILOG SCRIPTS").
# A job is registered as `slurm-<SLURM_JOB_ID>` with the IPv4 addresses of its
# nodes; its class and weight come from the job's comment
# (`--comment=flowlane:class=training,weight=2`) or the configured default class.
#
# Every failure is logged (syslog, stderr, and FLOWLANE_LOG_FILE if set) and,
# unless FLOWLANE_STRICT=1, ends in exit 0: a fabric controller that is down must
# not cancel or requeue jobs (a failed PrologSlurmctld cancels an srun job).

# Slurm gives the script no search path; a caller's PATH (the tests' stubs) is kept.
PATH=${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}
export PATH
umask 077
set -f # the comment and the node list are split into words: never globbed

FLOWLANE_HOME=$(cd "$(dirname "$0")" && pwd)

# Settings, overridden by the env file (KEY=VALUE lines, read, never sourced).
FLOWLANE_API=http://127.0.0.1:8080
FLOWLANE_TOKEN_FILE=$FLOWLANE_HOME/token
FLOWLANE_CA_FILE=
FLOWLANE_DEFAULT_CLASS=
FLOWLANE_STRICT=0
FLOWLANE_TIMEOUT=5
FLOWLANE_LOG_FILE=
FLOWLANE_MAX_TTL_S=604800 # the API's longest ttl: 7 days
FLOWLANE_MAX_ENDPOINTS=64 # the API's most endpoints in one job
FLOWLANE_TTL_MARGIN_S=300

_context=${SLURM_SCRIPT_CONTEXT:-flowlane-slurm}
_job=${SLURM_JOB_ID:-?}

log() { # log LEVEL MESSAGE...: syslog (daemon facility), stderr, and the log file if any
  _level=$1
  shift
  _message="$_context job $_job: $*"
  printf 'flowlane-slurm: %s\n' "$_message" >&2
  logger -t flowlane-slurm -p "daemon.$_level" -- "$_message" 2>/dev/null || true
  if [ -n "$FLOWLANE_LOG_FILE" ]; then
    printf '%s %s %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$_level" "$_message" \
      >>"$FLOWLANE_LOG_FILE" 2>/dev/null || true
  fi
}

fail() { # fail MESSAGE...: log it; exit 1 under FLOWLANE_STRICT=1, else 0 (the job runs on)
  log err "$*"
  if [ "$FLOWLANE_STRICT" = 1 ]; then
    exit 1
  fi
  exit 0
}

read_settings() { # read_settings FILE: KEY=VALUE lines of known keys; a missing file is fine
  [ -e "$1" ] || return 0
  [ -r "$1" ] || fail "cannot read settings file $1"
  # Whoever may write it may point FLOWLANE_API elsewhere and receive the token.
  if [ -n "$(find "$1" -maxdepth 0 -perm /022)" ]; then
    fail "settings file $1 is writable by its group or others: refusing it (chmod go-w $1)"
  fi
  while IFS= read -r _line || [ -n "$_line" ]; do
    case $_line in '' | '#'*) continue ;; esac
    _key=${_line%%=*}
    _value=${_line#*=}
    [ "$_key" != "$_line" ] || fail "settings file $1: '$_line' is not KEY=VALUE"
    # One pair of surrounding quotes is dropped, as systemd's EnvironmentFile does.
    case $_value in
      \"*\") _value=${_value#\"} _value=${_value%\"} ;;
      \'*\') _value=${_value#\'} _value=${_value%\'} ;;
    esac
    case $_key in
      FLOWLANE_API | FLOWLANE_TOKEN_FILE | FLOWLANE_CA_FILE | FLOWLANE_DEFAULT_CLASS | \
        FLOWLANE_STRICT | FLOWLANE_TIMEOUT | FLOWLANE_LOG_FILE | FLOWLANE_TTL_MARGIN_S)
        eval "$_key=\$_value"
        ;;
      SLURM_CONF)
        SLURM_CONF=$_value
        export SLURM_CONF
        ;;
      *) fail "settings file $1: unknown setting $_key" ;;
    esac
  done <"$1"
}

read_token() { # the token of FLOWLANE_TOKEN_FILE, once its owner and mode are the Slurm user's only
  [ -f "$FLOWLANE_TOKEN_FILE" ] || fail "no token file $FLOWLANE_TOKEN_FILE (see deploy/slurm/README.md)"
  _stat=$(stat -L -c '%u %a' "$FLOWLANE_TOKEN_FILE") || fail "cannot stat $FLOWLANE_TOKEN_FILE"
  _owner=${_stat% *}
  _mode=${_stat#* }
  if [ "$_owner" != "$(id -u)" ]; then
    fail "token file $FLOWLANE_TOKEN_FILE is owned by uid $_owner, not by the Slurm user" \
      "($(id -un), uid $(id -u)) that runs this script: chown $(id -un) it"
  fi
  # Mode in octal: the last two digits are group and others; both must be 0.
  case $_mode in
    *00) ;;
    *)
      fail "token file $FLOWLANE_TOKEN_FILE has mode $_mode: it is readable or writable by" \
        "others than $(id -un); refusing to use it (chmod 600 $FLOWLANE_TOKEN_FILE)"
      ;;
  esac
  TOKEN=$(tr -d ' \t\r\n' <"$FLOWLANE_TOKEN_FILE") || fail "cannot read $FLOWLANE_TOKEN_FILE"
  [ -n "$TOKEN" ] || fail "token file $FLOWLANE_TOKEN_FILE is empty"
  case $TOKEN in
    *[!A-Za-z0-9._~+/=-]*) fail "token file $FLOWLANE_TOKEN_FILE does not hold a bearer token" ;;
  esac
}

is_name() { # a class name as the policy allows it
  case $1 in
    '' | [!A-Za-z]* | *[!A-Za-z0-9_.-]*) return 1 ;;
  esac
  [ "${#1}" -le 63 ]
}

parse_comment() { # sets CLASS, WEIGHT and OPTED from SLURM_JOB_COMMENT's `flowlane:` word
  CLASS=
  WEIGHT=
  OPTED=
  # The comment may hold other words (separated by blanks or ';'): take the flowlane: one.
  for _word in $(printf '%s' "${SLURM_JOB_COMMENT:-}" | tr ';' ' '); do
    case $_word in flowlane:*) ;; *) continue ;; esac
    OPTED=1
    _pairs=${_word#flowlane:}
    if [ "$_pairs" = off ]; then
      OPTED=off
      return 0
    fi
    for _pair in $(printf '%s' "$_pairs" | tr ',' ' '); do
      case $_pair in
        class=*) CLASS=${_pair#class=} ;;
        weight=*) WEIGHT=${_pair#weight=} ;;
        *) fail "comment '$SLURM_JOB_COMMENT': unknown '$_pair' (flowlane:class=NAME,weight=N)" ;;
      esac
    done
  done
  if [ -n "$CLASS" ] && ! is_name "$CLASS"; then
    fail "comment '$SLURM_JOB_COMMENT': class '$CLASS' is not a class name (letters, digits, _.-)"
  fi
  case $WEIGHT in
    '') ;;
    *[!0-9]* | 0*) fail "comment '$SLURM_JOB_COMMENT': weight '$WEIGHT' is not a whole number 1..100" ;;
  esac
}

job_class() { # sets CLASS (and WEIGHT): the job's, the default, or empty (not a flowlane job)
  parse_comment
  if [ "$OPTED" = off ]; then
    CLASS=
    return 0
  fi
  if [ -z "$CLASS" ]; then
    CLASS=$FLOWLANE_DEFAULT_CLASS
  fi
  if [ -n "$CLASS" ] && ! is_name "$CLASS"; then
    fail "FLOWLANE_DEFAULT_CLASS '$CLASS' is not a class name"
  fi
}

is_ipv4() {
  case $1 in
    *[!0-9.]* | *..* | .* | *.) return 1 ;;
  esac
  _rest=$1
  _count=0
  while [ -n "$_rest" ]; do
    _octet=${_rest%%.*}
    [ "$_octet" -le 255 ] 2>/dev/null || return 1
    _count=$((_count + 1))
    case $_rest in *.*) _rest=${_rest#*.} ;; *) _rest= ;; esac
  done
  [ "$_count" -eq 4 ]
}

node_address() { # node_address NODE: its IPv4 address (NodeAddr, resolved if a name), or nothing
  _addr=$(scontrol -o show node "$1" 2>/dev/null | tr ' ' '\n' | sed -n 's/^NodeAddr=//p')
  [ -n "$_addr" ] || _addr=$1
  if ! is_ipv4 "$_addr"; then
    _addr=$(getent ahostsv4 "$_addr" 2>/dev/null | awk 'NR == 1 { print $1 }')
  fi
  printf '%s' "$_addr"
}

job_endpoints() { # sets ENDPOINTS (a JSON array) and COUNT from SLURM_JOB_NODELIST
  [ -n "${SLURM_JOB_NODELIST:-}" ] || fail "SLURM_JOB_NODELIST is empty: not run by slurmctld?"
  _hosts=$(scontrol show hostnames "$SLURM_JOB_NODELIST") ||
    fail "scontrol show hostnames $SLURM_JOB_NODELIST failed (SLURM_CONF=${SLURM_CONF:-unset})"
  # A flowlane job takes at most 64 endpoints (the API's bound): say so before 64 lookups.
  _nodes=$(printf '%s\n' "$_hosts" | grep -c .)
  if [ "$_nodes" -gt "$FLOWLANE_MAX_ENDPOINTS" ]; then
    fail "the job has $_nodes nodes, more than the $FLOWLANE_MAX_ENDPOINTS endpoints a flowlane" \
      "job takes: not registered"
  fi
  _seen=' '
  ENDPOINTS=
  COUNT=0
  for _host in $_hosts; do
    _ip=$(node_address "$_host")
    if [ -z "$_ip" ]; then
      log warning "node $_host has no IPv4 address (NodeAddr, getent ahostsv4): left out"
      continue
    fi
    case $_ip in
      127.*)
        log warning "node $_host resolves to loopback $_ip: left out (set its NodeAddr)"
        continue
        ;;
    esac
    case $_seen in *" $_ip "*) continue ;; esac
    _seen="$_seen$_ip "
    COUNT=$((COUNT + 1))
    ENDPOINTS="$ENDPOINTS${ENDPOINTS:+,}{\"ipv4\":\"$_ip\"}"
  done
  ENDPOINTS="[$ENDPOINTS]"
}

job_ttl() { # sets TTL: the job's time limit and a margin, at most the API's longest
  _limit=$(scontrol -o show job "$SLURM_JOB_ID" 2>/dev/null | tr ' ' '\n' |
    sed -n 's/^TimeLimit=//p')
  TTL=$FLOWLANE_MAX_TTL_S
  # TimeLimit reads [days-]hours:minutes:seconds, or UNLIMITED / Partition_Limit.
  case $_limit in
    *-*:*:* | *:*:*)
      _days=0
      case $_limit in *-*) _days=${_limit%%-*} _limit=${_limit#*-} ;; esac
      _seconds=$(printf '%s\n' "$_limit" | awk -F: -v d="$_days" \
        '{ print d * 86400 + $1 * 3600 + $2 * 60 + $3 }')
      TTL=$((_seconds + FLOWLANE_TTL_MARGIN_S))
      [ "$TTL" -le "$FLOWLANE_MAX_TTL_S" ] || TTL=$FLOWLANE_MAX_TTL_S
      ;;
  esac
}

api() { # api METHOD PATH [JSON]: sets STATUS and BODY; the token goes in on stdin, not argv
  _out=$(mktemp) || fail "mktemp failed"
  set -- "$1" "$2" "${3:-}"
  _method=$1
  _url=${FLOWLANE_API%/}$2
  _data=$3
  set -- --silent --show-error --config - --request "$_method" --output "$_out" \
    --write-out '%{http_code}' --connect-timeout "$FLOWLANE_TIMEOUT" \
    --max-time "$FLOWLANE_TIMEOUT" --retry 2 --retry-max-time $((FLOWLANE_TIMEOUT * 3))
  [ -z "$FLOWLANE_CA_FILE" ] || set -- "$@" --cacert "$FLOWLANE_CA_FILE"
  [ -z "$_data" ] || set -- "$@" --header 'Content-Type: application/json' --data "$_data"
  STATUS=$(printf 'header = "Authorization: Bearer %s"\n' "$TOKEN" |
    curl "$@" "$_url" 2>"$_out.err") || STATUS=000
  BODY=$(cat "$_out" "$_out.err" 2>/dev/null | tr '\n' ' ')
  rm -f "$_out" "$_out.err"
}

setup() { # settings, the job's class; returns 1 when the job is not one for flowlane
  read_settings "${FLOWLANE_SLURM_ENV:-$FLOWLANE_HOME/flowlane-slurm.env}"
  [ -n "${SLURM_JOB_ID:-}" ] || fail "SLURM_JOB_ID is not set: run by slurmctld as PrologSlurmctld/EpilogSlurmctld"
  case $SLURM_JOB_ID in *[!0-9]*) fail "SLURM_JOB_ID '$SLURM_JOB_ID' is not a job id" ;; esac
  NAME=slurm-$SLURM_JOB_ID
  job_class
  [ -n "$CLASS" ] || return 1
  read_token
}
