# The two commands of the README. Both install what is missing first.
#   make run   build braidd, fetch the default model, serve on 127.0.0.1:50051
#   make test  build and run every test; the last line is "N passed, N failed"
ADDR ?= 127.0.0.1:50051
ARGS ?=

.PHONY: run test setup build

setup:
	@scripts/setup.sh

build: setup
	bazel build //server:braidd //tools:braid

run: build
	@model="$${BRAID_MODEL:-$$(scripts/fetch_model.sh)}"; \
	exec bazel-bin/server/braidd --model="$$model" --listen=$(ADDR) $(ARGS)

test: setup
	@scripts/test.sh
