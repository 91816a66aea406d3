#!/bin/bash
# The recipe sweep behind the translation and couplet defaults: many small trainings side
# by side, each judged by its validation BLEU per epoch (metrics.jsonl), never the test set.
#
#   benchmarks/recipe_sweep.sh DATA_DIR OUT_DIR [DEVICE] [SECONDS_PER_RUN]
#
# DATA_DIR holds multi30k/ and couplet/; DEVICE is "cuda" (the sweep in docs/results.md#recipe-sweep
# ran on one GPU, twelve runs at a time, each cut after SECONDS_PER_RUN) or "cpu" (then run
# fewer at a time). Every run writes OUT_DIR/NAME/metrics.jsonl and OUT_DIR/NAME.log;
# the summary at the end prints each run's validation BLEU per epoch.
set -u
DATA_DIR=${1:?usage: recipe_sweep.sh DATA_DIR OUT_DIR [DEVICE] [SECONDS_PER_RUN]}
OUT_DIR=${2:?usage: recipe_sweep.sh DATA_DIR OUT_DIR [DEVICE] [SECONDS_PER_RUN]}
DEVICE=${3:-cuda}
LIMIT=${4:-370}
PYTHON=${PYTHON:-python3}
mkdir -p "$OUT_DIR"

run() {
    local task=$1 name=$2
    shift 2
    OMP_NUM_THREADS=1 timeout "$LIMIT" "$PYTHON" -m transformer_lab train "$task" --data-dir "$DATA_DIR" \
        --out "$OUT_DIR/$name" --set train.device="$DEVICE" --set train.progress_bar=false --set train.keep_last=5 \
        "$@" > "$OUT_DIR/$name.log" 2>&1
    echo "$name: exit $?"
}

# The settings below are spelled out, not taken from the presets, so that the sweep
# reproduces after the presets changed to the winners.
TRANSLATION_BEFORE="--set data.vocab_size=8000 --set train.cooldown_steps=0"
COUPLET_BEFORE="--set model.aligned_decoder_input=false --set model.num_encoder_layers=3 --set model.num_decoder_layers=3 --set train.epochs=12 --set train.cooldown_steps=0"
ALIGNED="--set model.aligned_decoder_input=true --set model.num_encoder_layers=3 --set model.num_decoder_layers=3 --set train.epochs=12 --set train.cooldown_steps=0"

# Round 1.
run translation t1-default $TRANSLATION_BEFORE &
run translation t2-cool1200 $TRANSLATION_BEFORE --set train.cooldown_steps=1200 &
run translation t3-drop03-cool $TRANSLATION_BEFORE --set model.dropout=0.3 --set train.cooldown_steps=1200 &
run translation t4-lr1-cool $TRANSLATION_BEFORE --set train.lr_factor=1.0 --set train.cooldown_steps=1200 &
run translation t5-v10k-cool $TRANSLATION_BEFORE --set data.vocab_size=10000 --set train.cooldown_steps=1200 &
run translation t6-ep44-cool $TRANSLATION_BEFORE --set train.epochs=44 --set train.cooldown_steps=1500 &
run couplet c1-default $COUPLET_BEFORE &
run couplet c2-aligned $ALIGNED &
run couplet c3-aligned-lr1-cool $ALIGNED --set train.lr_factor=1.0 --set train.cooldown_steps=600 &
run couplet c4-aligned-tok2k $ALIGNED --set data.max_tokens=2048 &
run couplet c5-default-ep40 $COUPLET_BEFORE --set train.epochs=40 &
run couplet c6-aligned-ep40 $ALIGNED --set train.epochs=40 &
wait

# Round 2: the aligned couplet model's neighbours, and larger vocabularies.
run translation t8-v12k-cool $TRANSLATION_BEFORE --set data.vocab_size=12000 --set train.cooldown_steps=1200 &
run couplet g1-al-ls0 $ALIGNED --set train.label_smoothing=0.0 &
run couplet g2-al-drop03 $ALIGNED --set model.dropout=0.3 &
run couplet g3-al-2x2 $ALIGNED --set model.num_encoder_layers=2 --set model.num_decoder_layers=2 &
run couplet g4-al-minfreq2 $ALIGNED --set data.min_frequency=2 &
run couplet g5-al-tok2k-cool $ALIGNED --set data.max_tokens=2048 --set train.cooldown_steps=1500 &
run couplet g6-al-nhead8 $ALIGNED --set model.nhead=8 &
wait

"$PYTHON" - "$OUT_DIR" <<'EOF'
import json, pathlib, sys
for metrics in sorted(pathlib.Path(sys.argv[1]).glob("*/metrics.jsonl")):
    scores = [json.loads(line).get("val_bleu") for line in metrics.read_text().splitlines()]
    print(f"{metrics.parent.name:22s}", " ".join(f"{score:.2f}" for score in scores if score is not None))
EOF
