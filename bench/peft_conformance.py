"""peft's side of `npm run bench:peft` (bench/peft-conformance.ts): load the run's adapter and merged model with peft
and transformers, and compare their logits with the project's.

Usage: python3 bench/peft_conformance.py ROOT   (ROOT holds base/, run/adapter, run/model, ours.f32, ours.json)
Prints one JSON line and exits 1 if a comparison fails.
"""
import json, sys

import numpy as np
import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM

TOL = 1e-4
root = sys.argv[1]
meta = json.load(open(f'{root}/ours.json'))
ours = torch.from_numpy(np.fromfile(f'{root}/ours.f32', dtype=np.float32).reshape(meta['shape']))
ids = torch.tensor(meta['ids'], dtype=torch.long)


def logits(model):
    model.eval()
    with torch.no_grad():
        return model(input_ids=ids).logits.float()


base = AutoModelForCausalLM.from_pretrained(f'{root}/base', torch_dtype=torch.float32)
base_logits = logits(base)
adapted = PeftModel.from_pretrained(base, f'{root}/run/adapter')
adapted_logits = logits(adapted)
merged = AutoModelForCausalLM.from_pretrained(f'{root}/run/model', torch_dtype=torch.float32)
merged_logits = logits(merged)

scale = adapted_logits.abs().max().item()
report = {
    'peft': __import__('peft').__version__,
    'transformers': __import__('transformers').__version__,
    'torch': torch.__version__,
    'rows': ids.shape[0],
    'tokens_per_row': ids.shape[1],
    'max_abs_logit': scale,
    'ours_vs_peft_adapted': (ours - adapted_logits).abs().max().item(),
    'merged_vs_peft_adapted': (merged_logits - adapted_logits).abs().max().item(),
    'peft_adapted_vs_base': (adapted_logits - base_logits).abs().max().item(),
    'tolerance': TOL,
}
ok = (
    report['ours_vs_peft_adapted'] <= TOL
    and report['merged_vs_peft_adapted'] <= TOL
    # The adapters must matter: otherwise agreeing with peft would not show that peft applied them as we do.
    and report['peft_adapted_vs_base'] >= 100 * TOL
)
report['ok'] = ok
print(json.dumps(report))
sys.exit(0 if ok else 1)
