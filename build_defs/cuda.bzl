"""cuda_library: compiles .cu files with nvcc for the GPUs braid supports.

Only built with `--config=cuda` (which sets --define=braid_cuda=1); without it the
target is an empty library, so `make test` never needs nvcc or a GPU.
"""

CUDA_ARCHS = ["80", "86", "89", "90"]
NVCC = "/usr/local/cuda/bin/nvcc"

def cuda_library(name, srcs, hdrs = [], deps = [], **kwargs):
    """A cc_library whose .cu sources are compiled by nvcc for sm_80/86/89/90."""
    gencode = " ".join([
        "-gencode=arch=compute_%s,code=sm_%s" % (a, a)
        for a in CUDA_ARCHS
    ])
    objs = []
    for src in srcs:
        obj = name + "_" + src.replace("/", "_").replace(".cu", ".o")
        native.genrule(
            name = obj + "_nvcc",
            srcs = [src] + hdrs,
            outs = [obj],
            cmd = (NVCC + " -std=c++17 -O3 -Xcompiler -fPIC " + gencode +
                   " -I. -I$(GENDIR) -c $(location " + src + ") -o $@"),
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = select({
            "//build_defs:cuda_enabled": objs,
            "//conditions:default": [],
        }),
        hdrs = hdrs,
        deps = deps + select({
            "//build_defs:cuda_enabled": ["//third_party:cuda"],
            "//conditions:default": [],
        }),
        **kwargs
    )
