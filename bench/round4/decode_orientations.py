import sys, time, statistics, warnings, torch, contextlib
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")
torch.set_num_threads(2)
from _common import boxed_chat_prompts
from grposcope.models import load_model
from grposcope.rollout.base import SamplingParams
import grposcope.rollout.hf as hf
import grposcope.rollout.decode as dec
from grposcope.rollout.hf import TransformersRollout
model, tok = load_model("embedded:smollm2-135m-instruct"); model.eval()
prompts = boxed_chat_prompts(tok)
params = SamplingParams(64, 1.0, 1.0, 0)
be = TransformersRollout(model, tok, own_loop=True); be.eos_ids = [len(tok) + 10]
mode = {"m": "orig"}
def wm(lin, contig):
    W = lin.weight
    def f(x):
        flat = x.reshape(-1, x.shape[-1])
        y = torch.mm(W, flat.T).T
        if contig: y = y.contiguous()
        return y.view(*x.shape[:-1], W.shape[0])
    return f
orig_decode = dec.decode
def decode(model, *a, **k):
    if mode["m"] == "orig": return orig_decode(model, *a, **k)
    lins = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m.bias is None]
    for m in lins: m.forward = wm(m, mode["m"] == "contig")
    try: return orig_decode(model, *a, **k)
    finally:
        for m in lins: del m.forward
hf.decode = decode
res = {}; outs = {}
modes = ("orig", "view", "contig")
for rep in range(6):
    for m in modes:
        mode["m"] = m; torch.manual_seed(rep)
        t = time.perf_counter(); out = be.generate(prompts, 8, params); s = time.perf_counter() - t
        if rep: res.setdefault(m, []).append(s / 64 * 1e3)
        outs[(m, rep)] = (out.completion_ids, out.sampling_logp)
for m, v in res.items(): print(m, round(statistics.median(v),1), [round(x,1) for x in v])
for rep in range(6):
    for m in modes[1:]:
        a, b = outs[("orig", rep)], outs[(m, rep)]
        print(rep, m, torch.equal(a[0], b[0]), torch.equal(a[1], b[1]), (a[1]-b[1]).abs().max().item())
