"""The KKT conditions of the max-margin problem, read out of a trained classifier (docs/methods/mmb.md).

For a classifier Phi(theta; x) trained on (x_i, y_i), i = 1..N, with margins
q_i = Phi_{y_i}(x_i) - max_{j != y_i} Phi_j(x_i), gradient descent on cross-entropy converges in
direction to a KKT point of the max-margin problem (Lyu and Li 2020 for homogeneous nets; Kunin et
al. 2023, the asymmetric max-margin problem, for quasi-homogeneous ones). With
theta~ = exp(-alpha Lambda) theta and alpha = log min_i q_i (so the smallest training margin under
theta~ is 1), the conditions used here are, block by block,

    c_k theta~_k = sum_i lambda_i grad_{theta_k} q_i(theta~)    (stationarity)
    q_i(theta~) >= 1                                             (primal feasibility)
    lambda_i >= 0                                                (dual feasibility)
    lambda_i (q_i(theta~) - 1) = 0                               (complementary slackness)

with c_k = 1 on the parameter tensors of largest Lambda and 0 elsewhere ("max-block", the limit
of the quasi-homogeneous theory), or c_k = (Lambda_k / Lambda_max) exp(-2 alpha (Lambda_max -
Lambda_k)) ("flow", the same condition before the limit). For a bias-free net both give c = 1.

The sum over the unknown training set is estimated with generated points:
sum_i lambda_i grad q_i ~ (N / B) sum_b lambda_b grad q_b. Yu and Wang (2023) turn the conditions
into two losses for the generator, which :meth:`KKTTarget.stationarity` and :func:`duality_loss`
implement: the stationarity loss (the first condition) and the U-shaped duality loss (the other
three).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch.func import functional_call, grad, vmap

from genzoo import GenzooError

from .classifier import MMBClassifier, margins
from .homogeneity import estimate_lambda, max_block, scale_parameters

Stationarity = Literal["max-block", "flow"]


class KKTTarget:
    """One trained classifier as the generator sees it: rescaled weights, Lambda, N and the KKT losses."""

    def __init__(self, classifier: MMBClassifier, *, stationarity: Stationarity = "max-block", train_size: int = 0,
                 lambda_inputs: int = 64, seed: int = 0):
        margin = float(classifier.margin)
        if not math.isfinite(margin) or margin <= 0:
            raise GenzooError(
                f"the classifier's recorded training margin is {margin:g}: it does not separate its training set; "
                f"train it longer (genzoo fit mmb-classifier --steps ...) until its accuracy is 1"
            )
        self.classifier = classifier.eval().requires_grad_(False)
        self.lam = estimate_lambda(classifier.net, classifier.image_shape, inputs=lambda_inputs, seed=seed)
        self.alpha = math.log(margin)
        params = {name: p.detach() for name, p in classifier.net.named_parameters()}
        self.names = list(params)
        self.params = scale_parameters(params, self.lam, -self.alpha)  # theta~: smallest margin 1
        self.block = max_block(self.lam)
        top = max(self.lam.values())
        if stationarity == "max-block":
            self.coef = {n: 1.0 if n in self.block else 0.0 for n in self.names}
        else:
            self.coef = {n: self.lam[n] / top * math.exp(-2 * self.alpha * (top - self.lam[n])) for n in self.names}
        self.goal = {n: self.coef[n] * self.params[n] for n in self.names}  # c_k theta~_k
        self.goal_sq = float(sum(g.double().pow(2).sum() for g in self.goal.values()))
        self.train_size = int(train_size or classifier.train_size)
        block_sq = float(sum(self.params[n].double().pow(2).sum() for n in self.block))
        # Euler with stationarity: ||theta~||^2 = L sum_i lambda_i on the margin, so mean lambda = ||theta~||^2 / (L N)
        self.unit = top * block_sq / self.train_size

    def to(self, device: torch.device | str) -> "KKTTarget":
        self.classifier.to(device)
        self.params = {n: p.to(device) for n, p in self.params.items()}
        self.goal = {n: g.to(device) for n, g in self.goal.items()}
        return self

    @property
    def device(self) -> torch.device:
        return self.classifier.mean.device

    def logits(self, x: torch.Tensor, params: dict[str, torch.Tensor] | None = None, slope: float = 0.0) -> torch.Tensor:
        """Phi(theta~; x) for images x in [0, 1]."""
        net = self.classifier.net
        return functional_call(net, params or self.params, (x - self.classifier.mean,), {"slope": slope})

    def margins(self, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """q(theta~; x, y): 1 on the training set's margin points, > 1 on the others."""
        return margins(self.logits(x), labels)

    def stationarity(self, x: torch.Tensor, labels: torch.Tensor, lam: torch.Tensor,
                     slope: float = 0.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(relative stationarity residual, margins q(theta~; x, y), multiplier scale s), differentiable in x and lam.

        Yu and Wang's stationarity loss: the stationarity condition's residual, relative to its left
        side. With v = (N / B) sum_b lam_b grad q_b, the residual is taken after the best global scale s >= 0
        of the multipliers: min_s sum_k ||c_k theta~_k - s v_k||^2 / sum_k ||c_k theta~_k||^2. At a KKT
        point s = 1 (Euler: <theta~, grad q> = q / Lambda_max on the margin), so nothing changes there;
        away from it, the loss cannot be lowered by shrinking every multiplier together, which would
        drive a ReLU multiplier net to 0 everywhere, where it never recovers. (A fixed s = 1 fitted
        worse on MNIST: docs/methods/mmb.md.)
        """
        leaves = {n: p.detach().requires_grad_() for n, p in self.params.items()}
        q = margins(self.logits(x, leaves, slope), labels)
        # sum_b lam_b grad q_b = grad (sum_b lam_b q_b): one backward, kept in the graph (double backprop)
        g = torch.autograd.grad((lam * q).sum(), list(leaves.values()), create_graph=True)
        scale = self.train_size / x.shape[0]  # the N / B estimator of the sum over the training set
        v = [scale * gk for gk in g]
        dot = sum((self.goal[n] * vk).sum() for n, vk in zip(self.names, v))
        vv = sum(vk.pow(2).sum() for vk in v)
        s = (dot / vv.clamp_min(1e-30)).clamp_min(0)
        residual = sum((self.goal[n] - s * vk).pow(2).sum() for n, vk in zip(self.names, v))
        return residual / self.goal_sq, q, s


def relu_multipliers(pre: torch.Tensor) -> torch.Tensor:
    """lambda_b / unit = relu(1 + a_b - mean_b a): a ReLU output whose batch mean pre-activation is 1.

    The global scale of the multipliers is fitted in ``stationarity`` (c); only their ratios are
    learnt. Centring keeps at least one multiplier of every batch positive, so the ReLU cannot die
    as a whole (with a plain ReLU output, one large Adam step on a coherent batch of images can
    push every pre-activation below 0, and a dead ReLU gets no gradient to come back), while
    single points can still get exactly lambda = 0, as KKT allows off the margin.
    """
    return torch.relu(1 + pre - pre.mean())


def duality_loss(q: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
    """Yu and Wang's U-shaped duality loss: relu(1 - q)^2 (primal feasibility) + w (q - 1)^2
    (complementary slackness), w = lambda / mean lambda (dual feasibility is lambda's ReLU).

    Zero exactly when the KKT conditions hold; a point with lambda > 0 is pulled onto the margin
    q = 1 from both sides, more steeply from the infeasible side q < 1. The multiplier enters as a
    weight only (detached): slackness moves the point, and lambda is set by stationarity alone;
    otherwise lambda -> 0 is the cheapest way to satisfy slackness, and once a ReLU output is 0
    it never recovers.
    """
    w = lam.detach() / lam.detach().mean().clamp_min(1e-30)
    return (torch.relu(1 - q).pow(2) + w * (q - 1).pow(2)).mean()


def box_penalty(x: torch.Tensor) -> torch.Tensor:
    """Haim et al.'s prior loss: sum_pixels relu(-x)^2 + relu(x - 1)^2 per image, mean over the batch,
    which keeps free pixels in [0, 1]."""
    return (torch.relu(-x).pow(2) + torch.relu(x - 1).pow(2)).flatten(1).sum(1).mean()



# -- checking the theory on the true training set --------------------------------------------------


@dataclass
class MultiplierFit:
    """Non-negative multipliers fitted to the stationarity condition over the true training set.

    One multiplier per (image i, competing class j != y_i): the multiclass max-margin problem has a
    constraint Phi_{y_i}(x_i) - Phi_j(x_i) >= 1 for every pair, and at a point where two competitors
    tie, both gradients enter (the Clarke gradient of q_i = min_j of them).
    """

    multipliers: torch.Tensor  # lambda_ij >= 0, shape N x C (0 in the column of the true label)
    relative_residual: float  # ||c theta~ - sum_ij lambda_ij grad q_ij|| / ||c theta~||
    margins: torch.Tensor  # q_i(theta~)

    @property
    def support(self) -> torch.Tensor:
        """Which training points carry a positive multiplier (the margin points)."""
        lam = self.multipliers.sum(1)
        return lam > 1e-6 * float(lam.max().clamp_min(1e-300))


def pair_gradients(target: KKTTarget, x: torch.Tensor, labels: torch.Tensor, others: torch.Tensor) -> torch.Tensor:
    """grad_{theta~} (Phi_y - Phi_j)(theta~; x), flattened over all parameter tensors: one row per triple."""

    classes = target.classifier.num_classes
    signs = torch.nn.functional.one_hot(labels, classes) - torch.nn.functional.one_hot(others, classes)

    def q_one(params: dict[str, torch.Tensor], xi: torch.Tensor, si: torch.Tensor) -> torch.Tensor:
        return (target.logits(xi[None], params)[0] * si).sum()

    grads = vmap(grad(q_one), in_dims=(None, 0, 0))(target.params, x, signs.to(x.dtype))
    return torch.cat([grads[n].flatten(1) for n in target.names], 1)


@torch.no_grad()
def fit_multipliers(target: KKTTarget, x: torch.Tensor, labels: torch.Tensor, *, active: float | None = None,
                    max_floats: int = 2**25) -> MultiplierFit:
    """min_{lambda >= 0} ||c theta~ - sum_ij lambda_ij grad q_ij|| by NNLS, in the Gram form.

    ``active``: if given, complementary slackness is imposed: only pairs with margin
    q_ij(theta~) <= 1 + active may carry a multiplier. Without it the fit may use any pair; for a
    ReLU net the gradients of points in one activation region are linear in x, so the fit can
    trade a margin point for points further out in the same region and the support is not unique.
    The Jacobian (one row of P numbers per pair) is built in chunks of at most ``max_floats``
    numbers, so memory stays bounded for wide classifiers; only the Gram matrix is kept.
    """
    from scipy.optimize import nnls

    n, classes = x.shape[0], target.classifier.num_classes
    logits = target.logits(x)
    pair_margins = logits.gather(1, labels[:, None]) - logits
    limit = math.inf if active is None else 1 + active
    rows = torch.tensor([(i, j) for i in range(n) for j in range(classes)
                         if j != labels[i] and pair_margins[i, j] <= limit], dtype=torch.long).reshape(-1, 2)
    if not len(rows):
        raise GenzooError(f"no training pair has a margin within {active} of 1; the classifier's margin record is stale")
    xs, ys, js = x[rows[:, 0]], labels[rows[:, 0]], rows[:, 1].to(labels.device)
    b = torch.cat([target.goal[k].flatten() for k in target.names]).double().cpu()
    m = len(rows)
    size = max(1, min(m, max_floats // b.numel()))
    spans = [(s, min(m, s + size)) for s in range(0, m, size)]
    gram = torch.zeros(m, m, dtype=torch.float64)
    jb = torch.zeros(m, dtype=torch.float64)
    with torch.enable_grad():
        for i, (a0, a1) in enumerate(spans):
            ja = pair_gradients(target, xs[a0:a1], ys[a0:a1], js[a0:a1]).double().cpu()
            jb[a0:a1] = ja @ b
            gram[a0:a1, a0:a1] = ja @ ja.T
            for c0, c1 in spans[i + 1:]:
                jc = pair_gradients(target, xs[c0:c1], ys[c0:c1], js[c0:c1]).double().cpu()
                gram[a0:a1, c0:c1] = ja @ jc.T
                gram[c0:c1, a0:a1] = gram[a0:a1, c0:c1].T
    # ||J lam - b||^2 = ||R lam - t||^2 + const with G = R^T R (R = S^1/2 V^T), t = S^-1/2 V^T J^T b
    s, v = torch.linalg.eigh(gram)
    keep = s > s.max() * 1e-12
    r = s[keep].sqrt()[:, None] * v[:, keep].T
    t = (v[:, keep].T @ jb) / s[keep].sqrt()
    lam = torch.from_numpy(nnls(r.numpy(), t.numpy(), maxiter=50 * m)[0])
    b_sq = float(b @ b)
    res_sq = b_sq - 2 * float(lam @ jb) + float(lam @ gram @ lam)
    multipliers = torch.zeros(n, classes, dtype=torch.float64)
    multipliers[rows[:, 0], rows[:, 1]] = lam
    return MultiplierFit(multipliers, math.sqrt(max(res_sq, 0.0) / b_sq), target.margins(x, labels).cpu())
