"""PyTorch on the CPU: the peer of `npm run bench:cpu` (bench/cpu.bench.ts), which runs it between its own rounds.

The same model and step semantics as the project's: Llama layout (RMSNorm eps 1e-6, rotate-half RoPE theta 1e4,
causal MHA, SwiGLU, tied head, no biases); the SFT step as sftLoss (all T tokens through the model, the C completion
positions through the LM head, log_softmax + gather, completion mask, sum / count, key-padding bias -1e9), AdamW lr
1e-4 wd 0.01 with grad-norm clip 1.0, loss read back each step; KV-cache sampling at temperature 1. torch 1.13
(Debian) has neither nn.RMSNorm nor scaled_dot_product_attention: both written out (HF Llama's eager path).

Install (Debian): apt-get install -y python3-torch libopenblas0-pthread (without OpenBLAS torch uses the reference
BLAS, 20-30x slower); run with /usr/bin/python3. On a shared 2-core machine set OMP_WAIT_POLICY=PASSIVE (libgomp's
spin-wait collapses otherwise); the benchmark does.
Usage: python3 bench/torch_cpu.py step|sample|matmul --threads N [--size default|small --batch B --setup FILE
       --new TOKENS --n N --reps R]; prints one JSON line.
"""
import argparse, json, math, os, time, torch, torch.nn as nn, torch.nn.functional as F

ap = argparse.ArgumentParser()
ap.add_argument('what'); ap.add_argument('--threads', type=int, default=2)
ap.add_argument('--size', default='default'); ap.add_argument('--batch', type=int, default=0)
ap.add_argument('--warmup', type=int, default=2); ap.add_argument('--steps', type=int, default=3)
ap.add_argument('--new', type=int, default=64); ap.add_argument('--reps', type=int, default=2)
ap.add_argument('--n', type=int, default=512)
ap.add_argument('--setup', default='')  # JSON written by bench/cpu.bench.ts: the default batch or the sampling set-up
args = ap.parse_args()
torch.set_num_threads(args.threads)
dev = 'cpu'
PAD_BIAS = -1e9


class RMSNorm(nn.Module):
    def __init__(s, d, eps=1e-6):
        super().__init__(); s.weight = nn.Parameter(torch.ones(d)); s.eps = eps
    def forward(s, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + s.eps) * s.weight


def rope(t, cos, sin):  # t [B, H, T, hd]; cos/sin [B, 1, T, hd/2]
    hd = t.shape[-1]; t1, t2 = t[..., : hd // 2], t[..., hd // 2:]
    return torch.cat([t1 * cos - t2 * sin, t2 * cos + t1 * sin], -1)


class Block(nn.Module):
    def __init__(s, d, h, ff):
        super().__init__(); s.h = h
        s.n1 = RMSNorm(d); s.n2 = RMSNorm(d)
        s.q = nn.Linear(d, d, bias=False); s.k = nn.Linear(d, d, bias=False); s.v = nn.Linear(d, d, bias=False); s.o = nn.Linear(d, d, bias=False)
        s.g = nn.Linear(d, ff, bias=False); s.u = nn.Linear(d, ff, bias=False); s.dn = nn.Linear(ff, d, bias=False)

    def forward(s, x, cos, sin, mask, cache=None, past=0):
        """mask: additive [B, 1, Tq, Tk_visible]; cache: (K, V) preallocated [B, H, cap, hd], written in place."""
        B, T, D = x.shape; hd = D // s.h
        y = s.n1(x)
        q, k, v = (m(y).view(B, T, s.h, hd).transpose(1, 2) for m in (s.q, s.k, s.v))
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        if cache is not None:
            K, V = cache; K[:, :, past:past + T] = k; V[:, :, past:past + T] = v
            k, v = K[:, :, : past + T], V[:, :, : past + T]
        att = torch.softmax(q @ k.transpose(-1, -2) * (1.0 / math.sqrt(hd)) + mask, -1) @ v
        x = x + s.o(att.transpose(1, 2).reshape(B, T, D))
        y = s.n2(x)
        return x + s.dn(F.silu(s.g(y)) * s.u(y))


class Model(nn.Module):
    def __init__(s, V, d, L, h, ff, maxT):
        super().__init__(); s.h = h
        s.emb = nn.Embedding(V, d); s.blocks = nn.ModuleList(Block(d, h, ff) for _ in range(L)); s.nf = RMSNorm(d)
        for n_, p in s.named_parameters():
            if p.dim() == 2: nn.init.normal_(p, std=0.02 / (math.sqrt(2 * L) if n_.endswith(('o.weight', 'dn.weight')) else 1))
        hd = d // h; inv = 1.0 / (1e4 ** (torch.arange(0, hd // 2) / (hd // 2)))
        ang = torch.arange(maxT)[:, None] * inv[None]
        s.cos, s.sin = ang.cos(), ang.sin()

    def hidden(s, ids, positions, key_bias, caches=None, past=0):
        B, T = ids.shape
        cos, sin = s.cos[positions][:, None], s.sin[positions][:, None]  # [B, 1, T, hd/2]
        tk = past + T
        causal = torch.full((T, tk), float('-inf')).triu(past + 1)  # query i sees keys <= past + i
        mask = causal[None, None] + key_bias[:, None, None, :tk]
        x = s.emb(ids)
        for l, b in enumerate(s.blocks):
            x = b(x, cos, sin, mask, None if caches is None else caches[l], past)
        return s.nf(x)

    def head(s, h):
        return h @ s.emb.weight.T


def sizes():
    return {'default': (24, 64, 2, 4, 192, 48, 64, 13), 'small': (256, 256, 4, 8, 768, 128, 32, 128)}


def step_bench():
    V, d, L, h, ff, maxT, B, T = sizes()[args.size]
    if args.batch: B = args.batch
    torch.manual_seed(0)
    if args.size == 'default':  # the project's exact warm-start batch (dumped by step.ts --dump)
        dj = json.load(open(args.setup))
        B, P, C = dj['B'], dj['P'], dj['C']; T = P + C
        ids = torch.tensor(dj['tokens']).view(B, T); am = torch.tensor(dj['attentionMask']).view(B, T)
        cm = torch.tensor(dj['completionMask'], dtype=torch.float32).view(B, C)
    else:
        P = T // 2; C = T - P
        ids = torch.randint(3, V, (B, T)); am = torch.ones(B, T, dtype=torch.long); cm = torch.ones(B, C)
    key_bias = (1 - am).float() * PAD_BIAS
    positions = torch.arange(T)[None].expand(B, T)
    m = Model(V, d, L, h, ff, maxT); opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.01)
    targets = ids[:, P:]; count = max(1.0, cm.sum().item())
    def step():
        hid = m.hidden(ids, positions, key_bias)[:, P - 1: P - 1 + C]
        lp = F.log_softmax(m.head(hid), -1).gather(-1, targets[..., None])[..., 0]
        loss = -(lp * cm).sum() / count
        opt.zero_grad(set_to_none=True); loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0); opt.step()
        return loss.item()
    for _ in range(args.warmup): step()
    times, cpu = [], []
    for _ in range(args.steps):
        t0 = time.perf_counter(); c0 = time.process_time(); l = step()
        times.append((time.perf_counter() - t0) * 1e3); cpu.append((time.process_time() - c0) * 1e3)
    print(json.dumps({'tag': f'torch-{args.threads}T', 'size': args.size, 'shape': f'd{d} L{L} H{h} ff{ff} V{V} B{B} T{T} P{P} C{C}',
                      'loss': l, 'times': times, 'cpuMs': cpu}))


