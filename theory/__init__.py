"""ZeroLock theory: executable versions of the paper's Section II-B/II-C results.

The paper trains each pipeline chunk ``k`` on a local loss over its readout
distribution ``p_k``::

    L_k(p) = alpha * L_task(p) + (1 - alpha) * D_psi(p, sg(p_{k-1})),   alpha in (0, 1].

This package states each theoretical ingredient as a function, proves the
algebraic identities with SymPy, and *always* re-checks them numerically
(SymPy's ``simplify`` cannot be trusted to find every zero). One concept per
module:

* :mod:`theory.simplex`       -- validation and helpers for the probability simplex.
* :mod:`theory.bregman`       -- Bregman divergences; negative entropy -> KL.
* :mod:`theory.three_point`   -- the three-point identity (Eq. 9) and false variants.
* :mod:`theory.task_loss`     -- Eq. (4): why the sign must be ``+``; argument order.
* :mod:`theory.optimize`      -- generic minimisation over the simplex (SciPy).
* :mod:`theory.lemma1`        -- Lemma 1 / Eq. (7): local optimum = one prox step.
* :mod:`theory.lemma2`        -- Eq. (15) geometric target vs. arithmetic / reverse targets.
* :mod:`theory.proposition1`  -- Eq. (11): chunk-wise bound, empirical beta.
* :mod:`theory.theorem1`      -- Eq. (23): step-size schedule and rate fitting.
* :mod:`theory.readouts`      -- Eq. (11) on the real chunk readouts of an engine model.
* :mod:`theory.surrogate`     -- Lemma 3 / Theorem 1 on a real run: the surrogate R^t,
  its gradient norm along plain SGD with eta_t = eta_0 / sqrt(t + gamma).

(``readouts`` and ``surrogate`` import torch and the engine lazily, inside the
functions that need them.)

Headline findings (details in the module docstrings):

* Lemma 1 holds exactly, with no rescaling of alpha: ``alpha * D(p, p_y) +
  (1 - alpha) * D(p, p_{k-1}) = alpha * [Eq. 7 objective] + alpha * D(p_{k-1}, p_y)``
  -- provided the task term is ``+D(p, p_y)`` (prediction first).
* Eq. (4)'s minus sign is a typo; and ``D(p, p_y)`` (used by the proofs) is
  not cross-entropy, ``D(p_y, p)`` is.
* Eq. (11) holds for every alpha whenever beta is valid on the trajectory;
  ``alpha < 1/beta`` only makes it a descent guarantee.
* With the proofs' loss ``L = KL(p || p_y)`` (smoothed label) ``beta = 1``
  exactly and the slack of Eq. (11) is ``sum_k KL(p_{k-1}||p_y) -
  Renyi_{1-alpha}(p_{k-1}||p_y)``: tight as alpha -> 0, independent of how well
  the chunks are trained. With the engine's cross-entropy the bound is
  vacuous on real readouts (beta in the hundreds, delta_k huge).
"""

from .bregman import (
    IdentityCheck,
    NegentropyKLProof,
    bregman_numeric,
    check_identity,
    check_numerically,
    generalised_kl_symbolic,
    gradient,
    kl,
    kl_symbolic,
    negative_entropy,
    negative_entropy_grad_numeric,
    negative_entropy_numeric,
    prove_negentropy_is_kl,
    prove_squared_norm_is_distance,
    simplify_to_zero,
    squared_norm,
    squared_norm_grad_numeric,
    squared_norm_numeric,
    undefined_potential,
)
from .lemma1 import (
    effective_step_size,
    local_loss,
    local_loss_prox_gap,
    local_minimiser_numeric,
    prove_kkt_stationarity,
    prove_local_loss_is_scaled_prox,
    prove_prox_closed_form_kkt,
    prox_objective,
    prox_step_closed_form,
    prox_step_numeric,
    task_gradient,
)
from .lemma2 import (
    arithmetic_target,
    forward_objective,
    geometric_identity_residual,
    geometric_objective,
    geometric_target,
    prove_reverse_stationarity,
    prove_two_point_target,
    reverse_objective,
    reverse_stationarity_residual,
    reverse_target_numeric,
)
from .optimize import minimize_on_simplex
from .proposition1 import (
    LOSS_KINDS,
    Prop1Instance,
    Prop1Result,
    bregman_step_slack,
    eq13_residual,
    estimate_beta,
    global_loss,
    global_loss_grad,
    log_prox_step,
    loss_bregman,
    proposition1_bound,
    random_instance,
    renyi_divergence,
)
from .simplex import as_simplex, check_alpha, label_smooth, one_hot, random_simplex, softmax
from .task_loss import cross_entropy, entropy, printed_loss_minimiser, printed_task_loss
from .theorem1 import fit_rate_exponent, lr_schedule, rhs_rate, running_average
from .three_point import VARIANTS, prove_three_point, three_point_numeric, three_point_residual

# NOTE: the symbolic ``bregman(psi, u, v)`` and ``task_loss(p, p_y, order)``
# share their module's name, so they are deliberately NOT re-exported here
# (that would shadow the submodules ``theory.bregman`` / ``theory.task_loss``).
# Import them as ``from theory.bregman import bregman`` and
# ``from theory.task_loss import task_loss``.
from . import (  # noqa: E402
    bregman,
    lemma1,
    lemma2,
    optimize,
    proposition1,
    readouts,
    simplex,
    surrogate,
    task_loss,
    theorem1,
    three_point,
)

__all__ = sorted(
    name for name, obj in list(globals().items())
    if not name.startswith("_") and name != "annotations"
)
