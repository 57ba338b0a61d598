#!/usr/bin/env bash
# Make a continued biLM run the embedded `default`, then re-measure the default's results with the commands
# that made them. Each stage is committed when done.
#   bash scripts/promote_default.sh RUN CONFIG ARCHIVE
#   e.g. bash scripts/promote_default.sh runs/bilm/default_cont3 configs/bilm/default_cont3.yaml default_14m
# ARCHIVE names the folder (results/*/ARCHIVE/) and file prefix (results/bilm/history/ARCHIVE.*) that keep the
# replaced default's results. The choice is made on held-out data only: the new model replaces the default only
# if the held-out perplexity of its shipped weights (../shared/data/corpus/heldout.txt.gz, not a task test set)
# is lower than the current default's (results/bilm/default.json); otherwise the script restores the default
# and stops. Session 18 ran this script's previous version (runs/bilm/default_cont2, archive default_4m).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 3 ] || { echo "usage: bash scripts/promote_default.sh RUN CONFIG ARCHIVE" >&2; exit 2; }
RUN=$1 CFG=$2 ARCHIVE=$3
[ -f "$CFG" ] || { echo "promote_default: no config $CFG" >&2; exit 2; }
[ ! -e "results/bilm/history/$ARCHIVE.json" ] || { echo "promote_default: results/bilm/history/$ARCHIVE.json exists; choose another ARCHIVE" >&2; exit 2; }
mkdir -p runs/logs
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a runs/logs/promote.log; }
while pgrep -f "train-bilm --config $CFG" > /dev/null; do sleep 20; done
[ -f "$RUN/checkpoint.pt" ] || { log "no checkpoint in $RUN"; exit 1; }
log "training finished"
ppl() { python -c "import json; print(round(json.load(open('$1'))['perplexity_shipped_fp16']['mean'], 1))"; }
old=$(ppl results/bilm/default.json)

# 1. Ship as `default` (the replaced default's report moves to results/bilm/history/) and measure the held-out
#    perplexity of exactly the shipped weights. If it is not better than the old default's, restore and stop.
mkdir -p results/bilm/history
for f in default.md default.json default_learning_curve.png; do
  git mv "results/bilm/$f" "results/bilm/history/${f/default/$ARCHIVE}"
done
python scripts/ship_default_bilm.py --run "$RUN" --name default --config "$CFG" --threads 2 \
  > runs/logs/ship_default.log 2>&1
new=$(ppl results/bilm/default.json)
log "held-out perplexity of the shipped weights: new $new, current default $old"
if ! python -c "import sys; sys.exit(0 if $new < $old else 1)"; then
  log "not better on held-out data: the current default is restored, nothing committed"
  mkdir -p runs/rejected && cp results/bilm/default.md results/bilm/default.json runs/rejected/
  git reset -q HEAD -- results/bilm elmo_features/models/default
  git checkout HEAD -- results/bilm elmo_features/models/default
  rm -f "results/bilm/history/$ARCHIVE".*
  exit 1
fi
git add -A elmo_features/models results/bilm
git commit -qm "Default biLM: $RUN ($CFG) promoted (held-out perplexity $new, was $old)"
log "promoted"
# The run's softmax goes to dev/ (shipped weights carry none), so the next continuation can start from it.
python scripts/export_softmax.py --run "$RUN" --vocab elmo_features/models/default/vocab.txt --out dev/default_softmax.hdf5 \
  | tee -a runs/logs/promote.log
git commit -qm "dev/default_softmax.hdf5: the softmax of $RUN, the new default" -- dev/default_softmax.hdf5

# 2. The default's results, with the commands that made them (NER gate rows x 3 seeds; WSD Table 5 1-NN;
#    sentiment 5-fold CV, seed 1), on 2 processes. The replaced default's results move to ARCHIVE/.
archive() { local dir=$1; shift; mkdir -p "$dir/$ARCHIVE"; for f in "$@"; do git mv "$dir/$f" "$dir/$ARCHIVE/$f"; done; }
archive results/ner_conll2003 summary.md summary.json summary.csv mix_weights.png scores.png
elmo-tasks compare configs/ner_conll2003.yaml --sources glove,elmo_mix,glove+elmo_mix --jobs 2 --progress off \
  > runs/logs/promote_ner.log 2>&1
git add -A results/ner_conll2003 && git commit -qm "NER CoNLL-2003 on the new default biLM: gate rows, 3 seeds" -- results/ner_conll2003
log "ner done"
archive results/wsd table5.md scores.json f1_per_layer.png keys
elmo-tasks wsd --train ../shared/data/wsd/semcor --test ../shared/data/wsd/senseval2 ../shared/data/wsd/senseval3 \
  ../shared/data/wsd/semeval2007 --config configs/wsd_semcor.yaml --set head=null --out results/wsd --threads 2 \
  --progress off > runs/logs/promote_wsd.log 2>&1
git add -A results/wsd && git commit -qm "WSD Table 5 on the new default biLM: 1-NN per layer" -- results/wsd
log "wsd done"
archive results/sentiment_polarity summary.md summary.json summary.csv mix_weights.png scores.png
elmo-tasks compare configs/sentiment_polarity.yaml \
  --sources glove,elmo_mix,glove+elmo_mix,elmo_charonly_mix,glove+elmo_charonly_mix --seeds 1 --jobs 2 \
  --progress off > runs/logs/promote_sentiment.log 2>&1
git add -A results/sentiment_polarity && git commit -qm "Sentiment 5-fold CV on the new default biLM, seed 1" -- results/sentiment_polarity
log "sentiment done"
