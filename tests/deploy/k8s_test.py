"""deploy/k8s renders and validates offline, and says what braidd needs.

Each pool overlay is rendered by `kubectl kustomize` and validated by
`kubernetes-validate --strict` (Kubernetes' own schemas; custom resources
such as KEDA's and prometheus-operator's only warn). Then the rules a
Kubernetes deployment of braidd must keep are checked on what was rendered:
the preStop sleep and braidd's drain fit in the termination grace period,
traffic follows grpc.health.v1 (startup long enough for a large model,
readiness on braid.v1.Braid, a liveness that draining does not fail), a
non-root, read-only container, named ports with the Service's h2c app
protocol, every flag one braidd defines, GPU pools asking for a GPU, the
autoscaler on the pool's own queues, and the dashboard ConfigMap equal to
deploy/grafana's.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import yaml

ROOT = os.environ.get("TEST_SRCDIR", "")
ROOT = os.path.join(ROOT, "braid") if ROOT else "."
K8S = os.path.join(ROOT, "deploy", "k8s")
POOLS = ["cpu", "gpu-h100", "gpu-l4"]
OVERLAYS = POOLS + ["inference-pool"]


def metrics_braidd_exports():
    """Every braid_ metric name the metrics sources register."""
    names = set()
    for f in ("engine_metrics.cc", "server_metrics.cc"):
        with open(os.path.join(ROOT, "metrics", f)) as src:
            names |= set(re.findall(r'"(braid_\w+)"', src.read()))
    return names


def flags_braidd_defines():
    with open(os.path.join(ROOT, "server", "flags.cc")) as f:
        src = f.read()
    return set(re.findall(r"ABSL_FLAG\(\s*[\w:]+,\s*(\w+),", src)) | {
        "flagfile"}


def conf_flags(text):
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("--"):
            name, _, value = line[2:].partition("=")
            out[name] = value
    return out


class K8sTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.kubectl = shutil.which("kubectl")
        if cls.kubectl is None:
            raise RuntimeError("kubectl not found: install kubectl 1.32 "
                               "(its kustomize renders the manifests; "
                               "TOOLCHAIN.md)")
        # kustomize refuses files that are symlinks out of its root, as
        # Bazel's runfiles are: render a copy.
        cls.tmp = tempfile.TemporaryDirectory()
        tree = os.path.join(cls.tmp.name, "k8s")
        shutil.copytree(K8S, tree)
        cls.rendered = {}
        for pool in OVERLAYS:
            r = subprocess.run(
                [cls.kubectl, "kustomize", os.path.join(tree, "overlays", pool)],
                capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError("kubectl kustomize %s: %s" % (pool, r.stderr))
            cls.rendered[pool] = (r.stdout, list(yaml.safe_load_all(r.stdout)))

    def objects(self, pool, kind):
        return [o for o in self.rendered[pool][1] if o and o["kind"] == kind]

    def test_schemas_strict(self):
        validate = os.path.join(os.path.dirname(sys.executable),
                                "kubernetes-validate")
        self.assertTrue(os.path.exists(validate),
                        "pip install kubernetes-validate (scripts/setup.sh)")
        for pool in OVERLAYS:
            with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
                f.write(self.rendered[pool][0])
                f.flush()
                r = subprocess.run([validate, "--strict", "-k", "1.32.0",
                                    f.name], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, (pool, r.stdout, r.stderr))

    def test_lifecycle_and_probes(self):
        for pool in POOLS:
            (dep,) = self.objects(pool, "Deployment")
            (conf_map,) = [c for c in self.objects(pool, "ConfigMap")
                           if "braidd.conf" in c.get("data", {})]
            conf = conf_flags(conf_map["data"]["braidd.conf"])
            spec = dep["spec"]["template"]["spec"]
            (c,) = spec["containers"]
            sleep = c["lifecycle"]["preStop"]["sleep"]["seconds"]
            drain = int(conf["drain_grace_seconds"])
            self.assertLessEqual(sleep + drain + 2,
                                 spec["terminationGracePeriodSeconds"], pool)
            start = c["startupProbe"]
            self.assertEqual(start["grpc"]["port"], 50051)
            self.assertGreaterEqual(
                start["periodSeconds"] * start["failureThreshold"], 300, pool)
            self.assertEqual(c["readinessProbe"]["grpc"]["service"],
                             "braid.v1.Braid")
            self.assertNotIn("grpc", c["livenessProbe"], "draining is "
                             "NOT_SERVING: liveness must not read health")
            ports = {p["name"]: p["containerPort"] for p in c["ports"]}
            self.assertEqual(set(ports),
                             {"grpc", "metrics", "http", "agent-check"})
            self.assertEqual(conf["listen"], "0.0.0.0:%d" % ports["grpc"])
            self.assertEqual(conf["metrics_listen"],
                             "0.0.0.0:%d" % ports["metrics"])
            self.assertEqual(conf["http_listen"], "0.0.0.0:%d" % ports["http"])
            self.assertEqual(conf["agent_check_listen"],
                             "0.0.0.0:%d" % ports["agent-check"])
            self.assertIn("--flagfile=/etc/braid/braidd.conf", c["args"])
            self.assertEqual(dep["spec"]["strategy"]["rollingUpdate"]
                             ["maxUnavailable"], 0)

    def test_security_context(self):
        for pool in POOLS:
            (dep,) = self.objects(pool, "Deployment")
            spec = dep["spec"]["template"]["spec"]
            self.assertTrue(spec["securityContext"]["runAsNonRoot"])
            sc = spec["containers"][0]["securityContext"]
            self.assertTrue(sc["readOnlyRootFilesystem"])
            self.assertFalse(sc["allowPrivilegeEscalation"])
            self.assertEqual(sc["capabilities"]["drop"], ["ALL"])
            mounts = {m["mountPath"]: m for m in
                      spec["containers"][0]["volumeMounts"]}
            self.assertTrue(mounts["/models"]["readOnly"])

    def test_every_flag_is_braidds(self):
        known = flags_braidd_defines()
        self.assertIn("drain_grace_seconds", known)
        for pool in POOLS:
            (dep,) = self.objects(pool, "Deployment")
            args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
            (conf_map,) = [c for c in self.objects(pool, "ConfigMap")
                           if "braidd.conf" in c.get("data", {})]
            names = set(conf_flags(conf_map["data"]["braidd.conf"]))
            names |= {a[2:].partition("=")[0] for a in args}
            self.assertEqual(names - known, set(), pool)

    def test_service_pdb_and_pools(self):
        for pool in POOLS:
            (svc,) = self.objects(pool, "Service")
            ports = {p["name"]: p for p in svc["spec"]["ports"]}
            self.assertEqual(ports["grpc"]["appProtocol"], "kubernetes.io/h2c")
            (dep,) = self.objects(pool, "Deployment")
            labels = dep["spec"]["template"]["metadata"]["labels"]
            self.assertEqual(labels["braid.dev/pool"], pool)
            for sel in (svc["spec"]["selector"],
                        self.objects(pool, "PodDisruptionBudget")[0]["spec"]
                        ["selector"]["matchLabels"]):
                self.assertTrue(all(labels.get(k) == v for k, v in sel.items()),
                                (pool, sel))
            res = dep["spec"]["template"]["spec"]["containers"][0]["resources"]
            args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
            if pool.startswith("gpu"):
                self.assertEqual(res["limits"]["nvidia.com/gpu"], "1")
                self.assertIn("--device=cuda", args)
                tol = dep["spec"]["template"]["spec"]["tolerations"]
                self.assertEqual(tol[0]["key"], "nvidia.com/gpu")
            else:
                self.assertNotIn("nvidia.com/gpu", res["requests"])

    def test_autoscaler_reads_the_pools_queues(self):
        for pool in POOLS:
            (dep,) = self.objects(pool, "Deployment")
            (so,) = self.objects(pool, "ScaledObject")
            self.assertEqual(so["spec"]["scaleTargetRef"]["name"],
                             dep["metadata"]["name"])
            queues = set()
            for t in so["spec"]["triggers"]:
                q = t["metadata"]["query"]
                self.assertIn('braid_dev_pool="%s"' % pool, q)
                self.assertIn("braid_requests_waiting", q)
                queues |= set(re.findall(r'queue="(\w+)"', q))
            self.assertEqual(queues, {"io", "reasoning", "prompt"})

    def test_inference_pools_route_each_hardware_class(self):
        objs = self.rendered["inference-pool"][1]
        kind = lambda k: [o for o in objs if o and o["kind"] == k]  # noqa
        pods = {d["spec"]["template"]["metadata"]["labels"]["braid.dev/pool"]:
                d for d in kind("Deployment")
                if d["metadata"]["name"].startswith("braidd")}
        self.assertEqual(set(pods), set(POOLS))
        pools = {p["metadata"]["name"]: p for p in kind("InferencePool")}
        self.assertEqual(set(pools), {"braid-" + p for p in POOLS})
        epps = {d["metadata"]["name"]: d for d in kind("Deployment")
                if d["metadata"]["name"].startswith("braid-epp")}
        exported = metrics_braidd_exports()
        for pool in POOLS:
            ip = pools["braid-" + pool]["spec"]
            labels = pods[pool]["spec"]["template"]["metadata"]["labels"]
            # The pool selects exactly its pods, on their HTTP port.
            self.assertTrue(all(labels.get(k) == v for k, v in
                                ip["selector"]["matchLabels"].items()), pool)
            for other in set(POOLS) - {pool}:
                other_labels = pods[other]["spec"]["template"]["metadata"][
                    "labels"]
                self.assertFalse(all(other_labels.get(k) == v for k, v in
                                     ip["selector"]["matchLabels"].items()))
            (c,) = pods[pool]["spec"]["template"]["spec"]["containers"]
            http = [p["containerPort"] for p in c["ports"]
                    if p["name"] == "http"]
            self.assertEqual([t["number"] for t in ip["targetPorts"]], http)
            # Its picker reads braid's own metric names, which braidd
            # exports, from braidd's metrics port.
            epp = epps[ip["endpointPickerRef"]["name"]]
            args = dict(a[2:].partition("=")[::2] for a in
                        epp["spec"]["template"]["spec"]["containers"][0]
                        ["args"])
            self.assertEqual(args["pool-name"], "braid-" + pool)
            metrics_port = [p["containerPort"] for p in c["ports"]
                            if p["name"] == "metrics"]
            self.assertEqual([int(args["model-server-metrics-port"])],
                             metrics_port)
            for flag in ("total-queued-requests-metric",
                         "total-running-requests-metric",
                         "kv-cache-usage-percentage-metric",
                         "cache-info-metric"):
                self.assertIn(args[flag], exported, flag)
                self.assertFalse(args[flag].startswith("vllm"))
        # Per-hardware-class weights split the traffic across the pools.
        (route,) = kind("HTTPRoute")
        refs = route["spec"]["rules"][0]["backendRefs"]
        self.assertEqual({r["name"] for r in refs}, set(pools))
        self.assertTrue(all(r["kind"] == "InferencePool" and r["weight"] > 0
                            for r in refs))

    def test_dashboard_configmap_is_deploy_grafanas(self):
        with open(os.path.join(ROOT, "deploy", "grafana",
                               "braid-dashboard.json")) as f:
            want = json.load(f)
        for pool in POOLS:
            (cm,) = [c for c in self.objects(pool, "ConfigMap")
                     if "braid-dashboard.json" in c.get("data", {})]
            self.assertEqual(json.loads(cm["data"]["braid-dashboard.json"]),
                             want, "cp deploy/grafana/braid-dashboard.json "
                             "deploy/k8s/components/monitoring/")
            self.assertEqual(cm["metadata"]["labels"]["grafana_dashboard"], "1")


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
    import harness  # noqa: E402  (the JUnit XML make test counts)
    harness.main()
