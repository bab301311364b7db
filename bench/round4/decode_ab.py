import sys, time, statistics, warnings, torch
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")
torch.set_num_threads(2)
from _common import boxed_chat_prompts
from grposcope.models import load_model
from grposcope.rollout.base import SamplingParams
import grposcope.rollout.decode as dec
from grposcope.rollout.hf import TransformersRollout
model, tok = load_model("embedded:smollm2-135m-instruct"); model.eval()
prompts = boxed_chat_prompts(tok)
forced = "--forced" in sys.argv
params = SamplingParams(64, 1.0, 1.0, 0)
be = TransformersRollout(model, tok, own_loop=True)
if forced: be.eos_ids = [len(tok) + 10]
res = {}; outs = {}
for rep in range(7):
    for m in ("before", "after"):
        dec.WEIGHT_MAJOR_ROWS = 10**9 if m == "before" else 16
        torch.manual_seed(rep)
        t = time.perf_counter(); out = be.generate(prompts, 8, params); s = time.perf_counter() - t
        if rep: res.setdefault(m, []).append(s / out.completion_ids.shape[1] * 1e3)
        outs[(m, rep)] = out
for m, v in res.items(): print(m, round(statistics.median(v),1), [round(x,1) for x in v])
for rep in range(7):
    a, b = outs[("before", rep)], outs[("after", rep)]
    print(rep, a.completion_ids.shape, torch.equal(a.completion_ids, b.completion_ids), torch.equal(a.sampling_logp, b.sampling_logp))
