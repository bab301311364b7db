"""The collapse forecast (docs/report.md, "Forecast"): from per-prompt pass rates, measured by `grposcope probe`
or read from a run's completions, to what a run with group size G would see, before it runs.

    counts = [(16, 5), (16, 0), (16, 16), ...]          # (k samples, c successes) per prompt
    result = forecast(counts, group_sizes=[2, 4, 8, 16], budget=64)
    result.acr[2].acr, result.costs["budgeted"][2].samples_per_informative, result.recommendation.text

Notation: N prompts; prompt j was sampled k_j times with c_j successes (reward >= success_threshold); p_j its
unknown success probability; G the group size; B prompts per step; q = 1 - ACR the chance that a group drawn
for a prompt taken at random from the N is mixed (not all equal), i.e. informative.

1. A group of G samples of prompt j collapses with P_j = p_j^G + (1 - p_j)^G (all correct + all wrong).
2. Estimate of p_j^G from the k_j samples: C(c_j, G) / C(k_j, G), the chance that G of the k_j samples drawn
   without replacement all succeed (hypergeometric); (1 - p_j)^G likewise with k_j - c_j. Both are unbiased
   for G <= k_j (each is the mean, over all G-subsets of the k samples, of "all G succeed"). Plugging in
   p_hat = c/k instead gives E[p_hat^G] >= p^G (Jensen: x^G is convex), an upward bias, largest where p_hat
   is near 0 or 1 and k is small: c = 1 of k = 16 at G = 8 gives 0.597 plug-in against 0.5. No unbiased
   estimate exists for G > k (a polynomial of degree G in p from k outcomes): there the plug-in is flagged.
3. Expected ACR at G: the mean of the P_j; its SE the std of the P_j over prompts / sqrt(N).
4. Draws (rounds of G) to a mixed group: geometric, 1 / (1 - P_j); infinite when P_j = 1 (no success or no
   failure in the k samples, or G = 1): such a prompt never gives a mixed group.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence

Counts = Sequence[tuple[int, int]]  # (k, c) per prompt

STAGNATION_ACR = 0.35  # the stagnation alarm's threshold (docs/metrics.md): the default target ACR
ALL = "all"  # --samplers' default: every registered sampler (read from the registry when needed: it imports torch)


def sampler_registry() -> Any:
    """The sampler registry, or None in an install without torch (the samplers run on torch tensors): the
    forecast then costs the samplers it has formulas for (FORMULAS) and says how to cost the others."""
    try:
        from ..sampling import SAMPLERS
    except ImportError as err:
        if getattr(err, "name", None) != "torch":
            raise
        return None
    return SAMPLERS


def all_samplers() -> list[str]:
    """Every registered sampler, in the order registered (the order the forecast's tables list them); without
    torch, the closed-form ones."""
    registry = sampler_registry()
    return list(FORMULAS) if registry is None else registry.names_in("grposcope")


def declares(sampler: str, prop: str) -> bool:
    """A registered sampler's forecast property (`closed_form`, `per_prompt`: sampling/base.py's `Sampler`);
    False for a name the registry does not know (its Monte Carlo cost then says why it could not be costed).
    Without torch, FORMULAS' own record of the closed-form samplers' (tests/test_forecast.py checks they agree)."""
    registry = sampler_registry()
    if registry is None:
        return bool(FORMULA_PROPERTIES.get(sampler, {}).get(prop, False))
    return sampler in registry and bool(getattr(registry.get(sampler), prop, False))


def closed_form_samplers() -> tuple[str, ...]:
    """The samplers costed by formula (FORMULAS), in the registry's order; the others by Monte Carlo."""
    return tuple(name for name in all_samplers() if declares(name, "closed_form"))


def per_prompt_samplers() -> tuple[str, ...]:
    """The samplers that treat each prompt on its own: their samples and informative groups per step scale with
    the prompts per step, so fewer prompts fit a smaller budget at the same cost per informative group."""
    return tuple(name for name in all_samplers() if declares(name, "per_prompt"))


def torch_note() -> str | None:
    """What a forecast without torch leaves out, or None."""
    if sampler_registry() is not None:
        return None
    return ("the samplers without a closed form (reinforce_ada, greso, knapsack, budgeted) are costed by running "
            "them, which needs torch: pip install 'grposcope[train]'")


