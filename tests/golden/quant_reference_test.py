"""braid's block formats against gguf-py's (the GGUF project's own numpy code).

For every weight type braid reads, random blocks (every bit pattern of the
quants and scales, with finite fp16 scales) are dequantized by braid
(kernels/cpu/testing:dequantize_tool) and by gguf.quants; the values must agree. A block layout
that braid reads differently from ggml fails here, whatever braid's own
quantizers and dot products agree on among themselves. For the types gguf-py
also quantizes (ggml's reference quantizers), braid's blocks must be the same
bytes.

Usage: quant_reference_test.py PATH_TO_dequantize_tool
"""
import subprocess
import sys
import unittest

try:
    import numpy as np
    import gguf.quants as gq
    from gguf import GGMLQuantizationType as T
except ImportError as e:  # fail loudly: the venv lacks what this test needs
    sys.exit("FAIL: %s; run `make test` (scripts/setup.sh installs numpy and gguf "
             "into the venv)" % e)

TOOL = None
N = 4 * 256  # elements a row: 4 super-blocks, 32 small blocks

# (type, byte offsets of fp16 scales within a block) for the dequant test.
TYPES = [
    (T.Q4_0, [0]), (T.Q4_1, [0, 2]), (T.Q5_0, [0]), (T.Q5_1, [0, 2]),
    (T.Q8_0, [0]), (T.IQ4_NL, [0]), (T.Q2_K, [80, 82]), (T.Q3_K, [108]),
    (T.Q4_K, [0, 2]), (T.Q5_K, [0, 2]), (T.Q6_K, [208]), (T.F16, None),
    (T.BF16, None),
]


def run_tool(type_id, n, data, quantize=False):
    args = [TOOL, str(int(type_id)), str(n)] + (["--quantize"] if quantize else [])
    return subprocess.run(args, input=data, stdout=subprocess.PIPE, check=True).stdout


def random_blocks(t, offsets, rng):
    block, size = gq.GGML_QUANT_SIZES[t]
    raw = rng.integers(0, 256, size=(N // block) * size, dtype=np.uint8)
    if t in (T.F16, T.BF16):
        vals = rng.standard_normal(N).astype(np.float32)
        if t == T.F16:
            return vals.astype(np.float16).view(np.uint8)
        return (vals.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
    blocks = raw.reshape(-1, size)
    for i, off in enumerate(offsets):
        scale = (rng.random(len(blocks)) * 0.1 + 0.001).astype(np.float16)
        blocks[:, off:off + 2] = scale.view(np.uint8).reshape(-1, 2)
    return blocks.reshape(-1)


class DequantizeAgreesWithGgufPy(unittest.TestCase):
    def test_every_weight_type(self):
        rng = np.random.default_rng(1)
        for t, offsets in TYPES:
            for _ in range(5):
                data = random_blocks(t, offsets, rng)
                ours = np.frombuffer(run_tool(t, N, data.tobytes()), np.float32)
                theirs = gq.dequantize(data, t).astype(np.float32).reshape(-1)
                np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7,
                                           err_msg=t.name)


class QuantizeAgreesWithGgufPy(unittest.TestCase):
    def test_reference_quantizers(self):
        rng = np.random.default_rng(2)
        x = rng.standard_normal(N).astype(np.float32)
        x[:32] = 0  # an all-zero block
        for t in (T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1):
            ours = np.frombuffer(run_tool(t, N, x.tobytes(), quantize=True), np.uint8)
            theirs = gq.quantize(x.reshape(1, -1), t).reshape(-1)
            np.testing.assert_array_equal(ours, theirs, err_msg=t.name)


if __name__ == "__main__":
    TOOL = sys.argv.pop(1)
    unittest.main()
