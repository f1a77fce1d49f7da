"""The layers of docs/ARCHITECTURE.md hold in what braidd links.

braidd_graph is `bazel query --output=graph` of braidd's libraries (a
genquery, so it is the build's own graph). Every edge between braid's
packages must point down: server > openai > frontend > queues > batching >
model > kernels
(metrics, util, proto and third_party are leaves anyone above them may use; the
API protos only server/ and tools/; ORCA's load report proto, proto/xds,
anyone). Below the model seam (model/model.h),
model/cpu is reached from above only by the composition root,
//server:braidd, and the loader it calls (//server:load_model); model/ itself never reaches into it. Bazel `visibility`
in each BUILD file refuses most such edges at build time; this test is the
whole rule on the real graph.
"""
import os
import re
import sys
import unittest

RANKS = [  # (package prefix, rank): higher layers have lower ranks
    ("//server", 0),
    ("//openai", 1),
    ("//frontend", 2),
    ("//queues", 3),
    ("//batching", 4),
    ("//model", 5),
    ("//kernels", 6),
]
LEAVES = ("//metrics", "//third_party", "//util", "//proto/xds", "@")
EDGE = re.compile(r'^\s*"([^"]+)"\s*->\s*"([^"]+)"')


def package(label):
    return label.split(":")[0]


def rank(label):
    for prefix, r in RANKS:
        p = package(label)
        if p == prefix or p.startswith(prefix + "/"):
            return r
    return None


def violations(lines):
    bad = []
    for line in lines:
        m = EDGE.match(line)
        if not m:
            continue
        a, b = m.groups()
        if b.startswith(LEAVES):
            continue
        if b.startswith("//proto/braid"):
            if rank(a) not in (0, None):
                bad.append((a, b, "the API protos are server/'s"))
            continue
        ra, rb = rank(a), rank(b)
        if ra is None or rb is None:
            bad.append((a, b, "a package outside the layers"))
        elif ra > rb:
            bad.append((a, b, "points up"))
        elif (package(b).startswith("//model/cpu") and
              not package(a).startswith("//model/cpu") and
              a not in ("//server:braidd", "//server:load_model")):
            bad.append((a, b, "reaches below the model seam"))
    return bad


class LayersTest(unittest.TestCase):
    def test_braidd_graph_points_down(self):
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            "braidd_graph")
        with open(path) as f:
            lines = f.read().splitlines()
        edges = sum(1 for l in lines if EDGE.match(l))
        self.assertGreater(edges, 100, "the graph is braidd's")
        self.assertEqual(violations(lines), [])

    def test_the_rule_catches_each_kind(self):
        for a, b in [("//batching:engine", "//server:service"),
                     ("//kernels/cpu:ops", "//model:model"),
                     ("//batching:model_executor", "//model/cpu:llama"),
                     ("//server:service", "//model/cpu:llama"),
                     ("//model:model_config", "//model/cpu:paged_kv"),
                     ("//batching:engine", "//proto/braid/v1:braid_cc_proto"),
                     ("//queues:work_queues", "//tools/loadgen:x"),
                     ("//frontend:request_builder", "//server:convert"),
                     ("//openai:http_server", "//server:service"),
                     ("//openai:api", "//proto/braid/v1:braid_cc_proto"),
                     ("//frontend:request_builder",
                      "//proto/braid/v1:braid_cc_proto")]:
            self.assertEqual(len(violations(['"%s" -> "%s"' % (a, b)])), 1,
                             (a, b))
        for a, b in [("//server:braidd", "//model/cpu:llama"),
                     ("//server:load_model", "//model/cpu:llama"),
                     ("//model/cpu:llama", "//kernels/cpu:matmul"),
                     ("//batching:engine", "//metrics:engine_metrics"),
                     ("//frontend:load_report",
                      "//proto/xds/data/orca/v3:orca_cc_grpc"),
                     ("//server:service", "//batching:engine")]:
            self.assertEqual(violations(['"%s" -> "%s"' % (a, b)]), [], (a, b))


if __name__ == "__main__":
    unittest.main()
