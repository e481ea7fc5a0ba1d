# brickfs — top-level build. `make` builds into build/, `make test` runs every
# test, `make SAN=1 ...` builds and tests with ASan+UBSan+LeakSanitizer into
# build-san/. Sources are discovered by folder, so adding a translator or a
# unit test needs no edit here:
#   src/xlators/CLASS/NAME/*.c  -> build/lib/brickfs/xlators/CLASS/NAME.so
#   tests/unit/*.c, tests/graph/*.c -> build/tests/{unit,graph}/NAME
#   tests/fuzz/NAME.c           -> build/fuzz/NAME (clang, libFuzzer)

SHELL := /bin/bash
PREFIX ?= /usr/local
SAN ?= 0
ifeq ($(SAN),1)
BUILD ?= build-san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
BUILD ?= build
SANFLAGS :=
endif

CC ?= gcc
PYTHON ?= python3
WARN := -Wall -Wextra -Wshadow -Wformat=2 -Wpointer-arith -Wstrict-prototypes \
        -Wmissing-prototypes -Wno-unused-parameter -Wno-missing-field-initializers \
        -Wvla -Wwrite-strings
ifeq ($(WERROR),1)
WARN += -Werror
endif
OPT ?= -O2
CPPFLAGS := -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Isrc -Iinclude -I$(BUILD)/gen -Itests/lib
CFLAGS := -std=gnu11 $(OPT) -g -fPIC -pthread $(WARN) $(SANFLAGS) $(EXTRA_CFLAGS)
LDFLAGS := -pthread $(SANFLAGS)
JSON_CFLAGS = $(shell pkg-config --cflags json-c 2>/dev/null)
JSON_LIBS = $(shell pkg-config --libs json-c 2>/dev/null)
CPPFLAGS += $(JSON_CFLAGS)
FUSE_CFLAGS = $(shell pkg-config --cflags fuse3 2>/dev/null)
FUSE_LIBS = $(shell pkg-config --libs fuse3 2>/dev/null)
MHD_LIBS = $(shell pkg-config --libs libmicrohttpd 2>/dev/null)
CRYPTO_LIBS = $(shell pkg-config --libs libcrypto 2>/dev/null || echo -lcrypto)
CURL_LIBS = $(shell pkg-config --libs libcurl 2>/dev/null)

LIBDIR := $(BUILD)/lib
BINDIR := $(BUILD)/bin
XLDIR := $(LIBDIR)/brickfs/xlators
DEPS_STAMP := $(BUILD)/.deps-ok

GEN_H := $(BUILD)/gen/core/fops-gen.h
GEN_C := $(BUILD)/gen/core/fops-gen.c

