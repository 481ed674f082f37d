#!/usr/bin/env bash
# Fuzzes the CSV reader with libFuzzer (clang, ASan, UBSan) for a few minutes. Not part of the
# default test run.   scripts/fuzz-csv.sh [SECONDS]   (default 180; FUZZ_BUILD_DIR, FUZZ_JOBS)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
SECONDS_TO_RUN="${1:-180}"
BUILD="${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
command -v clang++ >/dev/null || { echo "fuzz-csv: clang++ is missing (apt-get install clang libclang-rt-14-dev)" >&2; exit 69; }
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DREWARDCTL_FUZZ=ON -DREWARDCTL_TESTS=OFF -DREWARDCTL_BENCH=OFF >/dev/null
cmake --build "$BUILD" --target fuzz_csv_reader
# seed corpus: the example files and a few awkward shapes
CORPUS="$BUILD/fuzz-corpus/csv_reader"
mkdir -p "$CORPUS"
cp "$ROOT"/examples/qualifications*.csv "$CORPUS"/ 2>/dev/null || true
printf '\xef\xbb\xbfuser_id,tier\r\nu1,"a\r\nb"\r\nu2,x' >"$CORPUS/bom_crlf"
printf 'user_id,note\nu1,"say ""hi"", ok"\nu2,go"ld\nu3,"a"b\n' >"$CORPUS/quotes"
printf 'user_id\n"never closed\n' >"$CORPUS/unterminated"
printf 'a,b,c\n,,\n\n\n   \n\t,\x00,\xff\n' >"$CORPUS/empty_nul"
mkdir -p "$BUILD/fuzz-artifacts"
echo "fuzz-csv: running for ${SECONDS_TO_RUN}s; crashes go to $BUILD/fuzz-artifacts" >&2
"$BUILD/tests/fuzz/fuzz_csv_reader" -max_total_time="$SECONDS_TO_RUN" -max_len=65536 -timeout=10 \
  -rss_limit_mb=1024 -artifact_prefix="$BUILD/fuzz-artifacts/" -print_final_stats=1 \
  ${FUZZ_JOBS:+-jobs=$FUZZ_JOBS -workers=$FUZZ_JOBS} "$CORPUS"