def __getattr__(name: str) -> tuple[str, ...]:
    """CLOSED_FORM and PER_PROMPT, read from the registry when first asked for (it imports torch)."""
    if name == "CLOSED_FORM":
        return closed_form_samplers()
    if name == "PER_PROMPT":
        return per_prompt_samplers()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


MC_BATCH = 64  # prompts per Monte Carlo step for per-prompt samplers
LOOKAHEAD = 4  # the Monte Carlo data set holds at least this many batches of prompts (budgeted's candidates)
RULE = ("G: the smallest group size whose forecast ACR is <= the target, else the one with the lowest ACR "
        "(G <= budget); sampler: at that G, the one with the most informative groups per 1,000 samples among "
        "those whose expected samples per step fit the budget, each with as many prompts per step as fit "
        "(at most budget // G)")


# --------------------------------------------------------------------------- one prompt


@dataclass(frozen=True)
class Collapse:
    """P(collapse) of one group, split; `plug_in`: estimated by p_hat^G (G > k), biased upward."""

    all_correct: float
    all_wrong: float
    plug_in: bool = False

    @property
    def total(self) -> float:
        return self.all_correct + self.all_wrong


def collapse_probability(p: float, g: int) -> Collapse:
    """P(G Bernoulli(p) samples all equal) = p^G (all correct) + (1 - p)^G (all wrong)."""
    _check_group(g)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"a success probability is in [0, 1], got {p}")
    return Collapse(p**g, (1.0 - p) ** g)


def estimate_collapse(k: int, successes: int, g: int) -> Collapse:
    """The collapse probability of a group of G from c successes in k samples: C(c, G) / C(k, G) and
    C(k - c, G) / C(k, G) for G <= k (unbiased), else the plug-in (c/k)^G, (1 - c/k)^G, flagged."""
    check_counts(k, successes)
    _check_group(g)
    if g > k:
        p = successes / k
        return Collapse(p**g, (1.0 - p) ** g, plug_in=True)
    total = math.comb(k, g)  # exact integers: the ratio is exact before its rounding to a float
    return Collapse(math.comb(successes, g) / total, math.comb(k - successes, g) / total)


def expected_draws(p_collapse: float) -> float:
    """Rounds of G until a mixed group: the mean of a geometric with success chance 1 - P; inf when P = 1."""
    if p_collapse >= 1.0 - 1e-12:
        return math.inf
    return 1.0 / (1.0 - p_collapse)


def check_counts(k: Any, successes: Any) -> None:
    for name, value in (("k", k), ("successes", successes)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if k < 1:
        raise ValueError(f"k must be >= 1 (samples of the prompt), got {k}")
    if not 0 <= successes <= k:
        raise ValueError(f"successes must be in [0, k={k}], got {successes}")


def _check_group(g: Any) -> None:
    if isinstance(g, bool) or not isinstance(g, int) or g < 1:
        raise ValueError(f"a group size G must be an int >= 1, got {g!r}")


# --------------------------------------------------------------------------- over prompts


@dataclass(frozen=True)
class AcrForecast:
    """What a run at group size G would see, over the probed prompts."""

    g: int
    prompts: int
    acr: float  # expected ACR: mean P_j
    acr_se: float  # std of the P_j over prompts / sqrt(N); nan for one prompt
    all_correct: float
    all_wrong: float
    plug_in_prompts: int  # prompts with k < G, estimated by the (upward-biased) plug-in
    draws_mean: float  # mean of 1 / (1 - P_j) over the prompts that can give a mixed group; inf if none can
    never_mixed: int  # prompts with P_j = 1: they never give a mixed group


def forecast_acr(counts: Counts, g: int) -> AcrForecast:
    """Expected ACR at G, its SE over prompts, the split, and the draws to a mixed group."""
    if not counts:
        raise ValueError("no prompts to forecast from")
    per_prompt = [estimate_collapse(k, c, g) for k, c in counts]  # (N,)
    totals = [e.total for e in per_prompt]
    n = len(totals)
    mean = math.fsum(totals) / n
    se = math.sqrt(math.fsum((t - mean) ** 2 for t in totals) / (n - 1) / n) if n > 1 else math.nan
    draws = [expected_draws(t) for t in totals]
    finite = [d for d in draws if math.isfinite(d)]
    return AcrForecast(
        g, n, mean, se,
        math.fsum(e.all_correct for e in per_prompt) / n, math.fsum(e.all_wrong for e in per_prompt) / n,
        sum(e.plug_in for e in per_prompt),
        math.fsum(finite) / len(finite) if finite else math.inf, n - len(finite),
    )


# --------------------------------------------------------------------------- sampler cost


@dataclass(frozen=True)
class SamplerCost:
    """A sampler's expected spending per step at G, B prompts per step, and what it buys."""

    sampler: str
    g: int
    prompts_per_step: int  # B
    samples_per_step: float  # expected samples generated per step
    informative_per_step: float  # expected informative (mixed) groups kept per step
    method: str  # "closed form" or "Monte Carlo"
    se: float = math.nan  # Monte Carlo standard error of samples_per_informative
    note: str = ""  # why it could not be costed, when it could not

    @property
    def samples_per_informative(self) -> float:
        if self.note:  # not costed
            return math.nan
        return self.samples_per_step / self.informative_per_step if self.informative_per_step > 0 else math.inf

    @property
    def informative_per_1k(self) -> float:
        if not self.samples_per_step > 0:
            return math.nan
        return 1000.0 * self.informative_per_step / self.samples_per_step

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "samples_per_informative": self.samples_per_informative,
                "informative_per_1k": self.informative_per_1k}


