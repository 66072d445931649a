#!/usr/bin/env bash
# Runs the README's newcomer commands word for word, as a new user types
# them, on a copy of the committed tree: the sh block of "Running it for
# real", then the sh blocks of "Connect Slack" in Socket Mode and in HTTP
# mode, up to the manifest and check-config (run needs a Slack workspace).
# The commands are read from README.md itself and run as written (nothing is
# added to them, not even ./), so the README and this check cannot drift
# apart; only the placeholders ... and … are given dummy values. CI runs it;
# so can you:
#   bash .ci/readme-commands.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$top" archive HEAD | tar -x -C "$work"
# The module cache and build cache are shared with the checkout's.
cd "$work"
# A new user has no flowbridge variables set.
unset FLOWBRIDGE_CONFIG FLOWBRIDGE_API_TOKEN SLACK_BOT_TOKEN SLACK_APP_TOKEN SLACK_SIGNING_SECRET

# section NAME: the README's lines from "## NAME" to the next "## ".
section() { awk -v h="## $1" '$0 == h {on=1; next} /^## / {on=0} on' README.md; }

# block NAME N: the lines of the Nth sh code block of section NAME, without
# the indentation of a block inside a list item.
block() {
  section "$1" | awk -v want="$2" '
    /^ *```sh$/ { n++; if (n == want) { on = 1; match($0, /^ */); indent = RLENGTH }; next }
    /^ *```/ { on = 0; next }
    on { print substr($0, indent + 1) }'
}

# run_block NAME N [SKIP]: runs block N of section NAME line by line, as
# typed, except lines starting with SKIP; fails if there is no such block.
run_block() {
  local lines line cmd
  lines=$(block "$1" "$2")
  [ -n "$lines" ] || { echo "no sh block $2 under '$1'"; exit 1; }
  while IFS= read -r line; do
    cmd=${line%%#*}                      # the README's comments are not commands
    cmd=${cmd//.../ci-dummy}            # placeholders: "export FLOWBRIDGE_API_TOKEN=..."
    cmd=${cmd//…/ci-dummy}              # and "export SLACK_BOT_TOKEN=xoxb-…"
    [ -n "${cmd// }" ] || continue
    if [ -n "${3:-}" ] && [[ $cmd == "$3"* ]]; then
      echo "(skipped, it needs a Slack workspace: $cmd)"
      continue
    fi
    echo "\$ $cmd"
    if [[ $cmd == "./flowbridge run "* ]]; then
      # run chats on the console, reading standard input: a first message
      # the core answers itself, then the end of input ends it (an empty
      # input, with the console its only adapter, is refused as a mistake).
      eval "$cmd" <<<'/agent help'
    else
      eval "$cmd" </dev/null
    fi
  done <<<"$lines"
}

# set_slack KEY VALUE: sets KEY in the [slack] section of flowbridge.toml,
# as the README tells the reader to.
set_slack() {
  awk -v k="$1" -v v="$2" '
    /^\[slack\]/ {s=1} /^\[/ && !/^\[slack\]/ {s=0}
    s && $0 ~ "^" k " *=" {print k " = " v; next} {print}' flowbridge.toml >flowbridge.toml.new
  mv flowbridge.toml.new flowbridge.toml
  grep -q "^$1 = " flowbridge.toml || { echo "flowbridge.toml has no [slack] $1"; exit 1; }
}

echo "== README: Running it for real"
run_block "Running it for real" 1

slack=$(section "Connect Slack")
echo "== README: Connect Slack, Socket Mode (the steps that need no Slack account)"
grep -q 'set `\[slack\] enabled = true`' <<<"$slack" || { echo "Connect Slack no longer says to enable [slack]"; exit 1; }
set_slack enabled true
run_block "Connect Slack" 1
[ -s slack-manifest.yaml ] || { echo "slack-manifest wrote nothing"; exit 1; }
grep -q 'socket_mode_enabled: true' slack-manifest.yaml || { echo "the Socket Mode manifest does not enable Socket Mode"; exit 1; }
run_block "Connect Slack" 2 "./flowbridge run "

echo "== README: Connect Slack, HTTP mode"
for said in 'set `mode = "http"`' '`signing_secret = "${SLACK_SIGNING_SECRET}"`' '`"https://bot.example.com"`'; do
  grep -qF "$said" <<<"$slack" || { echo "Connect Slack's HTTP mode no longer says $said"; exit 1; }
done
set_slack mode '"http"'
set_slack signing_secret '"${SLACK_SIGNING_SECRET}"'
set_slack public_url '"https://bot.example.com"'
unset SLACK_APP_TOKEN # HTTP mode does not read it
rm slack-manifest.yaml
run_block "Connect Slack" 3
grep -q 'request_url: "https://bot.example.com/slack/events"' slack-manifest.yaml || { echo "the HTTP-mode manifest lacks the request URL"; exit 1; }
echo "README commands: OK"
