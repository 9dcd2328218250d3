#!/usr/bin/env python3
"""A tiny, real workload for the quickstart's `command` cases (standard library only).

It is NOT a Llama model: it trains a character-bigram language model (a V x V
logit table, softmax cross-entropy, SGD) so that the whole pipeline — plan,
runner, command backend, store, report — runs end to end on a 2-core CPU in
about a minute. The systems it runs are labelled `demo-baseline` and
`demo-share` in plans/quickstart.yaml, never `fsdp` or `share`.

  train  --workers 1            one process trains every step on the whole corpus
  train  --workers G            the share idea in miniature: G independent processes,
                                each on its own shard for steps/G steps, merged once at
                                the end by averaging their tables (no communication
                                while training). The merged model's held-out loss is
                                printed next to the time, so speed is never shown
                                without quality.
  infer  --workers G            serves the max-new-tokens schedule (greedy), G requests
                                at a time.

Output lines the plan's regexes read: `step N loss X`, `eval_loss X`,
`total_generation_seconds X`, `generated_tokens N`, `tokens_per_second X`,
`seconds_per_token X`, `bytes_merged N`.
"""
import argparse
import math
import multiprocessing as mp
import os
import random
import sys
import time


def load_corpus(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    vocab = sorted(set(text))
    index = {c: i for i, c in enumerate(vocab)}
    ids = [index[c] for c in text]
    split = int(len(ids) * 0.9)
    return vocab, ids[:split], ids[split:]


def zeros(v):
    return [[0.0] * v for _ in range(v)]


def row_loss_and_grad(row, target):
    """Softmax cross-entropy of one logit row: loss and d loss / d logits."""
    m = max(row)
    exps = [math.exp(x - m) for x in row]
    total = sum(exps)
    probs = [e / total for e in exps]
    loss = -math.log(max(probs[target], 1e-12))
    probs[target] -= 1.0
    return loss, probs


def eval_loss(table, ids):
    n = min(len(ids) - 1, 4000)
    return sum(row_loss_and_grad(table[ids[i]], ids[i + 1])[0] for i in range(n)) / n


def train_worker(args):
    """Trains `steps` SGD steps on `ids`; returns the table (and prints steps when asked)."""
    v, ids, steps, batch, lr, seed, report = args
    rng = random.Random(seed)
    table = zeros(v)
    for step in range(1, steps + 1):
        grads = {}
        loss = 0.0
        for _ in range(batch):
            i = rng.randrange(len(ids) - 1)
            l, g = row_loss_and_grad(table[ids[i]], ids[i + 1])
            loss += l
            acc = grads.setdefault(ids[i], [0.0] * v)
            for j in range(v):
                acc[j] += g[j]
        for r, g in grads.items():
            row = table[r]
            for j in range(v):
                row[j] -= lr * g[j] / batch
        if report:
            print(f"step {step} loss {loss / batch:.4f}", flush=True)
    return table


def cmd_train(a):
    vocab, train_ids, held_out = load_corpus(a.corpus)
    v = len(vocab)
    g = a.workers
    steps_each = max(1, a.steps // g)
    if g == 1:
        table = train_worker((v, train_ids, a.steps, a.batch, a.lr, a.seed, True))
    else:
        shard = len(train_ids) // g
        jobs = [(v, train_ids[k * shard:(k + 1) * shard], steps_each, a.batch, a.lr, a.seed + k, k == 0)
                for k in range(g)]
        with mp.Pool(g) as pool:
            tables = pool.map(train_worker, jobs)
        table = [[sum(t[r][j] for t in tables) / g for j in range(v)] for r in range(v)]
        best = min(eval_loss(t, held_out) for t in tables)
        print(f"best_group_eval_loss {best:.4f}")
        print(f"bytes_merged {g * v * v * 8}")
    print(f"eval_loss {eval_loss(table, held_out):.4f}")
    if a.output_dir:
        os.makedirs(a.output_dir, exist_ok=True)
        with open(os.path.join(a.output_dir, "bigram.tsv"), "w", encoding="utf-8") as f:
            for row in table:
                f.write("\t".join(f"{x:.6f}" for x in row) + "\n")


def generate(args):
    vocab, table, prompt, max_new = args
    index = {c: i for i, c in enumerate(vocab)}
    start = time.perf_counter()
    cur = index.get(prompt[-1], 0) if prompt else 0
    out = []
    for _ in range(max_new):  # greedy, exactly max_new tokens (no end-of-sequence)
        row = table[cur]
        # one full softmax per token, as a real decoder would compute it
        m = max(row)
        total = sum(math.exp(x - m) for x in row)
        probs = [math.exp(x - m) / total for x in row]
        cur = max(range(len(row)), key=probs.__getitem__)
        out.append(vocab[cur])
    return max_new, time.perf_counter() - start


def cmd_infer(a):
    vocab, train_ids, _ = load_corpus(a.corpus)
    v = len(vocab)
    table = train_worker((v, train_ids, 50, 32, 1.0, a.seed, False))
    schedule = [int(x) for x in a.max_new_tokens.split(",") if x]
    jobs = [(vocab, table, a.prompt, n) for n in schedule]
    start = time.perf_counter()
    if a.workers == 1:
        results = [generate(j) for j in jobs]
    else:
        with mp.Pool(a.workers) as pool:
            results = pool.map(generate, jobs)
    total = time.perf_counter() - start
    tokens = sum(n for n, _ in results)
    for i, (n, s) in enumerate(results):
        print(f"request {i} max_new_tokens {n} seconds {s:.6f}")
    print(f"total_generation_seconds {total:.6f}")
    print(f"generated_tokens {tokens}")
    print(f"seconds_per_token {total / tokens:.9f}")
    print(f"tokens_per_second {tokens / total:.3f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train")
    t.add_argument("--corpus", required=True)
    t.add_argument("--steps", type=int, required=True)
    t.add_argument("--workers", type=int, default=1)
    t.add_argument("--batch", type=int, default=32)
    t.add_argument("--lr", type=float, default=1.0)
    t.add_argument("--seed", type=int, default=1234)
    t.add_argument("--output-dir", default="")
    i = sub.add_parser("infer")
    i.add_argument("--corpus", required=True)
    i.add_argument("--prompt", required=True)
    i.add_argument("--max-new-tokens", required=True, help="comma-separated schedule")
    i.add_argument("--workers", type=int, default=1)
    i.add_argument("--seed", type=int, default=1234)
    a = p.parse_args()
    if a.cmd == "train":
        cmd_train(a)
    else:
        cmd_infer(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
