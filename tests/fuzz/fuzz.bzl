"""A libFuzzer target and its short run for `make test`."""

def fuzz_target(name, srcs, deps, runs, data = []):
    """`name`: a clang-built libFuzzer binary (manual: gcc cannot link it),
    and `name`_test (manual too; scripts/test.sh runs it under
    --config=fuzz), which runs it for `runs` inputs from corpus/`name`."""
    native.cc_binary(
        name = name + "_fuzzer",
        srcs = srcs,
        linkopts = ["-fsanitize=fuzzer"],
        tags = ["manual"],
        deps = deps,
    )
    native.sh_test(
        name = name + "_fuzz_test",
        size = "medium",
        srcs = ["run_fuzzer.sh"],
        args = [
            "$(rootpath :%s_fuzzer)" % name,
            "tests/fuzz/corpus/" + name,
            str(runs),
        ],
        data = [":%s_fuzzer" % name] + data + native.glob(["corpus/%s/*" % name]),
        tags = ["manual"],
    )
