#!/usr/bin/python3
"""The PyTorch side of bench/train_vs_pytorch.sh.

  train_vs_pytorch.py data OUT.bin [--tokens N] [--vocab V] [--seed S]
      writes a deterministic flat uint16 token file (nanoGPT's format)
  train_vs_pytorch.py train CONFIG --weights W --data D --batch B --seq S
                      --steps N [--lr LR] [--seed S] [--threads T] [--autocast-bf16]
                      --log-json F
      trains kiln's Qwen in PyTorch from the same weights on the same batches
      kiln draws, with kiln's AdamW, and writes kiln's --log-json lines;
      --autocast-bf16 runs the forward under torch.autocast("cpu",
      dtype=torch.bfloat16), PyTorch's own mixed precision (bf16 matmuls on
      oneDNN, f32 weights, AdamW and loss)
  train_vs_pytorch.py report RESULTS.json
      prints the side-by-side table and the loss agreement

The model mirrors compiler/frontend/qwen_model.cpp op for op (f32 weights):
wte gather; per layer RMSNorm (ln_1), c_attn (always with a bias, as Qwen
has), rotary embeddings (tables as ops/lib/rotary_cos_sin.cpp computes them,
rotate_half non-interleaved), scores / sqrt(kv_channels), causal mask filled
with the lowest finite f32, softmax, c_proj, residual; RMSNorm (ln_2),
w1(x) * silu(w2(x)), mlp.c_proj, residual; ln_f, an untied lm_head, and the
mean cross entropy of logits[:, :-1] against labels[:, 1:]. The batch of
step k is TokenData::batch of runtime/token_data.cpp (splitmix64 offsets).
The update is AdamW with kiln's constants (compiler/autodiff/training_step.h:
betas 0.9/0.95, eps 1e-6, weight decay 0.1 on every parameter), constant lr.
"""
import argparse
import json
import math
import os
import struct
import sys
import time

M64 = (1 << 64) - 1


def mix(x):
    """splitmix64's finaliser, as runtime/token_data.cpp's mix()."""
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


# --------------------------------------------------------------------------
# data


def make_data(args):
    """A token stream with structure to learn: phrases from a fixed phrase
    book, chosen with skewed frequencies, every value from splitmix64 so the
    file is the same on every machine and Python."""
    state = [args.seed & M64]

    def rand():
        state[0] = (state[0] + 1) & M64
        return mix(state[0])

    phrases = []
    for _ in range(256):
        length = 3 + rand() % 10
        phrases.append([rand() % args.vocab for _ in range(length)])
    out = []
    while len(out) < args.tokens:
        # min of two uniforms: the low phrase ids come more often
        p = min(rand() % len(phrases), rand() % len(phrases))
        out.extend(phrases[p])
    out = out[: args.tokens]
    with open(args.out, "wb") as f:
        f.write(struct.pack("<%dH" % len(out), *out))
    print("data: %d uint16 tokens (vocab %d, seed %d) -> %s" % (len(out), args.vocab, args.seed,
                                                                 args.out))


# --------------------------------------------------------------------------
# model


def read_safetensors(path, torch):
    """safetensors parsed by hand: u64 LE header size, JSON header, raw LE data."""
    assert sys.byteorder == "little"
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    base = 8 + n
    dtypes = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16,
              "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        t = torch.frombuffer(bytearray(blob[base + begin:base + end]), dtype=dtypes[info["dtype"]])
        out[name] = t.reshape(info["shape"]).clone()
    return out