# ---- libbrickfs: the runtime, the wire codec and the public API ----
LIB_SRCS := $(wildcard src/core/*.c src/rpc/*.c src/api/*.c)
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/fops-gen.o
LIBBRICKFS := $(LIBDIR)/libbrickfs.so

# ---- erasure codec (src/ec, over ISA-L): a static archive linked into
# cluster/disperse, the unit tests test_ec_* and the bench programs ec-* ----
EC_SRCS := $(wildcard src/ec/*.c)
EC_OBJS := $(EC_SRCS:%.c=$(BUILD)/obj/%.o)
LIBEC := $(LIBDIR)/libbrickfs-ec.a
EC_LIBS := $(LIBEC) -lisal

# ---- translators ----
XL_DIRS := $(patsubst %/,%,$(filter-out src/xlators/lib/,$(wildcard src/xlators/*/*/)))
XL_NAMES := $(patsubst src/xlators/%,%,$(XL_DIRS))
XL_SOS := $(XL_NAMES:%=$(XLDIR)/%.so)
XL_LIB_SRCS := $(wildcard src/xlators/lib/*.c)
XL_LIB_OBJS := $(XL_LIB_SRCS:%.c=$(BUILD)/obj/%.o)

# ---- programs: folder -> name ----
PROGRAMS := brick:brickfs-brick fuse:brickfs-mount mgmt:brickfsd cli:brickfs shd:brickfs-shd \
            rebalance:brickfs-rebalance
PROG_DIRS := $(foreach p,$(PROGRAMS),$(if $(wildcard src/$(word 1,$(subst :, ,$(p)))/*.c),$(p)))
PROG_BINS := $(foreach p,$(PROG_DIRS),$(BINDIR)/$(word 2,$(subst :, ,$(p))))

# ---- tests ----
UNIT_SRCS := $(wildcard tests/unit/*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/unit/%)
GRAPH_SRCS := $(wildcard tests/graph/*.c)
GRAPH_BINS := $(GRAPH_SRCS:tests/graph/%.c=$(BUILD)/tests/graph/%)
TESTLIB_SRCS := $(wildcard tests/lib/*.c)
TESTLIB_OBJS := $(TESTLIB_SRCS:%.c=$(BUILD)/obj/%.o)
TOOL_SRCS := $(wildcard tests/tools/*.c)
TOOL_BINS := $(TOOL_SRCS:tests/tools/%.c=$(BUILD)/tests/tools/%)
EXAMPLE_SRCS := $(wildcard examples/*.c)
EXAMPLE_BINS := $(EXAMPLE_SRCS:examples/%.c=$(BUILD)/examples/%)
BENCH_SRCS := $(wildcard bench/*.c)
BENCH_BINS := $(BENCH_SRCS:bench/%.c=$(BINDIR)/%)

RPATH_BIN := -Wl,-rpath,'$$ORIGIN/../lib'
RPATH_XL := -Wl,-rpath,'$$ORIGIN/../../..'

.PHONY: all deps test unit graph integration fuzz fuzz-smoke bench demo demo-stop \
        install clean san-test
.DEFAULT_GOAL := all
# keep intermediate objects (bench, tests): no `rm` after the test summary
.SECONDARY:

all: $(DEPS_STAMP) $(LIBBRICKFS) $(LIBEC) $(XL_SOS) $(PROG_BINS) $(BENCH_BINS) \
     $(BINDIR)/mount.brickfs $(UNIT_BINS) $(GRAPH_BINS) $(TOOL_BINS) $(EXAMPLE_BINS)

deps: $(DEPS_STAMP)
$(DEPS_STAMP): scripts/install-deps.sh
	@mkdir -p $(@D)
	bash scripts/install-deps.sh
	@touch $@

# generated fop code
$(GEN_H) $(GEN_C) &: src/core/fops.def tools/genfops.py | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(PYTHON) tools/genfops.py src/core/fops.def $(GEN_H) $(GEN_C)

$(BUILD)/obj/gen/fops-gen.o: $(GEN_C) $(GEN_H)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Wno-missing-prototypes -MMD -MP -c $< -o $@

$(BUILD)/obj/src/fuse/%.o: src/fuse/%.c $(GEN_H)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(FUSE_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/bench/%.o: bench/%.c $(GEN_H)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(FUSE_CFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/obj/src/ec/%.o: src/ec/%.c $(GEN_H)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fvisibility=hidden -MMD -MP -c $< -o $@

$(BUILD)/obj/src/xlators/%.o: src/xlators/%.c $(GEN_H)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -fvisibility=hidden -MMD -MP -c $< -o $@

$(BUILD)/obj/%.o: %.c $(GEN_H)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIBBRICKFS): $(LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) -shared -o $@ $^ $(LDFLAGS) -Wl,-soname,libbrickfs.so -ldl $(JSON_LIBS)

$(LIBEC): $(EC_OBJS)
	@mkdir -p $(@D)
	rm -f $@ && $(AR) rcs $@ $^

# one .so per translator folder (cluster/disperse also gets the codec)
define XL_RULE
$(XLDIR)/$(1).so: $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard src/xlators/$(1)/*.c)) $(XL_LIB_OBJS) $(LIBBRICKFS) $(if $(filter cluster/disperse,$(1)),$(LIBEC))
	@mkdir -p $$(@D)
	$(CC) -shared -o $$@ $$(filter %.o,$$^) $(if $(filter cluster/disperse,$(1)),$(EC_LIBS)) $(LDFLAGS) -L$(LIBDIR) -lbrickfs $$(JSON_LIBS) \
	    $(if $(filter storage/posix,$(1)),$$(CRYPTO_LIBS)) $$(RPATH_XL)
endef
$(foreach x,$(XL_NAMES),$(eval $(call XL_RULE,$(x))))

define PROG_RULE
$(BINDIR)/$(2): $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard src/$(1)/*.c)) $(LIBBRICKFS)
	@mkdir -p $$(@D)
	$(CC) -o $$@ $$(filter %.o,$$^) $(LDFLAGS) -L$(LIBDIR) -lbrickfs $$(RPATH_BIN) \
	    $(if $(filter fuse,$(1)),$$(FUSE_LIBS) $$(CURL_LIBS)) $(if $(filter mgmt,$(1)),$$(MHD_LIBS) $$(CURL_LIBS)) \
	    $(if $(filter cli,$(1)),$$(CURL_LIBS)) -ldl $$(JSON_LIBS)
endef
$(foreach p,$(PROG_DIRS),$(eval $(call PROG_RULE,$(word 1,$(subst :, ,$(p))),$(word 2,$(subst :, ,$(p))))))

$(BINDIR)/mount.brickfs: scripts/mount.brickfs
	@mkdir -p $(@D)
	install -m 755 $< $@

$(BINDIR)/%: $(BUILD)/obj/bench/%.o $(LIBEC)
	@mkdir -p $(@D)
	$(CC) -o $@ $< $(if $(filter ec-%,$*),$(EC_LIBS)) $(LDFLAGS) $(FUSE_LIBS)

$(BUILD)/tests/unit/%: $(BUILD)/obj/tests/unit/%.o $(TESTLIB_OBJS) $(LIBBRICKFS) $(LIBEC)
	@mkdir -p $(@D)
	$(CC) -o $@ $(filter %.o,$^) $(if $(filter test_ec_%,$*),$(EC_LIBS)) $(LDFLAGS) -L$(LIBDIR) -lbrickfs -Wl,-rpath,'$$ORIGIN/../../lib' -ldl $(JSON_LIBS) $(CURL_LIBS)

$(BUILD)/tests/graph/%: $(BUILD)/obj/tests/graph/%.o $(TESTLIB_OBJS) $(LIBBRICKFS)
	@mkdir -p $(@D)
	$(CC) -o $@ $(filter %.o,$^) $(LDFLAGS) -L$(LIBDIR) -lbrickfs -Wl,-rpath,'$$ORIGIN/../../lib' -ldl $(JSON_LIBS)

$(BUILD)/tests/tools/%: $(BUILD)/obj/tests/tools/%.o $(TESTLIB_OBJS) $(LIBBRICKFS)
	@mkdir -p $(@D)
	$(CC) -o $@ $(filter %.o,$^) $(LDFLAGS) -L$(LIBDIR) -lbrickfs -Wl,-rpath,'$$ORIGIN/../../lib' -ldl $(JSON_LIBS) $(CURL_LIBS)

$(BUILD)/examples/%: $(BUILD)/obj/examples/%.o $(LIBBRICKFS)
	@mkdir -p $(@D)
	$(CC) -o $@ $(filter %.o,$^) $(LDFLAGS) -L$(LIBDIR) -lbrickfs -Wl,-rpath,'$$ORIGIN/../lib'

# ---- tests ----
# `make test` ends with the sanitizer part: tests/run-all.sh builds build-san
# (make SAN=1 all) and runs the unit, graph and sanitizer-tagged integration
# tests against it (BFS_TEST_SANITIZER=0 leaves it out). `make san-test`
# runs only that.
test: all
	bash tests/run-all.sh $(BUILD)

unit: all
	bash tests/run-all.sh $(BUILD) unit

graph: all
	bash tests/run-all.sh $(BUILD) graph

integration: all
	bash tests/run-all.sh $(BUILD) integration

san-test:
	$(MAKE) SAN=1 all
	SAN=1 bash tests/run-all.sh build-san unit graph sanitizer-integration

# ---- fuzzing (clang + libFuzzer) ----
FUZZ_SRCS := $(wildcard tests/fuzz/*.c)
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_LIB_SRCS := $(filter-out src/api/%,$(LIB_SRCS))
FUZZ_SECONDS ?= 600
$(BUILD)/fuzz/%: tests/fuzz/%.c $(FUZZ_LIB_SRCS) $(GEN_C) $(GEN_H)
	@mkdir -p $(@D)
	clang $(CPPFLAGS) -std=gnu11 -g -O1 -pthread -fsanitize=fuzzer,address,undefined \
	    -o $@ $< $(FUZZ_LIB_SRCS) $(GEN_C) -ldl $(JSON_LIBS)

fuzz-build: $(FUZZ_BINS)
fuzz-smoke: $(FUZZ_BINS)
	bash tests/fuzz/run.sh $(BUILD) 10
fuzz: $(FUZZ_BINS)
	bash tests/fuzz/run.sh $(BUILD) $(FUZZ_SECONDS)

# ---- bench, demo, install ----
bench: all
	bash bench/run.sh $(BUILD)

demo: all
	BUILD=$(BUILD) bash scripts/demo.sh start

demo-stop:
	BUILD=$(BUILD) bash scripts/demo.sh stop

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include/brickfs \
	    $(DESTDIR)$(PREFIX)/lib/brickfs/xlators $(DESTDIR)/sbin
	cp -a $(BINDIR)/. $(DESTDIR)$(PREFIX)/bin/
	cp -a $(LIBBRICKFS) $(DESTDIR)$(PREFIX)/lib/
	cp -a $(XLDIR)/. $(DESTDIR)$(PREFIX)/lib/brickfs/xlators/
	cp -a include/brickfs/. $(DESTDIR)$(PREFIX)/include/brickfs/
	ln -sf $(PREFIX)/bin/mount.brickfs $(DESTDIR)/sbin/mount.brickfs

clean:
	rm -rf build build-san

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