def fixed_cost(acr: float, g: int, b: int) -> SamplerCost:
    """fixed: B groups of G per step, a share 1 - ACR of them mixed: G / (1 - ACR) samples per informative."""
    return SamplerCost("fixed", g, b, float(b * g), b * (1.0 - acr), "closed form")


def dynamic_cost(acr: float, g: int, b: int, max_gen_batches: int | None = None) -> SamplerCost:
    """dynamic (DAPO dynamic sampling, sampling/dynamic.py): batches of B fresh prompts, G samples each,
    until B mixed groups are kept or `max_gen_batches` (M) batches were drawn; mixed groups beyond B are not
    trained on. Each group is mixed with chance q = 1 - ACR, independently (prompts drawn at random):

        E[batches] = 1 + sum_{i=1}^{M-1} P(Bin(i B, q) < B)     (batch i+1 is drawn iff i batches kept < B)
        E[kept]    = E[min(B, Bin(M B, q))]                      (an early stop kept B, and so would M batches)

    samples per informative group = G B E[batches] / E[kept]. M defaults to the sampler's own default.
    """
    m = _default("dynamic", "max_gen_batches") if max_gen_batches is None else max_gen_batches
    q = min(max(1.0 - acr, 0.0), 1.0)
    batches = 1.0 + math.fsum(math.fsum(binomial_pmf(i * b, q)[:b]) for i in range(1, m))
    pmf = binomial_pmf(m * b, q)  # (M B + 1,)
    kept = math.fsum(min(b, x) * px for x, px in enumerate(pmf))
    return SamplerCost("dynamic", g, b, g * b * batches, kept, "closed form")


def closed_form_cost(sampler: str, acr: float, g: int, b: int) -> SamplerCost:
    """The cost of a sampler that declares `closed_form`, by its formula in FORMULAS."""
    if sampler not in FORMULAS:
        raise ValueError(f"sampler {sampler!r} declares closed_form, and the forecast has no formula for it: "
                         f"add one to grposcope.reports.forecast.FORMULAS (known: {', '.join(FORMULAS)}), or "
                         "leave closed_form False to be costed by Monte Carlo")
    return FORMULAS[sampler](acr, g, b)


def binomial_pmf(n: int, q: float) -> list[float]:
    """P(Bin(n, q) = x) for x = 0..n, in logs (no overflow for large n).  -> (n + 1,)"""
    if q <= 0.0 or q >= 1.0:
        hit = 0 if q <= 0.0 else n
        return [1.0 if x == hit else 0.0 for x in range(n + 1)]
    lq, lr, lfn = math.log(q), math.log1p(-q), math.lgamma(n + 1)
    return [math.exp(lfn - math.lgamma(x + 1) - math.lgamma(n - x + 1) + x * lq + (n - x) * lr)
            for x in range(n + 1)]


def _default(sampler: str, keyword: str) -> Any:
    """A registered sampler's default for one of its options: one source, the sampler's signature (without
    torch, FORMULA_PROPERTIES' record of it)."""
    registry = sampler_registry()
    if registry is None:
        return FORMULA_PROPERTIES[sampler][keyword]
    return inspect.signature(registry.get(sampler)).parameters[keyword].default


