#!/bin/sh
# Collect one torchdoctor report per host over SSH, then summarize the fleet.
#   examples/ssh/collect-reports.sh hosts.txt          # one host name per line
# Each host needs torchdoctor in the environment it checks (here: the login shell's python).
set -u
hosts_file=${1:?usage: collect-reports.sh HOSTS_FILE}
mkdir -p reports
# 16 hosts at a time; a host that hangs is cut off after 120 s and listed as unreadable later.
xargs -P 16 -I{} sh -c '
  timeout 120 ssh -o BatchMode=yes -o ConnectTimeout=10 {} "torchdoctor check --json" > "reports/{}.json" 2> "reports/{}.err"
  echo "{}: exit $?"
' < "$hosts_file"
torchdoctor fleet summarize reports/
