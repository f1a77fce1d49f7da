"""A libFuzzer target and its short run for `make test`."""

def fuzz_target(name, srcs, deps, runs, data = [], testonly = False):
    """`name`: a clang-built libFuzzer binary (manual: gcc cannot link it),
    `name`_fuzz_test (manual too; scripts/test.sh runs it under
    --config=fuzz), which runs it for `runs` inputs from corpus/`name`, and
    `name`_fuzz_hour, the same for an hour.
    `testonly`: the fuzzer uses test fakes."""
    native.cc_binary(
        name = name + "_fuzzer",
        srcs = srcs,
        linkopts = ["-fsanitize=fuzzer"],
        tags = ["manual"],
        testonly = testonly,
        deps = deps,
    )
    for suffix, budget, size in [
        ("_fuzz_test", "-runs=%d" % runs, "medium"),
        ("_fuzz_hour", "-max_total_time=3600", "enormous"),
    ]:
        native.sh_test(
            name = name + suffix,
            size = size,
            srcs = ["run_fuzzer.sh"],
            args = [
                "$(rootpath :%s_fuzzer)" % name,
                "tests/fuzz/corpus/" + name,
                budget,
            ],
            data = [":%s_fuzzer" % name] + data + native.glob(["corpus/%s/*" % name]),
            tags = ["manual"],
            testonly = testonly,
        )
