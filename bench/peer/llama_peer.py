#!/usr/bin/env python3
"""A plain PyTorch Llama-2, the peer of protocol_bench on the same machine.

Eager PyTorch as a lab would write it (torchtitan's and gpt-fast's shapes):
RMSNorm (F.rms_norm where the torch has it), rotary embeddings (rotate-half, as Hugging Face checkpoints),
grouped-query attention through F.scaled_dot_product_attention where the
torch has it, SwiGLU, an untied head; torch.optim.AdamW (foreach) with the
gradient clipped to norm 1.0 (in bf16 over float32 master weights, as
protocol trains, unless --master none); greedy decoding with a preallocated
KV cache.
Same shapes, dtype, seed discipline and recompute setting as protocol_bench,
and it prints the same figures in the same form:

  python3 bench/peer/llama_peer.py --presets tiny --steps 10 --batch 8 --seq 128 --decode 64
  python3 bench/peer/llama_peer.py --device cuda --presets llama-1b --batch 4 --seq 2048 --decode 0
  python3 bench/peer/llama_peer.py --compile ...   # also torch.compile's variant, where it works
  python3 bench/peer/llama_peer.py --only-compiled ...   # that variant alone (the upper anchor)
  python3 bench/peer/llama_peer.py --profile 12 ...   # then one more step and generation under torch.profiler

The presets are model_config.cc's (docs/native.md's table); --config reads a
Hugging Face config.json instead. Method as protocol_bench's: `warmup` steps
discarded, then `steps` timed ones, the device synchronised before each clock
read; FLOPs/token 6·(N − N_emb) + 12·L·H·Q·T (PaLM, appendix B).
"""
import argparse
import contextlib
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
import torch.utils.checkpoint

# name: (dim, layers, heads, kv_heads, ffn, vocab, max_seq_len), as model_config.cc's presets.
PRESETS = {
    "tiny": (192, 4, 6, 2, 512, 1024, 512),
    "small-100m": (768, 8, 12, 4, 2048, 32000, 1024),
    "layers-100m": (768, 14, 12, 12, 2048, 1024, 1024),
    "llama-1b": (2048, 22, 32, 4, 5632, 32000, 2048),
    "llama2-7b": (4096, 32, 32, 32, 11008, 32000, 4096),
}
EPS = 1e-5
ROPE_THETA = 10000.0


class Config:
    def __init__(self, dim, layers, heads, kv_heads, ffn, vocab, max_seq_len):
        self.dim, self.n_layers, self.n_heads, self.n_kv_heads = dim, layers, heads, kv_heads
        self.hidden_dim, self.vocab_size, self.max_seq_len = ffn, vocab, max_seq_len
        self.head_dim = dim // heads

    def parameters(self):
        C, F_, V, L = self.dim, self.hidden_dim, self.vocab_size, self.n_layers
        KV = self.n_kv_heads * self.head_dim
        layer = C * C * 2 + 2 * C * KV + 3 * C * F_ + 2 * C
        return V * C * 2 + L * layer + C

    def training_flops_per_token(self, seq):
        n = self.parameters() - self.vocab_size * self.dim
        return 6 * n + 12 * self.n_layers * self.n_heads * self.head_dim * seq


def rms_norm(x, weight):
    # F.rms_norm where the torch has it (2.4 on; one fused kernel on CUDA from 2.9), as
    # torch.nn.RMSNorm; Hugging Face's LlamaRMSNorm before.
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), weight, EPS)
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)).type_as(x) * weight


def rope_tables(cfg, length, device):
    inv = 1.0 / (ROPE_THETA ** (torch.arange(0, cfg.head_dim, 2, device=device).float() / cfg.head_dim))
    freqs = torch.outer(torch.arange(length, device=device).float(), inv)
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rope(x, cos, sin):  # x (B, H, T, D); cos/sin (T, D)
    return (x * cos.to(x.dtype)) + (rotate_half(x) * sin.to(x.dtype))


