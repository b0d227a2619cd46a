# k3 build. `make` leaves build/k3; `make test` builds and runs the suite.
#
#   make BUILD=dir        build into another folder (helpers / parallel work)
#   make SAN=1            AddressSanitizer + UndefinedBehaviorSanitizer build
#   make fuzz             libFuzzer targets (clang) into $(BUILD)/fuzz/
#   make fuzz-long        run every fuzz target FUZZ_SECONDS (default 60) each
#
# Sources are found by wildcard: every src/**/*.c outside src/cli/ goes into
# libk3.a, src/cli/*.c make the k3 executable, each tests/test_*.c is its own
# test program (linked with tests/helpers.c) and each fuzz/fuzz_*.c a fuzz target.

BUILD ?= build
CC ?= cc
OPT ?= -O2

PKG_CFLAGS := $(shell pkg-config --cflags jansson libpcre2-8 libmicrohttpd ompi-c libedit libcrypto 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs jansson libpcre2-8 libmicrohttpd ompi-c libedit libcrypto 2>/dev/null)

CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unused-parameter \
               -fopenmp -Iinclude -Isrc $(PKG_CFLAGS) -MMD -MP
ifeq ($(CI),true)
CFLAGS_BASE += -Werror
endif
ifeq ($(SAN),1)
OPT := -O1
CFLAGS_BASE += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDSAN := -fsanitize=address,undefined
endif
CFLAGS ?= $(OPT) -g
ALL_CFLAGS := $(CFLAGS_BASE) $(CFLAGS)
LDLIBS := $(PKG_LIBS) -lm -lpthread -fopenmp $(LDSAN)

LIB_SRC  := $(shell find src -name '*.c' -not -path 'src/cli/*' | sort)
CLI_SRC  := $(sort $(wildcard src/cli/*.c))
TEST_SRC := $(sort $(wildcard tests/test_*.c))
FUZZ_SRC := $(sort $(wildcard fuzz/fuzz_*.c))

LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
FUZZ_BIN := $(FUZZ_SRC:fuzz/%.c=$(BUILD)/fuzz/%)

.PHONY: all test test-quick fuzz fuzz-long clean format
all: $(BUILD)/k3 $(TEST_BIN)
TEST_HELPERS := $(BUILD)/obj/tests/helpers.o
$(TEST_BIN): $(TEST_HELPERS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

# `k3 --version` names the commit it was built from
$(BUILD)/obj/src/cli/main.o: ALL_CFLAGS += -DK3_GIT='"$(shell git describe --always --dirty 2>/dev/null || echo unknown)"'

# the chat page is assembled into webui.o (.incbin)
$(BUILD)/obj/src/serve/webui.o: src/serve/webui.html

$(BUILD)/libk3.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/k3: $(CLI_OBJ) $(BUILD)/libk3.a
	$(CC) $(ALL_CFLAGS) $(CLI_OBJ) $(BUILD)/libk3.a $(LDLIBS) -o $@

# Each test program is its own file plus the shared helpers (tests/helpers.h),
# compiled once; its .d file (one source per command) names the headers it uses.
$(BUILD)/tests/%: tests/%.c $(TEST_HELPERS) $(BUILD)/libk3.a tests/t.h tests/helpers.h
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $< $(TEST_HELPERS) $(BUILD)/libk3.a $(LDLIBS) -o $@

# libFuzzer targets: clang, every source compiled once, instrumented, into
# $(BUILD)/fuzz/obj/ (the fuzz scripts, tests/sh/lib/fuzz.bash, link their
# targets from the same objects). Without -fopenmp: the pragmas are ignored
# (fuzzing runs single-threaded) and clang 14's backend cannot outline OpenMP
# regions inside target("avx2") functions; libgomp still provides
# omp_get_thread_num() and friends.
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -Wall -Wextra -Wno-unused-parameter -Wno-unknown-pragmas \
               -Iinclude -Isrc $(PKG_CFLAGS) -MMD -MP -fsanitize=fuzzer-no-link,address,undefined
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/fuzz/obj/%.o)
# written by rename: fuzz scripts that run side by side may build one object
$(BUILD)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -c $< -o $@.$$$$.tmp -MF $@.$$$$.dtmp -MT $@ && \
	    mv $@.$$$$.dtmp $(@:.o=.d) && mv $@.$$$$.tmp $@
$(BUILD)/fuzz/%: $(BUILD)/fuzz/obj/fuzz/%.o $(FUZZ_LIB_OBJ)
	@mkdir -p $(dir $@)
	clang -fsanitize=fuzzer,address,undefined $^ $(PKG_LIBS) -lgomp -lm -lpthread -o $@
fuzz: $(FUZZ_BIN)

# Every fuzz target for FUZZ_SECONDS each, on the seeds of its suite script
# (tests/sh/*fuzz*.sh), e.g. `make fuzz-long FUZZ_SECONDS=600`.
FUZZ_SECONDS ?= 60
fuzz-long: all
	FUZZ_SECONDS=$(FUZZ_SECONDS) K3_NO_ASAN=1 BUILD=$(BUILD) bash tests/run_all.sh fuzz

test: all
	BUILD=$(BUILD) bash tests/run_all.sh

# Opt-in: the v32k real slice against the float64 oracle (tests/realdims.sh;
# ~10 GB of disk, 10-20 min; REALDIMS_MODEL=DIR reuses a slice).
.PHONY: test-realdims
test-realdims: all
	K3=$(BUILD)/k3 bash tests/realdims.sh

clean:
	rm -rf $(BUILD) $(BUILD)-asan

format:
	clang-format -i $$(find include src tests bench fuzz -name '*.[ch]')

-include $(shell find $(BUILD)/obj $(BUILD)/tests $(BUILD)/fuzz/obj -name '*.d' 2>/dev/null)