# The formulas of the samplers that declare `closed_form` (sampler name -> cost(acr, g, b)).
FORMULAS: dict[str, Callable[[float, int, int], SamplerCost]] = {"fixed": fixed_cost, "dynamic": dynamic_cost}
# their `closed_form`, `per_prompt` and the defaults the formulas read, as their classes declare them, for an
# install without torch (tests/test_forecast.py checks that the two agree)
FORMULA_PROPERTIES: dict[str, dict[str, Any]] = {"fixed": {"closed_form": True, "per_prompt": True},
                                                 "dynamic": {"closed_form": True, "per_prompt": False,
                                                             "max_gen_batches": 3}}


# --------------------------------------------------------------------------- Monte Carlo


class MeasuredDraw:
    """`draw(prompts, n)` for the samplers, replaying the probe: n <= k samples of prompt j are n of its k
    measured outcomes drawn without replacement (so a group sees exactly the collapse chance the table
    forecasts); n > k samples are Bernoulli(c/k) (the plug-in: biased toward collapse). Prompts are ints;
    prompt i is probed prompt i mod N (the Monte Carlo data set repeats the probe to hold enough prompts)."""

    def __init__(self, counts: Counts, generator: Any) -> None:
        import torch

        self.k = torch.tensor([k for k, _ in counts])  # (N,)
        self.c = torch.tensor([c for _, c in counts])  # (N,)
        self.generator = generator

    def __call__(self, prompts: list[int], n: int) -> Any:
        import torch

        from ..sampling import ScoredDraw

        idx = torch.tensor(prompts, dtype=torch.long) % len(self.k)  # (M,)
        k, c = self.k[idx], self.c[idx]  # (M,)
        rewards = (torch.rand(len(idx), n, generator=self.generator)
                   < (c / k).unsqueeze(1)).float()  # (M, n) Bernoulli(p_hat)
        replay = (n <= k).nonzero().flatten()  # rows drawn without replacement
        if len(replay):
            width = int(k[replay].max())
            noise = torch.rand(len(replay), width, generator=self.generator)  # (R, K)
            noise[torch.arange(width).unsqueeze(0) >= k[replay].unsqueeze(1)] = 2.0  # past k: sorts last
            chosen = noise.argsort(dim=1)[:, :n]  # (R, n) a random n-subset of range(k)
            rewards[replay] = (chosen < c[replay].unsqueeze(1)).float()  # outcomes 0..c-1 are the successes
        return ScoredDraw(rewards, torch.ones_like(rewards))


def monte_carlo_cost(sampler: str, counts: Counts, g: int, b: int, groups: int = 1000, seed: int = 0,
                     options: dict[str, Any] | None = None) -> SamplerCost:
    """Runs the registered sampler (default options unless given) for ceil(groups / B) steps of B prompts
    on `MeasuredDraw`, and counts samples generated and informative groups kept.

    The data set is the probe repeated to at least LOOKAHEAD x B prompts, in a seeded order reshuffled every
    epoch, as a run streams them. A sampler with memory (budgeted) reaches its steady state for pass rates
    that stay as probed; a real policy moves. The SE is the ratio estimator's, over steps (delta method).
    A sampler that cannot run at this G (e.g. reinforce_ada with round_size x max_rounds < G) gets a note.
    """
    import torch

    from ..sampling import SAMPLERS, informative
    from ..sampling.stream import PromptStream

    try:
        instance = SAMPLERS.make(sampler, **{"seed": seed, **(options or {})})
    except ValueError as err:
        return SamplerCost(sampler, g, b, math.nan, math.nan, "Monte Carlo", note=str(err))
    # A sampler that treats each prompt on its own costs the same per prompt in any batch: run it on large
    # batches (fewer, cheaper steps: the time goes into per-step overhead) and scale back to B.
    batch = max(b, MC_BATCH) if declares(sampler, "per_prompt") else b
    repeats = max(1, math.ceil(LOOKAHEAD * batch / len(counts)))
    stream = PromptStream(range(repeats * len(counts)), seed)
    draw = MeasuredDraw(counts, torch.Generator().manual_seed(seed))
    spent, kept = [], []  # (steps,) samples generated and informative groups kept per step
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tensors of a few hundred numbers: more threads only spin (sim/run.py measured)
    try:
        for _ in range(max(1, math.ceil(groups / batch))):
            selection = instance.sample(stream.take(batch), draw, stream.take, g)
            spent.append(selection.samples_generated * b / batch)
            kept.append(float(informative(selection.rewards).sum()) * b / batch if selection.rewards.numel() else 0.0)
    except ValueError as err:  # e.g. reinforce_ada: round_size x max_rounds < G
        return SamplerCost(sampler, g, b, math.nan, math.nan, "Monte Carlo", note=str(err))
    finally:
        torch.set_num_threads(threads)
    return _ratio_cost(sampler, g, b, spent, kept)