def sdpa_takes_grouped_heads():
    """torch 2.5 on: F.scaled_dot_product_attention(enable_gqa=True) reads the
    key/value heads without repeating them (flash attention on a GPU)."""
    if not hasattr(F, "scaled_dot_product_attention"):
        return False
    try:
        t = torch.zeros(1, 2, 1, 8)
        F.scaled_dot_product_attention(t, t[:, :1], t[:, :1], enable_gqa=True)
        return True
    except TypeError:
        return False


GROUPED_SDPA = sdpa_takes_grouped_heads()


def attention(q, k, v, causal):
    groups = q.shape[1] // k.shape[1]
    if groups > 1 and GROUPED_SDPA:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    if groups > 1:
        k = k.repeat_interleave(groups, dim=1)
        v = v.repeat_interleave(groups, dim=1)
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        t = q.shape[-2]
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return scores.softmax(-1) @ v


class Layer(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C, KV = cfg.dim, cfg.n_kv_heads * cfg.head_dim
        self.cfg = cfg
        self.attn_norm = torch.nn.Parameter(torch.ones(C))
        self.wq = torch.nn.Linear(C, C, bias=False)
        self.wk = torch.nn.Linear(C, KV, bias=False)
        self.wv = torch.nn.Linear(C, KV, bias=False)
        self.wo = torch.nn.Linear(C, C, bias=False)
        self.ffn_norm = torch.nn.Parameter(torch.ones(C))
        self.w_gate = torch.nn.Linear(C, cfg.hidden_dim, bias=False)
        self.w_up = torch.nn.Linear(C, cfg.hidden_dim, bias=False)
        self.w_down = torch.nn.Linear(cfg.hidden_dim, C, bias=False)

    def forward(self, x, cos, sin, cache=None, pos=0):
        cfg = self.cfg
        B, T, _ = x.shape
        h = rms_norm(x, self.attn_norm)
        q = self.wq(h).view(B, T, cfg.n_heads, cfg.head_dim).transpose(1, 2)
        k = self.wk(h).view(B, T, cfg.n_kv_heads, cfg.head_dim).transpose(1, 2)
        v = self.wv(h).view(B, T, cfg.n_kv_heads, cfg.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if cache is not None:  # preallocated (B, KV, max, D); written in place
            cache[0][:, :, pos:pos + T] = k
            cache[1][:, :, pos:pos + T] = v
            k, v = cache[0][:, :, :pos + T], cache[1][:, :, :pos + T]
        a = attention(q, k, v, causal=T > 1)
        x = x + self.wo(a.transpose(1, 2).reshape(B, T, cfg.dim))
        h = rms_norm(x, self.ffn_norm)
        return x + self.w_down(F.silu(self.w_gate(h)) * self.w_up(h))


class Llama(torch.nn.Module):
    def __init__(self, cfg, recompute_every):
        super().__init__()
        self.cfg, self.recompute_every = cfg, recompute_every
        self.embed = torch.nn.Embedding(cfg.vocab_size, cfg.dim)
        self.layers = torch.nn.ModuleList([Layer(cfg) for _ in range(cfg.n_layers)])
        self.norm = torch.nn.Parameter(torch.ones(cfg.dim))
        self.head = torch.nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        cos, sin = rope_tables(cfg, cfg.max_seq_len, torch.device("cpu"))  # once, as the model's buffers
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        with torch.no_grad():  # HF's initializer_range; gains at 1
            for p in self.parameters():
                if p.dim() > 1:
                    p.normal_(0.0, 0.02)

    def forward(self, tokens, caches=None, pos=0):
        T = tokens.shape[1]
        cos, sin = self.cos[pos:pos + T], self.sin[pos:pos + T]
        x = self.embed(tokens)
        for i, layer in enumerate(self.layers):
            if caches is None and self.training and self.recompute_every > 0 and i % self.recompute_every == 0:
                x = torch.utils.checkpoint.checkpoint(layer, x, cos, sin, use_reentrant=False)
            else:
                x = layer(x, cos, sin, None if caches is None else caches[i], pos)
        return self.head(rms_norm(x, self.norm))


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def train(model, cfg, args, device, dtype):
    gen = torch.Generator().manual_seed(7)
    tokens = torch.randint(3, cfg.vocab_size, (args.batch, args.seq + 1), generator=gen).to(device)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    params = list(model.parameters())
    # With float32 master weights (protocol's numerics in bf16): the optimizer and the clip work on
    # float32 copies, the gradients are widened into them and the bf16 weights copied back after the step.
    master = args.master == "fp32" and dtype != torch.float32
    masters = [p.detach().float().clone() for p in params] if master else params
    opt = torch.optim.AdamW(masters, lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    model.train()

    def step():
        opt.zero_grad(set_to_none=True)
        if master:
            model.zero_grad(set_to_none=True)
        logits = model(inputs)
        loss = F.cross_entropy(logits.float().reshape(-1, cfg.vocab_size), targets.reshape(-1))
        loss.backward()
        if master:
            for m, p in zip(masters, params):
                m.grad = p.grad.float()
        torch.nn.utils.clip_grad_norm_(masters, 1.0)
        opt.step()
        if master:
            with torch.no_grad():
                for m, p in zip(masters, params):
                    p.copy_(m)
        return loss.detach()

    for _ in range(args.warmup):
        step()
    sync(device)
    start = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    sync(device)
    seconds = (time.perf_counter() - start) / args.steps
    tps = args.batch * args.seq / seconds
    gflops = cfg.training_flops_per_token(args.seq) * tps / 1e9
    return seconds, tps, gflops, float(loss), step


@torch.no_grad()
def decode(model, cfg, args, device, dtype):
    model.eval()
    gen = torch.Generator().manual_seed(7)
    prompt = torch.randint(3, cfg.vocab_size, (1, args.prompt), generator=gen).to(device)
    new = min(args.decode, cfg.max_seq_len - args.prompt)
    caches = [(torch.zeros(1, cfg.n_kv_heads, cfg.max_seq_len, cfg.head_dim, device=device, dtype=dtype),
               torch.zeros(1, cfg.n_kv_heads, cfg.max_seq_len, cfg.head_dim, device=device, dtype=dtype))
              for _ in range(cfg.n_layers)]

    def generate(count=new):
        logits = model(prompt, caches, 0)
        token = logits[:, -1].argmax(-1, keepdim=True)
        out = [int(token)]
        for i in range(count - 1):
            logits = model(token, caches, args.prompt + i)
            token = logits[:, -1].argmax(-1, keepdim=True)
            out.append(int(token))
        return out

    generate()  # warm-up
    sync(device)
    start = time.perf_counter()
    out = generate()
    sync(device)
    # The profiled generation stops at 32 tokens: an eager 7B token is thousands of profiled events.
    return (time.perf_counter() - start) / len(out), len(out), lambda: len(generate(min(new, 32)))


def print_profile(device, work, rows, unit):
    """Runs work() once more under torch.profiler, after the timed runs (recording every op slows the
    host: these are the profiler's figures, not the timed ones), and prints its `rows` longest ops by
    self time on the device (on a GPU) or the host. work() returns how many `unit`s it ran."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    sync(device)
    start = time.perf_counter()
    try:
        with torch.profiler.profile(activities=activities) as prof:
            units = work()
            sync(device)
            window = time.perf_counter() - start  # before the profiler's own processing at the block's end
        averages = prof.key_averages()
    except RuntimeError as e:  # a profiler that cannot start costs the profile, not the figures before it
        print(f"           profile: not taken: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
        return
    print(f"           profile: {units} {unit}(s) in {window:.3f} s (torch.profiler)")
    keys = ["self_device_time_total", "self_cuda_time_total"] if device.type == "cuda" else ["self_cpu_time_total"]
    table = None
    for key in keys:
        try:
            table = averages.table(sort_by=key, row_limit=rows)
            break
        except (AttributeError, KeyError, ValueError):
            continue
    if table is None:
        table = averages.table(row_limit=rows)
    for line in table.splitlines():
        print(f"           {line}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--presets", default="tiny,small-100m")
    p.add_argument("--config", help="a Hugging Face config.json instead of a preset")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--dtype", default="", choices=["", "bf16", "fp32"])
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--decode", type=int, default=64)
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--recompute", type=int, default=1,
                   help="recompute layer l in backward when l %% N == 0 (1: every layer, as protocol_bench's default; 0: none)")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="intra-op threads (torch.set_num_threads)")
    p.add_argument("--no-train", action="store_true")
    p.add_argument("--compile", action="store_true", help="also torch.compile's variant, where this torch has it")
    p.add_argument("--only-compiled", action="store_true",
                   help="torch.compile's variant alone (the upper anchor; fails where this torch has no torch.compile)")
    p.add_argument("--master", default="fp32", choices=["fp32", "none"],
                   help="bf16 training: float32 master weights for AdamW (fp32, as protocol keeps them) "
                        "or none (AdamW on the bf16 weights and moments themselves)")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="after the timed runs, one more training step and generation under torch.profiler: "
                        "the N ops with the longest self time")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    device = torch.device("cuda" if args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
                          else "cpu")
    dtype = torch.bfloat16 if (args.dtype == "bf16" or (not args.dtype and device.type == "cuda")) else torch.float32
    recompute = f"recompute every {args.recompute} layer(s)" if args.recompute else "recompute off"
    master = "" if dtype == torch.float32 else (", float32 master weights" if args.master == "fp32"
                                                else ", no master weights (AdamW in bf16)")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {device}, dtype {str(dtype)[6:]}, "
          f"{recompute}{master}, grouped key/value heads {'to SDPA as they are' if GROUPED_SDPA else 'repeated'}")
    configs = []
    if args.config:
        with open(args.config) as f:
            j = json.load(f)
        configs.append((os.path.basename(os.path.dirname(os.path.abspath(args.config))),
                        Config(j["hidden_size"], j["num_hidden_layers"], j["num_attention_heads"],
                               j.get("num_key_value_heads", j["num_attention_heads"]), j["intermediate_size"],
                               j["vocab_size"], j.get("max_position_embeddings", 2048))))
    else:
        configs = [(name, Config(*PRESETS[name])) for name in args.presets.split(",")]
    for name, cfg in configs:
        torch.manual_seed(1234)
        # On a GPU the weights are made and drawn there (torch 2.x's device context): on the host a 7B
        # model's initialisation takes minutes of a short GPU lease. The figures do not depend on the values.
        on_device = device.type == "cuda" and hasattr(torch.device, "__enter__")
        with (device if on_device else contextlib.nullcontext()):
            model = Llama(cfg, args.recompute)
        model = model.to(device=device, dtype=dtype)
        variants = [] if args.only_compiled else [("", model)]
        if (args.compile or args.only_compiled) and hasattr(torch, "compile"):
            variants.append((" (torch.compile)", torch.compile(model)))
        elif args.only_compiled:
            sys.exit(f"--only-compiled: torch {torch.__version__} has no torch.compile")
        for label, m in variants:
            profiles = []  # run after every timed figure of the variant, as protocol_bench does
            if not args.no_train:
                s, tps, gflops, loss, step = train(m, cfg, args, device, dtype)
                print(f"{name:<10} params {cfg.parameters() / 1e6:6.1f} M  train{label} B={args.batch} T={args.seq}: "
                      f"{s:8.3f} s/step  {tps:9.0f} tokens/s  {gflops:9.1f} GFLOP/s  (loss {loss:.3f})")
                profiles.append(("step", lambda step=step: (step(), 1)[1]))
            if args.decode > 0:
                per_token, n, generate = decode(m, cfg, args, device, dtype)
                print(f"{name:<10} params {cfg.parameters() / 1e6:6.1f} M  decode{label} prompt={args.prompt} new={n}: "
                      f"{per_token:8.4f} s/token  {1 / per_token:9.1f} tokens/s")
                profiles.append(("token", torch.no_grad()(generate)))
            if args.profile > 0:
                for unit, work in profiles:
                    print_profile(device, work, args.profile, unit)


if __name__ == "__main__":
    main()
