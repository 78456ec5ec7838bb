# servetune build. Sources are found by glob, so a new module needs no edit here:
#   src/**/*.c (except src/cli/main.c) -> build/libservetune.a
#   tests/unit/test_*.c               -> one test binary each (cmocka)
#   tests/integration/test_*.c        -> one test binary each (may start servers on loopback)
#   bench/*.c                         -> one benchmark binary each
#   bench/fidelity/*.c                -> build/libfidelity.a (the fidelity harness: linked into the
#                                        benchmarks and the tests, not into servetune)
#   tests/fuzz/fuzz_*.c               -> libFuzzer targets (clang), `make fuzz`
CC      ?= cc
PKGS    := openssl yaml-0.1 jansson sqlite3 zlib
CSTD    := -std=c11 -D_GNU_SOURCE
WARN    := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wno-unused-parameter
OPT     ?= -O2 -g
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS)) -lm -lpthread
TEST_LIBS  := $(shell pkg-config --libs cmocka)

# SAN=1 builds with ASan+UBSan (what the tests use); BUILD names the output folder.
SAN     ?= 0
BUILD   ?= build
ifeq ($(SAN),1)
  OPT   := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
  LDSAN := -fsanitize=address,undefined
endif
CFLAGS_ALL = $(CSTD) $(WARN) $(OPT) -Isrc $(PKG_CFLAGS) $(CFLAGS)
LDFLAGS_ALL = $(LDSAN) $(LDFLAGS)

