#!/usr/bin/env bash
# A resumed run's metrics file read the way people read it: pandas.read_json(lines=True) gives an
# integer step column; the steps redone after the resume are told apart by "attempt" and by the
# resume record, and keeping the last record per step (the documented rule) leaves each step once
# with the resumed run's values; tools/plot_metrics.py draws it.
# Usage: metrics_resume_test.sh H2_BINARY REPO_ROOT PYTHON
set -euo pipefail
h2=$1
root=$2
python=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

run() {
  "$h2" train "$root/configs/train/tiny.yaml" --set train.steps=12 --set log.every=1 \
    --set train.eval_every=6 --set checkpoint.every=5 --set checkpoint.dir=ckpt \
    --set log.metrics_file=metrics.jsonl "$@" >>train.log
}
run
rm -rf ckpt/step_000012  # as if the run had died after step 12's line but before its checkpoint
run --set checkpoint.resume=true
grep -q "resumed from ckpt/step_000010" train.log || { echo "did not resume from step 10"; exit 1; }

"$python" - <<'PY'
import pandas as pd
df = pd.read_json("metrics.jsonl", lines=True)
assert pd.api.types.is_integer_dtype(df["step"]), df["step"].dtype
assert pd.api.types.is_integer_dtype(df["attempt"]), df["attempt"].dtype
steps = df[df.event == "step"]
assert list(steps.step) == list(range(1, 13)) + [11, 12], list(steps.step)
assert not steps.duplicated(["step", "attempt"]).any(), "a step twice within one attempt"
resume = df[df.event == "resume"]
assert len(resume) == 1 and resume.step.iloc[0] == 10 and resume.attempt.iloc[0] == 1, resume
final = steps.drop_duplicates("step", keep="last")
assert list(final.step) == list(range(1, 13)) and list(final.attempt) == [0] * 10 + [1, 1]
assert list(df.event[df.event.isin(["start", "done"])]) == ["start", "done", "start", "done"]
print("pandas: integer step column, one row per step after the rule")
PY
"$python" "$root/tools/plot_metrics.py" metrics.jsonl --out loss.png >plot.log
grep -q "^train loss: 12 points" plot.log && grep -q "^eval loss: 2 points" plot.log &&
  [[ -s loss.png ]] || { echo "plot_metrics.py: $(cat plot.log)"; exit 1; }
echo "metrics resume ok"
