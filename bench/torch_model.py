"""The model and the SFT step that `npm run bench:gpu`'s PyTorch peer (bench/torch_gpu.py) times.

The same model as bench/lib/models.ts builds for our side: token embedding; L blocks of RMSNorm (eps 1e-6), causal
multi-head attention with rotary embeddings (base 10,000, the two halves of each head rotated), a residual, RMSNorm,
a SwiGLU MLP, a residual; a final RMSNorm and the embedding again as the LM head (tied). No biases. fp32, eager: what
a user would run. The step: forward, cross-entropy on the second half of each row of random tokens, backward, AdamW
(lr 1e-4). torch.nn.RMSNorm and scaled_dot_product_attention where the installed torch has them (2.4 and 2.0 on),
else the same formulas written out, so the file also runs on an older CPU torch (checked there, timed on a GPU).

The LoRA step (bench/lib/lora-gpu.ts's peer): the same model with every weight in bf16 and frozen, peft's LoRA on
every linear layer (q, k, v, o, gate, up, down: the LM head is the tied embedding) with fp32 adapters, B drawn
normal as the benchmark's side draws it (peft starts it at zero), and the same step on the adapters only, with
the gradient clipped at norm 1 as ours (AdamW lr 1e-4, weight decay 0.01 on both sides).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class _RmsNorm(nn.Module):
    """torch.nn.RMSNorm's formula, for a torch older than 2.4."""

    def __init__(self, d, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rms_norm(d, eps=1e-6):
    return nn.RMSNorm(d, eps=eps) if hasattr(nn, 'RMSNorm') else _RmsNorm(d, eps)


def causal_attention(q, k, v):
    """softmax(q k^T / sqrt(D) + causal mask) v over [B, H, T, D]; the fused kernel where torch has one."""
    if hasattr(F, 'scaled_dot_product_attention'):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    t = q.shape[-2]
    future = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    scores = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
    return scores.masked_fill(future, float('-inf')).softmax(-1) @ v


def rotate(x, cos, sin):
    """Rotary embedding on the two halves of the last axis: (x1 c - x2 s, x2 c + x1 s), as src/ops/rope.ts."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


class Block(nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads = heads
        self.attn_norm, self.mlp_norm = rms_norm(d), rms_norm(d)
        self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        self.gate, self.up = nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False)
        self.down = nn.Linear(ff, d, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        y = self.attn_norm(x)
        q, k, v = (proj(y).view(b, t, self.heads, d // self.heads).transpose(1, 2) for proj in (self.q, self.k, self.v))
        att = causal_attention(rotate(q, cos, sin), rotate(k, cos, sin), v)
        x = x + self.o(att.transpose(1, 2).reshape(b, t, d))
        y = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


class Model(nn.Module):
    """Vocabulary V, width d, L blocks of `heads` heads and MLP width ff, positions up to T."""

    def __init__(self, V, d, L, heads, ff, T, device):
        super().__init__()
        self.embed = nn.Embedding(V, d)
        self.blocks = nn.ModuleList(Block(d, heads, ff) for _ in range(L))
        self.final_norm = rms_norm(d)
        half = d // heads // 2
        inverse = 1.0 / (10000.0 ** (torch.arange(half, device=device) / half))
        angles = torch.arange(T, device=device)[:, None] * inverse[None]
        self.cos, self.sin = angles.cos(), angles.sin()

    def forward(self, ids):
        x = self.embed(ids)
        t = ids.shape[1]
        for block in self.blocks:
            x = block(x, self.cos[:t], self.sin[:t])
        return self.final_norm(x) @ self.embed.weight.T


def sft_step(row, device, seed=0):
    """One SFT step's closure at row = [V, d, L, heads, ff, B, T] (bench/lib/models.ts's sizes): random tokens, the
    loss on the second half of each row; calling it runs forward, backward and AdamW and returns the loss."""
    V, d, L, heads, ff, B, T = row
    torch.manual_seed(seed)
    model = Model(V, d, L, heads, ff, T, device).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(1, V - 1, (B, T), device=device)
    mask = torch.zeros(B, T - 1, device=device)
    mask[:, T // 2 - 1:] = 1

    def step():
        lp = F.log_softmax(model(ids[:, :-1]), -1)
        loss = -(lp.gather(-1, ids[:, 1:, None])[..., 0] * mask).sum() / mask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return step


# Block's linear layers by name: peft's target_modules for "every linear layer".
LINEAR_MODULES = ['q', 'k', 'v', 'o', 'gate', 'up', 'down']


def with_lora(model, r, alpha, b_std, targets, **config):
    """peft's LoRA (r, lora_alpha, no dropout) on `targets` of `model`, whose own weights peft freezes; the adapters
    in fp32 whatever the base's dtype (peft casts them to it in versions before 0.12), B drawn normal(0, b_std).
    Returns the wrapped model and its trainable tensors. Raises ImportError without peft (the peer says absent)."""
    import peft
    model = peft.get_peft_model(
        model, peft.LoraConfig(r=r, lora_alpha=alpha, target_modules=targets, lora_dropout=0.0, **config))
    adapters = []
    with torch.no_grad():
        for name, p in model.named_parameters():
            if not p.requires_grad: continue
            p.data = p.data.float()
            if 'lora_B' in name: p.normal_(0, b_std)
            adapters.append(p)
    return model, adapters


def lora_sft_step(row, device, r, alpha, b_std, seed=0, dtype=torch.bfloat16):
    """sft_step's closure with the model in `dtype`, frozen, and peft's LoRA on every linear layer: calling it runs
    forward, backward into the adapters, clipping and AdamW on them, and returns the loss."""
    V, d, L, heads, ff, B, T = row
    torch.manual_seed(seed)
    base = Model(V, d, L, heads, ff, T, device).to(device=device, dtype=dtype)
    base.cos, base.sin = base.cos.to(dtype), base.sin.to(dtype)  # plain attributes: .to() leaves them fp32
    model, adapters = with_lora(base, r, alpha, b_std, LINEAR_MODULES)
    opt = torch.optim.AdamW(adapters, lr=1e-4)
    ids = torch.randint(1, V - 1, (B, T), device=device)
    mask = torch.zeros(B, T - 1, device=device)
    mask[:, T // 2 - 1:] = 1

    def step():
        lp = F.log_softmax(model(ids[:, :-1]).float(), -1)
        loss = -(lp.gather(-1, ids[:, 1:, None])[..., 0] * mask).sum() / mask.sum()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(adapters, 1.0)
        opt.step()
        return loss

    return step
