"""TLS, mutual TLS and bearer tokens through the real braidd, with
certificates made here by openssl: a CA, server and client certificates, and
a second, wrong CA. The matrix: no certificate, a certificate from the wrong
CA, a server the client cannot verify, no / wrong / under-scoped / good
token. Token and certificate files are reloaded when they change.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402

import grpc  # noqa: E402

pb, pb_grpc = harness.load_stubs()

GOOD = "good-token-7f3a9c1e5b"
LIMITED = "tokenize-only-2d8e4f6a"


class Pki:
    """Certificates in a temp dir, made with the openssl CLI."""

    def __init__(self):
        if shutil.which("openssl") is None:
            sys.exit("FAIL: openssl is not installed (scripts/setup.sh "
                     "installs the Debian package `openssl`)")
        self.dir = tempfile.mkdtemp(prefix="braid_pki_")

    def path(self, name):
        return os.path.join(self.dir, name)

    def run(self, *args):
        subprocess.run(["openssl", *args], check=True, capture_output=True,
                       cwd=self.dir)

    def ca(self, name):
        self.run("req", "-x509", "-newkey", "ec", "-pkeyopt",
                 "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                 "-keyout", f"{name}.key", "-out", f"{name}.pem",
                 "-subj", f"/CN={name}")

    def cert(self, name, ca, usage):
        with open(self.path(f"{name}.ext"), "w") as f:
            f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                    f"extendedKeyUsage={usage}\n")
        self.run("req", "-newkey", "ec", "-pkeyopt",
                 "ec_paramgen_curve:prime256v1", "-nodes",
                 "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", f"/CN={name}")
        self.run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem",
                 "-CAkey", f"{ca}.key", "-CAcreateserial", "-days", "2",
                 "-out", f"{name}.pem", "-extfile", f"{name}.ext")

    def read(self, name):
        with open(self.path(name), "rb") as f:
            return f.read()


def channel(addr, pki=None, ca="ca", client=None):
    """A channel on its own connection: plaintext without `pki`, else TLS
    trusting `ca`, presenting `client`'s certificate when given."""
    options = [("grpc.use_local_subchannel_pool", 1)]
    if pki is None:
        return grpc.insecure_channel(addr, options=options)
    creds = grpc.ssl_channel_credentials(
        root_certificates=pki.read(f"{ca}.pem"),
        private_key=pki.read(f"{client}.key") if client else None,
        certificate_chain=pki.read(f"{client}.pem") if client else None)
    options.append(("grpc.ssl_target_name_override", "localhost"))
    return grpc.secure_channel(addr, creds, options=options)


def call(ch, rpc="Tokenize", token=None):
    """Runs one RPC; returns the status code."""
    stub = pb_grpc.BraidStub(ch)
    md = [("authorization", f"Bearer {token}")] if token else None
    try:
        if rpc == "Tokenize":
            stub.Tokenize(pb.TokenizeRequest(prompt=pb.Prompt(text=b"hi")),
                          timeout=5, metadata=md)
        else:
            list(stub.Generate(pb.GenerateRequest(
                prompt=pb.Prompt(text=b"hi"),
                sampling=pb.SamplingParams(max_tokens=2)),
                timeout=30, metadata=md))
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()


def point_live_at(pki, name):
    """Makes live/tls.crt and live/tls.key `name`'s certificate and key in
    one atomic step, the way a Kubernetes Secret volume updates: a new
    directory, then the `live` symlink renamed over the old one."""
    d = pki.path(f"{name}.d")
    os.makedirs(d, exist_ok=True)
    shutil.copyfile(pki.path(f"{name}.pem"), os.path.join(d, "tls.crt"))
    shutil.copyfile(pki.path(f"{name}.key"), os.path.join(d, "tls.key"))
    os.symlink(d, pki.path("live.tmp"))
    os.rename(pki.path("live.tmp"), pki.path("live"))


class SecurityTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        pki = cls.pki = Pki()
        pki.ca("ca")
        pki.ca("wrong_ca")
        pki.cert("server", "ca", "serverAuth")
        pki.cert("server2", "wrong_ca", "serverAuth")
        pki.cert("client", "ca", "clientAuth")
        pki.cert("intruder", "wrong_ca", "clientAuth")
        point_live_at(pki, "server")  # the reload test swaps it
        cls.tokens = pki.path("tokens")
        with open(cls.tokens, "w") as f:
            f.write(f"# test tokens\n{GOOD}\n{LIMITED} tokenize\n"
                    "retired-token-55c1\n")
        cls.daemon = harness.Daemon(
            f"--tls_cert_file={pki.path('live/tls.crt')}",
            f"--tls_key_file={pki.path('live/tls.key')}",
            f"--tls_client_ca_file={pki.path('ca.pem')}",
            "--tls_reload_seconds=1", f"--auth_token_file={cls.tokens}",
            wait_serving=False)
        with channel(cls.daemon.addr, pki, client="client") as ch:
            cls.daemon.wait_serving(ch)

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop_checked()

    def check(self, want, ch, rpc="Tokenize", token=GOOD):
        with ch:
            self.assertEqual(call(ch, rpc, token), want)

    def test_transport_matrix(self):
        addr, pki = self.daemon.addr, self.pki
        U = grpc.StatusCode.UNAVAILABLE
        with self.subTest("plaintext"):
            self.check(U, channel(addr))
        with self.subTest("no client certificate"):
            self.check(U, channel(addr, pki))
        with self.subTest("client certificate from the wrong CA"):
            self.check(U, channel(addr, pki, client="intruder"))
        with self.subTest("server not trusted by the client"):
            self.check(U, channel(addr, pki, ca="wrong_ca", client="client"))
        with self.subTest("good certificate"):
            self.check(grpc.StatusCode.OK, channel(addr, pki, client="client"))

    def test_token_matrix(self):
        addr, pki = self.daemon.addr, self.pki
        good = lambda: channel(addr, pki, client="client")  # noqa: E731
        A = grpc.StatusCode.UNAUTHENTICATED
        for rpc in ["Tokenize", "Generate"]:
            with self.subTest(rpc=rpc, token="none"):
                self.check(A, good(), rpc, token=None)
            with self.subTest(rpc=rpc, token="wrong"):
                self.check(A, good(), rpc, token="not-a-token")
            with self.subTest(rpc=rpc, token="good"):
                self.check(grpc.StatusCode.OK, good(), rpc)
        with self.subTest("scoped token outside its scope"):
            self.check(grpc.StatusCode.PERMISSION_DENIED, good(), "Generate",
                       token=LIMITED)
        with self.subTest("scoped token inside its scope"):
            self.check(grpc.StatusCode.OK, good(), "Tokenize", token=LIMITED)
        with self.subTest("health needs no token"):
            with good() as ch:
                self.assertEqual(self.daemon.health(ch), "SERVING")

    def test_token_file_is_reloaded(self):
        pki = self.pki
        with channel(self.daemon.addr, pki, client="client") as ch:
            self.assertEqual(call(ch, token="retired-token-55c1"),
                             grpc.StatusCode.OK)
            with open(self.tokens + ".new", "w") as f:
                f.write(f"{GOOD}\n{LIMITED} tokenize\nrotated-token-91b2\n")
            os.rename(self.tokens + ".new", self.tokens)
            harness.wait_for(
                lambda: call(ch, token="rotated-token-91b2") ==
                grpc.StatusCode.OK, 10, "the new token is accepted")
            self.assertEqual(call(ch, token="retired-token-55c1"),
                             grpc.StatusCode.UNAUTHENTICATED)

    def test_zz_server_certificate_is_reloaded(self):
        # Runs last: afterwards the server presents server2 (wrong_ca).
        addr, pki = self.daemon.addr, self.pki
        point_live_at(pki, "server2")

        def new_ca_works():
            with channel(addr, pki, ca="wrong_ca", client="client") as ch:
                return call(ch, token=GOOD) == grpc.StatusCode.OK
        harness.wait_for(new_ca_works, 15, "the reloaded certificate is used",
                         interval=0.2)
        self.check(grpc.StatusCode.UNAVAILABLE,
                   channel(addr, pki, client="client"))


class ServerOnlyTlsTest(unittest.TestCase):
    def test_tls_without_client_certificates(self):
        pki = Pki()
        pki.ca("ca")
        pki.cert("server", "ca", "serverAuth")
        d = harness.Daemon(f"--tls_cert_file={pki.path('server.pem')}",
                           f"--tls_key_file={pki.path('server.key')}",
                           wait_serving=False)
        try:
            with channel(d.addr, pki) as ch:
                d.wait_serving(ch)
                self.assertEqual(call(ch), grpc.StatusCode.OK)  # no token
            self.check_plaintext_refused(d.addr)
        finally:
            self.assertEqual(d.stop(), 0, d.read_log())

    def check_plaintext_refused(self, addr):
        with channel(addr) as ch:
            self.assertEqual(call(ch), grpc.StatusCode.UNAVAILABLE)


if __name__ == "__main__":
    harness.main()
