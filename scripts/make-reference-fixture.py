#!/usr/bin/python3
"""Writes tests/data/reference/: logits and gradients of a tiny Llama-2 model
computed by an implementation that shares nothing with the native one.

tests/native/model/native_reference_test.cc loads each case's weights through the native
HF-directory loader and compares the native model's logits, loss and the
gradient of every parameter with the numbers written here. The test needs no
Python; this script is only run to regenerate the fixture:

    /usr/bin/python3 scripts/make-reference-fixture.py      # Debian's python3-torch

It writes the same bytes again for the same PyTorch version (fixed seeds).

What the reference is. The model is written from the papers in the form of
Meta's original Llama code (Touvron et al. 2023, "Llama 2"), in float64:
  RMSNorm (Zhang & Sennrich 2019)   y = x / sqrt(mean(x²) + eps) · g
  rotary positions (Su et al. 2021, RoFormer §3.2.2), on CONSECUTIVE pairs
                                    (x[2i], x[2i+1]) rotated by pos·θ_i,
                                    θ_i = theta^(−2i/HD), as complex products
  attention                         softmax(q·kᵀ/√HD + causal mask)·v, each of the
                                    NKV key/value heads shared by NH/NKV
                                    consecutive query heads (Ainslie et al. 2023)
  SwiGLU MLP (Shazeer 2020)         w2(silu(w1·x) ⊙ w3·x)
  an untied output projection; pre-norm residual blocks.
Its weights are then written under Hugging Face LlamaForCausalLM names, with
q_proj and k_proj rows permuted as HF's convert_llama_weights_to_hf.py does:
in that layout the rotary pairs are (x[i], x[i+HD/2]) ("rotate_half"). A
second forward in HF's form (rotate_half on the permuted weights) must agree
with the first to 1e-12, or the script stops: the fixture pins the HF
convention, not merely one way of writing it.

The loss is the one the native training minimises: for a batch of B windows of
T+1 tokens, inputs tokens[:, :T], targets tokens[:, 1:], a 0/1 mask per
target, loss = Σ mask·CE / Σ mask (CE = logsumexp(logits) − logits[target]).
The masked targets stand for a prompt (the start of window 1) and padding
(the end of window 0).

Fixture layout, one directory per case (float32 tensors, safetensors format):
  config.json            HF config (LlamaForCausalLM)
  model.safetensors      the weights under HF names (the reference ran on these
                         float32 values, widened to float64)
  reference.safetensors  tokens (B,T+1) and loss_mask (B,T): small integers
                         stored as F32 (exact); logits (B,T,V); loss (1);
                         grad/<HF name> for every weight, d loss / d weight
"""

import json
import math
import pathlib
import struct

import torch

OUT_DIR = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "reference"

# Two tiny models, one with grouped-query attention. Dimensions are pairwise
# different (C=32, F=88, V=64, T=16) so that a transposed matrix cannot pass.
BASE = dict(dim=32, n_layers=2, n_heads=4, hidden_dim=88, vocab_size=64, max_seq_len=32,
            norm_eps=1e-5, rope_theta=10000.0, batch=2, seq_len=16)
CASES = {
    "llama-mha": dict(BASE, n_kv_heads=4, seed=20230718),
    "llama-gqa": dict(BASE, n_kv_heads=2, seed=20230719),
}


# ---- weight names: Meta's and Hugging Face's --------------------------------

