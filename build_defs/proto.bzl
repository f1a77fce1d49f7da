"""cc_grpc_library: protoc + grpc_cpp_plugin from Debian, as a genrule."""

def cc_grpc_library(name, src, deps = [], **kwargs):
    """Generates C++ message and gRPC service code for one .proto file.

    Args:
      name: the cc_library to create.
      src: the .proto file, relative to this package.
      deps: other cc_grpc_library targets whose protos `src` imports.
      **kwargs: passed to cc_library (visibility, ...).
    """
    base = src[:-len(".proto")]
    pkg = native.package_name()
    outs = [base + ext for ext in [".pb.h", ".pb.cc", ".grpc.pb.h", ".grpc.pb.cc"]]
    native.genrule(
        name = name + "_gen",
        srcs = [src],
        outs = outs,
        cmd = ("protoc --proto_path=. --cpp_out=$(GENDIR) --grpc_out=$(GENDIR) " +
               "--plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin " + pkg + "/" + src),
    )
    native.cc_library(
        name = name,
        srcs = [base + ".pb.cc", base + ".grpc.pb.cc"],
        hdrs = [base + ".pb.h", base + ".grpc.pb.h"],
        deps = deps + ["//third_party:grpc"],
        copts = ["-Wno-unused-parameter"],
        **kwargs
    )
