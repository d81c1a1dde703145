# Cairn - build, test, demo, bench.
#
#   make            build build/cairn
#   make demo       install missing packages, build, serve + mount in ./demo
#   make check      install, build, run every test (plain and ASan/UBSan)
#   make bench      the seed workloads on Cairn and on local disk
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
LDLIBS  += $(shell pkg-config --libs fuse3 2>/dev/null) -llmdb -pthread

ifeq ($(SAN),1)
CFLAGS  += -fsanitize=address,undefined -fno-omit-frame-pointer \
           -fno-sanitize-recover=undefined
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

.PHONY: all deps demo demo-stop check check-plain check-asan unit bench \
        bench-tools clean

all: $(BUILD)/cairn $(UNIT_BIN)

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

deps:
	@scripts/deps.sh

demo: deps
	@$(MAKE) --no-print-directory all
	@scripts/demo.sh start

demo-stop:
	@scripts/demo.sh stop

# Every test, plain build and sanitizer build; the last line of output is
# "N passed, N failed".
check: deps
	@$(MAKE) --no-print-directory all bench-tools
	@$(MAKE) --no-print-directory BUILD=build-asan SAN=1 all bench-tools
	@tests/run.sh build build-asan

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
	rm -rf build build-asan

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
