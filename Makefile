# Every target sets up the machine (Debian packages), configures and builds as needed.
#   make build     build everything (build/)
#   make serve     build and run `omnirt serve` (Qwen3-Omni speech on its generated tiny checkpoint,
#                  playground at /) on 127.0.0.1:8000
#   make test      check formatting (scripts/check_format.sh), build and run every test
#   make sanitize  build (build-asan/) and run the suite under ASan + UBSan
#   make sanitize-ci  the same for the threaded layers only (what .ci/run adds after make test)
#   make fuzz      build the libFuzzer targets with clang-14 and fuzz each decoder briefly
#   make chaos     kill and freeze stage processes under load for CHAOS_SECONDS (tests/chaos)
#   make soak      steady mixed load for SOAK_MINUTES, memory and descriptors sampled (tests/chaos)
#   make format    apply .clang-format to every source file
#   make check-format  fail when a source file differs from .clang-format
BUILD_DIR ?= build
ASAN_DIR ?= build-asan
FUZZ_DIR ?= build-fuzz
FUZZ_SECONDS ?= 20
JOBS ?= $(shell nproc)
CTEST_FLAGS ?= --output-on-failure -j $(JOBS) --timeout 600
# ccache hits across checkouts in different directories (a fresh clone reuses the cache).
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1

SERVE_ARGS ?=
CHAOS_SECONDS ?= 300
SOAK_MINUTES ?= 20

.PHONY: setup build serve test sanitize sanitize-ci fuzz chaos soak format check-format clean

setup:
	@bash scripts/setup.sh

$(BUILD_DIR)/build.ninja:
	cmake -S . -B $(BUILD_DIR) -G Ninja

build: setup $(BUILD_DIR)/build.ninja
	cmake --build $(BUILD_DIR) -j $(JOBS)

serve: build
	./$(BUILD_DIR)/bin/omnirt serve $(SERVE_ARGS)

test: check-format build
	cd $(BUILD_DIR) && ctest $(CTEST_FLAGS)

# Reports: $(BUILD_DIR)/chaos.json, $(BUILD_DIR)/chaos_model.json, $(BUILD_DIR)/chaos_shm_full.json; $(BUILD_DIR)/soak/{soak.csv,soak.json,soak.png}
# (docs/reliability.md).
chaos: build
	OMNIRT_BIN=./$(BUILD_DIR)/bin/omnirt node tests/chaos/chaos.mjs --seconds $(CHAOS_SECONDS) \
	  --concurrency 8 --json $(BUILD_DIR)/chaos.json
	OMNIRT_BIN=./$(BUILD_DIR)/bin/omnirt node tests/chaos/chaos.mjs --pipeline default \
	  --seconds $(CHAOS_SECONDS) --concurrency 4 --json $(BUILD_DIR)/chaos_model.json
	OMNIRT_BIN=./$(BUILD_DIR)/bin/omnirt node tests/chaos/shm_full.mjs --full-seconds 20 \
	  --json $(BUILD_DIR)/chaos_shm_full.json

soak: build
	OMNIRT_BIN=./$(BUILD_DIR)/bin/omnirt node tests/chaos/soak.mjs --minutes $(SOAK_MINUTES) \
	  --out $(BUILD_DIR)/soak

$(ASAN_DIR)/build.ninja:
	cmake -S . -B $(ASAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DOMNIRT_SANITIZE=ON

# Leaks whose allocation is wholly inside a third-party library (each entry says which test
# showed it). Child processes (omnirt relay-peer, stage processes) inherit the options.
SANITIZER_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

sanitize: setup $(ASAN_DIR)/build.ninja
	cmake --build $(ASAN_DIR) -j $(JOBS)
	cd $(ASAN_DIR) && $(SANITIZER_ENV) ctest $(CTEST_FLAGS)

# The tests of the layers with threads, relays, the HTTP / WebSocket server, realtime sessions,
# VAD and the engine (OMNIRT_SANITIZE_CI_LABELS in tests/CMakeLists.txt), in the same build-asan/.
sanitize-ci: setup $(ASAN_DIR)/build.ninja
	cmake --build $(ASAN_DIR) -j $(JOBS) --target sanitize_ci_tests
	cd $(ASAN_DIR) && $(SANITIZER_ENV) ctest $(CTEST_FLAGS) -L "$$(cat sanitize_ci_labels)"

$(FUZZ_DIR)/build.ninja:
	CC=clang-14 CXX=clang++-14 cmake -S . -B $(FUZZ_DIR) -G Ninja -DOMNIRT_FUZZ=ON

fuzz: setup $(FUZZ_DIR)/build.ninja
	cmake --build $(FUZZ_DIR) -j $(JOBS)
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/fuzz.sh $(FUZZ_DIR)

format: setup
	bash scripts/check_format.sh --fix

check-format: setup
	bash scripts/check_format.sh

clean:
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(FUZZ_DIR)
