import sys, time, warnings, torch
sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
warnings.filterwarnings("ignore")
torch.set_num_threads(2)
from _common import boxed_chat_prompts
from grposcope.models import load_model
from grposcope.rollout.base import SamplingParams
from grposcope.rollout.hf import TransformersRollout
model, tok = load_model("embedded:smollm2-135m-instruct"); model.eval()
prompts = boxed_chat_prompts(tok)
params = SamplingParams(64, 1.0, 1.0, 0)
be = TransformersRollout(model, tok, own_loop=True); be.eos_ids = [len(tok) + 10]
be.generate(prompts, 8, params)
from torch.profiler import profile
with profile(record_shapes=True) as p:
    t=time.perf_counter(); be.generate(prompts, 8, params); print("ms/step", (time.perf_counter()-t)/64*1e3)
print(p.key_averages(group_by_input_shape=True).table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=40, max_shapes_column_width=70))
