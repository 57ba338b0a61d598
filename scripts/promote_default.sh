#!/usr/bin/env bash
# Make the GloVe-prior biLM continued to 14.5M tokens (configs/bilm/default.yaml -> default_cont.yaml ->
# default_cont2.yaml) the embedded `default`, then re-measure the default's results with the commands that
# made them. Each stage is committed when done.
#   bash scripts/promote_default.sh
# The choice is made on held-out data only: the new model replaces the candidate `glove_prior_8m` only if its
# held-out perplexity (../shared/data/corpus/heldout.txt.gz, not a task test set) is lower than 180.4
# (results/bilm/candidates/glove_prior_8m/glove_prior_8m.json); otherwise the script stops before promoting.
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=runs/bilm/default_cont2
CFG=configs/bilm/default_cont2.yaml
mkdir -p runs/logs
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a runs/logs/promote.log; }
while pgrep -f "train-bilm --config $CFG" > /dev/null; do sleep 20; done
log "training finished"

# 1. Ship as `default` (the replaced default's report moves to results/bilm/history/; the superseded candidate
#    `glove_prior_8m` leaves the package, git history keeps it) and measure the held-out perplexity of exactly
#    the shipped weights. If it is not better than the candidate's, stop before committing anything.
mkdir -p results/bilm/history
for f in default.md default.json default_learning_curve.png; do
  git mv "results/bilm/$f" "results/bilm/history/${f/default/default_4m}"
done
git rm -rq elmo_features/models/glove_prior_8m
python scripts/ship_default_bilm.py --run "$RUN" --name default --config "$CFG" --threads 2 \
  > runs/logs/ship_default.log 2>&1
ppl() { python -c "import json; print(round(json.load(open('$1'))['perplexity_shipped_fp16']['mean'], 1))"; }
new=$(ppl results/bilm/default.json)
old=$(ppl results/bilm/candidates/glove_prior_8m/glove_prior_8m.json)
log "held-out perplexity of the shipped weights: 14.5M tokens $new, 8.5M tokens $old"
python -c "import sys; sys.exit(0 if $new < $old else 1)" || { log "not better on held-out data: not committed"; exit 1; }
git add -A elmo_features/models results/bilm tests/test_default_model.py
git commit -qm "Default biLM: the GloVe-prior biLM continued to 14.5M tokens (held-out perplexity $new, was 224.9)"
log "promoted"

# 2. The default's results, with the commands that made them (NER gate rows x 3 seeds; WSD Table 5 1-NN;
#    sentiment 5-fold CV, seed 1), on 2 processes. The replaced default's results move to default_4m/.
archive() { local dir=$1; shift; mkdir -p "$dir/default_4m"; for f in "$@"; do git mv "$dir/$f" "$dir/default_4m/$f"; done; }
archive results/ner_conll2003 summary.md summary.json summary.csv mix_weights.png scores.png
elmo-tasks compare configs/ner_conll2003.yaml --sources glove,elmo_mix,glove+elmo_mix --jobs 2 --progress off \
  > runs/logs/promote_ner.log 2>&1
git add -A results/ner_conll2003 && git commit -qm "NER CoNLL-2003 on the new default biLM: gate rows, 3 seeds"
log "ner done"
archive results/wsd table5.md scores.json f1_per_layer.png keys
elmo-tasks wsd --train ../shared/data/wsd/semcor --test ../shared/data/wsd/senseval2 ../shared/data/wsd/senseval3 \
  ../shared/data/wsd/semeval2007 --config configs/wsd_semcor.yaml --set head=null --out results/wsd --threads 2 \
  --progress off > runs/logs/promote_wsd.log 2>&1
git add -A results/wsd && git commit -qm "WSD Table 5 on the new default biLM: 1-NN per layer"
log "wsd done"
archive results/sentiment_polarity summary.md summary.json summary.csv
elmo-tasks compare configs/sentiment_polarity.yaml \
  --sources glove,elmo_mix,glove+elmo_mix,elmo_charonly_mix,glove+elmo_charonly_mix --seeds 1 --jobs 2 \
  --progress off > runs/logs/promote_sentiment.log 2>&1
git add -A results/sentiment_polarity && git commit -qm "Sentiment 5-fold CV on the new default biLM, seed 1"
log "sentiment done"
