#!/usr/bin/env bash
# Runs the README's newcomer commands word for word, as a new user would, on
# a copy of the committed tree: the sh block of "Running it for real", then
# the commands of "Connect Slack" that need no Slack account (the manifest
# and check-config). The commands are read from README.md itself, so the
# README and this check cannot drift apart. CI runs it; so can you:
#   bash .ci/readme-commands.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$top" archive HEAD | tar -x -C "$work"
# The module cache and build cache are shared with the checkout's.
cd "$work"

# section NAME: the README's lines from "## NAME" to the next "## ".
section() { awk -v h="## $1" '$0 == h {on=1; next} /^## / {on=0} on' README.md; }

echo "== README: Running it for real"
block=$(section "Running it for real" | awk '/^```sh$/ {on=1; next} /^```$/ {if (on) exit} on')
[ -n "$block" ] || { echo "no sh block under 'Running it for real'"; exit 1; }
export FLOWBRIDGE_API_TOKEN=ci-dummy-token
while IFS= read -r line; do
  cmd=${line%%#*}                       # the README's comments are not commands
  cmd=${cmd//.../ci-dummy-token}       # "export FLOWBRIDGE_API_TOKEN=..." is a placeholder
  [ -n "${cmd// }" ] || continue
  echo "\$ $cmd"
  # run reads the console from standard input; an empty one ends it at once.
  eval "$cmd" </dev/null
done <<<"$block"

echo "== README: Connect Slack (the steps that need no Slack account)"
slack=$(section "Connect Slack")
# Step 1 says to set [slack] enabled = true in the copied config.
grep -q 'set `\[slack\] enabled = true`' <<<"$slack" || { echo "Connect Slack no longer says to enable [slack]"; exit 1; }
awk '/^\[slack\]/ {s=1} /^\[/ && !/^\[slack\]/ {s=0} s && /^enabled *=/ {sub(/false/, "true")} {print}' flowbridge.toml >flowbridge.toml.new
mv flowbridge.toml.new flowbridge.toml
for want in "flowbridge slack-manifest -config flowbridge.toml -o slack-manifest.yaml"; do
  grep -qF "\`$want\`" <<<"$slack" || { echo "Connect Slack no longer shows: $want"; exit 1; }
  echo "\$ ./$want"
  eval "./$want"
  [ -s slack-manifest.yaml ] || { echo "slack-manifest wrote nothing"; exit 1; }
  head -n 5 slack-manifest.yaml
done
# Step 5: the tokens go into the environment, then check-config.
grep -qF 'export SLACK_BOT_TOKEN=xoxb-… SLACK_APP_TOKEN=xapp-…' <<<"$slack" || { echo "Connect Slack no longer exports the tokens"; exit 1; }
export SLACK_BOT_TOKEN=xoxb-ci-dummy SLACK_APP_TOKEN=xapp-ci-dummy
grep -qF '`flowbridge check-config -config flowbridge.toml`' <<<"$slack" || { echo "Connect Slack no longer shows check-config"; exit 1; }
echo "\$ ./flowbridge check-config -config flowbridge.toml"
./flowbridge check-config -config flowbridge.toml
echo "README commands: OK"
