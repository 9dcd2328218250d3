#!/bin/sh
# Rebuilds tokenizer.model from corpus.txt and the dolly records (the shipped
# file was made with exactly this command; spm_train is SentencePiece's trainer).
# BPE with the identity normaliser and byte fallback, as Llama-2's tokenizer.
set -e
cd "$(dirname "$0")"
python3 -c 'import json,sys
for l in open("dolly.jsonl"):
    r=json.loads(l); print(r["instruction"]); print(r["context"]); print(r["response"])' > /tmp/quickstart_dolly_text.txt 2>/dev/null || : > /tmp/quickstart_dolly_text.txt
spm_train --input=corpus.txt,/tmp/quickstart_dolly_text.txt --model_prefix=tokenizer --vocab_size=512 \
  --model_type=bpe --normalization_rule_name=identity --byte_fallback=true --character_coverage=1.0 \
  --hard_vocab_limit=false --minloglevel=1
rm -f tokenizer.vocab /tmp/quickstart_dolly_text.txt
