#!/usr/bin/env bash
# Issue 9's measurement pipeline, in the order it ran: wait for the two biLM trainings, ship both models
# (held-out perplexity of the shipped weights), then the NER comparison and the sentiment cross-validation
# side by side (one core each), then the WSD table, then the lever table. Logs go to runs/logs/.
#   bash scripts/issue9_pipeline.sh
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p runs/logs
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a runs/logs/pipeline.log; }
for run in glove_prior charonly; do
  while pgrep -f "configs/bilm/$run.yaml" > /dev/null; do sleep 20; done
done
log "trainings finished"
python scripts/ship_default_bilm.py --run runs/bilm/glove_prior --name default --config configs/bilm/default.yaml --threads 1 > runs/logs/ship_default.log 2>&1 &
python scripts/ship_default_bilm.py --run runs/bilm/charonly --name default_charonly --config configs/bilm/charonly.yaml --threads 1 > runs/logs/ship_charonly.log 2>&1 &
wait
log "shipped"
git add elmo_features/models results/bilm && git commit -qm "Ship the issue-9 biLMs: default (GloVe prior) and default_charonly, with their reports"
# CPU time was short, so the grids were cut (every summary names its command): NER on the three gate rows
# x 3 seeds; sentiment on 5 folds x 1 seed, stopped after the three gate rows.
elmo-tasks compare configs/ner_conll2003.yaml --sources glove,elmo_mix,glove+elmo_mix --progress off > runs/logs/ner.log 2>&1 &
NER=$!
elmo-tasks compare configs/sentiment_polarity.yaml --seeds 1 \
  --sources glove,elmo_mix,glove+elmo_mix,elmo_charonly_mix,glove+elmo_charonly_mix --progress off > runs/logs/sentiment.log 2>&1 &
SENT=$!
while [ "$(python -c "import json;print(len(json.load(open('results/sentiment_polarity/summary.json'))['runs']))" 2>/dev/null || echo 0)" -lt 15 ]; do sleep 5; done
kill -KILL $SENT; wait $SENT || true  # SIGINT does not stop a compare between runs; the summary after 15 runs is kept
log "sentiment stopped after glove, elmo_mix, glove+elmo_mix"
elmo-tasks wsd --config configs/wsd_semcor.yaml --train ../shared/data/wsd/semcor --test ../shared/data/wsd/senseval2 \
  ../shared/data/wsd/senseval3 ../shared/data/wsd/semeval2007 --out results/wsd --threads 1 --set probes=false > runs/logs/wsd.log 2>&1
log "wsd done"
wait $NER
log "ner done"  # the char-only NER rows (elmo_charonly_mix, glove+elmo_charonly_mix) were not run: CPU time
python scripts/bilm_ablation.py > runs/logs/ablation.log 2>&1
log "ablation done"
