# The two commands of the README. Both install what is missing first.
#   make run   build braidd, fetch the default model, serve gRPC on
#              127.0.0.1:50051 and the OpenAI-compatible HTTP API on
#              127.0.0.1:8080 (MODEL=path.gguf or $BRAID_MODEL serves another
#              GGUF; ADDR=host:port and HTTP_ADDR=host:port listen elsewhere,
#              HTTP_ADDR= turns HTTP off; ARGS="..." passes braidd flags)
#   make test  build and run every test; the last line is "N passed, N failed"
# and, not part of make test: make test-asan / test-ubsan / test-tsan (the whole
# suite under that sanitizer; docs/TESTING.md)
ADDR ?= 127.0.0.1:50051
HTTP_ADDR ?= 127.0.0.1:8080
MODEL ?= $(BRAID_MODEL)
ARGS ?=

.PHONY: run test setup build test-asan test-ubsan test-tsan

setup:
	@scripts/setup.sh

build: setup
	bazel build //server:braidd //tools:braid

run: build
	@model="$(MODEL)"; [ -n "$$model" ] || model="$$(scripts/fetch_model.sh)"; \
	exec bazel-bin/server/braidd --model="$$model" --listen=$(ADDR) \
	  --http_listen=$(HTTP_ADDR) $(ARGS)

test: setup
	@scripts/test.sh

test-asan test-ubsan test-tsan: setup
	@scripts/sanitize.sh $(@:test-%=%)
