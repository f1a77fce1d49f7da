"""The GPU runtime image (braid/braidd-cuda), built, packed, unpacked and
booted as image_test.py does the CPU one, from a braidd built with
--config=cuda (the test is tagged cuda: scripts/test.sh runs it under
--config=cuda, so its server/braidd is that braidd). Besides the CPU
image's checks: the CUDA runtime libraries braidd links are in the image and
every library resolves there (ldd inside the chroot), the NVIDIA_*
environment the NVIDIA container toolkit reads is in its config, braidd
with --device=cuda fails at start with a clear error on this machine
without a GPU (the CUDA runtime loads inside the image and reports the
missing device or driver), and with --device=cpu it serves.

Needs root, debootstrap, umoci and the CUDA toolkit (TOOLCHAIN.md).
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import image_test  # noqa: E402
from image_test import harness  # noqa: E402


class CudaImageTest(image_test.ImageTest):
    TAG = "braidd-cuda:0.1.0"
    ENV = ["NVIDIA_VISIBLE_DEVICES=all",
           "NVIDIA_DRIVER_CAPABILITIES=compute,utility"]
    DEVICE = "cpu"

    def check_rootfs(self, root, spec):
        libdir = os.path.join(root, "usr/local/cuda/lib64")
        self.assertTrue(os.path.isdir(libdir),
                        "no CUDA libraries in the image: run this test with "
                        "--config=cuda (a braidd built with the CUDA executor)")
        for lib in ("libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13"):
            self.assertIn(lib, os.listdir(libdir))
        ldd = subprocess.run(["chroot", root, "/usr/bin/ldd",
                              "/usr/local/bin/braidd"],
                             capture_output=True, text=True)
        self.assertEqual(ldd.returncode, 0, ldd.stderr)
        self.assertNotIn("not found", ldd.stdout)
        self.assertIn("/usr/local/cuda/lib64/libcublasLt.so.13", ldd.stdout)
        cuda = subprocess.run(
            ["chroot", "--userspec=10001:10001", root, "/usr/local/bin/braidd",
             "--model=/models/model.gguf", "--device=cuda",
             f"--listen=127.0.0.1:{harness.free_port()}", "--metrics_listen="],
            capture_output=True, text=True, timeout=120)
        self.assertNotEqual(cuda.returncode, 0, cuda.stderr)
        self.assertRegex(cuda.stderr, r"(?i)cuda|device|driver")
        self.assertNotIn("built without the CUDA executor", cuda.stderr)


if __name__ == "__main__":
    harness.main()