LIB_SRC   := $(filter-out src/cli/main.c,$(wildcard src/*/*.c))
# Data files built into the binary (scripts/embed): the price list.
DATA_OBJ  := $(BUILD)/gen/prices_data.o
LIB_OBJ   := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRC)) $(DATA_OBJ)
MAIN_OBJ  := $(BUILD)/src/cli/main.o
UNIT_SRC  := $(wildcard tests/unit/test_*.c)
INTEG_SRC := $(wildcard tests/integration/test_*.c)
TEST_BIN  := $(patsubst %.c,$(BUILD)/%,$(UNIT_SRC) $(INTEG_SRC))
FID_SRC   := $(wildcard bench/fidelity/*.c)
FID_OBJ   := $(patsubst bench/fidelity/%.c,$(BUILD)/fidelity-lib/%.o,$(FID_SRC))
BENCH_SRC := $(wildcard bench/*.c)
BENCH_BIN := $(patsubst %.c,$(BUILD)/%,$(BENCH_SRC))
FUZZ_SRC  := $(wildcard tests/fuzz/fuzz_*.c)

.PHONY: all clean test test-bins unit fuzz fuzz-build bench bench-cluster demo deps asan check-layers format check-format
all: $(BUILD)/servetune

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(BUILD)/gen/prices_data.c: data/gpu-prices.csv scripts/embed
	@mkdir -p $(dir $@)
	./scripts/embed st_prices_default_csv $< > $@.tmp && mv $@.tmp $@
$(BUILD)/gen/%.o: $(BUILD)/gen/%.c
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/libservetune.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libfidelity.a: $(FID_OBJ)
	@rm -f $@
	ar rcs $@ $^
$(BUILD)/fidelity-lib/%.o: bench/fidelity/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Ibench -MMD -MP -c $< -o $@

$(BUILD)/servetune: $(MAIN_OBJ) $(BUILD)/libservetune.a
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(PKG_LIBS)

$(BUILD)/tests/%: tests/%.c $(BUILD)/libfidelity.a $(BUILD)/libservetune.a tests/harness.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Itests -Ibench $(LDFLAGS_ALL) -o $@ $< $(BUILD)/libfidelity.a $(BUILD)/libservetune.a $(PKG_LIBS) $(TEST_LIBS)

$(BUILD)/bench/%: bench/%.c $(BUILD)/libfidelity.a $(BUILD)/libservetune.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -Ibench $(LDFLAGS_ALL) -o $@ $< $(BUILD)/libfidelity.a $(BUILD)/libservetune.a $(PKG_LIBS)

test-bins: $(BUILD)/servetune $(TEST_BIN)

# The test suite: the layers and the code's style checked, everything built with ASan+UBSan, then
# tests/run.sh runs each binary and prints the closing line "N passed, N failed".
test: check-layers check-format
	$(MAKE) SAN=1 BUILD=build-asan test-bins
	$(MAKE) fuzz-smoke
	BUILD=build-asan ./tests/run.sh

# The code's style (.clang-format): `make format` rewrites the sources in place.
FORMAT_SRC = $(wildcard src/*/*.[ch] tests/*.h tests/unit/*.c tests/integration/*.[ch] tests/fuzz/*.c bench/*.c bench/fidelity/*.[ch])
format:
	clang-format -i $(FORMAT_SRC)
# Fails, naming each file and line, where the sources differ from that style (nothing rewritten).
check-format:
	clang-format --dry-run -Werror $(FORMAT_SRC)

# Layers point one way (docs/architecture.md); fails on an include that points up.
check-layers:
	./scripts/check-layers

asan:
	$(MAKE) SAN=1 BUILD=build-asan

# Fuzz targets: libFuzzer via clang. fuzz-smoke runs each briefly (used by `make test`).
FUZZ_BIN := $(patsubst tests/fuzz/%.c,build-fuzz/%,$(FUZZ_SRC))
FUZZ_OBJ := $(patsubst %.c,build-fuzz/%.o,$(LIB_SRC)) build-fuzz/gen/prices_data.o
FUZZ_CFLAGS := $(CSTD) -g -O1 -Isrc $(PKG_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined
build-fuzz/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@
build-fuzz/gen/prices_data.c: data/gpu-prices.csv scripts/embed
	@mkdir -p $(dir $@)
	./scripts/embed st_prices_default_csv $< > $@.tmp && mv $@.tmp $@
build-fuzz/gen/%.o: build-fuzz/gen/%.c
	clang $(FUZZ_CFLAGS) -c $< -o $@
build-fuzz/libservetune.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^
build-fuzz/fuzz_%: tests/fuzz/fuzz_%.c build-fuzz/libservetune.a
	clang $(CSTD) -g -O1 -Isrc $(PKG_CFLAGS) -fsanitize=fuzzer,address,undefined -o $@ $< build-fuzz/libservetune.a $(PKG_LIBS)
fuzz-build: $(FUZZ_BIN)
FUZZ_SECONDS ?= 15
fuzz-smoke: fuzz-build
	@for f in $(FUZZ_BIN); do n=$$(basename $$f); mkdir -p build-fuzz/corpus-$$n; \
	  seeds=tests/fuzz/corpus/$$n; [ -d $$seeds ] || seeds=; \
	  echo "fuzz $$n ($(FUZZ_SECONDS) s)"; $$f -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 build-fuzz/corpus-$$n $$seeds >build-fuzz/$$n.log 2>&1 \
	  || { tail -40 build-fuzz/$$n.log; exit 1; }; done

# Benchmarks print figures (and ratios against wrk measured in the same run); they assert
# nothing about speed. calibrate prints the RunPod RTX 4090 figure against the model (information only).
bench: $(BUILD)/servetune $(BENCH_BIN)
	./bench/run.sh
	./$(BUILD)/bench/calibrate
	./$(BUILD)/bench/simspeed
	./$(BUILD)/bench/fidelity
	./bench/emulator_figures.sh $(BUILD)
	BUILD=$(BUILD) ./bench/trace_read.sh

# An audit through a one-node Slurm cluster vs serially, and the merge of its shards
# (docs/cluster.md; needs root, Slurm and munge). Not part of `make bench`: minutes long.
bench-cluster: $(BUILD)/servetune $(BENCH_BIN)
	./bench/cluster_figures.sh

clean:
	rm -rf build build-asan build-fuzz

-include $(shell find $(BUILD) build-fuzz -name '*.d' 2>/dev/null)
