"""A Llama/Qwen2-style decoder in plain torch.nn, exported to ONNX by
torch.onnx.export with dynamic batch and sequence axes, for kiln's ONNX
end-to-end test (tests/e2e/onnx_decoder_cli_test.cpp). Writes into OUT:
model.onnx, inputs.safetensors (input_ids) and expected.safetensors (torch's
logits). With --loss the model has a second output, "loss": the
cross-entropy of each position's logits against the next token (written
out as log_softmax and gather, as a model's own loss often is), in
expected.safetensors too. With --grads (implies --loss), grads.safetensors
holds torch autograd's gradient of that loss with respect to every float
initializer of the exported model, as grad.<initializer>: the exporter
stores a linear layer's weight transposed under a name of its own
(onnx::MatMul_N), so each initializer is matched to the parameter it holds
by value. Not shipped: a test fixture.

usage: tiny_decoder.py OUT [--batch B] [--seq S] [--loss] [--grads]
"""
import argparse
import json
import struct

import torch
import torch.nn as nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))
        self.eps = eps

    def forward(self, x):
        var = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Attention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.q_proj = nn.Linear(hidden, hidden, bias=True)
        self.k_proj = nn.Linear(hidden, hidden, bias=True)
        self.v_proj = nn.Linear(hidden, hidden, bias=True)
        self.o_proj = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x, cos, sin, mask):
        b, s, h = x.shape
        shape = (b, s, self.heads, self.head_dim)
        q = self.q_proj(x).view(shape).transpose(1, 2)
        k = self.k_proj(x).view(shape).transpose(1, 2)
        v = self.v_proj(x).view(shape).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = torch.matmul(q, k.transpose(2, 3)) / (self.head_dim ** 0.5)
        probs = torch.softmax(scores + mask, dim=-1)
        ctx = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
        return self.o_proj(ctx)


class MLP(nn.Module):
    def __init__(self, hidden, inner):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inner, bias=False)
        self.up_proj = nn.Linear(hidden, inner, bias=False)
        self.down_proj = nn.Linear(inner, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, hidden, heads, inner):
        super().__init__()
        self.input_layernorm = RMSNorm(hidden)
        self.self_attn = Attention(hidden, heads)
        self.post_attention_layernorm = RMSNorm(hidden)
        self.mlp = MLP(hidden, inner)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(nn.Module):
    def __init__(self, vocab=64, hidden=32, heads=4, inner=64, layers=2, loss=False):
        super().__init__()
        self.with_loss = loss
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList([Layer(hidden, heads, inner) for _ in range(layers)])
        self.norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        head_dim = hidden // heads
        inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, input_ids):
        s = input_ids.shape[1]
        positions = torch.arange(s, dtype=torch.float32)
        freqs = positions[:, None] * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        mask = torch.triu(torch.full((s, s), -1e9), diagonal=1)
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        logits = self.lm_head(self.norm(x))
        if not self.with_loss:
            return logits
        logp = torch.log_softmax(logits[:, :-1], dim=-1)
        picked = torch.gather(logp, -1, input_ids[:, 1:].unsqueeze(-1))
        return logits, -picked.mean()


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name, t in tensors.items():
        t = t.detach().contiguous()
        dtype = {torch.float32: "F32", torch.int64: "I64"}[t.dtype]
        data = t.numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def onnx_initializers(path):
    """The float initializers of an ONNX model, by name, read from the
    protobuf wire format (ModelProto.graph = 7, GraphProto.initializer = 5;
    TensorProto dims = 1, data_type = 2, float_data = 4, name = 8,
    raw_data = 9): python3-onnx is not a dependency."""
    def varint(b, i):
        value = shift = 0
        while True:
            c = b[i]
            i += 1
            value |= (c & 0x7F) << shift
            shift += 7
            if c < 0x80:
                return value, i

    def fields(b):
        i = 0
        while i < len(b):
            key, i = varint(b, i)
            wire = key & 7
            if wire == 0:
                value, i = varint(b, i)
            elif wire == 1:
                value, i = b[i:i + 8], i + 8
            elif wire == 5:
                value, i = b[i:i + 4], i + 4
            elif wire == 2:
                n, i = varint(b, i)
                value, i = b[i:i + n], i + n
            else:
                raise ValueError(f"{path}: wire type {wire}")
            yield key >> 3, wire, value

    found = {}
    data = open(path, "rb").read()
    for field, _, graph in fields(data):
        if field != 7:
            continue
        for g, _, tensor in fields(graph):
            if g != 5:
                continue
            dims, dtype, name, raw, floats = [], None, None, b"", []
            for t, wire, value in fields(tensor):
                if t == 1 and wire == 0:
                    dims.append(value)
                elif t == 1:  # packed
                    j = 0
                    while j < len(value):
                        d, j = varint(value, j)
                        dims.append(d)
                elif t == 2:
                    dtype = value
                elif t == 4:
                    floats.append(value)
                elif t == 8:
                    name = value.decode()
                elif t == 9:
                    raw = value
            if dtype != 1:  # FLOAT
                continue
            blob = raw if raw else b"".join(floats)
            found[name] = torch.frombuffer(bytearray(blob), dtype=torch.float32).reshape(dims)
    return found


def initializer_gradients(model, path):
    """grad.<initializer> for every float initializer of the export: the
    gradient of the parameter it holds, transposed where it holds the
    transpose."""
    params = list(model.named_parameters())
    grads = {}
    for name, value in onnx_initializers(path).items():
        for pname, p in params:
            if p.shape == value.shape and torch.equal(p.detach(), value):
                grads["grad." + name] = p.grad
                break
            if p.dim() == 2 and p.t().shape == value.shape and torch.equal(p.detach().t(), value):
                grads["grad." + name] = p.grad.t()
                break
        else:
            raise SystemExit(f"{path}: initializer {name} holds no parameter of the model")
    return grads


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=8)
    parser.add_argument("--loss", action="store_true")
    parser.add_argument("--grads", action="store_true")
    args = parser.parse_args()
    with_loss = args.loss or args.grads
    torch.manual_seed(0)
    model = Decoder(loss=with_loss).eval()
    ids = torch.randint(0, 64, (args.batch, args.seq), dtype=torch.int64)
    path = f"{args.out}/model.onnx"
    torch.onnx.export(
        model, (ids,), path, input_names=["input_ids"],
        output_names=["logits", "loss"] if with_loss else ["logits"], opset_version=17,
        do_constant_folding=True,
        dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}})
    write_safetensors(f"{args.out}/inputs.safetensors", {"input_ids": ids})
    if not with_loss:
        write_safetensors(f"{args.out}/expected.safetensors", {"logits": model(ids)})
        return
    logits, loss = model(ids)
    write_safetensors(f"{args.out}/expected.safetensors", {"logits": logits, "loss": loss})
    if args.grads:
        loss.backward()
        write_safetensors(f"{args.out}/grads.safetensors", initializer_gradients(model, path))


if __name__ == "__main__":
    main()
