"""PyTorch's side of `npm run bench:lora-real` (bench/lora-real.ts): the same LoRA GRPO step on the same shapes.

A Qwen3-0.6B-shaped model read from the config.json the benchmark wrote (hidden 1024, 28 layers, 16 query and 8
key/value heads of 128 with per-head q/k RMSNorm, SwiGLU 3072, tied head, vocab 151936, RoPE theta 1e6), its base
weights frozen in fp32 (random: the values do not change the work, and torch 1.13's bf16 matmul on a CPU is not
the fast path), LoRA r 16, alpha 32 on every linear layer (peft's all-linear), and one GRPO step as the project
takes it: sample G completions of `--new` tokens for each of `--prompts` prompts of `--prompt-len` tokens (KV cache,
temperature 1, no_grad), then one AdamW update per group (one group per minibatch) over the prompt and completion
with gradient checkpointing per layer, token log-probs of the completion, the clipped GRPO loss at ratio 1, grad-norm
clip 1.0. torch 1.13 (Debian) has neither nn.RMSNorm nor scaled_dot_product_attention: both written out.

Usage: OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/lora_torch.py --model DIR
       [--steps 1 --threads 2 --prompts 4 --generations 4 --new 64 --prompt-len 20]; prints one JSON line.
"""
import argparse, json, math, resource, time, torch, torch.nn as nn, torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

ap = argparse.ArgumentParser()
ap.add_argument('--model', required=True); ap.add_argument('--steps', type=int, default=1)
ap.add_argument('--threads', type=int, default=2); ap.add_argument('--prompts', type=int, default=4)
ap.add_argument('--generations', type=int, default=4); ap.add_argument('--new', type=int, default=64)
ap.add_argument('--prompt-len', type=int, default=20)
args = ap.parse_args()
torch.set_num_threads(args.threads)
torch.manual_seed(0)
cfg = json.load(open(f'{args.model}/config.json'))
V, D, L = cfg['vocab_size'], cfg['hidden_size'], cfg['num_hidden_layers']
H, KV, HD, FF = cfg['num_attention_heads'], cfg['num_key_value_heads'], cfg['head_dim'], cfg['intermediate_size']
EPS, THETA = cfg['rms_norm_eps'], cfg.get('rope_theta', 1e6)
R, ALPHA = 16, 32


def rms(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * w


class LoraLinear(nn.Module):
    """peft's LoraLayer: a frozen base W [out, in] plus scaling * B A x, A kaiming-uniform, B zero."""
    def __init__(s, i, o):
        super().__init__()
        s.weight = nn.Parameter(torch.randn(o, i) * 0.02, requires_grad=False)
        s.A = nn.Parameter(torch.empty(R, i).uniform_(-1 / math.sqrt(i), 1 / math.sqrt(i)))
        s.B = nn.Parameter(torch.zeros(o, R))
    def forward(s, x):
        return F.linear(x, s.weight) + F.linear(F.linear(x, s.A), s.B) * (ALPHA / R)


def rope(t, cos, sin):  # t [B, h, T, hd]; cos/sin [B, 1, T, hd/2]
    h = t.shape[-1] // 2; t1, t2 = t[..., :h], t[..., h:]
    return torch.cat([t1 * cos - t2 * sin, t2 * cos + t1 * sin], -1)


class Block(nn.Module):
    def __init__(s):
        super().__init__()
        s.q, s.k, s.v, s.o = LoraLinear(D, H * HD), LoraLinear(D, KV * HD), LoraLinear(D, KV * HD), LoraLinear(H * HD, D)
        s.g, s.u, s.d = LoraLinear(D, FF), LoraLinear(D, FF), LoraLinear(FF, D)
        for n in ('n1', 'n2', 'qn', 'kn'):
            s.register_buffer(n, torch.ones(HD if n in ('qn', 'kn') else D))

    def forward(s, x, cos, sin, mask, cache=None, past=0):
        B, T, _ = x.shape
        y = rms(x, s.n1)
        q = rope(rms(s.q(y).view(B, T, H, HD), s.qn).transpose(1, 2), cos, sin)
        k = rope(rms(s.k(y).view(B, T, KV, HD), s.kn).transpose(1, 2), cos, sin)
        v = s.v(y).view(B, T, KV, HD).transpose(1, 2)
        if cache is not None:
            K, Vc = cache; K[:, :, past:past + T] = k; Vc[:, :, past:past + T] = v
            k, v = K[:, :, :past + T], Vc[:, :, :past + T]
        k, v = k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(HD) + mask, -1) @ v
        x = x + s.o(att.transpose(1, 2).reshape(B, T, H * HD))
        y = rms(x, s.n2)
        return x + s.d(F.silu(s.g(y)) * s.u(y))