# Each weight's role: (its name in Meta's llama/model.py, in HF's
# LlamaForCausalLM); {i} is the decoder layer.
WEIGHT_NAMES = {
    "embed": ("tok_embeddings.weight", "model.embed_tokens.weight"),
    "attn_norm": ("layers.{i}.attention_norm.weight", "model.layers.{i}.input_layernorm.weight"),
    "wq": ("layers.{i}.attention.wq.weight", "model.layers.{i}.self_attn.q_proj.weight"),
    "wk": ("layers.{i}.attention.wk.weight", "model.layers.{i}.self_attn.k_proj.weight"),
    "wv": ("layers.{i}.attention.wv.weight", "model.layers.{i}.self_attn.v_proj.weight"),
    "wo": ("layers.{i}.attention.wo.weight", "model.layers.{i}.self_attn.o_proj.weight"),
    "mlp_norm": ("layers.{i}.ffn_norm.weight", "model.layers.{i}.post_attention_layernorm.weight"),
    "gate": ("layers.{i}.feed_forward.w1.weight", "model.layers.{i}.mlp.gate_proj.weight"),
    "up": ("layers.{i}.feed_forward.w3.weight", "model.layers.{i}.mlp.up_proj.weight"),
    "down": ("layers.{i}.feed_forward.w2.weight", "model.layers.{i}.mlp.down_proj.weight"),
    "norm": ("norm.weight", "model.norm.weight"),
    "head": ("output.weight", "lm_head.weight"),
}
META, HF = 0, 1  # columns of WEIGHT_NAMES
LAYER_ROLES = ("attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "gate", "up", "down")
# HF's conversion permutes the rows of these, within heads of this config key.
PERMUTED_BY_HEADS = {"wq": "n_heads", "wk": "n_kv_heads"}


def weights_in_order(cfg):
    """(role, layer) of every weight, in the order of the native model_parameters()."""
    layers = [(role, i) for i in range(cfg["n_layers"]) for role in LAYER_ROLES]
    return [("embed", None)] + layers + [("norm", None), ("head", None)]


def weight_name(layout, role, layer=None):
    return WEIGHT_NAMES[role][layout].format(i=layer)


def hf_permute(w, n_heads):
    """convert_llama_weights_to_hf.py's permute: within each head, rows
    (pair 0 a, pair 0 b, pair 1 a, ...) become (all a's, then all b's)."""
    rows, cols = w.shape
    return w.view(n_heads, rows // n_heads // 2, 2, cols).transpose(1, 2).reshape(rows, cols)


def to_hf(meta_tensors, cfg):
    """Meta-named tensors (weights, or gradients: the permutation moves rows,
    so a gradient moves with its weight) under HF names and layout."""
    out = {}
    for role, i in weights_in_order(cfg):
        t = meta_tensors[weight_name(META, role, i)]
        if role in PERMUTED_BY_HEADS:
            t = hf_permute(t, cfg[PERMUTED_BY_HEADS[role]])
        out[weight_name(HF, role, i)] = t
    return out


# ---- weights, in Meta's layout ---------------------------------------------

def make_meta_weights(cfg, gen):
    """Random weights under Meta's names, rounded to float32.

    Matrices are N(0, 1/fan_in) so that attention is far from uniform and a
    wrong rotary convention moves the logits; the embedding is N(0, 0.02²)
    (HF's initializer_range), small enough that eps matters in the first
    RMSNorm; the norm gains are 1 + N(0, 0.1²), not all ones.
    """
    C, F, V = cfg["dim"], cfg["hidden_dim"], cfg["vocab_size"]
    kv = cfg["n_kv_heads"] * (C // cfg["n_heads"])
    shapes = {"embed": (V, C), "attn_norm": (C,), "wq": (C, C), "wk": (kv, C), "wv": (kv, C), "wo": (C, C),
              "mlp_norm": (C,), "gate": (F, C), "up": (F, C), "down": (C, F), "norm": (C,), "head": (V, C)}

    def draw(role):
        shape = shapes[role]
        x = torch.randn(*shape, generator=gen, dtype=torch.float64)
        if role == "embed":
            return 0.02 * x
        if len(shape) == 1:
            return 1.0 + 0.1 * x
        return x / math.sqrt(shape[1])

    # The fixture stores float32; the reference computes on exactly those values.
    return {weight_name(META, role, i): draw(role).float().double() for role, i in weights_in_order(cfg)}


# ---- the model ----------------------------------------------------------------

def rms_norm(x, gain, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gain


def rotary_angles(cfg, T):
    """(T, HD/2): pos·θ_i with θ_i = theta^(−2i/HD)."""
    HD = cfg["dim"] // cfg["n_heads"]
    theta = cfg["rope_theta"] ** (-torch.arange(0, HD, 2, dtype=torch.float64) / HD)
    return torch.outer(torch.arange(T, dtype=torch.float64), theta)


def rotate_consecutive_pairs(x, angles):
    """Meta's form, for Meta's layout. x (B,T,H,HD): pairs (x[2i], x[2i+1]) as
    complex numbers, times e^(i·angle)."""
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    z = z * torch.polar(torch.ones_like(angles), angles)[None, :, None, :]
    return torch.view_as_real(z).flatten(-2)


def rotate_half_pairs(x, angles):
    """HF's form, for HF's layout (LlamaRotaryEmbedding): pairs (x[i], x[i+HD/2]),
    x·cos + rotate_half(x)·sin, rotate_half(x) = (−x2, x1)."""
    emb = torch.cat([angles, angles], dim=-1)[None, :, None, :]
    x1, x2 = x.chunk(2, dim=-1)
    return x * emb.cos() + torch.cat([-x2, x1], dim=-1) * emb.sin()


def attention(x, wq, wk, wv, wo, cfg, rotate):
    B, T, C = x.shape
    NH, NKV = cfg["n_heads"], cfg["n_kv_heads"]
    HD = C // NH
    q = (x @ wq.T).view(B, T, NH, HD)
    k = (x @ wk.T).view(B, T, NKV, HD)
    v = (x @ wv.T).view(B, T, NKV, HD)
    q, k = rotate(q), rotate(k)
    # Key/value head j serves query heads j·NH/NKV .. (j+1)·NH/NKV − 1.
    k = k.repeat_interleave(NH // NKV, dim=2)
    v = v.repeat_interleave(NH // NKV, dim=2)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (B,NH,T,HD)
    scores = q @ k.transpose(-2, -1) / math.sqrt(HD)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    y = torch.softmax(scores, dim=-1) @ v
    return y.transpose(1, 2).reshape(B, T, C) @ wo.T


def swiglu(x, w_gate, w_up, w_down):
    return (torch.nn.functional.silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T


def forward(w, tokens, cfg, layout, rotate_pairs):
    """Logits (B,T,V) of weights `w` named in `layout`, rotary by `rotate_pairs`."""
    eps = cfg["norm_eps"]
    angles = rotary_angles(cfg, tokens.shape[1])
    rotate = lambda t: rotate_pairs(t, angles)
    h = w[weight_name(layout, "embed")][tokens]
    for i in range(cfg["n_layers"]):
        W = {role: w[weight_name(layout, role, i)] for role in LAYER_ROLES}
        h = h + attention(rms_norm(h, W["attn_norm"], eps), W["wq"], W["wk"], W["wv"], W["wo"], cfg, rotate)
        h = h + swiglu(rms_norm(h, W["mlp_norm"], eps), W["gate"], W["up"], W["down"])
    return rms_norm(h, w[weight_name(layout, "norm")], eps) @ w[weight_name(layout, "head")].T


# ---- loss and gradients ---------------------------------------------------------

def masked_mean_cross_entropy(logits, targets, mask):
    """Σ mask·(logsumexp(logits) − logits[target]) / Σ mask."""
    per_token = torch.logsumexp(logits, dim=-1) - logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return (per_token * mask).sum() / mask.sum()


def logits_loss_grads(weights, tokens, mask, cfg, layout, rotate_pairs):
    leaves = {name: t.clone().requires_grad_(True) for name, t in weights.items()}
    logits = forward(leaves, tokens[:, :-1], cfg, layout, rotate_pairs)
    loss = masked_mean_cross_entropy(logits, tokens[:, 1:], mask)
    loss.backward()
    return logits.detach(), loss.detach(), {name: t.grad for name, t in leaves.items()}


def batch(cfg, gen):
    B, T = cfg["batch"], cfg["seq_len"]
    tokens = torch.randint(0, cfg["vocab_size"], (B, T + 1), generator=gen)
    mask = torch.ones(B, T, dtype=torch.float64)
    mask[0, T - 3:] = 0  # padding at the end of window 0
    mask[1, :5] = 0      # a prompt at the start of window 1
    return tokens, mask


# ---- files ----------------------------------------------------------------------

def write_safetensors(path, tensors):
    """safetensors (https://huggingface.co/docs/safetensors): u64 little-endian
    header length, JSON header padded with spaces to 8 bytes, raw F32 data."""
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, t in tensors.items():
        data = t.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def hf_config(cfg):
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": cfg["dim"],
        "intermediate_size": cfg["hidden_dim"],
        "num_hidden_layers": cfg["n_layers"],
        "num_attention_heads": cfg["n_heads"],
        "num_key_value_heads": cfg["n_kv_heads"],
        "vocab_size": cfg["vocab_size"],
        "max_position_embeddings": cfg["max_seq_len"],
        "rms_norm_eps": cfg["norm_eps"],
        "rope_theta": cfg["rope_theta"],
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }


def max_difference(a, b):
    return max((a[k] - b[k]).abs().max().item() for k in a)


def make_case(name, cfg):
    gen = torch.Generator().manual_seed(cfg["seed"])
    meta_weights = make_meta_weights(cfg, gen)
    tokens, mask = batch(cfg, gen)

    logits, loss, meta_grads = logits_loss_grads(meta_weights, tokens, mask, cfg, META,
                                                   rotate_consecutive_pairs)
    hf_weights, hf_grads = to_hf(meta_weights, cfg), to_hf(meta_grads, cfg)

    # The same numbers from HF's form on the HF-layout weights.
    check_logits, check_loss, check_grads = logits_loss_grads(hf_weights, tokens, mask, cfg, HF,
                                                                  rotate_half_pairs)
    differences = {
        "logits": (logits - check_logits).abs().max().item(),
        "loss": (loss - check_loss).abs().item(),
        "gradients": max_difference(hf_grads, check_grads),
    }
    for what, d in differences.items():
        if d > 1e-12:
            raise SystemExit(f"{name}: Meta's and HF's forms disagree on the {what} by {d:.3g}")

    out = OUT_DIR / name
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(hf_config(cfg), indent=2) + "\n")
    write_safetensors(out / "model.safetensors", hf_weights)
    reference = {"tokens": tokens, "loss_mask": mask, "logits": logits, "loss": loss.reshape(1)}
    reference.update({"grad/" + hf: g for hf, g in hf_grads.items()})
    write_safetensors(out / "reference.safetensors", reference)
    print(f"{name}: loss {loss.item():.6f}, Meta vs HF form: "
          + ", ".join(f"{what} {d:.1e}" for what, d in differences.items()))


def main():
    torch.manual_seed(0)  # nothing should draw from the global generator; pinned anyway
    for name, cfg in CASES.items():
        make_case(name, cfg)


if __name__ == "__main__":
    main()
