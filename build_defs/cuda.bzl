"""cuda_library: compiles .cu files with nvcc for the GPUs braid supports.

Only built with `--config=cuda` (which sets --define=braid_cuda=1); without it the
target is an empty library (its headers only), so `bazel test //...` never needs
nvcc or a GPU. scripts/test.sh builds every CUDA target under --config=cuda when
the toolkit is installed.
"""

# sm_80 (A100), sm_86 (A10, RTX 30xx), sm_89 (L4, L40S, RTX 40xx), sm_90a
# (H100, H200: the "a" features, wgmma and setmaxnreg, for Hopper-only code).
CUDA_ARCHS = ["80", "86", "89", "90a"]
NVCC = "/usr/local/cuda/bin/nvcc"

def cuda_library(name, srcs = [], hdrs = [], cc_srcs = [], cuda_hdrs = [], deps = [], **kwargs):
    """A cc_library of .cu sources (nvcc) and host .cc sources (the C++ compiler).

    Args:
      name: the library.
      srcs: .cu files, compiled by nvcc for CUDA_ARCHS.
      hdrs: the library's headers (also visible to nvcc).
      cc_srcs: host sources that include CUDA headers (built only under
        --config=cuda, like the .cu objects).
      cuda_hdrs: headers of other targets the .cu files include (nvcc does not
        see Bazel's include graph).
      deps: as cc_library's.
      **kwargs: passed to cc_library.
    """
    gencode = " ".join([
        "-gencode=arch=compute_%s,code=sm_%s" % (a, a)
        for a in CUDA_ARCHS
    ])
    objs = []
    for src in srcs:
        obj = name + "_" + src.replace("/", "_").replace(".cu", ".o")
        native.genrule(
            name = obj + "_nvcc",
            srcs = [src] + hdrs + cuda_hdrs,
            outs = [obj],
            cmd = (NVCC + " -std=c++17 -O3 -Xcompiler -fPIC --expt-relaxed-constexpr " +
                   gencode + " -I. -I$(GENDIR) -c $(location " + src + ") -o $@"),
        )
        objs.append(obj)
    native.cc_library(
        name = name,
        srcs = select({
            "//build_defs:cuda_enabled": objs + cc_srcs,
            "//conditions:default": [],
        }),
        hdrs = hdrs,
        deps = deps + select({
            "//build_defs:cuda_enabled": ["//third_party:cuda"],
            "//conditions:default": [],
        }),
        **kwargs
    )