class Model(nn.Module):
    def __init__(s, max_t):
        super().__init__()
        s.emb = nn.Parameter(torch.randn(V, D) * 0.02, requires_grad=False)
        s.blocks = nn.ModuleList(Block() for _ in range(L))
        s.register_buffer('nf', torch.ones(D))
        inv = 1.0 / (THETA ** (torch.arange(0, HD // 2) / (HD // 2)))
        ang = torch.arange(max_t)[:, None] * inv[None]
        s.cos, s.sin = ang.cos(), ang.sin()

    def hidden(s, ids, caches=None, past=0, remat=False):
        B, T = ids.shape
        pos = torch.arange(past, past + T)
        cos, sin = s.cos[pos][None, None], s.sin[pos][None, None]
        mask = torch.full((T, past + T), float('-inf')).triu(past + 1)[None, None]
        x = F.embedding(ids, s.emb)
        for l, b in enumerate(s.blocks):
            if remat:
                x = checkpoint(b, x, cos, sin, mask, use_reentrant=False)
            else:
                x = b(x, cos, sin, mask, None if caches is None else caches[l], past)
        return rms(x, s.nf)


P, C, G, N = args.prompt_len, args.new, args.generations, args.prompts
rows = N * G
model = Model(P + C)
lora = [p for p in model.parameters() if p.requires_grad]
opt = torch.optim.AdamW(lora, lr=1e-5, weight_decay=0.0)
prompts = torch.randint(0, V, (N, P))
sample_s, update_s = [], []
for step in range(args.steps):
    t0 = time.perf_counter()
    with torch.no_grad():
        ids = prompts.repeat_interleave(G, 0)
        caches = [(torch.zeros(rows, KV, P + C, HD), torch.zeros(rows, KV, P + C, HD)) for _ in range(L)]
        h = model.hidden(ids, caches, 0)
        out, old = [], []
        for t in range(C):
            lp = F.log_softmax(h[:, -1] @ model.emb.T, -1)
            nxt = torch.multinomial(lp.exp(), 1)
            out.append(nxt); old.append(lp.gather(-1, nxt))
            if t + 1 < C:
                h = model.hidden(nxt, caches, P + t)
        seqs = torch.cat([ids] + out, 1)
        old_lp = torch.cat(old, 1)
    t1 = time.perf_counter()
    adv = torch.randn(rows)
    for grp in range(N):
        sl = slice(grp * G, (grp + 1) * G)
        hid = model.hidden(seqs[sl], remat=True)[:, P - 1:P + C - 1]
        lp = F.log_softmax(hid @ model.emb.T, -1).gather(-1, seqs[sl, P:, None])[..., 0]
        ratio = torch.exp(lp - old_lp[sl])
        a = adv[sl, None]
        loss = -torch.min(ratio * a, ratio.clamp(0.8, 1.2) * a).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(lora, 1.0)
        opt.step()
        loss.item()
    t2 = time.perf_counter()
    sample_s.append(t1 - t0); update_s.append(t2 - t1)

print(json.dumps({
    'side': 'torch', 'torch': torch.__version__, 'sample_seconds': sample_s, 'update_seconds': update_s,
    'peak_rss_bytes': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    'trainable_parameters': sum(p.numel() for p in lora),
}))
