#!/usr/bin/env bash
# Evaluate the candidate default biLM `glove_prior_8m` (configs/bilm/default_cont.yaml) the way the shipped
# default was evaluated, in the order it ran: wait for its training, ship it as an embedded model (held-out
# perplexity of the shipped weights), then NER (3 gate rows x 3 seeds, 2 jobs), WSD 1-NN per layer, and the
# sentiment cross-validation of the gate rows (seed 1 only: session time). Each stage is committed when done. Everything goes to results/bilm/candidates/glove_prior_8m/.
#   bash scripts/candidate_pipeline.sh
# Superseded: glove_prior_8m left the package at commit 253219c (scripts/promote_default.sh); this script stays as
# the record of how results/bilm/candidates/glove_prior_8m/ was made.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=results/bilm/candidates/glove_prior_8m
mkdir -p runs/logs "$OUT"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a runs/logs/candidate.log; }
while pgrep -f "configs/bilm/default_cont.yaml" > /dev/null; do sleep 20; done
log "training finished"
python scripts/ship_default_bilm.py --run runs/bilm/default_cont --name glove_prior_8m \
  --config configs/bilm/default_cont.yaml --results "$OUT" --threads 2 > runs/logs/ship_candidate.log 2>&1
log "shipped"
git add elmo_features/models/glove_prior_8m "$OUT" && git commit -qm "Candidate biLM glove_prior_8m: shipped weights and held-out perplexity"
elmo-tasks compare configs/candidates/ner.yaml --sources glove,elmo_mix,glove+elmo_mix --jobs 2 \
  --results-dir "$OUT/ner" --progress off > runs/logs/candidate_ner.log 2>&1
log "ner done"
git add "$OUT" && git commit -qm "Candidate biLM glove_prior_8m: NER gate rows, 3 seeds"
elmo-tasks wsd --config configs/wsd_semcor.yaml --features elmo --bilm glove_prior_8m --set head=null \
  --set probes=false --set "knn=[layers, average]" --train ../shared/data/wsd/semcor \
  --test ../shared/data/wsd/senseval2 ../shared/data/wsd/senseval3 ../shared/data/wsd/semeval2007 \
  --out "$OUT/wsd" --threads 2 --no-plot --progress off > runs/logs/candidate_wsd.log 2>&1
log "wsd done"
git add "$OUT" && git commit -qm "Candidate biLM glove_prior_8m: WSD 1-NN per layer"
elmo-tasks compare configs/candidates/sentiment.yaml --sources glove,elmo_mix,glove+elmo_mix --seeds 1 --jobs 2 \
  --results-dir "$OUT/sentiment" --progress off > runs/logs/candidate_sentiment.log 2>&1
log "sentiment done"
git add "$OUT" && git commit -qm "Candidate biLM glove_prior_8m: sentiment 5-fold CV, seed 1"