def sample_bench():
    dj = json.load(open(args.setup)); c = dj['config']
    V, d, L, h, ff, maxT = c['vocabSize'], c['dModel'], c['nLayers'], c['nHeads'], c['dFf'], c['maxSeqLen']
    G = 8; prompts = [p for p in dj['prompts'] for _ in range(G)]; B = len(prompts); P = max(len(p) for p in prompts)
    pads = [P - len(p) for p in prompts]
    torch.manual_seed(0); m = Model(V, d, L, h, ff, maxT).eval(); hd = d // h
    def run(max_new, seed):
        gen = torch.Generator().manual_seed(seed)
        width = P + max_new
        ids = torch.full((B, P), dj['pad']); bias = torch.zeros(B, width)
        for r, p in enumerate(prompts): ids[r, pads[r]:] = torch.tensor(p); bias[r, :pads[r]] = PAD_BIAS
        pos = torch.tensor([[max(0, j - pads[r]) for j in range(width)] for r in range(B)])
        caches = [(torch.zeros(B, h, width, hd), torch.zeros(B, h, width, hd)) for _ in range(L)]
        out = torch.empty(B, max_new, dtype=torch.long); lps = torch.empty(B, max_new)
        with torch.inference_mode():
            hid = m.hidden(ids, pos[:, :P], bias, caches, 0)[:, -1]
            for s in range(max_new):
                lp = F.log_softmax(m.head(hid), -1)  # temperature 1
                tok = torch.multinomial(lp.exp(), 1, generator=gen)
                out[:, s] = tok[:, 0]; lps[:, s] = lp.gather(-1, tok)[:, 0]
                if s == max_new - 1: break
                col = P + s
                hid = m.hidden(tok, pos[:, col:col + 1], bias, caches, col)[:, -1]
        return out
    run(4, 0)
    times, cpu = [], []
    for r in range(args.reps):
        t0 = time.perf_counter(); c0 = time.process_time(); run(args.new, 3 + r)
        times.append((time.perf_counter() - t0) * 1e3); cpu.append((time.process_time() - c0) * 1e3)
    print(json.dumps({'tag': f'torch-{args.threads}T', 'rows': B, 'maxNew': args.new, 'times': times, 'cpuMs': cpu,
                      'tokPerS': [B * args.new / (t / 1e3) for t in times]}))


def matmul_bench():
    n = args.n; torch.manual_seed(1); a = torch.randn(n, n); b = torch.randn(n, n)
    ref = (a.double() @ b.double()); assert torch.allclose((a @ b).double(), ref, atol=1e-2)
    for _ in range(3): a @ b
    times, cpu = [], []
    for _ in range(args.reps):
        t0 = time.perf_counter(); c0 = time.process_time(); a @ b
        times.append((time.perf_counter() - t0) * 1e3); cpu.append((time.process_time() - c0) * 1e3)
    print(json.dumps({'tag': f'torch-{args.threads}T', 'n': n, 'times': times, 'cpuMs': cpu,
                      'gflops': [2 * n ** 3 / (t * 1e6) for t in times]}))


{'step': step_bench, 'sample': sample_bench, 'matmul': matmul_bench}[args.what]()