def _ratio_cost(sampler: str, g: int, b: int, spent: list[float], kept: list[float]) -> SamplerCost:
    """Means per step, and the SE of R = sum(spent) / sum(kept): sqrt(var(s - R i) / T) / mean(i)."""
    t = len(spent)
    s, i = math.fsum(spent) / t, math.fsum(kept) / t
    se = math.nan
    if i > 0 and t > 1:
        r = s / i
        var = math.fsum((a - r * bb) ** 2 for a, bb in zip(spent, kept)) / (t - 1)
        se = math.sqrt(var / t) / i
    return SamplerCost(sampler, g, b, s, i, "Monte Carlo", se)


# --------------------------------------------------------------------------- the recommendation


@dataclass(frozen=True)
class Recommendation:
    g: int
    cost: SamplerCost  # the chosen sampler at the prompts per step that fit
    acr: float
    met_target: bool  # False: no G reached the target; the G with the lowest ACR was taken
    fits: dict[str, SamplerCost | None]  # every sampler at the prompts per step that fit (None: none fit)
    text: str


def fit_budget(cost: SamplerCost, budget: int, acr: float) -> SamplerCost | None:
    """The sampler at the most prompts per step (<= its B) whose expected samples per step fit the budget;
    None when not even one prompt does. A `per_prompt` sampler (fixed, reinforce_ada) scales with B; another
    `closed_form` one (dynamic) is recomputed at each smaller B; the others (budgeted) spend at most B x G by
    construction."""
    if not math.isfinite(cost.samples_per_step):
        return None
    if cost.samples_per_step <= budget + 1e-9:
        return cost
    if declares(cost.sampler, "per_prompt"):
        per_prompt = cost.samples_per_step / cost.prompts_per_step
        b = min(cost.prompts_per_step, int(budget // per_prompt))
        scale = b / cost.prompts_per_step
        return SamplerCost(cost.sampler, cost.g, b, cost.samples_per_step * scale,
                           cost.informative_per_step * scale, cost.method, cost.se) if b >= 1 else None
    if declares(cost.sampler, "closed_form"):
        for b in range(cost.prompts_per_step - 1, 0, -1):
            smaller = closed_form_cost(cost.sampler, acr, cost.g, b)
            if smaller.samples_per_step <= budget + 1e-9:
                return smaller
    return None


def recommend(acr: dict[int, AcrForecast], costs: dict[str, dict[int, SamplerCost]], budget: int,
              target_acr: float = STAGNATION_ACR) -> Recommendation | None:
    """RULE, applied; None when no G fits the budget or no sampler fits at the chosen G."""
    sizes = sorted(g for g in acr if g <= budget)
    if not sizes:
        return None
    reached = [g for g in sizes if acr[g].acr <= target_acr]
    g = reached[0] if reached else min(sizes, key=lambda s: (acr[s].acr, s))
    fits = {name: fit_budget(by_g[g], budget, acr[g].acr) for name, by_g in costs.items() if g in by_g}
    ranked = [c for c in fits.values() if c is not None and c.informative_per_step > 0]
    if not ranked:
        return None
    best = max(ranked, key=lambda c: c.informative_per_1k)  # max keeps the first of equals: the list's order
    why = (f"forecast ACR {acr[g].acr:.3f} <= target {target_acr:g}" if reached else
           f"no group size reaches the target ACR {target_acr:g}; this one has the lowest, {acr[g].acr:.3f}")
    text = (f"G = {g}, sampler {best.sampler} with {best.prompts_per_step} prompts per step "
            f"({best.samples_per_step:.0f} samples per step expected, budget {budget}): "
            f"{best.informative_per_1k:.1f} informative groups per 1,000 samples; {why}")
    return Recommendation(g, best, acr[g].acr, bool(reached), fits, text)


# --------------------------------------------------------------------------- everything


@dataclass
class Forecast:
    counts: list[tuple[int, int]]
    budget: int
    target_acr: float
    acr: dict[int, AcrForecast]  # by G
    costs: dict[str, dict[int, SamplerCost]]  # sampler -> G -> cost at B = max(1, budget // G)
    recommendation: Recommendation | None
    mc_groups: int
    seed: int
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        rec = self.recommendation
        return {
            "prompts": len(self.counts), "budget": self.budget, "target_acr": self.target_acr,
            "mc_groups": self.mc_groups, "seed": self.seed, "rule": RULE,
            "pass_rates": [c / k for k, c in self.counts],
            "group_sizes": [asdict(a) for a in self.acr.values()],
            "samplers": {name: [c.to_dict() for c in by_g.values()] for name, by_g in self.costs.items()},
            "recommendation": None if rec is None else {
                **rec.cost.to_dict(), "acr": rec.acr, "met_target": rec.met_target, "text": rec.text},
            "notes": self.notes,
        }


def forecast(counts: Counts, group_sizes: Sequence[int], budget: int, samplers: Sequence[str] | None = None,
             target_acr: float = STAGNATION_ACR, mc_groups: int = 1000, seed: int = 0) -> Forecast:
    """The ACR forecast and every sampler's cost (`samplers`, by default every registered one) for each G
    (B = max(1, budget // G) prompts per step), and the recommendation. Closed forms for the samplers that
    declare `closed_form` (fixed and dynamic), Monte Carlo for the others."""
    samplers = all_samplers() if samplers is None else samplers
    counts = [(int(k), int(c)) for k, c in counts]
    for k, c in counts:
        check_counts(k, c)
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1:
        raise ValueError(f"the budget is samples per step, an int >= 1, got {budget!r}")
    sizes = sorted(set(group_sizes))
    acr = {g: forecast_acr(counts, g) for g in sizes}
    costs: dict[str, dict[int, SamplerCost]] = {name: {} for name in samplers}
    for g in sizes:
        b = max(1, budget // g)
        for name in samplers:
            costs[name][g] = (closed_form_cost(name, acr[g].acr, g, b) if declares(name, "closed_form") else
                              monte_carlo_cost(name, counts, g, b, mc_groups, seed))
    result = Forecast(counts, budget, target_acr, acr, costs, recommend(acr, costs, budget, target_acr),
                      mc_groups, seed)
    result.notes = forecast_notes(result)
    return result


def forecast_notes(result: Forecast) -> list[str]:
    """What the reader should know about these numbers."""
    notes = []
    k_min = min(k for k, _ in result.counts)
    flagged = [f"G={a.g} ({a.plug_in_prompts})" for a in result.acr.values() if a.plug_in_prompts]
    if flagged:
        notes.append(f"plug-in estimate p_hat^G for prompts with fewer samples than G (biased toward collapse): "
                     f"{', '.join(flagged)}; probe with a larger k (smallest k here: {k_min})")
    over = [g for g in result.acr if g > result.budget]
    if over:
        notes.append(f"G = {', '.join(map(str, over))} exceed the budget of {result.budget} samples per step: "
                     "costed at 1 prompt per step, never recommended")
    if (missing := torch_note()) is not None:
        notes.append(missing)
    mc = [name for name in result.costs if not declares(name, "closed_form")]
    if mc:
        notes.append(f"{', '.join(mc)}: Monte Carlo over {result.mc_groups} groups per G (seed {result.seed}) "
                     "with each prompt's measured outcomes; +- is its standard error")
    for name, by_g in result.costs.items():
        for cost in by_g.values():
            if cost.note:
                notes.append(f"{name} at G={cost.g}: {cost.note}")
    return notes


def record_counts(record: Any) -> tuple[int, int]:
    """(k, successes) of one probe record; a ValueError says what is wrong with it."""
    if not isinstance(record, dict) or "k" not in record or "successes" not in record:
        raise ValueError("no pass rate (keys 'k' and 'successes'); make the file with grposcope probe")
    check_counts(record["k"], record["successes"])
    return record["k"], record["successes"]
