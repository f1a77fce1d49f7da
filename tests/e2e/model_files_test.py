"""The kinds of files users download, served by the real daemon.

Each model is served by braidd and driven by Python grpcio: the default model
in Q4_K_M as llama.cpp's quantizer writes it ($BRAID_KQUANT_DIR), random
Qwen2, Qwen3, Mistral, Gemma 2 and Gemma 3 models ($BRAID_ARCH_DIR,
tools/golden/arch_models.py; the sliding-window ones with a prompt longer
than their 64-position window), and a
random Llama model with a SentencePiece vocabulary (written here from
model/tokenizer/testdata/spm_vocab.gguf). For each: GetModelInfo names the
architecture and the tensor types; Tokenize gives llama.cpp's ids (the
tokenizer fixtures' first cases) and Detokenize gives the text back; greedy
Generate writes max_tokens tokens, the same ones twice, and text for them.
The numerics against llama.cpp are //tests/golden's; this is the serving.
"""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

pb = harness.load_stubs()[0]
sys.path.insert(0, os.path.dirname(harness.runfile("tools/golden/arch_models.py")))
import arch_models  # noqa: E402
import gguf  # noqa: E402

# (name, file, architecture, types that must be listed, Tokenize cases)
HELLO_BPE = [(b"Hello world", [19556, 905])]  # tokenize_golden.tsv
HELLO_SPM = [(b"Hello world", [358, 443]),     # tokenize_spm_golden.tsv
             (b"hello world", [491, 323, 443])]


def spm_model(directory):
    path = os.path.join(directory, "spm.gguf")
    vocab = gguf.GGUFReader(
        harness.runfile("model/tokenizer/testdata/spm_vocab.gguf"))
    arch_models.write(path, "llama3", vocab)
    return path


class ModelFilesTest(unittest.TestCase):
    def serve_and_check(self, model, arch, types, cases,
                        prompt=b"The capital of France is"):
        daemon = harness.Daemon("--threads=2", "--context_length=256",
                                model=model)
        try:
            import grpc
            with grpc.insecure_channel(daemon.addr) as ch:
                stub = harness.load_stubs()[1].BraidStub(ch)
                info = stub.GetModelInfo(pb.GetModelInfoRequest(), timeout=10)
                self.assertEqual(info.architecture, arch, model)
                for t in types:
                    self.assertIn(t, info.tensor_types, model)
                for text, ids in cases:
                    got = stub.Tokenize(pb.TokenizeRequest(
                        prompt=pb.Prompt(text=text)), timeout=10).token_ids
                    self.assertEqual(list(got), ids, (model, text))
                    back = stub.Detokenize(pb.DetokenizeRequest(
                        token_ids=got), timeout=10).text
                    self.assertEqual(back.encode(), text, model)
                outputs = []
                for _ in range(2):
                    tokens, text = [], ""
                    for r in stub.Generate(pb.GenerateRequest(
                            prompt=pb.Prompt(text=prompt),
                            sampling=pb.SamplingParams(max_tokens=12,
                                                       ignore_eos=True)),
                            timeout=60):
                        tokens += list(r.token_ids)
                        text += r.text
                        if r.HasField("final"):
                            self.assertEqual(r.final.finish_reason,
                                             pb.FINISH_REASON_LENGTH)
                    self.assertEqual(len(tokens), 12, model)
                    self.assertTrue(text, model)
                    outputs.append(tokens)
                self.assertEqual(outputs[0], outputs[1], model)
        finally:
            daemon.stop_checked()

    def test_kquant_file(self):
        kdir = harness.require_env(
            "BRAID_KQUANT_DIR", "the K-quant models (`make test` sets it)")
        self.serve_and_check(os.path.join(kdir, "smollm2-q4_k_m.gguf"), "llama",
                             ["Q4_K", "Q6_K", "Q5_0", "Q8_0"], HELLO_BPE)

    def test_qwen_files(self):
        adir = harness.require_env(
            "BRAID_ARCH_DIR", "the architecture models (`make test` sets it)")
        for name in ("qwen2", "qwen3"):
            self.serve_and_check(os.path.join(adir, name + ".gguf"), name,
                                 ["F32"], HELLO_BPE)

    def test_sliding_window_files(self):
        adir = harness.require_env(
            "BRAID_ARCH_DIR", "the architecture models (`make test` sets it)")
        prompt = b" ".join([b"The capital of France is Paris."] * 16)
        for name, arch in (("mistral", "llama"), ("gemma2", "gemma2"),
                           ("gemma3", "gemma3")):
            self.serve_and_check(os.path.join(adir, name + ".gguf"), arch,
                                 ["F32"], HELLO_BPE, prompt)

    def test_sentencepiece_file(self):
        with tempfile.TemporaryDirectory() as tmp:
            self.serve_and_check(spm_model(tmp), "llama", ["F32"], HELLO_SPM)


if __name__ == "__main__":
    unittest.main()
