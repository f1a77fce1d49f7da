"""The CPU runtime image, built and booted without a container engine:
deploy/image/build_rootfs.sh assembles the root filesystem (debootstrap
minbase + runtime-packages.txt + braidd + user 10001), pack_oci.py packs it
as an OCI image layout, umoci unpacks that image again (checking every
digest and turning its config into a runtime bundle), and braidd starts in
the unpacked root filesystem (chroot, as user 10001) until health says
SERVING, answers a Generate, and drains on SIGTERM with exit 0.

Needs root (debootstrap, chroot), debootstrap and umoci (scripts/setup.sh)
and Debian's mirror the first time (the base is cached after).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "e2e"))
import harness  # noqa: E402

import grpc  # noqa: E402

pb, pb_grpc = harness.load_stubs()


class ImageTest(unittest.TestCase):
    # The image: its tag, the environment pack_oci.py adds, and braidd's
    # --device inside it.
    TAG = "braidd-cpu:0.1.0"
    ENV = []
    DEVICE = "cpu"

    def check_rootfs(self, root, spec):
        """What the image kind adds (nothing for the CPU image)."""

    def test_build_pack_unpack_and_boot(self):
        if os.geteuid() != 0:
            self.fail("the image test needs root (debootstrap, chroot)")
        for tool in ("debootstrap", "umoci", "chroot"):
            self.assertIsNotNone(shutil.which(tool) or shutil.which(
                "/usr/sbin/" + tool), f"{tool} is missing (scripts/setup.sh)")
        model = harness.require_env("BRAID_MODEL", "the GGUF to serve")
        work = tempfile.mkdtemp(prefix="image_", dir="/var/tmp")
        try:
            self.boot(work, model)
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def boot(self, work, model):
        rootfs, oci, bundle = (os.path.join(work, d)
                               for d in ("rootfs", "oci", "bundle"))
        subprocess.run([harness.runfile("deploy/image/build_rootfs.sh"),
                        rootfs, harness.runfile("server/braidd")], check=True)
        out = subprocess.run(
            [sys.executable, harness.runfile("deploy/image/pack_oci.py"),
             rootfs, oci, "--tag", self.TAG,
             *(f"--env={e}" for e in self.ENV)],
            check=True, capture_output=True, text=True).stdout
        print(out, end="")
        subprocess.run(["umoci", "unpack", "--image", f"{oci}:0.1.0",
                        bundle], check=True)
        with open(os.path.join(bundle, "config.json")) as f:
            spec = json.load(f)
        self.assertEqual(spec["process"]["user"]["uid"], 10001)
        self.assertEqual(spec["process"]["args"][0], "/usr/local/bin/braidd")
        root = os.path.join(bundle, "rootfs")
        self.assertTrue(os.access(os.path.join(root, "usr/local/bin/braidd"),
                                  os.X_OK))
        for e in self.ENV:
            self.assertIn(e, spec["process"]["env"])
        shutil.copy(model, os.path.join(root, "models", "model.gguf"))
        self.check_rootfs(root, spec)
        port = harness.free_port()
        with open(os.path.join(root, "etc", "braid", "braidd.conf"), "w") as f:
            f.write("--model=/models/model.gguf\n"
                    f"--listen=127.0.0.1:{port}\n--metrics_listen=\n"
                    f"--threads=2\n--drain_grace_seconds=5\n"
                    f"--device={self.DEVICE}\n")
        log = open(os.path.join(work, "braidd.log"), "w")
        proc = subprocess.Popen(
            ["chroot", "--userspec=10001:10001", root,
             *spec["process"]["args"]], stdout=log, stderr=subprocess.STDOUT)
        try:
            addr = f"127.0.0.1:{port}"
            with grpc.insecure_channel(addr) as channel:
                def serving():
                    if proc.poll() is not None:
                        raise AssertionError("braidd exited in the image: " +
                                             open(log.name).read())
                    try:
                        return harness.Daemon.health(
                            type("D", (), {"addr": addr})(), channel) == \
                            "SERVING"
                    except Exception:
                        return False
                harness.wait_for(serving, 120, "SERVING inside the image",
                                 interval=0.2)
                tokens = sum(len(r.token_ids) for r in
                             pb_grpc.BraidStub(channel).Generate(
                                 pb.GenerateRequest(
                                     prompt=pb.Prompt(text=b"Hello"),
                                     sampling=pb.SamplingParams(
                                         max_tokens=4, ignore_eos=True)),
                                 timeout=60))
                self.assertEqual(tokens, 4)
            # chroot exec()s braidd as user 10001.
            uids = subprocess.run(["ps", "-o", "uid=", "-p", str(proc.pid)],
                                  capture_output=True, text=True).stdout
            self.assertIn("10001", uids.split())
            proc.send_signal(signal.SIGTERM)
            self.assertEqual(proc.wait(timeout=60), 0, open(log.name).read())
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()


if __name__ == "__main__":
    harness.main()
