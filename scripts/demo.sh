#!/usr/bin/env bash
# The main job on the embedded SQLite default, in a fresh directory: create and migrate a database,
# then walk one activity through the whole flow - lint, create, two-role review, gray then full
# publish, claims and lottery draws, delivery to the ledger - and show what the database holds.
set -euo pipefail
BIN="${1:-rewardctl}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEMO="$(mktemp -d /tmp/rewardctl-demo.XXXXXX)"
cd "$DEMO"
echo "== demo in $DEMO (sqlite:rewardctl.db)" >&2
step() { echo; echo "\$ rewardctl $*" >&2; "$BIN" "$@"; }
# a rejection is an outcome (exit 1), not a failure of the demo
outcome() { echo; echo "\$ rewardctl $*" >&2; "$BIN" "$@" || [ $? -eq 1 ]; }

step db migrate
step db status

# The example lottery, with its window moved around today so that it can be claimed now.
start="$(date -u -d '-1 hour' +%Y-%m-%dT%H:%M:%SZ)"
end="$(date -u -d '+30 days' +%Y-%m-%dT%H:%M:%SZ)"
sed -e "s/^start = .*/start = \"$start\"/" -e "s/^end = .*/end = \"$end\"/" \
  "$ROOT/examples/activities/lucky_draw.toml" > draw.toml
code="$(sed -n 's/^code = "\(.*\)"/\1/p' draw.toml | head -1)"

step activity lint draw.toml
step activity create -f draw.toml --operator alice
step activity approve "$code" --as product --operator bob --comment "odds and prizes checked"
step activity approve "$code" --as tech --operator carol
step activity publish "$code" --gray --operator carol
outcome claim "$code" --user qa_alice --biz-id demo-gray-1          # on the gray list
outcome claim "$code" --user u1 --biz-id demo-gray-2                # not on it: not_in_gray_list
step activity publish "$code" --full --operator carol
for i in 1 2 3 4 5 6; do
  outcome claim "$code" --user u1 --biz-id "demo-u1-$i" -o json     # 5 draws a day, then limit_reached
done
outcome claim "$code" --user u1 --biz-id demo-u1-1 -o json          # a replay: the same grant again
step record show --user u1
step ledger balance u1
step activity show "$code"
step activity history "$code"

# A whitelist-only gift: load the whitelist from a CSV, then only listed users may claim, once.
sed -e "s/^start = .*/start = \"$start\"/" -e "s/^end = .*/end = \"$end\"/" \
  "$ROOT/examples/activities/whitelist_gift.toml" > gift.toml
gift="$(sed -n 's/^code = "\(.*\)"/\1/p' gift.toml | head -1)"
step activity create -f gift.toml --operator alice
step import-qualifications "$gift" "$ROOT/examples/qualifications.csv" --operator alice
step qualification count "$gift"
step activity approve "$gift" --as product --operator bob
step activity approve "$gift" --as tech --operator carol
step activity publish "$gift" --full --operator carol
outcome claim "$gift" --user 10001 --biz-id gift-10001-a            # on the whitelist: granted
outcome claim "$gift" --user 10001 --biz-id gift-10001-b            # qualification_used
outcome claim "$gift" --user 99999 --biz-id gift-99999              # not_qualified
step ledger balance 10001
# A compensation coupon to a list (list-issue): planned by one operator, approved by another, run.
sed -e "s/^start = .*/start = \"$start\"/" -e "s/^end = .*/end = \"$end\"/" \
  "$ROOT/examples/activities/compensation.toml" > comp.toml
comp="$(sed -n 's/^code = "\(.*\)"/\1/p' comp.toml | head -1)"
step activity create -f comp.toml --operator alice
step activity approve "$comp" --as product --operator bob
step activity approve "$comp" --as tech --operator carol
step activity publish "$comp" --full --operator carol
echo; echo "\$ rewardctl list-issue plan $comp $ROOT/examples/compensation.csv --prize apology_coupon --operator alice -o json" >&2
batch="$("$BIN" list-issue plan "$comp" "$ROOT/examples/compensation.csv" --prize apology_coupon --operator alice -o json \
  | tee /dev/stderr | sed -n 's/.*"batch":"\([^"]*\)".*/\1/p')"
step list-issue approve "$batch" --operator bob
step list-issue run "$batch" --operator bob
step list-issue status "$batch"
step list-issue items "$batch"
step ledger balance 20002

# The books: every cent and every unit accounted for. Any difference exits 1 and fails the demo.
step reconcile
step reconcile list
# The activity at a glance: one self-contained page per activity and an index (open it in a browser).
step report --html "$DEMO/report"
echo "== demo finished: $DEMO" >&2
