# The two commands of the README: `make train` and `make test`. Both install
# what is missing, build, and fetch the data first.
BUILD       ?= build
BUILD_ASAN  ?= build-asan
CONFIG      ?= configs/mnist_mlp.toml
CMAKE_FLAGS ?=
JOBS        ?= $(shell nproc)
# CI turns warnings into errors. CI has no GPU: it asks for the CUDA backend anyway (the default
# builds it only where a GPU is found) and compile-checks it for one architecture (sm_80, the
# oldest we support) instead of three, to stay well inside its time.
ifdef CI
CMAKE_FLAGS += -DSPRINTNET_WERROR=ON -DSPRINTNET_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=80-real
endif

.PHONY: all deps configure build build-cli data train test test-sanitize bench clean

all: build

deps:
	@scripts/install-deps

configure: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# Training needs only the command line and its library, not the tests, benchmarks and examples.
build-cli: configure
	cmake --build $(BUILD) -j $(JOBS) --target sprintnet_cli

data: deps
	@scripts/get-data

train: build-cli data
	$(BUILD)/apps/sprintnet/sprintnet train $(CONFIG)

test: build data
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# CPU code built with AddressSanitizer and UBSan, CUDA off; all CPU tests. CUDA=OFF comes after
# CMAKE_FLAGS: CI's flags ask for CUDA, and the last -D wins (it compiled every .cu file twice in CI).
test-sanitize: deps data
	cmake -S . -B $(BUILD_ASAN) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DSPRINTNET_SANITIZE=ON \
	  $(CMAKE_FLAGS) -DSPRINTNET_WITH_CUDA=OFF
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	ctest --test-dir $(BUILD_ASAN) --output-on-failure -j $(JOBS) -LE gpu

bench: build data
	bench/run

# libFuzzer targets (clang, ASan/UBSan, asserts on, CUDA off), each run for FUZZ_SECONDS by scripts/fuzz.
BUILD_FUZZ   ?= build-fuzz
FUZZ_SECONDS ?= 60
.PHONY: fuzz
fuzz: deps
	cmake -S . -B $(BUILD_FUZZ) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ \
	  -DSPRINTNET_FUZZ=ON -DSPRINTNET_WITH_CUDA=OFF -DSPRINTNET_WERROR=OFF
	cmake --build $(BUILD_FUZZ) -j $(JOBS) --target sprintnet_fuzz
	BUILD_FUZZ=$(BUILD_FUZZ) scripts/fuzz $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(BUILD_ASAN)
