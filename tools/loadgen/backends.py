"""Streaming clients for the load generator: braid (gRPC) and OpenAI HTTP.

Both fill a metrics.RequestResult in place while the response streams, so a
caller that cancels a request (asyncio.Task.cancel) keeps what arrived.

braid: braid.v1.Braid/Generate over grpcio's asyncio API, with stubs compiled
  from proto/braid/v1/braid.proto at run time (grpc_tools). A chunk's
  `token_ids` are its tokens; a chunk with several (coalesced) tokens is one
  arrival. Output and prompt token counts come from the final message's usage.

openai: POST /v1/completions with "stream": true on a minimal HTTP/1.1 client
  (braidd --http_listen, llama-server, vLLM, any OpenAI-compatible server)
  over asyncio streams (no third-party HTTP library): Content-Length or chunked
  bodies, server-sent events, "data: [DONE]". Token accounting for llama.cpp's
  llama-server: it sends one SSE event per sampled token, so every event whose
  choice has finish_reason null is one token arrival (a token that ends inside
  a UTF-8 character is not sent on its own: it rides on the next event); the
  closing event (finish_reason set, empty text) carries `usage`, whose
  completion_tokens is the output length. For other OpenAI servers an event
  with non-empty text also counts as one arrival. Requests set
  "cache_prompt": false so llama-server recomputes every prompt as braid does
  (other servers ignore the field).
"""
import asyncio
import dataclasses
import json
import os
import sys
import tempfile
import time
from typing import List, Optional

from metrics import RequestResult

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass
class Request:
    """One prompt of the workload: token ids (random) or text (file)."""
    prompt_ids: Optional[List[int]] = None
    prompt_text: Optional[str] = None
    output_len: int = 128
    ignore_eos: bool = True

    @property
    def prompt_len(self) -> int:
        return len(self.prompt_ids) if self.prompt_ids is not None else 0


def load_braid_stubs(proto=None):
    """Compiles braid.proto with grpc_tools into a temp dir and imports it."""
    from grpc_tools import protoc
    import grpc_tools
    proto = proto or os.path.join(ROOT, "proto", "braid", "v1", "braid.proto")
    proto_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(proto))))
    out = tempfile.mkdtemp(prefix="braid_pb_")
    well_known = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    rc = protoc.main(["protoc", f"-I{proto_root}", f"-I{well_known}",
                      f"--python_out={out}", f"--grpc_python_out={out}",
                      os.path.join(proto_root, "braid", "v1", "braid.proto")])
    if rc != 0:
        raise RuntimeError(f"protoc could not compile {proto}")
    sys.path.insert(0, out)
    from braid.v1 import braid_pb2, braid_pb2_grpc
    return braid_pb2, braid_pb2_grpc


class BraidBackend:
    name = "braid"

    def __init__(self, addr: str, proto: Optional[str] = None):
        import grpc
        self._grpc = grpc
        self.pb, self._pb_grpc = load_braid_stubs(proto)
        self.addr = addr
        self.channel = None  # created on first use, inside the running loop

    def _stub(self):
        if self.channel is None:
            self.channel = self._grpc.aio.insecure_channel(self.addr)
            self.stub = self._pb_grpc.BraidStub(self.channel)
        return self.stub

    async def generate(self, req: Request, result: RequestResult) -> RequestResult:
        pb = self.pb
        if req.prompt_ids is not None:
            prompt = pb.Prompt(tokens=pb.TokenIds(ids=req.prompt_ids))
        else:
            # llama-server's /v1/completions adds BOS when the model asks
            # and parses special tokens; braid's text prompts do the same.
            prompt = pb.Prompt(text=req.prompt_text.encode(), add_special_tokens=True)
        msg = pb.GenerateRequest(prompt=prompt, sampling=pb.SamplingParams(
            max_tokens=req.output_len, ignore_eos=req.ignore_eos, temperature=0))
        result.prompt_tokens = req.prompt_len
        result.start = time.perf_counter()
        call = self._stub().Generate(msg)
        counted = 0
        try:
            async for chunk in call:
                t = time.perf_counter()
                n = len(chunk.token_ids)
                if n:
                    result.add_chunk(t, n)
                    counted += n
                if chunk.HasField("final"):
                    result.output_tokens = chunk.final.usage.output_tokens
                    result.prompt_tokens = chunk.final.usage.prompt_tokens
            if not result.output_tokens:
                result.output_tokens = counted
            result.ok = True
        except asyncio.CancelledError:
            call.cancel()
            result.cancelled = True
            result.output_tokens = counted
            raise
        except self._grpc.aio.AioRpcError as e:
            result.error = f"{e.code().name}: {e.details()}"
        return result

    async def close(self):
        if self.channel is not None:
            await self.channel.close()


