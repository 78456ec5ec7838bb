#!/usr/bin/env bash
# Offline n-gram acceptance on a public text data set, and `trace stats --spec` speed.
# The data set: llama.cpp's own documentation (docs/**/*.md) and C++ sources (src/, common/) of
# the release scripts/install-llamacpp builds (MIT licence), each file's first half the prompt and
# its second half the logged completion (bench/spec_corpus split), tokenized with the
# ggml-vocab-llama-spm.gguf vocabulary shipped with it. Then 100k chat-sized requests (2 kB pieces,
# repeated) through `trace stats --spec ngram:4` with /usr/bin/time. Asserts nothing.
# Environment: BUILD (default build), LLAMACPP_SRC (default: scripts/install-llamacpp's source),
# N (default 100000), SPECS (the --spec values).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=$BUILD/servetune
GEN=$BUILD/bench/spec_corpus
N=${N:-100000}
SPECS=${SPECS:-"ngram:1 ngram:2 ngram:3 ngram:4 ngram:5 ngram:8 ngram:4,2,5 ngram:4,1,3"}
DIR=$(./scripts/install-llamacpp --print-dir 2>/dev/null) ||
  DIR=$(ls -d "${SERVETUNE_CACHE:-$HOME/.cache/servetune}"/llama.cpp-* 2>/dev/null | grep -v '\.lock$' | tail -1)
SRC=${LLAMACPP_SRC:-$DIR/src}
[ -x "$BIN" ] && [ -x "$GEN" ] || { echo "build first: make $BIN $GEN"; exit 1; }
VOCAB=$SRC/models/ggml-vocab-llama-spm.gguf
[ -f "$VOCAB" ] || { echo "no llama.cpp source at $SRC: run scripts/install-llamacpp or set LLAMACPP_SRC"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args=()
for s in $SPECS; do args+=(--spec "$s"); done
mapfile -t docs < <(find "$SRC/docs" -name '*.md' | sort)
mapfile -t code < <(find "$SRC/src" "$SRC/common" -maxdepth 1 \( -name '*.cpp' -o -name '*.h' \) | sort)
"$GEN" split "${docs[@]}" >"$tmp/docs.jsonl"
"$GEN" split "${code[@]}" >"$tmp/code.jsonl"
for c in docs code; do
  echo "== llama.cpp $c: $(wc -l <"$tmp/$c.jsonl") files, first half -> second half"
  "$BIN" trace stats "$tmp/$c.jsonl" --vocab "$VOCAB" "${args[@]}" | sed -n '/^Speculative/,$p' | grep -v '^    [a-z]'
done
"$GEN" chunk 2000 "${docs[@]}" "${code[@]}" >"$tmp/chunks.jsonl"
"$GEN" repeat "$N" "$tmp/chunks.jsonl" >"$tmp/many.jsonl"
echo "== speed: $N requests ($(du -m "$tmp/many.jsonl" | cut -f1) MB), load average $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/time -f '%e s wall, %U s user, %M KB peak RSS: trace stats alone' "$BIN" trace stats "$tmp/many.jsonl" >/dev/null
/usr/bin/time -f '%e s wall, %U s user, %M KB peak RSS: with --spec ngram:4 --vocab' "$BIN" trace stats "$tmp/many.jsonl" \
    --vocab "$VOCAB" --spec ngram:4 >/dev/null