class KilnQwen:
    def __init__(self, config, weights, torch):
        self.torch = torch
        c = config
        self.H = c["hidden_size"]
        self.heads = c["num_attention_heads"]
        self.hd = c["kv_channels"]
        self.layers = c["num_hidden_layers"]
        self.V = c["vocab_size"]
        self.eps = c["layer_norm_epsilon"]
        self.scale = c.get("scale_attn_weights", True)
        self.tied = c.get("tie_word_embeddings", False)
        self.rot = int(math.floor(self.hd * c.get("rotary_pct", 1.0) + 1e-9))
        self.base = c.get("rotary_emb_base", 10000)
        self.no_bias = c.get("no_bias", True)
        self.params = {}
        for name, t in weights.items():
            self.params[name] = t.to(torch.float32).clone().requires_grad_(True)
        self._tables = {}

    def p(self, name):
        return self.params.get(name)

    def rotary_tables(self, S):
        """ops/lib/rotary_cos_sin.cpp: inv_freq and freqs in f32, cos/sin in
        double rounded to f32."""
        if S not in self._tables:
            torch = self.torch
            D = self.rot
            exps = torch.arange(0, D, 2, dtype=torch.float32) / float(D)
            inv_freq = 1.0 / torch.pow(torch.tensor(float(self.base), dtype=torch.float32), exps)
            t = torch.arange(S, dtype=torch.float32)
            freqs = t[:, None] * inv_freq[None, :]  # f32 products
            emb = torch.cat([freqs, freqs], dim=-1).to(torch.float64)
            cos = torch.cos(emb).to(torch.float32).reshape(1, S, 1, D)
            sin = torch.sin(emb).to(torch.float32).reshape(1, S, 1, D)
            self._tables[S] = (cos, sin)
        return self._tables[S]

    def linear(self, x, prefix):
        y = x @ self.p(prefix + ".weight").t()
        b = self.p(prefix + ".bias")
        return y if b is None else y + b

    def rms_norm(self, x, w):
        torch = self.torch
        inv = torch.rsqrt((x * x).mean(dim=2, keepdim=True) + self.eps)
        return (x * inv) * w

    def rotary(self, x, cos, sin):
        torch = self.torch
        D = self.rot
        rot, rest = (x, None) if D == self.hd else (x[..., :D], x[..., D:])
        half = torch.cat([-rot[..., D // 2:], rot[..., :D // 2]], dim=-1)
        y = rot * cos + half * sin
        return y if rest is None else torch.cat([y, rest], dim=-1)

    def loss(self, ids):
        torch = self.torch
        F = torch.nn.functional
        B, S = ids.shape
        H, heads, hd = self.H, self.heads, self.hd
        cos, sin = self.rotary_tables(S)
        mask = torch.triu(torch.ones(S, S, dtype=torch.bool), diagonal=1)
        x = F.embedding(ids, self.p("transformer.wte.weight"))
        for i in range(self.layers):
            pre = "transformer.h.%d." % i
            h = self.rms_norm(x, self.p(pre + "ln_1.weight"))
            qkv = self.linear(h, pre + "attn.c_attn")
            q, k, v = qkv.split(H, dim=2)
            q = self.rotary(q.reshape(B, S, heads, hd), cos, sin).transpose(1, 2)
            k = self.rotary(k.reshape(B, S, heads, hd), cos, sin).transpose(1, 2)
            v = v.reshape(B, S, heads, hd).transpose(1, 2)
            scores = q @ k.transpose(2, 3)
            if self.scale:
                scores = scores / torch.tensor(math.sqrt(hd), dtype=torch.float32)
            # lowestFinite of the scores' dtype (f32; bf16 under autocast)
            scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
            probs = torch.softmax(scores, dim=3)
            ctx = (probs @ v).transpose(1, 2).reshape(B, S, H)
            x = x + self.linear(ctx, pre + "attn.c_proj")
            h = self.rms_norm(x, self.p(pre + "ln_2.weight"))
            m = self.linear(h, pre + "mlp.w1") * F.silu(self.linear(h, pre + "mlp.w2"))
            x = x + self.linear(m, pre + "mlp.c_proj")
        x = self.rms_norm(x, self.p("transformer.ln_f.weight"))
        w = self.p("transformer.wte.weight") if self.tied else self.p("lm_head.weight")
        logits = x @ w.t()
        return F.cross_entropy(logits[:, :-1].reshape(-1, self.V), ids[:, 1:].reshape(-1))


class KilnBatches:
    """runtime/token_data.cpp's TokenData::batch: sequence s of step k starts at
    mix(seed ^ mix(k * 1000003 + s)) % (tokens - seq)."""

    def __init__(self, path, seq, seed, torch):
        with open(path, "rb") as f:
            raw = f.read()
        self.tokens = torch.frombuffer(bytearray(raw), dtype=torch.int16).to(torch.int64) & 0xFFFF
        self.seq = seq
        self.seed = seed & M64
        self.starts = self.tokens.numel() - seq
        self.torch = torch

    def batch(self, step, count):
        rows = []
        for s in range(count):
            at = mix(self.seed ^ mix((step * 1000003 + s) & M64)) % self.starts
            rows.append(self.tokens[at:at + self.seq])
        return self.torch.stack(rows)


def train(args):
    import torch

    torch.set_num_threads(args.threads)
    with open(args.config) as f:
        config = json.load(f)
    model = KilnQwen(config, read_safetensors(args.weights, torch), torch)
    data = KilnBatches(args.data, args.seq, args.seed, torch)
    params = list(model.params.values())
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(0.9, 0.95), eps=1e-6, weight_decay=0.1)
    log = open(args.log_json, "w")
    for step in range(args.steps):
        started = time.perf_counter()
        ids = data.batch(step, args.batch)
        opt.zero_grad(set_to_none=True)
        if args.autocast_bf16:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model.loss(ids)
        else:
            loss = model.loss(ids)
        loss.backward()
        # kiln's grad_norm: the global L2 norm of every gradient, before the update
        grad_norm = math.sqrt(sum(float((p.grad.double() ** 2).sum()) for p in params))
        opt.step()
        loss_value = float(loss)
        seconds = time.perf_counter() - started
        record = {"step": step + 1, "loss": loss_value, "grad_norm": grad_norm, "lr": args.lr,
                  "seconds": seconds, "tokens_per_s": args.batch * args.seq / seconds}
        log.write(json.dumps(record) + "\n")
        log.flush()
        if step < 3 or (step + 1) % 50 == 0 or step + 1 == args.steps:
            print("torch step %d/%d  loss %.4f  grad norm %.4g  %.0f tokens/s"
                  % (step + 1, args.steps, loss_value, grad_norm, record["tokens_per_s"]))


# --------------------------------------------------------------------------
# report


def read_log(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def steady(records, warmup):
    """Tokens/s over the steps after `warmup`: tokens summed / seconds summed."""
    rest = records[warmup:]
    tokens = sum(r["tokens_per_s"] * r["seconds"] for r in rest)
    seconds = sum(r["seconds"] for r in rest)
    return tokens / seconds


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def report(args):
    with open(args.results) as f:
        res = json.load(f)
    warmup = res["warmup"]
    threads = res["torch_threads"]
    kiln_runs = res.get("kiln_runs", ["kiln1", "kiln8"])
    torch_runs = ["torch%d" % t for t in threads]
    main_torch = "torch%d" % threads[0]
    # PyTorch's autocast bf16 run, on the first thread count: the baseline of kiln bf16.
    torch_bf16 = main_torch + "bf16" if res.get("torch_bf16") else None
    if torch_bf16:
        torch_runs.append(torch_bf16)
    runs = kiln_runs + torch_runs
    names = {r: ("kiln bf16" if r.endswith("bf16") else "kiln %s dev" % r[4:]) for r in kiln_runs}
    names.update({"torch%d" % t: "torch %d thr" % t for t in threads})
    if torch_bf16:
        names[torch_bf16] = "torch bf16"
    print()
    print("Qwen (%s), %d steps per run, first %d skipped, median of %d rounds"
          % (res["config"], res["steps"], warmup, res["rounds"]))
    print("training tokens/s, steady state (tokens of the measured steps / their seconds);")
    print("best: the faster PyTorch thread count; torch bf16: PyTorch eager under "
          "torch.autocast(\"cpu\", dtype=torch.bfloat16) on %d threads" % threads[0])
    cols = ["%13s" % names[r] for r in runs]
    ratios = [r + "/" + main_torch for r in kiln_runs]
    if len(threads) > 1:
        ratios += [r + "/best" for r in kiln_runs]
    bf16_ratios = [r for r in kiln_runs if r.endswith("bf16")] if torch_bf16 else []
    ratios += [r + "/" + torch_bf16 for r in bf16_ratios]
    header = "%-11s" % "batch x seq" + "".join(cols) + "".join("%21s" % r for r in ratios)
    print(header)
    print("-" * len(header))
    summary = {"cases": []}
    for case in res["cases"]:
        tps = {r: median([steady(read_log(p), warmup) for p in case["logs"][r]]) for r in runs}
        line = "%-11s" % ("%d x %d" % (case["batch"], case["seq"]))
        line += "".join("%13.0f" % tps[r] for r in runs)
        line += "".join("%21.2f" % (tps[r] / tps[main_torch]) for r in kiln_runs)
        if len(threads) > 1:
            best = max(tps["torch%d" % t] for t in threads)
            line += "".join("%21.2f" % (tps[r] / best) for r in kiln_runs)
        line += "".join("%21.2f" % (tps[r] / tps[torch_bf16]) for r in bf16_ratios)
        print(line)
        summary["cases"].append({"batch": case["batch"], "seq": case["seq"], "tokens_per_s": tps})

    print()
    print("loss agreement with %s (round 1; relative |kiln - torch| / torch): f32 within 1e-5 at "
          "step 1, bf16 within 1e-2 over the first %d steps" % (main_torch, args.compare_steps))
    ok = True
    for case in res["cases"]:
        torch_log = read_log(case["logs"][main_torch][0])
        for who in kiln_runs:
            kiln_log = read_log(case["logs"][who][0])
            n = min(len(kiln_log), len(torch_log))
            rel = [abs(kiln_log[i]["loss"] - torch_log[i]["loss"]) / abs(torch_log[i]["loss"])
                   for i in range(n)]
            first = rel[0]
            upto = min(args.compare_steps, n)
            gn = [abs(kiln_log[i]["grad_norm"] - torch_log[i]["grad_norm"])
                  / abs(torch_log[i]["grad_norm"]) for i in range(upto)]
            bf16 = who.endswith("bf16")
            good = max(rel[:upto]) <= 1e-2 if bf16 else first <= 1e-5
            ok = ok and good
            print("  %d x %d %s: step 1 loss kiln %.6f torch %.6f, rel %.1e %s"
                  % (case["batch"], case["seq"], who, kiln_log[0]["loss"], torch_log[0]["loss"],
                     first, "OK" if good else "MISMATCH"))
            print("    steps 1-%d: max rel loss %.1e, max rel grad norm %.1e; step %d: loss kiln "
                  "%.4f torch %.4f (rel %.1e), max rel loss over all %d steps %.1e"
                  % (upto, max(rel[:upto]), max(gn), n, kiln_log[n - 1]["loss"],
                     torch_log[n - 1]["loss"], rel[n - 1], n, max(rel)))
        if torch_bf16:
            # Informational: PyTorch's own bf16 drift from its f32 run.
            bf_log = read_log(case["logs"][torch_bf16][0])
            n = min(len(bf_log), len(torch_log), args.compare_steps)
            rel = [abs(bf_log[i]["loss"] - torch_log[i]["loss"]) / abs(torch_log[i]["loss"])
                   for i in range(n)]
            print("  %d x %d %s: steps 1-%d, max rel loss vs %s %.1e (not checked)"
                  % (case["batch"], case["seq"], torch_bf16, n, main_torch, max(rel)))
    if args.summary:
        summary["loss_check_ok"] = ok
        with open(args.summary, "w") as f:
            json.dump(summary, f, indent=1)
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("data")
    d.add_argument("out")
    d.add_argument("--tokens", type=int, default=200000)
    d.add_argument("--vocab", type=int, default=512)
    d.add_argument("--seed", type=int, default=1234)
    t = sub.add_parser("train")
    t.add_argument("config")
    t.add_argument("--weights", required=True)
    t.add_argument("--data", required=True)
    t.add_argument("--batch", type=int, required=True)
    t.add_argument("--seq", type=int, required=True)
    t.add_argument("--steps", type=int, required=True)
    t.add_argument("--lr", type=float, default=3e-4)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--autocast-bf16", action="store_true")
    t.add_argument("--log-json", required=True)
    r = sub.add_parser("report")
    r.add_argument("results")
    r.add_argument("--compare-steps", type=int, default=20)
    r.add_argument("--summary")
    args = ap.parse_args()
    if args.cmd == "data":
        return make_data(args)
    if args.cmd == "train":
        return train(args)
    return report(args)


if __name__ == "__main__":
    sys.exit(main() or 0)
