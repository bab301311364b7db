"""Why a compiled model's logits differ from eager ones: rounding, measured against float64.

Round 1 compiled the embedded model with inductor and saw its logits move by up to 4e-5 from eager's. This
takes the parts a decoder layer is made of (its RMSNorm, its MLP, the whole first layer) and the last norm
with the LM head, runs each eager and compiled (inductor, the same float32 inputs: hidden states of a real
prompt), and compares both with the same part run in float64 on the same inputs. If the compiled part is as
close to float64 as eager's is, its difference from eager is a different order of float32 operations (fused
reductions, vectorised loops), not an error of either. Nothing else needs to be idle: it measures no time.

    .venv/bin/python bench/compile_numerics.py
"""

from __future__ import annotations

import copy
import warnings

import torch
from _common import boxed_chat_prompts

ROTARY: list = []


def main() -> None:
    warnings.filterwarnings("ignore")
    from grposcope.models import load_model

    model, tok = load_model("embedded:smollm2-135m-instruct")
    model.eval()
    enc = tok(boxed_chat_prompts(tok), return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        out = model(**enc, output_hidden_states=True)
    hidden = out.hidden_states[1]  # (2, P, 576): the first layer's output, a real input for the parts below
    layer = model.model.layers[1]
    positions = torch.arange(hidden.shape[1]).unsqueeze(0).expand(hidden.shape[0], -1)
    ROTARY.append(model.model.rotary_emb(hidden, positions))  # (cos, sin), for the layer's attention

    def head(x):
        return model.lm_head(model.model.norm(x))

    parts = {
        "RMSNorm": (layer.input_layernorm, lambda m, x: m(x)),
        "MLP": (layer.mlp, lambda m, x: m(x)),
        "decoder layer (attention and MLP)": (layer, _layer_call),
    }
    print("| part | largest abs value | max abs difference, compiled - eager | eager - float64 | "
          "compiled - float64 |")
    print("|---|---|---|---|---|")
    with torch.no_grad():
        for name, (module, call) in parts.items():
            compiled = torch.compile(module)
            eager_out = call(module, hidden)
            compiled_out = call(compiled, hidden)
            reference = call(copy.deepcopy(module).double(), hidden.double())
            _row(name, eager_out, compiled_out, reference)
        compiled_head = torch.compile(head)
        head64 = copy.deepcopy(model).double()
        _row("final norm and LM head (the logits)", head(out.hidden_states[-2]), compiled_head(out.hidden_states[-2]),
             head64.lm_head(head64.model.norm(out.hidden_states[-2].double())))


def _cast(pair, dtype):
    return tuple(t.to(dtype) for t in pair)


def _layer_call(module, x):
    out = module(x, position_embeddings=_cast(ROTARY[0], x.dtype))
    return out[0] if isinstance(out, tuple) else out


def _row(name, eager, compiled, reference) -> None:
    def gap(a, b):
        return (a.double() - b.double()).abs().max().item()

    print(f"| {name} | {reference.abs().max().item():.3g} | {gap(compiled, eager):.2e} | {gap(eager, reference):.2e} | "
          f"{gap(compiled, reference):.2e} |")


if __name__ == "__main__":
    main()
