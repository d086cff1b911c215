"""PyTorch on the same GPU: the peer of `npm run bench:gpu` (bench/gpu.bench.ts), which runs it between its own rounds.

The model and the SFT step are bench/torch_model.py's (the sizes bench/lib/models.ts states for both sides). fp32
eager, TF32 off. Sampling: transformers' `generate` on a LlamaForCausalLM of the same sizes. LoRA (peft, r and
lora_alpha as asked, every linear layer, no dropout, fp32 adapters with B drawn normal(0, bStd)): the step is
torch_model.lora_sft_step (the model in bf16, frozen); the rollout is `generate` on the LlamaForCausalLM in bf16
with its embedding tied as ours, plain sampling at temperature 1 (top_k 0, as ours: no truncation).

Usage: python3 bench/torch_gpu.py (needs torch with CUDA; transformers for the sampling tasks, peft for LoRA's)
Prints one JSON line when ready ({"torch", "device"} or {"absent": why}), then answers each JSON line on stdin:
  {"task": "matmul", "n": N, "reps": R, "dtype": "f32"|"f16"} -> {"ms": per product} (f16: cuBLAS's half GEMM)
  {"task": "step", "row": [V, d, L, h, ff, B, T], "steps": S}   -> {"ms": per step, "loss": last}
  {"task": "sample", "row": [V, d, L, h, ff], "rows": B, "prompt": P, "new": N} -> {"ms": per run}
  {"task": "lora_step", "row": [V, d, L, h, ff, B, T], "r": R, "alpha": A, "bStd": S, "steps": N}
                                                             -> {"ms": per step, "loss": last}
  {"task": "lora_sample", "row": [V, d, L, h, ff], "rows": B, "prompt": P, "new": N, "r": R, "alpha": A, "bStd": S}
                                                             -> {"ms": per run}
A task the peer cannot run (no transformers or peft, out of memory) is answered {"absent": why}.
"""
import contextlib, json, sys, time

out = sys.stdout  # answers only: anything a library prints goes to stderr

try:
    with contextlib.redirect_stdout(sys.stderr):
        import torch
        import torch_model  # beside this file: python puts the script's folder first on sys.path
    if not torch.cuda.is_available(): raise RuntimeError('torch has no CUDA device')
    torch.backends.cuda.matmul.allow_tf32 = False; torch.backends.cudnn.allow_tf32 = False
    print(json.dumps({'torch': torch.__version__, 'device': torch.cuda.get_device_name()}), file=out, flush=True)
except Exception as e:  # no torch, no CUDA: the benchmark says so and goes on without its peer
    print(json.dumps({'absent': f'{type(e).__name__}: {e}'}), file=out, flush=True); sys.exit(0)

dev = 'cuda'
models = {}


def timed(f, reps):
    torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(reps): out = f()
    torch.cuda.synchronize(); return (time.perf_counter() - t0) / reps * 1e3, out


def matmul(q):
    n, dtype = q['n'], {'f32': torch.float32, 'f16': torch.float16}[q.get('dtype', 'f32')]
    key = ('mm', n, dtype)
    if key not in models:
        models[key] = (torch.randn(n, n, device=dev, dtype=dtype), torch.randn(n, n, device=dev, dtype=dtype))
        for _ in range(3): models[key][0] @ models[key][1]
    a, b = models[key]
    ms, _ = timed(lambda: a @ b, q.get('reps', 10))
    return {'ms': ms}


def step(q):
    key = ('step', tuple(q['row']))
    if key not in models:
        run = torch_model.sft_step(q['row'], dev)
        for _ in range(3): run()
        models[key] = run
    ms, loss = timed(models[key], q.get('steps', 2))
    return {'ms': ms, 'loss': loss.item()}


def sample(q):
    from transformers import LlamaConfig, LlamaForCausalLM
    V, d, L, h, ff = q['row']; key = ('sample', tuple(q['row']))
    if key not in models:
        cfg = LlamaConfig(vocab_size=V, hidden_size=d, intermediate_size=ff, num_hidden_layers=L, num_attention_heads=h,
                          num_key_value_heads=h, max_position_embeddings=q['prompt'] + q['new'] + 8)
        models[key] = LlamaForCausalLM(cfg).to(dev).eval()
    m = models[key]; ids = torch.randint(3, V - 1, (q['rows'], q['prompt']), device=dev)
    with torch.no_grad():
        m.generate(ids, max_new_tokens=4, do_sample=True, pad_token_id=0)
        ms, out = timed(lambda: m.generate(ids, max_new_tokens=q['new'], min_new_tokens=q['new'], do_sample=True,
                                           pad_token_id=0), 1)
    return {'ms': ms, 'tokens': (out.shape[1] - q['prompt']) * q['rows']}


def lora_step(q):
    key = ('lora_step', tuple(q['row']), q['r'], q['alpha'])
    if key not in models:
        run = torch_model.lora_sft_step(q['row'], dev, q['r'], q['alpha'], q['bStd'])
        for _ in range(3): run()
        models[key] = run
    ms, loss = timed(models[key], q.get('steps', 2))
    return {'ms': ms, 'loss': loss.item()}


HF_LINEAR = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj']


def lora_sample(q):
    from transformers import LlamaConfig, LlamaForCausalLM
    V, d, L, h, ff = q['row']; key = ('lora_sample', tuple(q['row']), q['r'], q['alpha'])
    if key not in models:
        torch.manual_seed(0)
        cfg = LlamaConfig(vocab_size=V, hidden_size=d, intermediate_size=ff, num_hidden_layers=L, num_attention_heads=h,
                          num_key_value_heads=h, max_position_embeddings=q['prompt'] + q['new'] + 8,
                          rms_norm_eps=1e-6, tie_word_embeddings=True)
        base = LlamaForCausalLM(cfg).to(device=dev, dtype=torch.bfloat16).eval()
        models[key] = torch_model.with_lora(base, q['r'], q['alpha'], q['bStd'], HF_LINEAR, task_type='CAUSAL_LM')[0]
    m = models[key]; ids = torch.randint(3, V - 1, (q['rows'], q['prompt']), device=dev)
    run = dict(do_sample=True, top_k=0, top_p=1.0, temperature=1.0, pad_token_id=0)
    with torch.no_grad():
        m.generate(input_ids=ids, max_new_tokens=4, **run)
        ms, out = timed(lambda: m.generate(input_ids=ids, max_new_tokens=q['new'], min_new_tokens=q['new'], **run), 1)
    return {'ms': ms, 'tokens': (out.shape[1] - q['prompt']) * q['rows']}


TASKS = {'matmul': matmul, 'step': step, 'sample': sample, 'lora_step': lora_step, 'lora_sample': lora_sample}

for line in sys.stdin:
    q = json.loads(line)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            answer = TASKS[q['task']](q)
    except Exception as e:  # one task the peer cannot run (no transformers or peft, out of memory) ends no other
        answer = {'absent': f'{type(e).__name__}: {e}'}
    print(json.dumps(answer), file=out, flush=True)