class OpenAIBackend:
    name = "openai"

    def __init__(self, base_url: str, endpoint: str = "/v1/completions",
                 model: Optional[str] = None, extra_body: Optional[dict] = None):
        url = base_url
        if url.startswith("http://"):
            url = url[len("http://"):]
        elif "://" in url:
            raise ValueError(f"only http:// is supported: {base_url}")
        hostport = url.split("/", 1)[0]
        host, _, port = hostport.rpartition(":")
        self.host, self.port = (host or hostport), int(port or 80)
        self.endpoint = endpoint
        self.model = model
        self.extra_body = {"cache_prompt": False}
        self.extra_body.update(extra_body or {})

    def _body(self, req: Request) -> dict:
        body = {
            "prompt": req.prompt_ids if req.prompt_ids is not None else req.prompt_text,
            "max_tokens": req.output_len,
            "temperature": 0.0,
            "stream": True,
            "stream_options": {"include_usage": True},
            "ignore_eos": req.ignore_eos,
        }
        if self.model:  # unset: the server's one model (braidd, llama-server)
            body["model"] = self.model
        body.update(self.extra_body)
        return body

    async def generate(self, req: Request, result: RequestResult) -> RequestResult:
        payload = json.dumps(self._body(req)).encode()
        head = (f"POST {self.endpoint} HTTP/1.1\r\n"
                f"Host: {self.host}:{self.port}\r\n"
                "Content-Type: application/json\r\n"
                "Accept: text/event-stream\r\n"
                f"Content-Length: {len(payload)}\r\n"
                "Connection: close\r\n\r\n").encode()
        result.prompt_tokens = req.prompt_len
        result.start = time.perf_counter()
        writer = None
        counted = 0
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port)
            writer.write(head + payload)
            await writer.drain()
            status = (await reader.readline()).decode("latin-1").strip()
            parts = status.split(" ", 2)
            code = int(parts[1]) if len(parts) >= 2 and parts[1].isdigit() else 0
            headers = {}
            while True:
                line = (await reader.readline()).decode("latin-1")
                if line in ("\r\n", "\n", ""):
                    break
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            body_iter = _body_chunks(reader, headers)
            if code != 200:
                data = b"".join([c async for c in body_iter])
                result.error = f"HTTP {code}: {data[:300].decode(errors='replace')}"
                return result
            buf = b""
            done = False
            async for piece in body_iter:
                t = time.perf_counter()
                buf += piece.replace(b"\r\n", b"\n")
                while b"\n\n" in buf and not done:
                    event, buf = buf.split(b"\n\n", 1)
                    data = b"\n".join(l[5:].lstrip() for l in event.split(b"\n")
                                      if l.startswith(b"data:"))
                    if not data:
                        continue
                    if data.strip() == b"[DONE]":
                        done = True
                        break
                    obj = json.loads(data)
                    if "error" in obj:
                        result.error = json.dumps(obj["error"])[:300]
                        return result
                    choices = obj.get("choices") or []
                    if choices:
                        c = choices[0]
                        if c.get("finish_reason") is None or c.get("text"):
                            result.add_chunk(t, 1)
                            counted += 1
                    usage = obj.get("usage")
                    if usage:
                        result.output_tokens = int(usage.get("completion_tokens") or 0)
                        result.prompt_tokens = int(usage.get("prompt_tokens") or result.prompt_tokens)
                if done:
                    break
            if not result.output_tokens:
                result.output_tokens = counted
            result.ok = bool(result.chunk_times)
            if not result.ok:
                result.error = "no output chunk in the response"
        except asyncio.CancelledError:
            result.cancelled = True
            result.output_tokens = counted
            raise
        except (OSError, ValueError, asyncio.IncompleteReadError) as e:
            result.error = f"{type(e).__name__}: {e}"
        finally:
            if writer is not None:
                writer.close()
        return result

    async def close(self):
        pass


async def _body_chunks(reader: asyncio.StreamReader, headers: dict):
    """Yields the body's bytes as they arrive (chunked, sized or to EOF)."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        while True:
            size_line = await reader.readline()
            if not size_line:
                return
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                return
            data = await reader.readexactly(size)
            await reader.readline()  # CRLF after the chunk
            yield data
    elif "content-length" in headers:
        left = int(headers["content-length"])
        while left > 0:
            data = await reader.read(min(left, 65536))
            if not data:
                return
            left -= len(data)
            yield data
    else:
        while True:
            data = await reader.read(65536)
            if not data:
                return
            yield data
