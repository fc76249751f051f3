"""A Llama/Qwen2-style decoder in plain torch.nn, exported to ONNX by
torch.onnx.export with dynamic batch and sequence axes, for kiln's ONNX
end-to-end test (tests/e2e/onnx_decoder_cli_test.cpp). Writes into OUT:
model.onnx, inputs.safetensors (input_ids), expected.safetensors (torch's
logits) and, with --grads, torch autograd's gradients of the mean logit
with respect to every parameter (grad.<name>). Not shipped: a test fixture.

usage: tiny_decoder.py OUT [--batch B] [--seq S]
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
    def __init__(self, vocab=64, hidden=32, heads=4, inner=64, layers=2):
        super().__init__()
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
        return self.lm_head(self.norm(x))


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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=8)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Decoder().eval()
    ids = torch.randint(0, 64, (args.batch, args.seq), dtype=torch.int64)
    torch.onnx.export(
        model, (ids,), f"{args.out}/model.onnx", input_names=["input_ids"],
        output_names=["logits"], opset_version=17, do_constant_folding=True,
        dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}})
    logits = model(ids)
    write_safetensors(f"{args.out}/inputs.safetensors", {"input_ids": ids})
    write_safetensors(f"{args.out}/expected.safetensors", {"logits": logits})


if __name__ == "__main__":
    main()
