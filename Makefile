# Cairn - build, test, demo, bench.
#
#   make            build build/cairn
#   make demo       install missing packages, build, serve + mount in ./demo
#   make check      install, build, run every test (plain and ASan/UBSan),
#                   replay the fuzz corpora, build once with clang
#   make bench      the seed workloads on Cairn and on local disk
#   make fuzz       each libFuzzer target for FUZZ_TIME seconds (default 60)
#
# BUILD selects the output directory; SAN=1 builds with AddressSanitizer
# and UndefinedBehaviorSanitizer (make check does this in build-asan/).
# The benchmark's C tools (bench/tools, need libnetcdf) are built by
# `make bench-tools`, not by `make all`.

CC      ?= cc
BUILD   ?= build
SAN     ?= 0
PKGS    := fuse3 lmdb

CFLAGS  ?= -O2 -g
CFLAGS  += -std=gnu11 -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter \
           -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -pthread -MMD -MP \
           $(shell pkg-config --cflags fuse3 2>/dev/null)
LDLIBS  += $(shell pkg-config --libs fuse3 2>/dev/null) -llmdb -lisal -luring -lcrypto -pthread

ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer \
           -fno-sanitize-recover=undefined -DCAIRN_DEBUG
LDFLAGS += -fsanitize=address,undefined
endif

LIB_SRC := $(wildcard lib/*.c) $(wildcard server/*.c) $(wildcard client/*.c) \
           $(filter-out cli/main.c,$(wildcard cli/*.c))
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
MAIN_OBJ := $(BUILD)/obj/cli/main.o
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
TOOL_SRC := $(wildcard bench/tools/*.c)
TOOL_BIN := $(TOOL_SRC:bench/tools/%.c=$(BUILD)/tools/%)

# Fuzzing (tests/fuzz/README.md, docs/RELIABILITY.md). Each target
# tests/fuzz/fuzz_NAME.c is built twice: with clang and libFuzzer into
# BUILD/fuzz/fuzz_NAME (make fuzz), and with $(CC) and a plain main that
# runs each corpus file once into BUILD/fuzz/replay_fuzz_NAME (make all;
# tests/run.sh replays the corpora with it, so no clang is needed there).
# Only the pure decoders are linked: lib/ and the store's and the chunk
# cache's record codecs.
# Debian's clang-14 package installs clang-14, not clang.
CLANG     ?= $(firstword $(shell command -v clang-14 clang 2>/dev/null) clang)
FUZZ_TIME ?= 60
FUZZ_SAVE ?= 0
FUZZ_SRC  := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES := $(FUZZ_SRC:tests/fuzz/%.c=%)
FUZZ_ONLY ?= $(FUZZ_NAMES)
FUZZ_LIB_SRC := $(wildcard lib/*.c) $(wildcard server/store_rec.c) \
                $(wildcard client/ccache_rec.c)
FUZZ_BIN  := $(FUZZ_NAMES:%=$(BUILD)/fuzz/%)
REPLAY_BIN := $(FUZZ_NAMES:%=$(BUILD)/fuzz/replay_%)
FUZZ_CFLAGS := -O1 -g -std=gnu11 -Wall -Wextra -Werror -Wshadow \
           -Wno-unused-parameter -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 \
           -fno-omit-frame-pointer -fsanitize=address,undefined \
           -fno-sanitize-recover=undefined -MMD -MP $(FUZZ_DEFS)
FUZZ_LIB_OBJ := $(FUZZ_LIB_SRC:%.c=$(BUILD)/fuzz/obj/%.o)

.PHONY: all deps demo demo-stop check check-plain check-asan unit bench \
        bench-tools fuzz fuzz-build clean

all: $(BUILD)/cairn $(UNIT_BIN) $(REPLAY_BIN)

bench-tools: $(TOOL_BIN)

$(BUILD)/cairn: $(LIB_OBJ) $(MAIN_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c -o $@ $<

$(BUILD)/tests/%: tests/unit/%.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB_OBJ) $(LDLIBS)

$(BUILD)/tools/%: bench/tools/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< -lnetcdf -pthread

# Replay drivers: the target's TestOneInput and a plain main, linked with
# this build's own objects (sanitizers when SAN=1).
$(BUILD)/fuzz/replay_%: tests/fuzz/%.c tests/fuzz/replay.c \
		$(FUZZ_LIB_SRC:%.c=$(BUILD)/obj/%.o)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $^ -lcrypto

$(BUILD)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

$(BUILD)/fuzz/%: $(BUILD)/fuzz/obj/tests/fuzz/%.o $(FUZZ_LIB_OBJ)
	$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $^ -lcrypto

fuzz-build: $(FUZZ_BIN)

# Keep the clang objects between runs (make deletes intermediates).
.SECONDARY: $(FUZZ_LIB_OBJ) $(FUZZ_NAMES:%=$(BUILD)/fuzz/obj/tests/fuzz/%.o)

# make fuzz [FUZZ_TIME=s] [FUZZ_ONLY=fuzz_msg] [FUZZ_SAVE=1]: new inputs go
# to BUILD/fuzz/new/ (into tests/fuzz/corpus/ with FUZZ_SAVE=1), crash
# reproducers to BUILD/fuzz/crashes/. FUZZ_DEFS adds -D options to the
# targets (use a BUILD of its own): -DFUZZ_OP=N fuzzes message N alone.
fuzz: deps
	@$(MAKE) --no-print-directory fuzz-build
	@tests/fuzz/fuzz.sh $(BUILD)/fuzz $(FUZZ_TIME) $(FUZZ_SAVE) $(FUZZ_ONLY)

deps:
	@scripts/deps.sh

demo: deps
	@$(MAKE) --no-print-directory all
	@scripts/demo.sh start

demo-stop:
	@scripts/demo.sh stop

# Every test, plain build and sanitizer build; the last line of output is
# "N passed, N failed".
# The clang build (CAIRN_CLANG_BUILD) is one more suite of tests/run.sh.
# Both builds compile on every CPU; tests/run.sh runs two suites at a time
# on two CPUs or more (CAIRN_TEST_JOBS=1: one after another).
NPROC := $(shell nproc 2>/dev/null || echo 1)
check: deps
	@$(MAKE) --no-print-directory -j$(NPROC) all bench-tools
	@$(MAKE) --no-print-directory -j$(NPROC) BUILD=build-asan SAN=1 all bench-tools
	@CAIRN_CLANG_BUILD=build-clang tests/run.sh build build-asan

check-plain: deps
	@$(MAKE) --no-print-directory all bench-tools
	@tests/run.sh build

check-asan: deps
	@$(MAKE) --no-print-directory BUILD=build-asan SAN=1 all bench-tools
	@tests/run.sh build-asan

bench: deps
	@$(MAKE) --no-print-directory all bench-tools
	@bench/run.sh

clean:
	rm -rf build build-asan build-clang

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
