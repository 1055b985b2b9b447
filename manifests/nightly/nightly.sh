#!/bin/sh
# What cron runs each night (README, "Nightly runs"): the run, then an action by its exit code.
#   30 2 * * * GENBATCH_API_KEY="$(cat ~/.genbatch-key)" /srv/batches/manifests/nightly/nightly.sh >> /srv/batches/nightly.log 2>&1
# The run's flags: the run's own cap (--max-credits, over all nights) beside the manifest's cap per night
# (budget_per_invocation), last night's retryable failures sent again (--redo failed; jobs the service refused
# for their content are not), and jobs whose submit answer was lost sent again once a day has shown no sign of
# their task (--uncertain resubmit-after=24h; a charge may be doubled, the summary says so).
# GENBATCH_NIGHTLY_FLAGS adds flags (e.g. --sandbox, --base-url URL, --out DIR).
cd "$(dirname "$0")" || exit 74
# shellcheck disable=SC2086
genbatch run nightly.yaml --max-credits 2000 --redo failed --uncertain resubmit-after=24h --json \
  ${GENBATCH_NIGHTLY_FLAGS:-} > last-night.jsonl
code=$?
case $code in
  0) echo "nightly: every job done" ;;
  5) echo "nightly: the cap per night left work for tomorrow (see the last line of last-night.jsonl)" ;;
  6) echo "nightly: done; some inputs were refused by the service (fix them when convenient)" ;;
  7) echo "nightly: work left pending; tomorrow goes on" ;;
  1) echo "nightly: jobs failed; tomorrow sends them again (--redo failed)" ;;
  3) echo "nightly: the balance ran out: top up the account" >&2 ;;
  4) echo "nightly: jobs need a decision (uncertain or expired): see last-night.jsonl" >&2 ;;
  *) echo "nightly: exit $code: a person should look (README, Exit codes)" >&2 ;;
esac
# Codes a scheduler should page for are passed on; the ones that need no one exit 0.
case $code in 0|5|6|7|1) exit 0 ;; *) exit "$code" ;; esac
